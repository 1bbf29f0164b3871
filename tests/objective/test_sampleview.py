"""The sample view of a model: the rows, the data term and the splits a workflow needs, read from the
objective's composite form without lowering the problem. Its counts are the lowering's (the same
design), its row splits are the model written by hand on those rows, and no workflow that only
counts or splits rows builds a lowered problem."""

from __future__ import annotations

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.lowering.lowered import LoweredProblem
from sparsemodel.objective.sampleview import SelectionError, sample_view

N, P, M = 40, 6, 3


def models():
    """(problem, n_obs the criteria count, unit) of five losses over N samples."""
    rng = np.random.default_rng(11)
    X = rng.standard_normal((N, P))
    y = X[:, 0] + 0.1 * rng.standard_normal(N)
    v = np.where(rng.uniform(size=N) < 0.5, 1.0, -1.0)
    labels = rng.integers(0, M, N)
    Y = rng.standard_normal((N, M))
    time, event = rng.exponential(1.0, N), (rng.uniform(size=N) < 0.6).astype(float)
    w, b = sm.Variable(P, name="w"), sm.Variable((), name="b")
    W = sm.Variable((P, M), name="W")
    Z = X @ W
    return {
        "linear": (sm.Problem(sm.minimize(sm.sum_squares(X @ w + b - y) / (2 * N)), [sm.nnz(w) <= 2]), N, "samples"),
        "logistic": (
            sm.Problem(
                sm.minimize(sm.mean(sm.logistic(-v * (X @ w + b))) + 0.01 * sm.sum_squares(w)), [sm.nnz(w) <= 2]
            ),
            N,
            "samples",
        ),
        "multinomial": (
            sm.Problem(
                sm.minimize(sm.mean(sm.logsumexp(Z, axis=1) - sm.sum(np.eye(M)[labels] * Z, axis=1))),
                [sm.nnz(W, groups="rows") <= 2],
            ),
            N,
            "samples",
        ),
        "cox": (sm.Problem(sm.minimize(sm.cox(X @ w, time, event)), [sm.nnz(w) <= 2]), float(event.sum()), "events"),
        "multi-task": (
            sm.Problem(sm.minimize(sm.sum_squares(X @ W - Y) / (2 * N)), [sm.nnz(W, groups="rows") <= 2]),
            N * M,
            "samples",
        ),
    }


@pytest.mark.parametrize("name", list(models()))
def test_the_counts_are_the_lowerings(name):
    prob, n_obs, unit = models()[name]
    view = sample_view(prob)
    lp = LoweredProblem(prob)
    assert view.n == lp.design.n_samples == N
    dt, low = view.term(), sample_view(prob, lp).term()  # the same data term from the lowering's design
    assert (dt.n, dt.n_obs, dt.n_eff, dt.n_unit, dt.gaussian) == (low.n, low.n_obs, low.n_eff, low.n_unit, low.gaussian)
    assert dt.n_obs == pytest.approx(n_obs) and dt.n_unit == unit
    assert dt.scale == pytest.approx(low.scale)
    assert {d.uid for d in dt.nodes} == {d.uid for d in low.nodes}


@pytest.mark.parametrize("name", ["linear", "logistic", "multinomial", "cox", "multi-task"])
def test_a_split_is_the_model_on_those_rows(name):
    """view.train(rows) has len(rows) samples and the objective of the same model written on the rows
    by hand; view.held_out(rows) is the data term there (a ridge left out)."""
    prob, _, _ = models()[name]
    rows = np.arange(0, N, 3)
    view = sample_view(prob)
    train = view.train(rows)
    assert sample_view(train).n == len(rows)
    lp_full, lp_train = LoweredProblem(prob), LoweredProblem(train)
    rng = np.random.default_rng(2)
    x = 0.2 * rng.standard_normal(lp_full.n)
    dt = view.term()
    nodes = {d.uid: d for d in dt.nodes}
    by_hand = sm.Problem(  # the same expression tree with each sample node's rows taken by hand
        sm.minimize(_rows_by_hand(prob.objective.expr, nodes, rows)), prob.constraints
    )
    assert lp_train.f(x) == pytest.approx(LoweredProblem(by_hand).f(x), rel=1e-12)
    held = view.held_out(rows)
    from sparsemodel.objective.evaluator import Evaluator

    assert Evaluator(held, lp_full.layout).value(x) == pytest.approx(
        float(Evaluator(_rows_by_hand(dt.expr, nodes, rows), lp_full.layout).value(x)), rel=1e-12
    )


def _rows_by_hand(e, nodes, rows):
    from sparsemodel.model.expr import Data
    from sparsemodel.model.samples import replace_data

    return replace_data(e, {u: Data(np.asarray(d.value)[rows], name=d.name) for u, d in nodes.items()})


