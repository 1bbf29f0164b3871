"""Choosing k: the criteria's formulas on hand-computed cases, one criterion for two spellings of one
loss, cross-validation that picks the true k, held-out losses against a by-hand fold, located errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.cli import main
from sparsemodel.errors import ModelError
from sparsemodel.workflows.criteria import SelectionError, criterion, log_binom
from sparsemodel.workflows.select import folds_of


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
    # EBIC as abess computes it (the default): (log n + 2 gamma log p) per degree of freedom
    assert criterion("ebic", 8.0, 4, 2, 10, 2, True) == pytest.approx(D + (math.log(4) + 2 * math.log(10)) * 2)
    assert criterion("ebic", 8.0, 4, 2, 10, 2, True, gamma=0.5) == pytest.approx(D + (math.log(4) + math.log(10)) * 2)
    # Chen & Chen's binomial form
    assert criterion("ebic_cc", 8.0, 4, 2, 10, 2, True) == pytest.approx(D + 2 * math.log(4) + 2 * math.log(45))
    assert criterion("ebic_cc", 8.0, 4, 2, 10, 2, True, gamma=0.5) == pytest.approx(D + 2 * math.log(4) + math.log(45))
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
    prob = sm.Problem(sm.minimize(obj), [sm.nnz(w[1:]) <= 2])
    sel = prob.select(k=range(1, 5), by="ebic_cc")
    default = prob.select(k=range(1, 5))
    assert default.by == "ebic" and [r["k"] for r in default.curve] == [r["k"] for r in sel.curve]
    for r, d in zip(sel.curve, default.curve):
        x = sel.path.at(r["k"]).x
        L = float(np.sum(np.logaddexp(0, -v * (X @ x[1:] + x[0]))))
        s = int(np.count_nonzero(x[1:]))
        assert r["df"] == s + 1 and r["loss"] == pytest.approx(L / n, rel=1e-10)
        want = 2 * L + math.log(n) * (s + 1) + 2 * math.log(math.comb(p, s))
        assert r["value"] == pytest.approx(want, rel=1e-10)
        assert d["value"] == pytest.approx(2 * L + (math.log(n) + 2 * math.log(p)) * (s + 1), rel=1e-10)


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
    assert sel.k == 4 and sel.rule == "1se_paired"
    assert set(np.flatnonzero(sel.result.x)) == set(np.flatnonzero(beta))
    assert sel.per_fold.shape == (5, len(sel.curve)) and sel.stopped  # stopped early, after k = 4 + 5
    assert prob.select(k=range(0, 11), by="cv", early_stop=False).per_fold.shape == (5, 11)
    # the criteria agree on this problem
    for by in ("bic", "ebic", "ebic_cc", "gic"):
        assert prob.select(k=range(0, 11), by=by).k == 4
    # and the one-standard-error rules never pick a larger k than the minimum
    assert prob.select(k=range(0, 11), by="cv", rule="1se").k <= 4
    assert prob.select(k=range(0, 11), by="cv", rule="min").k == 4


def test_the_paired_rule_by_hand():
    """rule='1se_paired' on hand-made fold losses: the smallest k whose mean exceeds the minimum's by
    at most std_f(L_f(k) - L_f(k_min)) / sqrt(K). Folds whose levels differ a lot (a Poisson fold
    with large counts) give Breiman's rule a standard error that swallows every k; the paired
    difference sees that k = 1 is worse in every fold and k = 2 is not."""
    from sparsemodel.workflows.select import one_se_paired

    level = np.array([[10.0], [20.0], [30.0], [40.0], [50.0]])  # each fold's own level, shared by every k
    per_fold = level + np.array(
        [
            [9.0, 1.00, 0.0, 0.05],
            [9.0, 1.20, 0.0, 0.05],
            [9.0, 0.80, 0.0, 0.05],
            [9.0, 1.10, 0.0, 0.05],
            [9.0, 0.90, 0.0, 0.05],
        ]
    )
    ks = [0, 1, 2, 3]
    mean = per_fold.mean(axis=0)
    best = int(np.argmin(mean))
    assert best == 2
    # k = 1: d = (1, 1.2, .8, 1.1, .9), mean 1 > its se 0.0707; k = 2 is the minimum itself
    d = per_fold[:, 1] - per_fold[:, 2]
    assert d.mean() > d.std(ddof=1) / math.sqrt(5)
    assert one_se_paired(per_fold, [0, 1, 2, 3], best, ks) == 2
    # Breiman's se of the minimum's mean (the levels: 7.07) lets k = 1 in, worse in every fold
    breiman_se = per_fold[:, best].std(ddof=1) / math.sqrt(5)
    assert mean[0] > mean[best] + breiman_se >= mean[1]
    # a k with a difference that is noise (+-) within its paired se is chosen when it is smaller
    noisy = per_fold.copy()
    noisy[:, 1] = per_fold[:, 2] + np.array([0.3, -0.3, 0.2, -0.1, 0.0])
    assert one_se_paired(noisy, [0, 1, 2, 3], 2, ks) == 1
    # a column left out (a failed point) is never chosen
    assert one_se_paired(noisy, [0, 2, 3], 2, ks) == 2


def test_the_paired_rule_reads_each_held_out_row():
    """Where the loss is a sum over samples, the paired rule's differences are per held-out row: the
    rows of each fold sum to its held-out loss, and the chosen k is the smallest whose mean
    per-row difference from the minimum is within std / sqrt(N) of it (N = every held-out row)."""
    from sparsemodel.workflows.select import splits_of

    X, y, _ = separated(n=90, p=20, s=3)
    sel = ls(X, y).select(k=range(0, 10), by="cv", folds=4, seed=1)
    S = sel.per_sample
    assert S is not None and S.shape == (90, len(sel.curve))
    start = 0
    for f, (_, te) in enumerate(splits_of(90, 4, 1, None)):
        assert np.allclose(S[start : start + len(te)].sum(axis=0), sel.per_fold[f], rtol=1e-12)
        start += len(te)
    best = int(np.argmin(sel.per_fold.mean(axis=0)))
    by_hand = next(
        j
        for j in range(best + 1)
        if (S[:, j] - S[:, best]).mean() <= (S[:, j] - S[:, best]).std(ddof=1) / math.sqrt(90)
    )
    assert sel.k == sel.ks[by_hand] and sel.rule == "1se_paired"


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
    # the documented cut, which a seed's folds keep across versions: the seeded permutation split
    # into nearly equal consecutive parts by np.array_split, part f being fold f
    for n, folds in [(23, 4), (100, 5), (7, 7), (10, 3)]:
        perm = np.random.default_rng(3).permutation(n)
        want = np.empty(n, dtype=np.int64)
        for f, part in enumerate(np.array_split(perm, folds)):
            want[part] = f
        assert np.array_equal(folds_of(n, folds, 3, None), want)


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


# ----------------------------------------------------------------------------- the default, the early stop, lockstep cv


def ar_design(n: int, p: int, s: int, seed: int, family: str = "linear"):
    """Columns AR(1)-correlated 0.5^|i-j|, s coefficients of size 1 to 2 with random signs (the
    family of benchmarks/choose_k.py); the model with a free intercept, as the estimators build it."""
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, p))
    X = np.empty((n, p))
    X[:, 0] = Z[:, 0]
    for j in range(1, p):
        X[:, j] = 0.5 * X[:, j - 1] + math.sqrt(0.75) * Z[:, j]
    support = np.sort(rng.choice(p, s, replace=False))
    beta = np.zeros(p)
    beta[support] = rng.choice([-1.0, 1.0], s) * rng.uniform(1.0, 2.0, s)
    w, b = sm.Variable(p, name="w"), sm.Variable((), name="b")
    z = X @ w + b
    if family == "linear":
        y = X @ beta + rng.standard_normal(n)
        obj = sm.sum_squares(z - y) / (2 * n)
    elif family == "logistic":
        v = np.where(rng.uniform(size=n) < 1 / (1 + np.exp(-X @ beta)), 1.0, -1.0)
        obj = sm.mean(sm.logistic(-v * z))
    else:
        y = rng.poisson(np.exp(X @ (0.3 * beta)))
        obj = sm.mean(sm.exp(z) - y * z)
    return sm.Problem(sm.minimize(obj), [sm.nnz(w) <= 1]), support


@pytest.mark.parametrize("seed", range(3))
def test_the_default_criterion_recovers_the_support_where_bic_overfits(seed):
    """n = 120, p = 300: BIC keeps noise up to the end of the default range (0..13 = n / (log(log n)
    log p)), the default (EBIC, log n + 2 log p per unit) finds exactly the 4 true coefficients."""
    prob, support = ar_design(120, 300, 4, seed)
    sel = prob.select()
    assert sel.by == "ebic" and sel.k == 4
    assert np.flatnonzero(sel.result.values["w"]).tolist() == support.tolist()
    bic = prob.select(by="bic", early_stop=False)
    assert bic.ks == list(range(0, 14)) and bic.k == 13  # the default range, and BIC at its end
    assert sel.stopped and sel.ks == list(range(0, len(sel.curve)))  # stopped early, after k = 4 + 5 or so
    assert "early stop after k=" in sel.table()


@pytest.mark.parametrize("family", ["linear", "logistic", "poisson"])
@pytest.mark.parametrize("by", ["ebic", "bic", "cv"])
def test_early_stop_chooses_what_the_full_path_chooses(family, by):
    """The stopped path is the full path's beginning (same points, same values) and chooses the same
    k; it stops before the end whenever the curve turns (always here for ebic and cv)."""
    prob, _ = ar_design(100, 60, 3, 7, family)
    ks = range(0, 16)
    short = prob.select(k=ks, by=by, folds=3 if by == "cv" else None)
    full = prob.select(k=ks, by=by, folds=3 if by == "cv" else None, early_stop=False)
    assert short.k == full.k and full.stopped is None and full.ks == list(ks)
    m = len(short.curve)
    for a, b in zip(short.curve, full.curve[:m]):
        assert a["value"] == b["value"] and a["objective"] == b["objective"]
    if by != "bic":
        assert short.stopped and short.skipped == list(range(m, 16)) and m < 16
    if by == "cv":
        assert np.array_equal(short.per_fold, full.per_fold[:, :m])


def test_the_early_stop_rule_on_hand_made_curves():
    from sparsemodel.workflows.select import EarlyStop

    def first_stop(values, patience, margin, se=None, cv=False):
        rule, curve = EarlyStop(patience, margin, cv), []
        for k, v in enumerate(values):
            curve.append({"k": k, "value": v, "se": None if se is None else se[k]})
            if rule.check(curve):
                return k
        return None

    # minimum 3 at k = 2; k = 3 (4.0) is within the margin 10, so the 5 points after it decide: stop at k = 8
    assert first_stop([10, 5, 3, 4, 20, 21, 22, 23, 24, 25], 5, 10.0) == 8
    # a second dip within the patience resets nothing that matters: the new minimum at k = 5 restarts the count
    assert first_stop([10, 5, 3, 20, 20, 1, 30, 30, 30, 30, 30, 30], 5, 10.0) == 10
    assert first_stop([10, 5, 3, 20, 21, 22, 23, 24], 5, 0.0) == 7
    assert first_stop([10, 5, 3, 4, 4, 4, 4, 4, 4, 4], 5, 2.0) is None  # flat within the margin: never
    assert first_stop([10, 5, 3, math.nan, 20, 21, 22, 23, 24], 5, 1.0) == 8  # a failed point is not "above"
    # cross-validation: the margin counts standard errors of the minimum's mean
    se = [1.0] * 10
    assert first_stop([9, 5, 3, 3.5, 3.5, 3.5, 3.5, 3.5, 9, 9], 5, 1.0, se, cv=True) is None
    assert first_stop([9, 5, 3, 3.5, 3.5, 3.5, 3.5, 3.5, 9, 9], 5, 0.0, se, cv=True) == 7


def test_lockstep_cross_validation_equals_each_folds_own_path():
    """The folds' paths run in lockstep over k (so the curve can stop early); each fold's held-out
    losses equal those of that fold's model built by hand on its training rows, solved alone as a
    warm path over the same k, and evaluated on its held-out rows."""
    from sparsemodel.workflows.select import splits_of

    X, y, _ = separated(n=90, p=20, s=3)
    n, p = X.shape
    sel = ls(X, y, ridge=1e-4).select(k=range(0, 12), by="cv", folds=4, seed=3)
    assert sel.stopped and sel.per_fold.shape == (4, len(sel.curve))
    for f, (tr, te) in enumerate(splits_of(n, 4, 3, None)):
        w = sm.Variable(p, name="w")
        own = sm.Problem(
            sm.minimize(sm.sum_squares(X[tr] @ w - y[tr]) / (2 * n) + 1e-4 * sm.sum_squares(w)), [sm.nnz(w) <= 3]
        )
        path = own.path(k=sel.ks, start="warm")
        for j, k in enumerate(sel.ks):
            x = path.at(k).x
            held = float(np.sum((X[te] @ x - y[te]) ** 2)) / (2 * n)
            assert sel.per_fold[f, j] == pytest.approx(held, rel=1e-9, abs=1e-14)


def test_select_refuses_folds_with_a_criterion_and_bad_early_stop_constants():
    X, y, _ = separated(n=30, p=6)
    with pytest.raises(SelectionError, match="does not use them"):
        ls(X, y).select(k=[1, 2], by="bic", folds=3)
    assert ls(X, y).select(k=[1, 2], folds=3).by == "cv"  # folds alone imply cross-validation
    with pytest.raises(SelectionError, match="patience=0"):
        ls(X, y).select(k=[1, 2], patience=0)
    with pytest.raises(SelectionError, match="margin=-1"):
        ls(X, y).select(k=[1, 2], margin=-1)


def test_cli_select_defaults_to_ebic_over_the_default_range_and_reports_the_early_stop(tmp_path, capsys):
    X, y, _ = separated()
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    model = tmp_path / "m.sm"
    model.write_text(
        'data X : matrix from "X.npy"\ndata y : vector from "y.npy"\nvar w[cols(X)]\n'
        "minimize sum_squares(X @ w - y) / (2 * rows(X))\nsubject to\n  nnz(w) <= 5\n"
    )
    code = main(["select", str(model), "--quiet", "--out", str(tmp_path / "s.json")])
    out = capsys.readouterr().out
    assert code == 0 and "choosing k by ebic (EBIC = n log(RSS/n) + (log(n) + 2 gamma log(p)) df" in out
    assert "chosen k = 4" in out and "early stop after k=10" in out and "not computed: k = 11..23" in out
    data = json.loads((tmp_path / "s.json").read_text())
    assert data["stopped"] and data["skipped"] == list(range(11, 24)) and data["k"] == 4
    assert data["early_stop"] == {"patience": 5, "margin": 10.0}
    code = main(["select", str(model), "--quiet", "--no-early-stop", "--k", "0:12"])
    out = capsys.readouterr().out
    assert code == 0 and "chosen k = 4" in out and "early stop" not in out
    code = main(["select", str(model), "--quiet", "--by", "bic", "--folds", "3"])
    assert code == 2 and "does not use them" in capsys.readouterr().err


@pytest.mark.parametrize("seed", [0, 1])
def test_multi_response_bic_counts_every_entry_and_recovers_the_rank(seed):
    """An n x m response has n m Gaussian observations: the BIC is N log(RSS/N) + log(N) df with
    N = n m and df = r (p + m - r), checked by hand, and it chooses the true rank on a reduced-rank
    regression. (Counting the n rows instead underweights the fit m times and chose rank 1 of 5 on
    examples/multitask_rank.sm.)"""
    rng = np.random.default_rng(seed)
    n, p, m, r = 300, 40, 20, 4
    X = rng.standard_normal((n, p))
    W = rng.standard_normal((p, r)) @ rng.standard_normal((r, m))
    Y = X @ W + rng.standard_normal((n, m))
    Wv = sm.Variable((p, m), name="W")
    prob = sm.Problem(
        sm.minimize(sm.sum_squares(sm.Data(X, name="X") @ Wv - sm.Data(Y, name="Y")) / (2 * n)), [sm.rank(Wv) <= r]
    )
    sel = prob.select(k=range(1, 9), by="bic", early_stop=False)
    assert sel.k == r
    N = n * m
    for row in sel.curve:
        Wk = sel.path.at(row["k"]).x.reshape(p, m)
        rss = float(np.sum((X @ Wk - Y) ** 2))
        k = row["k"]
        df = k * (p + m - k)
        assert row["value"] == pytest.approx(N * math.log(rss / N) + math.log(N) * df, rel=1e-9)


@pytest.mark.parametrize("family", ["linear", "logistic"])
def test_the_folds_warm_points_without_a_result_give_the_curve_of_full_solves(family, monkeypatch):
    """Cross-validation asks a fold's warm points of Solver.fold_point (auto's lean kernel, no
    Result; a fold's path in one kernel call, Solver.fold_points); the curve and the per-fold losses
    are bit for bit those of full warm solves."""
    pytest.importorskip("sparsemodel.numerics._lean", reason="the compiled kernels are not built")
    from sparsemodel.solvers import get_solver

    X, y, _ = separated(n=100, p=20, s=3, noise=1.5, seed=5)
    n, p = X.shape
    w = sm.Variable(p + 1, name="w")
    z = X @ w[1:] + w[0]
    if family == "linear":
        loss = sm.sum_squares(z - y) / (2 * n)
    else:
        v = np.where(y > np.median(y), 1.0, -1.0)
        loss = sm.mean(sm.logistic(-v * z)) + 1e-4 / 2 * sm.sum_squares(w[1:])
    prob = sm.Problem(sm.minimize(loss), [sm.nnz(w[1:]) <= 3])
    auto = get_solver("auto")
    from sparsemodel.solvers.lean import FoldKernel

    asked = []
    real = FoldKernel.points

    def counted(self, ks, init):
        xs = real(self, ks, init)
        asked.append(len(xs))
        return xs

    monkeypatch.setattr(FoldKernel, "points", counted)
    quick = prob.select(k=range(0, 9), by="cv", folds=5, seed=1, early_stop=False)
    assert asked == [9] * 5  # every fold's path in one call (k = 0 by the free fit, then the kernel's path)
    down = prob.select(k=[0, 6, 4, 5, 2], by="cv", folds=5, seed=1, early_stop=False)  # (not increasing)
    monkeypatch.setattr(auto, "fold_kernel", lambda self, lp, rows, factor: None)  # (the folds lowered)
    lowered = prob.select(k=range(0, 9), by="cv", folds=5, seed=1, early_stop=False)
    assert np.array_equal(quick.per_fold, lowered.per_fold)
    monkeypatch.setattr(auto, "fold_points", lambda self, lp, ks, init: [])
    full = prob.select(k=range(0, 9), by="cv", folds=5, seed=1, early_stop=False)
    assert np.array_equal(quick.per_fold, full.per_fold)
    assert [r["value"] for r in quick.curve] == [r["value"] for r in full.curve]
    assert quick.k == full.k
    down_full = prob.select(k=[0, 6, 4, 5, 2], by="cv", folds=5, seed=1, early_stop=False)
    assert np.array_equal(down.per_fold, down_full.per_fold)


def test_the_folds_compute_ahead_only_the_points_the_early_stop_surely_reaches():
    """A fold answers the bounds the path surely reaches in one call (EarlyStop.reach): with the
    early stop on, the points the folds' kernel computes are exactly the points the curve uses, and
    the curve is the one computed a point at a time."""
    pytest.importorskip("sparsemodel.numerics._lean", reason="the compiled kernels are not built")
    from sparsemodel.solvers import auto as auto_mod
    from sparsemodel.solvers import lean as lean_mod

    X, y, _ = separated(n=100, p=20, s=3, noise=1.0, seed=2)
    n, p = X.shape
    w = sm.Variable(p + 1, name="w")
    prob = sm.Problem(sm.minimize(sm.sum_squares(X @ w[1:] + w[0] - y) / (2 * n)), [sm.nnz(w[1:]) <= 3])
    rows = []
    real = lean_mod.FoldKernel.points

    def counted(self, ks, init):
        xs = real(self, ks, init)
        rows.append(len(xs) - (init is None))  # (the kernel's path after the free fit at k = 0)
        return xs

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lean_mod.FoldKernel, "points", counted)
        ahead = prob.select(by="cv", folds=5, seed=3)
    assert ahead.stopped  # (the early stop fired: the case where computing ahead could be in vain)
    assert sum(rows) == 5 * (len(ahead.curve) - 1)  # every fold's points after k = 0, none in vain
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(auto_mod, "PATH_BATCH_LIMIT", 0)  # a point per call
        single = prob.select(by="cv", folds=5, seed=3)
    assert np.array_equal(ahead.per_fold, single.per_fold)
    assert [r["value"] for r in ahead.curve] == [r["value"] for r in single.curve]


def test_the_early_stops_reach_never_passes_its_stop():
    """EarlyStop.reach(curve, ks, j) is never beyond the point where the rule actually stops, on
    random curves (ties, failed points, patience 1 to 4, margins), and reaches the stop point itself
    when the stop is certain."""
    from sparsemodel.workflows.select import EarlyStop

    rng = np.random.default_rng(0)
    for trial in range(400):
        rule = EarlyStop(int(rng.integers(1, 5)), float(rng.choice([0.0, 0.5])), True)
        ks = sorted(rng.choice(40, size=int(rng.integers(2, 25)), replace=False).tolist())
        vals = rng.choice([1.0, 2.0, 3.0, np.nan], size=len(ks), p=[0.3, 0.3, 0.3, 0.1]).tolist()
        curve, stop = [], len(ks) - 1
        for j in range(len(ks)):
            curve.append({"k": ks[j], "value": vals[j], "se": 1.0})
            if j + 1 < len(ks) and rule.check(curve):
                stop = j
                break
        for j in range(stop + 1):
            assert rule.reach(curve[:j], ks, j) <= stop, (trial, j)


@pytest.mark.parametrize("family", ["linear", "logistic", "weighted poisson"])
def test_the_held_out_reading_from_the_whole_terms_rows_gives_the_rebuilt_terms_curve(family, monkeypatch):
    """Where the data term on a subset of the rows is proved a sum of its samples' values
    (DataTerm.subset), a fold's held-out reading is the rows of the all-data term's; the per-fold and
    per-sample held-out losses, the curve and the choice equal those of the held-out term rebuilt on
    each fold's rows: bit for bit for a sum, to a few ulps for a mean (its coefficient rounded once
    more), and the paired rule's per-sample rows the same way."""
    from sparsemodel.objective import sampleview

    X, y, _ = separated(n=100, p=20, s=3, noise=1.5, seed=7)
    n, p = X.shape
    w = sm.Variable(p + 1, name="w")
    z = X @ w[1:] + w[0]
    if family == "linear":
        loss = sm.sum_squares(z - y) / (2 * n)
    elif family == "logistic":
        v = np.where(y > np.median(y), 1.0, -1.0)
        loss = sm.mean(sm.logistic(-v * z)) + 1e-4 / 2 * sm.sum_squares(w[1:])
    else:
        counts = np.random.default_rng(2).poisson(2.0, n).astype(float)
        sw = np.random.default_rng(3).uniform(0.5, 2.0, n)
        z = 0.2 * z
        loss = sm.sum(sw * (sm.exp(z) - counts * z)) / float(sw.sum())
    prob = sm.Problem(sm.minimize(loss), [sm.nnz(w[1:]) <= 3])
    fast = prob.select(k=range(0, 7), by="cv", folds=5, seed=2, early_stop=False)
    assert sampleview.sample_view(prob).term().subset == (1 if family == "logistic" else 0)
    assert fast.per_sample is not None and fast.per_sample.shape == (n, 7)
    monkeypatch.setattr(sampleview, "subset_scale", lambda *a: None)
    assert sampleview.sample_view(prob).term().subset is None
    rebuilt = prob.select(k=range(0, 7), by="cv", folds=5, seed=2, early_stop=False)
    if family == "logistic":
        assert np.allclose(fast.per_fold, rebuilt.per_fold, rtol=1e-13, atol=0)
        assert np.allclose(fast.per_sample, rebuilt.per_sample, rtol=1e-13, atol=1e-300)
    else:
        assert np.array_equal(fast.per_fold, rebuilt.per_fold)
        assert np.array_equal(fast.per_sample, rebuilt.per_sample)
    assert fast.k == rebuilt.k


