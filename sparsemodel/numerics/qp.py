"""Small dense convex quadratic programs with linear constraints, and the smooth problems built on
them: what the restricted solves and the projections under linear constraints (``A @ w == b``,
``A @ w <= b``, boxes) run.

* :func:`feasible_point` -- a point of {A x = b, G x <= h, lo <= x <= hi} (phase I: the
  minimum-norm solution of the equalities when it satisfies the rest, otherwise one nonnegative
  least-squares problem in slack form, and when that leaves a residual a linear program, HiGHS
  through scipy), or None when the polyhedron is empty; :func:`infeasible` -- the LP's proof
  that it is empty;
* :func:`solve_qp` -- min 1/2 x'Hx + c'x over that polyhedron by the primal active-set method
  (Nocedal & Wright, "Numerical Optimization", 2nd ed., Algorithm 16.3): equality-constrained
  steps from the KKT system of the working set, the blocking constraint added, the constraint
  with the most negative multiplier dropped. With equalities only it is one KKT solve;
* :func:`project` -- the Euclidean projection onto the polyhedron (H = I);
* :func:`constrained_newton` -- a convex composite objective (a reduced design) over the
  polyhedron: sequential quadratic programming, each step the QP of the local Newton model from a
  feasible point (its constraints are the linear constraints themselves, so every point of the
  segment is feasible) and an Armijo search along it; on a quadratic the first step is the answer;
* :func:`slsqp` -- the same for a smooth function given by value and gradient (scipy's SLSQP), for
  objectives without a composite form or with matrix-free columns.

Everything takes arrays (no problems, no sets); sizes are those of a support (dense algebra).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.linalg as la

from ..objective.terms import Reduced
from .evaluation import evaluate, is_operator

FEAS_TOL = 1e-9  # a constraint holds when violated by at most FEAS_TOL * (1 + |rhs|)


@dataclass
class Polyhedron:
    """{x : A x = b, G x <= h, lo <= x <= hi} in R^d (any part may be absent: zero rows, infinite
    bounds)."""

    d: int
    A: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    b: np.ndarray = field(default_factory=lambda: np.zeros(0))
    G: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    h: np.ndarray = field(default_factory=lambda: np.zeros(0))
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None

    def __post_init__(self) -> None:
        d = self.d
        self.b = np.asarray(self.b, dtype=float).ravel()
        self.h = np.asarray(self.h, dtype=float).ravel()
        self.A = np.asarray(self.A, dtype=float).reshape(len(self.b), d)
        self.G = np.asarray(self.G, dtype=float).reshape(len(self.h), d)
        self.lo = np.full(d, -np.inf) if self.lo is None else np.asarray(self.lo, dtype=float)
        self.hi = np.full(d, np.inf) if self.hi is None else np.asarray(self.hi, dtype=float)

    def inequalities(self) -> tuple[np.ndarray, np.ndarray]:
        """Every inequality (the rows of G and the finite bounds) as one system C x <= e."""
        rows, rhs = [self.G], [self.h]
        il, ih = np.flatnonzero(np.isfinite(self.lo)), np.flatnonzero(np.isfinite(self.hi))
        if il.size:
            rows.append(-np.eye(self.d)[il])
            rhs.append(-self.lo[il])
        if ih.size:
            rows.append(np.eye(self.d)[ih])
            rhs.append(self.hi[ih])
        return np.vstack(rows) if rows else np.zeros((0, self.d)), np.concatenate(rhs)

    def violation(self, x: np.ndarray) -> float:
        """The largest violation of a constraint at x, relative to 1 + |its right-hand side|."""
        out = 0.0
        if len(self.b):
            out = max(out, float(np.max(np.abs(self.A @ x - self.b) / (1.0 + np.abs(self.b)))))
        if len(self.h):
            out = max(out, float(np.max((self.G @ x - self.h) / (1.0 + np.abs(self.h)), initial=0.0)))
        with np.errstate(invalid="ignore"):
            lo = np.where(np.isfinite(self.lo), (self.lo - x) / (1.0 + np.abs(self.lo)), 0.0)
            hi = np.where(np.isfinite(self.hi), (x - self.hi) / (1.0 + np.abs(self.hi)), 0.0)
        return max(out, float(np.max(lo, initial=0.0)), float(np.max(hi, initial=0.0)))

    def contains(self, x: np.ndarray, tol: float = FEAS_TOL) -> bool:
        return self.violation(x) <= tol

    def restricted(self, cols: np.ndarray, base: np.ndarray | None = None) -> Polyhedron:
        """The polyhedron in the coordinates ``cols`` of x, the others fixed at ``base`` (zero)."""
        bA, bG = self.b, self.h
        if base is not None and base.any():
            bA = bA - self.A @ base
            bG = bG - self.G @ base
        return Polyhedron(len(cols), self.A[:, cols], bA, self.G[:, cols], bG, self.lo[cols], self.hi[cols])


def feasible_point(P: Polyhedron, x0: np.ndarray | None = None) -> np.ndarray | None:
    """A point of P: ``x0`` when it is one, else the minimum-norm solution of the equalities (clipped
    into the bounds) when it satisfies everything, else a solution of the linear program
    min 0 over P (HiGHS). None when P is empty."""
    if x0 is not None and P.contains(x0):
        return np.asarray(x0, dtype=float)
    if P.d == 0:
        ok = P.contains(np.zeros(0))
        return np.zeros(0) if ok else None
    if len(P.b):
        x = np.linalg.lstsq(P.A, P.b, rcond=None)[0]
    else:
        x = np.zeros(P.d)
    x = np.clip(x, P.lo, P.hi)
    if P.contains(x):
        return x
    x = np.clip(np.zeros(P.d), P.lo, P.hi)
    if P.contains(x):
        return x
    x, empty = _nnls_point(P)
    if x is not None or empty:
        return x
    res = _feasibility_lp(P)
    if res.status != 0 or res.x is None:
        return None
    x = np.clip(np.asarray(res.x, dtype=float), P.lo, P.hi)
    return x if P.contains(x, 1e-7) else None


def _nnls_point(P: Polyhedron) -> tuple[np.ndarray | None, bool]:
    """A point of P from one nonnegative least-squares problem (Lawson & Hanson's NNLS, scipy):
    with x_j = lo_j + u_j (or hi_j - u_j, or u_j - u'_j when unbounded), a slack for each finite
    upper bound and each inequality, all >= 0, the rows are M y = c, y >= 0; P has a point exactly
    when the least-squares residual is zero. Returns (the point when it satisfies P to FEAS_TOL,
    whether the residual proves P empty); (None, False) leaves it to the linear program. Tens of
    microseconds on the small polyhedra of a support, where HiGHS through scipy costs milliseconds."""
    from scipy.optimize import nnls

    d = P.d
    lo, hi = P.lo, P.hi
    fl, fh = np.isfinite(lo), np.isfinite(hi)
    # x = base + T y over the coordinate variables y (one per coordinate, two for a free one)
    free = ~fl & ~fh
    nv = d + int(free.sum())
    T = np.zeros((d, nv))
    T[np.arange(d), np.arange(d)] = np.where(fl | ~fh, 1.0, -1.0)
    T[np.flatnonzero(free), d + np.arange(int(free.sum()))] = -1.0
    base = np.where(fl, lo, np.where(fh, hi, 0.0))
    both = np.flatnonzero(fl & fh)
    ns = len(both) + len(P.h)
    rows = [np.hstack([P.A @ T, np.zeros((len(P.b), ns))])] if len(P.b) else []
    rhs = [P.b - P.A @ base] if len(P.b) else []
    if len(both):  # u_j + t_j = hi_j - lo_j
        R = np.zeros((len(both), nv + ns))
        R[np.arange(len(both)), both] = 1.0
        R[np.arange(len(both)), nv + np.arange(len(both))] = 1.0
        rows.append(R)
        rhs.append(hi[both] - lo[both])
    if len(P.h):  # G x + s = h
        R = np.hstack([P.G @ T, np.zeros((len(P.h), ns))])
        R[np.arange(len(P.h)), nv + len(both) + np.arange(len(P.h))] = 1.0
        rows.append(R)
        rhs.append(P.h - P.G @ base)
    if not rows:
        return None, False
    M, c = np.vstack(rows), np.concatenate(rhs)
    try:
        y, res = nnls(M, c, maxiter=50 * M.shape[1])
    except RuntimeError:  # (no convergence within maxiter)
        return None, False
    x = np.clip(base + T @ y[:nv], lo, hi)
    if P.contains(x):
        return x, False
    # NNLS ends at its exact minimum (Lawson & Hanson: finitely many active-set steps), so a residual
    # well above rounding proves P empty; a small one is left to the linear program
    size = (
        1.0
        + float(np.max(np.abs(c), initial=0.0))
        + float(np.max(np.abs(M), initial=0.0)) * (1.0 + float(np.max(np.abs(y), initial=0.0)))
    )
    return None, bool(res > 1e-6 * size)


def infeasible(P: Polyhedron) -> bool:
    """Whether P is empty by the linear program's own verdict (HiGHS status 2, "infeasible"): unlike
    :func:`feasible_point`, which also gives up on a point outside a tolerance, True only where the
    solver proved it (a branch and bound prunes on it)."""
    if P.d == 0:
        return not P.contains(np.zeros(0))
    return _feasibility_lp(P).status == 2


def _feasibility_lp(P: Polyhedron) -> Any:
    """min 0 over P by HiGHS (scipy's linprog): its status says whether P is empty (2), its x a point."""
    from scipy.optimize import linprog

    bounds = [(None if not np.isfinite(a) else a, None if not np.isfinite(c) else c) for a, c in zip(P.lo, P.hi)]
    res = linprog(
        np.zeros(P.d),
        A_ub=P.G if len(P.h) else None,
        b_ub=P.h if len(P.h) else None,
        A_eq=P.A if len(P.b) else None,
        b_eq=P.b if len(P.b) else None,
        bounds=bounds,
        method="highs",
    )
    return res


@dataclass
class QPResult:
    x: np.ndarray | None  # None: the polyhedron is empty
    iterations: int
    status: str  # optimal | infeasible | max_iter
    active: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # rows of C x <= e at bound


def _kkt_step(H: np.ndarray, g: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The step p and multipliers nu of min 1/2 p'Hp + g'p subject to W p = 0:
    [[H, W'], [W, 0]] [p; nu] = [-g; 0] (least squares when W's rows are dependent)."""
    d, m = H.shape[0], W.shape[0]
    if m == 0:
        try:
            c = la.cho_factor(H, check_finite=False)
            return -la.cho_solve(c, g, check_finite=False), np.zeros(0)
        except la.LinAlgError:
            return -np.linalg.lstsq(H, g, rcond=None)[0], np.zeros(0)
    K = np.zeros((d + m, d + m))
    K[:d, :d] = H
    K[:d, d:] = W.T
    K[d:, :d] = W
    rhs = np.concatenate([-g, np.zeros(m)])
    try:
        sol = np.linalg.solve(K, rhs)
        if not np.all(np.isfinite(sol)):
            raise np.linalg.LinAlgError
    except np.linalg.LinAlgError:
        sol = np.linalg.lstsq(K, rhs, rcond=None)[0]
    return sol[:d], sol[d:]


def solve_qp(
    H: np.ndarray,
    c: np.ndarray,
    P: Polyhedron,
    x0: np.ndarray | None = None,
    tol: float = 1e-10,
    max_iter: int | None = None,
) -> QPResult:
    """min 1/2 x'Hx + c'x over the polyhedron P, H symmetric positive semidefinite (a relative
    ridge of 1e-12 makes the steps unique), by the primal active-set method of Nocedal & Wright,
    Algorithm 16.3, from a feasible start (:func:`feasible_point` of ``x0``)."""
    d = P.d
    x = feasible_point(P, x0)
    if x is None:
        return QPResult(None, 0, "infeasible")
    if d == 0:
        return QPResult(x, 0, "optimal")
    H = np.asarray(H, dtype=float)
    H = (H + H.T) / 2 + 1e-12 * max(1.0, float(np.max(np.abs(np.diag(H)), initial=0.0))) * np.eye(d)
    C, e = P.inequalities()
    A = P.A
    ne = A.shape[0]
    scale_c = 1.0 + np.abs(e)
    active = [int(i) for i in np.flatnonzero(C @ x >= e - 1e-12 * scale_c)] if len(e) else []
    # keep a linearly independent working set (the equalities first)
    active = _independent(A, C, active)
    max_iter = max_iter or 20 * (d + len(e) + ne) + 50
    h_scale = max(float(np.max(np.abs(np.diag(H)))), 1e-300)
    g_scale = (
        1.0
        + float(np.max(np.abs(c), initial=0.0))
        + float(np.max(np.abs(H), initial=0.0)) * (1.0 + float(np.max(np.abs(x), initial=0.0)))
    )
    for it in range(1, max_iter + 1):
        g = H @ x + c
        W = np.vstack([A, C[active]]) if active else A
        p, nu = _kkt_step(H, g, W)
        # p = 0 up to rounding: relative to x and to the size of a gradient step (|g| / |H|)
        size = 1.0 + float(np.max(np.abs(x), initial=0.0)) + float(np.max(np.abs(g), initial=0.0)) / h_scale
        if float(np.max(np.abs(p), initial=0.0)) <= tol * size:
            mu = nu[ne:]
            if len(mu) == 0 or float(mu.min()) >= -tol * g_scale:
                return QPResult(x, it, "optimal", np.asarray(active, dtype=np.int64))
            active.pop(int(np.argmin(mu)))
            continue
        # the longest step along p that keeps every inactive inequality
        alpha, block = 1.0, -1
        if len(e):
            Cp = C @ p
            slack = e - C @ x
            cand = np.flatnonzero(Cp > 1e-14 * (1.0 + np.abs(slack)))
            cand = cand[~np.isin(cand, active)]
            if cand.size:
                ratios = np.maximum(slack[cand], 0.0) / Cp[cand]
                j = int(np.argmin(ratios))
                if ratios[j] < alpha:
                    alpha, block = float(ratios[j]), int(cand[j])
        x = x + alpha * p
        if block >= 0:
            active.append(block)
            active = _independent(A, C, active)
    return QPResult(x, max_iter, "max_iter", np.asarray(active, dtype=np.int64))


def _independent(A: np.ndarray, C: np.ndarray, active: list[int]) -> list[int]:
    """The rows of ``active`` (into C) kept so that [A; C[active]] has independent rows (a row
    dependent on the earlier ones is dropped: it adds no constraint to the step). Gram-Schmidt
    against an orthonormal basis of the rows kept so far, orthogonalized twice ("twice is enough",
    Giraud et al. 2005): a row whose part outside their span is below 1e-10 of its norm is dependent
    (one pass of products per row, where a rank per row cost an SVD each)."""
    if not active:
        return active
    d = C.shape[1]
    Q = np.zeros((d, len(A) + len(active)))  # the basis, filled column by column
    r = 0
    if len(A):
        Qa, Ra = np.linalg.qr(A.T)
        diag = np.abs(np.diag(Ra))
        Qa = Qa[:, diag > 1e-10 * max(float(diag.max(initial=0.0)), 1e-300)]
        r = Qa.shape[1]
        Q[:, :r] = Qa
    keep: list[int] = []
    for i in active:
        row = C[i]
        size = float(np.sqrt(row @ row))
        if size == 0.0:
            continue
        B = Q[:, :r]
        v = row - B @ (B.T @ row)
        v = v - B @ (B.T @ v)
        rest = float(np.sqrt(v @ v))
        if rest > 1e-10 * size:
            keep.append(i)
            Q[:, r] = v / rest
            r += 1
    return keep


def project(z: np.ndarray, P: Polyhedron, x0: np.ndarray | None = None) -> QPResult:
    """The Euclidean projection of z onto P (the QP with H = I, c = -z); exact up to rounding."""
    z = np.asarray(z, dtype=float)
    if not len(P.b) and not len(P.h):  # a box only: clipping
        return QPResult(np.clip(z, P.lo, P.hi), 0, "optimal")
    return solve_qp(np.eye(P.d), -z, P, x0=np.clip(z, P.lo, P.hi) if x0 is None else x0)


@dataclass
class ConstrainedResult:
    u: np.ndarray | None
    f: float
    iterations: int
    converged: bool
    status: str = "optimal"


def constrained_newton(
    rd: Reduced,
    u0: np.ndarray | None,
    P: Polyhedron,
    ridge: np.ndarray | None = None,
    tol: float = 1e-12,
    max_iter: int = 100,
) -> ConstrainedResult:
    """min f(u) [+ ridge/2 ||u||^2] over the polyhedron P for a reduced composite design with dense
    columns: sequential quadratic programming. From a feasible u (the start when it is one), each
    iteration solves the QP of the Newton model, min g'd + 1/2 d'Hd subject to u + d in P (exact
    Hessian H, :func:`solve_qp`), and takes the largest step a in (0, 1] with Armijo's decrease
    f(u + a d) <= f(u) + 1e-4 a g'd (u + a d stays in P: P is convex). It stops when the model's
    decrease -(g'd + 1/2 d'Hd) is below tol (1 + |f|), the KKT point up to rounding. On a quadratic
    (least squares) the first step is exact."""
    u = feasible_point(P, None if u0 is None else np.clip(u0, P.lo, P.hi))
    if u is None:
        return ConstrainedResult(None, np.inf, 0, False, "infeasible")
    if P.d == 0:
        return ConstrainedResult(u, evaluate(rd, u, 0, ridge)[0], 0, True)
    f, g, H = evaluate(rd, u, 2, ridge)
    its, converged = 0, False
    while its < max_iter and np.isfinite(f):
        its += 1
        shifted = P.restricted(np.arange(P.d), base=u)  # the step d: u + d in P
        shifted.lo, shifted.hi = P.lo - u, P.hi - u
        qp = solve_qp(H, g, shifted, x0=np.zeros(P.d))
        if qp.x is None:  # rounding pushed u out of P: project back and retry once
            u = feasible_point(P, None)
            if u is None:
                return ConstrainedResult(None, np.inf, its, False, "infeasible")
            f, g, H = evaluate(rd, u, 2, ridge)
            continue
        d = qp.x
        model = float(g @ d + 0.5 * d @ H @ d)
        if -model <= tol * (1.0 + abs(f)):
            converged = True
            break
        a, slope = 1.0, float(g @ d)
        accepted = False
        for _ in range(60):
            un = np.clip(u + a * d, P.lo, P.hi)
            fn = evaluate(rd, un, 0, ridge)[0]
            if np.isfinite(fn) and fn <= f + 1e-4 * a * slope:
                accepted = True
                break
            a *= 0.5
        if not accepted:
            converged = True  # no decrease along the step: the optimum up to rounding
            break
        u = un
        f, g, H = evaluate(rd, u, 2, ridge)
        if rd.quadratic and a == 1.0 and qp.status == "optimal":
            converged = True  # the model is the function: this step was exact
            break
    return ConstrainedResult(u, f, its, converged)


def slsqp(
    fun: Callable[[np.ndarray], tuple[float, np.ndarray]],
    u0: np.ndarray | None,
    P: Polyhedron,
    tol: float = 1e-12,
    max_iter: int = 500,
) -> ConstrainedResult:
    """min f(u) over P for a smooth f given by value and gradient: scipy's SLSQP (Kraft 1988) from
    a feasible start; the answer is moved back into the bounds."""
    from scipy.optimize import Bounds, LinearConstraint
    from scipy.optimize import minimize as sp_minimize

    u = feasible_point(P, None if u0 is None else np.clip(u0, P.lo, P.hi))
    if u is None:
        return ConstrainedResult(None, np.inf, 0, False, "infeasible")
    cons = []
    if len(P.b):
        cons.append(LinearConstraint(P.A, P.b, P.b))
    if len(P.h):
        cons.append(LinearConstraint(P.G, -np.inf, P.h))
    res = sp_minimize(
        fun,
        u,
        jac=True,
        method="SLSQP",
        bounds=Bounds(P.lo, P.hi),
        constraints=cons,
        options={"maxiter": max_iter, "ftol": max(tol, 1e-14)},
    )
    v = np.clip(np.asarray(res.x, dtype=float), P.lo, P.hi)
    f = float(fun(v)[0])
    if not P.contains(v, 1e-7):
        return ConstrainedResult(u, float(fun(u)[0]), int(res.nit), False)
    return ConstrainedResult(v, f, int(res.nit), bool(res.success))


def dense_design(rd: Reduced) -> bool:
    """Whether the reduced design's columns are stored (Hessians can be formed)."""
    return not any(map(is_operator, rd.Js))


__all__ = [
    "ConstrainedResult",
    "Polyhedron",
    "QPResult",
    "constrained_newton",
    "dense_design",
    "feasible_point",
    "infeasible",
    "project",
    "slsqp",
    "solve_qp",
]
