"""Comparisons as a statistician reports them (docs/comparisons.md): held-out loss, recovery of a known truth,
degrees of freedom, replications (drawn data, random splits), each method at its chosen k."""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.cli import main
from sparsemodel.datasets import sparse_linear_regression
from sparsemodel.errors import ModelError
from sparsemodel.workflows.experiment import External
from sparsemodel.workflows.metrics import HeldOut, Truth, class_labels, holdout_splits
from sparsemodel.workflows.study import Tidy

# ---------------------------------------------------------------------- a case computed by hand
#
# Orthogonal columns scaled to norm sqrt(n): X'X / n = I, so the least-squares fit on any support is
# the data's coefficients there, and the best k-subset is the k largest of them. The data's
# coefficients are the truth w* (support {0, 2, 5}: 3, 2, -1) plus 0.5 on column 4, a known false
# positive. By hand, with T = {0, 2, 5}:
#
#   k = 2: x = (3, 0, 2, 0, 0, 0, ...): S = {0, 2}; precision 1, recall 2/3, f1 4/5, exact 0,
#          exact_top 0, covers 0, fp 0, fn 1, error ||(0,...,-1)|| = 1
#   k = 3: x = w*: every rate 1, fp = fn = 0, error 0
#   k = 4: x = w* + 0.5 e_4: S = {0, 2, 4, 5}; precision 3/4, recall 1, f1 6/7, exact 0,
#          exact_top 1 (the 3 largest are T), covers 1, fp 1, fn 0, error 0.5
#
# Held-out data (another orthogonal design, y_t = X_t w*, no noise): the model's loss per sample is
# the mean squared residual (sum_squares(...) / (2 n) is c = 1/(2n) times sum_i r_i^2), so
# test_loss = mean((X_t (x - w*))^2) = ||x - w*||^2: 1 at k = 2, 0 at k = 3, 0.25 at k = 4.

P = 8
W_STAR = np.array([3.0, 0, 2.0, 0, 0, -1.0, 0, 0])
HAND = {
    2: dict(precision=1.0, recall=2 / 3, f1=0.8, exact=0.0, exact_top=0.0, covers=0.0, fp=0, fn=1, error=1.0),
    3: dict(precision=1.0, recall=1.0, f1=1.0, exact=1.0, exact_top=1.0, covers=1.0, fp=0, fn=0, error=0.0),
    4: dict(precision=0.75, recall=1.0, f1=6 / 7, exact=0.0, exact_top=1.0, covers=1.0, fp=1, fn=0, error=0.5),
}
HAND_TEST = {2: 1.0, 3: 0.0, 4: 0.25}


def orthogonal(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.linalg.qr(rng.standard_normal((n, P)))[0] * np.sqrt(n)


def model(X: np.ndarray, y: np.ndarray) -> sm.Problem:
    w = sm.Variable(P, name="w")
    return sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / (2 * len(y))), [sm.nnz(w) <= 3])


def draw(rng: np.random.Generator):
    X, Xt = orthogonal(rng, 30), orthogonal(rng, 20)
    coef = W_STAR + 0.5 * np.eye(P)[4]
    return {"X": X, "y": X @ coef}, {"w": W_STAR}, {"X": Xt, "y": Xt @ W_STAR}


def test_a_synthetic_study_returns_the_truth_metrics_computed_by_hand():
    study = sm.experiment(model, ["grahtp", "omp"], k=[2, 3, 4], data=draw, reps=3, progress=False)
    assert len(study.rows) == 3 * 2 * 3 and not study.failed()
    for solver in ("grahtp", "omp"):
        for k, want in HAND.items():
            for metric, value in want.items():
                assert study.mean(metric)[(k, solver)] == pytest.approx(value, abs=1e-9), (solver, k, metric)
                assert study.se(metric)[(k, solver)] == pytest.approx(0.0, abs=1e-9)
            assert study.mean("test_loss")[(k, solver)] == pytest.approx(HAND_TEST[k], abs=1e-9)
            assert study.mean("df")[(k, solver)] == k
    # every metric is a column of the tidy table, the CSV and the JSON
    for col in ("rep", "solver", "k", "objective", "df", "time_s", "test_loss", *HAND[2]):
        assert col in study.columns
    d = json.loads(json.dumps(study.to_dict()))
    assert {r["k"] for r in d["rows"]} == {2, 3, 4} and "f1_se" in d["summary"][0]


