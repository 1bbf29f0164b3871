"""Reports a statistician can paste: the data's names in every table, CSV and JSON, replicated or
not, the intercept named as such; a classifier's held-out accuracy, AUC and Brier score checked
against scikit-learn's on the same predictions; paired differences between methods over the same
splits, checked against a hand computation from the tidy table; a DataFrame given for a data
line read through the line's column pick, except and map, as its file is."""

from __future__ import annotations

import csv
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.cli import main
from sparsemodel.errors import DataError, DataWarning
from sparsemodel.workflows.experiment import External
from sparsemodel.workflows.metrics import HeldOut, holdout_splits

RNG = np.random.default_rng(25)
NAMES = ["age", "income", "dose", "weight", "height", "smoker", "bmi", "score"]


def expit(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def labelled(n: int = 240, seed: int = 25) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, len(NAMES)))
    z = 1.5 * X[:, 2] - 1.2 * X[:, 5] + 0.8 * X[:, 7] + 0.3
    return X, np.where(rng.random(n) < expit(z), 1.0, -1.0)


MODEL = (
    'data X : matrix from "d.csv" except "outcome"\n'
    'data y : vector from "d.csv:outcome" map {"yes": 1, "no": -1}\n'
    "var w[cols(X) + 1]\n"
    "minimize mean(logistic(-y * (X @ w[1:] + w[0]))) + 1e-3 * sum_squares(w[1:])\n"
    "subject to\n    nnz(w[1:]) <= 3\n"
    "compare with grahtp, omp at k in 2:3\n"
)


