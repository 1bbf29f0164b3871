"""Lowering of a model expression to cvxpy.

Used as the reference path for restricted (debiasing) solves and to build the convex baselines
(LASSO and friends). The variables of the problem become one cvxpy vector ``u`` over a chosen set
of flat coordinates (all others fixed at zero), so the same lowering serves a full problem and a
problem restricted to a support.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import ModelError
from ..model import atoms as A
from ..model.expr import Add, Div, Expr, Index, MatMul, Mul, Neg, Sub, Transpose, Variable, dense
from .evaluator import Layout

# tight tolerances so that the reference agrees with the NumPy paths to ~1e-8 relative
SOLVER_OPTS: dict[str, dict[str, Any]] = {
    "CLARABEL": {"tol_gap_abs": 1e-11, "tol_gap_rel": 1e-11, "tol_feas": 1e-11, "max_iter": 500},
    "SCS": {"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iters": 200000},
}


def lower_expr(e: Expr, layout: Layout, u: Any, cols: np.ndarray, cache: dict[int, Any] | None = None) -> Any:
    """cvxpy expression equal to ``e`` with x[cols] = u and every other coordinate of x zero."""
    import cvxpy as cp

    cache = {} if cache is None else cache
    n = layout.n
    pos = np.full(n, -1)
    pos[cols] = np.arange(len(cols))

    def var_expr(v: Variable) -> Any:
        sl = layout.slice(v)
        local = pos[sl]
        keep = np.flatnonzero(local >= 0)
        if keep.size == 0:
            return np.zeros(v.shape) if v.shape else 0.0
        E = sp.csr_matrix((np.ones(len(keep)), (keep, local[keep])), shape=(v.size, len(cols)))
        flat = E @ u
        if not v.shape:
            return flat[0]
        return cp.reshape(flat, v.shape, order="C") if len(v.shape) > 1 else flat

    def go(node: Expr) -> Any:
        if node.uid in cache:
            return cache[node.uid]
        if node.is_constant():
            val = node.constant_value()
            r = val if sp.issparse(val) else (dense(val) if node.shape else float(val))
        elif isinstance(node, Variable):
            r = var_expr(node)
        else:
            args = [go(a) for a in node.args]
            if isinstance(node, Sub):
                r = args[0] - args[1]
            elif isinstance(node, Add):
                r = args[0] + args[1]
            elif isinstance(node, Neg):
                r = -args[0]
            elif isinstance(node, Div):
                r = args[0] / args[1]
            elif isinstance(node, Mul):
                r = cp.multiply(args[0], args[1])
            elif isinstance(node, MatMul):
                r = args[0] @ args[1]
            elif isinstance(node, Transpose):
                r = args[0].T
            elif isinstance(node, Index):
                r = args[0][node.key]
            elif isinstance(node, A.Atom):
                r = node.to_cvxpy(args)
            else:  # pragma: no cover
                raise ModelError(f"cannot lower {type(node).__name__} to cvxpy", node.span)
        cache[node.uid] = r
        return r

    return go(e)


def solve_cvxpy(problem: Any, solver: str | None = None) -> str:
    """Solve a cvxpy problem with tight tolerances, trying Clarabel then SCS; returns the status.

    An 'optimal_inaccurate' answer is kept only if no later solver does better; cvxpy's warning
    about it is not shown to the user (the status says it)."""
    import warnings

    import cvxpy as cp

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