def test_truth_scores_by_hand_and_refuses_a_wrong_shape():
    rng = np.random.default_rng(0)
    X = orthogonal(rng, 20)
    prob = model(X, X @ W_STAR)
    lp = prob.lower()
    t = Truth(prob, lp, {"w": W_STAR})
    got = t.score(lp, np.array([3.0, 0.1, 2.0, 0, 0, -1.0, 0, 0]))  # T plus a small false positive
    assert got["precision"] == 0.75 and got["recall"] == 1.0 and got["f1"] == pytest.approx(6 / 7)
    assert got["exact"] == 0.0 and got["exact_top"] == 1.0 and got["covers"] == 1.0
    assert got["fp"] == 1 and got["fn"] == 0 and got["error"] == pytest.approx(0.1)
    empty = t.score(lp, np.zeros(P))  # nothing selected: no false positive, precision 1 by convention
    assert empty["precision"] == 1.0 and empty["recall"] == 0.0 and empty["f1"] == 0.0
    with pytest.raises(ModelError, match=r"truth w: the truth has shape \(7,\), but the variable w has shape \(8,\)"):
        Truth(prob, lp, {"w": W_STAR[:7]})
    with pytest.raises(ModelError, match="no variable named 'v'"):
        Truth(prob, lp, {"v": W_STAR})


