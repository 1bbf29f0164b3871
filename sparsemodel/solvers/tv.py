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

from typing import Any

import numpy as np

from ..errors import SolverError
from ..lowering.lowered import LoweredProblem
from .base import register
from .options import Option, restricted_option
from .tuning import TunedRelaxation, search_options


@register
class TotalVariation(TunedRelaxation):
    name = "tv"
    handles = frozenset({"fused"})
    summary = "total variation with lambda tuned by binary search to exactly k changes, then debiased"
    reference = "the changepoint analogue of paper 003's tuned LASSO (Section 6.3.2); Rudin, Osher & Fatemi (1992)"
    options = {
        "zero_tol": Option(1e-6, "a change counts when |w_i - w_(i-1)| > zero_tol * the largest change", float),
        **search_options("(TV)"),
        "debias": Option(True, "refit f on the pieces of the TV solution (false: report the TV solution)", bool),
        "cvxpy_solver": Option("auto", "cvxpy solver for (TV): auto (Clarabel, then SCS), CLARABEL or SCS", str),
        "restricted": restricted_option("the refit"),
    }

    what = "total variation"
    cvxpy_path = "always"  # (the TV problem is built in cvxpy)
    needs = "an objective with a cvxpy counterpart (no custom_loss)"
    counted = "changes"
    count_name, counts_name = "number of changes", "numbers of changes"
    log_name = "changes"
    norm_name = "total_variation"

    def start(self, lp: LoweredProblem) -> tuple[float, Any, str]:
        s = lp.set  # a fused set: tv handles nothing else (Solver.check)
        r0 = lp.restricted_minimize(s.empty(), method=self.opts["restricted"])  # the best constant w
        _, g0 = lp.value_and_grad(r0.x)
        lam_max = float(np.max(np.abs(np.cumsum(g0[s.coords])[:-1]), initial=0.0))
        if not np.isfinite(lam_max) or lam_max <= 0:
            raise SolverError(
                f"the constant w already minimizes the objective (the partial sums of the gradient are {lam_max}): "
                f"no lambda > 0 gives any change, so TV cannot produce {s.k} changes",
                hint="check the data, or use an l0 solver (grahtp, iht)",
            )
        return lam_max, lp.relaxation("tv", self.opts["cvxpy_solver"]), "cvxpy"

    def snap(self, lp: LoweredProblem, x: np.ndarray) -> tuple[np.ndarray, int]:
        s = lp.set
        d = np.abs(np.diff(x[s.coords]))
        big = float(d.max(initial=0.0))
        breaks = np.flatnonzero(d > self.opts["zero_tol"] * big) + 1 if big > 0 else np.empty(0, dtype=np.int64)
        sub = s.subspace(breaks)
        return sub.embed(sub.coords_of(x)), len(breaks)  # small changes merged

    def penalty(self, lp: LoweredProblem, x: np.ndarray) -> float:
        return float(np.sum(np.abs(np.diff(x[lp.set.coords]))))
