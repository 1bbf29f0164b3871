"""The graphical LASSO tuned to exactly k edges: the convex baseline of paper 000, Section 6.3.

For the sparse precision-matrix problem (paper 000, (11)/(12))

    min  c (-logdet(O) + <S, O>)   s.t.  nnz(offdiag(O)) <= 2k  [, alpha I <= O <= beta I]

the relaxation (Friedman, Hastie & Tibshirani 2008; Yuan & Lin 2007) replaces the bound by an l1
penalty on the off-diagonal entries (the diagonal is not penalized, as in scikit-learn's
GraphicalLasso; R's ``glasso`` penalizes it by default):

    min  -logdet(O) + <S, O> + lambda sum_{i != j} |O_ij|                      (G)

lambda is in the units of the normalized objective (S as the model gives it, c divided out).
``box='drop'`` (default) solves the standard (G); ``box='keep'`` keeps the eigenvalue box of the
model as constraints of (G). As ``lasso`` does for vectors (paper 003, Section 6.3.2), lambda is
found by a binary search on log(lambda) (:mod:`.tuning`) until the solution has exactly k edges:
lambda_max = max_{i != j} |S_ij| (at and above it O = diag(1 / S_ii) is optimal).

Output: ``Result.x`` is the refit of the model's objective on the edge set of the graphical-LASSO
solution under the model's constraints (the eigenvalue box included), the restricted solve
GraHTP's step S3 uses, so the relaxation is judged by the likelihood its graph attains;
``debias=false`` returns the (G) solution itself (moved into the box by the smallest diagonal
shift when ``box='drop'`` and the model has one). ``Result.extra`` holds lambda, the penalized
objective and the search path.

Backends. ``numpy`` (default): (G) by the ADMM of :func:`sparsemodel.numerics.logdet.admm_logdet`
(the splitting of paper 000, Appendix D.2 with soft thresholding in place of the support
projection; Boyd et al. 2011, Section 6.5), warm-started along the search; its solution has exact
zeros. ``cvxpy``: (G) built from the model in cvxpy (:mod:`sparsemodel.lowering.relax`, kind
``glasso``); tests check both give the same minimizer to 1e-6. An edge counts when
|O_ij| > ``zero_tol`` * max |O_ij| (cvxpy's interior points have no exact zeros).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import SolverError
from ..lowering.forms import PrecisionEdges, edges
from ..lowering.lowered import LoweredProblem
from ..numerics.logdet import ADMMResult, admm_logdet, shift_into_box, soft_offdiag_prox
from .base import register
from .options import Option, restricted_option, subproblem13_options
from .tuning import Search, TunedRelaxation, search_options


@register
class GLasso(TunedRelaxation):
    name = "glasso"
    handles = frozenset({"nnz_pairs", "eig_box"})
    summary = "graphical LASSO with lambda tuned by binary search to exactly k edges, then refit in the box"
    reference = "Friedman, Hastie & Tibshirani (2008); the baseline of paper 000, Section 6.3"
    options = {
        "zero_tol": Option(1e-8, "an entry is an edge when |O_ij| > zero_tol * max |O_ij|", float),
        **search_options("(G)"),
        "box": Option(
            "drop",
            "the eigenvalue box in (G): 'drop' (the standard graphical LASSO) or 'keep' (as constraints); "
            "the refit always keeps it",
            str,
            ("drop", "keep"),
        ),
        "tol": Option(1e-9, "ADMM stopping tolerance (numpy backend)", float, low=0, open_low=True),
        "max_iter": Option(10000, "ADMM iterations per lambda (numpy backend)", int, low=1),
        "debias": Option(True, "refit on the edge set under the model's constraints (false: (G) itself)", bool),
        "backend": Option(
            "auto", "solver of (G): auto (= numpy), numpy (ADMM), cvxpy", str, ("auto", "numpy", "cvxpy")
        ),
        "cvxpy_solver": Option("auto", "cvxpy solver for (G): auto (Clarabel, then SCS), CLARABEL or SCS", str),
        "restricted": restricted_option("the refit"),
        **subproblem13_options(),
    }

    what = "the graphical LASSO"
    cvxpy_path = "never"  # (the ADMM on S; the cvxpy back-end reads S too)
    needs = "the precision-matrix objective -logdet(O) + trace(S @ O) with nnz(offdiag(O)) <= 2k"
    counted = "edges"
    count_name, counts_name = "edge set", "edge counts"
    log_name = "edges"

    @classmethod
    def unfit(cls, lp: LoweredProblem) -> SolverError | None:
        if edges(lp) is None:
            return SolverError(
                "glasso solves the sparse precision-matrix problem: minimize -logdet(O) + trace(S @ O) "
                "subject to nnz(offdiag(O)) <= 2 * k (O symmetric)",
                hint="for vectors use lasso, for ranks nuclear",
            )
        return None

    def start(self, lp: LoweredProblem) -> tuple[float, Any, str]:
        o = self.opts
        pe = self._edges(lp)
        S, p = pe.S, pe.p
        keep = self._keep(lp)
        alpha, beta = pe.box if keep else (0.0, np.inf)
        lam_max = float(np.abs(S[~np.eye(p, dtype=bool)]).max()) if p > 1 else 0.0
        if not lam_max > 0:
            raise SolverError("S has no nonzero off-diagonal entry: every lambda gives the diagonal solution")
        backend = "numpy" if o["backend"] == "auto" else o["backend"]
        relax: Any = (
            _GlassoADMM(S, alpha, beta, o["tol"], o["max_iter"], lp)
            if backend == "numpy"
            else _GlassoCvxpy(lp, pe, o["cvxpy_solver"], keep)
        )
        return lam_max, relax, backend

    @staticmethod
    def _edges(lp: LoweredProblem) -> PrecisionEdges:
        """The precision-matrix form (``unfit`` refused every problem without it)."""
        pe = edges(lp)
        assert pe is not None
        return pe

    def _keep(self, lp: LoweredProblem) -> bool:
        return self.opts["box"] == "keep" and self._edges(lp).box is not None

    def snap(self, lp: LoweredProblem, O: np.ndarray) -> tuple[np.ndarray, int]:
        pe = self._edges(lp)
        off = ~np.eye(pe.p, dtype=bool)
        big = np.abs(O[off]).max() if pe.p > 1 else 0.0
        O = np.where(off & (np.abs(O) <= self.opts["zero_tol"] * big), 0.0, O)
        x = pe.point(O)
        return x, len(pe.units_of(x))

    def penalty(self, lp: LoweredProblem, x: np.ndarray) -> float:
        pe = self._edges(lp)
        O = pe.matrix(x)
        return pe.scale * float(np.abs(O[~np.eye(len(O), dtype=bool)]).sum())

    def ending(self, lp: LoweredProblem, search: Search) -> dict[str, Any]:
        moves = self._edges(lp)
        O_g = moves.matrix(search.x)

        def into_box(x_g: np.ndarray) -> tuple[np.ndarray, float]:
            x = x_g.copy()
            if moves.box is not None:
                x[moves.W] = shift_into_box(O_g, *moves.box).ravel()
            return x, lp.oracle.peek(x)

        return {
            "state": moves.positions(moves.units_of(search.x)),
            "undebiased": into_box,
            "extra": {"box_in_relaxation": self._keep(lp)},
        }


class _GlassoADMM:
    """(G) by ADMM with soft thresholding of the off-diagonal, each lambda warm-started from the
    solution (and multiplier) at the nearest lambda solved so far."""

    def __init__(self, S: np.ndarray, alpha: float, beta: float, tol: float, max_iter: int, lp: LoweredProblem):
        self.S, self.alpha, self.beta, self.tol, self.max_iter, self.lp = S, alpha, beta, tol, max_iter, lp
        self.done: dict[float, ADMMResult] = {}
        self.solves = 0

    def solve(self, lam: float) -> np.ndarray:
        self.solves += 1
        near = min(self.done, key=lambda m: abs(math.log(m / lam)), default=None)
        if near is None:
            d = 1.0 / np.diag(self.S)
            T0, G0, rho = np.diag(np.clip(d, self.alpha, self.beta)), None, 1.0
        else:
            prev = self.done[near]
            T0, G0, rho = prev.Theta, prev.Gamma, prev.rho
        res = admm_logdet(
            self.S,
            soft_offdiag_prox(lam),
            self.alpha,
            self.beta,
            rho=rho,
            Theta0=T0,
            Gamma0=G0,
            tol=self.tol,
            max_iter=self.max_iter,
        )
        self.lp.oracle.charge(eigs=res.iterations)
        if not res.converged:
            raise SolverError(
                f"the graphical-LASSO ADMM did not converge at lambda = {lam:.6g} in {self.max_iter} iterations",
                hint="raise max_iter or tol, or use backend='cvxpy'",
            )
        self.done[lam] = res
        return res.Theta


class _GlassoCvxpy:
    """(G) built from the model in cvxpy (relax kind 'glasso'), re-solved per lambda."""

    def __init__(self, lp: LoweredProblem, pe: PrecisionEdges, solver: str, keep_box: bool):
        self.lp = lp
        self.relax = lp.relaxation("glasso", solver, eigbox=keep_box)
        self.W, self.p, self.scale = pe.W, pe.p, pe.scale

    @property
    def solves(self) -> int:
        return self.relax.solves

    def solve(self, lam: float) -> np.ndarray:
        # the model's objective is scale * (...): the penalty in normalized units is scale * lam
        x = self.relax.solve(self.scale * lam)
        O = x[self.W].reshape(self.p, self.p)
        return (O + O.T) / 2
