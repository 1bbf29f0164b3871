"""The sparse PCA solvers (the recognised form of :mod:`sparsemodel.model.forms`: maximize w'Sw
subject to norm(w) <= r and nnz(w) <= k):

* ``tpm`` -- the truncated power method (Yuan & Zhang 2013, "Truncated power method for sparse
  eigenvalue problems", JMLR 14:899-925, Algorithm 1), from several starts, the end point debiased
  (the leading eigenvector of S on its support, exact for a fixed support), then polished by
  single exchanges (``polish``; :func:`sparsemodel.numerics.spca.polish`);
* ``spca_htp`` -- a GraHTP-like iteration: a gradient step on -w'Sw, hard thresholding to k
  coordinates, normalisation and the same debiasing, until the support repeats.

Several components (``components = m``) by deflation (Mackey 2009, "Deflation methods for sparse
PCA", NIPS): Schur complement deflation by default (each deflated S annihilates every earlier
component; the sum of the components' deflated variances is Zou, Hastie & Tibshirani's adjusted
variance), or projection deflation. The kernels are :mod:`sparsemodel.numerics.spca`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import SolverError
from ..lowering.forms import sparse_pca
from ..numerics.spca import DEFLATIONS, Component, adjusted_variance, deflate, htp, tpm
from ..util import Clock
from .base import Solver, register, zero_budget
from .options import Option
from .result import CONVERGED, MAX_ITER, Result, finish

if TYPE_CHECKING:
    from ..lowering.lowered import LoweredProblem
    from ..lowering.spca_solve import SparsePCAData

FORM_HINT = "sparse PCA reads: maximize quad_form(w, S) subject to norm(w) <= 1, nnz(w) <= k (docs/language.md)"


def spca_unfit(name: str, lp: LoweredProblem) -> SolverError | None:
    """The refusal of a sparse PCA solver on a problem of another form, or None."""
    if sparse_pca(lp) is None:
        return SolverError(f"{name} solves sparse PCA only; this problem is a {lp.structure}", hint=FORM_HINT)
    return None


def spca_data(lp: LoweredProblem, name: str) -> SparsePCAData:
    """The sparse PCA form of the problem, or a SolverError saying this solver needs it."""
    d = sparse_pca(lp)
    if d is None:
        raise spca_unfit(name, lp)
    return d


def explained(S: np.ndarray, W: np.ndarray, deflated: list[float]) -> dict[str, Any]:
    """What a sparse PCA result reports: each component's variance w'Sw, the adjusted variance
    (Zou, Hastie & Tibshirani 2006) of the set, and its share of the total variance tr(S)."""
    total = float(np.trace(S))
    own = [float(W[:, j] @ S @ W[:, j]) for j in range(W.shape[1])]
    adj = adjusted_variance(S, W)
    out: dict[str, Any] = {
        "explained_variance": own[0],
        "total_variance": total,
        "variance_share": float(adj.sum() / total) if total > 0 else 0.0,
    }
    if W.shape[1] > 1:
        out.update(
            components=W.T.tolist(),  # components[j]: the j-th component (a unit vector)
            component_variance=own,
            adjusted_variance=adj.tolist(),
            deflated_variance=deflated,
            adjusted_total=float(adj.sum()),
        )
    return out


class _SparsePCASolver(Solver, ABC):
    handles = frozenset({"nnz", "ball"})
    requires = frozenset({"ball"})  # the sparse PCA form: nnz only beside its ball
    needs = "the sparse PCA form: maximize quad_form(w, S) subject to norm(w) <= 1, nnz(w) <= k"

    @abstractmethod
    def one(self, S: np.ndarray, k: int) -> Component:
        """One sparse component of S with k nonzeros (the solver's method)."""

    @classmethod
    def unfit(cls, lp: LoweredProblem) -> SolverError | None:
        return spca_unfit(cls.name, lp)

    def _solve(self, lp: LoweredProblem) -> Result:
        # the sparse PCA form has its maximum on the ball: no unboundedness check, and the full
        # bound (ordinary PCA) still runs, so that several components are deflated as asked
        self.check(lp)
        lp = lp.fresh()
        if lp.set.k == 0:
            return zero_budget(lp, self)
        return self.run(lp)

    def run(self, lp: LoweredProblem) -> Result:
        d = spca_data(lp, self.name)
        clock = Clock()
        hist = self.history(lp, clock)
        k, m, r2 = lp.set.budget, self.opts["components"], d.radius**2
        S = d.S
        if m > S.shape[0]:
            raise SolverError(
                f"{self.name}: components = {m} is more than the {S.shape[0]} coordinates of {d.form.variable.name}",
                hint=f"ask for at most {S.shape[0]} components",
            )
        comps: list[Component] = []
        deflated: list[float] = []
        for j in range(m):
            c = self.one(S, k)
            comps.append(c)
            deflated.append(float(c.value))
            if j == 0:
                for v in c.trace:
                    hist.log(-r2 * v)
            if j + 1 < m:
                S = deflate(S, c.w, self.opts["deflation"])
        W = np.column_stack([c.w for c in comps])
        x = d.embed(d.radius * W[:, 0], lp.n)
        first = comps[0]
        status = CONVERGED if first.iterations < self.opts["max_iter"] else MAX_ITER
        extra = explained(d.S, W, deflated)
        extra["swaps"] = sum(c.swaps for c in comps)
        return finish(lp, self, x, status, first.iterations, clock, hist, f=-r2 * first.value, extra=extra)


COMMON = {
    "components": Option(1, "how many components (2 or more: by deflation; Result.extra['components'])", int, low=1),
    "deflation": Option("schur", "deflation between components (Mackey 2009)", str, choices=DEFLATIONS),
    "starts": Option(5, "starts: S's leading eigenvector truncated, then the largest-variance columns", int, low=1),
    "polish": Option(
        True,
        "then exchange single coordinates while w'Sw rises: every exchange when k (p - k) <= 400, else "
        "min(k, 10) forward-backward exchanges ranked by |(Sw)_j| (exact values, never a loss)",
        bool,
    ),
}


@register
class TruncatedPower(_SparsePCASolver):
    name = "tpm"
    summary = "truncated power method for sparse PCA (several starts, debiased; deflation for several components)"
    reference = "Yuan & Zhang 2013, JMLR 14, Algorithm 1 (TPower); deflation: Mackey 2009"
    options = {**COMMON, "max_iter": Option(200, "power iterations per start", int, low=1)}

    def one(self, S: np.ndarray, k: int) -> Component:
        o = self.opts
        return tpm(S, k, n_starts=o["starts"], max_iter=o["max_iter"], swaps=None if o["polish"] else 0)


@register
class SparsePCAHTP(_SparsePCASolver):
    name = "spca_htp"
    summary = (
        "GraHTP-like sparse PCA: gradient step on -w'Sw, hard threshold, debias (leading eigenvector on the support)"
    )
    reference = (
        "Yuan, Li & Zhang 2014 (GraHTP) applied to -w'Sw with the exact restricted solve; deflation: Mackey 2009"
    )
    options = {**COMMON, "max_iter": Option(100, "support updates per start", int, low=1)}

    def one(self, S: np.ndarray, k: int) -> Component:
        o = self.opts
        return htp(S, k, n_starts=o["starts"], max_iter=o["max_iter"], swaps=None if o["polish"] else 0)