def test_an_intercept_left_out_of_the_truth_and_groups_as_units():
    rng = np.random.default_rng(1)
    X = orthogonal(rng, 30)
    w = sm.Variable(P + 1, name="w")
    prob = sm.Problem(sm.minimize(sm.sum_squares(X @ w[1:] + w[0] - X @ W_STAR) / 60), [sm.nnz(w[1:]) <= 3])
    res = prob.solve("grahtp")
    lp = prob.lower()
    t = Truth(prob, lp, {"w": W_STAR})  # the constrained part only (w[1:]), the intercept not given
    got = t.score(lp, lp.layout.pack(res.values))
    assert got["exact"] == 1.0 and got["error"] == pytest.approx(0.0, abs=1e-8)
    # groups of two coordinates: a unit is true when any of its coordinates is
    g = np.repeat(np.arange(P // 2), 2)
    v = sm.Variable(P, name="w")
    gp = sm.Problem(sm.minimize(sm.sum_squares(X @ v - X @ W_STAR) / 60), [sm.nnz(v, groups=g) <= 2])
    glp = gp.lower()
    gt = Truth(gp, glp, {"w": W_STAR})  # true groups {0, 1, 2} (coordinates 0; 2; 5)
    got = gt.score(glp, np.array([3.0, 0, 2.0, 0, 0, 0, 0, 0]))  # groups {0, 1}
    assert got["precision"] == 1.0 and got["recall"] == pytest.approx(2 / 3) and got["fn"] == 1


def test_held_out_rows_score_the_models_own_loss_per_sample():
    rng = np.random.default_rng(2)
    n, p = 120, 6
    X = rng.standard_normal((n, p))
    y = np.where(X[:, 0] - X[:, 1] + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
    w = sm.Variable(p + 1, name="w")
    A, Y = sm.Data(X, name="X"), sm.Data(y, name="y")
    prob = sm.Problem(
        sm.minimize(sm.mean(sm.logistic(-Y * (A @ w[1:] + w[0]))) + 1e-3 * sm.sum_squares(w[1:])),
        [sm.nnz(w[1:]) <= 2],
    )
    res = prob.solve("grahtp")
    rows = np.arange(0, n, 3)
    z = -y[rows] * (X[rows] @ res.x[1:] + res.x[0])
    want = np.mean(np.log1p(np.exp(z)))  # the ridge is training only: not in the held-out loss
    assert HeldOut.of_rows(prob, rows).loss(res.values) == pytest.approx(want, rel=1e-12)
    assert HeldOut.of_data(prob, {"X": X[rows], "y": y[rows]}).loss(res.values) == pytest.approx(want, rel=1e-12)
    lab, node = class_labels(prob)
    assert node.name == "y" and np.array_equal(lab, y)


def test_stratified_splits_keep_each_class_and_refuse_a_lone_class():
    labels = np.array([1.0] * 90 + [-1.0] * 10)
    pairs = holdout_splits(100, 5, 0.3, 0, labels)
    assert len(pairs) == 5
    for tr, te in pairs:
        assert len(te) == 30 and np.sum(labels[te] == -1) == 3 and len(np.intersect1d(tr, te)) == 0
        assert len(tr) + len(te) == 100
    assert not np.array_equal(pairs[0][1], pairs[1][1])
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(pairs, holdout_splits(100, 5, 0.3, 0, labels)))
    with pytest.raises(ModelError, match="stratified split is impossible: the class -1 .* has 1 sample"):
        holdout_splits(100, 2, 0.3, 0, np.array([1.0] * 99 + [-1.0]))
    with pytest.raises(ModelError, match="between 0 and 1"):
        holdout_splits(100, 2, 1.5, 0)


def test_splits_of_a_logistic_model_are_stratified_and_reproducible():
    rng = np.random.default_rng(3)
    n, p = 150, 10
    X = rng.standard_normal((n, p))
    y = np.where(X[:, 0] + 0.5 * rng.standard_normal(n) > 1.0, 1.0, -1.0)  # about 1 in 6 positive
    w = sm.Variable(p + 1, name="w")
    prob = sm.Problem(
        sm.minimize(sm.mean(sm.logistic(-sm.Data(y, name="y") * (sm.Data(X, name="X") @ w[1:] + w[0])))),
        [sm.nnz(w[1:]) <= 3],
    )
    a = sm.experiment(prob, ["grahtp", "omp"], k=[1, 2], splits=4, seed=7, progress=False)
    b = sm.experiment(prob, ["grahtp", "omp"], k=[1, 2], splits=4, seed=7, progress=False)
    assert len(a.rows) == 4 * 2 * 2 and not a.failed()
    assert [r["test_loss"] for r in a.rows] == [r["test_loss"] for r in b.rows]
    assert all(0 < r["test_loss"] < 1 for r in a.rows)
    # the same split scored by hand: the first replication's training rows and held-out rows
    tr, te = holdout_splits(n, 4, 0.3, 7, y)[0]
    sub = sm.Problem(sm.minimize(sm.mean(sm.logistic(-y[tr] * (X[tr] @ w[1:] + w[0])))), [sm.nnz(w[1:]) <= 2]).solve(
        "grahtp"
    )
    z = -y[te] * (X[te] @ sub.x[1:] + sub.x[0])
    row = next(r for r in a.rows if r["rep"] == 0 and r["solver"] == "grahtp" and r["k"] == 2)
    assert row["test_loss"] == pytest.approx(np.mean(np.log1p(np.exp(z))), rel=1e-9)
    s = a.summary(["test_loss"])
    assert list(s["runs"]) == [4, 4, 4, 4]


def test_each_method_at_its_own_chosen_k_l0_and_lasso():
    """--select: the selection runs per method and replication; the LASSO chooses its penalty by
    the same criterion among those giving each k, and reports it."""

    def strong(rng):
        X = rng.standard_normal((120, 30))
        wt = np.zeros(30)
        wt[[1, 7, 20]] = [3.0, -2.5, 2.0]
        return {"X": X, "y": X @ wt + 0.3 * rng.standard_normal(120)}, {"w": wt}

    def lin(X, y):
        w = sm.Variable(30, name="w")
        return sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / 240), [sm.nnz(w) <= 3])

    study = sm.experiment(lin, ["grahtp", "lasso"], k=range(0, 8), data=strong, reps=2, select="ebic", progress=False)
    assert [r["solver"] for r in study.rows] == ["grahtp", "lasso"] * 2
    for r in study.rows:
        assert r["by"] == "ebic" and r["k"] == 3 and r["exact"] == 1.0 and r["status"] != "error"
    lasso = [r for r in study.rows if r["solver"] == "lasso"]
    assert all(r["penalty"] is not None and r["penalty"] > 0 for r in lasso)
    assert all(r["penalty"] is None for r in study.rows if r["solver"] == "grahtp")
    assert "k chosen" in study.table()


