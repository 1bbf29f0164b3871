"""Restricted solves on the subspaces of a low-rank point ({U C}, {C V'}, {U C V'}): the reduced
design materialized when small, matrix free otherwise, free coordinates eliminated exactly on
least squares.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg as sla
from scipy.sparse.linalg import LinearOperator

from ..numerics.evaluation import evaluate
from ..numerics.lstsq import lstsq, lstsq_normal
from ..numerics.newton import newton
from ..objective.design import Design
from ..objective.terms import Reduced
from ..sets.lowrank import LowRankSubspace
from .backend import Request, Solved, subspace_lbfgs
from .data import LoweredData

MATERIALIZE_LIMIT = 4_000_000  # entries of J B formed explicitly for a low-rank restricted solve


def _psd_solver(A: np.ndarray, rcond: float = 1e-12) -> Any:
    """y -> A^+ y for a symmetric positive semidefinite A: by Cholesky when A is well conditioned,
    else by the pseudo-inverse (eigenvalues below rcond times the largest taken as zero). None when A
    has a clearly negative eigenvalue or is not finite."""
    A = (A + A.T) / 2
    if not np.all(np.isfinite(A)):
        return None
    if A.size:
        try:
            c = sla.cho_factor(A, check_finite=False)
            d = np.abs(np.diag(c[0]))
            if d.min() > 1e-5 * d.max():  # condition number below 1e10
                return lambda y: sla.cho_solve(c, y, check_finite=False)
        except (np.linalg.LinAlgError, ValueError):
            pass
    lam, Q = np.linalg.eigh(A)
    top = float(lam[-1]) if lam.size else 0.0
    if lam.size and lam[0] < -1e-8 * max(top, 1e-300):
        return None
    keep = lam > rcond * max(top, 1e-300)
    P = (Q[:, keep] / lam[keep]) @ Q[:, keep].T
    return lambda y: P @ y


def _operator(m: Any, d: int) -> LinearOperator:
    """An affine map's linear part as a scipy LinearOperator over d reduced coordinates."""
    return LinearOperator(
        (m.size, d),
        matvec=lambda v: m.value(np.ravel(v)) - m.b,
        rmatvec=lambda y: m.vjp(np.ravel(y)),
        dtype=float,
    )


class _FlatLayout:
    """The layout of a reduced problem's coordinates (no variables to symmetrize)."""

    def __init__(self, n: int):
        self.n = n

    @staticmethod
    def symmetrize_grad(g: np.ndarray) -> np.ndarray:
        return g


def lowrank_solve(lp: LoweredData, sub: LowRankSubspace, req: Request) -> Solved:
    """min f over the subspace of a low-rank point (the back-end of form ``lowrank``)."""
    return _minimize(lp, sub, req.x0, req.method, req.tol)


def _minimize(lp: LoweredData, sub: LowRankSubspace, x0: np.ndarray | None, method: str, tol: float) -> Solved:
    """min f over {x : W = U C (or C Vt, U C Vt), free coordinates anything}; side
    ``alternate``: the column refit, then the row refit on the row space of its result.

    With a canonical design the reduced design (data X U, or X with V' on the right) is built
    once per subspace and minimized by the kernels (direct when small, matrix-free Newton-CG /
    LSQR when large). Otherwise: L-BFGS on u -> f(embed(u)) with the gradient restrict(grad f)."""
    if sub.side == "alternate":
        col = _minimize(lp, sub.on_side("column"), x0, method, tol)
        C = sub.U.T @ col.x[sub.W].reshape(sub.shape)
        Vt = np.linalg.svd(C, full_matrices=False)[2][: sub.U.shape[1]]
        row = _minimize(lp, sub.on_side("row", Vt=Vt), col.x, method, tol)
        return Solved(row.x, row.f, col.iterations + row.iterations, col.converged and row.converged, row.method)
    u0 = sub.coords_of(x0) if x0 is not None else np.zeros(sub.dim)
    if method == "cvxpy":
        from .cvxpy_lower import restricted_cvxpy

        E = np.column_stack([sub.embed(e) for e in np.eye(sub.dim)]) if sub.dim else np.zeros((lp.n, 0))
        u, its = restricted_cvxpy(lp.objective, lp.layout, None, embed=E)
        lp.oracle.charge(ifo=lp.n_samples * its)
        return Solved(sub.embed(u), None, its, True, "cvxpy")
    red = reduced_design(lp, sub) if lp.design is not None else None
    if red is not None and method == "lstsq" and len(sub.free):
        out = free_lstsq(lp, sub, red)
        if out is not None:
            return out
    if red is not None and method == "lstsq" and not len(sub.free):
        ne = red.matrix_least_squares(*sub.cshape)
        if ne is not None:  # decoupled normal equations: one small system, many right-hand sides
            G, H, _ = ne
            C = lstsq_normal(G, H)
            lp.oracle.charge(grads=1, ifo=lp.n_samples)
            return Solved(sub.embed(C.ravel()), None, 1, True, method)
    if red is not None and method in ("lstsq", "newton"):
        d = sub.dim
        size = sum(t.map.size for t in red.terms)
        small = d * size <= MATERIALIZE_LIMIT
        if small:
            rd = red.reduced(np.arange(d))
        else:
            rd = Reduced(
                red.terms,
                [_operator(t.map, d) for t in red.terms],
                [t.map.b for t in red.terms],
                red.lin.copy(),
                red.const,
            )
        if method == "lstsq":
            u, its = lstsq(rd), 1
            f = evaluate(rd, u, 0)[0] if small else None
            converged = True
        else:
            res = newton(rd, u0[None, :], tol=tol)
            u, its, converged, f = res.U[0], res.iterations, bool(res.converged[0]), float(res.values[0])
        lp.oracle.charge(grads=its, ifo=lp.n_samples * its)
        return Solved(sub.embed(u), f, its, converged, method)
    return subspace_lbfgs(lp, sub, u0, tol, (lp.design if lp.design is not None else lp.ev).value_and_grad)


