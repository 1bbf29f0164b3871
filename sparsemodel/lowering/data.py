"""The data of a lowered problem: what every restricted-solve back-end, step constant and guard reads.

``LoweredData`` turns a :class:`~sparsemodel.model.problem.Model` into

* ``layout`` -- every variable in one flat vector x; ``ev`` its evaluator (reverse mode over the
  objective's tree);
* ``oracle`` -- value, gradient, Hessian-vector products and the run's counters
  (:mod:`~sparsemodel.objective.oracle`; a fresh one per run, see :meth:`LoweredData.fresh`);
* ``design`` -- the composite form of the objective when it has one (:mod:`~sparsemodel.objective.design`):
  the data behind one interface, columns for any subspace, rows for any sample subset;
* the recognised forms without a design: ``precision`` (the Gaussian log-likelihood of a precision
  matrix) and ``spca`` (sparse PCA, :mod:`~sparsemodel.model.forms`);
* ``set`` -- the constraint set that carries the bound and is projected onto by hard thresholding
  (:mod:`~sparsemodel.sets`), ``side`` -- the convex sets kept inside restricted solves;
* the run's state (the options of subproblem (13) and the ADMM's warm start) and the caches the
  back-ends and the step constants keep per lowering.

:class:`~sparsemodel.lowering.lowered.LoweredProblem` is this data and the table of what solvers
call on it (each operation a function of the data in its own module).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Self

import numpy as np

from ..errors import ConstraintError
from ..model.forms import sparse_pca
from ..objective.design import Design
from ..objective.evaluator import Evaluator, Layout
from ..objective.oracle import Oracle
from ..objective.precision import LogdetForm, logdet_form
from ..objective.structure import decompose
from ..sets.base import ConstraintSet
from ..sets.registry import assemble
from ..util import shallow_copy

if TYPE_CHECKING:
    from ..model.problem import Model
    from ..sets.sparsity import CoordinateSparsity

ADMM_DEFAULTS = {  # subproblem (13): the ADMM of paper 000, App. D.2, and covsel (HTF Algorithm 17.1)
    "tol": 1e-9,
    "rho": 1.0,
    "max_iter": 5000,
    "adaptive": True,
    "covsel_tol": 1e-6,
    "covsel_max_sweeps": 100,
}


class SparsePCAData:
    """What the sparse PCA solvers read: S (the form maximized, p x p), the flat coordinates of w,
    the radius, and the bound k (the problem's set carries the bound used)."""

    def __init__(self, form: Any, layout: Layout):
        self.form = form
        self.S = form.S
        self.coords = layout.coords(form.variable)
        self.radius = form.radius
        self.spelling = form.spelling

    def embed(self, w: np.ndarray, n: int) -> np.ndarray:
        x = np.zeros(n)
        x[self.coords] = w
        return x


class LoweredData:
    """A problem as arrays over the flat vector x: its objective's forms, its sets, the run's state."""

    def __init__(self, problem: Model, budget: int | None = None):
        self.problem = problem
        self.layout = Layout(problem.variables)
        self.n = self.layout.n
        self.objective = problem.objective.expr
        self.ev = Evaluator(self.objective, self.layout)
        # sparse PCA (model/forms.py): maximize w'Sw subject to norm(w) <= r, nnz(w) <= k; its -w'Sw is
        # no composite loss (a concave square), so it has no design: its solvers read S
        spca = sparse_pca(problem.objective, problem.constraints)
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
        self.subproblem: dict[str, Any] = dict(ADMM_DEFAULTS)  # options of subproblem (13): fresh()'s argument
        self.forget_numbers()

    def __getattr__(self, name: str) -> Any:
        # a rebound lowering (lowering/rebind.py) builds its objective's tree on first use: a solve
        # on its design never reads it
        if name == "objective":
            self.objective = self.problem.objective.expr
            return self.objective
        raise AttributeError(name)

    def forget_numbers(self) -> None:
        """New (empty) caches of what was computed from the data's numbers: at lowering, and after
        new data of the same shape is bound (lowering/rebind.py; the old lowering keeps its own)."""
        self._admm_warm: dict[str, Any] = {}  # the last ADMM multiplier (warm start; reset per run)
        self._lowrank_cache: dict[Any, Any] = {}
        self._free_cache: dict[bytes, Any] = {}  # (grad f(0), H[:, free]) of a quadratic objective
        self._sq_cache: dict[int, Any] = {}  # term -> (its Jacobian, the squares of its entries)
        self._rowsq_cache: dict[Any, Any] = {}  # (term, C) -> row sums of J[:, C]^2 (and row Grams)
        self._hcol_cache: dict[str, Any] = {}  # the columns of a constant Hessian computed so far
        self.bound_cache: dict[Any, Any] = {}  # the perspective relaxations (lowering/bound.py), per set and form
        self.guard_cache: dict[
            Any, Any
        ] = {}  # unbounded_direction's verdict per set (lowering/guards.py), a solver's check
        # what a solver derives from the numbers and the set's coordinates but not from its bound
        # (ARHT's B = min_x f and rho_2^+): once per lowering, shared by its copies at every bound
        self.solver_cache: dict[Any, Any] = {}

    # ------------------------------------------------------------------ copies
    def fresh(self, subproblem: dict[str, Any] | None = None) -> Self:
        """A copy for one run: its own oracle (zeroed counters) and ADMM warm start, and the run's
        options of the precision-matrix subproblem (13) (``subproblem``: keys of ADMM_DEFAULTS, the
        defaults for the rest); data, design and caches shared. Nothing sets these afterwards."""
        lp = shallow_copy(self)
        lp.oracle = self.oracle.fresh()
        lp._admm_warm = {}
        lp.subproblem = {**ADMM_DEFAULTS, **(subproblem or {})}
        return lp

    def with_budget(self, budget: int) -> Self:
        lp = self.fresh()
        if self.set is None:
            raise ConstraintError(f"a bound ({budget}) was given but the problem has no bounded constraint")
        lp.set = self.set.with_budget(budget)
        return lp

    def with_set(self, s: ConstraintSet) -> Self:
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
