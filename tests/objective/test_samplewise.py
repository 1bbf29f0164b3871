"""The per-sample reading of a data term: its values sum (with its constant) to the evaluator's value
of the same term, each value is the loss of its own row (a one-row model by hand), and losses that
couple their samples have none."""

from __future__ import annotations

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.lowering.lowered import LoweredProblem
from sparsemodel.objective.evaluator import Evaluator
from sparsemodel.objective.samplewise import sample_values
from sparsemodel.workflows.criteria import data_term

N, P = 30, 4


def data():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((N, P))
    y = rng.poisson(1.5, N).astype(float)
    sw = rng.uniform(0.5, 2.0, N)
    labels = rng.integers(0, 3, N)
    return X, y, sw, labels, rng


def losses():
    X, y, sw, labels, _ = data()
    w, b = sm.Variable(P, name="w"), sm.Variable((), name="b")
    W = sm.Variable((P, 3), name="W")
    z = X @ w + b
    v = np.where(y > 1, 1.0, -1.0)
    Y = np.eye(3)[labels]
    Z = X @ W
    return {
        # (objective, the constrained variable, the per-sample loss by hand at (w, b) or W)
        "least squares": (sm.sum_squares(z - y) / (2 * N), w, lambda w_, b_, W_: (X @ w_ + b_ - y) ** 2 / (2 * N)),
        "weighted poisson (a linear piece)": (
            sm.sum(sw * (sm.exp(z) - y * z)) / sw.sum(),
            w,
            lambda w_, b_, W_: sw * (np.exp(X @ w_ + b_) - y * (X @ w_ + b_)) / sw.sum(),
        ),
        "logistic, ridge apart": (
            sm.mean(sm.logistic(-v * z)) + 0.01 * sm.sum_squares(w),
            w,
            lambda w_, b_, W_: np.logaddexp(0.0, -v * (X @ w_ + b_)) / N,
        ),
        "softmax (row-wise)": (
            sm.mean(sm.logsumexp(Z, axis=1) - sm.sum(Y * Z, axis=1)),
            W,
            lambda w_, b_, W_: (np.log(np.exp(X @ W_).sum(axis=1)) - (Y * (X @ W_)).sum(axis=1)) / N,
        ),
    }


@pytest.mark.parametrize("name", list(losses()))
def test_the_values_are_each_rows_loss_and_sum_to_the_term(name):
    obj, var, by_hand = losses()[name]
    prob = sm.Problem(sm.minimize(obj), [sm.nnz(var) <= 2])
    lp = LoweredProblem(prob)
    dt = data_term(prob, lp)
    sv = sample_values(dt.expr, lp.layout, N)
    assert sv is not None
    rng = np.random.default_rng(9)
    for _ in range(3):
        x = 0.3 * rng.standard_normal(lp.n)
        vals = sv.values(x)
        total = float(Evaluator(dt.expr, lp.layout).value(x))
        assert sv.total(x) == pytest.approx(total, rel=1e-12, abs=1e-14)
        got = lp.layout.unpack(x)
        want = by_hand(got.get("w"), float(got["b"]) if "b" in got else 0.0, got.get("W"))
        assert sv.const == 0.0 and np.allclose(vals, want, rtol=1e-10, atol=1e-14)


def test_losses_that_couple_their_samples_have_no_per_sample_values():
    X, y, _, _, rng = data()
    w = sm.Variable(P, name="w")
    time, event = rng.exponential(1.0, N), (rng.uniform(size=N) < 0.7).astype(float)
    prob = sm.Problem(sm.minimize(sm.cox(X @ w, time, event)), [sm.nnz(w) <= 2])
    lp = LoweredProblem(prob)
    assert sample_values(data_term(prob, lp).expr, lp.layout, N) is None


@pytest.mark.parametrize("name", list(losses()))
def test_the_values_of_several_points_at_and_above_the_dense_limit(name, monkeypatch):
    """values_many reads each map by its dense Jacobian up to DENSE_LIMIT entries and by the map's own
    evaluation one entry above it: the same values both ways (to rounding), and each row the bits of
    values() at that point alone."""
    from sparsemodel.objective import samplewise

    obj, var, _ = losses()[name]
    prob = sm.Problem(sm.minimize(obj), [sm.nnz(var) <= 2])
    lp = LoweredProblem(prob)
    expr = data_term(prob, lp).expr
    X = 0.3 * np.random.default_rng(4).standard_normal((5, lp.n))
    sizes = [amap.size * amap.n for _, _, _, amap in sample_values(expr, lp.layout, N).terms]
    got = {}
    for limit in (max(sizes), max(sizes) - 1):
        monkeypatch.setattr(samplewise, "DENSE_LIMIT", limit)
        sv = sample_values(expr, lp.layout, N)
        got[limit] = V = sv.values_many(X)
        assert V.shape == (5, N)
        for x, row in zip(X, V):
            assert np.array_equal(sv.values(x), row)
    assert np.allclose(got[max(sizes)], got[max(sizes) - 1], rtol=1e-12, atol=1e-15)


SUBSET_SCALES = {
    "least squares": 0,
    "weighted poisson (a linear piece)": 0,
    "logistic, ridge apart": 1,
    "softmax (row-wise)": 1,
}