def test_no_samples_is_refused_with_the_objectives_form():
    """A precision matrix's likelihood reads no samples: the view says so (the form in words)."""
    rng = np.random.default_rng(0)
    S = np.cov(rng.standard_normal((50, 4)), rowvar=False)
    O = sm.Variable((4, 4), name="O", symmetric=True)
    prob = sm.Problem(sm.minimize(-sm.logdet(O) + sm.trace(S @ O)), [sm.nnz(sm.offdiag(O)) <= 2])
    view = sample_view(prob)
    assert view.n is None and not view.has_samples
    with pytest.raises(SelectionError, match="sum over samples.*precision matrix"):
        view.term()


def test_workflows_count_and_split_rows_without_lowering(monkeypatch):
    """Held-out splits, the rows handed to an outside method, the held-out loss and the class labels
    read the sample view: none of them builds a lowered problem (the lowering's set assembly is
    made to fail here)."""
    from sparsemodel.lowering import data as lowering_data
    from sparsemodel.workflows import metrics

    rng = np.random.default_rng(4)
    X, v = (
        sm.Data(rng.standard_normal((N, P)), name="X"),
        sm.Data(np.where(rng.uniform(size=N) < 0.5, 1.0, -1.0), name="v"),
    )
    w = sm.Variable(P, name="w")
    prob = sm.Problem(sm.minimize(sm.mean(sm.logistic(-v * (X @ w)))), [sm.nnz(w) <= 2])
    rows = np.arange(10)

    def refuse(*a, **k):
        raise AssertionError("a lowered problem was built")

    monkeypatch.setattr(lowering_data.LoweredData, "__init__", refuse)
    assert sample_view(metrics.train_model(prob, rows)).n == 10
    assert metrics.HeldOut.of_rows(prob, rows).n == 10
    given = metrics.rows_data(prob, rows)
    assert np.array_equal(given["X"], X.value[rows]) and np.array_equal(given["v"], v.value[rows])
    labels = metrics.class_labels(prob)
    assert labels is not None and labels[1] is v and np.array_equal(labels[0], v.value)


def test_a_data_nodes_rows_are_the_node_of_those_rows():
    """Data.take_rows (a fold's, a split's rows) gives the node a fresh Data of the rows gives: the
    same numbers, shape, name, kind, axis names (the row names subset) and sign, whether the rows'
    numbers are checked again (a sparse matrix) or not (float64, checked when the node was made)."""
    import scipy.sparse as sp

    from sparsemodel.model.expr import Data

    rng = np.random.default_rng(0)
    rows = np.array([4, 0, 2])
    dense = np.abs(rng.standard_normal((6, 3)))
    dense[1, 1] = -1.0  # (any sign on all rows; nonnegative on the rows taken)
    cases = [
        Data(dense, name="X", kind="matrix", names=[[f"r{i}" for i in range(6)], ["a", "b", "c"]]),
        Data(rng.standard_normal(6), name="y"),
        Data(np.arange(6), name="counts"),
        Data(sp.random(6, 3, density=0.5, random_state=1, format="csr"), name="S"),
    ]
    for d in cases:
        got = d.take_rows(rows)
        value = d.value[rows]
        want = Data(
            value,
            name=d.name,
            kind=d.kind,
            names=[
                None if n is None else tuple(np.asarray(n)[rows]) if i == 0 else n for i, n in enumerate(d.axis_names)
            ],
        )
        assert type(got.value) is type(want.value) and got.shape == want.shape == (3, *d.shape[1:])
        assert (got.value != want.value).nnz == 0 if sp.issparse(want.value) else np.array_equal(got.value, want.value)
        assert (got.name, got.kind, got.axis_names, got.sign) == (want.name, want.kind, want.axis_names, want.sign)
        assert got.uid != d.uid
    assert cases[0].take_rows(rows).sign != cases[0].sign  # (the sign is the rows', read afresh)


def test_the_data_terms_agreement_test_is_numpys_allclose():
    """The sample view asks whether a few floats agree (the terms' observations, rows and
    coefficients) by a small loop; it answers as np.allclose(vals, vals[0], rtol, atol) does,
    infinities and NaN included, on both sides of each tolerance."""
    import math

    from sparsemodel.objective.sampleview import _all_close

    inf, nan = math.inf, math.nan
    cases = [
        [1.0, 1.0 + 1e-11],
        [1.0, 1.0 + 1e-9],
        [0.0, 5e-9],
        [0.0, 2e-8],
        [2.0, 2.0, 2.0 + 3e-12],
        [inf, inf],
        [inf, 1.0],
        [1.0, inf],
        [-inf, inf],
        [nan, nan],
        [1.0, nan],
        [1e300, 1e300 * (1 + 1e-11)],
    ]
    for vals in cases:
        for rtol, atol in ((1e-10, 1e-8), (1e-12, 0.0)):
            assert _all_close(vals, rtol, atol) == bool(np.allclose(vals, vals[0], rtol=rtol, atol=atol)), vals
