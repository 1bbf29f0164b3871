"""The lowered problem: the only thing a solver sees.

``LoweredProblem`` turns a :class:`~sparsemodel.model.problem.Problem` into functions of one flat
vector x: objective value and gradient (reverse mode), the sparsity structure (which coordinates
are thresholded, which are always free), restricted minimization over a support (step S3 of
GraHTP, the inner solve of OMP/OMPR/ELS/ARHT), and an estimate of the restricted smoothness
constant M_s used for step sizes.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConstraintError, ModelError, SolverError
from ..model.constraints import EigBoxConstraint, NnzConstraint, RankConstraint, top_k
from .evaluator import Evaluator, Layout
from .restricted import ColumnCache, RestrictedResult, composite_eval, solve_lbfgs, solve_lstsq, solve_newton
from .structure import decompose

if TYPE_CHECKING:
    from ..model.problem import Problem

RESTRICTED_METHODS = ("auto", "lstsq", "newton", "lbfgs", "cvxpy")


class SparsitySpec:
    """The sparsity constraint in flat coordinates.

    ``coords`` (C) are the flat coordinates the constraint governs; ``free`` (F) are all others,
    never counted and never thresholded (an intercept, other variables). Supports are given as
    sorted positions into C. With groups, k counts groups and selection keeps whole groups; the
    off-diagonal of a symmetric matrix is selected in pairs (O[i,j], O[j,i]), and ``k`` counts
    pairs (``k_bound``, the bound as written, counts entries).
    """

    def __init__(self, c: NnzConstraint, layout: Layout, k: int | None = None):
        self.constraint = c
        self.var = c.variable
        self.coords = layout.coords(c.variable, c.coords)
        self.unit_size = c.unit_size
        self.k_bound = c.k if k is None else int(k)  # as written: entries (or groups)
        self.k = self.k_bound // self.unit_size  # in selectable units (pairs for symmetric offdiag)
        self.groups = c.groups
        mask = np.ones(layout.n, dtype=bool)
        mask[self.coords] = False
        self.free = np.flatnonzero(mask)
        self.n_units = c.n_units
        if self.groups is not None:
            _, self.unit_of = np.unique(self.groups, return_inverse=True)
        else:
            self.unit_of = None

    @property
    def size(self) -> int:
        return len(self.coords)

    def select(self, zc: np.ndarray, k: int | None = None) -> np.ndarray:
        """Positions into C of the k largest |zc| (or of the k groups of largest norm)."""
        return top_k(zc, self.k if k is None else k, self.groups)

    def support(self, x: np.ndarray) -> np.ndarray:
        """Positions into C where x is nonzero."""
        return np.flatnonzero(x[self.coords] != 0)

    def units(self, sel: np.ndarray) -> int:
        """How many units (coordinates or groups) the positions ``sel`` touch."""
        if self.unit_of is None:
            return len(sel)
        return len(np.unique(self.unit_of[sel]))

    def flat(self, sel: np.ndarray) -> np.ndarray:
        """Sorted flat coordinates of C[sel] together with the free coordinates."""
        return np.union1d(self.coords[np.asarray(sel, dtype=np.int64)], self.free)

    def project(self, z: np.ndarray, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Hard thresholding H_k on C (free coordinates untouched): (projected z, selected positions)."""
        sel = self.select(z[self.coords], k)
        out = z.copy()
        drop = np.ones(self.size, dtype=bool)
        drop[sel] = False
        out[self.coords[drop]] = 0.0
        return out, sel


