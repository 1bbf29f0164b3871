"""Restricted (debiasing) solves: min f over the subspace of a set's state, free coordinates
always optimized, dispatched by the objective's form and the subspace to a back-end: least
squares, Newton, projected Newton in a box, L-BFGS, cvxpy (the reference); the precision and
low-rank subspaces have their own parts (:mod:`.precision_solve`, :mod:`.lowrank_solve`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from ..errors import SolverError
from ..numerics.evaluation import evaluate
from ..numerics.lstsq import lstsq, lstsq_normal
from ..numerics.newton import newton
from ..numerics.smooth import box_newton, lbfgs
from ..objective.terms import Reduced
from ..sets.base import CoordSubspace
from .spca_solve import spca_backend

if TYPE_CHECKING:
    from .lowered import LoweredProblem

RESTRICTED_METHODS = ("auto", "lstsq", "newton", "lbfgs", "cvxpy", "admm", "covsel")


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


def _embed(cols: np.ndarray, u: np.ndarray, n: int) -> np.ndarray:
    x = np.zeros(n)
    x[cols] = u
    return x


class RestrictedSolves:
    """Restricted (debiasing) solves: min f over the subspace of a set's state, free coordinates"""

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
        solve its first steps without forming one (:func:`_factor_from_hint`).
        """
        method = self.restricted_method(method)
        self.oracle.charge(solves=1)
        if cols is not None:
            sub: Any = CoordSubspace(np.asarray(cols, dtype=np.int64), self.n)
        elif self.set is None:
            sub = CoordSubspace(np.arange(self.n), self.n)
        else:
            sub = self.set.subspace(state if state is not None else self.set.empty())
        precision = (
            self.precision is not None
            and (method in ("admm", "covsel", "newton") or self.eigbox is not None)
            and sub.form == "coords"
        )
        form = "spca" if getattr(self, "spca", None) is not None else "precision" if precision else sub.form
        backend = BACKENDS[form]
        x, f, its, converged, method, ridge_part, d1, hess = backend(self, sub, x0, ridge, method, tol, give_up, hint)
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
        if self.linear is not None and (self.linear.touches(cols) or not self.linear.holds_at_zero):
            return (*self._linear_minimize(cols, x0, r, method, tol), None, None)
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
                u, its = lstsq_normal(G + np.diag(0.5 * r) if r is not None else G, h), 1
                f = (
                    c0
                    + float(u @ (G @ u))
                    - 2.0 * float(h @ u)
                    + (0.5 * float(np.sum(r * u * u)) if r is not None else 0)
                )
            elif method == "lstsq":
                rd = self.design.reduced(cols)
                u, its = lstsq(rd, r), 1
                f = evaluate(rd, u, 0, r)[0]
            else:
                rd = self.design.reduced(cols)
                kh = _hint_positions(hint, cols)
                res = newton(rd, u0[None, :], ridge=r, tol=tol, give_up=give_up, hint=kh)
                if not np.isfinite(res.values[0]):  # the start lies outside the loss's domain
                    u1 = self.inside_domain(_embed(cols, u0, self.n))[cols]
                    res = newton(rd, u1[None, :], ridge=r, tol=tol, give_up=give_up)
                u, its, converged, f = res.U[0], res.iterations, bool(res.converged[0]), float(res.values[0])
                d1 = res.d1 if np.isfinite(f) else None
                hess = (cols, *res.hessian) if res.hessian is not None else None
            self.oracle.charge(grads=its, ifo=self.n_samples * its)
        x = np.zeros(self.n)
        x[cols] = u
        ridge_part = 0.5 * float(np.sum(r * u * u)) if r is not None else 0.0
        return x, f, its, converged, ridge_part, d1, hess

    def _box_minimize(
        self, cols: np.ndarray, x0: np.ndarray | None, r: np.ndarray | None, method: str, tol: float
    ) -> tuple[np.ndarray, float | None, int, bool, float]:
        """The restricted solve on ``cols`` within the box: coordinates with lo = hi are fixed at
        their value; the others by projected Newton (``lstsq``/``newton``: :func:`box_newton`),
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
            res = box_newton(rd, u0, lo_v, hi_v, ridge=r_v, tol=tol)
            u, its, converged, f = res.u, res.iterations, res.converged, res.f
            self.oracle.charge(grads=its, ifo=self.n_samples * its)
        x = base
        x[vc] = u
        ridge_part = 0.5 * float(np.sum(r_v * u * u)) if r_v is not None else 0.0
        return x, f, its, converged, ridge_part

    def _basis_minimize(self, sub: Any, x0: np.ndarray | None, method: str, tol: float) -> tuple:
        """min f over a linear subspace x[cols] = B u (``sub.basis``, sparse; the rest of x zero):
        the composite design's columns times B are the reduced problem's columns (least squares or
        Newton on u); without a composite form, L-BFGS on u. (x, f or None, iterations, converged,
        method)."""
        B = sub.basis
        u0 = sub.coords_of(x0) if x0 is not None else np.zeros(sub.dim)
        if self.design is None or method in ("lbfgs", "cvxpy"):
            ev, calls = self.ev, [0]

            def fun(u: np.ndarray) -> tuple[float, np.ndarray]:
                calls[0] += 1
                f, g = ev.value_and_grad(sub.embed(u))
                return (f, sub.restrict(g)) if np.isfinite(f) else (np.inf, np.zeros_like(u))

            u, its, ok, f = lbfgs(fun, u0, tol=tol)
            self.oracle.charge(grads=calls[0], ifo=self.n_samples * calls[0])
            return sub.embed(u), f, its, ok, "lbfgs"
        rd = self.design.reduced(sub.cols)
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
        self.oracle.charge(grads=its, ifo=self.n_samples * its)
        return sub.embed(u), f, its, ok, method

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
        u, its, ok, f = lbfgs(fun, u0, tol=tol, bounds=bounds)
        self.oracle.charge(grads=calls[0], ifo=self.n_samples * calls[0])
        return u, its, ok, f


