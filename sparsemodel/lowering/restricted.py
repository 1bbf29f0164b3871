"""Restricted (debiasing) solves: min f over the subspace of a set's state, free coordinates
always optimized, dispatched through one table (:data:`BACKENDS`) to a back-end by the objective's
form and the subspace: each back-end a function ``solve(lp, sub, req) -> Solved`` in its own module
(:mod:`.backend` states the contract).

=============  =============================================================================
form           back-end
=============  =============================================================================
``spca``       sparse PCA: the leading eigenvector on the support (:mod:`.spca_solve`)
``precision``  subproblem (13) of paper 000: covsel, barrier Newton, the ADMM (:mod:`.precision_solve`)
``linear``     a support under linear constraints: SQP, SLSQP (:mod:`.linear_solve`)
``box``        a support inside the coordinate box: projected Newton, L-BFGS-B (:mod:`.box_solve`)
``coords``     a support: least squares, Newton, L-BFGS (:mod:`.coords_solve`)
``basis``      a subspace given by a linear basis (fused sparsity's pieces, :mod:`.basis_solve`)
``lowrank``    the subspaces of a low-rank point (:mod:`.lowrank_solve`)
``product``    the product of several parts' subspaces (:mod:`.product_solve`)
=============  =============================================================================

Method ``cvxpy`` (the same problem written in cvxpy) is the reference of the coordinate, box, linear,
low-rank, product and precision forms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import SolverError
from ..sets.base import CoordSubspace
from .backend import Request, Solved
from .basis_solve import basis_solve
from .box_solve import box_solve
from .coords_solve import coords_solve
from .data import LoweredData
from .guards import raise_unbounded, runs_away
from .linear_solve import linear_solve
from .lowrank_solve import lowrank_solve
from .precision_solve import precision_solve
from .product_solve import product_solve
from .spca_solve import spca_solve

RESTRICTED_METHODS = ("auto", "lstsq", "newton", "lbfgs", "cvxpy", "admm", "covsel")

BACKENDS: dict[str, Callable[[LoweredData, Any, Request], Solved]] = {
    "spca": spca_solve,
    "precision": precision_solve,
    "linear": linear_solve,
    "box": box_solve,
    "coords": coords_solve,
    "basis": basis_solve,
    "lowrank": lowrank_solve,
    "product": product_solve,
}


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

    def grad_at(self, lp: LoweredData) -> np.ndarray:
        """The gradient of f (without the ridge) at x: ``g`` when it was asked for, else from the
        loss derivatives the Newton solve ended with (one transposed product with the data, no
        forward pass), else a full evaluation. Counted as one gradient evaluation either way."""
        if self.g is not None:
            return self.g
        if self.d1 is not None:
            lp.oracle.charge(grads=1, ifo=lp.n_samples)
            return lp.design.grad_from_derivs(self.d1)
        return lp.value_and_grad(self.x)[1]


def backend_form(lp: LoweredData, sub: Any, method: str) -> str:
    """The key of :data:`BACKENDS` for a solve on ``sub``: the objective's form first (sparse PCA;
    the precision matrix on a support, with the methods of (13) or under the eigenvalue box), then
    the side sets a support's solve keeps (the linear constraints when they read it or do not hold at
    zero, the box when it bounds it), else the subspace's own form."""
    if lp.spca is not None:
        return "spca"
    if sub.form != "coords":
        return sub.form
    if lp.precision is not None and (method in ("admm", "covsel", "newton") or lp.eigbox is not None):
        return "precision"
    if lp.linear is not None and (lp.linear.touches(sub.cols) or not lp.linear.holds_at_zero):
        return "linear"
    if lp.box is not None and lp.box.bounded(sub.cols):
        return "box"
    return "coords"


def restricted_method(lp: LoweredData, method: str = "auto") -> str:
    if method not in RESTRICTED_METHODS:
        raise SolverError(
            f"unknown restricted-solve method {method!r}",
            hint=f"choose one of: {', '.join(RESTRICTED_METHODS)}",
        )
    if method in ("admm", "covsel") and lp.precision is None:
        raise SolverError(
            f"restricted method {method!r} solves the precision-matrix problem -logdet(O) + trace(S @ O) "
            "(paper 000, (13)); this objective is not of that form",
            hint="use method='auto'",
        )
    if lp.precision is not None and method == "auto":
        return "covsel"
    if lp.precision is not None and method in ("admm", "covsel", "newton"):
        return method
    if lp.eigbox is not None and lp.precision is None:
        raise SolverError(
            f"restricted solves under {lp.eigbox.constraint} need the objective c * (-logdet(O) + "
            "trace(S @ O)) in the one variable O (the Gaussian log-likelihood, paper 000, Section 5.3)",
            lp.eigbox.span,
            "write the objective as -logdet(O) + trace(S @ O)",
        )
    if method == "auto":
        if lp.design is None:
            return "lbfgs"
        return "lstsq" if lp.design.least_squares else "newton"
    if method in ("lstsq", "newton") and lp.design is None:
        raise SolverError(
            f"restricted method {method!r} needs an objective made of losses of affine maps; "
            f"this one is a {lp.structure}",
            hint="use method='lbfgs' or 'cvxpy'",
        )
    if method == "lstsq" and not lp.design.least_squares:
        raise SolverError("restricted method 'lstsq' needs a least-squares objective", hint="use 'newton'")
    return method


def subspace(lp: LoweredData, state: Any) -> Any:
    """The subspace of a state of the set (None: the empty state); every coordinate without a set."""
    if lp.set is None:
        return CoordSubspace(np.arange(lp.n), lp.n)
    return lp.set.subspace(state if state is not None else lp.set.empty())


def restricted_minimize(
    lp: LoweredData,
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
    method = restricted_method(lp, method)
    lp.oracle.charge(solves=1)
    sub = CoordSubspace(np.asarray(cols, dtype=np.int64), lp.n) if cols is not None else subspace(lp, state)
    solve = BACKENDS[backend_form(lp, sub, method)]
    x, f, its, converged, method, ridge_part, d1, hess = solve(lp, sub, Request(x0, ridge, method, tol, give_up, hint))
    start = x0 if x0 is not None else np.zeros(lp.n)
    scale = 1.0 + float(np.linalg.norm(start))
    if (f is not None and f == -np.inf) or float(np.linalg.norm(x)) > 1e12 * scale:
        raise_unbounded(lp, sub.dim, x, f)
    far = float(np.linalg.norm(x - start)) > 1e4 * scale  # a Newton step into a flat region
    # (a solve abandoned at give_up stopped on purpose: not a sign of an unbounded objective)
    if (not converged or far) and give_up is None and runs_away(lp, x, x - start):
        raise_unbounded(lp, sub.dim, x, f)
    g = None
    if grad and d1 is not None and f is not None:  # from the solve's last loss derivatives
        lp.oracle.charge(grads=1, ifo=lp.n_samples)
        g = lp.design.grad_from_derivs(d1)
    elif grad:
        f, g = lp.oracle.value_and_grad(x)
        f += ridge_part
    elif f is None:
        f = lp.oracle.f(x) + ridge_part
    return RestrictedResult(x, float(f), its, method, converged, g, d1, hess)