def test_path_and_select_carry_the_metrics():
    rng = np.random.default_rng(4)
    X, Xt = orthogonal(rng, 30), orthogonal(rng, 20)
    w = sm.Variable(P, name="w")
    y = sm.Data(X @ (W_STAR + 0.5 * np.eye(P)[4]), name="y")
    prob = sm.Problem(sm.minimize(sm.sum_squares(sm.Data(X, name="X") @ w - y) / 60), [sm.nnz(w) <= 3])
    test = {"X": Xt, "y": Xt @ W_STAR}
    path = prob.path(k=[2, 3, 4], solver="grahtp", start="cold", test=test, truth={"w": W_STAR})
    for r in path.rows():
        assert r["test_loss"] == pytest.approx(HAND_TEST[r["k"]], abs=1e-9) and r["f1"] == pytest.approx(
            HAND[r["k"]]["f1"]
        )
    sel = prob.select(k=[1, 2, 3, 4, 5], by="bic", test=test, truth={"w": W_STAR})
    assert sel.k == 4 and "test_loss" in sel.columns and all("error" in r for r in sel.curve)
    comp = prob.compare(["grahtp", "omp"], k=[2, 3, 4], test=test, truth={"w": W_STAR})
    assert comp.row("omp", 4)["fp"] == 1 and comp.row("omp", 2)["error"] == pytest.approx(1.0)
    assert "metrics" in comp.table()


def test_the_tidy_table_without_pandas(monkeypatch):
    study = sm.experiment(model, ["omp"], k=[2, 3], data=draw, reps=2, progress=False)
    with_pandas = study.summary(["f1", "test_loss"])
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now fails
    tidy = study.tidy
    assert isinstance(tidy, Tidy) and len(tidy) == 4 and tidy[0]["solver"] == "omp"
    s = study.summary(["f1", "test_loss"])
    assert isinstance(s, Tidy)
    assert [e["f1"] for e in s] == pytest.approx(list(with_pandas["f1"]))
    assert tidy.mean("f1") == study.mean("f1") and tidy.summary(["f1"])[0]["runs"] == 2


def test_best_k_per_replication_on_held_out_loss_and_outside_methods():
    fixed = External("truth itself", lambda data, k: W_STAR)
    own = External("chooses", lambda data, test: W_STAR + 0.5 * np.eye(P)[4], chooses_k=True)
    study = sm.experiment(model, ["omp", fixed], k=[2, 3, 4], data=draw, reps=2, progress=False)
    best = study.best("test_loss")
    assert {r["k"] for r in best.rows if r["solver"] == "omp"} == {3}
    assert all(r["time_total"] >= r["time_s"] for r in best.rows)
    out = [r for r in study.rows if r["solver"] == "truth itself"]
    assert len(out) == 6 and all(r["exact"] == 1.0 and r["status"] == "external" for r in out)
    calls = []
    counted = External("counted", lambda data, test: calls.append(1) or W_STAR, chooses_k=True)
    swept = sm.experiment(model, ["omp", counted], k=[2, 3, 4], data=draw, reps=2, progress=False)
    assert len(calls) == 2 and [r["k"] for r in swept.rows if r["solver"] == "counted"] == [3, 3]  # once per draw
    sel = sm.experiment(model, ["omp", own], k=range(0, 6), data=draw, reps=1, select="bic", progress=False)
    row = next(r for r in sel.rows if r["solver"] == "chooses")
    assert row["k"] == 4 and row["fp"] == 1 and row["by"] == "own"


