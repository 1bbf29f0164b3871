"""l1-penalized minimization of composite objectives in NumPy: min f(x) + lam * ||x_C||_1.

The LASSO baseline solves this problem for many lambdas. cvxpy solves it for any convex loss, but
an interior-point solve of a logistic LASSO on Caravan (5822 x 85) takes 10-30 s; this path takes
tens of milliseconds and returns exact zeros. It is proximal Newton (Lee, Sun & Saunders 2014)
with the exact Hessian of the composite form, each quadratic model minimized by cyclic coordinate
descent with soft thresholding (as in glmnet / newGLMNET), run on a working set of coordinates
that grows until the optimality conditions |grad_j f(x)| <= lam hold on every coordinate of C
outside it. Free coordinates F (intercepts) are in every working set and never penalized.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .restricted import composite_eval

if TYPE_CHECKING:
    from .lowered import LoweredProblem


def cd_quadratic_l1(
    u: np.ndarray, g: np.ndarray, H: np.ndarray, pen: np.ndarray, tol: float = 1e-13, max_sweeps: int = 5000
) -> np.ndarray:
    """argmin_z g'(z-u) + 1/2 (z-u)'H(z-u) + sum_j pen_j |z_j| by cyclic coordinate descent.

    Each coordinate step is exact: z_j <- S(z_j - (g_j + [H(z-u)]_j) / H_jj, pen_j / H_jj), with S
    the soft-thresholding operator. Stops when a sweep moves no coordinate by more than
    tol * (1 + max |z|)."""
    z = u.copy()
    r = np.zeros_like(u)  # H (z - u)
    diag = np.diag(H).copy()
    active = np.flatnonzero(diag > 0)
    for _ in range(max_sweeps):
        biggest = 0.0
        for j in active:
            a = diag[j]
            c = z[j] - (g[j] + r[j]) / a
            t = pen[j] / a
            new = c - t if c > t else (c + t if c < -t else 0.0)
            d = new - z[j]
            if d != 0.0:
                z[j] = new
                r += d * H[:, j]
                biggest = max(biggest, abs(d))
        if biggest <= tol * (1.0 + float(np.abs(z).max(initial=0.0))):
            break
    return z


def kkt_residual(u: np.ndarray, g: np.ndarray, pen: np.ndarray) -> float:
    """Largest entry of the minimum-norm subgradient of g'x + sum pen_j |x_j| at u."""
    on = u != 0
    r_on = np.abs(g[on] + pen[on] * np.sign(u[on]))
    r_off = np.maximum(np.abs(g[~on]) - pen[~on], 0.0)
    return float(max(r_on.max(initial=0.0), r_off.max(initial=0.0)))


def l1_minimize(
    lp: LoweredProblem,
    lam: float,
    x0: np.ndarray | None = None,
    tol: float = 1e-12,
    max_newton: int = 100,
    max_outer: int = 100,
    kkt_tol: float = 1e-10,
) -> tuple[np.ndarray, dict[str, int]]:
    """min f(x) + lam * ||x_C||_1 for a composite f (lp.composite); returns (x, counters).

    Stops when the optimality conditions hold to ``kkt_tol * max(1, lam)``: the minimum-norm
    subgradient vanishes on the working set and |grad_j f| <= lam on every other coordinate of C."""
    comp = lp.composite
    if comp is None:
        raise ValueError("l1_minimize needs a composite objective")
    sps = lp.sparsity
    C, F = sps.coords, sps.free
    pen_full = np.zeros(lp.n)
    pen_full[C] = lam
    x = np.zeros(lp.n) if x0 is None else x0.copy()
    in_C = np.zeros(lp.n, dtype=bool)
    in_C[C] = True
    working = set(C[x[C] != 0].tolist())
    _, g = lp.value_and_grad(x)
    viol = C[np.abs(g[C]) > lam]
    working |= set(viol[np.argsort(-np.abs(g[viol]))][: max(10, len(working))].tolist())
    counters = {"newton": 0, "outer": 0}
    for _ in range(max_outer):
        counters["outer"] += 1
        cols = np.union1d(np.fromiter(working, dtype=np.int64, count=len(working)), F)
        Js, Qs = lp._cols.columns(cols)
        pen = pen_full[cols]
        u = x[cols]
        for _ in range(max_newton):
            counters["newton"] += 1
            f, gu, H = composite_eval(comp, Js, Qs, u, None, 2)
            if kkt_residual(u, gu, pen) <= kkt_tol * max(1.0, lam):
                break
            obj = f + float(pen @ np.abs(u))
            z = cd_quadratic_l1(u, gu, H, pen)
            d = z - u
            delta = float(gu @ d + pen @ (np.abs(z) - np.abs(u)))
            if delta >= -tol * tol * (1.0 + abs(obj)):  # no decrease left at machine precision
                break
            t = 1.0
            while t > 1e-12:
                un = u + t * d
                fn = composite_eval(comp, Js, Qs, un, None, 0)[0] + float(pen @ np.abs(un))
                if fn <= obj + 0.25 * t * delta:
                    break
                t *= 0.5
            u = u + t * d
            if t == 1.0:
                u = np.where(z == 0.0, 0.0, u)  # keep the exact zeros of the model minimizer
        x = np.zeros(lp.n)
        x[cols] = u
        _, g = lp.value_and_grad(x)
        outside = C[~np.isin(C, cols)]
        viol = outside[np.abs(g[outside]) > lam * (1 + 1e-9)]
        if viol.size == 0:
            break
        add = viol[np.argsort(-np.abs(g[viol]))][: max(10, len(working) // 2)]
        working |= set(add.tolist())
    return x, counters
