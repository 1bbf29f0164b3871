"""The Cox estimator against lifelines (coefficients, Breslow's baseline survival, Harrell's
concordance index), the equivalence of case weights and repeated subjects under Breslow's ties,
the survival-target layouts, and the model it writes (the builder's cox at the same k)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn")

import sparsemodel as sm  # noqa: E402
from sparsemodel.sklearn import SparseCoxPHSurvivalAnalysis, concordance_index_censored  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "data" / "survival.npz"


def example(p: int = 50):
    """examples/data/survival.npz: 400 subjects, censored times with ties, 6 true covariates of 50."""
    d = np.load(EXAMPLE)
    return d["X"][:, :p], d["time"], d["event"].astype(bool), d["w"][:p]


def structured(event, time):
    y = np.empty(len(time), dtype=[("event", bool), ("time", float)])
    y["event"], y["time"] = event, time
    return y


def lifelines_fit(X, time, event, weights=None):
    pd = pytest.importorskip("pandas")
    lifelines = pytest.importorskip("lifelines")
    df = pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])])
    df["T"], df["E"] = time, event.astype(int)
    kw = {}
    if weights is not None:
        df["W"], kw = weights, {"weights_col": "W", "robust": True}
    return lifelines.CoxPHFitter(penalizer=0.0).fit(df, "T", event_col="E", **kw), df


def test_concordance_index_equals_lifelines():
    """Harrell's C on censored data (continuous times; risk scores with ties, each counting 1/2)
    equals lifelines' concordance_index (which ranks by predicted survival: minus the risk)."""
    utils = pytest.importorskip("lifelines.utils")
    rng = np.random.default_rng(0)
    n = 300
    time = rng.exponential(size=n)
    event = rng.uniform(size=n) < 0.7
    risk = np.round(rng.standard_normal(n) - time, 1)  # rounded: tied scores
    c = concordance_index_censored(event, time, risk)
    assert c[0] == pytest.approx(utils.concordance_index(time, -risk, event), abs=1e-12)
    assert c[3] > 0  # tied risk scores were present
    assert concordance_index_censored(event, time, -time)[0] == 1.0  # risk ordered as the times


def test_concordance_index_with_tied_times_by_definition():
    """Tied times: a censored subject at an event's time is comparable (still at risk), two events at
    one time are not; checked against the definition written pair by pair."""
    rng = np.random.default_rng(1)
    n = 60
    time = rng.integers(0, 8, n).astype(float)
    event = rng.uniform(size=n) < 0.6
    risk = rng.standard_normal(n)
    num = den = 0.0
    for i in range(n):
        for j in range(n):
            if event[i] and (time[j] > time[i] or (time[j] == time[i] and not event[j])):
                den += 1
                num += 1.0 if risk[i] > risk[j] else 0.5 if risk[i] == risk[j] else 0.0
    assert concordance_index_censored(event, time, risk)[0] == pytest.approx(num / den, abs=1e-14)


def test_concordance_weights_are_repeated_subjects():
    rng = np.random.default_rng(2)
    n = 80
    time, event, risk = rng.exponential(size=n), rng.uniform(size=n) < 0.7, rng.standard_normal(n)
    w = rng.integers(0, 4, n)
    rep = np.repeat(np.arange(n), w)
    a = concordance_index_censored(event, time, risk, sample_weight=w)
    b = concordance_index_censored(event[rep], time[rep], risk[rep])
    assert a[0] == pytest.approx(b[0], abs=1e-14) and a[1] == pytest.approx(b[1])


def test_every_covariate_equals_lifelines_and_its_baseline_survival():
    """k = every covariate, no ridge: the unconstrained Efron fit, as lifelines' CoxPHFitter (Efron's ties);
    coefficients to 1e-5 (both converge to a gradient far below it), and the survival functions of
    individuals from Breslow's baseline hazard equal lifelines' at every observed time (lifelines
    centres the covariates; S(t | x) does not depend on it)."""
    X, time, event, _ = example(p=8)
    m = SparseCoxPHSurvivalAnalysis(k=8, alpha=0.0).fit(X, structured(event, time))
    cph, df = lifelines_fit(X, time, event)
    assert m.coef_ == pytest.approx(cph.params_.values, rel=1e-5, abs=1e-6)
    ours = m.predict_survival_function(X[:5], return_array=True)
    theirs = cph.predict_survival_function(df.iloc[:5], times=m.unique_times_).to_numpy().T
    assert np.allclose(ours, theirs, atol=1e-6)
    # the step functions: 1 before the first time, the array's values at the times, S = S_0^exp(risk)
    f = m.predict_survival_function(X[:1])[0]
    assert f(m.unique_times_[0] - 1.0) == 1.0 and np.allclose(f(m.unique_times_), ours[0])
    assert np.allclose(ours[0], m.baseline_survival_(m.unique_times_) ** np.exp(m.predict(X[:1])[0]))
    H = m.predict_cumulative_hazard_function(X[:5], return_array=True)
    assert np.allclose(np.exp(-H), ours)
    assert m.score(X, structured(event, time)) == pytest.approx(cph.concordance_index_, abs=1e-9)