def test_bad_experiments_are_refused_before_running():
    with pytest.raises(ModelError, match="reps="):
        sm.experiment(model, ["omp"], k=2, data=draw)
    with pytest.raises(ModelError, match="not a way to choose k"):
        sm.experiment(model, ["omp"], data=draw, reps=1, select="aicc")
    with pytest.raises(ModelError, match="needs k"):
        sm.experiment(model, ["omp", External("f", lambda d, k: 0)], data=draw, reps=1, select="bic")
    with pytest.raises(ModelError, match="unknown solver|not a registered"):
        sm.experiment(model, ["nope"], data=draw, reps=1)
    with pytest.raises(ModelError, match="returned int"):
        sm.experiment(model, ["omp"], k=2, data=lambda rng: 3, reps=1)


# ---------------------------------------------------------------------- the command line

MODEL = """\
data X : matrix from "X.npy"
data v : vector from "v.npy"
var w[cols(X)]
minimize sum_squares(X @ w - v) / (2 * rows(X))
subject to
    nnz(w) <= 5
"""


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    X, v, w = sparse_linear_regression(120, p=30, k=5, seed=3)
    Xt = np.random.default_rng(9).standard_normal((60, 30))
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "v.npy", v)
    np.save(tmp_path / "Xt.npy", Xt)
    np.save(tmp_path / "vt.npy", Xt @ w)
    np.save(tmp_path / "w_true.npy", w)
    np.save(tmp_path / "Xbad.npy", Xt[:, :29])
    np.save(tmp_path / "w_short.npy", w[:29])
    (tmp_path / "model.sm").write_text(MODEL)
    return tmp_path


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_compare_with_held_out_data_and_truth(capsys, model_dir, monkeypatch):
    monkeypatch.chdir(model_dir)
    code, out, err = run(
        capsys, "compare", "model.sm", "--solvers", "grahtp,omp", "--k", "4:6",
        "--test", "X=Xt.npy,v=vt.npy", "--truth", "w=w_true.npy",
        "--csv", "t.csv", "--plot", "test_loss,f1=t.png", "--out", "t.json",
    )  # fmt: skip
    assert code == 0, err
    assert "metrics" in out and "test_loss" in out and "f1" in out
    rows = list(csv.DictReader(open(model_dir / "t.csv")))
    assert {"df", "test_loss", "precision", "recall", "exact", "error"} <= set(rows[0])
    at5 = next(r for r in rows if r["solver"] == "grahtp" and r["k"] == "5")
    assert float(at5["exact"]) == 1.0 and float(at5["test_loss"]) < 0.05  # the noiseless held-out rows
    assert (model_dir / "t.png").stat().st_size > 0
    assert json.load(open(model_dir / "t.json"))["rows"][0]["test_loss"] is not None


def test_cli_replications_and_choice_of_k(capsys, model_dir, monkeypatch):
    monkeypatch.chdir(model_dir)
    code, out, err = run(
        capsys, "compare", "model.sm", "--solvers", "grahtp,lasso", "--k", "0:10", "--splits", "3",
        "--seed", "1", "--select", "ebic", "--truth", "w=w_true.npy", "--csv", "s.csv", "--plot", "s.png",
    )  # fmt: skip
    assert code == 0, err
    assert "k chosen" in out and "3 random splits" in out and "± " in out
    rows = list(csv.DictReader(open(model_dir / "s.csv")))
    assert len(rows) == 6 and {r["by"] for r in rows} == {"ebic"}
    assert all(r["k"] == "5" and r["exact"] == "1.0" for r in rows if r["solver"] == "grahtp")
    code, out, err = run(
        capsys, "compare", "model.sm", "--solvers", "grahtp,omp", "--k", "4:6", "--splits", "2", "--json",
    )  # fmt: skip
    assert code == 0, err
    d = json.loads(out)
    assert len(d["rows"]) == 12 and d["summary"][0]["test_loss_se"] is not None


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["--test", "X=Xbad.npy,v=vt.npy"], ["--test X=Xbad.npy", "29 columns", "has 30", "model.sm:1"]),
        (["--test", "Z=Xt.npy"], ["--test Z=Xt.npy", "no data named 'Z'", "X, v"]),
        (["--test", "Xt.npy"], ["is not of the form NAME=FILE"]),
        (["--truth", "w=w_short.npy"], ["--truth w=w_short.npy", "shape (29,)", "shape (30,)", "model.sm:3"]),
        (["--truth", "b=w_true.npy"], ["no variable named 'b'"]),
        (["--plot", "bogus=p.png"], ["'bogus' is not a metric", "objective"]),
        (["--plot", "f1=p.png"], ["'f1' is not a metric", "needs --truth"]),
        (["--splits", "2", "--test-size", "1.5"], ["between 0 and 1"]),
        (["--test-size", "0.2"], ["--test-size needs --splits"]),
        (["--splits", "2", "--test", "X=Xt.npy,v=vt.npy"], ["not both"]),
    ],
)
def test_cli_bad_metric_input_is_a_located_user_error(capsys, model_dir, monkeypatch, args, fragments):
    monkeypatch.chdir(model_dir)
    code, _, err = run(capsys, "compare", "model.sm", "--solvers", "omp", "--k", "5", *args)
    assert code == 2, err
    assert "Traceback" not in err
    for f in fragments:
        assert f in err, (f, err)


