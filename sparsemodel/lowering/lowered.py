"""The lowered problem: the only thing a solver sees.

``LoweredProblem`` is the data of :class:`~sparsemodel.lowering.data.LoweredData` (the flat layout,
the oracle and its counters, the composite design, the recognised forms, the constraint sets, the
run's state and the caches) and the table of what solvers call on it, each operation a function of
that data in its own module:

* restricted solves (:mod:`.restricted`): ``restricted_minimize(state)`` -- min f over the subspace
  of a state (step S3 of GraHTP, the inner solve of OMP/OMPR/ELS/ARHT), through the one table of
  back-ends ``restricted.BACKENDS``; the polish of a precision matrix (:mod:`.precision_solve`);
* step constants (:mod:`.constants`): ``smoothness``, ``mean_curvature``, ``safe_curvature``, the
  Hessian's columns and diagonal;
* guards (:mod:`.guards`): unboundedness, a start inside the domain, a start the set admits;
* the convex relaxations (:mod:`.relax`, in cvxpy).
"""

from __future__ import annotations

from typing import Any

from ..errors import ModelError, SolverError
from . import constants, guards, precision_solve, restricted
from .data import LoweredData


class LoweredProblem(LoweredData):
    """A problem as functions of the flat vector x, for solvers."""

    # restricted solves: dispatched by form to one back-end of restricted.BACKENDS
    restricted_minimize = restricted.restricted_minimize
    restricted_method = restricted.restricted_method
    subspace = restricted.subspace
    polish = precision_solve.polish
    # step-size constants and curvature
    hessian_operator = constants.hessian_operator
    truncation = constants.truncation
    power_budget = constants.power_budget
    restricted_smoothness = constants.restricted_smoothness
    smoothness = constants.smoothness
    safe_curvature = constants.safe_curvature
    mean_curvature = constants.mean_curvature
    stored_columns = constants.stored_columns
    hessian_columns = constants.hessian_columns
    quadratic_origin = constants.quadratic_origin
    hessian_diagonal = constants.hessian_diagonal
    # guards and starts
    unbounded_direction = guards.unbounded_direction
    runs_away = guards.runs_away
    inside_domain = guards.inside_domain
    feasible_start = guards.feasible_start

    def rebind(self, **values: Any) -> LoweredProblem:
        """This lowering with the objective's named data replaced by arrays of the same shapes
        (``lp.rebind(X=X2, y=y2)``): the layout, the sets and the compiled kernel's problem are
        kept, only the numbers are read again (:mod:`.rebind`)."""
        from .rebind import rebind

        return rebind(self, values)

    # ------------------------------------------------------------------ relaxations
    def cvxpy_missing(self) -> ModelError | None:
        """Why the objective cannot be written in cvxpy (a node without a counterpart, located), or
        None: what a solver whose default path is cvxpy (tv, or a relaxation without a composite
        form) must know before it is listed as one that runs."""
        from .cvxpy_lower import missing_counterpart

        return missing_counterpart(self.objective)

    def relaxation(self, kind: str, solver: str = "auto", eigbox: bool = True) -> Any:
        """The convex relaxation ``kind`` ('l1', 'nuclear', 'glasso', 'tv', 'dspca') of this problem, built in cvxpy
        (:mod:`sparsemodel.lowering.relax`); ``solve(lam)`` returns the flat x. ``eigbox=False``
        drops the eigenvalue box from the relaxation."""
        from .relax import DSPCARelaxation, Relaxation

        if kind == "dspca":
            if self.spca is None:
                raise SolverError(
                    f"DSPCA relaxes sparse PCA only; this problem is a {self.structure}",
                    hint="sparse PCA reads: maximize quad_form(w, S) subject to norm(w) <= 1, nnz(w) <= k",
                )
            return DSPCARelaxation(self.spca, self.n, solver)
        eb = self.eigbox if eigbox else None
        return Relaxation(self.objective, self.layout, self.set, kind, solver, box=self.box, eigbox=eb)