def test_breslow_case_weights_are_repeated_subjects():
    """With Breslow's ties a case weight of 2 is the subject twice (docs/language.md): the same
    coefficients, chosen k and baseline survival as the repeated data."""
    X, time, event, _ = example(p=12)
    w = np.random.default_rng(3).integers(0, 3, len(time))
    rep = np.repeat(np.arange(len(time)), w)
    a = SparseCoxPHSurvivalAnalysis(ties="breslow").fit(X, structured(event, time), sample_weight=w)
    b = SparseCoxPHSurvivalAnalysis(ties="breslow").fit(X[rep], structured(event[rep], time[rep]))
    assert a.k_ == b.k_ and np.allclose(a.coef_, b.coef_, atol=1e-8)
    grid = np.union1d(a.unique_times_, b.unique_times_)  # a weight of 0 leaves a step of height 0
    assert np.allclose(a.baseline_survival_(grid), b.baseline_survival_(grid), atol=1e-10)


def test_the_default_finds_the_true_covariates():
    """examples/data/survival.npz: 6 true covariates of 50, 400 subjects; EBIC over the events."""
    X, time, event, w = example()
    m = SparseCoxPHSurvivalAnalysis().fit(X, structured(event, time))
    assert np.flatnonzero(m.support_).tolist() == np.flatnonzero(w).tolist()
    assert m.support_names_.tolist() == [f"x{i}" for i in np.flatnonzero(w)]
    assert m.score(X, structured(event, time)) > 0.75


def test_the_target_layouts_give_one_fit():
    """scikit-survival's structured (event, time), abess's n x 2 (time, event), and times alone
    (every event observed) -- the last the same as a structured target with every event True."""
    X, time, event, _ = example(p=10)
    a = SparseCoxPHSurvivalAnalysis(k=3).fit(X, structured(event, time))
    b = SparseCoxPHSurvivalAnalysis(k=3).fit(X, np.column_stack([time, event]))
    assert np.array_equal(a.coef_, b.coef_)
    c = SparseCoxPHSurvivalAnalysis(k=3).fit(X, time)
    d = SparseCoxPHSurvivalAnalysis(k=3).fit(X, structured(np.ones(len(time), bool), time))
    assert np.array_equal(c.coef_, d.coef_) and not np.array_equal(a.coef_, c.coef_)


def test_the_estimator_solves_the_builder_model():
    X, time, event, _ = example(p=10)
    sw = np.random.default_rng(4).uniform(0.5, 2.0, len(time))
    m = SparseCoxPHSurvivalAnalysis(k=3, alpha=0.5).fit(X, structured(event, time), sample_weight=sw)
    w = sm.Variable(10, name="w")
    obj = sm.cox(X @ w, time, event.astype(float), weights=sw) / sw.sum() + 0.5 / (2 * sw.sum()) * sm.sum_squares(w)
    res = sm.Problem(sm.minimize(obj), [sm.nnz(w) <= 3]).solve()
    assert np.allclose(m.coef_, res.values["w"], atol=1e-10)


def test_bad_targets_are_refused_with_what_was_expected():
    X, time, event, _ = example(p=5)
    bad = {
        "two fields": np.zeros(len(time), dtype=[("a", bool), ("b", float), ("c", float)]),
        "0/1 or boolean": np.column_stack([time, event + 1.0]),
        "finite": np.column_stack([np.where(np.arange(len(time)) == 3, np.nan, time), event]),
        "pairs": np.zeros((len(time), 3)),
    }
    for words, y in bad.items():
        with pytest.raises(ValueError, match=words):
            SparseCoxPHSurvivalAnalysis(k=2).fit(X, y)
    with pytest.raises(ValueError, match="ties='exact'"):
        SparseCoxPHSurvivalAnalysis(k=2, ties="exact").fit(X, time)
