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
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from ..errors import ConstraintError, SolverError
from . import kernels
from .design import Design, Reduced
from .evaluator import Evaluator, Layout
from .oracle import Oracle
from .sets import Box, ConstraintSet, CoordinateSparsity, CoordSubspace, LowRank, LowRankSubspace, build_set, top_k
from .structure import decompose

if TYPE_CHECKING:
    from ..model.problem import Problem

RESTRICTED_METHODS = ("auto", "lstsq", "newton", "lbfgs", "cvxpy")
MATERIALIZE_LIMIT = 4_000_000  # entries of J B formed explicitly for a low-rank restricted solve


@dataclass
class RestrictedResult:
    x: np.ndarray  # full flat vector
    f: float  # objective value (including the ridge, if any)
    iterations: int
    method: str
    converged: bool = True
    g: np.ndarray | None = None  # gradient of f at x (without the ridge), when asked for


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
        sets = [build_set(c, self.layout) for c in problem.constraints]
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
        self.kinds = {c.kind for c in problem.constraints}
        self._lowrank_cache: dict[Any, Any] = {}

    # ------------------------------------------------------------------ copies
    def fresh(self) -> LoweredProblem:
        """A copy for one run: its own oracle (zeroed counters); data, design and caches shared."""
        lp = copy.copy(self)
        lp.oracle = self.oracle.fresh()
        return lp

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

    # ------------------------------------------------------------------ restricted minimization
    def restricted_method(self, method: str = "auto") -> str:
        if method not in RESTRICTED_METHODS:
            raise SolverError(
                f"unknown restricted-solve method {method!r}",
                hint=f"choose one of: {', '.join(RESTRICTED_METHODS)}",
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
    ) -> RestrictedResult:
        """min f(x) over the subspace of ``state`` (a support: positions into C; or the singular
        subspaces of a low-rank point); free coordinates are always optimized.

        ``ridge=(rho, R)`` adds rho/2 * ||x_{C[R]}||^2 (R positions into C; coordinate sets).
        ``cols`` gives the flat coordinates directly. ``grad=True`` also returns the full gradient
        of f at the solution (``result.g``).
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
        if isinstance(sub, LowRankSubspace):
            x, f, its, converged, method = self._lowrank_minimize(sub, x0, method, tol)
            ridge_part = 0.0
        else:
            x, f, its, converged, ridge_part = self._coord_minimize(sub.cols, x0, ridge, method, tol)
        g = None
        if grad:
            f, g = self.oracle.value_and_grad(x)
            f += ridge_part
        elif f is None:
            f = self.oracle.f(x) + ridge_part
        return RestrictedResult(x, float(f), its, method, converged, g)

    def _coord_minimize(
        self, cols: np.ndarray, x0: np.ndarray | None, ridge: Any, method: str, tol: float
    ) -> tuple[np.ndarray, float | None, int, bool, float]:
        r = None
        if ridge is not None and ridge[0] > 0:
            rho, R = ridge
            rmask = np.zeros(self.n)
            rmask[self.set.coords[np.asarray(R, dtype=np.int64)]] = rho
            r = rmask[cols]
            if not r.any():
                r = None
        if self.box is not None and self.box.bounded(cols):
            return self._box_minimize(cols, x0, r, method, tol)
        u0 = x0[cols] if x0 is not None else np.zeros(len(cols))
        converged = True
        f = None
        if method == "cvxpy":
            from .cvxpy_lower import restricted_cvxpy

            u, its = restricted_cvxpy(self.objective, self.layout, cols, r)
            self.oracle.charge(ifo=self.n_samples * its)
        elif method == "lbfgs":
            u, its, converged, f = self._lbfgs(cols, u0, r, tol)
        else:
            rd = self.design.reduced(cols)
            if method == "lstsq":
                u, its = kernels.lstsq(rd, r), 1
                f = kernels.evaluate(rd, u, 0, r)[0]
            else:
                res = kernels.newton(rd, u0[None, :], ridge=r, tol=tol)
                u, its, converged, f = res.U[0], res.iterations, bool(res.converged[0]), float(res.values[0])
            self.oracle.charge(grads=its, ifo=self.n_samples * its)
        x = np.zeros(self.n)
        x[cols] = u
        ridge_part = 0.5 * float(np.sum(r * u * u)) if r is not None else 0.0
        return x, f, its, converged, ridge_part

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
    def relaxation(self, kind: str, solver: str = "auto") -> Any:
        """The convex relaxation ``kind`` ('l1', 'nuclear') of this problem, built in cvxpy
        (:mod:`sparsemodel.compile.relax`); ``solve(lam)`` returns the flat x."""
        from .relax import Relaxation

        return Relaxation(self.objective, self.layout, self.set, kind, solver, box=self.box)

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
        hv = self.hessian_operator(x)
        rng = np.random.default_rng(seed)
        starts = [np.ones(self.n), rng.standard_normal(self.n)]
        return kernels.power_method(hv, self.truncation(s), starts, iters=iters)

    def mean_curvature(self, probes: int = 8, x: np.ndarray | None = None, seed: int = 0) -> float:
        """Average diagonal of the Hessian (bound) over the constrained coordinates, by Hutchinson's
        trace estimator with Rademacher probes (exact from the design's columns when small): 1 / this
        is the unit step of HTP for normalized columns (Foucart 2011)."""
        C = self.set.coords if self.set is not None else np.arange(self.n)
        exact = self._mean_curvature_exact(C) if x is None else None
        if exact is not None:
            return exact
        hv = self.hessian_operator(x)
        rng = np.random.default_rng(seed)
        acc = 0.0
        for _ in range(probes):
            z = np.zeros(self.n)
            z[C] = rng.choice((-1.0, 1.0), size=len(C))
            acc += float(z @ hv(z))
        return acc / (probes * len(C))

    def _mean_curvature_exact(self, C: np.ndarray) -> float | None:
        """diag(H)_j = sum_t c_t sum_i bound_ti J_t[i, j]^2 from the design's columns (small
        composite problems whose phi'' has a global bound)."""
        d = self.design
        if d is None or d.curvature_bound() is None:
            return None
        total = np.zeros(len(C))
        for i, t in enumerate(d.terms):
            if t.coef <= 0 or t.rowwise:
                return None
            J = d.full_columns(i)
            if J is None:
                return None
            JC = J[:, C]
            d2 = np.full(t.map.size, 2.0 if t.quadratic else d.curvature_bound())
            if t.weights is not None:
                d2 = d2 * np.abs(t.weights)
            sq = JC.multiply(JC) if sp.issparse(JC) else JC * JC
            total += t.coef * np.asarray(sq.T @ d2).ravel()
        return float(total.mean())


def _operator(m: Any, d: int) -> LinearOperator:
    """An affine map's linear part as a scipy LinearOperator over d reduced coordinates."""
    return LinearOperator(
        (m.size, d),
        matvec=lambda v: m.value(np.ravel(v)) - m.b,
        rmatvec=lambda y: m.vjp(np.ravel(y)),
        dtype=float,
    )


class Clock:
    """Wall-clock timer for solver histories."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def __call__(self) -> float:
        return time.perf_counter() - self.t0


def require_sparsity(lp: LoweredProblem, solver: str) -> CoordinateSparsity:
    if lp.sparsity is None:
        raise SolverError(
            f"{solver} solves sparsity-constrained problems; this problem has no nnz(...) <= k constraint"
        )
    return lp.sparsity


__all__ = ["LoweredProblem", "RestrictedResult", "Clock", "require_sparsity", "RESTRICTED_METHODS"]