@pytest.mark.parametrize("name", list(losses()))
def test_a_subset_of_rows_reads_as_those_rows_of_the_whole_term(name):
    """Where subset_scale proves the data term on a subset of the rows to be const plus its samples'
    values (a sum: scale 0; a mean: scale 1, times n / |rows|), the all-data reading's rows
    (on_rows) give the values of the term rebuilt on those rows (rebind_rows, then read afresh) and
    its evaluator's value: the same arithmetic on the same numbers, up to the rounding of a mean's
    coefficient (1 / n times n / m against 1 / m: a few ulps)."""
    from sparsemodel.model.samples import rebind_rows, sample_nodes, subset_scale

    obj, var, _ = losses()[name]
    prob = sm.Problem(sm.minimize(obj), [sm.nnz(var) <= 2])
    lp = LoweredProblem(prob)
    dt = data_term(prob, lp)
    nodes = sample_nodes(dt.expr, N)
    scale = subset_scale(dt.expr, nodes, N)
    assert scale == SUBSET_SCALES[name]
    whole = sample_values(dt.expr, lp.layout, N)
    rng = np.random.default_rng(11)
    for m in (1, 7, N - 1):
        rows = np.sort(rng.choice(N, m, replace=False))
        sub = whole.on_rows(rows, scale)
        held = rebind_rows(dt.expr, nodes, rows)
        afresh = sample_values(held, lp.layout, m)
        X = 0.3 * rng.standard_normal((3, lp.n))
        got, want = sub.values_many(X), afresh.values_many(X)
        assert got.shape == (3, m)
        assert np.allclose(got, want, rtol=8 * np.finfo(float).eps, atol=0)
        if scale == 0:  # (a sum's coefficient is the same number: the same bits)
            assert np.array_equal(got, want)
        for x in X:
            assert sub.total(x) == pytest.approx(float(Evaluator(held, lp.layout).value(x)), rel=1e-13, abs=1e-15)


def test_subset_scale_refuses_terms_whose_rows_mix():
    """A data term whose value on a subset is not const plus its samples' values (centring inside the
    loss, a scale or weights read from the data, a reduction down the samples, sums and means
    together, a transposed sample matrix) has no subset reading: None (the subset's term is then
    rebuilt); the forms the estimators write have one."""
    from sparsemodel.model.samples import sample_nodes, subset_scale

    X, y, sw, _, _ = data()
    Xd, yd, sd = sm.Data(X, name="X"), sm.Data(y, name="y"), sm.Data(sw, name="sw")
    w, b = sm.Variable(P, name="w"), sm.Variable((), name="b")
    u = sm.Variable(N, name="u")  # (a variable with one entry per sample)

    def scale(e):
        return subset_scale(e, sample_nodes(e, N), N)

    assert scale(sm.sum(sd * sm.square(Xd @ w + b - yd)) / (2.0 * sw.sum())) == 0
    assert scale(sm.mean(sm.logistic(-yd * (Xd @ w))) + sm.mean(sm.square(Xd @ w))) == 1
    assert scale(sm.sum(sd * (sm.exp(Xd @ w + b) - yd * (Xd @ w + b))) - 3.0 * sm.sum_squares(Xd @ w - yd)) == 0
    refused = {
        "centring": sm.sum(sm.square((Xd - sm.mean(Xd, axis=0)) @ w - yd)),
        "a scale read from the data": sm.sum(sm.square(Xd @ w - yd)) / sm.sum(sd),
        "a sum and a mean": sm.sum_squares(Xd @ w - yd) + sm.mean(sm.square(Xd @ w)),
        "a reduction down the samples": sm.sum_squares(sm.sum(Xd, axis=0) * w),
        "a transposed sample matrix": sm.sum_squares(Xd.T @ (Xd @ w - yd)),
        "an additive constant per sample": sm.sum(sm.square(Xd @ w - yd) + yd * yd),
        "a constant that reads the samples": sm.sum_squares(Xd @ w - yd) + sm.sum_squares(yd),
        "a per-sample variable": sm.sum_squares(Xd @ w - yd + u),
        "a product along the samples": sm.square(yd @ (Xd @ w)),
    }
    for why, e in refused.items():
        assert scale(e) is None, why


@pytest.mark.parametrize("name", ["least squares", "softmax (row-wise)"])
def test_a_subset_reading_at_and_above_the_dense_limit(name, monkeypatch):
    """on_rows reads each map's rows from its dense Jacobian (or its columns made dense, for a map
    without one) up to DENSE_LIMIT entries; one entry above the largest map it gives None, and
    cross-validation then rebuilds the held-out term (the fallback)."""
    from sparsemodel.model.samples import sample_nodes, subset_scale
    from sparsemodel.objective import samplewise

    obj, var, _ = losses()[name]
    prob = sm.Problem(sm.minimize(obj), [sm.nnz(var) <= 2])
    lp = LoweredProblem(prob)
    expr = data_term(prob, lp).expr
    scale = subset_scale(expr, sample_nodes(expr, N), N)
    sizes = [amap.size * amap.n for _, _, _, amap in sample_values(expr, lp.layout, N).terms]
    rows = np.arange(0, N, 3)
    monkeypatch.setattr(samplewise, "DENSE_LIMIT", max(sizes))
    assert sample_values(expr, lp.layout, N).on_rows(rows, scale) is not None
    monkeypatch.setattr(samplewise, "DENSE_LIMIT", max(sizes) - 1)
    assert sample_values(expr, lp.layout, N).on_rows(rows, scale) is None