def test_a_softmax_with_its_linear_part_summed_apart_chooses_k_by_cross_validation():
    """sum(logsumexp(Z, axis=1)) - sum(Y * Z) (the linear part summed on its own, as
    benchmarks/vs_abess.py writes the multinomial) is a linear term over Z's entries, a row of K of
    them per sample, whose rows cross-validation's fold problems take (their weights flat, as the
    linear part reads them: a ValueError at first), and the criteria equal those of the per-row
    spelling sum(logsumexp(Z, axis=1) - sum(Y * Z, axis=1))."""
    rng = np.random.default_rng(3)
    n, p, K = 120, 15, 3
    X = rng.standard_normal((n, p))
    B = np.zeros((p, K))
    B[:3] = rng.uniform(-2, 2, (3, K))
    P = np.exp(X @ B)
    P /= P.sum(1, keepdims=True)
    Y = np.eye(K)[[rng.choice(K, p=r) for r in P]]

    def prob(apart: bool) -> sm.Problem:
        W, b = sm.Variable((p, K), name="W"), sm.Variable(K, name="b")
        Z = X @ W + b
        if apart:
            loss = sm.sum(sm.logsumexp(Z, axis=1)) - sm.sum(Y * Z)
        else:
            loss = sm.sum(sm.logsumexp(Z, axis=1) - sm.sum(Y * Z, axis=1))
        return sm.Problem(
            sm.minimize(loss + 0.1 * sm.sum_squares(W)), [sm.nnz(W, groups=np.repeat(np.arange(p), K)) <= 3]
        )

    for by in ("cv", "ebic"):
        a, b_ = prob(True).select(by=by), prob(False).select(by=by)
        assert a.k == b_.k == 3
        va = [r["value"] for r in a.curve]
        vb = [r["value"] for r in b_.curve]
        assert np.allclose(va, vb, rtol=1e-9, atol=1e-9)
