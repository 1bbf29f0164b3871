"""The lowered problem: the only thing a solver sees.

``LoweredProblem`` turns a :class:`~sparsemodel.model.problem.Problem` into

* ``layout`` -- every variable in one flat vector x;
* ``oracle`` -- value, gradient, Hessian-vector products and the run's counters
  (:mod:`~sparsemodel.compile.oracle`; a fresh one per run, see :meth:`LoweredProblem.fresh`);
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
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from ..errors import ConstraintError, SolverError, UnboundedError
from . import kernels
from .design import Design, Reduced
from .evaluator import Evaluator, Layout
from .oracle import Oracle
from .precision import LogdetForm, logdet_form
from .sets import (
    Box,
    ConstraintSet,
    CoordinateSparsity,
    CoordSubspace,
    EigBox,
    LowRank,
    LowRankSubspace,
    build_set,
    top_k,
)
from .structure import decompose

if TYPE_CHECKING:
    from ..model.problem import Problem

RESTRICTED_METHODS = ("auto", "lstsq", "newton", "lbfgs", "cvxpy", "admm", "covsel")
ADMM_DEFAULTS = {  # subproblem (13): the ADMM of paper 000, App. D.2, and covsel (HTF Algorithm 17.1)
    "tol": 1e-9,
    "rho": 1.0,
    "max_iter": 5000,
    "adaptive": True,
    "covsel_tol": 1e-6,
    "covsel_max_sweeps": 100,
}
BOX_NEWTON_MIN, BOX_NEWTON_RATIO = 300, 6  # (13) by barrier Newton for supports of at most max(300, 6 p) entries
MATERIALIZE_LIMIT = 4_000_000  # entries of J B formed explicitly for a low-rank restricted solve
HESSIAN_CACHE_LIMIT = 50_000_000  # entries of cached columns of a constant Hessian (400 MB)


@dataclass
class RestrictedResult:
    x: np.ndarray  # full flat vector
    f: float  # objective value (including the ridge, if any)
    iterations: int
    method: str
    converged: bool = True
    g: np.ndarray | None = None  # gradient of f at x (without the ridge), when asked for
    d1: list[np.ndarray] | None = None  # Newton solves: each design term's loss derivative at x (see grad_at)
    hessian: Any = None  # Newton solves: (columns, their last Hessian, its curvatures): a hint for the next solve

    def grad_at(self, lp: LoweredProblem) -> np.ndarray:
        """The gradient of f (without the ridge) at x: ``g`` when it was asked for, else from the
        loss derivatives the Newton solve ended with (one transposed product with the data, no
        forward pass), else a full evaluation. Counted as one gradient evaluation either way."""
        if self.g is not None:
            return self.g
        if self.d1 is not None:
            lp.oracle.charge(grads=1, ifo=lp.n_samples)
            return lp.design.grad_from_derivs(self.d1)
        return lp.value_and_grad(self.x)[1]


class _FlatLayout:
    """The layout of a reduced problem's coordinates (no variables to symmetrize)."""

    def __init__(self, n: int):
        self.n = n

    @staticmethod
    def symmetrize_grad(g: np.ndarray) -> np.ndarray:
        return g


