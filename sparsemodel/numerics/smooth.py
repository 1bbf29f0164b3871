"""Smooth methods: L-BFGS-B (objectives without a composite form), projected Newton in a box, and
the truncated power method (restricted smoothness constants, Yuan & Zhang 2013).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..objective.terms import Reduced
from . import newton as _newton
from .evaluation import evaluate, is_operator
from .newton import _newton_direction


def lbfgs(
    fun: Callable[[np.ndarray], tuple[float, np.ndarray]],
    u0: np.ndarray,
    tol: float = 1e-12,
    max_iter: int = 2000,
    bounds: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, int, bool, float]:
    """L-BFGS-B on a smooth function (value and gradient), optionally within ``bounds`` = (lo, hi)
    (infinite entries: unbounded); returns (u, iterations, success, f)."""
    from scipy.optimize import Bounds
    from scipy.optimize import minimize as sp_minimize

    if np.size(u0) == 0:  # nothing to move (scipy reports f = 0 here): the value at the point itself
        return np.asarray(u0, dtype=float), 0, True, float(fun(np.asarray(u0, dtype=float))[0])
    b = None
    if bounds is not None:
        b = Bounds(bounds[0], bounds[1])
        u0 = np.clip(u0, bounds[0], bounds[1])
    res = sp_minimize(
        fun,
        u0,
        jac=True,
        method="L-BFGS-B",
        bounds=b,
        options={"maxiter": max_iter, "ftol": tol, "gtol": 1e-10, "maxcor": 30},
    )
    x = res.x if bounds is None else np.clip(res.x, bounds[0], bounds[1])
    return x, int(res.nit), bool(res.success), float(res.fun)


@dataclass
class BoxResult:
    u: np.ndarray
    f: float
    iterations: int
    converged: bool


def box_newton(
    rd: Reduced,
    u0: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    ridge: np.ndarray | None = None,
    tol: float = 1e-12,
    max_iter: int = 200,
) -> BoxResult:
    """min f(u) [+ ridge/2 ||u||^2] over lo <= u <= hi for a reduced composite design: the
    projected Newton method of Bertsekas (1982, "Projected Newton methods for optimization
    problems with simple constraints", SIAM J. Control Optim. 20(2)).

    Each iteration splits the coordinates into the binding set B (within eps of a bound, with the
    gradient pushing outward; eps = min(1e-8 (1 + |u|_inf), |u - clip(u - g)|)) and the rest F; the
    direction is Newton's on F (the exact Hessian block H_FF) and a diagonally scaled gradient on B;
    the step is an Armijo search along the projection arc u(a) = clip(u + a d) with Bertsekas's
    sufficient decrease a g_F'd_F + g_B'(u_B - u_B(a)). It stops when the Newton decrement on F is
    below 2 tol (1 + |f|) with every binding coordinate at its bound (|u - clip(u - g)| <= tol), or when the arc
    search finds no decrease (the optimum up to rounding). On a quadratic it ends once the active
    set is identified (one full Newton step on F). Large or matrix-free designs use L-BFGS-B with
    bounds instead (:func:`lbfgs`)."""
    d = rd.d
    u = np.clip(np.asarray(u0, dtype=float), lo, hi)
    if d == 0:
        return BoxResult(u, evaluate(rd, u, 0, ridge)[0], 0, True)
    if d > _newton.MATRIX_FREE_DIM or any(map(is_operator, rd.Js)):

        def fun(v: np.ndarray) -> tuple[float, np.ndarray]:
            f, g, _ = evaluate(rd, v, 1, ridge)
            return (f, g) if np.isfinite(f) else (np.inf, np.zeros_like(v))

        v, its, ok, f = lbfgs(fun, u, tol=tol, bounds=(lo, hi))
        return BoxResult(v, f, its, ok)
    f, g, H = evaluate(rd, u, 2, ridge)
    its, converged = 0, False
    while its < max_iter and np.isfinite(f):
        its += 1
        pg = u - np.clip(u - g, lo, hi)
        eps = min(1e-8 * (1.0 + float(np.max(np.abs(u)))), float(np.linalg.norm(pg)))
        B = ((u <= lo + eps) & (g > 0)) | ((u >= hi - eps) & (g < 0))
        F = ~B
        step = np.zeros(d)
        if F.any():
            step[F] = _newton_direction(H[np.ix_(F, F)][None], g[F][None])[0][0]
        if B.any():
            step[B] = -g[B] / np.maximum(np.diag(H)[B], 1e-300)
        dec = -float(g[F] @ step[F])
        if dec <= 2 * tol * (1.0 + abs(f)) and float(np.max(np.abs(pg[B]), initial=0.0)) <= tol * (1.0 + eps):
            converged = True
            un = np.clip(u + step, lo, hi)  # the last step too when it does not increase f (as newton)
            fn = evaluate(rd, un, 0, ridge)[0]
            if np.isfinite(fn) and fn <= f + 4 * np.finfo(float).eps * (1.0 + abs(f)):
                u, f = un, fn
            break
        a, accepted = 1.0, False
        for _ in range(60):
            un = np.clip(u + a * step, lo, hi)
            fn = evaluate(rd, un, 0, ridge)[0]
            pred = a * dec + float(g[B] @ (u[B] - un[B]))
            if np.isfinite(fn) and fn <= f - 1e-4 * pred:
                accepted = True
                break
            a *= 0.5
        if not accepted or np.array_equal(un, u):
            converged = True  # no decrease along the arc: the optimum up to rounding
            break
        u = un
        f, g, H = evaluate(rd, u, 2, ridge)
    return BoxResult(u, float(f), its, converged)


def truncated_power(
    hv: Callable[[np.ndarray], np.ndarray],
    truncate: Callable[[np.ndarray], np.ndarray],
    start: np.ndarray,
    iters: int = 100,
    rtol: float = 1e-9,
) -> tuple[np.ndarray, float, list[float]]:
    """The truncated power method (Yuan & Zhang 2013, "Truncated power method for sparse eigenvalue
    problems", JMLR 14, Algorithm 1): v <- truncate(H v) / ||.|| from ``start`` (truncate keeps the
    structure: k coordinates, rank r, ...), until the Rayleigh quotient v'Hv changes by at most
    ``rtol`` relatively. Returns (v, v'Hv, the quotient at every iteration); for a positive
    semidefinite H the quotients never decrease (their Proposition 4)."""

    def unit(v: np.ndarray) -> np.ndarray:
        v = truncate(v)
        nv = np.linalg.norm(v)
        return v / nv if nv > 0 else v

    v = unit(start)
    lam = 0.0
    seen: list[float] = []
    for _ in range(iters):
        w = hv(v)
        lam_new = float(v @ w)
        seen.append(lam_new)
        v_new = unit(w)
        if not np.any(v_new):
            break
        if abs(lam_new - lam) <= rtol * max(abs(lam_new), 1e-300):
            lam = lam_new
            break
        lam, v = lam_new, v_new
    return v, lam, seen


def power_method(
    hv: Callable[[np.ndarray], np.ndarray],
    truncate: Callable[[np.ndarray], np.ndarray],
    starts: list[np.ndarray],
    iters: int = 100,
    rtol: float = 1e-9,
) -> float:
    """Truncated power method: max over starts of |v'Hv| at the end of :func:`truncated_power` (the
    restricted smoothness constants). The power iteration converges to the eigenvalue of largest
    magnitude: for a positive semidefinite H the largest eigenvalue; for an indefinite one (a
    nonconvex custom loss) possibly a negative one, whose magnitude is the Lipschitz constant of
    the gradient on those directions, what a step 1/L needs; a negative quotient of a convex loss
    is rounding (its curvature is ~0 there)."""
    best = 0.0
    for v in starts:
        best = max(best, abs(truncated_power(hv, truncate, v, iters, rtol)[1]))
    return best
