"""Sparse PCA and robust PCA, each the model the language writes for it.

* :class:`SparsePCA`: maximize quad_form(w, S) subject to norm(w) <= 1, nnz(w) <= k, S the
  (weighted) sample covariance; several components by deflation (the solvers' ``components``
  option: tpm and spca_htp, Mackey 2009's Schur deflation); docs/language.md, "Sparse PCA".
* :class:`RobustPCA`: minimize sum_squares(X - L - S) / 2 subject to rank(L) <= rank, nnz(S) <= k
  (examples/robust_pca.sm): a low-rank part and at most k outlying entries.

Neither objective is a sum over samples that ``Problem.select`` reads, so k is chosen by the
information criterion on each model's Gaussian likelihood (:class:`~.base.Likelihood`) over a warm
path: sparse PCA's is the likelihood of the data under the covariance the components imply
(below), robust PCA's the Gaussian residual X - L - S (the deviance N log(RSS / N), N = n p).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ..model import atoms as A
from ..model.constraints import nnz, norm, rank
from ..model.expr import Data, Variable
from ..model.objective import maximize, minimize
from .base import DEFAULT_K, Likelihood, SparseEstimator, Spec, default_k_max, support_names


def weighted_moments(X: Any, sw: np.ndarray, centered: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(mean, covariance) of the rows of X with frequency weights sw: sum_i s_i (x_i - m)(x_i - m)' /
    sum_i s_i (the maximum-likelihood covariance, scikit-learn's ``empirical_covariance``; a weight of
    2 is a repeated row). ``centered=False`` takes the mean as 0 (``assume_centered``)."""
    W = float(sw.sum())
    mean = np.asarray(X.T @ sw).ravel() / W if centered else np.zeros(X.shape[1])
    if sp.issparse(X):
        M = np.asarray((X.T @ X.multiply(sw[:, None])).todense()) / W
    else:
        M = (X * sw[:, None]).T @ X / W
    S = M - np.outer(mean, mean)
    return mean, (S + S.T) / 2.0


def subspace_covariance(S: np.ndarray, C: np.ndarray) -> tuple[np.ndarray, float]:
    """The covariance the components C (m x p) imply, and its noise variance: with Q an orthonormal
    basis of their span, Sigma = Q (Q'SQ) Q' + sigma^2 (I - QQ'), sigma^2 = (tr S - tr Q'SQ) / (p - m):
    the maximum-likelihood Gaussian covariance with that subspace free and isotropic noise around it
    (probabilistic PCA's, Tipping & Bishop 1999, with the subspace given). For one component,
    Q'SQ = w'Sw, the explained variance."""
    p = S.shape[0]
    Q, _ = np.linalg.qr(C.T)
    m = Q.shape[1]
    B = Q.T @ S @ Q
    sigma2 = max(float(np.trace(S) - np.trace(B)) / (p - m), 0.0) if p > m else 0.0
    sigma2 = max(sigma2, 1e-12 * max(float(np.trace(S)) / p, 1e-300))
    return Q @ B @ Q.T + sigma2 * (np.eye(p) - Q @ Q.T), sigma2


def gaussian_nll(S: np.ndarray, Sigma: np.ndarray) -> float:
    """Per sample, minus the Gaussian log-likelihood of data of covariance S under N(., Sigma):
    (log det Sigma + tr(Sigma^-1 S) + p log 2 pi) / 2."""
    p = S.shape[0]
    sign, logdet = np.linalg.slogdet(Sigma)
    if sign <= 0:
        return np.inf
    return 0.5 * (logdet + float(np.trace(np.linalg.solve(Sigma, S))) + p * np.log(2.0 * np.pi))


class SparsePCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, SparseEstimator):
    """Sparse principal components: ``n_components`` unit loading vectors with at most k nonzeros
    each, the first of largest variance w'Sw, each next one on the covariance deflated by the ones
    before (Schur deflation, Mackey 2009); solvers ``tpm`` (the default: the truncated power method,
    Yuan & Zhang 2013, Algorithm 1) and ``spca_htp``.

    k (nonzero loadings per component) is an int, or chosen by an information criterion
    (``"ebic"`` by default, ``"bic"``, ``"aic"``, ``"ebic_cc"``, ``"gic"``) over k = 1..``k_max``
    (default min(p, n / (log(log n) log p))) on the Gaussian likelihood of the data under the
    covariance the components imply (:func:`subspace_covariance`), df the nonzero loadings;
    ``k="cv"`` is refused (the objective is a function of the covariance).

    Fitted: ``components_`` (n_components x features; each unit norm, its largest entry positive),
    ``explained_variance_`` (each component's variance after regressing out the earlier components'
    scores: Zou, Hastie & Tibshirani 2006, Section 3.4), ``explained_variance_ratio_`` (over the total
    variance tr S), ``mean_``, ``noise_variance_``, ``support_`` / ``support_names_`` (the features with
    a nonzero loading in some component), ``k_``, ``curve_``, ``result_``, ``gap_``. ``transform(X)`` is
    (X - mean_) @ components_.T (the scores, as abess's), ``score(X)`` the mean Gaussian log-likelihood
    of the rows under ``get_covariance()`` (as scikit-learn's PCA). The covariance is the
    maximum-likelihood one (divided by the sum of the sample weights)."""

    _k_words = "the number of nonzero loadings per component"

    def __init__(
        self,
        k: int | str = DEFAULT_K,
        *,
        n_components: int = 1,
        solver: str = "auto",
        solver_options: dict[str, Any] | None = None,
        k_max: int | None = None,
    ):
        self.k = k
        self.n_components = n_components
        self.solver = solver
        self.solver_options = solver_options
        self.k_max = k_max

    def fit(self, X: Any, y: Any = None, sample_weight: Any = None) -> SparsePCA:
        """Fit the components to the rows of X (y is ignored)."""
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, ensure_min_samples=2)
        n, p = X.shape
        m = self.n_components
        if not isinstance(m, (int, np.integer)) or isinstance(m, bool) or not 1 <= m <= p:
            raise ValueError(f"n_components={m!r} must be an integer between 1 and the {p} features")
        sw = self._weights(sample_weight, X)
        self.mean_, S = weighted_moments(X, sw)
        n_eff = float(sw.sum())
        w = Variable(p, name="w")

        def components(res: Any) -> np.ndarray:
            if m == 1:
                return np.asarray(res.values["w"], dtype=float)[None, :]
            return np.asarray(res.extra["components"], dtype=float)

        def likelihood(res: Any) -> Likelihood:
            C = components(res)
            Sigma, _ = subspace_covariance(S, C)
            df = int(np.count_nonzero(C)) + m * (m + 1) // 2 + 1  # loadings, Q'SQ, the noise variance
            return Likelihood(n_eff * gaussian_nll(S, Sigma), n_eff, df, int(np.count_nonzero(np.any(C != 0, axis=0))))

        spec = Spec(
            maximize(A.quad_form(w, Data(S, name="S"))),
            lambda k: nnz(w) <= k,
            p,
            [norm(w) <= 1],
            options={"components": m} if m > 1 else {},
            likelihood=likelihood,
            k_min=1,
            k_max=default_k_max(n_eff, p),
        )
        if self.k == 0:
            raise ValueError("k=0: a component needs at least one nonzero loading")
        res = self._fit_spec(spec)
        C = components(res)
        C *= np.where(C[np.arange(m), np.argmax(np.abs(C), axis=1)] < 0, -1.0, 1.0)[:, None]
        self.components_ = C
        self.n_components_ = m
        _, self.noise_variance_ = subspace_covariance(S, C)
        total = float(np.trace(S))
        if m == 1:
            var = np.array([float(C[0] @ S @ C[0])])
        else:
            var = np.asarray(res.extra["adjusted_variance"], dtype=float)
        self.explained_variance_ = var
        self.explained_variance_ratio_ = var / total if total > 0 else np.zeros(m)
        self.support_ = np.any(C != 0, axis=0)
        self.support_names_ = support_names(self._feature_names(), self.support_)
        self._S = S
        return self

    @property
    def _n_features_out(self) -> int:
        return self.components_.shape[0]

    def transform(self, X: Any) -> np.ndarray:
        """The scores (X - mean_) @ components_.T."""
        X = self._validate_predict(X)
        return np.asarray(X @ self.components_.T) - self.mean_ @ self.components_.T

    def get_covariance(self) -> np.ndarray:
        """The covariance the components imply (:func:`subspace_covariance`)."""
        check_is_fitted(self)
        return subspace_covariance(self._S, self.components_)[0]

    def score_samples(self, X: Any) -> np.ndarray:
        """The Gaussian log-likelihood of each row under N(mean_, get_covariance())."""
        X = self._validate_predict(X, sparse=False)
        Sigma = self.get_covariance()
        D = X - self.mean_
        sign, logdet = np.linalg.slogdet(Sigma)
        quad = np.einsum("ij,ij->i", D, np.linalg.solve(Sigma, D.T).T)
        return -0.5 * (quad + logdet + X.shape[1] * np.log(2.0 * np.pi))

    def score(self, X: Any, y: Any = None) -> float:
        """The mean Gaussian log-likelihood of the rows of X (scikit-learn's ``PCA.score``)."""
        return float(np.mean(self.score_samples(X)))


