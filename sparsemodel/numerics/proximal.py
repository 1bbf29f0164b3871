"""Proximal and l1 methods: coordinate descent on a quadratic model with an l1 penalty and a box
(the proximal-Newton step of :func:`sparsemodel.numerics.newton.newton`), its KKT residual, and
accelerated proximal gradient with restarts (FISTA) with singular value thresholding (the
nuclear-norm path).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


def cd_quadratic_l1(
    u: np.ndarray,
    g: np.ndarray,
    H: np.ndarray,
    pen: np.ndarray,
    tol: float = 1e-13,
    max_sweeps: int = 5000,
    lo: np.ndarray | None = None,
    hi: np.ndarray | None = None,
) -> np.ndarray:
    """argmin_z g'(z-u) + 1/2 (z-u)'H(z-u) + sum_j pen_j |z_j| [lo <= z <= hi] by cyclic
    coordinate descent.

    Each coordinate step is exact: z_j <- S(z_j - (g_j + [H(z-u)]_j) / H_jj, pen_j / H_jj), with S
    the soft-thresholding operator, then clipped to [lo_j, hi_j] (the one-dimensional problem is
    convex, so clipping its unconstrained minimizer gives the constrained one). Stops when a sweep
    moves no coordinate by more than tol * (1 + max |z|)."""
    if lo is not None or hi is not None:
        lo = np.full(len(u), -np.inf) if lo is None else lo
        hi = np.full(len(u), np.inf) if hi is None else hi
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
            if lo is not None:
                new = min(max(new, lo[j]), hi[j])
            dz = new - z[j]
            if dz != 0.0:
                z[j] = new
                r += dz * H[:, j]
                biggest = max(biggest, abs(dz))
        if biggest <= tol * (1.0 + float(np.abs(z).max(initial=0.0))):
            break
    return z


def kkt_residual(
    u: np.ndarray, g: np.ndarray, pen: np.ndarray, lo: np.ndarray | None = None, hi: np.ndarray | None = None
) -> float:
    """Largest entry of the minimum-norm element of g + pen * d|u| (+ the normal cone of the box
    [lo, hi] at u, when given): zero exactly at a minimizer of g'x + sum pen_j |x_j| over the box."""
    on = u != 0
    a = np.where(on, g + pen * np.sign(u), g - pen)  # the subdifferential interval [a, b] per coordinate
    b = np.where(on, a, g + pen)
    if lo is not None:
        a = np.where(u <= lo, -np.inf, a)  # at the lower bound the normal cone adds (-inf, 0]
    if hi is not None:
        b = np.where(u >= hi, np.inf, b)
    r = np.where(a > 0, a, np.where(b < 0, -b, 0.0))
    return float(r.max(initial=0.0))


@dataclass
class ProxResult:
    x: np.ndarray
    f: float  # smooth part at x
    iterations: int
    converged: bool


def fista(
    value_and_grad: Callable[[np.ndarray], tuple[float, np.ndarray]],
    prox: Callable[[np.ndarray, float], np.ndarray],
    penalty: Callable[[np.ndarray], float],
    x0: np.ndarray,
    L: float,
    tol: float = 1e-10,
    max_iter: int = 20000,
) -> ProxResult:
    """min f(x) + h(x) by accelerated proximal gradient (Beck & Teboulle 2009, FISTA) with the
    adaptive restart of O'Donoghue & Candes (2015) and backtracking on L: ``prox(z, t)`` is the
    proximal map of t*h, ``penalty(x)`` = h(x). Stops when the prox-gradient step moves x by at
    most ``tol * (1 + ||x||)`` (the gradient mapping, the first-order optimality measure)."""
    x = x0.copy()
    y = x.copy()
    t = 1.0
    fx, _ = value_and_grad(x)
    Fx = fx + penalty(x)
    its = 0
    stalled = 0  # iterations in a row without a decrease above rounding
    for its in range(1, max_iter + 1):
        fy, gy = value_and_grad(y)
        while True:
            xn = prox(y - gy / L, 1.0 / L)
            d = xn - y
            fn, _ = value_and_grad(xn)
            if fn <= fy + float(gy @ d) + 0.5 * L * float(d @ d) * (1 + 1e-12) + 1e-15 * abs(fy):
                break
            L *= 2.0
        Fn = fn + penalty(xn)
        step = float(np.linalg.norm(xn - x))
        stalled = stalled + 1 if Fn >= Fx - 1e-15 * abs(Fx) else 0
        if stalled >= 10:  # no progress left at machine precision
            return ProxResult(x, fx, its, True)
        if Fn > Fx:  # restart: the momentum overshot
            t, y = 1.0, x.copy()
            if float(np.linalg.norm(d)) <= tol * (1.0 + float(np.linalg.norm(x))):
                return ProxResult(x, fx, its, True)
            continue
        tn = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        y = xn + ((t - 1.0) / tn) * (xn - x)
        x, fx, Fx, t = xn, fn, Fn, tn
        if step <= tol * (1.0 + float(np.linalg.norm(x))):
            return ProxResult(x, fx, its, True)
    return ProxResult(x, fx, its, False)


def svt(M: np.ndarray, tau: float) -> np.ndarray:
    """Singular value thresholding: the proximal map of tau * ||M||_* (Cai, Candes & Shen 2010)."""
    U, s, Vt = np.linalg.svd(M, full_matrices=False)
    s = np.maximum(s - tau, 0.0)
    keep = s > 0
    return (U[:, keep] * s[keep]) @ Vt[keep]
