"""The ordinal estimator: the full fit against statsmodels' OrderedModel (the same cumulative-logit
likelihood), the probabilities, the order of the labels, and recovery of the example's truth."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sparsemodel.sklearn import SparseOrdinalRegression  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "data" / "ordinal.npz"


def example():
    """examples/data/ordinal.npz: 300 samples, 4 grades, 5 true covariates of 30."""
    d = np.load(EXAMPLE)
    return d["X"], d["y"], d["w"], d["theta"]


def test_every_covariate_equals_statsmodels_ordered_logit():
    """k = every covariate and alpha = 0: statsmodels' OrderedModel(distr="logit") maximizes the same
    likelihood, P(y <= j) = F(theta_j - x'w); its cut-points are the first and then log increments.
    Coefficients, cut-points and class probabilities to 1e-5."""
    om = pytest.importorskip("statsmodels.miscmodels.ordinal_model")
    X, y, _, _ = example()
    X = X[:, :6]
    m = SparseOrdinalRegression(k=6, alpha=0.0).fit(X, y)
    ref = om.OrderedModel(y, X, distr="logit").fit(method="newton", disp=False, maxiter=100, tol=1e-12)
    p = X.shape[1]
    cuts = np.cumsum(np.concatenate([[ref.params[p]], np.exp(ref.params[p + 1 :])]))
    assert m.coef_ == pytest.approx(ref.params[:p], rel=1e-5, abs=1e-6)
    assert m.cutpoints_ == pytest.approx(cuts, rel=1e-5, abs=1e-6)
    assert np.allclose(m.predict_proba(X), ref.predict(), atol=1e-6)


def test_the_default_finds_the_true_covariates_and_cut_points():
    X, y, w, theta = example()
    m = SparseOrdinalRegression().fit(X, y)
    assert np.flatnonzero(m.support_).tolist() == np.flatnonzero(w).tolist()
    assert np.all(np.diff(m.cutpoints_) > 0) and len(m.cutpoints_) == 3
    assert np.abs(m.cutpoints_ - theta).max() < 0.5 and m.score(X, y) > 0.6
    P = m.predict_proba(X)
    assert np.allclose(P.sum(axis=1), 1) and np.all(P >= 0)
    assert np.array_equal(m.classes_[P.argmax(axis=1)], m.predict(X))


def test_the_labels_are_ordered_as_sorted():
    """Any labels: their sorted order is the order (strings sort alphabetically), and relabelling by an
    increasing map changes nothing but the names; reversing the order flips the coefficients' sign."""
    X, y, _, _ = example()
    words = np.array(["a-low", "b-mid", "c-high", "d-top"])
    a = SparseOrdinalRegression(k=5).fit(X, y)
    b = SparseOrdinalRegression(k=5).fit(X, words[y.astype(int)])
    assert np.array_equal(a.coef_, b.coef_) and b.classes_.tolist() == words.tolist()
    assert np.array_equal(b.predict(X), words[a.predict(X).astype(int)])
    c = SparseOrdinalRegression(k=5).fit(X, -y)
    assert np.allclose(c.coef_, -a.coef_, atol=1e-6)


def test_sample_weights_are_repeated_samples():
    """Case weights: integer weights (0 leaves a sample out) give the fit of the samples repeated, at a
    fixed k and for the k EBIC chooses (the criteria count sum(w) observations)."""
    X, y, _, _ = example()
    X, y = X[:150], y[:150]
    sw = np.random.default_rng(0).integers(0, 4, len(y))
    rX, ry = np.repeat(X, sw, axis=0), np.repeat(y, sw)
    for est in (SparseOrdinalRegression(k=5, alpha=0.0), SparseOrdinalRegression()):
        a = est.fit(X, y, sample_weight=sw)
        coef, cuts, k = a.coef_.copy(), a.cutpoints_.copy(), a.k_
        b = est.fit(rX, ry)
        assert k == b.k_ and coef == pytest.approx(b.coef_, abs=1e-6) and cuts == pytest.approx(b.cutpoints_, abs=1e-6)
