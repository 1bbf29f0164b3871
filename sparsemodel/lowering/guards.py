"""Guards of a lowered problem: objectives unbounded below (a direction found before solving, or
the iterates running away), a start inside the loss's domain and a start the constraint set admits.
Functions of the data (:class:`~sparsemodel.lowering.data.LoweredData`); solvers call them as
methods of :class:`~sparsemodel.lowering.lowered.LoweredProblem`.
"""

from __future__ import annotations

import numpy as np

from ..errors import UnboundedError
from .constants import hessian_diagonal, mean_curvature
from .data import LoweredData

DOMAIN_TRIALS = (1.0, -1.0, 0.1, -0.1, 10.0, -10.0, 0.01, -0.01, 100.0, -100.0, 1e-3, -1e-3, 1e3, -1e3)
RAMP_TRIALS = (1.0, 10.0, 0.1, 100.0)  # half-widths of an increasing ramp over the free coordinates


def unbounded_direction(lp: LoweredData) -> str | None:
    """Why f is unbounded below on the feasible set, when a linear part makes it so: a
    coordinate that the constraint lets move (a free one, or any constrained one when the
    bound allows at least one) along which f is linear with a nonzero slope. None otherwise
    (a restricted solve that runs away is caught at run time)."""
    d = lp.design
    if d is None or lp.side or not d.lin.any():  # (no linear part: nothing to look for)
        return None
    s = lp.set
    key = None if s is None else (s.free.tobytes(), s.coords.tobytes(), s.k >= 1)
    cache = lp.guard_cache  # (the verdict reads the design and the set's units only: once per lowering)
    if key not in cache:
        cache[key] = _unbounded_direction(lp)
    return cache[key]


def _unbounded_direction(lp: LoweredData) -> str | None:
    d = lp.design
    flat = (d.lin != 0) & ~d.curved_coordinates()
    if not flat.any():
        return None
    feasible = np.ones(lp.n, dtype=bool)
    if lp.set is not None:
        feasible[:] = False
        feasible[lp.set.free] = True
        if lp.set.k >= 1:
            feasible[lp.set.coords] = True
    hit = np.flatnonzero(flat & feasible)
    if hit.size == 0:
        return None
    j = int(hit[0])
    var, idx = lp.layout.locate(j)
    return (
        f"the objective is linear along {var}{idx} (slope {d.lin[j]:.4g}) and no other term of it reads "
        f"{var}{idx}, so it decreases without bound as {var}{idx} moves{' up' if d.lin[j] < 0 else ' down'}; "
        f"{len(hit)} coordinate(s) are like this"
    )


def runs_away(lp: LoweredData, x: np.ndarray, d: np.ndarray) -> bool:
    """Whether f decreases without bound along the ray x + t d (a recession direction): f at
    t = 1e4 and 1e8 (in units of max(1, |x|) / |d|) falls ever further below f(x), by more
    than any scale of the problem. Used when a minimization fails to converge."""
    nd = float(np.linalg.norm(d))
    if not nd > 0:
        return False
    f0 = lp.oracle.peek(x)
    unit = max(1.0, float(np.linalg.norm(x))) / nd
    f1, f2 = (lp.oracle.peek(x + t * unit * d) for t in (1e4, 1e8))
    if not (np.isfinite(f0) and np.isfinite(f1)):
        return False
    big = 1e3 * (1.0 + abs(f0))
    return bool(f1 < f0 - big and (f2 == -np.inf or (np.isfinite(f2) and f2 < f1 - big)))


def raise_unbounded(lp: LoweredData, dim: int, x: np.ndarray, f: float | None) -> None:
    raise UnboundedError(
        f"the restricted problem on {dim} coordinates has no minimizer: the objective decreases without bound "
        f"along a direction its iterates follow (|x| = {float(np.linalg.norm(x)):.3g}, "
        f"f = {f if f is not None else lp.oracle.peek(x):.4g}), so it is unbounded below on the feasible set",
        hint="add a term with curvature (for example a ridge term lam * sum_squares(w)) or check the signs",
    )


def inside_domain(lp: LoweredData, x: np.ndarray | None = None) -> np.ndarray:
    """A point where the objective is finite: ``x`` (default the zero point) when it is one;
    otherwise ``x`` with its free coordinates (an intercept, a diagonal, other variables) moved
    to a common value c in +-1, +-0.1, +-10, ... (all together, then one at a time, then an
    increasing ramp -c..c over them, the order ordinal's cut-points need), so that a loss such
    as -log(X w + b), -logdet(O) or ordinal(X @ w, theta, y) is evaluated inside its domain. The constrained
    coordinates are left as they are (zero for a start). Returns ``x`` unchanged when no such
    point is found (the solvers then report the infinite objective)."""
    x = lp.zeros() if x is None else np.asarray(x, dtype=float)
    if np.isfinite(lp.oracle.peek(x)):
        return x
    free = getattr(lp.set, "free", None) if lp.set is not None else None
    F = np.arange(lp.n) if free is None else free
    if len(F) == 0:
        return x
    for c in DOMAIN_TRIALS:
        y = x.copy()
        y[F] = c
        if np.isfinite(lp.oracle.peek(y)):
            return y
    if len(F) <= 16:
        for c in DOMAIN_TRIALS:
            for j in F:
                y = x.copy()
                y[j] = c
                if np.isfinite(lp.oracle.peek(y)):
                    return y
    if len(F) > 1:  # increasing values (the order the cut-points of ordinal(...) need)
        for c in RAMP_TRIALS:
            y = x.copy()
            y[F] = c * np.linspace(-1.0, 1.0, len(F))
            if np.isfinite(lp.oracle.peek(y)):
                return y
    return x


def feasible_start(lp: LoweredData, x: np.ndarray) -> np.ndarray:
    """A start the constraint set admits: x itself, or (under ``sum(w) == 1``, which excludes
    the zero start) the set's start from the gradient and the Hessian's diagonal at x
    (``start_point``: the minimizer of the diagonal Newton model under the constraints, made
    k-sparse), with the step 1 / mean diag of the Hessian where the diagonal is not known."""
    s = lp.set
    if s is None or s.admits(x):
        return x
    _, g = lp.value_and_grad(x)
    try:
        M = float(mean_curvature(lp, x=x))
    except Exception:  # noqa: BLE001 - any failure of the estimate: the unit step
        M = 1.0
    step = 1.0 / M if np.isfinite(M) and M > 0 else 1.0
    try:
        h = hessian_diagonal(lp, x)
    except Exception:  # noqa: BLE001 - the diagonal is an aid to the start: without it, the step
        h = None
    lp.oracle.thresholded()
    return s.start_point(x, g, step, h)