# ---------------------------------------------------------------------- the dispatch table
# (objective form x subspace) -> back-end: the precision-matrix form of paper 000's subproblem (13)
# on any support; otherwise by the subspace's form: coordinates (least squares, Newton, L-BFGS,
# cvxpy, projected Newton in a box) or the subspaces of a low-rank point. Every back-end returns
# (x, f or None, iterations, converged, method used, the ridge's part of f, the Newton solve's loss
# derivatives, its last Hessian).


def _precision_backend(
    lp: Any, sub: Any, x0: Any, ridge: Any, method: str, tol: float, give_up: Any, hint: Any
) -> tuple:
    x, f, its, converged, method = lp._precision_minimize(sub.cols, x0, method, ridge)
    return x, f, its, converged, method, 0.0, None, None


def _coord_backend(lp: Any, sub: Any, x0: Any, ridge: Any, method: str, tol: float, give_up: Any, hint: Any) -> tuple:
    x, f, its, converged, ridge_part, d1, hess = lp._coord_minimize(sub.cols, x0, ridge, method, tol, give_up, hint)
    return x, f, its, converged, method, ridge_part, d1, hess


def _lowrank_backend(lp: Any, sub: Any, x0: Any, ridge: Any, method: str, tol: float, give_up: Any, hint: Any) -> tuple:
    x, f, its, converged, method = lp._lowrank_minimize(sub, x0, method, tol)
    return x, f, its, converged, method, 0.0, None, None


def _basis_backend(lp: Any, sub: Any, x0: Any, ridge: Any, method: str, tol: float, give_up: Any, hint: Any) -> tuple:
    x, f, its, converged, method = lp._basis_minimize(sub, x0, method, tol)
    return x, f, its, converged, method, 0.0, None, None


def _product_backend(lp: Any, sub: Any, x0: Any, ridge: Any, method: str, tol: float, give_up: Any, hint: Any) -> tuple:
    from .product_solve import product_minimize

    x, f, its, converged, method = product_minimize(lp, sub, x0, method, tol)
    return x, f, its, converged, method, 0.0, None, None


BACKENDS = {
    "spca": spca_backend,  # sparse PCA: the leading eigenvector on the support (lowering/spca_solve.py)
    "precision": _precision_backend,
    "coords": _coord_backend,
    "lowrank": _lowrank_backend,
    "basis": _basis_backend,
    "product": _product_backend,
}
