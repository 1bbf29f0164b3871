"""Lowering of model expressions to cvxpy: one table from atoms to cvxpy builders.

:data:`CANON` maps each atom class to a function building its cvxpy counterpart from the lowered
arguments (the cvxpy way: ``CANON_METHODS``). :func:`lower_expr` walks an expression once with it.
The variables of the problem become one cvxpy vector ``u`` over a chosen set of flat coordinates
(all others fixed at zero), so the same lowering serves a whole problem, a problem restricted to a
support (:func:`restricted_cvxpy`, the reference for the NumPy restricted solves) and the convex
relaxations of :mod:`sparsemodel.lowering.relax`. Solvers never import cvxpy: they go through here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from ..errors import ModelError, SolverError, Span
from ..model import atoms as A
from ..model.arith import Add, Div, Index, MatMul, Mul, Neg, Sub, Transpose
from ..model.expr import Expr, Variable, dense
from ..model.userfunc import UserFunc
from ..objective.evaluator import Layout

if TYPE_CHECKING:
    import sympy

# tight tolerances so that the reference agrees with the NumPy paths to ~1e-8 relative
SOLVER_OPTS: dict[str, dict[str, Any]] = {
    "CLARABEL": {"tol_gap_abs": 1e-11, "tol_gap_rel": 1e-11, "tol_feas": 1e-11, "max_iter": 500},
    "SCS": {"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iters": 200000},
}


def _cp() -> Any:
    import cvxpy as cp

    return cp


def _quad_form(node: A.quad_form, args: list[Any]) -> Any:
    cp = _cp()
    P = dense(node.args[1].constant_value())
    P = (P + P.T) / 2
    return cp.quad_form(args[0], cp.psd_wrap(P) if node.curvature_kind == "convex" else P)


def _mean(node: A.mean, args: list[Any]) -> Any:
    return _cp().sum(args[0], axis=node.axis) / node._count()


def _user(node: UserFunc, args: list[Any]) -> Any:
    return sympy_to_cvxpy(node.fdef.body, node.fdef.z, args[0], node.fdef.name, node.span)


def _cox(node: A.cox, args: list[Any]) -> Any:
    """sum over the tie groups k and their terms l of wbar_k log_sum_exp(z_j + log(c_klj w_j) over
    the risk set), less sum over the events of w_i z_i (``cox``'s docstring: c = 1, or 1 - l/d_k on
    the group's events for Efron's ties): one log_sum_exp per event (O(n^2) entries in all, for the
    reference solves on small problems)."""
    cp = _cp()
    time = np.ravel(dense(args[1]))
    event = np.ravel(dense(args[2])) > 0
    w = np.ravel(dense(args[3])) if len(args) > 3 else np.ones(len(time))
    z = args[0]
    parts = []
    for t in np.unique(time[event]):
        D = (time == t) & event
        d, W = int(D.sum()), float(w[D].sum())
        if W <= 0:
            continue
        R = np.flatnonzero((time >= t) & (w > 0))
        for l in range(d):
            a = l / d if node.ties == "efron" else 0.0
            c = 1.0 - a * D[R]
            parts.append((W / d) * cp.log_sum_exp(z[R] + np.log(c * w[R])))
    if not parts:
        return cp.Constant(0.0)
    ev = np.flatnonzero(event & (w > 0))
    return cp.sum(cp.hstack(parts)) - w[ev] @ z[ev]


def _ordinal(node: A.ordinal, args: list[Any]) -> Any:
    """sum over the samples of w_i (softplus(-a) + softplus(b) - log(1 - exp(b - a))), a = theta_c - z
    and b = theta_(c-1) - z (the first class without b, the last without a), w the case weights (1
    without): DCP as logistic(.) and -log(1 - exp(affine)) (log of a concave argument)."""
    cp = _cp()
    z, th = args[0], args[1]
    c, w = node.cls, node.w
    parts = []
    mid = np.flatnonzero(node.has_a & node.has_b)
    if len(mid):
        a = th[c[mid]] - z[mid]
        b = th[c[mid] - 1] - z[mid]
        parts.append(w[mid] @ (cp.logistic(-a) + cp.logistic(b) - cp.log(1 - cp.exp(b - a))))
    first = np.flatnonzero(~node.has_b)
    if len(first):
        parts.append(w[first] @ cp.logistic(z[first] - th[0]))
    last = np.flatnonzero(~node.has_a)
    if len(last):
        parts.append(w[last] @ cp.logistic(th[node.J - 2] - z[last]))
    return sum(parts[1:], parts[0])


CANON: dict[type, Callable[[Any, list[Any]], Any]] = {
    A.square: lambda n, a: _cp().square(a[0]),
    A.exp: lambda n, a: _cp().exp(a[0]),
    A.log: lambda n, a: _cp().log(a[0]),
    A.logistic: lambda n, a: _cp().logistic(a[0]),
    A.huber: lambda n, a: _cp().huber(a[0], n.M),
    A.sum: lambda n, a: _cp().sum(a[0], axis=n.axis),
    A.mean: _mean,
    A.sum_squares: lambda n, a: _cp().sum_squares(a[0]),
    A.logsumexp: lambda n, a: _cp().log_sum_exp(a[0], axis=n.axis),
    A.trace: lambda n, a: _cp().trace(a[0]),
    A.logdet: lambda n, a: _cp().log_det(a[0]),
    A.quad_form: _quad_form,
    A.cox: _cox,
    A.ordinal: _ordinal,
    UserFunc: _user,
    Add: lambda n, a: a[0] + a[1],
    Sub: lambda n, a: a[0] - a[1],
    Neg: lambda n, a: -a[0],
    Div: lambda n, a: a[0] / a[1],
    Mul: lambda n, a: _cp().multiply(a[0], a[1]),
    MatMul: lambda n, a: a[0] @ a[1],
    Transpose: lambda n, a: a[0].T,
    Index: lambda n, a: a[0][n.key],
}


def canon(node: Expr) -> Callable[[Any, list[Any]], Any]:
    for cls in type(node).__mro__:
        if cls in CANON:
            return CANON[cls]
    what = node.name if isinstance(node, A.Atom) else type(node).__name__
    raise ModelError(
        f"{what} has no cvxpy counterpart",
        node.span,
        "the cvxpy reference solves (restricted='cvxpy') and the convex relaxations (lasso, nuclear, glasso, tv) "
        "need one; the hard-thresholding and greedy solvers (auto, grahtp, fgrahtp, iht, omp, ompr, els, grasp, "
        "foba, arht) do not",
    )


def missing_counterpart(e: Expr) -> ModelError | None:
    """The error :func:`canon` raises for the first node of ``e`` without a cvxpy counterpart (a
    ``custom_loss``), or None: what the cvxpy paths (the relaxations, ``restricted='cvxpy'``) need,
    found by walking the tree without importing cvxpy."""
    for node in e.walk():
        if node.is_constant() or isinstance(node, Variable):
            continue
        try:
            canon(node)
        except ModelError as exc:
            return exc
    return None


def lower_expr(
    e: Expr,
    layout: Layout,
    u: Any,
    cols: np.ndarray | None = None,
    cache: dict[int, Any] | None = None,
    embed: Any = None,
) -> Any:
    """cvxpy expression equal to ``e`` with x[cols] = u and every other coordinate of x zero, or,
    with ``embed`` (an n x d matrix), x = embed @ u (a point of a linear subspace)."""
    cp = _cp()
    cache = {} if cache is None else cache
    n = layout.n
    if embed is None:
        cols = np.asarray(cols, dtype=np.int64)
        pos = np.full(n, -1)
        pos[cols] = np.arange(len(cols))
        d = len(cols)
    else:
        embed = sp.csr_matrix(embed)
        d = embed.shape[1]

    def var_expr(v: Variable) -> Any:
        sl = layout.slice(v)
        if embed is not None:
            E = embed[sl]
            if E.nnz == 0:
                return np.zeros(v.shape) if v.shape else 0.0
        else:
            local = pos[sl]
            keep = np.flatnonzero(local >= 0)
            if keep.size == 0:
                return np.zeros(v.shape) if v.shape else 0.0
            E = sp.csr_matrix((np.ones(len(keep)), (keep, local[keep])), shape=(v.size, d))
        flat = E @ u
        if not v.shape:
            return flat[0]
        return cp.reshape(flat, v.shape, order="C") if len(v.shape) > 1 else flat

    for node in e.walk():
        if node.is_constant():
            val = node.constant_value()
            cache[node.uid] = val if sp.issparse(val) else (dense(val) if node.shape else float(val))
        elif isinstance(node, Variable):
            cache[node.uid] = var_expr(node)
        else:
            cache[node.uid] = canon(node)(node, [cache[a.uid] for a in node.args])
    return cache[e.uid]


def solve_cvxpy(problem: Any, solver: str | None = None) -> str:
    """Solve a cvxpy problem with tight tolerances, trying Clarabel then SCS; returns the status.

    An 'optimal_inaccurate' answer is kept only if no later solver does better; cvxpy's warning
    about it is not shown to the user (the status says it)."""
    import warnings

    cp = _cp()
    order = [solver] if solver else ["CLARABEL", "SCS"]
    last: Exception | None = None
    fallback: dict[int, Any] | None = None
    for name in order:
        if name not in cp.installed_solvers():
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                problem.solve(solver=name, **SOLVER_OPTS.get(name, {}))
        except cp.error.SolverError as exc:  # try the next solver
            last = exc
            continue
        if problem.status == "optimal":
            return "optimal"
        if problem.status == "optimal_inaccurate" and fallback is None:
            fallback = {id(v): v.value for v in problem.variables()}
    if fallback is not None:
        for v in problem.variables():
            v.value = fallback[id(v)]
        return "optimal_inaccurate"
    raise ModelError(f"cvxpy could not solve the problem (status {problem.status}; {last or ''})")


def restricted_cvxpy(
    objective: Expr,
    layout: Layout,
    cols: np.ndarray | None,
    ridge: np.ndarray | None = None,
    embed: Any = None,
    bounds: tuple[np.ndarray, np.ndarray] | None = None,
    linear: Any = None,
) -> tuple[np.ndarray, int]:
    """min f over x supported on ``cols`` (+ 1/2 sum ridge_j x_j^2), or over x = embed @ u, in
    cvxpy: the reference path. ``bounds`` = (lo, hi) keeps u in a box (infinite entries: open);
    ``linear`` (a :class:`sparsemodel.numerics.qp.Polyhedron` in u) adds A u = b, G u <= h."""
    cp = _cp()
    u = cp.Variable(len(cols) if embed is None else embed.shape[1])
    obj = lower_expr(objective, layout, u, cols, embed=embed)
    if ridge is not None:
        obj = obj + 0.5 * cp.sum(cp.multiply(ridge, cp.square(u)))
    cons = box_constraints(u, bounds)
    if linear is not None and len(linear.b):
        cons.append(linear.A @ u == linear.b)
    if linear is not None and len(linear.h):
        cons.append(linear.G @ u <= linear.h)
    prob = cp.Problem(cp.Minimize(obj), cons)
    solve_cvxpy(prob)
    return np.asarray(u.value, dtype=float).ravel(), int(prob.solver_stats.num_iters or 0)


def precision_cvxpy(
    S: np.ndarray,
    mask: np.ndarray | None,
    alpha: float = 0.0,
    beta: float = np.inf,
    lam: float | None = None,
    solver: str | None = None,
) -> tuple[np.ndarray, int]:
    """The reference for the precision-matrix problems of paper 000, Section 5.3:
    min -logdet(O) + <S, O> [+ lam * sum_{i != j} |O_ij|] over symmetric O with supp(O) within
    ``mask`` (None: any) and alpha I <= O <= beta I as semidefinite constraints (infinite beta:
    none). Subproblem (13) with a mask; the graphical LASSO with ``lam``."""
    cp = _cp()
    p = S.shape[0]
    O = cp.Variable((p, p), symmetric=True)
    obj = -cp.log_det(O) + cp.trace(S @ O)
    if lam is not None:
        off = np.ones((p, p)) - np.eye(p)
        obj = obj + lam * cp.sum(cp.abs(cp.multiply(off, O)))
    cons = []
    if mask is not None and not mask.all():
        cons.append(cp.multiply((~mask).astype(float), O) == 0)
    if alpha > 0:
        cons.append(O >> alpha * np.eye(p))
    if np.isfinite(beta):
        cons.append(O << beta * np.eye(p))
    prob = cp.Problem(cp.Minimize(obj), cons)
    solve_cvxpy(prob, solver)
    if O.value is None:
        raise SolverError(f"cvxpy could not solve the precision-matrix problem (status {prob.status})")
    return np.asarray(O.value, dtype=float), int(prob.solver_stats.num_iters or 0)


def box_constraints(u: Any, bounds: tuple[np.ndarray, np.ndarray] | None) -> list[Any]:
    """cvxpy constraints lo <= u <= hi on the entries with a finite bound."""
    if bounds is None:
        return []
    lo, hi = (np.asarray(b, dtype=float) for b in bounds)
    out = []
    il, ih = np.flatnonzero(np.isfinite(lo)), np.flatnonzero(np.isfinite(hi))
    if il.size:
        out.append(u[il] >= lo[il])
    if ih.size:
        out.append(u[ih] <= hi[ih])
    return out


def sympy_to_cvxpy(e: sympy.Expr, z: sympy.Symbol, arg: Any, name: str, span: Span | None) -> Any:
    """Translate a sympy body to cvxpy atoms (recognizing log(1 + exp(u)) as logistic(u))."""
    import sympy

    cp = _cp()

    def fail() -> ModelError:
        return ModelError(
            f"func {name} has no cvxpy form that cvxpy accepts as convex, so the cvxpy reference path is unavailable for it",
            span,
            "use the NumPy restricted solves (restricted='auto')",
        )

    def go(t: sympy.Expr) -> Any:
        if t == z:
            return arg
        if t.is_number:
            return float(t)
        if isinstance(t, sympy.Add):
            out = 0
            for a in t.args:
                out = out + go(a)
            return out
        if isinstance(t, sympy.Mul):
            out = 1
            for a in t.args:
                v = go(a)
                out = (
                    v * out
                    if isinstance(v, float) or isinstance(out, float) or isinstance(out, int)
                    else cp.multiply(out, v)
                )
            return out
        if isinstance(t, sympy.Pow):
            b, p = t.args
            if p == 2:
                return cp.square(go(b))
            if p.is_number:
                return cp.power(go(b), float(p))
            raise fail()
        if isinstance(t, sympy.exp):
            return cp.exp(go(t.args[0]))
        if isinstance(t, sympy.log):
            inner = t.args[0]
            if isinstance(inner, sympy.Add) and len(inner.args) == 2:
                a, b = inner.args
                if a == 1 and isinstance(b, sympy.exp):
                    return cp.logistic(go(b.args[0]))
                if b == 1 and isinstance(a, sympy.exp):
                    return cp.logistic(go(a.args[0]))
            return cp.log(go(inner))
        if isinstance(t, sympy.Abs):
            return cp.abs(go(t.args[0]))
        raise fail()

    out = go(e)
    if not hasattr(out, "is_dcp") or not (out.is_convex() or out.is_concave()):
        raise fail()
    return out


__all__ = ["CANON", "lower_expr", "restricted_cvxpy", "solve_cvxpy", "sympy_to_cvxpy"]
