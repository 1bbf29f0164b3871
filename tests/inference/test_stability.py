"""Stability selection with complementary pairs: the halves, the selection probabilities (each
half's path recomputed independently), the error bounds by hand, recovery of a known support, group
units, and the command line."""

from __future__ import annotations

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.cli import main
from sparsemodel.inference import stability
from sparsemodel.inference.base import InferenceError
from sparsemodel.inference.stability import StabilityResult, halves, um_const


def linear(seed: int = 0, n: int = 120, p: int = 15, k: int = 5):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[[1, 4, 8]] = [1.0, -1.0, 0.8]
    y = X @ beta + rng.standard_normal(n)
    w = sm.Variable(p, name="w")
    return sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / (2 * n)), [sm.nnz(w) <= k]), X, y, beta


def test_the_halves_are_complementary_pairs():
    hs = halves(11, 4, seed=3)
    assert len(hs) == 8
    for a, b in zip(hs[::2], hs[1::2]):
        assert len(a) == len(b) == 5 and not set(a) & set(b)
    assert any(not np.array_equal(hs[0], h) for h in hs[2::2])  # the pairs differ


def test_the_probabilities_are_the_share_of_halves_selecting_each_unit():
    prob, X, y, beta = linear()
    res = stability(prob, pairs=3, seed=5)
    assert res.probabilities.shape == (5, 15)
    # each half's best supports, recomputed from its rows with the model written on them
    counts = np.zeros((5, 15))
    for rows in halves(120, 3, seed=5):
        w = sm.Variable(15, name="w")
        sub = sm.Problem(sm.minimize(sm.sum_squares(X[rows] @ w - y[rows]) / (2 * 120)), [sm.nnz(w) <= 5])
        path = sub.path(k=range(1, 6), solver="auto", start="warm")
        for i, pt in enumerate(path.points):
            counts[i, pt.result.support] += 1
    assert np.allclose(res.probabilities, counts / 6)


def test_the_error_bounds_by_hand():
    # q = 4 per half over p = 20 units at tau = 0.6: q^2 / ((2 tau - 1) p) = 16 / (0.2 * 20) = 4
    members = np.zeros((10, 2, 20), dtype=bool)
    members[:, 1, :4] = True
    res = StabilityResult(
        sm.Problem(sm.minimize(sm.sum_squares(sm.Variable(2, name="v")))),
        [str(j) for j in range(20)],
        [1, 2],
        members,
        0.6,
        None,
        "auto",
        5,
        40,
    )
    assert res.q == 4.0 and res.bound == pytest.approx(4.0)
    assert list(res.selected) == [0, 1, 2, 3]
    # Shah and Samworth's unimodal constant (as stabs computes it), B = 5, theta = 0.2:
    # tau = 0.6 <= 3/4 needs tau > 1/2 + min(theta^2, 1/(2B) + 3 theta^2 / 4) = 0.54: C = 2 (0.2 - 0.1) = 0.2
    assert um_const(0.6, 5, 0.2) == pytest.approx(0.2)
    assert res.bound_unimodal == pytest.approx(16 / 20 / 0.2)
    # tau = 0.9 > 3/4: C = (1 + 1/B) / (4 (1 - tau + 1/(2B))) = 1.2 / (4 * 0.2) = 1.5
    assert um_const(0.9, 5, 0.2) == pytest.approx(1.5)
    # below the range the bound is not defined
    assert um_const(0.52, 5, 0.2) is None


def test_a_known_support_is_selected_and_the_false_selections_respect_the_bound():
    prob, X, y, beta = linear(seed=1, n=200, p=20, k=6)
    res = stability(prob, pairs=10, threshold=0.7, truth={"w": beta})
    assert sorted(res.selected.tolist()) == [1, 4, 8]
    assert res.false_selections == 0 <= res.bound
    assert res.selected_names == ["w[1]", "w[4]", "w[8]"]
    at = stability(prob, pairs=10, threshold=0.7, at_k=3)
    assert sorted(at.selected.tolist()) == [1, 4, 8] and at.q == pytest.approx(3.0)


def test_row_groups_are_the_units():
    rng = np.random.default_rng(2)
    n, p, K = 150, 8, 3
    X = rng.standard_normal((n, p))
    B = np.zeros((p, K))
    B[2] = [2.0, -2.0, 0.0]
    B[5] = [0.0, 2.0, -2.0]
    logits = X @ B
    cls = np.array([rng.choice(K, p=np.exp(r - r.max()) / np.exp(r - r.max()).sum()) for r in logits])
    Y = np.eye(K)[cls]
    W = sm.Variable((p, K), name="W")
    prob = sm.Problem(
        sm.minimize((sm.sum(sm.logsumexp(X @ W, axis=1)) - sm.sum(Y * (X @ W))) / n), [sm.nnz(W, groups="rows") <= 3]
    )
    res = stability(prob, pairs=5, threshold=0.8)
    assert res.p == p and sorted(res.selected.tolist()) == [2, 5]
    assert res.selected_names == ["W[2, :]", "W[5, :]"]


def test_bad_settings_are_refused():
    prob, X, y, beta = linear()
    with pytest.raises(InferenceError, match="threshold"):
        stability(prob, threshold=0.4)
    with pytest.raises(InferenceError, match="pairs"):
        stability(prob, pairs=0)
    with pytest.raises(InferenceError, match="at_k"):
        stability(prob, k=3, at_k=4)


def test_the_cli_prints_the_bound_and_writes_the_probabilities(tmp_path, capsys):
    prob, X, y, beta = linear(seed=1, n=100, p=10, k=4)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    (tmp_path / "m.sm").write_text(
        'data X : matrix from "X.npy"\ndata y : vector from "y.npy"\nvar w[cols(X)]\n'
        "minimize sum_squares(X @ w - y) / (2 * rows(X))\nsubject to\n    nnz(w) <= 4\n"
    )
    assert main(["stability", str(tmp_path / "m.sm"), "--pairs", "4", "--csv", str(tmp_path / "p.csv")]) == 0
    out = capsys.readouterr().out
    assert "expected false selections E[V] <=" in out and "Meinshausen-Buhlmann" in out
    head = (tmp_path / "p.csv").read_text().splitlines()[0]
    assert head == "unit,name,max_probability,selected,k=1,k=2,k=3,k=4"
    assert main(["stability", str(tmp_path / "m.sm"), "--threshold", "0.3"]) == 2


@pytest.mark.slow  # joblib's workers start in seconds
def test_halves_on_workers_give_the_serial_answer():
    pytest.importorskip("joblib")
    prob, X, y, beta = linear(seed=2, n=100, p=10, k=4)
    serial = stability(prob, pairs=4, seed=3)
    parallel = stability(prob, pairs=4, seed=3, n_jobs=2)
    assert np.array_equal(serial.probabilities, parallel.probabilities)
    assert np.array_equal(serial.selected, parallel.selected)