def test_cli_stratification_impossible(capsys, tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 5))
    y = np.ones(40)
    y[0] = -1.0  # a class of one sample
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    (tmp_path / "logit.sm").write_text(
        'data X : matrix from "X.npy"\ndata y : vector from "y.npy"\nvar w[cols(X)]\n'
        "minimize mean(logistic(-y * (X @ w)))\nsubject to\n    nnz(w) <= 2\n"
    )
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "compare", "logit.sm", "--solvers", "omp", "--k", "1", "--splits", "3")
    assert code == 2 and "Traceback" not in err
    assert "stratified split is impossible" in err and "data y" in err and "logit.sm:2" in err


def test_cli_path_and_select_metrics(capsys, model_dir, monkeypatch):
    monkeypatch.chdir(model_dir)
    code, out, err = run(
        capsys, "path", "model.sm", "--k", "3:7", "--solver", "grahtp", "--test", "X=Xt.npy,v=vt.npy",
        "--truth", "w=w_true.npy", "--csv", "p.csv", "--plot", "test_loss,recall=p.png",
    )  # fmt: skip
    assert code == 0, err
    rows = list(csv.DictReader(open(model_dir / "p.csv")))
    assert [float(r["recall"]) for r in rows] == [0.6, 0.8, 1.0, 1.0, 1.0]
    code, out, err = run(
        capsys, "select", "model.sm", "--k", "0:10", "--by", "bic", "--truth", "w=w_true.npy",
        "--plot", "value,f1=q.png", "--csv", "q.csv",
    )  # fmt: skip
    assert code == 0, err
    assert "f1" in out and (model_dir / "q.png").exists()


def test_model_file_held_out_data_recomputes_derived_data(tmp_path):
    rng = np.random.default_rng(5)
    X = rng.standard_normal((50, 4)) * [1, 10, 100, 1000]
    y = X @ [1, 0.1, 0, 0] + 0.1 * rng.standard_normal(50)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    np.save(tmp_path / "Xt.npy", X[:20])
    np.save(tmp_path / "yt.npy", y[:20])
    (tmp_path / "m.sm").write_text(
        'data X : matrix from "X.npy"\ndata y : vector from "y.npy"\nlet Z = standardize(X)\nvar w[cols(X) + 1]\n'
        "minimize sum_squares(Z @ w[1:] + w[0] - y) / (2 * rows(X))\nsubject to\n    nnz(w[1:]) <= 2\n"
    )
    prob = sm.load(str(tmp_path / "m.sm"))
    comp = prob.compare(["grahtp"], k=[2], test={"X": str(tmp_path / "Xt.npy"), "y": str(tmp_path / "yt.npy")})
    assert any("Z was recomputed" in n for n in comp.scorer.notes)
    res = comp.results[("grahtp", 2)]
    Zt = (X[:20] - X[:20].mean(0)) / X[:20].std(0)  # rows(X) is 20 in the held-out model: per sample
    want = np.mean((Zt @ res.x[1:] + res.x[0] - y[:20]) ** 2)
    assert comp.row("grahtp", 2)["test_loss"] == pytest.approx(want, rel=1e-10)
    assert math.isfinite(comp.row("grahtp", 2)["df"])