class LoweredProblem:
    """A problem as functions of the flat vector x, for solvers."""

    def __init__(self, problem: Problem, k: int | None = None):
        self.problem = problem
        self.layout = Layout(problem.variables)
        self.n = self.layout.n
        self.objective = problem.objective.expr
        self.ev = Evaluator(self.objective, self.layout)
        self.composite = decompose(self.objective, self.layout)
        self._cols = ColumnCache(self.composite, self) if self.composite is not None else None
        nnz = [c for c in problem.constraints if isinstance(c, NnzConstraint)]
        if len(nnz) > 1:
            raise ConstraintError(
                f"{len(nnz)} sparsity constraints ({'; '.join(str(c) for c in nnz)}); one per problem is supported",
                nnz[1].span,
                "combine them into one nnz(...) over a single variable, or use groups=",
            )
        self.sparsity = SparsitySpec(nnz[0], self.layout, k) if nnz else None
        self.rank = next((c for c in problem.constraints if isinstance(c, RankConstraint)), None)
        self.eig_box = next((c for c in problem.constraints if isinstance(c, EigBoxConstraint)), None)
        self.kinds = {c.kind for c in problem.constraints}
        self.stats = {"grad_evals": 0, "func_evals": 0, "restricted_solves": 0}
        self.n_samples = self.composite.n_samples() if self.composite is not None else 1

    # ------------------------------------------------------------------ basics
    @property
    def structure(self) -> str:
        if self.composite is not None:
            return self.composite.describe()
        return "general smooth objective (L-BFGS restricted solves)"

    @property
    def primary(self):
        if self.sparsity is not None:
            return self.sparsity.var
        for c in (self.rank, self.eig_box):
            if c is not None:
                return c.variable
        return self.layout.variables[0]

    def zeros(self) -> np.ndarray:
        return np.zeros(self.n)

    def f(self, x: np.ndarray) -> float:
        self.stats["func_evals"] += 1
        return float(self.ev.value(x))

    def value_and_grad(self, x: np.ndarray, coords: np.ndarray | None = None) -> tuple[float, np.ndarray]:
        self.stats["grad_evals"] += 1
        return self.ev.value_and_grad(x, coords=coords)

    def grad(self, x: np.ndarray) -> np.ndarray:
        return self.value_and_grad(x)[1]

    def ifo(self) -> int:
        """Incremental first-order oracle calls so far (paper 002, Definition 1): one per sample
        per full gradient."""
        return self.stats["grad_evals"] * self.n_samples

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
            if self.composite is None:
                return "lbfgs"
            return "lstsq" if self.composite.least_squares else "newton"
        if method in ("lstsq", "newton") and self.composite is None:
            raise SolverError(
                f"restricted method {method!r} needs an objective made of elementwise losses of affine maps; "
                f"this one is a {self.structure}",
                hint="use method='lbfgs' or 'cvxpy'",
            )
        if method == "lstsq" and not self.composite.least_squares:
            raise SolverError("restricted method 'lstsq' needs a least-squares objective", hint="use 'newton'")
        return method

    def restricted_minimize(
        self,
        sel: np.ndarray | None,
        x0: np.ndarray | None = None,
        ridge: tuple[float, np.ndarray] | None = None,
        method: str = "auto",
        tol: float = 1e-12,
        cols: np.ndarray | None = None,
        grad: bool = False,
    ) -> RestrictedResult:
        """min f(x) s.t. x is zero on C outside ``sel`` (positions into C); free coordinates optimized.

        ``ridge=(rho, R)`` adds rho/2 * ||x_{C[R]}||^2 (R positions into C). ``cols`` overrides the
        set of flat coordinates directly (for problems without a sparsity constraint).
        ``grad=True`` also returns the full gradient of f at the solution (``result.g``), at no
        extra cost over the final evaluation.
        """
        method = self.restricted_method(method)
        self.stats["restricted_solves"] += 1
        if cols is None:
            if self.sparsity is None:
                cols = np.arange(self.n)
            else:
                cols = self.sparsity.flat(np.asarray(sel if sel is not None else [], dtype=np.int64))
        cols = np.asarray(cols, dtype=np.int64)
        r = None
        if ridge is not None and ridge[0] > 0:
            rho, R = ridge
            rmask = np.zeros(self.n)
            rmask[self.sparsity.coords[np.asarray(R, dtype=np.int64)]] = rho
            r = rmask[cols]
            if not r.any():
                r = None
        u0 = x0[cols] if x0 is not None else np.zeros(len(cols))
        converged = True
        f = None  # the value including the ridge, when the path computed it
        if method == "cvxpy":
            u, its = self._restricted_cvxpy(cols, r)
        elif method == "lbfgs":
            u, its, converged, f = solve_lbfgs(self, cols, u0, r, tol=tol)
            self.stats["grad_evals"] += its
        else:
            Js, Qs = self._cols.columns(cols)
            if method == "lstsq":
                u, its = solve_lstsq(self.composite, Js, u0, r)
                f = composite_eval(self.composite, Js, Qs, u, r, 0)[0]
            else:
                u, its, converged, f = solve_newton(self.composite, Js, Qs, u0, r, tol=tol)
            self.stats["grad_evals"] += its
        x = np.zeros(self.n)
        x[cols] = u
        ridge_part = 0.5 * float(np.sum(r * u * u)) if r is not None else 0.0
        g = None
        if grad:
            f, g = self.value_and_grad(x)
            f += ridge_part
        elif f is None:
            f = self.f(x) + ridge_part
        return RestrictedResult(x, float(f), its, method, converged, g)

    def _restricted_cvxpy(self, cols: np.ndarray, r: np.ndarray | None) -> tuple[np.ndarray, int]:
        import cvxpy as cp

        from .cvxpy_lower import lower_expr, solve_cvxpy

        u = cp.Variable(len(cols))
        obj = lower_expr(self.objective, self.layout, u, cols)
        if r is not None:
            obj = obj + 0.5 * cp.sum(cp.multiply(r, cp.square(u)))
        prob = cp.Problem(cp.Minimize(obj))
        solve_cvxpy(prob)
        return np.asarray(u.value, dtype=float).ravel(), int(prob.solver_stats.num_iters or 0)

    # ------------------------------------------------------------------ smoothness
    def hessian_operator(self, x: np.ndarray | None = None):
        """v -> H v, with H an upper bound of the Hessian over the whole domain when one is known
        (composite objectives with bounded phi''), else the Hessian at x (finite differences of
        the derived gradient for general objectives)."""
        x = self.zeros() if x is None else x
        comp = self.composite
        if comp is not None:
            bound = comp.phi_curvature_bound()
            d2s = []
            for t in comp.terms:
                if t.phi is None:
                    d2s.append(None)
                    continue
                if bound is not None and t.coef > 0:
                    d2 = np.full(t.affine.size, 2.0 if t.quadratic else bound)
                    if t.weights is not None:
                        d2 = d2 * np.abs(t.weights)
                else:
                    z = np.atleast_1d(np.asarray(t.ev.value(x), dtype=float)).ravel()
                    d2 = t.phi_d(z)[2]
                d2s.append(d2)
            zero = self.zeros()

            def hv(v: np.ndarray) -> np.ndarray:
                out = np.zeros(self.n)
                for t, d2 in zip(comp.terms, d2s):
                    if d2 is None:
                        continue
                    Jv = np.atleast_1d(np.asarray(t.ev.value(v), dtype=float)).ravel() - t.b
                    cot = (d2 * Jv).reshape(t.affine.shape) if t.affine.shape else float((d2 * Jv)[0])
                    out += t.coef * t.ev.vjp(zero, cot)
                for q in comp.quads:
                    a = np.asarray(q.ev.value(v), dtype=float).ravel() - q.b
                    out += q.coef * q.ev.vjp(zero, (q.P + q.P.T) @ a)
                return out

            return hv

        g0 = self.grad(x)
        scale = max(1.0, float(np.linalg.norm(x)))

        def hv_fd(v: np.ndarray) -> np.ndarray:
            nv = float(np.linalg.norm(v))
            if nv == 0:
                return np.zeros(self.n)
            eps = 1e-6 * scale / nv
            g1 = self.grad(x + eps * v)
            if not np.all(np.isfinite(g1)):
                g1 = 2 * g0 - self.grad(x - eps * v)
            return (g1 - g0) / eps

        return hv_fd

    def smoothness(self, s: int | None = None, x: np.ndarray | None = None, iters: int = 100, seed: int = 0) -> float:
        """Estimate of the restricted smoothness constant M_s: the largest eigenvalue of the
        Hessian (bound) over vectors with at most s nonzeros on C (free coordinates always allowed),
        by the truncated power method (Yuan & Zhang 2013) from two starting points."""
        hv = self.hessian_operator(x)
        if self.sparsity is None or s is None or s >= self.sparsity.size:
            C, F, s_eff = np.arange(self.n), np.empty(0, dtype=np.int64), None
        else:
            C, F, s_eff = self.sparsity.coords, self.sparsity.free, int(s)
        rng = np.random.default_rng(seed)
        starts = [np.ones(self.n), rng.standard_normal(self.n)]
        best = 0.0
        for v in starts:
            v = self._truncate(v, C, F, s_eff)
            lam = 0.0
            for _ in range(iters):
                w = hv(v)
                lam_new = float(v @ w)
                v_new = self._truncate(w, C, F, s_eff)
                if not np.any(v_new):
                    break
                if abs(lam_new - lam) <= 1e-9 * max(abs(lam_new), 1e-300):
                    lam = lam_new
                    break
                lam, v = lam_new, v_new
            best = max(best, lam)
        return best

    def mean_curvature(self, probes: int = 8, x: np.ndarray | None = None, seed: int = 0) -> float:
        """Average diagonal of the Hessian (bound) over the constrained coordinates, by Hutchinson's
        trace estimator with Rademacher probes: 1 / this is the unit step of HTP for normalized
        columns (Foucart 2011)."""
        C = self.sparsity.coords if self.sparsity is not None else np.arange(self.n)
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
        """The same average computed from cached Jacobian columns (small composite problems whose
        phi'' has a global bound): diag(H)_j = sum_t c_t sum_i bound_ti J_t[i, j]^2."""
        comp = self.composite
        if comp is None or comp.quads or comp.phi_curvature_bound() is None:
            return None
        total = np.zeros(len(C))
        for i, t in enumerate(comp.terms):
            if t.phi is None:
                continue
            if t.coef <= 0:
                return None
            J = self._cols._full(i, t.affine)
            if J is None:
                return None
            JC = J[:, C]
            d2 = np.full(t.affine.size, 2.0 if t.quadratic else comp.phi_curvature_bound())
            if t.weights is not None:
                d2 = d2 * np.abs(t.weights)
            sq = JC.multiply(JC) if hasattr(JC, "multiply") else JC * JC
            total += t.coef * np.asarray(sq.T @ d2).ravel()
        return float(total.mean())

    @staticmethod
    def _truncate(w: np.ndarray, C: np.ndarray, F: np.ndarray, s: int | None) -> np.ndarray:
        out = np.zeros_like(w)
        if s is None:
            out[C] = w[C]
        else:
            keep = C[top_k(w[C], s)]
            out[keep] = w[keep]
        out[F] = w[F]
        nrm = np.linalg.norm(out)
        return out / nrm if nrm > 0 else out


class Clock:
    """Wall-clock timer for solver histories."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def __call__(self) -> float:
        return time.perf_counter() - self.t0


def require_sparsity(lp: LoweredProblem, solver: str) -> Any:
    if lp.sparsity is None:
        raise SolverError(
            f"{solver} solves sparsity-constrained problems; this problem has no nnz(...) <= k constraint"
        )
    return lp.sparsity


__all__ = ["LoweredProblem", "SparsitySpec", "Clock", "require_sparsity", "ModelError"]
