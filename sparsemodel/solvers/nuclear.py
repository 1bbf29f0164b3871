"""Nuclear-norm relaxation tuned to an exact rank: the rank analogue of the LASSO baseline.

The convex relaxation of ``min f(x) s.t. rank(W) <= r`` replaces the constraint by the nuclear
norm, the sum of the singular values of W (Fazel 2002; Recht, Fazel & Parrilo 2010):

    min_x  f(x) + lambda * ||W||_*                                                (N)

Other variables (free coordinates) are optimized but never penalized. As ``lasso`` does for the l1
norm (paper 003, Section 6.3.2), lambda is tuned by a binary search on log(lambda) until the
solution has exactly rank r:

* lambda_max = ||grad_W f(x_F*)||_2 (the spectral norm), x_F* the minimizer with W = 0: by the
  optimality conditions of (N), W = 0 for every lambda >= lambda_max;
* bracket downwards by factors of 10 from lambda_max until the rank reaches r (down to
  ``min_ratio * lambda_max``), then bisect log(lambda) until one lambda gives exactly rank r or
  the bracket is narrower than a factor ``1 + lambda_tol``;
* the rank counts singular values above ``zero_tol * sigma_1``; the others are set to zero, and
  that thresholded matrix is "the nuclear-norm solution".

When no lambda gives exactly rank r (singular values that enter together) a SolverError names the
ranks reached along the search.

Output. ``Result.x`` and ``Result.objective`` are the refit of f on the subspaces of the
nuclear-norm solution (the restricted solve of the rank set, as GraHTP's debiasing step), so that
the relaxation is judged by the loss its structure attains; ``Result.extra`` holds lambda, the raw
objective f(x_nuc) and the penalized objective beside it. ``debias=false`` returns the relaxation's
solution itself.

Backends. ``cvxpy`` builds (N) with ``cvxpy.normNuc`` once, lambda a Parameter
(``lp.relaxation("nuclear")``, :mod:`sparsemodel.lowering.relax`); an interior-point solve is slow
(about 100 s at W 100 x 30 with 500 samples on this project's machine). ``numpy`` (the default for
composite objectives, ``backend="auto"``) solves the same problem by accelerated proximal
gradient with singular value thresholding (:func:`sparsemodel.numerics.proximal.fista`), warm-started
along the search; tests check both backends reach the same minimizer.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import SolverError
from ..lowering.lowered import LoweredProblem
from ..numerics.proximal import fista, svt
from .base import register
from .options import Option, restricted_option
from .tuning import TunedRelaxation, choose_backend, search_options


@register
class Nuclear(TunedRelaxation):
    name = "nuclear"
    handles = frozenset({"rank"})
    summary = "nuclear-norm relaxation with lambda tuned by binary search to exactly rank r, then debiased"
    reference = "the rank analogue of paper 003's tuned LASSO (Section 6.3.2); Recht, Fazel & Parrilo (2010)"
    options = {
        "zero_tol": Option(1e-6, "a singular value counts when it exceeds zero_tol * sigma_1", float),
        **search_options("(N)"),
        "tol": Option(1e-9, "proximal-gradient stopping tolerance on the relative step (numpy backend)", float, low=0),
        "debias": Option(True, "refit f on the subspaces of the relaxed solution (false: report it itself)", bool),
        "backend": Option(
            "auto",
            "solver of (N): auto (NumPy accelerated proximal gradient for composite objectives, else cvxpy), numpy, cvxpy",
            str,
            ("auto", "numpy", "cvxpy"),
        ),
        "cvxpy_solver": Option("auto", "cvxpy solver for (N): auto (Clarabel, then SCS), CLARABEL or SCS", str),
        "restricted": restricted_option("x_F* and the refit"),
    }

    what = "the nuclear-norm relaxation"
    counted = ""
    count_name, counts_name = "rank", "ranks"
    log_name = "rank"
    norm_name = "nuclear_norm"

    def target_text(self, k: int) -> str:
        return f"rank {k}"

    def start(self, lp: LoweredProblem) -> tuple[float, Any, str]:
        o, s = self.opts, lp.set  # a rank set: nuclear handles nothing else (Solver.check)
        r0 = lp.restricted_minimize(s.empty(), method=o["restricted"])
        _, g0 = lp.value_and_grad(r0.x)
        lam_max = float(np.linalg.norm(g0[s.W].reshape(s.shape), 2))
        if not np.isfinite(lam_max) or lam_max <= 0:
            raise SolverError(
                f"the gradient at W = 0 is {'zero' if lam_max == 0 else 'not finite'}: no lambda selects any direction",
                hint="check the data, or use an l0 solver (grahtp, iht)",
            )
        backend = choose_backend(lp, o["backend"])
        relax: Any = _Fista(lp, r0.x, o["tol"]) if backend == "numpy" else lp.relaxation("nuclear", o["cvxpy_solver"])
        return lam_max, relax, backend

    def snap(self, lp: LoweredProblem, x: np.ndarray) -> tuple[np.ndarray, int]:
        s = lp.set
        U, sv, Vt = np.linalg.svd(x[s.W].reshape(s.shape), full_matrices=False)
        keep = sv > self.opts["zero_tol"] * (sv[0] if len(sv) else 0.0)
        x = x.copy()
        x[s.W] = ((U[:, keep] * sv[keep]) @ Vt[keep]).ravel()
        return x, int(keep.sum())

    def penalty(self, lp: LoweredProblem, x: np.ndarray) -> float:
        s = lp.set
        return float(np.linalg.svd(x[s.W].reshape(s.shape), compute_uv=False).sum())


class _Fista:
    """(N) by accelerated proximal gradient with singular value thresholding, each lambda
    warm-started from the solution at the nearest lambda solved so far."""

    def __init__(self, lp: LoweredProblem, x_free: np.ndarray, tol: float):
        self.lp = lp
        self.start = x_free
        self.tol = tol
        self.done: dict[float, np.ndarray] = {}
        self.solves = 0
        # the largest eigenvalue of the Hessian (bound), made safe where it is ~0 (a flat loss)
        self.L = lp.safe_curvature(lp.smoothness(None), x_free)

    def solve(self, lam: float) -> np.ndarray:
        lp, s = self.lp, self.lp.set
        self.solves += 1
        near = min(self.done, key=lambda m: abs(math.log(m / lam)), default=None)
        x0 = self.start if near is None else self.done[near]

        def vg(x: np.ndarray) -> tuple[float, np.ndarray]:
            return lp.value_and_grad(x)

        def prox(z: np.ndarray, t: float) -> np.ndarray:
            out = z.copy()
            out[s.W] = svt(z[s.W].reshape(s.shape), t * lam).ravel()
            return out

        def pen(x: np.ndarray) -> float:
            return lam * float(np.linalg.svd(x[s.W].reshape(s.shape), compute_uv=False).sum())

        res = fista(vg, prox, pen, x0, self.L, tol=self.tol)
        self.done[lam] = res.x
        return res.x.copy()
