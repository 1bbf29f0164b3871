"""Restricted minimization: min f(x) over x supported on a given set of coordinates (step S3).

Three NumPy paths and one reference path, all minimizing the same function:

* ``lstsq``  — every term is ``c * sum_squares(affine)``: one QR factorization of the stacked,
  weighted selected columns (SVD least squares when they are rank deficient);
* ``newton`` — composite objectives (elementwise losses of affine maps): Newton's method with the
  exact restricted Hessian ``sum_t c_t A_S' diag(w phi''(z)) A_S`` and Armijo backtracking;
* ``lbfgs``  — anything smooth: L-BFGS-B on the free coordinates with the derived gradient;
* ``cvxpy``  — the same restricted problem lowered to cvxpy (see cvxpy_lower.py), the reference.

Every path accepts an extra diagonal ridge ``0.5 * sum_j r_j x_j^2`` on the selected coordinates
(ARHT's adaptive regularizer g_R of paper 003, Algorithm 5).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from .structure import Composite, jacobian_columns

if TYPE_CHECKING:
    from .lowered import LoweredProblem


@dataclass
class RestrictedResult:
    x: np.ndarray  # full flat vector
    f: float  # objective value (including the ridge, if any)
    iterations: int
    method: str
    converged: bool = True
    g: np.ndarray | None = None  # gradient of f at x (without the ridge), when asked for


class ColumnCache:
    """Jacobian columns of each composite term, cached per support (the last few supports) and,
    for small problems, once for all coordinates."""

    FULL_LIMIT = 4_000_000  # entries: cache the whole Jacobian of a term below this

    def __init__(self, comp: Composite, lp: LoweredProblem):
        self.comp = comp
        self.lp = lp
        self.full: dict[int, Any] = {}
        self.recent: dict[bytes, list[Any]] = {}

    def _full(self, i: int, affine: Any) -> Any | None:
        if i not in self.full:
            n = self.lp.n
            self.full[i] = (
                jacobian_columns(affine, self.lp.layout, np.arange(n)) if affine.size * n <= self.FULL_LIMIT else None
            )
        return self.full[i]

    def columns(self, cols: np.ndarray) -> tuple[list[Any], list[Any]]:
        key = cols.tobytes()
        if key in self.recent:
            return self.recent[key]
        out_t, out_q = [], []
        for i, t in enumerate(self.comp.terms):
            F = self._full(i, t.affine)
            out_t.append(F[:, cols] if F is not None else jacobian_columns(t.affine, self.lp.layout, cols))
        for i, q in enumerate(self.comp.quads):
            F = self._full(-1 - i, q.affine)
            out_q.append(F[:, cols] if F is not None else jacobian_columns(q.affine, self.lp.layout, cols))
        out_t = [J.toarray() if sp.issparse(J) and J.shape[0] * J.shape[1] <= 1_000_000 else J for J in out_t]
        out_q = [J.toarray() if sp.issparse(J) else J for J in out_q]
        if len(self.recent) >= 8:
            self.recent.pop(next(iter(self.recent)))
        self.recent[key] = (out_t, out_q)
        return out_t, out_q


def composite_eval(comp: Composite, Js: list[Any], Qs: list[Any], u: np.ndarray, ridge: np.ndarray | None, order: int):
    """f, gradient and (order 2) Hessian of the composite objective restricted to columns Js."""
    m = u.shape[0]
    f = comp.const
    g = np.zeros(m)
    H = np.zeros((m, m)) if order >= 2 else None
    for t, J in zip(comp.terms, Js):
        z = np.asarray(J @ u).ravel() + t.b
        v, d1, d2 = t.phi_d(z, order)
        f += t.coef * float(v.sum())
        if order >= 1:
            g += t.coef * np.asarray(J.T @ d1).ravel()
        if order >= 2 and t.phi is not None:
            if sp.issparse(J):
                H += t.coef * (J.T @ J.multiply(d2[:, None])).toarray()
            else:
                H += t.coef * (J.T @ (J * d2[:, None]))
    for q, J in zip(comp.quads, Qs):
        a = J @ u + q.b
        Ps = q.P + q.P.T
        f += q.coef * float(a @ q.P @ a)
        if order >= 1:
            g += q.coef * (J.T @ (Ps @ a))
        if order >= 2:
            H += q.coef * (J.T @ Ps @ J)
    if ridge is not None:
        f += 0.5 * float(np.sum(ridge * u * u))
        g += ridge * u
        if order >= 2:
            H[np.diag_indices(m)] += ridge
    return f, g, H


def solve_lstsq(comp: Composite, Js: list[Any], u0: np.ndarray, ridge: np.ndarray | None) -> tuple[np.ndarray, int]:
    """Minimize sum_t c_t ||w_t^(1/2) (J_t u + b_t)||^2 (+ ridge) by QR of the stacked columns."""
    blocks, rhs = [], []
    for t, J in zip(comp.terms, Js):
        s = np.sqrt(t.coef) * (np.sqrt(t.weights) if t.weights is not None else 1.0)
        Jd = J.toarray() if sp.issparse(J) else J
        blocks.append(Jd * (s[:, None] if np.ndim(s) else s))
        rhs.append(-(s * t.b))
    if ridge is not None:
        blocks.append(np.diag(np.sqrt(0.5 * ridge)))
        rhs.append(np.zeros(len(ridge)))
    M = np.vstack(blocks) if len(blocks) > 1 else blocks[0]
    r = np.concatenate(rhs) if len(rhs) > 1 else rhs[0]
    return lstsq_dense(M, r), 1


def lstsq_dense(M: np.ndarray, r: np.ndarray) -> np.ndarray:
    """argmin ||M u - r||: Cholesky of M'M when well conditioned (cond(M) < ~1e5, so the normal
    equations lose no accuracy that matters at 1e-10), else QR without forming Q, else the
    minimum-norm SVD solution (rank-deficient M, e.g. more columns than rows)."""
    m = M.shape[1]
    if m == 0:
        return np.zeros(0)
    if M.shape[0] >= m:
        G = M.T @ M
        try:
            L = np.linalg.cholesky(G)
            d = np.diag(L)
            if d.min() > 1e-5 * d.max():
                return sla.cho_solve((L, True), M.T @ r, check_finite=False)
        except np.linalg.LinAlgError:
            pass
        qtr, R = sla.qr_multiply(M, r, mode="right")
        d = np.abs(np.diag(R))
        if d.min() > 1e-10 * max(d.max(), 1e-300):
            return sla.solve_triangular(R, qtr, check_finite=False)
    u, *_ = np.linalg.lstsq(M, r, rcond=None)
    return u


def solve_newton(
    comp: Composite,
    Js: list[Any],
    Qs: list[Any],
    u0: np.ndarray,
    ridge: np.ndarray | None,
    tol: float = 1e-12,
    max_iter: int = 100,
) -> tuple[np.ndarray, int, bool, float]:
    """Damped Newton with exact Hessian; stops when the Newton decrement is below tol*(1+|f|).
    Returns (u, iterations, converged, f(u) including the ridge). The full step is evaluated with
    gradient and Hessian, which serve as the next iterate's when it is accepted (the usual case)."""
    u = u0.copy()
    f, g, H = composite_eval(comp, Js, Qs, u, ridge, 2)
    m = len(u)
    for it in range(1, max_iter + 1):
        if not np.isfinite(f):
            return u, it, False, f
        if m == 0:
            return u, it, True, f
        try:
            c, low = sla.cho_factor(H + 1e-14 * np.trace(H) / m * np.eye(m), check_finite=False)
            d = -sla.cho_solve((c, low), g, check_finite=False)
        except (np.linalg.LinAlgError, ValueError):
            d = -np.linalg.lstsq(H, g, rcond=None)[0]
        dec = -float(g @ d)
        if dec < 0:  # not a descent direction (numerically singular H): fall back to the gradient
            d, dec = -g, float(g @ g)
        if dec <= 2 * tol * (1.0 + abs(f)):
            return u, it, True, f
        fn, gn, Hn = composite_eval(comp, Js, Qs, u + d, ridge, 2)
        if fn <= f - 0.25 * dec:
            u, f, g, H = u + d, fn, gn, Hn
            if comp.quadratic:  # one full Newton step solves a quadratic exactly
                return u, it, True, f
            continue
        step = 0.5
        while step > 1e-12:
            fn = composite_eval(comp, Js, Qs, u + step * d, ridge, 0)[0]
            if fn <= f - 0.25 * step * dec:
                break
            step *= 0.5
        else:
            return u, it, abs(dec) <= 1e-8 * (1 + abs(f)), f
        u = u + step * d
        f, g, H = composite_eval(comp, Js, Qs, u, ridge, 2)
    return u, max_iter, False, f


