"""DSPCA tuned to exactly k nonzero loadings: the convex baseline of sparse PCA (maximize w'Sw
subject to norm(w) <= 1, nnz(w) <= k; :mod:`sparsemodel.model.forms`).

The semidefinite relaxation of d'Aspremont, El Ghaoui, Jordan & Lanckriet (2007, "A direct
formulation for sparse PCA using semidefinite programming", SIAM Review 49(3), eq. (3))

    max_Z  tr(S Z) - lambda 1'|Z|1   subject to  tr(Z) = 1,  Z positive semidefinite      (DSPCA)

built in cvxpy (``lp.relaxation("dspca")``, lambda a Parameter, compiled once; for small p: the
semidefinite cone has p(p+1)/2 entries). Its answer is the leading eigenvector of Z, whose
entries above ``zero_tol`` times the largest are its support. As ``lasso`` does for nonzeros
(paper 003, Section 6.3.2), lambda is tuned by the binary search on log(lambda) of
:mod:`.tuning` until that support has exactly k coordinates, from lambda_max = max_i S_ii (a
variable whose variance is below lambda is zero in every optimal Z, their Section 3.3).
``Result.x`` is then the leading eigenvector of S on that support (the restricted solve of the
form: the debiasing, exact); ``debias=false`` reports Z's eigenvector truncated to the support.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import SolverError
from ..lowering.lowered import LoweredProblem
from .base import register
from .options import Option
from .tpm import explained, spca_data, spca_unfit
from .tuning import Search, TunedRelaxation, search_options


@register
class DSPCA(TunedRelaxation):
    name = "dspca"
    handles = frozenset({"nnz", "ball"})
    requires = frozenset({"ball"})  # the sparse PCA form: nnz only beside its ball
    summary = "DSPCA (semidefinite relaxation of sparse PCA) with lambda tuned to exactly k nonzeros, then debiased"
    reference = "d'Aspremont, El Ghaoui, Jordan & Lanckriet 2007, SIAM Review 49(3); tuned as paper 003 Section 6.3.2"
    options = {
        "zero_tol": Option(1e-4, "a loading counts when |v_i| > zero_tol * the largest (v: Z's leading eigenvector)"),
        **search_options("(DSPCA)"),
        "debias": Option(True, "the leading eigenvector of S on the support (false: Z's eigenvector, truncated)", bool),
        "cvxpy_solver": Option("auto", "cvxpy solver for (DSPCA): auto (Clarabel, then SCS), CLARABEL or SCS", str),
        "restricted": Option("auto", "(the restricted solve of sparse PCA is the leading eigenvector)", str),
    }

    what = "DSPCA"
    cvxpy_path = "never"  # (the semidefinite program reads S, not the objective)
    needs = "the sparse PCA form: maximize quad_form(w, S) subject to norm(w) <= 1, nnz(w) <= k"
    counted = "nonzeros"
    count_name, counts_name = "support", "sparsities"
    log_name = "nnz"
    norm_name = ""

    @classmethod
    def unfit(cls, lp: LoweredProblem) -> SolverError | None:
        return spca_unfit(cls.name, lp)

    def start(self, lp: LoweredProblem) -> tuple[float, Any, str]:
        d = spca_data(lp, self.name)
        return float(np.max(np.diag(d.S))), lp.relaxation("dspca", self.opts["cvxpy_solver"]), "cvxpy"

    def snap(self, lp: LoweredProblem, x: np.ndarray) -> tuple[np.ndarray, int]:
        d = spca_data(lp, self.name)
        v = x[d.coords]
        big = float(np.max(np.abs(v), initial=0.0))
        keep = np.abs(v) > self.opts["zero_tol"] * big if big > 0 else np.zeros(len(v), dtype=bool)
        u = np.where(keep, v, 0.0)
        nu = float(np.linalg.norm(u))
        return d.embed(d.radius * u / nu if nu > 0 else u, lp.n), int(keep.sum())

    def penalty(self, lp: LoweredProblem, x: np.ndarray) -> float:
        d = spca_data(lp, self.name)
        v = x[d.coords] / d.radius
        return float(np.sum(np.abs(v)) ** 2)  # 1'|Z|1 at the rank-one Z = vv'

    def ending(self, lp: LoweredProblem, search: Search) -> dict[str, Any]:
        d = spca_data(lp, self.name)
        v = search.x[d.coords] / d.radius
        return {"extra": {"relaxed_explained_variance": float(v @ d.S @ v)}}  # Z's eigenvector, truncated

    def run(self, lp: LoweredProblem) -> Any:
        r = super().run(lp)
        d = spca_data(lp, self.name)
        w = r.x[d.coords] / d.radius
        r.extra.update(explained(d.S, w[:, None], [float(w @ d.S @ w)]))
        return r
