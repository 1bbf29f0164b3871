"""Restricted solves on the subspace of a product of sets (several bounded variables): min f over
x = E u, E the product of the parts' subspaces and of the free coordinates
(:class:`~sparsemodel.sets.product.ProductSubspace`), every part refitted jointly.

The parts can be of any form (a support, the column space of a low-rank point, the pieces of a
piecewise-constant vector): the solve reads them only through ``embed`` and ``restrict``. With a
composite objective the reduced design J E is materialized when small (the stored Jacobian times
the dense embedding) and minimized by the kernels (least squares, Newton); above
``MATERIALIZE_LIMIT`` it stays matrix free (LSQR, Newton-CG on u -> J embed(u)). Without a
composite form: L-BFGS on u -> f(embed(u)) with the gradient restrict(grad f). ``cvxpy`` is the
reference (the dense embedding handed to :func:`~.cvxpy_lower.restricted_cvxpy`).

On robust PCA, min ||X - L - S||^2 with L = U C (U the column space of the thresholded L, C free)
and S on a support, the joint refit is one least-squares problem in (C, S_support); the low-rank
part is refitted on its column space only (a product does not run the row refit of a lone
``rank`` set's ``alternate`` side).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from ..errors import SolverError
from ..numerics.lstsq import lstsq
from ..numerics.newton import newton
from ..objective.terms import Reduced
from .backend import Request, Solved, subspace_lbfgs
from .constants import stored_columns
from .data import LoweredData

MATERIALIZE_LIMIT = 4_000_000  # entries of the reduced design J E (rows x dim) formed for a product solve


def _dense(M: Any) -> np.ndarray:
    return np.asarray(M.toarray() if sp.issparse(M) else M, dtype=float)


def _operator(m: Any, sub: Any) -> LinearOperator:
    """u -> A embed(u) (the linear part of an affine map on the subspace), matrix free."""
    return LinearOperator(
        (m.size, sub.dim),
        matvec=lambda u: m.value(sub.embed(np.ravel(u))) - m.b,
        rmatvec=lambda y: sub.restrict(m.vjp(np.ravel(y))),
        dtype=float,
    )


SPARSE_DENSITY = 0.1  # J E with at most this share of nonzeros is kept sparse (normal equations by sparse products)


def _sparse_normal(rd: Reduced) -> np.ndarray | None:
    """Least squares on sparse reduced columns by the normal equations, formed with sparse products
    (robust PCA: J E has one or a few entries per row): sum_t c_t J_t' W_t J_t u = -(sum_t c_t J_t'
    W_t b_t + lin / 2), by Cholesky when well conditioned (the test of ``lstsq_dense``), else None."""
    G = np.zeros((rd.d, rd.d))
    h = -0.5 * rd.lin
    for t, J, b in zip(rd.terms, rd.Js, rd.offsets):
        w = t.coef * (t.weights if t.weights is not None else 1.0)
        WJ = sp.diags(np.broadcast_to(w, (J.shape[0],))) @ J
        G += _dense(J.T @ WJ)
        h -= np.asarray(WJ.T @ b).ravel()
    try:
        L = np.linalg.cholesky(G)
    except np.linalg.LinAlgError:
        return None
    dg = np.diag(L)
    if dg.size and dg.min() <= 1e-5 * dg.max():
        return None
    return sla.cho_solve((L, True), h, check_finite=False)


def _value(rd: Reduced, u: np.ndarray) -> float:
    """f(u) of a least-squares reduced design (dense or sparse columns)."""
    f = rd.const + float(rd.lin @ u)
    for t, J, b in zip(rd.terms, rd.Js, rd.offsets):
        r = np.asarray(J @ u).ravel() + b
        f += t.coef * float(np.sum((t.weights if t.weights is not None else 1.0) * r * r))
    return f


def _reduced(lp: LoweredData, sub: Any) -> tuple[Reduced, bool]:
    """The composite design on the subspace: J_t E for each term (materialized when small and
    every term's Jacobian is stored, kept sparse when it is, else matrix free), and whether it is
    materialized."""
    d = lp.design
    size = sum(t.map.size for t in d.terms)
    stored = [stored_columns(lp, i) for i in range(len(d.terms))] if sub.dim * size <= MATERIALIZE_LIMIT else []
    if stored and all(s is not None for s in stored):
        E = sub.embedding()
        Js = [J @ E for J, _ in stored]
        Js = [
            sp.csr_matrix(J) if sp.issparse(J) and J.nnz <= SPARSE_DENSITY * J.shape[0] * J.shape[1] else _dense(J)
            for J in Js
        ]
        lin = E.T @ d.lin
        small = True
    else:
        Js = [_operator(t.map, sub) for t in d.terms]
        lin = sub.restrict(d.lin)
        small = False
    return Reduced(d.terms, Js, [t.map.b for t in d.terms], np.asarray(lin, dtype=float), d.const), small


def product_solve(lp: LoweredData, sub: Any, req: Request) -> Solved:
    """min f over the product subspace ``sub``."""
    x0, method, tol = req.x0, req.method, req.tol
    if lp.precision is not None:
        raise SolverError(
            "restricted solves of a precision-matrix objective (-logdet(O) + trace(S @ O)) over several bounded "
            "variables are not supported",
            hint="keep one bound (nnz(offdiag(O)) <= 2 * k) in a precision-matrix model",
        )
    u0 = sub.coords_of(x0) if x0 is not None else np.zeros(sub.dim)
    if method == "cvxpy":
        from .cvxpy_lower import restricted_cvxpy

        if sub.dim * lp.n > 4 * MATERIALIZE_LIMIT:
            raise SolverError(
                f"the cvxpy reference solve needs the {lp.n} x {sub.dim} embedding of the product subspace, "
                f"more than {MATERIALIZE_LIMIT} entries",
                hint="use method='auto'",
            )
        u, its = restricted_cvxpy(lp.objective, lp.layout, None, embed=sub.embedding().toarray())
        lp.oracle.charge(ifo=lp.n_samples * its)
        return Solved(sub.embed(u), None, its, True, "cvxpy")
    if lp.design is not None and method in ("lstsq", "newton"):
        rd, small = _reduced(lp, sub)
        if method == "lstsq":
            u = _sparse_normal(rd) if small and all(sp.issparse(J) for J in rd.Js) else None
            if u is None:
                rd = rd.dense() if small else rd
                u = lstsq(rd)
            its, ok = 1, True
            f = _value(rd, u) if small else None
        else:
            res = newton(rd.dense() if small else rd, u0[None, :], tol=tol)
            u, its, ok, f = res.U[0], res.iterations, bool(res.converged[0]), float(res.values[0])
        lp.oracle.charge(grads=its, ifo=lp.n_samples * its)
        return Solved(sub.embed(u), f, its, ok, method)
    return subspace_lbfgs(lp, sub, u0, tol, (lp.design if lp.design is not None else lp.ev).value_and_grad)
