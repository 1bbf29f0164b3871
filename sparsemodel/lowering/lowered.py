"""The lowered problem: the only thing a solver sees.

``LoweredProblem`` turns a :class:`~sparsemodel.model.problem.Model` into

* ``layout`` -- every variable in one flat vector x;
* ``oracle`` -- value, gradient, Hessian-vector products and the run's counters
  (:mod:`~sparsemodel.objective.oracle`; a fresh one per run, see :meth:`LoweredProblem.fresh`);
* ``design`` -- the composite form of the objective when it has one (:mod:`~.design`): the data
  behind one interface, columns for any subspace, rows for any sample subset;
* ``set`` -- the constraint set that carries the bound and is projected onto by hard
  thresholding (:mod:`~.sets`: coordinate sparsity or low rank), and ``side`` -- convex
  constraints kept inside restricted solves (the eigenvalue box);
* ``restricted_minimize(state)`` -- min f over the subspace of a state (step S3 of GraHTP, the
  inner solve of OMP/OMPR/ELS/ARHT), by the kernels of :mod:`~.kernels`;
* ``smoothness`` / ``mean_curvature`` -- the restricted smoothness estimates used for step sizes.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConstraintError, ModelError, SolverError
from ..model.forms import sparse_pca
from ..objective.design import Design
from ..objective.evaluator import Evaluator, Layout
from ..objective.oracle import Oracle
from ..objective.precision import LogdetForm, logdet_form
from ..objective.structure import decompose
from ..sets.base import ConstraintSet
from ..sets.registry import assemble
from .constants import StepConstants
from .guards import Guards
from .linear_solve import LinearSolves
from .lowrank_solve import LowRankSolves
from .precision_solve import ADMM_DEFAULTS, PrecisionSolves
from .restricted import RestrictedSolves
from .spca_solve import SparsePCAData

if TYPE_CHECKING:
    from ..model.problem import Model
    from ..sets.sparsity import CoordinateSparsity


class LoweredProblem(RestrictedSolves, PrecisionSolves, LowRankSolves, LinearSolves, StepConstants, Guards):
    """A problem as functions of the flat vector x, for solvers."""

    def __init__(self, problem: Model, budget: int | None = None):
        self.problem = problem
        self.layout = Layout(problem.variables)
        self.n = self.layout.n
        self.objective = problem.objective.expr
        self.ev = Evaluator(self.objective, self.layout)
        # sparse PCA (model/forms.py): maximize w'Sw subject to norm(w) <= r, nnz(w) <= k; its -w'Sw is
        # no composite loss (a concave square), so it has no design: its solvers read S
        spca = sparse_pca(problem)
        self.spca: SparsePCAData | None = SparsePCAData(spca, self.layout) if spca is not None else None
        comp = decompose(self.objective, self.layout) if spca is None else None
        self.design: Design | None = Design(comp, self.layout) if comp is not None else None
        self.oracle = Oracle(self.ev, self.design, self.layout)
        # the Gaussian log-likelihood c (-logdet(O) + <S, O>) of a precision matrix (paper 000, 5.3)
        self.precision: LogdetForm | None = logdet_form(self.objective, problem.variables)
        S = self.precision.S if self.precision is not None else None
        sets = assemble(problem.constraints, self.layout, S, budget)
        self.set: ConstraintSet | None = sets.main  # the one set projected by hard thresholding
        self.side: list[ConstraintSet] = sets.side  # convex sets kept inside restricted solves
        self.box, self.eigbox = sets.box, sets.eigbox
        self.linear = sets.linear  # every linear constraint (kept inside restricted solves), or None
        self.kinds = {c.kind for c in problem.requirements()}  # the product of several bounds too
        self._admm_warm: dict[str, Any] = {}  # the last ADMM multiplier (warm start; reset per run)
        self.subproblem: dict[str, Any] = dict(ADMM_DEFAULTS)  # options of subproblem (13): fresh()'s argument
        self._lowrank_cache: dict[Any, Any] = {}
        self._free_cache: dict[bytes, Any] = {}  # (grad f(0), H[:, free]) of a quadratic objective
        self._sq_cache: dict[int, Any] = {}  # term -> (its Jacobian, the squares of its entries)
        self._rowsq_cache: dict[Any, Any] = {}  # (term, C) -> row sums of J[:, C]^2 (and row Grams)
        self._hcol_cache: dict[str, Any] = {}  # the columns of a constant Hessian computed so far
        self.bound_cache: dict[Any, Any] = {}  # the perspective relaxations (lowering/bound.py), per set and form

    # ------------------------------------------------------------------ copies
    def fresh(self, subproblem: dict[str, Any] | None = None) -> LoweredProblem:
        """A copy for one run: its own oracle (zeroed counters) and ADMM warm start, and the run's
        options of the precision-matrix subproblem (13) (``subproblem``: keys of ADMM_DEFAULTS, the
        defaults for the rest); data, design and caches shared. Nothing sets these afterwards."""
        lp = copy.copy(self)
        lp.oracle = self.oracle.fresh()
        lp._admm_warm = {}
        lp.subproblem = {**ADMM_DEFAULTS, **(subproblem or {})}
        return lp

    def with_budget(self, budget: int) -> LoweredProblem:
        lp = self.fresh()
        if self.set is None:
            raise ConstraintError(f"a bound ({budget}) was given but the problem has no bounded constraint")
        lp.set = self.set.with_budget(budget)
        return lp

    def rebind(self, **values: Any) -> LoweredProblem:
        """This lowering with the objective's named data replaced by arrays of the same shapes
        (``lp.rebind(X=X2, y=y2)``): the layout, the sets and the compiled kernel's problem are
        kept, only the numbers are read again (:mod:`.rebind`)."""
        from .rebind import rebind

        return rebind(self, values)

    def with_set(self, s: ConstraintSet) -> LoweredProblem:
        lp = copy.copy(self)
        lp.set = s
        return lp

    # ------------------------------------------------------------------ basics
    def project(self, z: np.ndarray, budget: int | None = None, warm: Any = None) -> tuple[np.ndarray, Any]:
        """The projection onto the constraint set (hard thresholding), counted here: every solver's
        hard-thresholding count (#HT) is the number of projections it asked for."""
        self.oracle.thresholded()
        return self.set.project(z, budget, warm=warm)

    @property
    def sparsity(self) -> CoordinateSparsity | None:
        """The coordinate-sparsity set, when the problem's set is one (None otherwise)."""
        return self.set if self.set is not None and self.set.coordinate else None

    @property
    def budget(self) -> int | None:
        return self.set.budget if self.set is not None else None

    @property
    def n_samples(self) -> int:
        return self.oracle.n_samples

    @property
    def structure(self) -> str:
        if self.spca is not None:
            return (
                f"sparse PCA: maximize {self.spca.form.variable.name}'S{self.spca.form.variable.name} on the ball "
                f"of radius {self.spca.radius:g} (restricted solves: the leading eigenvector of S on the support)"
            )
        if self.precision is not None:
            return (
                f"Gaussian log-likelihood of the precision matrix {self.precision.var.name} "
                "(-logdet + trace(S @ .); restricted solves (13): covsel, and where the eigenvalue box is active "
                "barrier Newton (small supports) or the ADMM of paper 000, Appendix D.2)"
            )
        if self.design is not None:
            return self.design.describe()
        return "general smooth objective (L-BFGS restricted solves)"

    @property
    def primary(self):
        for s in [self.set] + self.side:
            if s is not None:
                return s.variable
        return self.layout.variables[0]

    def zeros(self) -> np.ndarray:
        return np.zeros(self.n)

    def f(self, x: np.ndarray) -> float:
        return self.oracle.f(x)

    def value_and_grad(self, x: np.ndarray, coords: np.ndarray | None = None) -> tuple[float, np.ndarray]:
        return self.oracle.value_and_grad(x, coords)

    def grad(self, x: np.ndarray) -> np.ndarray:
        return self.oracle.grad(x)

    def ifo(self) -> int:
        return self.oracle.ifo

    def unpack(self, x: np.ndarray) -> dict[str, np.ndarray]:
        return self.layout.unpack(x)

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
