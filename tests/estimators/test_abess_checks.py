"""abess's estimator tests (``python/pytest/test_alg.py``, commit f6dbcc0f), run on our estimators
with abess's data (tests/data) and the criteria as abess states them: the support of the default
fit equals the truth (``assert_fit``), the coefficients on it equal an unpenalized reference fit to
abess's tolerance (``assert_reg``), predictions have no NaN, the score passes abess's threshold.
Where our estimator's parameters differ (``k`` for ``support_size``, ``rank`` for ``fit(X, r=)``,
``k="cv"`` for ``cv=5``) the criterion is the same; what abess checks that we do not offer (a
covariance given instead of X, group supports, screening, abess's algorithm switches) is named in
each test. ``check_estimator`` runs in tests/estimators/test_check_estimator.py."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.linear_model import LinearRegression, LogisticRegression, PoissonRegressor  # noqa: E402
from sklearn.metrics import ndcg_score  # noqa: E402
from sklearn.model_selection import PredefinedSplit  # noqa: E402

from sparsemodel.sklearn import (  # noqa: E402
    RobustPCA,
    SparseCoxPHSurvivalAnalysis,
    SparseGammaRegression,
    SparseLinearRegression,
    SparseLogisticRegression,
    SparseMultiTaskRegression,
    SparseOrdinalRegression,
    SparsePCA,
    SparsePoissonRegression,
)

from .abess_data import close, load, rows, same_support  # noqa: E402


def weights(n: int, seed: int = 2) -> np.ndarray:
    return np.random.default_rng(seed).uniform(size=n)  # abess: np.random.rand(n)


REFERENCE = {  # abess's assert_reg: an unpenalized fit on the chosen columns, and its tolerance
    "gaussian": (lambda fi: LinearRegression(fit_intercept=fi), 0.01),
    "binomial": (lambda fi: LogisticRegression(C=np.inf, fit_intercept=fi, tol=1e-10, max_iter=1000), 0.01),
    "poisson": (lambda fi: PoissonRegressor(fit_intercept=fi, alpha=0, tol=1e-6, max_iter=200), 0.1),
}
ESTIMATOR = {
    "gaussian": SparseLinearRegression,
    "binomial": SparseLogisticRegression,
    "poisson": SparsePoissonRegression,
}


@pytest.mark.parametrize("family", ["gaussian", "binomial", "poisson"])
def test_glm(family):
    """test_gaussian, test_binomial, test_poisson: the default support is the truth with and without
    an intercept (intercept_ 0 without), the coefficients are the reference refit (abess skips this
    for logistic regression on Python >= 3.9; we keep it: the default ridge, 1e-4 / (2 n), moves them
    by about 1e-4 relative), no NaN in predictions, score above 0.5 on the test draw with weights."""
    d = load(family)
    ref, tol = REFERENCE[family]
    for fit_intercept in (True, False):
        m = ESTIMATOR[family](fit_intercept=fit_intercept).fit(d["x"], d["y"])
        coef = np.ravel(m.coef_)
        same_support(coef, d["coef"])
        nz = np.flatnonzero(coef)
        close(coef[nz], ref(fit_intercept).fit(d["x"][:, nz], d["y"]).coef_, tol, tol)
        if not fit_intercept:
            assert np.all(np.ravel(m.intercept_) == 0)
    assert np.all(np.isfinite(m.predict(d["x_test"])))
    assert m.score(d["x_test"], d["y_test"], sample_weight=weights(len(d["y"]))) > 0.5
    if family == "binomial":
        assert np.all(np.isfinite(m.predict_proba(d["x_test"])))


def test_cox():
    """test_cox: the default support is the truth; its coefficients within 0.5 (rel and abs) of
    lifelines' unpenalized CoxPHFitter on those columns; predictions and the score (with weights)
    are finite; each survival function evaluates at the times' 0-60 % quantiles. (abess skips
    check_estimator for Cox; ours runs it.)"""
    pd = pytest.importorskip("pandas")
    lifelines = pytest.importorskip("lifelines")
    d = load("cox")
    m = SparseCoxPHSurvivalAnalysis().fit(d["x"], d["y"])
    same_support(m.coef_, d["coef"])
    nz = np.flatnonzero(m.coef_)
    df = pd.DataFrame(d["x"][:, nz], columns=[f"Var{i}" for i in range(len(nz))])
    df["T"], df["E"] = d["y"][:, 0], d["y"][:, 1]
    cph = lifelines.CoxPHFitter(penalizer=0, l1_ratio=0).fit(df, "T", event_col="E")
    close(m.coef_[nz], cph.params_.values, rel=0.5, abs=0.5)
    assert np.all(np.isfinite(m.predict(d["x"])))
    assert np.isfinite(m.score(d["x"], d["y"], sample_weight=weights(len(d["y"]))))
    times = np.quantile(d["y"][:, 0], np.linspace(0, 0.6, 100))
    s = m.predict_survival_function(d["x"])[0](times)
    assert s.shape == (100,) and np.all(np.isfinite(s)) and np.all(np.diff(s) <= 0)


def test_gamma():
    """test_gamma (n = 10000, the canonical link, support_size=3): the support is the truth and
    abess's coefficients within 1 (rel and abs) of the truth. abess writes the mean as -1/(x'beta + b)
    (its coefficients negative where ours, 1/mu = x'w + b, are positive), so the truth is compared
    with -coef_. Without an intercept (abess asserts only intercept_ = 0 and no NaN), the log link:
    with the inverse link and no intercept, x'w > 0 on every row of centered data has no solution."""
    d = load("gamma")
    m = SparseGammaRegression(k=3, link="inverse").fit(d["x"], d["y"])
    assert np.all(np.isfinite(m.coef_))
    same_support(d["coef"], m.coef_)
    close(d["coef"], -m.coef_, 1.0, 1.0)
    m0 = SparseGammaRegression(k=3, fit_intercept=False).fit(d["x"], d["y"])
    assert m0.intercept_ == 0 and np.all(np.isfinite(m0.coef_))
    assert np.all(np.isfinite(m.predict(d["x"])))
    assert np.isfinite(m.score(d["x"], d["y"], sample_weight=weights(len(d["y"]))))


def test_multitask():
    """test_multigaussian: the default support (rows of W) is the truth, with and without an
    intercept (then every intercept 0); no NaN in predictions; score above 0.5 on the test draw with
    weights; cross-validation (abess's cv=5, and its fold ids in blocks of 20) finds the truth too.
    (abess's covariance_update and screening switches are its own algorithm's.)"""
    d = load("multigaussian")
    m = SparseMultiTaskRegression().fit(d["x"], d["y"])
    same_support(m.coef_.T, d["coef"])
    m0 = SparseMultiTaskRegression(fit_intercept=False).fit(d["x"], d["y"])
    assert np.count_nonzero(m0.intercept_) == 0
    same_support(m0.coef_.T, d["coef"])
    assert np.all(np.isfinite(m.predict(d["x_test"])))
    assert m.score(d["x_test"], d["y_test"], sample_weight=weights(100)) > 0.5
    same_support(SparseMultiTaskRegression(k="cv").fit(d["x"], d["y"]).coef_.T, d["coef"])
    fold_ids = np.repeat(np.arange(5), 20)
    cv = SparseMultiTaskRegression(k="cv", cv=PredefinedSplit(fold_ids)).fit(d["x"], d["y"])
    same_support(cv.coef_.T, d["coef"])


def test_ordinal():
    """test_ordinal: the default support is the truth; the score runs with weights; abess's score,
    the NDCG of the predicted class probabilities against each class's closeness to the true class,
    beats the NDCG of shuffled labels. (abess's coefficients are minus ours: its P(y <= j) is
    sigmoid(x'beta + eps_j), ours sigmoid(theta_j - x'w); the support is the same.)"""
    d = load("ordinal")
    m = SparseOrdinalRegression().fit(d["x"], d["y"])
    same_support(m.coef_, d["coef"])
    assert 0 <= m.score(d["x"], d["y"], sample_weight=weights(100)) <= 1
    J = len(m.classes_)
    codes = np.searchsorted(m.classes_, d["y"])
    relevance = J - 1 - np.abs(np.arange(J)[None, :] - codes[:, None])
    ours = ndcg_score(relevance, m.predict_proba(d["x"]))
    shuffled = np.random.default_rng(2).permutation(d["y"])
    assert ours > ndcg_score(d["y"].reshape(1, -1), shuffled.reshape(1, -1))


def test_pca():
    """test_PCA: k = 10 gives 10 nonzero loadings; transform and fit_transform run and agree; sparse
    input gives the same components; three components have 10 nonzeros each. (abess's covariance
    input, group supports, screening and A_init are not offered: the estimator takes the data; its
    information-criterion loop fits at a given support size, where the criterion is not read.)"""
    sp = pytest.importorskip("scipy.sparse")
    X = load("pca")["x"]
    m1 = SparsePCA(k=10).fit(X)
    assert np.count_nonzero(m1.components_) == 10
    assert np.allclose(m1.transform(X), SparsePCA(k=10).fit_transform(X))
    m2 = SparsePCA(k=10).fit(sp.coo_matrix(X))
    close(m1.components_, m2.components_)
    m4 = SparsePCA(k=10, n_components=3).fit(X)
    assert m4.components_.shape == (3, X.shape[1])
    assert np.count_nonzero(m4.components_, axis=1).tolist() == [10, 10, 10]


def test_rpca():
    """test_RPCA (X = L + S, rank 5, 30 outliers, no noise): at k = 30 and rank 5 the decomposition
    is exact, and sparse input gives the same sparse part. (abess's own test asserts nothing of the
    support -- its assert_fit is commented out --; exactness is ours. Its information-criterion
    loop fits at the given support size, where the criterion is not read, and always_select over
    the entries of S is not offered.)"""
    sp = pytest.importorskip("scipy.sparse")
    X = load("rpca")["x"]
    m1 = RobustPCA(k=30, rank=5).fit(X)
    assert np.count_nonzero(m1.sparse_) == 30 and np.linalg.matrix_rank(m1.low_rank_, tol=1e-6) == 5
    assert np.allclose(m1.low_rank_ + m1.sparse_, X, atol=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m2 = RobustPCA(k=30, rank=5).fit(sp.coo_matrix(X))
    close(m1.sparse_, m2.sparse_)
    assert rows(m1.sparse_) == rows(m2.sparse_)
