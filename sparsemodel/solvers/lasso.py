"""LASSO baseline tuned to an exact sparsity: paper 003, Section 2.2.1 (eq. (1)) and Section 6.3.2.

The convex relaxation of ``min f(x) s.t. nnz(x_C) <= k`` replaces the constraint by an l1 penalty
on exactly the constrained coordinates C (paper 003, eq. (1)):

    min_x  f(x) + lambda * ||x_C||_1                                              (1)

Free coordinates F (an intercept, other variables) are optimized but never penalized, counted or
thresholded. Box constraints (``w >= 0``, ``lo <= w <= hi``) stay constraints of (1) in both
backends (coordinate descent clips, cvxpy keeps them as constraints); lambda_max then counts only
the directions the box allows (with w >= 0, max_j -grad_j f). f is any convex loss of the model; the relaxation is built in cvxpy by
:mod:`sparsemodel.lowering.relax` (``lp.relaxation("l1")``) with lambda a ``cvxpy.Parameter``, so
(1) is compiled once and only re-solved while lambda changes.

Tuning (paper 003, Section 6.3.2: "for each sparsity level we applied binary search on alpha in
order to find a parameter alpha that gives the required sparsity"). The search runs on log(lambda):

* lambda_max = ||grad_C f(x_F*)||_inf, where x_F* minimizes f over the free coordinates only
  (x_C = 0). By the optimality conditions of (1), x_C = 0 for every lambda >= lambda_max, so the
  search never solves there and counts that end as 0 nonzeros.
* bracket: lambda = lambda_max / 10, / 100, ... until the solution has at least k nonzeros
  (down to ``min_ratio * lambda_max``, default 1e-4: below it the l1 term barely shapes the
  solution and interior-point supports stop being reliable; measured on n=6, p=20 least squares,
  lambda = 1e-8 lambda_max gave 8 "nonzeros" although a LASSO solution has at most n = 6);
* bisection of log(lambda) between the last lambda with fewer than k nonzeros and the first with
  more, until one gives exactly k, or the bracket is narrower than a factor ``1 + lambda_tol``.

A coordinate counts as nonzero when |x_i| > ``zero_tol`` * max_{j in C} |x_j| (default 1e-6;
interior-point solutions carry numerical zeros ~1e-12 relative, far below it). Entries under the
threshold are set to exactly zero: that thresholded vector is "the LASSO solution" reported.

When no lambda gives exactly k nonzeros (several coordinates enter the LASSO path together, e.g.
with duplicated columns, or k exceeds the largest LASSO support, at most n for least squares) a
:class:`~sparsemodel.errors.SolverError` names the support sizes reached along the search.

Output. Following the paper's comparison (the LASSO support is evaluated by the loss it attains),
``Result.x`` and ``Result.objective`` are the debiased refit, min f over the LASSO support and the
free coordinates (``lp.restricted_minimize``); ``debias=false`` returns the thresholded LASSO
solution itself. ``Result.extra`` holds lambda, the raw LASSO loss f(x_lasso), ||x_lasso,C||_1,
the penalized objective, the number of cvxpy solves and the (lambda, nnz) pairs seen.

Backends. ``backend="cvxpy"`` solves (1) with cvxpy (Clarabel, then SCS, tight tolerances so
that supports are counted reliably) for any convex loss the model lowers to. For composite
objectives (elementwise losses of affine maps: least squares, logistic, Huber, ...) the default
``backend="auto"`` uses the NumPy proximal-Newton / coordinate-descent solver of
:mod:`sparsemodel.lowering.l1` instead, warm-started along the search: the same minimizer with
exact zeros, and about 1000 times faster on a logistic LASSO over Caravan (an interior-point
solve there takes 10-30 s). The paper itself used scikit-learn's coordinate-descent ``Lasso``
(least squares only); both backends solve the same relaxation (tests check they agree).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import SolverError
from ..lowering.l1 import entering
from ..lowering.lowered import LoweredProblem
from .base import register, require_sparsity
from .options import Option, restricted_option
from .tuning import TunedRelaxation, choose_backend, search_options


@register
class Lasso(TunedRelaxation):
    name = "lasso"
    handles = frozenset({"nnz", "box"})
    summary = "LASSO (l1 relaxation) with lambda tuned by binary search to exactly k nonzeros, then debiased"
    reference = "paper 003, Section 2.2.1 eq. (1) and Section 6.3.2"
    options = {
        "zero_tol": Option(1e-6, "a coordinate is nonzero when |x_i| > zero_tol * max_C |x|", float),
        **search_options("(1)"),
        "debias": Option(True, "refit f on the LASSO support (false: report the LASSO solution itself)", bool),
        "backend": Option(
            "auto",
            "solver of (1): auto (NumPy proximal Newton for composite objectives, else cvxpy), numpy, cvxpy",
            str,
            ("auto", "numpy", "cvxpy"),
        ),
        "cvxpy_solver": Option(
            "auto",
            "cvxpy solver for (1): auto (Clarabel, then SCS), CLARABEL or SCS, run with the tight tolerances "
            "that exact support counting needs (OSQP at its defaults counted 80 to 500 nonzeros where Clarabel "
            "counted 50, on the paper-000 Section 6.1 problem)",
            str,
            ("auto", "CLARABEL", "SCS"),
        ),
        "restricted": restricted_option("x_F* and the refit"),
    }

    what = "LASSO"
    reachable_hint = "a least-squares LASSO has at most as many nonzeros as samples, and "
    norm_name = "l1_norm"

    def start(self, lp: LoweredProblem) -> tuple[float, Any, str]:
        o = self.opts
        sps = require_sparsity(lp, self.name)
        C = sps.coords
        # lambda_max from the minimizer over the free coordinates only
        r0 = lp.restricted_minimize(np.empty(0, dtype=np.int64), method=o["restricted"])
        if not np.isfinite(r0.f):  # x = 0 outside the domain (e.g. logdet): cvxpy needs no start
            r0 = lp.restricted_minimize(np.empty(0, dtype=np.int64), method="cvxpy")
        _, g0 = lp.value_and_grad(r0.x)
        box = sps.box_bounds()  # with bounds, only the directions they allow count (w >= 0: -g_j)
        lam_max = float(
            np.max(entering(g0[C], 0.0, box[0][C] if box else None, box[1][C] if box else None), initial=0.0)
        )
        if not np.isfinite(lam_max):
            raise SolverError(
                f"the gradient at the free-coordinate minimizer is not finite ({lam_max}); cannot scale lambda"
            )
        if lam_max <= 0:
            raise SolverError(
                "x_C = 0 already minimizes the objective (the gradient on the constrained coordinates vanishes), "
                f"so no lambda > 0 selects any coordinate; LASSO cannot produce {sps.k} nonzeros",
                hint="check the data, or use an l0 solver (grahtp, grasp, foba)",
            )
        backend = choose_backend(lp, o["backend"])
        relax = _ProxNewton(lp, r0.x) if backend == "numpy" else lp.relaxation("l1", o["cvxpy_solver"])
        return lam_max, relax, backend

    def snap(self, lp: LoweredProblem, x: np.ndarray) -> tuple[np.ndarray, int]:
        C = lp.set.coords
        xc = np.abs(x[C])
        x[C[xc <= self.opts["zero_tol"] * float(xc.max(initial=0.0))]] = 0.0
        return x, int(np.count_nonzero(x[C]))

    def penalty(self, lp: LoweredProblem, x: np.ndarray) -> float:
        return float(np.sum(np.abs(x[lp.set.coords])))


class _ProxNewton:
    """Problem (1) by the NumPy proximal-Newton path (sparsemodel.lowering.l1), each lambda warm-
    started from the solution at the nearest lambda solved so far."""

    def __init__(self, lp: LoweredProblem, x_free: np.ndarray):
        self.lp = lp
        self.done: dict[float, np.ndarray] = {}
        self.start = x_free
        self.solves = 0

    def solve(self, lam: float) -> np.ndarray:
        from ..lowering.l1 import l1_minimize

        self.solves += 1
        near = min(self.done, key=lambda m: abs(math.log(m / lam)), default=None)
        x0 = self.start if near is None else self.done[near]
        x, _ = l1_minimize(self.lp, lam, x0=x0)
        self.done[lam] = x
        return x.copy()
