"""What the one base gives every estimator: a solver that cannot take the model refuses at fit (at an
int k and before a choice of k), naming those that can; gap_ is the certified gap of a solver that
proves one (checked against enumeration) and None for a heuristic; the support by feature name."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sparsemodel.datasets import sparse_precision, spiked_covariance  # noqa: E402
from sparsemodel.errors import EstimatorError  # noqa: E402
from sparsemodel.sklearn import (  # noqa: E402
    RobustPCA,
    SparseCoxPHSurvivalAnalysis,
    SparseGammaRegression,
    SparseLinearRegression,
    SparseMultiTaskRegression,
    SparseOrdinalRegression,
    SparsePCA,
    SparsePrecision,
)


def regression(n: int = 60, p: int = 6, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    return X, X[:, 0] - 0.8 * X[:, 3] + 0.3 * rng.standard_normal(n)


CASES = [  # (estimator class, data, the constraint words omp refuses)
    (SparseMultiTaskRegression, lambda: (regression()[0], np.c_[regression()[1], -regression()[1]]), "group-sparsity"),
    (SparsePCA, lambda: (spiked_covariance(80, p=8, sizes=(3,), variances=(4.0,))[0],), "norm-ball"),
    (RobustPCA, lambda: (spiked_covariance(30, p=8, sizes=(3,), variances=(4.0,))[0],), "several bounded variables"),
    (SparsePrecision, lambda: (sparse_precision(6, n=100, seed=1)[0],), "eigenvalue-box"),
]


@pytest.mark.parametrize("cls,data,words", CASES, ids=[c[0].__name__ for c in CASES])
@pytest.mark.parametrize("k", [2, "ebic"])
def test_a_solver_that_cannot_take_the_model_refuses_at_fit(cls, data, words, k):
    """omp (least squares and GLMs under a plain cardinality bound) cannot take these models: fit
    refuses with the constraint it lacks and the solvers that have it; the first of those fits."""
    args = data()
    with pytest.raises(EstimatorError, match=f"omp does not handle {words}") as err:
        cls(k=k, solver="omp").fit(*args)
    assert not hasattr(cls(), "result_")
    hint = str(err.value).split("hint:")[1]
    able = [s.strip() for s in hint.rsplit(":", 1)[1].split(",")]
    other = next(s for s in able if s != "auto")
    assert cls(k=2, solver=other).fit(*args).result_.solver == other


def test_gap_is_the_certified_gap_against_enumeration():
    """bnb proves its answer: gap_ <= 1e-6 and the fit is the best of all C(8, 2) supports (least
    squares with an intercept, each by numpy's lstsq); a heuristic certifies nothing (gap_ None).
    The multi-task model's rows, the same with C(8, 2) row pairs."""
    X, y = regression(p=8, seed=3)
    Y = np.c_[y, 0.5 * y + X[:, 5]]

    def best(Y):
        ones = np.ones((len(X), 1))
        rss = {
            s: np.sum((Y - np.c_[ones, X[:, s]] @ np.linalg.lstsq(np.c_[ones, X[:, s]], Y, rcond=None)[0]) ** 2)
            for s in itertools.combinations(range(8), 2)
        }
        return min(rss, key=rss.get)

    m = SparseLinearRegression(k=2, solver="bnb").fit(X, y)
    assert m.gap_ is not None and m.gap_ <= 1e-6
    assert tuple(np.flatnonzero(m.support_)) == best(y)
    assert SparseLinearRegression(k=2, solver="iht").fit(X, y).gap_ is None
    mt = SparseMultiTaskRegression(k=2, solver="bnb").fit(X, Y)
    assert mt.gap_ is not None and mt.gap_ <= 1e-6
    assert tuple(np.flatnonzero(mt.support_)) == best(Y)


def test_the_support_by_feature_name():
    """A DataFrame's columns are feature_names_in_, and support_names_ the kept ones, in order."""
    pd = pytest.importorskip("pandas")
    X, y = regression(n=120, p=6, seed=4)
    cols = ["age", "dose", "weight", "height", "sex", "site"]
    D = pd.DataFrame(X, columns=cols)
    fits = [
        SparseGammaRegression(k=2).fit(D, np.exp(0.3 * y)),
        SparseMultiTaskRegression(k=2).fit(D, np.c_[y, 2 * y]),
        SparseOrdinalRegression(k=2).fit(D, np.digitize(y, [-1.0, 0.0, 1.0])),
        SparsePCA(k=2).fit(D),
    ]
    event = np.ones(len(y), dtype=bool)
    fits.append(SparseCoxPHSurvivalAnalysis(k=2).fit(D, np.rec.fromarrays([event, np.exp(-y)], names="event,time")))
    for m in fits:
        assert m.feature_names_in_.tolist() == cols
        assert m.support_names_.tolist() == [cols[i] for i in np.flatnonzero(m.support_)]
        assert len(m.support_names_) == 2
    assert fits[0].support_names_.tolist() == ["age", "height"]  # the truth: columns 0 and 3


def test_the_bases_cannot_stand_without_their_hooks():
    """An estimator over X w + b must state its loss, a selector must choose its units: a class
    without them cannot be made (not a solve that fails later)."""
    from sparsemodel.estimators.linear_model import LinearModel
    from sparsemodel.workflows.experiment import Selector

    with pytest.raises(TypeError, match="_loss"):
        LinearModel()
    with pytest.raises(TypeError, match="select"):
        Selector(name="mine")
