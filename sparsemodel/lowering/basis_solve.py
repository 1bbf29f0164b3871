"""The restricted solve on a subspace given by a linear basis, x[cols] = B u (``sub.basis``, sparse;
the rest of x zero), such as the piecewise-constant subspace of fused sparsity: the composite
design's columns times B are the reduced problem's columns (least squares or Newton on u); without
a composite form, L-BFGS on u.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ..numerics.evaluation import evaluate
from ..numerics.lstsq import lstsq
from ..numerics.newton import newton
from ..objective.terms import Reduced
from .backend import Request, Solved, subspace_lbfgs
from .data import LoweredData


def basis_solve(lp: LoweredData, sub: Any, req: Request) -> Solved:
    """min f over the span of ``sub.basis`` on ``sub.cols``."""
    method, tol = req.method, req.tol
    B = sub.basis
    u0 = sub.coords_of(req.x0) if req.x0 is not None else np.zeros(sub.dim)
    if lp.design is None or method in ("lbfgs", "cvxpy"):
        return subspace_lbfgs(lp, sub, u0, tol, lp.ev.value_and_grad)
    rd = lp.design.reduced(sub.cols)
    Js = [(B.T @ J.T).T if not sp.issparse(J) else (J @ B) for J in rd.Js]
    rdb = Reduced(
        rd.terms, [np.asarray(J.toarray() if sp.issparse(J) else J) for J in Js], rd.offsets, B.T @ rd.lin, rd.const
    )
    if method == "lstsq":
        u, its = lstsq(rdb, None), 1
        f, ok = evaluate(rdb, u, 0)[0], True
    else:
        res = newton(rdb, u0[None, :], tol=tol)
        u, its, ok, f = res.U[0], res.iterations, bool(res.converged[0]), float(res.values[0])
    lp.oracle.charge(grads=its, ifo=lp.n_samples * its)
    return Solved(sub.embed(u), f, its, ok, method)
