"""Guards of a lowered problem: objectives unbounded below (a direction found before solving, or
the iterates running away), and a start inside the loss's domain.
"""

from __future__ import annotations

import numpy as np

from ..errors import UnboundedError

DOMAIN_TRIALS = (1.0, -1.0, 0.1, -0.1, 10.0, -10.0, 0.01, -0.01, 100.0, -100.0, 1e-3, -1e-3, 1e3, -1e3)
RAMP_TRIALS = (1.0, 10.0, 0.1, 100.0)  # half-widths of an increasing ramp over the free coordinates


class Guards:
    """Guards of a lowered problem: objectives unbounded below (a direction found before solving, or"""

    def unbounded_direction(self) -> str | None:
        """Why f is unbounded below on the feasible set, when a linear part makes it so: a
        coordinate that the constraint lets move (a free one, or any constrained one when the
        bound allows at least one) along which f is linear with a nonzero slope. None otherwise
        (a restricted solve that runs away is caught at run time)."""
        d = self.design
        if d is None or self.side:
            return None
        flat = (d.lin != 0) & ~d.curved_coordinates()
        if not flat.any():
            return None
        feasible = np.ones(self.n, dtype=bool)
        if self.set is not None:
            feasible[:] = False
            feasible[self.set.free] = True
            if self.set.k >= 1:
                feasible[self.set.coords] = True
        hit = np.flatnonzero(flat & feasible)
        if hit.size == 0:
            return None
        j = int(hit[0])
        var, idx = self.layout.locate(j)
        return (
            f"the objective is linear along {var}{idx} (slope {d.lin[j]:.4g}) and no other term of it reads "
            f"{var}{idx}, so it decreases without bound as {var}{idx} moves{' up' if d.lin[j] < 0 else ' down'}; "
            f"{len(hit)} coordinate(s) are like this"
        )

    def runs_away(self, x: np.ndarray, d: np.ndarray) -> bool:
        """Whether f decreases without bound along the ray x + t d (a recession direction): f at
        t = 1e4 and 1e8 (in units of max(1, |x|) / |d|) falls ever further below f(x), by more
        than any scale of the problem. Used when a minimization fails to converge."""
        nd = float(np.linalg.norm(d))
        if not nd > 0:
            return False
        f0 = self.oracle.peek(x)
        unit = max(1.0, float(np.linalg.norm(x))) / nd
        f1, f2 = (self.oracle.peek(x + t * unit * d) for t in (1e4, 1e8))
        if not (np.isfinite(f0) and np.isfinite(f1)):
            return False
        big = 1e3 * (1.0 + abs(f0))
        return bool(f1 < f0 - big and (f2 == -np.inf or (np.isfinite(f2) and f2 < f1 - big)))

    def _raise_unbounded(self, dim: int, x: np.ndarray, f: float | None) -> None:
        raise UnboundedError(
            f"the restricted problem on {dim} coordinates has no minimizer: the objective decreases without bound "
            f"along a direction its iterates follow (|x| = {float(np.linalg.norm(x)):.3g}, "
            f"f = {f if f is not None else self.oracle.peek(x):.4g}), so it is unbounded below on the feasible set",
            hint="add a term with curvature (for example a ridge term lam * sum_squares(w)) or check the signs",
        )

    # ------------------------------------------------------------------ the domain
    def inside_domain(self, x: np.ndarray | None = None) -> np.ndarray:
        """A point where the objective is finite: ``x`` (default the zero point) when it is one;
        otherwise ``x`` with its free coordinates (an intercept, a diagonal, other variables) moved
        to a common value c in +-1, +-0.1, +-10, ... (all together, then one at a time, then an
        increasing ramp -c..c over them, the order ordinal's cut-points need), so that a loss such
        as -log(X w + b), -logdet(O) or ordinal(X @ w, theta, y) is evaluated inside its domain. The constrained
        coordinates are left as they are (zero for a start). Returns ``x`` unchanged when no such
        point is found (the solvers then report the infinite objective)."""
        x = self.zeros() if x is None else np.asarray(x, dtype=float)
        if np.isfinite(self.oracle.peek(x)):
            return x
        free = getattr(self.set, "free", None) if self.set is not None else None
        F = np.arange(self.n) if free is None else free
        if len(F) == 0:
            return x
        for c in DOMAIN_TRIALS:
            y = x.copy()
            y[F] = c
            if np.isfinite(self.oracle.peek(y)):
                return y
        if len(F) <= 16:
            for c in DOMAIN_TRIALS:
                for j in F:
                    y = x.copy()
                    y[j] = c
                    if np.isfinite(self.oracle.peek(y)):
                        return y
        if len(F) > 1:  # increasing values (the order the cut-points of ordinal(...) need)
            for c in RAMP_TRIALS:
                y = x.copy()
                y[F] = c * np.linspace(-1.0, 1.0, len(F))
                if np.isfinite(self.oracle.peek(y)):
                    return y
        return x
