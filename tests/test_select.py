"""Choosing k: the criteria's formulas on hand-computed cases, one criterion for two spellings of one
loss, cross-validation that picks the true k, held-out losses against a by-hand fold, located errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.cli import main
from sparsemodel.compare.select import SelectionError, criterion, folds_of, log_binom
from sparsemodel.errors import ModelError


def separated(n: int = 120, p: int = 25, s: int = 4, noise: float = 0.5, seed: int = 2):
    """Least squares with s strong coefficients (|beta| >= 2) and small noise: the true k is clear."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[rng.choice(p, s, replace=False)] = rng.choice([-3.0, -2.0, 2.0, 3.0], s)
    y = X @ beta + noise * rng.standard_normal(n)
    return X, y, beta


def ls(X, y, ridge: float = 0.0, mean: bool = False):
    n, p = X.shape
    w = sm.Variable(p, name="w")
    loss = sm.mean(sm.square(X @ w - y)) if mean else sm.sum_squares(X @ w - y) / (2 * n)
    obj = loss + ridge * sm.sum_squares(w) if ridge else loss
    return sm.Problem(sm.minimize(obj), [sm.nnz(w) <= 3])


# ----------------------------------------------------------------------------- formulas


def test_criterion_formulas_by_hand():
    # Gaussian: D = n log(RSS/n) = 4 log 2 with RSS = 8, n = 4
    D = 4 * math.log(2.0)
    assert criterion("aic", 8.0, 4, 2, 10, 2, True) == pytest.approx(D + 4)
    assert criterion("bic", 8.0, 4, 2, 10, 2, True) == pytest.approx(D + 2 * math.log(4))
    assert criterion("ebic", 8.0, 4, 2, 10, 2, True) == pytest.approx(D + 2 * math.log(4) + 2 * math.log(45))
    assert criterion("ebic", 8.0, 4, 2, 10, 2, True, gamma=0.5) == pytest.approx(D + 2 * math.log(4) + math.log(45))
    assert criterion("gic", 8.0, 4, 2, 10, 2, True) == pytest.approx(D + math.log(math.log(4)) * math.log(10) * 2)
    # a likelihood loss: D = 2 L
    assert criterion("bic", 3.5, 20, 3, 10, 3, False) == pytest.approx(7.0 + 3 * math.log(20))
    assert log_binom(10, 2) == pytest.approx(math.log(45))


def test_bic_curve_by_hand_and_two_spellings():
    """The BIC at each k equals n log(RSS/n) + log(n) df computed from the point itself, and the
    spellings sum_squares(r)/(2n) and mean(square(r)) give the same curve (the per-sample scale c is
    read from the design)."""
    X, y, _ = separated(n=40, p=10)
    n = len(y)
    a = ls(X, y).select(k=range(1, 7), by="bic")
    b = ls(X, y, mean=True).select(k=range(1, 7), by="bic")
    for ra, rb in zip(a.curve, b.curve):
        x = a.path.at(ra["k"]).x
        rss = float(np.sum((X @ x - y) ** 2))
        df = int(np.count_nonzero(x))
        assert ra["value"] == pytest.approx(n * math.log(rss / n) + math.log(n) * df, rel=1e-10)
        assert rb["value"] == pytest.approx(ra["value"], rel=1e-8)
    assert a.k == b.k


def test_logistic_bic_by_hand_with_intercept_and_ridge():
    """D = 2 sum_i log(1 + exp(-y_i z_i)) (the ridge is not data), df = nnz + the intercept."""
    X, y, beta = separated(n=60, p=8)
    rng = np.random.default_rng(0)
    v = np.where(X @ beta + 2.0 * rng.standard_normal(len(y)) > 0, 1.0, -1.0)
    n, p = X.shape
    w = sm.Variable(p + 1, name="w")
    obj = sm.mean(sm.logistic(-v * (X @ w[1:] + w[0]))) + 0.05 * sm.sum_squares(w[1:])
    sel = sm.Problem(sm.minimize(obj), [sm.nnz(w[1:]) <= 2]).select(k=range(1, 5), by="ebic")
    for r in sel.curve:
        x = sel.path.at(r["k"]).x
        L = float(np.sum(np.logaddexp(0, -v * (X @ x[1:] + x[0]))))
        s = int(np.count_nonzero(x[1:]))
        assert r["df"] == s + 1 and r["loss"] == pytest.approx(L / n, rel=1e-10)
        want = 2 * L + math.log(n) * (s + 1) + 2 * math.log(math.comb(p, s))
        assert r["value"] == pytest.approx(want, rel=1e-10)