class LoweredProblem:
    """A problem as functions of the flat vector x, for solvers."""

    def __init__(self, problem: Problem, budget: int | None = None):
        self.problem = problem
        self.layout = Layout(problem.variables)
        self.n = self.layout.n
        self.objective = problem.objective.expr
        self.ev = Evaluator(self.objective, self.layout)
        comp = decompose(self.objective, self.layout)
        self.design: Design | None = Design(comp, self.layout) if comp is not None else None
        self.oracle = Oracle(self.ev, self.design, self.layout)
        # the Gaussian log-likelihood c (-logdet(O) + <S, O>) of a precision matrix (paper 000, 5.3)
        self.precision: LogdetForm | None = logdet_form(self.objective, problem.variables)
        S = self.precision.S if self.precision is not None else None
        sets = [build_set(c, self.layout, S) for c in problem.constraints]
        # every coordinate box (w >= 0, lo <= w <= hi) is one Box: their intersection
        self.box: Box | None = None
        for b in [s for s in sets if isinstance(s, Box)]:
            self.box = b if self.box is None else self.box.merge(b)
        sets = [s for s in sets if not isinstance(s, Box)] + ([self.box] if self.box is not None else [])
        thresh = [s for s in sets if s.thresholds]
        if len(thresh) > 1:
            raise ConstraintError(
                f"{len(thresh)} sparsity or rank constraints ({'; '.join(str(s.constraint) for s in thresh)}); "
                "one per problem is supported",
                thresh[1].span,
                "combine them into one nnz(...) over a single variable, or use groups=",
            )
        self.set: ConstraintSet | None = thresh[0] if thresh else None
        self.side: list[ConstraintSet] = [s for s in sets if not s.thresholds]
        if self.box is not None and self.set is not None:
            if not isinstance(self.set, CoordinateSparsity):
                raise ConstraintError(
                    f"{self.box.constraint} together with {self.set.constraint}: box constraints combine with "
                    "nnz(...) <= k, not with rank constraints",
                    self.box.span,
                    "drop the bounds, or constrain the sparsity instead of the rank",
                )
            self.set = self.set.with_box(self.box)
        if budget is not None:
            if self.set is None:
                raise ConstraintError(
                    f"a bound ({budget}) was given but the problem has no nnz(...) <= k or rank(W) <= r constraint"
                )
            self.set = self.set.with_budget(budget)
        eig = [s for s in self.side if isinstance(s, EigBox)]
        if len(eig) > 1:
            raise ConstraintError(
                f"two eigenvalue boxes ({eig[0].constraint}; {eig[1].constraint}); write one: alpha <= eig(O) <= beta",
                eig[1].span,
            )
        self.eigbox: EigBox | None = eig[0] if eig else None
        if self.eigbox is not None:
            self._check_eigbox()
        self.kinds = {c.kind for c in problem.constraints}
        self._admm_warm: dict[str, Any] = {}  # the last ADMM multiplier (warm start; reset per run)
        self.admm_options: dict[str, Any] = dict(ADMM_DEFAULTS)  # a solver's admm_* options (set per run)
        self._lowrank_cache: dict[Any, Any] = {}
        self._free_cache: dict[bytes, Any] = {}  # (grad f(0), H[:, free]) of a quadratic objective
        self._sq_cache: dict[int, Any] = {}  # term -> (its Jacobian, the squares of its entries)
        self._rowsq_cache: dict[Any, Any] = {}  # (term, C) -> row sums of J[:, C]^2 (and row Grams)
        self._hcol_cache: dict[str, Any] = {}  # the columns of a constant Hessian computed so far
        self.progress: Any = None  # a callable(iteration, f) the solvers' History reports to

    # ------------------------------------------------------------------ copies
    def fresh(self) -> LoweredProblem:
        """A copy for one run: its own oracle (zeroed counters); data, design and caches shared."""
        lp = copy.copy(self)
        lp.oracle = self.oracle.fresh()
        lp._admm_warm = {}
        lp.admm_options = dict(ADMM_DEFAULTS)
        return lp

    def _check_eigbox(self) -> None:
        """An eigenvalue box needs the diagonal free: a matrix with eigenvalues >= alpha > 0 has a
        positive diagonal, so a sparsity bound that may zero diagonal entries admits no matrix in
        the box on most supports."""
        box, s = self.eigbox, self.set
        if s is None or s.variable is not box.variable or box.alpha <= 0:
            return
        p = box.shape[0]
        diag = box.W[np.arange(p) * (p + 1)]
        if np.isin(diag, s.coords).any():
            raise ConstraintError(
                f"{s.constraint} counts the diagonal of {box.variable.name}, but {box.constraint} needs every "
                f"diagonal entry positive (eigenvalues >= {box.alpha:g}): supports without the whole diagonal "
                "contain no matrix in the box",
                s.span,
                f"bound the off-diagonal only: nnz(offdiag({box.variable.name})) <= 2 * k",
            )

    def with_budget(self, budget: int) -> LoweredProblem:
        lp = self.fresh()
        if self.set is None:
            raise ConstraintError(f"a bound ({budget}) was given but the problem has no bounded constraint")
        lp.set = self.set.with_budget(budget)
        return lp

    def with_set(self, s: ConstraintSet) -> LoweredProblem:
        lp = copy.copy(self)
        lp.set = s
        return lp

    # ------------------------------------------------------------------ basics
    @property
    def sparsity(self) -> CoordinateSparsity | None:
        """The coordinate-sparsity set, when the problem's set is one (None otherwise)."""
        return self.set if isinstance(self.set, CoordinateSparsity) else None

    @property
    def budget(self) -> int | None:
        return self.set.budget if self.set is not None else None

    @property
    def n_samples(self) -> int:
        return self.oracle.n_samples

    @property
    def structure(self) -> str:
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

    def unbounded_direction(self) -> str | None:
        """Why f is unbounded below on the feasible set, when a linear part makes it so: a
        coordinate that the constraint lets move (a free one, or any constrained one when the
        bound allows at least one) along which f is linear with a nonzero slope. None otherwise
        (a restricted solve that runs away is caught at run time)."""
        d = self.design
        if d is None or self.side:
            return None
        flat = (d.lin != 0) & ~d.curved_coordinates()
        if not flat.any():
            return None
        feasible = np.ones(self.n, dtype=bool)
        if self.set is not None:
            feasible[:] = False
            feasible[self.set.free] = True
            if self.set.k >= 1:
                feasible[self.set.coords] = True
        hit = np.flatnonzero(flat & feasible)
        if hit.size == 0:
            return None
        j = int(hit[0])
        var, idx = self.layout.locate(j)
        return (
            f"the objective is linear along {var}{idx} (slope {d.lin[j]:.4g}) and no other term of it reads "
            f"{var}{idx}, so it decreases without bound as {var}{idx} moves{' up' if d.lin[j] < 0 else ' down'}; "
            f"{len(hit)} coordinate(s) are like this"
        )

    def runs_away(self, x: np.ndarray, d: np.ndarray) -> bool:
        """Whether f decreases without bound along the ray x + t d (a recession direction): f at
        t = 1e4 and 1e8 (in units of max(1, |x|) / |d|) falls ever further below f(x), by more
        than any scale of the problem. Used when a minimization fails to converge."""
        nd = float(np.linalg.norm(d))
        if not nd > 0:
            return False
        f0 = self.oracle.peek(x)
        unit = max(1.0, float(np.linalg.norm(x))) / nd
        f1, f2 = (self.oracle.peek(x + t * unit * d) for t in (1e4, 1e8))
        if not (np.isfinite(f0) and np.isfinite(f1)):
            return False
        big = 1e3 * (1.0 + abs(f0))
        return bool(f1 < f0 - big and (f2 == -np.inf or (np.isfinite(f2) and f2 < f1 - big)))

    def _raise_unbounded(self, dim: int, x: np.ndarray, f: float | None) -> None:
        raise UnboundedError(
            f"the restricted problem on {dim} coordinates has no minimizer: the objective decreases without bound "
            f"along a direction its iterates follow (|x| = {float(np.linalg.norm(x)):.3g}, "
            f"f = {f if f is not None else self.oracle.peek(x):.4g}), so it is unbounded below on the feasible set",
            hint="add a term with curvature (for example a ridge term lam * sum_squares(w)) or check the signs",
        )

    # ------------------------------------------------------------------ restricted minimization
    def restricted_method(self, method: str = "auto") -> str:
        if method not in RESTRICTED_METHODS:
            raise SolverError(
                f"unknown restricted-solve method {method!r}",
                hint=f"choose one of: {', '.join(RESTRICTED_METHODS)}",
            )
        if method in ("admm", "covsel") and self.precision is None:
            raise SolverError(
                f"restricted method {method!r} solves the precision-matrix problem -logdet(O) + trace(S @ O) "
                "(paper 000, (13)); this objective is not of that form",
                hint="use method='auto'",
            )
        if self.precision is not None and method == "auto":
            return "covsel"
        if self.precision is not None and method in ("admm", "covsel", "newton"):
            return method
        if self.eigbox is not None and self.precision is None:
            raise SolverError(
                f"restricted solves under {self.eigbox.constraint} need the objective c * (-logdet(O) + "
                "trace(S @ O)) in the one variable O (the Gaussian log-likelihood, paper 000, Section 5.3)",
                self.eigbox.span,
                "write the objective as -logdet(O) + trace(S @ O)",
            )
        if method == "auto":
            if self.design is None:
                return "lbfgs"
            return "lstsq" if self.design.least_squares else "newton"
        if method in ("lstsq", "newton") and self.design is None:
            raise SolverError(
                f"restricted method {method!r} needs an objective made of losses of affine maps; "
                f"this one is a {self.structure}",
                hint="use method='lbfgs' or 'cvxpy'",
            )
        if method == "lstsq" and not self.design.least_squares:
            raise SolverError("restricted method 'lstsq' needs a least-squares objective", hint="use 'newton'")
        return method

    def subspace(self, state: Any) -> Any:
        if self.set is None:
            return CoordSubspace(np.arange(self.n), self.n)
        return self.set.subspace(state)

    def restricted_minimize(
        self,
        state: Any,
        x0: np.ndarray | None = None,
        ridge: tuple[float, np.ndarray] | None = None,
        method: str = "auto",
        tol: float = 1e-12,
        cols: np.ndarray | None = None,
        grad: bool = False,
        give_up: float | None = None,
        hint: Any = None,
    ) -> RestrictedResult:
        """min f(x) over the subspace of ``state`` (a support: positions into C; or the singular
        subspaces of a low-rank point); free coordinates are always optimized.

        ``ridge=(rho, R)`` adds rho/2 * ||x_{C[R]}||^2 (R positions into C; coordinate sets).
        ``cols`` gives the flat coordinates directly. ``grad=True`` also returns the full gradient
        of f at the solution (``result.g``). ``give_up`` (Newton): stop early, not converged, once
        the Newton model says the minimum cannot get below this value (a search that only wants
        supports better than a threshold; the value returned is still attained by the x returned).
        ``hint``: the ``hessian`` of an earlier result (Newton), whose last Hessian may give this
        solve its first steps without forming one (:func:`kernels._factor_from_hint`).
        """
        method = self.restricted_method(method)
        self.oracle.charge(solves=1)
        if cols is not None:
            sub: Any = CoordSubspace(np.asarray(cols, dtype=np.int64), self.n)
        elif self.set is None:
            sub = CoordSubspace(np.arange(self.n), self.n)
        else:
            st = state if state is not None else self.set.empty()
            if isinstance(self.set, CoordinateSparsity):
                st = np.asarray(st, dtype=np.int64)
            sub = self.set.subspace(st)
        ridge_part = 0.0
        d1 = hess = None
        if self.precision is not None and (method in ("admm", "covsel", "newton") or self.eigbox is not None):
            x, f, its, converged, method = self._precision_minimize(sub.cols, x0, method, ridge)
        elif isinstance(sub, LowRankSubspace):
            x, f, its, converged, method = self._lowrank_minimize(sub, x0, method, tol)
        else:
            x, f, its, converged, ridge_part, d1, hess = self._coord_minimize(
                sub.cols, x0, ridge, method, tol, give_up, hint
            )
        start = x0 if x0 is not None else np.zeros(self.n)
        scale = 1.0 + float(np.linalg.norm(start))
        if (f is not None and f == -np.inf) or float(np.linalg.norm(x)) > 1e12 * scale:
            self._raise_unbounded(sub.dim, x, f)
        far = float(np.linalg.norm(x - start)) > 1e4 * scale  # a Newton step into a flat region
        # (a solve abandoned at give_up stopped on purpose: not a sign of an unbounded objective)
        if (not converged or far) and give_up is None and self.runs_away(x, x - start):
            self._raise_unbounded(sub.dim, x, f)
        g = None
        if grad and d1 is not None and f is not None:  # from the solve's last loss derivatives
            self.oracle.charge(grads=1, ifo=self.n_samples)
            g = self.design.grad_from_derivs(d1)
        elif grad:
            f, g = self.oracle.value_and_grad(x)
            f += ridge_part
        elif f is None:
            f = self.oracle.f(x) + ridge_part
        return RestrictedResult(x, float(f), its, method, converged, g, d1, hess)

    def _coord_minimize(
        self,
        cols: np.ndarray,
        x0: np.ndarray | None,
        ridge: Any,
        method: str,
        tol: float,
        give_up: float | None = None,
        hint: Any = None,
    ) -> tuple[np.ndarray, float | None, int, bool, float, list[np.ndarray] | None, Any]:
        """(x, f or None, iterations, converged, the ridge's part of f, each term's loss derivative
        at x when the Newton kernel ended with them (else None), (cols, last Hessian, curvatures)
        of a Newton solve for the next one's ``hint`` (else None))."""
        r = None
        if ridge is not None and ridge[0] > 0:
            rho, R = ridge
            rmask = np.zeros(self.n)
            rmask[self.set.coords[np.asarray(R, dtype=np.int64)]] = rho
            r = rmask[cols]
            if not r.any():
                r = None
        if self.box is not None and self.box.bounded(cols):
            return (*self._box_minimize(cols, x0, r, method, tol), None, None)
        u0 = x0[cols] if x0 is not None else np.zeros(len(cols))
        converged = True
        f = None
        d1 = hess = None
        if method == "cvxpy":
            from .cvxpy_lower import restricted_cvxpy

            u, its = restricted_cvxpy(self.objective, self.layout, cols, r)
            self.oracle.charge(ifo=self.n_samples * its)
        elif method == "lbfgs":
            u, its, converged, f = self._lbfgs(cols, u0, r, tol)
        else:
            ne = self.design.normal_equations(cols) if method == "lstsq" and self.design.chunked else None
            if ne is not None:  # chunked data: X_S'X_S and X_S'y in one pass, a Cholesky on the driver
                G, h, c0 = ne
                u, its = kernels.lstsq_normal(G + np.diag(0.5 * r) if r is not None else G, h), 1
                f = (
                    c0
                    + float(u @ (G @ u))
                    - 2.0 * float(h @ u)
                    + (0.5 * float(np.sum(r * u * u)) if r is not None else 0)
                )
            elif method == "lstsq":
                rd = self.design.reduced(cols)
                u, its = kernels.lstsq(rd, r), 1
                f = kernels.evaluate(rd, u, 0, r)[0]
            else:
                rd = self.design.reduced(cols)
                kh = _hint_positions(hint, cols)
                res = kernels.newton(rd, u0[None, :], ridge=r, tol=tol, give_up=give_up, hint=kh)
                if not np.isfinite(res.values[0]):  # the start lies outside the loss's domain
                    u1 = self.inside_domain(_embed(cols, u0, self.n))[cols]
                    res = kernels.newton(rd, u1[None, :], ridge=r, tol=tol, give_up=give_up)
                u, its, converged, f = res.U[0], res.iterations, bool(res.converged[0]), float(res.values[0])
                d1 = res.d1 if np.isfinite(f) else None
                hess = (cols, *res.hessian) if res.hessian is not None else None
            self.oracle.charge(grads=its, ifo=self.n_samples * its)
        x = np.zeros(self.n)
        x[cols] = u
        ridge_part = 0.5 * float(np.sum(r * u * u)) if r is not None else 0.0
        return x, f, its, converged, ridge_part, d1, hess

    def precision_mask(self, cols: np.ndarray) -> np.ndarray:
        """The support (p x p bool, symmetric) of the precision matrix spanned by flat coordinates."""
        pf = self.precision
        p = pf.p
        W = self.layout.coords(pf.var)
        local = np.asarray(cols, dtype=np.int64) - W[0]
        local = local[(local >= 0) & (local < p * p)]
        mask = np.zeros(p * p, dtype=bool)
        mask[local] = True
        mask = mask.reshape(p, p)
        return mask | mask.T

    def _precision_minimize(
        self, cols: np.ndarray, x0: np.ndarray | None, method: str, ridge: Any = None
    ) -> tuple[np.ndarray, float | None, int, bool, str]:
        """Subproblem (13) of paper 000: min c (-logdet(O) + <S, O>) over alpha I <= O <= beta I
        (the eigenvalue box, when the problem has one) with supp(O) within the support of ``cols``.

        ``admm``: the paper's method, the ADMM of Appendix D.2 (:func:`kernels.admm_logdet`),
        warm-started from ``x0`` restricted to the support and from the previous solve's multiplier
        and rho; options ``admm_tol`` / ``admm_rho`` / ``admm_max_iter`` / ``admm_adaptive`` of
        :attr:`admm_options`. The exactly sparse iterate Theta is returned, its eigenvalues moved
        into the box by a diagonal shift of at most the ADMM's primal residual (a deviation for
        exact feasibility: the diagonal is always in the support).

        ``covsel`` (the default, a deviation for speed: 10-70 times fewer flops at p = 200): (13)
        without the box by :func:`kernels.covsel` (Hastie, Tibshirani & Friedman 2009, Algorithm
        17.1; no eigen-decomposition per iteration), warm-started from the previous solve's W. When
        its solution has its eigenvalues in [alpha, beta] it solves (13) (a convex problem whose box
        constraint is inactive); when not, the barrier Newton method finishes the solve from covsel's
        answer on supports of at most max(300, 6 p) entries (:meth:`_box_newton_fits`), and the ADMM
        on larger ones, or when covsel fails or needs more than ``covsel_max_sweeps`` sweeps (started
        from covsel's iterate and multiplier S - W off the support).

        ``newton`` (a deviation for accuracy where the box binds): the primal barrier method of
        :func:`kernels.logdet_box_newton` (exact Newton steps on the support's entries, the gap
        below 1e-12 (1 + |f|); no eigen-decomposition). When the box binds on an ill-conditioned
        covariance the ADMM stops at its iteration limit short of the minimum (measured on
        breast-cancer features, cond(S) = 1e5: 0.013 and 0.57 above it after 20,000 iterations on
        two of GraHTP's graphs), which a solver comparing objectives across supports reads as noise. ``cvxpy``: the same problem
        with the box as semidefinite constraints (the reference)."""
        if ridge is not None and ridge[0] > 0:
            raise SolverError("a ridge on the restricted solve is not available for the precision-matrix problem")
        pf = self.precision
        p = pf.p
        W = self.layout.coords(pf.var)
        mask = self.precision_mask(cols)
        alpha, beta = (self.eigbox.alpha, self.eigbox.beta) if self.eigbox is not None else (0.0, np.inf)
        x = np.zeros(self.n)
        if not mask[np.diag_indices(p)].all():  # a zero diagonal entry: no positive definite matrix
            return x, np.inf, 0, False, method
        O = covsel_start = None
        if method == "cvxpy":
            from .cvxpy_lower import precision_cvxpy

            O, its = precision_cvxpy(pf.S, mask, alpha, beta)
            O = np.where(mask, (O + O.T) / 2, 0.0)
            converged = True
        elif method in ("covsel", "newton"):
            start = None
            if method == "covsel":
                o = self.admm_options
                cs = kernels.covsel(
                    pf.S, mask, tol=o["covsel_tol"], max_sweeps=o["covsel_max_sweeps"], W0=self._admm_warm.get("W")
                )
                if cs.converged:
                    self._admm_warm["W"] = cs.W
                self.oracle.charge(eigs=1)
                if cs.converged:
                    lam = np.linalg.eigvalsh(cs.Theta)
                    slack = 1e-9 * max(1.0, abs(alpha), abs(lam[-1]))
                    if lam[0] >= alpha - slack and lam[-1] <= beta + slack and lam[0] > 0:
                        x[W] = cs.Theta.ravel()  # (13) solved: the box is inactive at the graph's MLE
                        recent = self._admm_warm.setdefault("covsel", {})  # support -> the last answers (polish)
                        recent[np.packbits(mask).tobytes()] = x.copy()
                        if len(recent) > 8:
                            del recent[next(iter(recent))]
                        return x, None, cs.sweeps, True, method
                    start = cs.Theta
                elif np.all(np.isfinite(cs.W)) and np.all(np.isfinite(cs.Theta)) and cs.sweeps > 1:
                    covsel_start = (  # the ADMM's start: covsel's iterate and its dual S - W off the support
                        kernels.shift_into_box(cs.Theta, max(alpha, 1e-12), beta),
                        np.where(mask, 0.0, pf.S - cs.W),
                    )
            if start is None and x0 is not None:
                T = x0[W].reshape(p, p)
                start = T if np.all(np.isfinite(T)) else None
            if method == "newton" or self._box_newton_fits(mask):
                # the box binds at the graph's MLE (or covsel is slow): the barrier Newton method from
                # covsel's answer (exact to 1e-12 in a few dozen steps and no eigen-decomposition; the
                # ADMM needs thousands of iterations when the box binds on an ill-conditioned
                # covariance, and stops short of the optimum at its iteration limit)
                bn = kernels.logdet_box_newton(pf.S, mask, alpha, beta, Theta0=start)
                self.oracle.charge(newton=bn.iterations)
                if bn.converged:
                    x[W] = bn.Theta.ravel()
                    return x, None, bn.iterations, True, "newton"
                covsel_start = (bn.Theta, None)  # rounding stopped it: the ADMM finishes from there
            method = "admm"  # a box active on a large support, or covsel slow or failing: the ADMM
        if O is None and method == "admm":
            o = self.admm_options
            Theta0 = None
            if x0 is not None:
                T = x0[W].reshape(p, p)
                T = np.where(mask, (T + T.T) / 2, 0.0)
                if np.all(np.isfinite(T)):
                    Theta0 = T
            warm = self._admm_warm
            Gamma0 = warm.get("Gamma")
            if covsel_start is not None:
                Theta0, Gamma0 = covsel_start
            res = kernels.admm_logdet(
                pf.S,
                kernels.support_prox(mask),
                alpha,
                beta,
                rho=warm.get("rho", o["rho"]),
                Theta0=Theta0,
                Gamma0=Gamma0,
                tol=o["tol"],
                max_iter=o["max_iter"],
                adaptive=o["adaptive"],
            )
            warm["Gamma"], warm["rho"] = res.Gamma, res.rho
            O, its, converged = res.Theta, res.iterations, res.converged
            self.oracle.charge(eigs=its)
        O = kernels.shift_into_box(O, alpha, beta)
        x[W] = O.ravel()
        return x, None, its, converged, method

    def _box_newton_fits(self, mask: np.ndarray) -> bool:
        """Whether (13) on this support is solved by the barrier Newton method rather than the ADMM
        when the box binds: m = p + edges entries, a Newton step costs an m x m Cholesky (m^3 / 3) and
        an ADMM iteration a p x p eigen-decomposition (about 10 p^3); the Newton method takes a few
        dozen steps, the ADMM hundreds to thousands of iterations, so Newton up to m = 6 p (and any
        support of at most 300 entries)."""
        m = int(np.count_nonzero(np.triu(mask)))
        return m <= max(BOX_NEWTON_MIN, BOX_NEWTON_RATIO * self.precision.p)

    def polish(self, x: np.ndarray) -> np.ndarray:
        """The returned point, when it is a recent covsel solve of (13) (on the same graph and within
        its tolerance; stopped at ``covsel_tol``,
        1e-6 on the regression coefficients, which is enough to compare supports), re-solved on
        the same graph to 1e-10 from its own W: a few sweeps, so that the gradient on the support
        vanishes to rounding in the certificate. Any other point is returned as it is."""
        if self.precision is None or not self._admm_warm.get("covsel"):
            return x
        pf = self.precision
        p = pf.p
        W = self.layout.coords(pf.var)
        O = x[W].reshape(p, p)
        mask = O != 0
        last = self._admm_warm["covsel"].get(np.packbits(mask).tobytes())
        if last is None or float(np.max(np.abs(last - x))) > 1e-4 * float(np.max(np.abs(x))):
            return x  # not a covsel answer on this graph
        cs = kernels.covsel(pf.S, mask, tol=1e-10, max_sweeps=1000, W0=self._admm_warm.get("W"))
        alpha, beta = (self.eigbox.alpha, self.eigbox.beta) if self.eigbox is not None else (0.0, np.inf)
        if not cs.converged or not np.all(cs.Theta[~mask] == 0):
            return x
        lam = np.linalg.eigvalsh(cs.Theta)
        if lam[0] <= 0 or lam[0] < alpha or lam[-1] > beta:
            return x
        out = x.copy()
        out[W] = cs.Theta.ravel()
        return out if self.oracle.peek(out) <= self.oracle.peek(x) + 1e-12 * max(1.0, abs(self.oracle.peek(x))) else x

    def _box_minimize(
        self, cols: np.ndarray, x0: np.ndarray | None, r: np.ndarray | None, method: str, tol: float
    ) -> tuple[np.ndarray, float | None, int, bool, float]:
        """The restricted solve on ``cols`` within the box: coordinates with lo = hi are fixed at
        their value; the others by projected Newton (``lstsq``/``newton``: :func:`kernels.box_newton`),
        L-BFGS-B with bounds (``lbfgs``) or cvxpy with the bounds as constraints (``cvxpy``)."""
        lo, hi = self.box.lo[cols], self.box.hi[cols]
        if method == "cvxpy":
            from .cvxpy_lower import restricted_cvxpy

            u, its = restricted_cvxpy(self.objective, self.layout, cols, r, bounds=(lo, hi))
            self.oracle.charge(ifo=self.n_samples * its)
            u = np.clip(u, lo, hi)  # interior-point solutions may sit 1e-9 outside
            x = np.zeros(self.n)
            x[cols] = u
            return x, None, its, True, 0.5 * float(np.sum(r * u * u)) if r is not None else 0.0
        fixed = lo == hi
        base = np.zeros(self.n)
        base[cols[fixed]] = lo[fixed]
        vc, lo_v, hi_v = cols[~fixed], lo[~fixed], hi[~fixed]
        r_v = r[~fixed] if r is not None else None
        if r_v is not None and not r_v.any():
            r_v = None
        u0 = np.clip(x0[vc] if x0 is not None else np.zeros(len(vc)), lo_v, hi_v)
        f = None
        if method == "lbfgs":
            u, its, converged, f = self._lbfgs(vc, u0, r_v, tol, bounds=(lo_v, hi_v), base=base)
        else:
            rd = self.design.reduced(vc, x_fixed=base if base.any() else None)
            res = kernels.box_newton(rd, u0, lo_v, hi_v, ridge=r_v, tol=tol)
            u, its, converged, f = res.u, res.iterations, res.converged, res.f
            self.oracle.charge(grads=its, ifo=self.n_samples * its)
        x = base
        x[vc] = u
        ridge_part = 0.5 * float(np.sum(r_v * u * u)) if r_v is not None else 0.0
        return x, f, its, converged, ridge_part

    def _lbfgs(
        self,
        cols: np.ndarray,
        u0: np.ndarray,
        r: np.ndarray | None,
        tol: float,
        bounds: tuple[np.ndarray, np.ndarray] | None = None,
        base: np.ndarray | None = None,
    ) -> tuple[np.ndarray, int, bool, float]:
        x = np.zeros(self.n)
        x0 = base if base is not None else x.copy()
        ev = self.ev
        calls = [0]

        def fun(u: np.ndarray) -> tuple[float, np.ndarray]:
            calls[0] += 1
            x[:] = x0
            x[cols] = u
            f, g = ev.value_and_grad(x, coords=cols)
            gu = g[cols]
            if r is not None:
                f += 0.5 * float(np.sum(r * u * u))
                gu = gu + r * u
            if not np.isfinite(f):
                return np.inf, np.zeros_like(u)
            return f, gu

        if not np.isfinite(fun(u0)[0]):  # the start lies outside the loss's domain
            xs = x0.copy()
            xs[cols] = u0
            u0 = self.inside_domain(xs)[cols]
        u, its, ok, f = kernels.lbfgs(fun, u0, tol=tol, bounds=bounds)
        self.oracle.charge(grads=calls[0], ifo=self.n_samples * calls[0])
        return u, its, ok, f

    def _lowrank_minimize(
        self, sub: LowRankSubspace, x0: np.ndarray | None, method: str, tol: float
    ) -> tuple[np.ndarray, float | None, int, bool, str]:
        """min f over {x : W = U C (or C Vt, U C Vt), free coordinates anything}; side
        ``alternate``: the column refit, then the row refit on the row space of its result.

        With a canonical design the reduced design (data X U, or X with V' on the right) is built
        once per subspace and minimized by the kernels (direct when small, matrix-free Newton-CG /
        LSQR when large). Otherwise: L-BFGS on u -> f(embed(u)) with the gradient restrict(grad f)."""
        if sub.side == "alternate":
            x1, _, its1, ok1, _ = self._lowrank_minimize(sub.on_side("column"), x0, method, tol)
            C = sub.U.T @ x1[sub.W].reshape(sub.shape)
            Vt = np.linalg.svd(C, full_matrices=False)[2][: sub.U.shape[1]]
            x2, f2, its2, ok2, how = self._lowrank_minimize(sub.on_side("row", Vt=Vt), x1, method, tol)
            return x2, f2, its1 + its2, ok1 and ok2, how
        u0 = sub.coords_of(x0) if x0 is not None else np.zeros(sub.dim)
        if method == "cvxpy":
            from .cvxpy_lower import restricted_cvxpy

            E = np.column_stack([sub.embed(e) for e in np.eye(sub.dim)]) if sub.dim else np.zeros((self.n, 0))
            u, its = restricted_cvxpy(self.objective, self.layout, None, embed=E)
            self.oracle.charge(ifo=self.n_samples * its)
            return sub.embed(u), None, its, True, "cvxpy"
        red = self._lowrank_design(sub) if self.design is not None else None
        if red is not None and method == "lstsq" and len(sub.free):
            out = self._lowrank_free_lstsq(sub, red)
            if out is not None:
                return out
        if red is not None and method == "lstsq" and not len(sub.free):
            ne = red.matrix_least_squares(*sub.cshape)
            if ne is not None:  # decoupled normal equations: one small system, many right-hand sides
                G, H, _ = ne
                C = kernels.lstsq_normal(G, H)
                self.oracle.charge(grads=1, ifo=self.n_samples)
                return sub.embed(C.ravel()), None, 1, True, method
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
                u, its = kernels.lstsq(rd), 1
                f = kernels.evaluate(rd, u, 0)[0] if small else None
                converged = True
            else:
                res = kernels.newton(rd, u0[None, :], tol=tol)
                u, its, converged, f = res.U[0], res.iterations, bool(res.converged[0]), float(res.values[0])
            self.oracle.charge(grads=its, ifo=self.n_samples * its)
            return sub.embed(u), f, its, converged, method
        calls = [0]

        def fun(u: np.ndarray) -> tuple[float, np.ndarray]:
            calls[0] += 1
            f, g = (self.design.value_and_grad if self.design is not None else self.ev.value_and_grad)(sub.embed(u))
            if not np.isfinite(f):
                return np.inf, np.zeros_like(u)
            return f, sub.restrict(g)

        u, its, ok, f = kernels.lbfgs(fun, u0, tol=tol)
        self.oracle.charge(grads=calls[0], ifo=self.n_samples * calls[0])
        return sub.embed(u), f, its, ok, "lbfgs"

    def _lowrank_free_lstsq(
        self, sub: LowRankSubspace, red: Design
    ) -> tuple[np.ndarray, float | None, int, bool, str] | None:
        """Least squares on a low-rank subspace with free coordinates (an intercept, other
        variables), the free block eliminated exactly: with u = (c, v) (c = C flattened, v the free
        coordinates) the reduced problem is the quadratic f(0) + g'u + u'Hu / 2 whose blocks are

        * H_cc = 2 (G (x) I): the decoupled normal equations of the matrix part alone
          (:meth:`Design.matrix_least_squares` with the free blocks left out), q x q;
        * H_cv = E_c' H[:, free] and H_vv = H[free, free], and g = E' grad f(0): the Hessian columns
          of the free coordinates and the gradient at zero in the problem's own coordinates, which
          do not depend on the subspace (computed once per lowering, :meth:`_free_quadratic`), taken
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
            if self.design is None or not self.design.least_squares:
                return None
            g0, Hf = self._free_quadratic(free)
            solve = _psd_solver(Hf[free])
            if solve is None:
                return None
            self.oracle.charge(grads=1, ifo=self.n_samples)
            return sub.embed(-solve(g0[free])), None, 1, True, "lstsq"
        ne = red.matrix_least_squares(a, b, n_free=len(free))
        if ne is None:
            return None
        Gsolve = _psd_solver(ne[0])
        if Gsolve is None:
            return None
        g0, Hf = self._free_quadratic(free)
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
        self.oracle.charge(grads=1, ifo=self.n_samples)
        return sub.embed(np.concatenate([c, v])), None, 1, True, "lstsq"

    def _free_quadratic(self, free: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(grad f(0), H[:, free]) of a quadratic objective, computed once per lowering (q Hessian-
        vector products for q free coordinates; shared by every run on this lowering)."""
        key = free.tobytes()
        if key not in self._free_cache:
            zero = np.zeros(self.n)
            g0 = self.design.value_and_grad(zero)[1]
            Hf = np.empty((self.n, len(free)))
            e = np.zeros(self.n)
            for i, j in enumerate(free):
                e[j] = 1.0
                Hf[:, i] = self.design.hvp(zero, e)
                e[j] = 0.0
            self._free_cache.clear()
            self._free_cache[key] = (g0, Hf)
        return self._free_cache[key]

    def _lowrank_design(self, sub: LowRankSubspace) -> Design | None:
        U = sub.U if sub.side in ("column", "both") else None
        Vt = sub.Vt if sub.side in ("row", "both") else None
        key = (sub.side, None if U is None else U.tobytes(), None if Vt is None else Vt.tobytes())
        if key in self._lowrank_cache:
            return self._lowrank_cache[key]
        a, b = sub.cshape
        where = np.full(self.n, -1, dtype=np.int64)
        where[sub.free] = a * b + np.arange(len(sub.free))
        red = self.design.low_rank(sub.W, sub.shape, U, Vt, _FlatLayout(sub.dim), np.arange(a * b), where)
        if len(self._lowrank_cache) > 4:
            self._lowrank_cache.clear()
        self._lowrank_cache[key] = red
        return red

    # ------------------------------------------------------------------ relaxations
    def relaxation(self, kind: str, solver: str = "auto", eigbox: bool = True) -> Any:
        """The convex relaxation ``kind`` ('l1', 'nuclear', 'glasso') of this problem, built in cvxpy
        (:mod:`sparsemodel.compile.relax`); ``solve(lam)`` returns the flat x. ``eigbox=False``
        drops the eigenvalue box from the relaxation."""
        from .relax import Relaxation

        eb = self.eigbox if eigbox else None
        return Relaxation(self.objective, self.layout, self.set, kind, solver, box=self.box, eigbox=eb)

    # ------------------------------------------------------------------ smoothness
    def hessian_operator(self, x: np.ndarray | None = None):
        return self.oracle.hessian_operator(x)

    def truncation(self, s: int | None) -> Any:
        """The truncation of the power method: keep what a budget-s point of the set may use
        (s coordinates of C; rank s for a low-rank set), the free coordinates always."""
        st = self.set
        if st is None or s is None:
            return lambda v: v
        if isinstance(st, LowRank):
            if s >= st.limit:
                return lambda v: v
            return lambda v: st.project(v, s)[0]
        if s >= st.size:
            return lambda v: v
        C = st.coords

        def trunc(v: np.ndarray) -> np.ndarray:
            out = np.zeros_like(v)
            keep = C[top_k(v[C], s)]
            out[keep] = v[keep]
            out[st.free] = v[st.free]
            return out

        return trunc

    def power_budget(self, units: int) -> int | None:
        """The truncation budget of :meth:`smoothness` for ``units`` selectable units of the set:
        the coordinates of the ``units`` largest groups (pairs, single coordinates), or the rank."""
        s = self.set
        if s is None:
            return None
        if isinstance(s, LowRank):
            return min(units, s.limit)
        if s.unit_of is None:
            return min(units, s.size)
        sizes = np.sort(np.bincount(s.unit_of))[::-1]
        return int(sizes[: min(units, len(sizes))].sum())

    def restricted_smoothness(self, units: int, starts: int = 3, x: np.ndarray | None = None) -> float:
        """L for ``units`` units of the set: the best of ``starts`` seeded runs of the truncated
        power method (each from two starting vectors). The method can stop at a local maximum of
        its nonconvex Rayleigh quotient; three seeds matched the exact value on small tests."""
        b = self.power_budget(units)
        return max(float(self.smoothness(b, x=x, seed=i)) for i in range(starts))

    def smoothness(self, s: int | None = None, x: np.ndarray | None = None, iters: int = 100, seed: int = 0) -> float:
        """Estimate of the restricted smoothness constant M_s: the largest eigenvalue of the
        Hessian (bound) over the directions a budget-s point uses (s coordinates of C, or rank s),
        free coordinates always allowed, by the truncated power method (Yuan & Zhang 2013) from
        two starting points."""
        if self.precision is not None and self.eigbox is not None and self.eigbox.alpha > 0:
            # on the box, -logdet is alpha^-2-smooth (paper 000, Section 5.3): the theory's constant
            return self.precision.scale / self.eigbox.alpha**2
        hv = self.hessian_operator(x)
        rng = np.random.default_rng(seed)
        starts = [np.ones(self.n), rng.standard_normal(self.n)]
        return kernels.power_method(hv, self.truncation(s), starts, iters=iters)

    def mean_curvature(self, probes: int = 8, x: np.ndarray | None = None, seed: int = 0) -> float:
        """Average diagonal of the Hessian at x (default: the zero point) over the constrained
        coordinates: exact from the design's stored columns (any elementwise loss, built-in or
        ``func``, and the row-wise softmax), else Hutchinson's trace estimator with Rademacher
        probes of the Hessian at x. 1 / this is the unit step of HTP for normalized columns
        (Foucart 2011).

        No global curvature bound enters: the design knows one only for built-in atoms, so using it
        would give one function spelled two ways (``logistic(-z)`` and ``func phi(z) = log(1 +
        exp(-z))``) two different steps."""
        C = self.set.coords if self.set is not None else np.arange(self.n)
        x = self.zeros() if x is None else x
        if self.precision is not None:
            return self._precision_curvature(x)
        exact = self._mean_curvature_exact(C, x)
        if exact is not None:
            return exact
        hv = self.oracle.hessian_operator(x, bound=False)
        rng = np.random.default_rng(seed)
        acc = 0.0
        for _ in range(probes):
            z = np.zeros(self.n)
            z[C] = rng.choice((-1.0, 1.0), size=len(C))
            acc += float(z @ hv(z))
        return acc / (probes * len(C))

    def _precision_curvature(self, x: np.ndarray) -> float:
        """The mean over off-diagonal pairs (i, j) of the curvature of c (-logdet O) along the
        symmetric unit direction (e_i e_j' + e_j e_i') / sqrt 2: c (Sigma_ii Sigma_jj + Sigma_ij^2),
        Sigma = O^{-1} (the Hessian is Sigma (x) Sigma). inf outside the domain."""
        pf = self.precision
        O = x[self.layout.coords(pf.var)].reshape(pf.p, pf.p)
        try:
            L = np.linalg.cholesky((O + O.T) / 2)
        except np.linalg.LinAlgError:
            return np.inf
        Li = sla.solve_triangular(L, np.eye(pf.p), lower=True)
        Sig = Li.T @ Li
        d = np.diag(Sig)
        p = pf.p
        if p < 2:
            return pf.scale * float(d[0] ** 2)
        total = (d.sum() ** 2 - (d * d).sum()) + (float(np.sum(Sig * Sig)) - (d * d).sum())
        return pf.scale * total / (p * (p - 1))

    def _mean_curvature_exact(self, C: np.ndarray, x: np.ndarray) -> float | None:
        """mean_j diag(H(x))_j over C from the design's columns, in O(rows) per call: for an
        elementwise term c sum_r w_r phi''(z_r) R_r with R_r = sum_{j in C} J[r, j]^2 (computed once);
        for the row-wise softmax c sum_i w_i (sum_c P_ic R_(i,c) - p_i' G_i p_i) with G_i the Gram
        matrix of the rows (i, .) of J[:, C] (computed once; a streamed pass over the columns when
        the Jacobian is not kept). None when a row-wise term's Jacobian is not kept."""
        d = self.design
        if d is None:
            return None
        key = C.tobytes()
        total = 0.0
        for i, t in enumerate(d.terms):
            ck = (i, key)
            if ck not in self._rowsq_cache:
                stored = self.stored_columns(i)
                if stored is None and t.rowwise:
                    return None
                G = None
                if stored is None:  # the Jacobian is not kept: its columns streamed once
                    R = d.row_square_sums(i, C)
                else:
                    J, sq = stored
                    R = np.asarray(sq[:, C].sum(axis=1)).ravel()
                if t.rowwise:
                    m = t.map.shape[1]
                    JC = J[:, C]
                    JC = JC.toarray() if sp.issparse(JC) else np.asarray(JC)
                    J3 = JC.reshape(-1, m, JC.shape[1])
                    G = np.einsum("iaj,ibj->iab", J3, J3)
                self._rowsq_cache[ck] = (R, G)
            R, G = self._rowsq_cache[ck]
            z = t.map.value(x)
            if t.rowwise:
                m = t.map.shape[1]
                P = t.probs(z).reshape(-1, m)
                w = t.weights if t.weights is not None else np.ones(P.shape[0])
                first = float((P * w[:, None]).reshape(-1) @ R)
                second = float(w @ np.einsum("ia,iab,ib->i", P, G, P))
                total += t.coef * (first - second)
            else:
                total += t.coef * float(t.derivs(z, 2)[2] @ R)
        return total / len(C)

    def stored_columns(self, i: int) -> tuple[Any, Any] | None:
        """(J, J * J): term i's whole Jacobian (``Design.full_columns``) and its entrywise square,
        computed once; None when the Jacobian is too large to keep. The squares give diagonals of
        Hessians (sum_r phi''_r J[r, j]^2) at the cost of one matrix-vector product."""
        if i not in self._sq_cache:
            J = self.design.full_columns(i)
            self._sq_cache[i] = None if J is None else (J, J.multiply(J).tocsc() if sp.issparse(J) else J * J)
        return self._sq_cache[i]

    def hessian_columns(self, cols: np.ndarray) -> np.ndarray | None:
        """H[:, cols] for an objective whose Hessian is constant (quadratic composite designs: least
        squares, ridge terms), each column computed once (from the stored Jacobian, or by one
        transposed product with the data when it is not kept) and cached; None otherwise, or when
        the cache would pass ``HESSIAN_CACHE_LIMIT`` entries. A search that visits many supports
        (the swap search of ``auto``) then pays O(n_coords) per Hessian entry it reads instead of
        O(n_samples)."""
        d = self.design
        if d is None or not d.quadratic:
            return None
        cols = np.asarray(cols, dtype=np.int64)
        cache = self._hcol_cache
        if "pos" not in cache:  # coordinate -> column of the store, and the store (n x capacity)
            cache["pos"] = np.full(self.n, -1, dtype=np.int64)
            cache["H"] = np.zeros((self.n, 16))
            cache["used"] = 0
        pos = cache["pos"]
        missing = np.unique(cols[pos[cols] < 0])
        if missing.size:
            used, H = cache["used"], cache["H"]
            if (used + missing.size) * self.n > HESSIAN_CACHE_LIMIT:
                return None
            acc = d.hessian_columns(missing)
            if acc is None:
                return None
            if used + missing.size > H.shape[1]:
                cap = min(max(2 * H.shape[1], used + missing.size), max(HESSIAN_CACHE_LIMIT // self.n, 1))
                grown = np.zeros((self.n, cap))
                grown[:, :used] = H[:, :used]
                cache["H"] = H = grown
            H[:, used : used + missing.size] = acc
            pos[missing] = used + np.arange(missing.size)
            cache["used"] = used + missing.size
        return cache["H"][:, pos[cols]]

    def quadratic_origin(self) -> tuple[float, np.ndarray]:
        """f(0) and the gradient at 0 of the composite part, computed once (with the constant
        Hessian columns they give f and its gradient anywhere for a quadratic objective)."""
        if "origin" not in self._hcol_cache:
            z = self.zeros()
            self._hcol_cache["origin"] = (self.oracle.peek(z), self.design.value_and_grad(z)[1])
        return self._hcol_cache["origin"]

    def hessian_diagonal(self, x: np.ndarray | None = None) -> np.ndarray | None:
        """diag(H(x)) of the composite part over all coordinates (x None: the constant Hessian of a
        quadratic design, computed once): from the stored squares of the Jacobians, else one
        streamed pass over the columns. None without a design or for a row-wise (softmax) term."""
        d = self.design
        if d is None:
            return None
        if d.quadratic:
            if "diag" not in self._hcol_cache:
                self._hcol_cache["diag"] = d.hessian_diagonal(None, self._squares())
            return self._hcol_cache["diag"]
        return d.hessian_diagonal(self.zeros() if x is None else x, self._squares())

    def _squares(self) -> list[Any]:
        """Each term's stored J * J, or None where the Jacobian is not kept."""
        out = []
        for i in range(len(self.design.terms)):
            st = self.stored_columns(i)
            out.append(st[1] if st is not None else None)
        return out

    # ------------------------------------------------------------------ the domain
    def inside_domain(self, x: np.ndarray | None = None) -> np.ndarray:
        """A point where the objective is finite: ``x`` (default the zero point) when it is one;
        otherwise ``x`` with its free coordinates (an intercept, a diagonal, other variables) moved
        to a common value c in +-1, +-0.1, +-10, ... (all together, then one at a time), so that a
        loss such as -log(X w + b) or -logdet(O) is evaluated inside its domain. The constrained
        coordinates are left as they are (zero for a start). Returns ``x`` unchanged when no such
        point is found (the solvers then report the infinite objective)."""
        x = self.zeros() if x is None else np.asarray(x, dtype=float)
        if np.isfinite(self.oracle.peek(x)):
            return x
        free = getattr(self.set, "free", None) if self.set is not None else None
        F = np.arange(self.n) if free is None else free
        if len(F) == 0:
            return x
        for c in DOMAIN_TRIALS:
            y = x.copy()
            y[F] = c
            if np.isfinite(self.oracle.peek(y)):
                return y
        if len(F) <= 16:
            for c in DOMAIN_TRIALS:
                for j in F:
                    y = x.copy()
                    y[j] = c
                    if np.isfinite(self.oracle.peek(y)):
                        return y
        return x


DOMAIN_TRIALS = (1.0, -1.0, 0.1, -0.1, 10.0, -10.0, 0.01, -0.01, 100.0, -100.0, 1e-3, -1e-3, 1e3, -1e3)


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


def _embed(cols: np.ndarray, u: np.ndarray, n: int) -> np.ndarray:
    x = np.zeros(n)
    x[cols] = u
    return x


def _operator(m: Any, d: int) -> LinearOperator:
    """An affine map's linear part as a scipy LinearOperator over d reduced coordinates."""
    return LinearOperator(
        (m.size, d),
        matvec=lambda v: m.value(np.ravel(v)) - m.b,
        rmatvec=lambda y: m.vjp(np.ravel(y)),
        dtype=float,
    )


class Clock:
    """Wall-clock timer for solver histories; time spent in ``paused()`` (logging the objective
    for the history) is not counted."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.off = 0.0

    def __call__(self) -> float:
        return time.perf_counter() - self.t0 - self.off

    def paused(self) -> Any:
        clock = self

        class _Pause:
            def __enter__(self) -> None:
                self.t = time.perf_counter()

            def __exit__(self, *exc: Any) -> None:
                clock.off += time.perf_counter() - self.t

        return _Pause()


def require_sparsity(lp: LoweredProblem, solver: str) -> CoordinateSparsity:
    if lp.sparsity is None:
        raise SolverError(
            f"{solver} solves sparsity-constrained problems; this problem has no nnz(...) <= k constraint"
        )
    return lp.sparsity


__all__ = ["LoweredProblem", "RestrictedResult", "Clock", "require_sparsity", "RESTRICTED_METHODS"]
