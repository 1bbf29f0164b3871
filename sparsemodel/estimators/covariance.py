"""A sparse precision matrix (a Gaussian graphical model) beside scikit-learn's ``GraphicalLasso``:
the model of paper 000, Section 5.3 (docs/precision.md),

    minimize -logdet(O) + trace(S O)  subject to  nnz(offdiag(O)) <= 2 k,  min_eig <= eig(O) <= max_eig,

with S the sample covariance and k the number of edges (pairs (i, j), (j, i))."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.covariance import EmpiricalCovariance
from sklearn.utils.validation import validate_data

from ..model import atoms as A
from ..model.constraints import eig, nnz, offdiag
from ..model.expr import Data, Variable
from ..model.objective import minimize
from .base import DEFAULT_K, Likelihood, SparseEstimator, Spec
from .decomposition import weighted_moments


class SparsePrecision(EmpiricalCovariance, SparseEstimator):
    """The maximum-likelihood precision matrix with at most k edges and its eigenvalues in
    [``min_eig``, ``max_eig``] (``"auto"``: the box of docs/precision.md, Lu's rule with the lower end
    at most 1 / tr(S); numbers give the paper's box). The default solver ``auto`` runs paper 000's
    Algorithm 2 (modified GraHTP) from several starts; ``glasso`` is the graphical lasso tuned to
    exactly k edges.

    k (edges) is an int, or chosen by an information criterion (``"ebic"`` by default, ``"bic"``,
    ``"aic"``, ``"ebic_cc"``, ``"gic"``) over k = 0..``k_max`` (default min(p (p - 1) / 2, 2 p): graphs
    of mean degree up to 4) on the Gaussian log-likelihood: the deviance n (-logdet O + tr(S O)),
    df = the edges + p, and EBIC's price per edge log n + 2 log(p (p - 1) / 2), about Foygel & Drton's
    (2010) EBIC for graphical models with gamma = 1 (log n + 4 gamma log p). ``k="cv"`` is refused
    (the objective is a function of the covariance); ``GridSearchCV`` over k scores the held-out
    log-likelihood (``score``).

    Fitted (scikit-learn's covariance estimators'): ``precision_``, ``covariance_`` (its inverse),
    ``location_``; and ``edges_`` (pairs of feature names), ``support_`` (the p x p mask of the nonzero
    off-diagonal entries), ``k_``, ``curve_``, ``result_``, ``gap_``. ``score``, ``mahalanobis`` and
    ``error_norm`` are ``EmpiricalCovariance``'s. Sample weights are frequency weights of the rows
    (the covariance divides by their sum)."""

    _k_words = "the number of edges"
    store_precision = True  # EmpiricalCovariance.get_precision reads it

    def __init__(
        self,
        k: int | str = DEFAULT_K,
        *,
        min_eig: float | str = "auto",
        max_eig: float | str = "auto",
        assume_centered: bool = False,
        solver: str = "auto",
        solver_options: dict[str, Any] | None = None,
        k_max: int | None = None,
    ):
        self.k = k
        self.min_eig = min_eig
        self.max_eig = max_eig
        self.assume_centered = assume_centered
        self.solver = solver
        self.solver_options = solver_options
        self.k_max = k_max

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags

    def fit(self, X: Any, y: Any = None, sample_weight: Any = None) -> SparsePrecision:
        """Estimate the precision matrix of the rows of X (y is ignored)."""
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2, ensure_min_features=2)
        n, p = X.shape
        for name in ("min_eig", "max_eig"):
            v = getattr(self, name)
            if not (v == "auto" if isinstance(v, str) else isinstance(v, (int, float)) and np.isfinite(v)):
                raise ValueError(f"{name}={v!r}: give a number or 'auto'")
        sw = self._weights(sample_weight, X)
        self.location_, S = weighted_moments(X, sw, centered=not self.assume_centered)
        n_eff = float(sw.sum())
        O = Variable((p, p), symmetric=True, name="O")

        def likelihood(res: Any) -> Likelihood:
            edges = int(res.extra.get("edges", np.count_nonzero(np.triu(res.values["O"], 1))))
            return Likelihood(n_eff * float(res.objective) / 2.0, n_eff, edges + p, edges)

        pairs = p * (p - 1) // 2
        spec = Spec(
            minimize(-A.logdet(O) + A.trace(Data(S, name="S") @ O)),
            lambda k: nnz(offdiag(O)) <= 2 * k,
            pairs,
            [eig(O).between(self.min_eig, self.max_eig)],
            likelihood=likelihood,
            k_max=min(pairs, 2 * p),
        )
        res = self._fit_spec(spec)
        P = np.asarray(res.values["O"], dtype=float)
        P = (P + P.T) / 2.0
        self._set_covariance(np.linalg.inv(P))
        self.precision_ = P
        mask = (P != 0) & ~np.eye(p, dtype=bool)
        self.support_ = mask
        names = self._feature_names()
        i, j = np.nonzero(np.triu(mask, 1))
        self.edges_ = [(names[a], names[b]) for a, b in zip(i, j)]
        return self


__all__ = ["SparsePrecision"]