def free_lstsq(lp: LoweredData, sub: LowRankSubspace, red: Design) -> Solved | None:
    """Least squares on a low-rank subspace with free coordinates (an intercept, other
    variables), the free block eliminated exactly: with u = (c, v) (c = C flattened, v the free
    coordinates) the reduced problem is the quadratic f(0) + g'u + u'Hu / 2 whose blocks are

    * H_cc = 2 (G (x) I): the decoupled normal equations of the matrix part alone
      (:meth:`Design.matrix_least_squares` with the free blocks left out), q x q;
    * H_cv = E_c' H[:, free] and H_vv = H[free, free], and g = E' grad f(0): the Hessian columns
      of the free coordinates and the gradient at zero in the problem's own coordinates, which
      do not depend on the subspace (computed once per lowering, :func:`free_quadratic`), taken
      to the subspace by one product per side (E the embedding of the subspace);

    then v solves the q x q Schur complement (H_vv - H_vc H_cc^-1 H_cv) v = H_vc H_cc^-1 g_c - g_v
    and C = -H_cc^-1 (g_c + H_cv v). The cost is the centered problem's (the same G) plus
    products with the free columns: a GraHTP iteration on ``X @ W + b`` costs that of the
    centered problem instead of a dense QR of the (n m) x (r m + m) reduced design (350 times
    slower per iteration on digits, W 32 x 32, n = 1300, r = 2). G and the Schur complement are
    inverted on their ranges (pixels that are always zero make G singular; H_cv and g_c lie in
    its range, so the answer is a minimizer, C of least norm). None when the design has another
    form (the generic solve then runs)."""
    a, b = sub.cshape
    free = sub.free
    if a * b == 0:  # rank 0 (a start at zero): the free coordinates alone
        if lp.design is None or not lp.design.least_squares:
            return None
        g0, Hf = free_quadratic(lp, free)
        solve = _psd_solver(Hf[free])
        if solve is None:
            return None
        lp.oracle.charge(grads=1, ifo=lp.n_samples)
        return Solved(sub.embed(-solve(g0[free])), None, 1, True, "lstsq")
    ne = red.matrix_least_squares(a, b, n_free=len(free))
    if ne is None:
        return None
    Gsolve = _psd_solver(ne[0])
    if Gsolve is None:
        return None
    g0, Hf = free_quadratic(lp, free)
    gr = sub.restrict(g0)
    gc, gv = gr[: a * b], gr[a * b :]
    Hcv = sub.restrict_columns(Hf)  # (a b) x q
    Hvv = Hf[free]

    def solve_cc(Y: np.ndarray) -> np.ndarray:  # H_cc^+ Y for columns Y ((a b) x c)
        return (Gsolve(Y.reshape(a, -1)) / 2.0).reshape(a * b, -1)

    Z = solve_cc(Hcv)
    zc = solve_cc(gc[:, None])[:, 0]
    Ssolve = _psd_solver(Hvv - Hcv.T @ Z)
    if Ssolve is None:
        return None
    v = Ssolve(Hcv.T @ zc - gv)
    c = -zc - Z @ v
    lp.oracle.charge(grads=1, ifo=lp.n_samples)
    return Solved(sub.embed(np.concatenate([c, v])), None, 1, True, "lstsq")


def free_quadratic(lp: LoweredData, free: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(grad f(0), H[:, free]) of a quadratic objective, computed once per lowering (q Hessian-
    vector products for q free coordinates; shared by every run on this lowering)."""
    key = free.tobytes()
    if key not in lp._free_cache:
        zero = np.zeros(lp.n)
        g0 = lp.design.value_and_grad(zero)[1]
        Hf = np.empty((lp.n, len(free)))
        e = np.zeros(lp.n)
        for i, j in enumerate(free):
            e[j] = 1.0
            Hf[:, i] = lp.design.hvp(zero, e)
            e[j] = 0.0
        lp._free_cache.clear()
        lp._free_cache[key] = (g0, Hf)
    return lp._free_cache[key]


def reduced_design(lp: LoweredData, sub: LowRankSubspace) -> Design | None:
    """The design on the subspace's coordinates (data X U, or X with V' on the right; the free
    coordinates after C), kept for the last few subspaces."""
    U = sub.U if sub.side in ("column", "both") else None
    Vt = sub.Vt if sub.side in ("row", "both") else None
    key = (sub.side, None if U is None else U.tobytes(), None if Vt is None else Vt.tobytes())
    if key in lp._lowrank_cache:
        return lp._lowrank_cache[key]
    a, b = sub.cshape
    where = np.full(lp.n, -1, dtype=np.int64)
    where[sub.free] = a * b + np.arange(len(sub.free))
    red = lp.design.low_rank(sub.W, sub.shape, U, Vt, _FlatLayout(sub.dim), np.arange(a * b), where)
    if len(lp._lowrank_cache) > 4:
        lp._lowrank_cache.clear()
    lp._lowrank_cache[key] = red
    return red
