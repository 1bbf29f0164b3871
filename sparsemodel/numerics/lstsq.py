"""Least squares on the columns of a reduced design: Cholesky/QR of the stacked weighted columns,
LSQR when they are sparse and many, normal equations from one pass over chunked data.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from ..objective.terms import Reduced
from . import newton as _newton
from .evaluation import is_operator


def lstsq(rd: Reduced, ridge: np.ndarray | None = None) -> np.ndarray:
    """Minimize sum_t c_t ||w_t^(1/2) (J_t u + z0_t)||^2 (+ ridge/2 ||u||^2) over u."""
    blocks, rhs = [], []
    anysparse = any(sp.issparse(J) for J in rd.Js)
    for t, J, z0 in zip(rd.terms, rd.Js, rd.offsets):
        s = np.sqrt(t.coef) * (np.sqrt(t.weights) if t.weights is not None else 1.0)
        if sp.issparse(J):
            blocks.append(sp.diags(np.broadcast_to(s, (J.shape[0],))) @ J)
        else:
            blocks.append(J * (s[:, None] if np.ndim(s) else s))
        rhs.append(-(s * z0))
    if ridge is not None:
        Rd = np.sqrt(0.5 * ridge)
        blocks.append(sp.diags(Rd) if anysparse else np.diag(Rd))
        rhs.append(np.zeros(len(ridge)))
    r = np.concatenate(rhs) if len(rhs) > 1 else rhs[0]
    if any(map(is_operator, rd.Js)):
        return _lsqr_operator(rd, ridge, r)
    if anysparse and rd.d > _newton.MATRIX_FREE_DIM:
        from scipy.sparse.linalg import lsqr

        M = sp.vstack([sp.csr_matrix(B) for B in blocks]).tocsr()
        return lsqr(M, r, atol=1e-14, btol=1e-14, iter_lim=20 * rd.d)[0]
    if anysparse:
        blocks = [B.toarray() if sp.issparse(B) else B for B in blocks]
    M = np.vstack(blocks) if len(blocks) > 1 else blocks[0]
    return lstsq_dense(M, r)


def _lsqr_operator(rd: Reduced, ridge: np.ndarray | None, r: np.ndarray) -> np.ndarray:
    """Least squares with matrix-free columns: conjugate gradients on the normal equations (CGLS
    through LSQR) of the stacked weighted operator."""
    from scipy.sparse.linalg import lsqr

    scales = [
        np.broadcast_to(np.sqrt(t.coef) * (np.sqrt(t.weights) if t.weights is not None else 1.0), (J.shape[0],))
        for t, J in zip(rd.terms, rd.Js)
    ]
    sizes = [J.shape[0] for J in rd.Js]
    Rd = np.sqrt(0.5 * ridge) if ridge is not None else None
    total = sum(sizes) + (rd.d if Rd is not None else 0)

    def mv(u: np.ndarray) -> np.ndarray:
        parts = [s * (J @ u) for s, J in zip(scales, rd.Js)]
        if Rd is not None:
            parts.append(Rd * u)
        return np.concatenate(parts)

    def rmv(y: np.ndarray) -> np.ndarray:
        out = np.zeros(rd.d)
        o = 0
        for s, J, n in zip(scales, rd.Js, sizes):
            out += J.T @ (s * y[o : o + n])
            o += n
        if Rd is not None:
            out += Rd * y[o:]
        return out

    M = LinearOperator((total, rd.d), matvec=mv, rmatvec=rmv, dtype=float)
    return lsqr(M, r, atol=1e-14, btol=1e-14, iter_lim=20 * rd.d)[0]


def lstsq_normal(G: np.ndarray, H: np.ndarray) -> np.ndarray:
    """Solve the normal equations G C = H (G symmetric positive semidefinite): Cholesky, or the
    minimum-norm least-squares solution when G is singular."""
    try:
        c = sla.cho_factor(G, check_finite=False)
        d = np.abs(np.diag(c[0]))
        if d.min() > 1e-7 * d.max():
            return sla.cho_solve(c, H, check_finite=False)
    except (np.linalg.LinAlgError, ValueError):
        pass
    return np.linalg.lstsq(G, H, rcond=None)[0]


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