def test_bounds_relative_to_the_truth_where_and_medians():
    """k=lambda t: ... reads each replication's number of true units (a precision study's grid is
    the true edge count times factors); where() restricts the rows; median() for times."""
    study = sm.experiment(model, ["omp"], k=lambda t: [t - 1, t, t + 1], data=draw, reps=2, progress=False)
    assert sorted({r["k"] for r in study.rows}) == [2, 3, 4]  # |T| = 3 in every draw
    only = study.where(k=3)
    assert len(only.rows) == 2 and only.mean("exact") == {(3, "omp"): 1.0}
    med = study.median("time_s")
    assert set(med) == {(2, "omp"), (3, "omp"), (4, "omp")} and all(v > 0 for v in med.values())
    reported = External("reports", lambda data, test: (W_STAR, {"penalty": 0.5, "time_s": 1e-9}), chooses_k=True)
    sel = sm.experiment(model, [reported], data=draw, reps=1, select="bic", progress=False)
    row = sel.rows[0]
    assert row["penalty"] == 0.5 and row["time_s"] == 1e-9 and row["time_total"] >= 0 and row["k"] == 3
    with pytest.raises(ModelError, match="no truth"):
        sm.experiment(model, ["omp"], k=lambda t: [t], data=lambda rng: draw(rng)[0], reps=1, progress=False)


def test_a_model_file_or_a_builder_model_rebound_by_each_draw(tmp_path):
    """A model file is built again from its text for every draw (rows(X) follows the draw's n); a
    builder model has its named data replaced; both give the solution of the model written for
    that draw."""
    rng = np.random.default_rng(6)
    X0 = rng.standard_normal((40, P))
    np.save(tmp_path / "X.npy", X0)
    np.save(tmp_path / "y.npy", X0 @ W_STAR)
    (tmp_path / "m.sm").write_text(
        'data X : matrix from "X.npy"\ndata y : vector from "y.npy"\nvar w[cols(X)]\n'
        "minimize sum_squares(X @ w - y) / (2 * rows(X))\nsubject to\n    nnz(w) <= 3\n"
    )
    file_model = sm.load(str(tmp_path / "m.sm"))
    w = sm.Variable(P, name="w")
    builder = sm.Problem(
        sm.minimize(sm.mean(sm.square(sm.Data(X0, name="X") @ w - sm.Data(X0 @ W_STAR, name="y")))),
        [sm.nnz(w) <= 3],
    )

    def noisy(rng, n):
        X = rng.standard_normal((n, P))
        return {"X": X, "y": X @ W_STAR + 0.1 * rng.standard_normal(n)}, {"w": W_STAR}

    for prob in (file_model, builder):
        study = sm.experiment(prob, ["grahtp"], k=3, data=noisy, reps=2, over={"n": [30, 60]}, progress=False)
        assert [r["n"] for r in study.rows] == [30, 30, 60, 60]
        assert all(r["exact"] == 1.0 and r["error"] < 0.2 for r in study.rows)
        # the objective is the one of the model written for the draw (mean squared error / 2 or mean)
        for r in study.rows:
            assert 0 < r["objective"] < 0.05
    with pytest.raises(ModelError, match="no data named 'Z'"):
        sm.experiment(builder, ["grahtp"], k=3, data=lambda rng: {"Z": X0}, reps=1, progress=False)


def test_select_refuses_a_likelihood_that_is_not_a_sum_over_samples(capsys):
    """A precision matrix's Gaussian likelihood has no per-sample data term: --select is refused
    before anything runs, at the objective's line, pointing at the validation protocol instead."""
    model = Path(__file__).resolve().parents[2] / "examples" / "precision.sm"
    code, _, err = run(capsys, "compare", str(model), "--solvers", "grahtp,glasso", "--select", "bic", "--k", "10:20")
    assert code == 2 and "Traceback" not in err
    assert "select=bic: choosing k needs a loss that is a sum over samples" in err
    assert "precision.sm:8:" in err and "Study.best('test_loss')" in err
