"""Total variation tuned to an exact number of changes: the convex baseline of ``nnz(diff(w)) <= k``.

The relaxation replaces the bound on the number of changes by their l1 norm (Rudin, Osher &
Fatemi 1992; the fusion penalty of the fused LASSO, Tibshirani et al. 2005):

    min_x  f(x) + lambda * sum_i |w_i - w_(i-1)|                                   (TV)

built in cvxpy from the model (``lp.relaxation("tv")``, lambda a Parameter, compiled once). As
``lasso`` does for nonzeros (paper 003, Section 6.3.2), lambda is tuned by a binary search on
log(lambda) until the solution has exactly k changes:

* lambda_max = max_i |sum_(j < i) g_j| with g the gradient on w at the best constant w (free
  coordinates fitted): at and above it the constant is optimal for (TV) (its optimality condition
  is D'v = -g with |v| <= lambda, solved by the partial sums of g);
* a change counts when |w_i - w_(i-1)| exceeds ``zero_tol`` times the largest one; smaller ones
  are merged (each piece takes its mean), and that is "the TV solution".

``Result.x`` is the refit of f on the pieces of the TV solution (the restricted solve of the fused
set, as GraHTP's debiasing step); ``debias=false`` reports the TV solution itself.
"""

from __future__ import annotations

import numpy as np

from ..errors import SolverError
from ..lowering.lowered import LoweredProblem
from ..util import Clock
from .base import Option, Result, Solver, register, restricted_option
from .tuning import check_search_options, finish_tuned, search_lambda, search_options


@register
class TotalVariation(Solver):
    name = "tv"
    handles = frozenset({"fused"})
    convex_relaxation = True
    summary = "total variation with lambda tuned by binary search to exactly k changes, then debiased"
    reference = "the changepoint analogue of paper 003's tuned LASSO (Section 6.3.2); Rudin, Osher & Fatemi (1992)"
    options = {
        "zero_tol": Option(1e-6, "a change counts when |w_i - w_(i-1)| > zero_tol * the largest change", float),
        **search_options("(TV)"),
        "debias": Option(True, "refit f on the pieces of the TV solution (false: report the TV solution)", bool),
        "cvxpy_solver": Option("auto", "cvxpy solver for (TV): auto (Clarabel, then SCS), CLARABEL or SCS", str),
        "restricted": restricted_option("the refit"),
    }

    def run(self, lp: LoweredProblem) -> Result:
        o = self.opts
        clock = Clock()
        s = lp.set  # a fused set: tv handles nothing else (Solver.check)
        check_search_options(o, self.name)
        C = s.coords
        r0 = lp.restricted_minimize(s.empty(), method=o["restricted"])  # the best constant w
        _, g0 = lp.value_and_grad(r0.x)
        lam_max = float(np.max(np.abs(np.cumsum(g0[C])[:-1]), initial=0.0))
        if not np.isfinite(lam_max) or lam_max <= 0:
            raise SolverError(
                f"the constant w already minimizes the objective (the partial sums of the gradient are {lam_max}): "
                f"no lambda > 0 gives any change, so TV cannot produce {s.k} changes",
                hint="check the data, or use an l0 solver (grahtp, iht)",
            )
        relax = lp.relaxation("tv", o["cvxpy_solver"])
        hist = self.history(lp, clock)

        def solve_at(lam: float) -> tuple[np.ndarray, int]:
            x = relax.solve(lam)
            d = np.abs(np.diff(x[C]))
            big = float(d.max(initial=0.0))
            breaks = np.flatnonzero(d > o["zero_tol"] * big) + 1 if big > 0 else np.empty(0, dtype=np.int64)
            x = s.subspace(breaks).embed(s.subspace(breaks).coords_of(x))  # small changes merged
            hist.log(lp.oracle.peek(x), lam=lam, changes=len(breaks))
            return x, len(breaks)

        search = search_lambda(
            solve_at,
            lambda: relax.solves,
            s.k,
            lam_max,
            o,
            what="total variation",
            target_text=f"k={s.k} changes",
            count_name="number of changes",
            counts_name="numbers of changes",
            unit=" changes",
            span=s.span,
        )
        tv = float(np.sum(np.abs(np.diff(search.x[C]))))
        return finish_tuned(
            lp,
            self,
            search,
            clock,
            hist,
            lam_max=lam_max,
            penalty=tv,
            name="tv",
            norm_name="total_variation",
            solves=relax.solves,
            backend="cvxpy",
        )