@pytest.fixture
def csv_model(tmp_path: Path) -> Path:
    """A CSV table with a header: eight named features and a text label column, the label last."""
    X, y = labelled()
    lines = [",".join(NAMES + ["outcome"])]
    lines += [",".join([repr(float(v)) for v in row] + ["yes" if lab > 0 else "no"]) for row, lab in zip(X, y)]
    (tmp_path / "d.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "m.sm").write_text(MODEL)
    return tmp_path


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def rows_of(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def assert_named(rows: list[dict[str, str]]) -> None:
    """Every row's support names are the header's names of its positions (w[j] is column j - 1)."""
    assert rows
    for r in rows:
        if r["support"] == "":
            continue
        pos = [int(p) for p in r["support"].split()]
        assert r["support_names"].split("; ") == [NAMES[p - 1] for p in pos], r


# ====================================================================== names


def test_replicated_csvs_name_the_support_as_plain_compare_does(capsys, csv_model, monkeypatch):
    """Random splits rebuild the model on the training rows; the names of the columns go with
    them (they were dropped, and the CSV read w[3]; w[6]; w[8])."""
    monkeypatch.chdir(csv_model)
    code, _, err = run(capsys, "compare", "m.sm", "--csv", "plain.csv", "--quiet")
    assert code == 0, err
    assert_named(rows_of(csv_model / "plain.csv"))
    code, _, err = run(capsys, "compare", "m.sm", "--splits", "3", "--csv", "s.csv", "--out", "s.json", "--quiet")
    assert code == 0, err
    rows = rows_of(csv_model / "s.csv")
    assert len(rows) == 3 * 2 * 2
    assert_named(rows)
    assert all("w[" not in r["support_names"] for r in rows)
    assert_named([{k: str(v) for k, v in r.items()} for r in json.load(open(csv_model / "s.json"))["rows"]])
    code, _, err = run(
        capsys, "compare", "m.sm", "--splits", "2", "--select", "bic", "--k", "1:4", "--csv", "sel.csv", "--quiet"
    )
    assert code == 0, err
    assert_named(rows_of(csv_model / "sel.csv"))


def test_outside_methods_and_drawn_data_are_named_too(csv_model):
    prob = sm.load(csv_model / "m.sm")

    def top3(d, k):  # an outside method: the k columns most correlated with the labels, by least squares
        X, y = d["X"], d["y"]
        cols = np.argsort(-np.abs(X.T @ y))[:k]
        w = np.zeros(X.shape[1] + 1)
        w[1 + cols] = np.linalg.lstsq(X[:, cols], y, rcond=None)[0]
        return w

    study = sm.experiment(prob, ["omp", External("top", top3)], k=[2], splits=2, progress=False)
    rows = [{k: str(v) for k, v in r.items()} for r in study.rows]
    assert {r["solver"] for r in rows} == {"omp", "top"}
    assert_named(rows)

    def draw(rng):  # bare arrays for a model whose file named its columns: the same columns, so the same names
        X, y = labelled(120, int(rng.integers(1 << 30)))
        return {"X": X, "y": y}

    drawn = sm.experiment(prob, ["omp"], k=[2], data=draw, reps=2, progress=False)
    assert_named([{k: str(v) for k, v in r.items()} for r in drawn.rows])


def test_the_intercept_is_named_in_the_json_names_as_solve_prints_it(capsys, csv_model, monkeypatch):
    monkeypatch.chdir(csv_model)
    code, out, err = run(capsys, "solve", "m.sm", "--json", "--quiet")
    assert code == 0, err
    got = json.loads(out)
    assert got["names"][0] == ["(intercept)", *NAMES]  # the position of w[0] read "0"
    assert got["coefficients"][0]["name"] == "(intercept)"
    # without names from the data, the intercept is still named and the others keep their positions
    X, y = labelled()
    w = sm.Variable(len(NAMES) + 1, name="w")
    res = sm.Problem(sm.minimize(sm.mean(sm.logistic(-y * (X @ w[1:] + w[0])))), [sm.nnz(w[1:]) <= 2]).solve()
    assert res.axis_names()[0] == ["(intercept)", *[str(i) for i in range(1, len(NAMES) + 1)]]
    assert res.labels()[:2] == ["(intercept)", "w[1]"]


# ====================================================================== DataFrames


def test_a_dataframe_goes_through_the_data_lines_except_and_map(csv_model):
    """data={"X": df} with the label column still in df: the line's except drops it (it was kept,
    and the label was then selected as a predictor); data={"y": df} picks the line's column and
    maps its text. The same answer as from the file."""
    pd = pytest.importorskip("pandas")
    df = pd.read_csv(csv_model / "d.csv")
    from_file = sm.load(csv_model / "m.sm").solve("grahtp")
    numeric = df.assign(outcome=(df["outcome"] == "yes").astype(int))  # a numeric label column: no error to catch it
    for data in ({"X": numeric}, {"X": df, "y": df}, {"y": df["outcome"]}, {"X": df[NAMES], "y": df[["outcome"]]}):
        with warnings.catch_warnings():  # df[NAMES] has no "outcome" for except to drop: a note, tested below
            warnings.simplefilter("ignore", DataWarning)
            p = sm.load(csv_model / "m.sm", data=data)
        assert p.data["X"].shape == (240, 8), list(data)
        res = p.solve("grahtp")
        assert res.objective == pytest.approx(from_file.objective, rel=1e-12)
        assert res.support_names == from_file.support_names and set(res.support_names) <= set(NAMES)
    # held-out rows given as DataFrames are read the same way
    comp = sm.load(csv_model / "m.sm").compare(["grahtp"], k=[3], test={"X": df.iloc[:60], "y": df.iloc[:60]})
    X, y = labelled()
    want = sm.load(csv_model / "m.sm").compare(["grahtp"], k=[3], test={"X": X[:60], "y": y[:60]})
    assert comp.rows[0]["test_loss"] == pytest.approx(want.rows[0]["test_loss"], rel=1e-12)


def test_a_dataframe_that_does_not_fit_the_line_is_a_located_error(csv_model):
    pd = pytest.importorskip("pandas")
    df = pd.read_csv(csv_model / "d.csv")
    with pytest.raises(DataError, match=r"cannot pick column 'outcome': the DataFrame given for y") as exc:
        sm.load(csv_model / "m.sm", data={"y": df[NAMES]})
    assert exc.value.span is not None and exc.value.span.line == 2
    with pytest.raises(DataError, match=r"column 'outcome' of the Series given for y is not numeric.*'maybe'"):
        sm.load(csv_model / "m.sm", data={"y": df["outcome"].where(df.index > 5, "maybe")})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = sm.load(csv_model / "m.sm", data={"X": df[NAMES]})  # nothing for except to drop: noted
    assert p.data["X"].shape == (240, 8)
    assert any('except "outcome" does not apply' in str(w.message) for w in caught)


# ====================================================================== classification metrics


def logistic_pm(X: np.ndarray, y: np.ndarray) -> tuple[sm.Problem, sm.Variable]:
    w = sm.Variable(X.shape[1] + 1, name="w")
    A, Y = sm.Data(X, name="X"), sm.Data(y, name="y")
    return sm.Problem(sm.minimize(sm.mean(sm.logistic(-Y * (A @ w[1:] + w[0])))), [sm.nnz(w[1:]) <= 3]), w


def logistic_01(X: np.ndarray, y01: np.ndarray) -> tuple[sm.Problem, sm.Variable]:
    w = sm.Variable(X.shape[1] + 1, name="w")
    A, Y = sm.Data(X, name="X"), sm.Data(y01, name="y")
    z = A @ w[1:] + w[0]
    return sm.Problem(sm.minimize((sm.sum(sm.logistic(z)) - Y @ z) / len(y01)), [sm.nnz(w[1:]) <= 3]), w


def sklearn_scores(y_true: np.ndarray, p: np.ndarray) -> dict[str, float]:
    metrics = pytest.importorskip("sklearn.metrics")
    binary = p.ndim == 1
    return {
        "accuracy": metrics.accuracy_score(y_true, (p > 0.5).astype(int) if binary else p.argmax(axis=1)),
        "auc": metrics.roc_auc_score(y_true, p) if binary else metrics.roc_auc_score(y_true, p, multi_class="ovr"),
        "brier": metrics.brier_score_loss(y_true, p),
        "test_loss": metrics.log_loss(y_true, p),
    }


@pytest.mark.parametrize("form", ["plus_minus", "zero_one"])
def test_binary_classifier_metrics_equal_scikit_learns_on_the_same_predictions(form):
    X, y = labelled(300)
    y01 = (y > 0).astype(float)
    prob, _ = logistic_pm(X, y) if form == "plus_minus" else logistic_01(X, y01)
    res = prob.solve("grahtp")
    rows = np.arange(0, 300, 3)
    w = res.x
    p = expit(X[rows] @ w[1:] + w[0])  # the model's probability of the label +1 (1)
    want = sklearn_scores(y01[rows].astype(int), p)
    for held in (
        HeldOut.of_rows(prob, rows),
        HeldOut.of_data(prob, {"X": X[rows], "y": (y if form == "plus_minus" else y01)[rows]}),
    ):
        assert held.columns == ["test_loss", "accuracy", "auc", "brier"]
        got = held.score(res.values)
        assert got["accuracy"] == want["accuracy"]
        assert got["auc"] == pytest.approx(want["auc"], rel=1e-12)
        assert got["brier"] == pytest.approx(want["brier"], rel=1e-10)
        assert got["test_loss"] == pytest.approx(want["test_loss"], rel=1e-10)
    # at another point (not a solution) too: the metrics read any coefficients
    v = np.random.default_rng(1).standard_normal(w.size)
    p = expit(X[rows] @ v[1:] + v[0])
    got = HeldOut.of_rows(prob, rows).score({"w": v})
    want = sklearn_scores(y01[rows].astype(int), p)
    assert got["accuracy"] == want["accuracy"] and got["auc"] == pytest.approx(want["auc"], rel=1e-12)
    assert got["brier"] == pytest.approx(want["brier"], rel=1e-10)


def test_multinomial_metrics_equal_scikit_learns_one_vs_rest_macro_auc_and_multiclass_brier():
    rng = np.random.default_rng(5)
    n, p, K = 240, 6, 3
    X = rng.standard_normal((n, p))
    B = np.zeros((p, K))
    B[0], B[1] = [2.0, -1.0, 0.0], [0.0, 1.5, -1.5]
    logits = X @ B
    P = np.exp(logits - logits.max(axis=1, keepdims=True))
    labels = np.array([rng.choice(K, p=row / row.sum()) for row in P])
    Y = np.eye(K)[labels]
    W = sm.Variable((p, K), name="W")
    b = sm.Variable(K, name="b")
    Z = sm.Data(X, name="X") @ W + b
    prob = sm.Problem(
        sm.minimize(sm.mean(sm.logsumexp(Z, axis=1) - sm.sum(sm.Data(Y, name="Y") * Z, axis=1))),
        [sm.nnz(W, groups="rows") <= 2],
    )
    res = prob.solve()
    rows = np.arange(1, n, 2)
    L = X[rows] @ res.values["W"] + res.values["b"]
    probs = np.exp(L - L.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    want = sklearn_scores(labels[rows], probs)
    got = HeldOut.of_rows(prob, rows).score(res.values)
    assert got["accuracy"] == want["accuracy"]
    assert got["auc"] == pytest.approx(want["auc"], rel=1e-12)
    assert got["brier"] == pytest.approx(want["brier"], rel=1e-10)
    assert got["test_loss"] == pytest.approx(want["test_loss"], rel=1e-10)


def test_losses_that_are_not_a_likelihood_of_labels_get_no_classification_metrics():
    X, y = labelled(120)
    w = sm.Variable(X.shape[1], name="w")
    A = sm.Data(X, name="X")
    rows = np.arange(40)
    ls = sm.Problem(sm.minimize(sm.sum_squares(A @ w - sm.Data(y, name="y")) / 240), [sm.nnz(w) <= 2])
    assert HeldOut.of_rows(ls, rows).columns == ["test_loss"]
    no_labels = sm.Problem(sm.minimize(sm.mean(sm.logistic(A @ w))), [sm.nnz(w) <= 2])
    assert HeldOut.of_rows(no_labels, rows).columns == ["test_loss"]
    # a two-valued vector outside the loss that is not the 0/1 likelihood's: read, checked, refused
    off = sm.Problem(
        sm.minimize(sm.mean(sm.logistic(A @ w) - 2.0 * sm.Data((y > 0) * 1.0, name="y") * (A @ w))),
        [sm.nnz(w) <= 2],
    )
    held = HeldOut.of_rows(off, rows)
    got = held.score({"w": np.linspace(-1, 1, X.shape[1])})
    assert got["test_loss"] is not None and got["accuracy"] is None and got["auc"] is None


def test_cli_replications_of_a_classifier_report_accuracy_auc_and_brier(capsys, csv_model, monkeypatch):
    monkeypatch.chdir(csv_model)
    code, out, err = run(
        capsys, "compare", "m.sm", "--splits", "3", "--csv", "c.csv", "--plot", "auc,brier=c.png", "--quiet"
    )
    assert code == 0, err
    head = out.splitlines()[1].split()
    assert head[-4:] == ["test_loss", "accuracy", "auc", "brier"]
    rows = rows_of(csv_model / "c.csv")
    _, y = labelled()
    held = [len(te) for _, te in holdout_splits(240, 3, 0.3, 0, y)]
    for r in rows:  # a share of the split's held-out rows
        right = float(r["accuracy"]) * held[int(r["rep"])]
        assert right == pytest.approx(round(right), abs=1e-9)
    assert all(0.5 < float(r["auc"]) <= 1 and 0 < float(r["brier"]) < 0.25 for r in rows)
    assert (csv_model / "c.png").stat().st_size > 0
    code, _, err = run(capsys, "compare", "m.sm", "--test", "X=d.csv,y=d.csv:outcome", "--csv", "t.csv", "--quiet")
    assert code == 0, err
    assert {"accuracy", "auc", "brier"} <= set(rows_of(csv_model / "t.csv")[0])


# ====================================================================== paired differences


def test_paired_differences_equal_a_hand_computation_from_the_tidy_table(csv_model):
    pd = pytest.importorskip("pandas")
    study = sm.experiment(sm.load(csv_model / "m.sm"), ["grahtp", "omp", "lasso"], k=[2, 3], splits=4, progress=False)
    tidy = study.tidy
    got = study.paired(["test_loss", "auc", "objective"])
    assert isinstance(got, pd.DataFrame) and set(got["baseline"]) == {"grahtp"}
    assert len(got) == 2 * 2  # two methods against the first, at two k
    for metric in ("test_loss", "auc", "objective"):
        wide = tidy.pivot_table(index=["k", "rep"], columns="solver", values=metric)
        for _, e in got.iterrows():
            d = (wide[e["solver"]] - wide["grahtp"]).xs(e["k"], level="k").to_numpy()
            assert e["pairs"] == len(d) == 4
            assert e[metric] == pytest.approx(d.mean(), rel=1e-12, abs=1e-15)
            assert e[f"{metric}_se"] == pytest.approx(d.std(ddof=1) / np.sqrt(len(d)), rel=1e-10, abs=1e-15)
    against_omp = study.paired(["test_loss"], baseline="omp")
    assert set(against_omp["solver"]) == {"grahtp", "lasso"}
    row = against_omp[(against_omp["solver"] == "grahtp") & (against_omp["k"] == 2)].iloc[0]
    base = got[(got["solver"] == "omp") & (got["k"] == 2)].iloc[0]
    assert row["test_loss"] == pytest.approx(-base["test_loss"], rel=1e-12)  # the same pairs, the other way
    with pytest.raises(sm.ModelError, match="'abess' of the paired differences is not among"):
        study.paired(baseline="abess")


def test_cli_prints_and_writes_the_paired_differences(capsys, csv_model, monkeypatch):
    monkeypatch.chdir(csv_model)
    code, out, err = run(
        capsys, "compare", "m.sm", "--splits", "3", "--paired", "omp", "--out", "p.json", "--csv", "p.csv", "--quiet"
    )
    assert code == 0, err
    assert "paired differences against omp" in out and "test_loss - omp" in out
    got = json.load(open(csv_model / "p.json"))
    assert got["baseline"] == "omp" and {e["solver"] for e in got["paired"]} == {"grahtp"}
    rows = rows_of(csv_model / "p.csv")
    for e in got["paired"]:
        d = [
            float(a["test_loss"]) - float(b["test_loss"])
            for a in rows
            for b in rows
            if a["solver"] == "grahtp"
            and b["solver"] == "omp"
            and a["rep"] == b["rep"]
            and a["k"] == b["k"]
            and int(a["k"]) == e["k"]
        ]
        assert e["pairs"] == len(d) == 3
        assert e["test_loss"] == pytest.approx(np.mean(d), rel=1e-9, abs=1e-15)
        assert e["test_loss_se"] == pytest.approx(np.std(d, ddof=1) / np.sqrt(3), rel=1e-9, abs=1e-15)
    paired = out[out.index("paired differences against omp") :].splitlines()[3:]
    for e in got["paired"]:  # the printed rows are the JSON's: mean ± se of each k
        line = next(ln.split() for ln in paired if ln.split()[:2] == [str(e["k"]), "grahtp"])
        assert line[2] == "3" and f"{e['test_loss']:.4g}" in line
    code, _, err = run(capsys, "compare", "m.sm", "--splits", "2", "--paired", "abess", "--quiet")
    assert code == 2 and "--paired abess: the baseline is not among the compared solvers" in err
    code, _, err = run(capsys, "compare", "m.sm", "--paired", "omp", "--quiet")
    assert code == 2 and "--paired compares the methods over replications" in err