class RobustPCA(SparseEstimator):
    """Robust PCA: X = L + S + noise with rank(L) <= ``rank`` and at most k nonzero entries in S
    (the outliers), minimize ||X - L - S||_F^2 / 2 (examples/robust_pca.sm; solvers: every one that
    takes a product of a rank and a sparsity bound, ``auto`` by default).

    k is an int, or chosen by an information criterion (``"ebic"`` by default) over k =
    0..``k_max`` (default min(n p, n p / (log(log(n p)) log(n p)))) on the Gaussian deviance of the
    residual, N log(RSS / N) with N = n p, df = rank (n + p - rank) + k. ``fit(X)`` decomposes X
    itself: ``low_rank_`` (L), ``sparse_`` (S), ``support_`` (the mask of S's nonzero entries),
    ``k_``, ``curve_``, ``result_``, ``gap_``."""

    _k_words = "the number of nonzero entries of the sparse part"

    def __init__(
        self,
        k: int | str = DEFAULT_K,
        *,
        rank: int = 1,
        solver: str = "auto",
        solver_options: dict[str, Any] | None = None,
        k_max: int | None = None,
    ):
        self.k = k
        self.rank = rank
        self.solver = solver
        self.solver_options = solver_options
        self.k_max = k_max

    def fit(self, X: Any, y: Any = None) -> RobustPCA:
        """Decompose X into ``low_rank_`` + ``sparse_`` (y is ignored; sparse X is made dense: both
        parts are dense n x p variables)."""
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, ensure_min_samples=2)
        X = X.toarray() if sp.issparse(X) else X
        n, p = X.shape
        r = self.rank
        if not isinstance(r, (int, np.integer)) or isinstance(r, bool) or not 0 <= r <= min(n, p):
            raise ValueError(f"rank={r!r} must be an integer between 0 and min(n, p) = {min(n, p)}")
        L, S = Variable((n, p), name="L"), Variable((n, p), name="S")
        N = n * p

        def likelihood(res: Any) -> Likelihood:
            used = int(np.count_nonzero(res.values["S"]))
            return Likelihood(2.0 * float(res.objective), N, r * (n + p - r) + used, used, gaussian=True)

        spec = Spec(
            minimize(A.sum_squares(Data(X, name="X") - L - S) / 2.0),
            lambda k: nnz(S) <= k,
            N,
            [rank(L) <= r],
            likelihood=likelihood,
            k_max=default_k_max(N, N),
            label=lambda k: {"S": k},
        )
        res = self._fit_spec(spec)
        self.low_rank_ = np.asarray(res.values["L"], dtype=float)
        self.sparse_ = np.asarray(res.values["S"], dtype=float)
        self.support_ = self.sparse_ != 0
        return self


__all__ = ["RobustPCA", "SparsePCA", "gaussian_nll", "subspace_covariance", "weighted_moments"]
