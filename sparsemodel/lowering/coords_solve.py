"""The restricted solve on a coordinate subspace (a support and the free coordinates): least squares
by QR/Cholesky (or the normal equations from one pass over chunked data), composite losses by the
damped Newton loop, L-BFGS without a composite form, cvxpy (the reference).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..numerics.evaluation import evaluate
from ..numerics.lstsq import lstsq, lstsq_normal
from ..numerics.newton import newton
from .backend import Request, Solved, coordinate_lbfgs, ridge_part, ridge_vector
from .data import LoweredData
from .guards import inside_domain


def coords_solve(lp: LoweredData, sub: Any, req: Request) -> Solved:
    """min f (plus the ridge) over the coordinates ``sub.cols``, every other coordinate at zero."""
    cols = sub.cols
    r = ridge_vector(lp, req.ridge, cols)
    x0, method, tol = req.x0, req.method, req.tol
    u0 = x0[cols] if x0 is not None else np.zeros(len(cols))
    converged = True
    f = None
    d1 = hess = None
    if method == "cvxpy":
        from .cvxpy_lower import restricted_cvxpy

        u, its = restricted_cvxpy(lp.objective, lp.layout, cols, r)
        lp.oracle.charge(ifo=lp.n_samples * its)
    elif method == "lbfgs":
        u, its, converged, f = coordinate_lbfgs(lp, cols, u0, r, tol)
    else:
        ne = lp.design.normal_equations(cols) if method == "lstsq" and lp.design.chunked else None
        if ne is not None:  # chunked data: X_S'X_S and X_S'y in one pass, a Cholesky on the driver
            G, h, c0 = ne
            u, its = lstsq_normal(G + np.diag(0.5 * r) if r is not None else G, h), 1
            f = c0 + float(u @ (G @ u)) - 2.0 * float(h @ u) + (0.5 * float(np.sum(r * u * u)) if r is not None else 0)
        elif method == "lstsq":
            rd = lp.design.reduced(cols)
            u, its = lstsq(rd, r), 1
            f = evaluate(rd, u, 0, r)[0]
        else:
            rd = lp.design.reduced(cols)
            kh = _hint_positions(req.hint, cols)
            res = newton(rd, u0[None, :], ridge=r, tol=tol, give_up=req.give_up, hint=kh)
            if not np.isfinite(res.values[0]):  # the start lies outside the loss's domain
                u1 = inside_domain(lp, _embed(cols, u0, lp.n))[cols]
                res = newton(rd, u1[None, :], ridge=r, tol=tol, give_up=req.give_up)
            u, its, converged, f = res.U[0], res.iterations, bool(res.converged[0]), float(res.values[0])
            d1 = res.d1 if np.isfinite(f) else None
            hess = (cols, *res.hessian) if res.hessian is not None else None
        lp.oracle.charge(grads=its, ifo=lp.n_samples * its)
    return Solved(_embed(cols, u, lp.n), f, its, converged, method, ridge_part(r, u), d1, hess)


def _hint_positions(hint: Any, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray, Any] | None:
    """A previous solve's (columns, Hessian, curvatures) as the kernel's hint for the columns
    ``cols``: each column's position among the previous ones (-1 when new)."""
    if hint is None or len(hint[0]) == 0:
        return None
    prev, G, ref = hint
    order = np.argsort(prev, kind="stable")
    ordered = prev[order]
    at = np.minimum(np.searchsorted(ordered, cols), len(ordered) - 1)
    return np.where(ordered[at] == cols, order[at], -1).astype(np.int64), G, ref


def _embed(cols: np.ndarray, u: np.ndarray, n: int) -> np.ndarray:
    x = np.zeros(n)
    x[cols] = u
    return x
