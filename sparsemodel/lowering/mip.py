"""The big-M mixed-integer reference: the best subset of a sparsity-constrained problem solved
exactly by a mixed-integer solver through cvxpy (SCIP, the ``mip`` extra), what bnb and the lower
bounds are checked against (docs/certify.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import ModelError
from .bound import relaxation
from .cvxpy_lower import box_constraints, lower_expr

if TYPE_CHECKING:
    from .lowered import LoweredProblem


# the mixed-integer solvers cvxpy can hand a big-M model with a quadratic or conic objective to, in
# order; HiGHS (installed with cvxpy) takes mixed-integer *linear* programs only, and refused the
# least-squares reference in a clean environment without SCIP
MIP_SOLVERS = ("SCIP", "GUROBI", "MOSEK", "CPLEX", "XPRESS")


def mip_available() -> str | None:
    """The first installed mixed-integer solver that takes the big-M model (SCIP: second-order
    cones, so least squares and Huber; the ``mip`` extra installs it), or None."""
    try:
        import cvxpy as cp
    except ImportError:  # pragma: no cover - cvxpy is a dependency
        return None
    have = cp.installed_solvers()
    return next((s for s in MIP_SOLVERS if s in have), None)


def mip_reference(
    lp: LoweredProblem, M: np.ndarray | float | None = None, time_limit: float = 120.0
) -> tuple[float, np.ndarray]:
    """The best subset as a mixed-integer program (the reference of bnb and of the lower bounds,
    docs/certify.md): the model's objective in cvxpy over every coordinate, a binary indicator per unit of the
    sparsity set, |x_j| <= M_j z_u(j), sum_u z_u <= k, and the model's box. ``M``: a bound on the
    constrained coordinates valid at the optimum (default: the box where finite, else
    sqrt(2 f_max / r_j) from a ridge r_j x_j^2 / 2 and an objective that is at least 0 elsewhere,
    f_max the objective of the zero-budget point). Returns (f, flat x). Raises ModelError when no
    mixed-integer solver is installed or the objective needs cones it does not take (logistic:
    exponential cones)."""
    import cvxpy as cp

    solver = mip_available()
    if solver is None:
        raise ModelError("no mixed-integer solver for cvxpy is installed", hint="pip install 'sparsemodel[mip]' (SCIP)")
    units = lp.set.bound_units()
    n = lp.n
    x = cp.Variable(n)
    obj = lower_expr(lp.objective, lp.layout, x, np.arange(n))
    C = units.coords
    if M is None:
        lo = lp.box.lo[C] if lp.box is not None else np.full(len(C), -np.inf)
        hi = lp.box.hi[C] if lp.box is not None else np.full(len(C), np.inf)
        Mv = np.maximum(np.abs(lo), np.abs(hi))
        if not np.all(np.isfinite(Mv)):
            r = relaxation(lp).r[C]
            f0 = float(lp.restricted_minimize(lp.set.empty()).f)
            with np.errstate(divide="ignore"):
                Mr = np.sqrt(2 * max(f0, 0.0) / r)
            Mv = np.where(np.isfinite(Mv), Mv, Mr)
        if not np.all(np.isfinite(Mv)):
            raise ModelError("no big-M bound for the mixed-integer reference: give M, a box, or a ridge")
    else:
        Mv = np.broadcast_to(np.asarray(M, dtype=float), (len(C),))
    z = cp.Variable(units.n_units, boolean=True)
    zc = z[units.unit_of]
    cons = [x[C] <= cp.multiply(Mv, zc), x[C] >= -cp.multiply(Mv, zc), cp.sum(z) <= units.budget]
    if lp.box is not None:
        cons += box_constraints(x, (lp.box.lo, lp.box.hi))
    prob = cp.Problem(cp.Minimize(obj), cons)
    opts = {"scip_params": {"limits/time": time_limit, "limits/gap": 1e-9}} if solver == "SCIP" else {}
    try:
        prob.solve(solver=solver, **opts)
    except cp.error.SolverError as exc:
        raise ModelError(f"the mixed-integer reference failed: {exc}") from None
    except Exception as exc:  # cvxpy refuses cones the solver does not take (DCPError, ...)
        raise ModelError(f"the mixed-integer reference cannot take this objective with {solver}: {exc}") from None
    if x.value is None:
        raise ModelError(f"the mixed-integer reference ended {prob.status}")
    xv = np.asarray(x.value, dtype=float).ravel()
    xv[C] = np.where(np.repeat(np.asarray(z.value) > 0.5, 1)[units.unit_of], xv[C], 0.0)
    return float(lp.f(xv)), xv