def solve_lbfgs(
    lp: LoweredProblem,
    cols: np.ndarray,
    u0: np.ndarray,
    ridge: np.ndarray | None,
    tol: float = 1e-12,
    max_iter: int = 2000,
) -> tuple[np.ndarray, int, bool, float]:
    """L-BFGS-B over the coordinates ``cols`` with the evaluator's restricted gradient; returns
    (u, iterations, success, f(u) including the ridge)."""
    from scipy.optimize import minimize as sp_minimize

    x = np.zeros(lp.n)

    def fun(u: np.ndarray) -> tuple[float, np.ndarray]:
        x[:] = 0.0
        x[cols] = u
        f, g = lp.value_and_grad(x, coords=cols)
        gu = g[cols]
        if ridge is not None:
            f += 0.5 * float(np.sum(ridge * u * u))
            gu = gu + ridge * u
        if not np.isfinite(f):
            return np.inf, np.zeros_like(u)
        return f, gu

    res = sp_minimize(
        fun,
        u0,
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": max_iter, "ftol": tol, "gtol": 1e-10, "maxcor": 30},
    )
    return res.x, int(res.nit), bool(res.success), float(res.fun)


__all__ = [
    "RestrictedResult",
    "ColumnCache",
    "composite_eval",
    "lstsq_dense",
    "solve_lstsq",
    "solve_newton",
    "solve_lbfgs",
]
