"""Sparse and robust PCA: every loading allowed is ordinary PCA (and probabilistic PCA's covariance),
the likelihood the criteria read, the default k on data with a known truth, the scores."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.decomposition import PCA  # noqa: E402

from sparsemodel.datasets import spiked_covariance  # noqa: E402
from sparsemodel.estimators.decomposition import gaussian_nll, subspace_covariance  # noqa: E402
from sparsemodel.sklearn import RobustPCA, SparsePCA  # noqa: E402


def test_every_loading_allowed_is_ordinary_pca():
    """k = p: the components are the leading eigenvectors of the covariance (sign: the largest entry
    positive), their variances its eigenvalues, and the implied covariance is probabilistic PCA's
    maximum-likelihood one (Tipping & Bishop 1999) -- scikit-learn's PCA.get_covariance, which divides
    by n - 1 where the likelihood's covariance divides by n."""
    X, _ = spiked_covariance(200, p=12, sizes=(4, 3), seed=1)
    n, p = X.shape
    ours = SparsePCA(k=p, n_components=3).fit(X)
    ref = PCA(n_components=3).fit(X)
    lam = ref.explained_variance_ * (n - 1) / n
    assert np.allclose(np.abs(ours.components_), np.abs(ref.components_), atol=1e-6)
    assert np.all(ours.components_[np.arange(3), np.argmax(np.abs(ours.components_), axis=1)] > 0)
    assert np.allclose(ours.explained_variance_, lam, rtol=1e-8)
    assert np.allclose(ours.get_covariance(), ref.get_covariance() * (n - 1) / n, atol=1e-8)
    assert ours.noise_variance_ == pytest.approx(ref.noise_variance_ * (n - 1) / n, rel=1e-8)
    assert np.allclose(ours.transform(X), (X - X.mean(axis=0)) @ ours.components_.T)
    Sigma = ours.get_covariance()
    D = X - X.mean(axis=0)
    direct = -0.5 * (
        np.einsum("ij,ij->i", D, np.linalg.solve(Sigma, D.T).T) + np.linalg.slogdet(Sigma)[1] + p * np.log(2 * np.pi)
    )
    assert np.allclose(ours.score_samples(X), direct) and ours.score(X) == pytest.approx(direct.mean())


def test_one_component_s_likelihood_in_closed_form():
    """For one unit loading w the implied covariance's likelihood profile is
    (log v + (p - 1) log((tr S - v) / (p - 1)) + p + p log 2 pi) / 2 per sample, v = w'Sw."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((50, 7))
    S = A.T @ A / 50
    w = np.zeros(7)
    w[[1, 4]] = [0.6, 0.8]
    v, T, p = w @ S @ w, np.trace(S), 7
    closed = 0.5 * (np.log(v) + (p - 1) * np.log((T - v) / (p - 1)) + p + p * np.log(2 * np.pi))
    assert gaussian_nll(S, subspace_covariance(S, w[None, :])[0]) == pytest.approx(closed, rel=1e-12)


def test_the_default_k_finds_the_spike():
    """The spiked covariance model (Johnstone & Lu 2009; 300 samples, 50 variables, one direction on
    x0-x9 of variance 6, another on x10-x17 of variance 3): EBIC on the likelihood keeps exactly
    x0-x9 for the first component on at least 4 of 5 seeds (measured: 9 of 10)."""
    exact = 0
    for seed in range(5):
        X, _ = spiked_covariance(300, seed=seed)
        m = SparsePCA().fit(X)
        exact += m.support_names_.tolist() == [f"x{i}" for i in range(10)]
    assert exact >= 4
    assert m.curve_ and min(m.curve_, key=lambda r: r["value"])["k"] == m.k_


def test_k_cv_is_refused_with_what_to_use():
    X, _ = spiked_covariance(50, p=8, sizes=(3,), variances=(4.0,))
    with pytest.raises(ValueError, match="GridSearchCV over k"):
        SparsePCA(k="cv").fit(X)
    with pytest.raises(ValueError, match="at least one nonzero loading"):
        SparsePCA(k=0).fit(X)


def rpca_data(seed: int, n: int = 40, p: int = 15, r: int = 2, s: int = 12, noise: float = 0.05):
    """L Gaussian of rank r, s outliers of size 3 to 6 with random signs, Gaussian noise."""
    rng = np.random.default_rng(seed)
    L = rng.standard_normal((n, r)) @ rng.standard_normal((r, p))
    S = np.zeros(n * p)
    idx = rng.choice(n * p, s, replace=False)
    S[idx] = rng.choice([-1.0, 1.0], s) * rng.uniform(3.0, 6.0, s)
    return L + S.reshape(n, p) + noise * rng.standard_normal((n, p)), L, S.reshape(n, p)


def test_robust_pca_default_finds_the_outliers():
    """EBIC on the residual's Gaussian deviance chooses exactly the 12 outliers on 3 seeds (measured:
    4 of 4, each fit under 1.5 s), and the low-rank part is within the noise of L."""
    for seed in range(3):
        X, L, S = rpca_data(seed)
        m = RobustPCA(rank=2).fit(X)
        assert m.k_ == 12 and np.array_equal(m.support_, S != 0)
        assert np.linalg.matrix_rank(m.low_rank_, tol=1e-8) == 2
        assert np.abs(m.low_rank_ - L).max() < 0.5


def test_robust_pca_is_the_model_it_writes():
    import sparsemodel as sm

    X, _, _ = rpca_data(5, n=20, p=8, s=6)
    m = RobustPCA(k=6, rank=2).fit(X)
    L, S = sm.Variable(X.shape, name="L"), sm.Variable(X.shape, name="S")
    res = sm.Problem(sm.minimize(sm.sum_squares(X - L - S) / 2), [sm.rank(L) <= 2, sm.nnz(S) <= 6]).solve()
    assert np.allclose(m.sparse_, res.values["S"]) and np.allclose(m.low_rank_, res.values["L"])
