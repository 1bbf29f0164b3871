"""The cox atom (Efron's and Breslow's partial likelihoods, case weights): value against the direct
O(n^2) formula with ties and against hand-computed small cases, gradient and Hessian-vector
products against finite differences and the explicit Hessian (also at predictors far apart, where
the risk-set sums span hundreds of orders of magnitude), convexity, the objective against
lifelines (Efron) and statsmodels' PHReg (Breslow) at the same coefficients, the information
criteria counting events, the whole-vector loss in the composite form (Newton restricted solves,
cvxpy reference), optimality against enumeration of supports, every deterministic solver on it,
the stochastic ones refusing it, and bad input."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.errors import DataError, ModelError, ShapeError
from sparsemodel.model.atoms import NoConjugate, cox


def cox_direct(z, time, event, weights=None, ties="efron"):
    """The textbook formula, term by term, and its Hessian: for each distinct event time t (d tied
    events of total weight W) and l = 0..d-1, (W / d) log sum_j c_j w_j exp(z_j) over the risk set
    {time >= t}, c_j = 1 - l/d on the tied events (Efron; 0 for Breslow) and 1 elsewhere; less
    sum over the events of w_i z_i. Each sum is shifted by the largest z of its risk set."""
    z = np.asarray(z, dtype=float)
    w = np.ones(len(z)) if weights is None else np.asarray(weights, dtype=float)
    v, H = 0.0, np.zeros((len(z), len(z)))
    for t in np.unique(time[event > 0]):
        D = (time == t) & (event > 0)
        R = time >= t
        d, W = int(D.sum()), float(w[D].sum())
        if W == 0:
            continue
        top = z[R].max()
        for l in range(d):
            a = l / d if ties == "efron" else 0.0
            e = np.where(R, (1.0 - a * D) * w * np.exp(np.where(R, z - top, 0.0)), 0.0)
            v += W / d * (np.log(e.sum()) + top)
            p = e / e.sum()
            H += W / d * (np.diag(p) - np.outer(p, p))
    return float(v - np.sum(w * event * z)), H


def survival_data(n: int, seed: int, ties: int = 6) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    time = rng.integers(0, ties, n).astype(float)  # few distinct times: many ties
    event = (rng.random(n) < 0.7).astype(float)
    return time, event


CASES = [(ties, weighted) for ties in ("efron", "breslow") for weighted in (False, True)]


@pytest.mark.parametrize("ties, weighted", CASES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_value_gradient_hessian_against_the_direct_formula(seed, ties, weighted):
    n = 23
    time, event = survival_data(n, seed)
    rng = np.random.default_rng(seed + 10)
    wts = rng.uniform(0.0, 3.0, n) * (rng.random(n) > 0.15) if weighted else None  # some zero weights
    c = cox(sm.Variable(n, name="w"), time, event, weights=wts, ties=ties)
    z = rng.standard_normal(n)
    v, g, _ = c.derivs(z, 1)
    ref, H = cox_direct(z, time, event, wts, ties)
    assert v == pytest.approx(ref, rel=1e-12)
    h = 1e-6
    E = np.eye(n)
    fd = np.array(
        [
            (cox_direct(z + h * e, time, event, wts, ties)[0] - cox_direct(z - h * e, time, event, wts, ties)[0])
            / (2 * h)
            for e in E
        ]
    )
    np.testing.assert_allclose(g, fd, atol=1e-7)
    U = rng.standard_normal((n, 3))
    np.testing.assert_allclose(c.hessian_apply(z, U), H @ U, atol=1e-12)
    np.testing.assert_allclose(c.hessian_apply(z, U[:, 0]), H @ U[:, 0], atol=1e-12)
    # the Hessian-vector product is the derivative of the gradient
    fdH = (c.derivs(z + h * U[:, 0], 1)[1] - c.derivs(z - h * U[:, 0], 1)[1]) / (2 * h)
    np.testing.assert_allclose(c.hessian_apply(z, U[:, 0]), fdH, atol=1e-7)
    # convex: the Hessian is positive semidefinite (each term a log-sum-exp)
    assert np.linalg.eigvalsh(c.hessian_apply(z, E)).min() > -1e-12
    # a batch of points at once (the batched Newton kernels pass (m, n))
    vb, gb, _ = c.derivs(np.stack([z, 2 * z]), 1)
    assert vb[1] == pytest.approx(cox_direct(2 * z, time, event, wts, ties)[0], rel=1e-12)
    np.testing.assert_allclose(gb[0], g)


@pytest.mark.parametrize("ties", ["efron", "breslow"])
def test_predictors_far_apart_keep_every_risk_set(ties):
    """Near separation a fit drives z to hundreds: a risk set of the latest times then holds
    exp(z) hundreds of orders of magnitude below the largest, and a sum shifted by the global
    maximum underflows to zero there (it gave a Hessian off by O(1) and mean curvatures 6 to 200
    times the true one). The log-space sums keep it."""
    rng = np.random.default_rng(0)
    n = 60
    eta = rng.standard_normal(n)
    time = np.round(np.exp(-eta), 1)  # near separable, with ties
    event = (rng.random(n) < 0.8).astype(float)
    c = cox(sm.Variable(n, name="w"), time, event, ties=ties)
    for scale in (1.0, 30.0, 1000.0):
        z = scale * eta
        ref, H = cox_direct(z, time, event, ties=ties)
        v, g, _ = c.derivs(z, 1)
        assert v == pytest.approx(ref, rel=1e-9, abs=1e-9 * scale)
        U = rng.standard_normal((n, 2))
        np.testing.assert_allclose(c.hessian_apply(z, U), H @ U, atol=1e-10 * max(1.0, np.abs(H).sum(axis=1).max()))


def test_hand_computed_small_cases():
    """Three subjects: times (1, 1, 2), events (1, 1, 0), z = (0, log 2, 0): the risk set at t = 1
    is everyone, S = 1 + 2 + 1 = 4, the tied events' T = 3. Efron: log 4 + log(4 - 3/2) - log 2 =
    log 5; Breslow: 2 log 4 - log 2 = log 8. With weights (2, 1, 1): S = 5, T = 4, W = 3, wbar =
    3/2: Efron (3/2)(log 5 + log 3) - log 2, Breslow 3 log 5 - log 2."""
    time, event = np.array([1.0, 1.0, 2.0]), np.array([1.0, 1.0, 0.0])
    z = np.array([0.0, np.log(2.0), 0.0])
    w = sm.Variable(3, name="z")
    assert cox(w, time, event).derivs(z, 0)[0] == pytest.approx(np.log(5.0), rel=1e-14)
    assert cox(w, time, event, ties="breslow").derivs(z, 0)[0] == pytest.approx(np.log(8.0), rel=1e-14)
    wts = np.array([2.0, 1.0, 1.0])
    assert cox(w, time, event, wts).derivs(z, 0)[0] == pytest.approx(1.5 * np.log(15.0) - np.log(2.0), rel=1e-14)
    assert cox(w, time, event, wts, "breslow").derivs(z, 0)[0] == pytest.approx(
        3 * np.log(5.0) - np.log(2.0), rel=1e-14
    )
    # Efron's gradient by hand: d/dz_j of log S + log(S - T/2) - z_1 log 1 - z_2
    p1 = np.array([1.0, 2.0, 1.0]) / 4
    p2 = np.array([0.5, 1.0, 1.0]) / 2.5
    np.testing.assert_allclose(cox(w, time, event).derivs(z, 1)[1], p1 + p2 - [1.0, 1.0, 0.0], atol=1e-15)
    # without ties the two rules agree, and a weight of 2 is a repeated subject for Breslow
    t3 = np.array([3.0, 1.0, 2.0])
    e3 = np.array([1.0, 1.0, 1.0])
    assert cox(w, t3, e3).derivs(z, 0)[0] == pytest.approx(cox(w, t3, e3, ties="breslow").derivs(z, 0)[0], rel=1e-14)
    rep = sm.Variable(4, name="r")
    a = cox(w, time, event, wts, "breslow").derivs(z, 0)[0]
    b = cox(rep, np.r_[time, 1.0], np.r_[event, 1.0], ties="breslow").derivs(np.r_[z, 0.0], 0)[0]
    assert a == pytest.approx(b, rel=1e-14)


def rossi() -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str], object]:
    datasets = pytest.importorskip("lifelines.datasets")
    df = datasets.load_rossi()
    cols = [c for c in df.columns if c not in ("week", "arrest")]
    return df[cols].to_numpy(float), df["week"].to_numpy(float), df["arrest"].to_numpy(float), cols, df


def tied_weighted_data(seed: int):
    """Another data set than the examples: 150 subjects, 8 covariates, times rounded to 12 values
    (many ties), about 30 % censored, integer and fractional case weights."""
    rng = np.random.default_rng(seed)
    n, p = 150, 8
    X = rng.standard_normal((n, p))
    beta = np.r_[0.8, -0.6, 0.4, np.zeros(p - 3)]
    t = rng.exponential(np.exp(-X @ beta))
    cens = rng.exponential(1.5, n)
    time = np.ceil(np.minimum(t, cens) * 4)  # coarse: many ties
    event = (t <= cens).astype(float)
    weights = rng.choice([0.5, 1.0, 2.0, 3.0], n)
    return X, time, event, weights


def lifelines_fit(X, time, event, weights=None):
    lifelines = pytest.importorskip("lifelines")
    import pandas as pd

    df = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
    df["T"], df["E"] = time, event
    kw = {}
    if weights is not None:
        df["W"] = weights
        kw = {"weights_col": "W", "robust": True}  # robust: lifelines' advice for non-integer weights
    cph = lifelines.CoxPHFitter().fit(df, "T", "E", **kw)
    return cph.params_.to_numpy(), -cph.log_likelihood_


@pytest.mark.parametrize("weighted", [False, True])
def test_efron_objective_equals_lifelines(weighted):
    """At lifelines' coefficients our objective is minus its log partial likelihood (Efron's, the
    default of both), on the rossi recidivism data (432 subjects, 114 events at 49 distinct weeks)
    and on another tied data set with case weights; and our unconstrained minimum is lifelines'
    (its Newton iteration stops at a gradient of ~1e-9, so the minima agree to ~1e-10)."""
    X, time, event, _, _ = rossi()
    wts = np.random.default_rng(3).integers(1, 4, len(time)).astype(float) if weighted else None
    for X_, t_, e_, w_ in [
        (X, time, event, wts),
        tied_weighted_data(0)[:3] + ((tied_weighted_data(0)[3] if weighted else None),),
    ]:
        beta, nll = lifelines_fit(X_, t_, e_, w_)
        w = sm.Variable(X_.shape[1], name="w")
        obj = sm.cox(X_ @ w, t_, e_, weights=w_)
        assert float(obj.derivs(X_ @ beta, 0)[0]) == pytest.approx(nll, rel=1e-12)
        ours = sm.Problem(sm.minimize(obj)).solve()
        assert ours.objective == pytest.approx(nll, rel=1e-9)
        assert ours.objective <= nll * (1 + 1e-12)


def test_rossi_efron_differs_from_breslow_as_the_references_do():
    """On rossi the tie rule matters (Breslow's value at lifelines' coefficients is ~0.37 above
    Efron's): the default gives lifelines' value, ties="breslow" statsmodels' Breslow value."""
    phreg = pytest.importorskip("statsmodels.duration.hazard_regression").PHReg
    X, time, event, _, _ = rossi()
    beta, nll = lifelines_fit(X, time, event)
    z = X @ beta
    w = sm.Variable(len(time), name="z")
    efron = float(cox(w, time, event).derivs(z, 0)[0])
    breslow = float(cox(w, time, event, ties="breslow").derivs(z, 0)[0])
    assert efron == pytest.approx(nll, rel=1e-12)
    assert breslow == pytest.approx(-phreg(time, X, status=event, ties="breslow").loglike(beta), rel=1e-12)
    assert breslow - efron > 0.3


@pytest.mark.parametrize("ties", ["breslow", "efron"])
def test_objective_equals_statsmodels_phreg(ties):
    """statsmodels' PHReg (Breslow by default, Efron on request) evaluates its log partial
    likelihood at any coefficients: ours is its negative at random coefficients, on rossi and on
    another tied data set. PHReg takes no case weights: for Breslow's rule a weight of m is the
    subject repeated m times, so the weighted objective equals PHReg on the replicated data."""
    phreg = pytest.importorskip("statsmodels.duration.hazard_regression").PHReg
    rng = np.random.default_rng(7)
    X2, t2, e2, _ = tied_weighted_data(1)
    cases = [(X2, t2, e2)]
    try:  # rossi comes with lifelines; the generated data set needs nothing
        cases.append(rossi()[:3])
    except pytest.skip.Exception:
        pass
    for X_, t_, e_ in cases:
        model = phreg(t_, X_, status=e_, ties=ties)
        w = sm.Variable(X_.shape[1], name="w")
        obj = sm.cox(X_ @ w, t_, e_, ties=ties)
        for _ in range(3):
            beta = rng.standard_normal(X_.shape[1]) * 0.2
            assert float(obj.derivs(X_ @ beta, 0)[0]) == pytest.approx(-model.loglike(beta), rel=1e-12)
    if ties == "breslow":
        m = rng.integers(1, 4, len(t2))
        rows = np.repeat(np.arange(len(t2)), m)
        model = phreg(t2[rows], X2[rows], status=e2[rows], ties="breslow")
        obj = sm.cox(X2 @ sm.Variable(X2.shape[1], name="w"), t2, e2, weights=m.astype(float), ties="breslow")
        beta = rng.standard_normal(X2.shape[1]) * 0.2
        assert float(obj.derivs(X2 @ beta, 0)[0]) == pytest.approx(-model.loglike(beta), rel=1e-12)


def test_information_criteria_count_events():
    """BIC's n for a Cox model is the number of events (Volinsky & Raftery 2000), their total
    weight with case weights, not the number of subjects; the rows stay the sample axis."""
    from sparsemodel.workflows.criteria import criterion, data_term

    X, time, event, wts = tied_weighted_data(2)
    w = sm.Variable(X.shape[1], name="w")
    for weights, n_events in [(None, event.sum()), (wts, float(wts @ event))]:
        prob = sm.Problem(sm.minimize(sm.cox(X @ w, time, event, weights=weights)), [sm.nnz(w) <= 3])
        dt = data_term(prob, prob.lower())
        assert dt.n == len(time)
        assert dt.n_obs == pytest.approx(n_events) and dt.n_obs < len(time)
        assert dt.n_unit == "events"
        sel = prob.select(by="bic")
        row = next(r for r in sel.curve if r["k"] == sel.k)
        assert row["value"] == pytest.approx(2 * row["loss"] + np.log(n_events) * row["df"], rel=1e-12)
        assert f"n = {n_events:g} events" in sel.describe()
        assert criterion("bic", row["loss"], dt.n_obs, row["df"], 8, row["nnz"], False) == pytest.approx(row["value"])


def test_weights_and_ties_follow_the_rows_of_a_fold():
    """Cross-validation rebuilds the loss on a subset of the rows: the weights are sample data and
    are subset with the times, and the tie rule is kept."""
    from sparsemodel.model.samples import rebind_rows, sample_nodes

    X, time, event, wts = tied_weighted_data(3)
    w = sm.Variable(X.shape[1], name="w")
    obj = sm.cox(X @ w, time, event, weights=wts, ties="breslow")
    rows = np.arange(0, len(time), 2)
    sub = rebind_rows(obj, sample_nodes(obj, len(time)), rows)
    assert isinstance(sub, cox) and sub.ties == "breslow"
    beta = np.random.default_rng(0).standard_normal(X.shape[1])
    ref = cox(sm.Variable(len(rows), name="z"), time[rows], event[rows], wts[rows], "breslow")
    assert float(sub.derivs(X[rows] @ beta, 0)[0]) == pytest.approx(float(ref.derivs(X[rows] @ beta, 0)[0]), rel=1e-14)
    sel = sm.Problem(sm.minimize(obj), [sm.nnz(w) <= 3]).select(by="cv", folds=3, seed=0)
    assert 0 <= sel.k <= X.shape[1]


def test_distinct_times_no_events_and_large_predictors():
    n = 12
    time = np.arange(n, dtype=float)[::-1]
    event = np.ones(n)
    w = sm.Variable(n, name="w")
    z = np.linspace(-1, 1, n)
    for ties in ("efron", "breslow"):  # no ties: one rule
        assert cox(w, time, event, ties=ties).derivs(z, 0)[0] == pytest.approx(cox_direct(z, time, event)[0])
    for none in (cox(w, time, np.zeros(n)), cox(w, time, event, weights=np.zeros(n))):
        v, g, _ = none.derivs(z, 1)
        assert v == 0 and not g.any() and not none.hessian_apply(z, np.ones(n)).any()
    big = 500 * z  # exp(500) overflows: the log-space sums do not
    v, g, _ = cox(w, time, event).derivs(big, 1)
    assert np.isfinite(v) and np.all(np.isfinite(g))
    assert np.all(np.isfinite(cox(w, time, event).hessian_apply(big, np.ones(n))))


def test_reverse_mode_and_facts():
    n, p = 15, 4
    rng = np.random.default_rng(3)
    X = rng.standard_normal((n, p))
    time, event = survival_data(n, 3)
    w = sm.Variable(p, name="w")
    obj = sm.cox(X @ w, time, event) / n
    from tests.model.test_gradients import fd_check

    fd_check(obj)
    c = sm.cox(X @ w, time, event)
    assert c.loss_form == "whole" and c.is_convex() and c.sign == "nonnegative"
    assert c.events == int(event.sum())
    with pytest.raises(NoConjugate, match="no closed form"):
        c.conjugate(np.zeros(n))


def make_problem(n: int = 60, p: int = 8, k: int = 2, seed: int = 0, **kw):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[:k] = [1.5, -1.0, 0.8][:k]
    t = rng.exponential(np.exp(-X @ beta))
    c = rng.exponential(2.0, n)
    time = np.round(np.minimum(t, c), 1)  # rounding makes ties
    event = (t <= c).astype(float)
    w = sm.Variable(p, name="w")
    return sm.Problem(sm.minimize(sm.cox(X @ w, time, event, **kw)), [sm.nnz(w) <= k]), X, time, event


@pytest.mark.parametrize("ties, weighted", CASES)
def test_composite_form_newton_and_cvxpy_agree(ties, weighted):
    wts = np.random.default_rng(9).uniform(0.5, 2.0, 60) if weighted else None
    prob, *_ = make_problem(ties=ties, weights=wts)
    lp = prob.lower()
    assert lp.design is not None and "cox" in lp.structure
    assert not lp.design.finite_sum
    state = lp.set.state(prob.solve("grahtp").x)
    a = lp.restricted_minimize(state, method="newton")
    b = lp.restricted_minimize(state, method="cvxpy")
    assert a.f == pytest.approx(b.f, rel=1e-8)
    np.testing.assert_allclose(a.x, b.x, atol=1e-5)
    # the design's Hessian-vector product against differences of its gradient
    x = np.random.default_rng(1).standard_normal(lp.n) * 0.3
    v = np.random.default_rng(2).standard_normal(lp.n)
    h = 1e-6
    fd = (lp.design.value_and_grad(x + h * v)[1] - lp.design.value_and_grad(x - h * v)[1]) / (2 * h)
    np.testing.assert_allclose(lp.design.hvp(x, v), fd, atol=1e-6)


def test_optimal_on_every_support_of_a_small_problem():
    prob, X, time, event = make_problem(n=40, p=6, k=2, seed=4)
    best = np.inf
    for S in itertools.combinations(range(6), 2):
        v = sm.Variable(2, name="v")
        best = min(best, sm.Problem(sm.minimize(sm.cox(X[:, list(S)] @ v, time, event))).solve().objective)
    for solver in ("auto", "grahtp", "omp", "ompr", "els", "arht", "foba", "grasp", "fgrahtp", "iht"):
        r = prob.solve(solver)
        assert r.objective <= best * (1 + 1e-6) + 1e-9, solver


def test_stochastic_solvers_refuse_with_the_reason():
    prob, *_ = make_problem()
    with pytest.raises(ModelError, match="not a sum over the rows") as err:
        prob.solve("svrg_ht")
    assert "grahtp" in err.value.hint
    assert "svrg_ht" not in [n for n, _ in prob.check().solvers]


@pytest.mark.parametrize(
    "args, error, words",
    [
        (lambda X, w, t, e: (X @ w, t, 2 * e), DataError, "must be 0 or 1"),
        (lambda X, w, t, e: (X @ w, t[1:], e), ShapeError, "one time, one event indicator"),
        (lambda X, w, t, e: (X @ w, X @ w, e), DataError, "must be data"),
        (lambda X, w, t, e: (np.ones((3, 3)) @ sm.Variable((3, 2), name="W"), t[:3], e[:3]), ShapeError, "vector"),
        (lambda X, w, t, e: (X @ w, t, e, -e), DataError, "weights .* must be finite and nonnegative; entry"),
        (lambda X, w, t, e: (X @ w, t, e, e[1:]), ShapeError, "weights"),
        (lambda X, w, t, e: (X @ w, t, e, X @ w), DataError, "weights must be data; .* depends on a variable"),
        (
            lambda X, w, t, e: (X @ w, t, e, None, "exact"),
            ModelError,
            "ties must be one of 'efron', 'breslow'; got 'exact'",
        ),
    ],
)
def test_bad_input_is_located(args, error, words):
    _, X, time, event = make_problem()
    w = sm.Variable(X.shape[1], name="w")
    with pytest.raises(error, match=words):
        sm.cox(*args(X, w, time, event))


def test_model_file_and_builder_give_one_answer(tmp_path):
    prob, X, time, event = make_problem(seed=5)
    np.savetxt(tmp_path / "X.csv", X, delimiter=",")
    np.savetxt(tmp_path / "y.csv", np.c_[time, event], delimiter=",", header="time,event", comments="")
    (tmp_path / "m.sm").write_text(
        'data X : matrix from "X.csv"\n'
        'data y : matrix from "y.csv"\n'
        "var w[cols(X)]\n"
        "minimize cox(X @ w, y[:, 0], y[:, 1])\n"
        "subject to nnz(w) <= 2\n"
    )
    a = sm.load(str(tmp_path / "m.sm")).solve()
    b = prob.solve()
    assert a.objective == pytest.approx(b.objective, rel=1e-10)
    assert list(a.support) == list(b.support)
    bad = tmp_path / "bad.sm"
    bad.write_text(
        'data X : matrix from "X.csv"\ndata y : matrix from "y.csv"\nvar w[cols(X)]\n'
        "minimize cox(X @ w, y[:, 0], y[:, 0])\n"
    )
    with pytest.raises(DataError) as err:
        sm.load(str(bad))
    assert err.value.span.line == 4


def test_ties_and_weights_in_a_model_file(tmp_path):
    """A model file writes the tie rule as a quoted word and the weights as data, by keyword; the
    answer is the builder's; a word where an expression belongs (or the reverse) is refused at its
    place."""
    rng = np.random.default_rng(6)
    prob, X, time, event = make_problem(seed=6)
    wts = rng.integers(1, 4, len(time)).astype(float)
    np.savetxt(tmp_path / "X.csv", X, delimiter=",")
    np.savetxt(tmp_path / "y.csv", np.c_[time, event, wts], delimiter=",", header="time,event,wt", comments="")
    head = 'data X : matrix from "X.csv"\ndata y : matrix from "y.csv"\nvar w[cols(X)]\n'
    (tmp_path / "m.sm").write_text(
        head + 'minimize cox(X @ w, y[:, 0], y[:, 1], weights = y[:, 2], ties = "breslow")\nsubject to nnz(w) <= 2\n'
    )
    model = sm.load(str(tmp_path / "m.sm"))
    assert 'weights = y[:, 2], ties = "breslow")' in str(model.objective.expr)
    a = model.solve()
    w = sm.Variable(X.shape[1], name="w")
    b = sm.Problem(sm.minimize(sm.cox(X @ w, time, event, wts, ties="breslow")), [sm.nnz(w) <= 2]).solve()
    assert a.objective == pytest.approx(b.objective, rel=1e-10)
    for text, words, col in [
        ('ties = "exact"', "ties must be one of", 10),
        ("ties = 2", 'ties takes a word in quotes, like ties = "efron"', 10),
        ('weights = "y"', "weights takes an expression, not the text 'y'", 39),
        ("ties = breslow", "'breslow' is not defined", 46),
    ]:
        bad = tmp_path / "bad.sm"
        bad.write_text(head + f"minimize cox(X @ w, y[:, 0], y[:, 1], {text})\n")
        with pytest.raises(ModelError, match=words) as err:
            sm.load(str(bad))
        assert (err.value.span.line, err.value.span.column) == (4, col)
        if "not defined" in words:
            assert err.value.hint == 'cox\'s ties takes the word in quotes: ties = "breslow"'
