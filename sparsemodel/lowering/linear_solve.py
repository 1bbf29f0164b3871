"""Restricted solves under linear constraints (``A @ w == b``, ``A @ w <= b``, with the box): min f
over the coordinates of a support with the constraints kept, by

* ``lstsq`` / ``newton`` (a composite objective with stored columns): sequential quadratic
  programming (:func:`sparsemodel.numerics.qp.constrained_newton`): each step the QP of the exact
  Newton model under the constraints by the active-set method, the KKT system of the working set
  (one KKT solve per step when there are only equalities); on least squares the first step is the
  answer;
* ``lbfgs`` (no composite form, or matrix-free columns): scipy's SLSQP on value and gradient;
* ``cvxpy``: the reference, the same problem with the constraints in cvxpy.

A support on which the constraints cannot hold gives f = +inf (not converged), so that a search
rejects it; the sets never hand such a support to a solver (sets/linear.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..numerics.qp import constrained_newton, dense_design, slsqp
from .backend import Request, Solved, coordinate_objective, ridge_part, ridge_vector
from .data import LoweredData

SQP_DIM_LIMIT = 1500  # a restricted problem larger than this (or matrix free) goes to SLSQP


def linear_solve(lp: LoweredData, sub: Any, req: Request) -> Solved:
    """min f (plus the ridge) on ``sub.cols`` under the linear constraints and the box (every
    other coordinate at zero)."""
    cols, method, tol = sub.cols, req.method, req.tol
    r = ridge_vector(lp, req.ridge, cols)
    P = lp.linear.polyhedron(cols, lp.box)
    u0 = req.x0[cols] if req.x0 is not None else None
    x = np.zeros(lp.n)
    if method == "cvxpy":
        from .cvxpy_lower import restricted_cvxpy

        u, its = restricted_cvxpy(lp.objective, lp.layout, cols, r, bounds=(P.lo, P.hi), linear=P)
        lp.oracle.charge(ifo=lp.n_samples * its)
        x[cols] = np.clip(u, P.lo, P.hi)
        return Solved(x, None, its, True, method, ridge_part(r, x[cols]))
    if method in ("lstsq", "newton") and lp.design is not None:
        rd = lp.design.reduced(cols)
        if len(cols) <= SQP_DIM_LIMIT and dense_design(rd):
            res = constrained_newton(rd, u0, P, ridge=r, tol=tol)
            lp.oracle.charge(grads=res.iterations + 1, ifo=lp.n_samples * (res.iterations + 1))
            if res.u is None:
                return Solved(x, np.inf, res.iterations, False, method)
            x[cols] = res.u
            return Solved(x, res.f, res.iterations, res.converged, method, ridge_part(r, res.u))
    fun, calls = coordinate_objective(lp, cols, r)
    res = slsqp(fun, u0, P, tol=tol)
    lp.oracle.charge(grads=calls[0], ifo=lp.n_samples * calls[0])
    if res.u is None:
        return Solved(x, np.inf, res.iterations, False, method)
    x[cols] = res.u
    return Solved(x, None, res.iterations, res.converged, method, ridge_part(r, res.u))