def test_degrees_of_freedom_count_free_coordinates_but_not_fixed_ones():
    X, y, _ = separated(n=40, p=10)
    w = sm.Variable(10, name="w")
    prob = sm.Problem(
        sm.minimize(sm.sum_squares(X @ w - y) / 80), [sm.nnz(w, free=[0, 1, 2]) <= 2, sm.box(w[2], 0.5, 0.5)]
    )
    sel = prob.select(k=[1, 2], by="aic")
    assert [r["df"] for r in sel.curve] == [1 + 2, 2 + 2]


# ----------------------------------------------------------------------------- cross-validation


def test_cross_validation_picks_the_true_k():
    X, y, beta = separated()
    prob = ls(X, y, ridge=1e-4)
    sel = prob.select(k=range(0, 11), by="cv", folds=5, seed=0)
    assert sel.k == 4
    assert set(np.flatnonzero(sel.result.x)) == set(np.flatnonzero(beta))
    assert sel.per_fold.shape == (5, 11)
    # the criteria agree on this problem
    for by in ("bic", "ebic", "gic"):
        assert prob.select(k=range(0, 11), by=by).k == 4
    # and the one-standard-error rule never picks a larger k than the minimum
    assert prob.select(k=range(0, 11), by="cv", rule="1se").k <= 4


def test_held_out_loss_is_the_model_on_the_held_out_rows():
    """With user fold ids, fold 0's held-out losses equal a by-hand computation: the same model on
    the training rows (mean, intercept, weights follow the rows; the ridge stays in training only),
    its path, and the data term on the held-out rows."""
    X, y, _ = separated(n=50, p=8)
    n, p = X.shape
    rng = np.random.default_rng(4)
    wts = rng.uniform(0.5, 2.0, n)
    ids = np.arange(n) % 3
    w = sm.Variable(p + 1, name="w")

    def model(Xs, ys, ws):  # the constant n stays n on a subset (it is a number in the tree)
        obj = sm.sum(ws * sm.square(Xs @ w[1:] + w[0] - ys)) / n + 0.01 * sm.sum_squares(w[1:])
        return sm.Problem(sm.minimize(obj), [sm.nnz(w[1:]) <= 2])

    sel = model(X, y, wts).select(k=[1, 2, 3], by="cv", fold_ids=ids, solver="els")
    tr, te = ids != 0, ids == 0
    path = model(X[tr], y[tr], wts[tr]).path(k=[1, 2, 3], solver="els")
    for j, k in enumerate([1, 2, 3]):
        x = path.at(k).x
        held = float(np.sum(wts[te] * (X[te] @ x[1:] + x[0] - y[te]) ** 2)) / n
        assert sel.per_fold[0, j] == pytest.approx(held, rel=1e-10)


def test_folds_are_fixed_by_the_seed():
    a = folds_of(23, 4, 7, None)
    assert np.array_equal(a, folds_of(23, 4, 7, None)) and not np.array_equal(a, folds_of(23, 4, 8, None))
    assert sorted(np.bincount(a).tolist()) == [5, 6, 6, 6]
    assert folds_of(4, None, None, ["b", "a", "b", "c"]).tolist() == [1, 0, 1, 2]


