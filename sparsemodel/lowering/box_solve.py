"""The restricted solve on a coordinate subspace inside the problem's coordinate box (``w >= 0``,
``lo <= w <= hi``): coordinates with lo = hi fixed at their value, the others by projected Newton
(:func:`~sparsemodel.numerics.smooth.box_newton`), L-BFGS-B, or cvxpy with the bounds as
constraints (the reference).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..numerics.smooth import box_newton
from .backend import Request, Solved, coordinate_lbfgs, ridge_part, ridge_vector
from .data import LoweredData


def box_solve(lp: LoweredData, sub: Any, req: Request) -> Solved:
    """min f (plus the ridge) over ``sub.cols`` within the box, every other coordinate at zero:
    ``lstsq``/``newton`` by projected Newton, ``lbfgs`` by L-BFGS-B, ``cvxpy`` by cvxpy."""
    cols, method, tol, x0 = sub.cols, req.method, req.tol, req.x0
    r = ridge_vector(lp, req.ridge, cols)
    lo, hi = lp.box.lo[cols], lp.box.hi[cols]
    if method == "cvxpy":
        from .cvxpy_lower import restricted_cvxpy

        u, its = restricted_cvxpy(lp.objective, lp.layout, cols, r, bounds=(lo, hi))
        lp.oracle.charge(ifo=lp.n_samples * its)
        u = np.clip(u, lo, hi)  # interior-point solutions may sit 1e-9 outside
        x = np.zeros(lp.n)
        x[cols] = u
        return Solved(x, None, its, True, method, ridge_part(r, u))
    fixed = lo == hi
    base = np.zeros(lp.n)
    base[cols[fixed]] = lo[fixed]
    vc, lo_v, hi_v = cols[~fixed], lo[~fixed], hi[~fixed]
    r_v = r[~fixed] if r is not None else None
    if r_v is not None and not r_v.any():
        r_v = None
    u0 = np.clip(x0[vc] if x0 is not None else np.zeros(len(vc)), lo_v, hi_v)
    f = None
    if method == "lbfgs":
        u, its, converged, f = coordinate_lbfgs(lp, vc, u0, r_v, tol, bounds=(lo_v, hi_v), base=base)
    else:
        rd = lp.design.reduced(vc, x_fixed=base if base.any() else None)
        res = box_newton(rd, u0, lo_v, hi_v, ridge=r_v, tol=tol)
        u, its, converged, f = res.u, res.iterations, res.converged, res.f
        lp.oracle.charge(grads=its, ifo=lp.n_samples * its)
    x = base
    x[vc] = u
    return Solved(x, f, its, converged, method, ridge_part(r_v, u))