def test_cv_on_a_softmax_model_runs_with_row_groups():
    rng = np.random.default_rng(3)
    n, p, m = 90, 6, 3
    X = rng.standard_normal((n, p))
    B = np.zeros((p, m))
    B[0] = [3, -3, 0]
    B[1] = [0, 3, -3]
    labels = np.argmax(X @ B + 0.3 * rng.gumbel(size=(n, m)), axis=1)
    Y = np.eye(m)[labels]
    W = sm.Variable((p, m), name="W")
    Z = X @ W
    obj = sm.mean(sm.logsumexp(Z, axis=1) - sm.sum(Y * Z, axis=1)) + 1e-3 * sm.sum_squares(W)
    groups = np.repeat(np.arange(p), m)
    sel = sm.Problem(sm.minimize(obj), [sm.nnz(W, groups=groups) <= 2]).select(k=range(1, 5), by="cv", folds=3)
    assert sel.k >= 2 and {0, 1} <= set(np.flatnonzero(np.abs(sel.result.x).sum(axis=1)))


# ----------------------------------------------------------------------------- errors


def test_bad_input_is_refused_with_messages():
    X, y, _ = separated(n=30, p=6)
    prob = ls(X, y)
    with pytest.raises(SelectionError, match="by='aicc'"):
        prob.select(k=[1, 2], by="aicc")
    with pytest.raises(SelectionError, match="1se"):
        prob.select(k=[1, 2], by="bic", rule="1se")
    with pytest.raises(SelectionError, match="fold_ids has 5 labels but the model has 30 samples"):
        prob.select(k=[1, 2], fold_ids=[0, 1, 0, 1, 0])
    with pytest.raises(SelectionError, match="between 2 and n"):
        prob.select(k=[1, 2], folds=1)
    with pytest.raises(ModelError, match="only 6"):
        prob.select(k=[1, 7])
    w = sm.Variable(6, name="w")
    with pytest.raises(SelectionError, match="sum over samples"):
        sm.Problem(sm.minimize(sm.sum_squares(w - np.arange(6.0))), [sm.nnz(w) <= 2]).select(k=[1, 2])


def test_cli_select_prints_curve_choice_and_solution(tmp_path, capsys):
    X, y, beta = separated()
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    model = tmp_path / "m.sm"
    model.write_text(
        'data X : matrix from "X.npy"\ndata y : vector from "y.npy"\nvar w[cols(X)]\n'
        "minimize sum_squares(X @ w - y) / (2 * rows(X))\nsubject to\n  nnz(w) <= 5\n"
    )
    code = main(["select", str(model), "--k", "1:8", "--by", "bic", "--quiet", "--plot", str(tmp_path / "c.png")])
    out = capsys.readouterr().out
    assert code == 0
    assert "choosing k by bic (BIC = n log(RSS/n) + log(n) df" in out
    assert "chosen k = 4 coordinates" in out and "selected    4: w[" in out
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    np.savetxt(tmp_path / "folds.csv", np.arange(len(y)) % 4)
    code = main(
        [
            "select",
            str(model),
            "--k",
            "1:8",
            "--quiet",
            "--fold-ids",
            str(tmp_path / "folds.csv"),
            "--out",
            str(tmp_path / "s.json"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "4-fold cross-validation" in out and "chosen k = 4" in out
    code = main(["select", str(model), "--k", "1:8", "--quiet", "--plot", str(model)])
    assert code == 2 and "input of this model" in capsys.readouterr().err


def test_explicit_splits_equal_fold_ids():
    X, y, _ = separated(n=40, p=8)
    ids = np.arange(40) % 4
    splits = [(np.flatnonzero(ids != f), np.flatnonzero(ids == f)) for f in range(4)]
    a = ls(X, y).select(k=[1, 2, 3, 4], fold_ids=ids)
    b = ls(X, y).select(k=[1, 2, 3, 4], folds=splits)
    assert np.array_equal(a.per_fold, b.per_fold) and a.k == b.k
    with pytest.raises(SelectionError, match="out-of-range"):
        ls(X, y).select(k=[1, 2], folds=[(np.arange(30), np.arange(30, 45))])
