"""Names from the data in results, row/column groups, the notebook display and the examples printing named supports."""

from __future__ import annotations

import base64
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.cli import main
from sparsemodel.solvers.base import get_solver
from sparsemodel.solvers.result import finish
from sparsemodel.util import Clock

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
RNG = np.random.default_rng(21)


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def logistic_data(n: int = 300, p: int = 8, seed: int = 0):
    """Two real features (dose, smoker) among eight; a draw of its own, so that a test reading it
    sees the same data whichever tests ran before (BIC over k = 1..3 picks k = 2 on 19 of the
    first 20 seeds, not on every one)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    z = 2.5 * X[:, 2] - 2.0 * X[:, 5] + 0.3
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-z)), "yes", "no")
    return X, y


@pytest.fixture
def csv_model(tmp_path: Path) -> Path:
    """A CSV with a header (feature names and a text label column), read as in the README."""
    X, y = logistic_data()
    names = ["age", "income", "dose", "weight", "height", "smoker", "bmi", "score"]
    lines = [",".join(names + ["outcome"])] + [",".join([f"{v:.6f}" for v in row] + [lab]) for row, lab in zip(X, y)]
    (tmp_path / "d.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "m.sm").write_text(
        'data X : matrix from "d.csv" except "outcome"\n'
        'data y : vector from "d.csv:outcome" map {"yes": 1, "no": -1}\n'
        "let Z = standardize(X)\nvar w[cols(X) + 1]\n"
        "minimize mean(logistic(-y * (Z @ w[1:] + w[0]))) + 1e-4 * sum_squares(w[1:])\n"
        "subject to\n    nnz(w[1:]) <= 2\n"
    )
    return tmp_path


def test_csv_header_names_the_support_and_the_coefficients_in_solves_output(capsys, csv_model):
    code, out, _ = run(capsys, "solve", str(csv_model / "m.sm"), "--quiet")
    assert code == 0
    assert re.search(r"^selected    2: dose, smoker$", out, re.M), out
    coef = out[out.index("coefficients") :].splitlines()
    assert coef[1].split()[0] == "(intercept)" and {coef[2].split()[0], coef[3].split()[0]} == {"dose", "smoker"}
    res = sm.load(csv_model / "m.sm").solve()
    # the names read the support through the intercept's shift: w[3] is column 2, "dose"
    assert res.support.tolist() == [3, 6] and res.support_names == ["dose", "smoker"]
    rows = res.coefficients()
    assert [r["name"] for r in rows] == ["(intercept)", "dose", "smoker"]
    assert rows[1]["value"] == pytest.approx(float(res.x[3])) and rows[1]["position"] == (3,)
    frame = res.to_frame()
    assert list(frame["name"]) == ["(intercept)", "dose", "smoker"]
    np.testing.assert_allclose(frame["value"], [res.x[0], res.x[3], res.x[6]])
    code, out, _ = run(capsys, "solve", str(csv_model / "m.sm"), "--quiet", "--csv", str(csv_model / "coef.csv"))
    table = (csv_model / "coef.csv").read_text().splitlines()
    assert table[0] == "variable,name,position,value" and table[1].startswith("w,(intercept),0,")
    assert len(table) == 1 + 9 and table[4].startswith("w,dose,3,")  # every coordinate, by name


def test_npz_names_and_dataframes_name_the_support(tmp_path):
    X, y = logistic_data()
    v = np.where(y == "yes", 1.0, -1.0)
    cols = np.array([f"g{j}" for j in range(X.shape[1])])
    np.savez(tmp_path / "d.npz", X=X, X_names=cols, v=v)
    text = (
        'data X : matrix from "d.npz:X"\ndata v : vector from "d.npz:v"\nvar w[cols(X)]\nvar b\n'
        "minimize mean(logistic(-v * (X @ w + b)))\nsubject to\n    nnz(w) <= 2\n"
    )
    (tmp_path / "m.sm").write_text(text)
    res = sm.load(tmp_path / "m.sm").solve()
    assert res.support_names == ["g2", "g5"]
    assert res.coefficients()[-1]["name"] == "(intercept)"  # b, added by broadcasting
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(X, columns=[f"col {c}" for c in "abcdefgh"])
    by_frame = sm.parse(text, data={"X": df, "v": v}, base_dir=tmp_path)
    assert by_frame.solve().support_names == ["col c", "col f"]
    w = sm.Variable(8, name="w")
    built = sm.Problem(sm.minimize(sm.sum_squares(sm.Data(df) @ w - X[:, 2])), [sm.nnz(w) <= 1])
    assert built.solve().support_names == ["col c"]


def test_names_are_read_when_asked_and_travel_as_a_plain_dict(monkeypatch):
    """A solve in a loop reads no names until a report asks (then once per problem, the same
    names as before); a pickled Result carries the names, not the problem behind them."""
    import pickle

    import sparsemodel.model.names as names_mod

    pd = pytest.importorskip("pandas")
    X, y = logistic_data()
    df = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    w = sm.Variable(8, name="w")
    prob = sm.Problem(sm.minimize(sm.sum_squares(sm.Data(df) @ w - X[:, 3] - 2 * X[:, 6])), [sm.nnz(w) <= 2])
    calls = []
    real = names_mod.coordinate_names
    monkeypatch.setattr(names_mod, "coordinate_names", lambda *a: calls.append(1) or real(*a))
    lp = prob.lower()
    auto = get_solver("auto")()
    results = [auto.solve(lp) for _ in range(5)]
    assert calls == []
    assert results[0].support_names == ["f3", "f6"]
    assert results[-1].support_names == ["f3", "f6"] and len(calls) == 1
    back = pickle.loads(pickle.dumps(results[1]))
    assert type(back.names) is dict and back.support_names == ["f3", "f6"]
    assert len(pickle.dumps(results[1])) < X.nbytes  # the data did not travel with it


def test_a_covariance_dataframe_names_the_support_of_quad_form():
    """quad_form(w, Data(S_df)): a DataFrame names its columns only, and for the (symmetric) S of a
    quadratic form they name w's coordinates as Data(X_df) @ w does."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(3)
    R = rng.standard_normal((200, 6)) * np.array([1.0, 0.2, 0.3, 1.0, 1.0, 1.0])
    names = [f"asset {c}" for c in "abcdef"]
    S_df = pd.DataFrame(np.cov(R.T), index=names, columns=names)
    for S in (sm.Data(S_df), S_df):
        w = sm.Variable(6, name="w")
        res = sm.Problem(sm.minimize(sm.quad_form(w, S)), [sm.nnz(w) <= 2, sm.sum(w) == 1, w >= 0]).solve()
        assert res.support_names == [names[j] for j in res.support] == ["asset b", "asset c"]


def test_matrix_supports_are_row_col_positions_and_names():
    X = RNG.standard_normal((200, 5))
    B = np.zeros((5, 3))
    B[1, 0], B[3, 2] = 2.0, -1.5
    Y = X @ B + 0.01 * RNG.standard_normal((200, 3))
    W = sm.Variable((5, 3), name="W")
    rows, cols = (None, [f"x{j}" for j in range(5)]), (None, ["t0", "t1", "t2"])
    prob = sm.Problem(
        sm.minimize(sm.sum_squares(sm.Data(X, names=rows) @ W - sm.Data(Y, names=cols))), [sm.nnz(W) <= 2]
    )
    res = prob.solve()
    assert res.support.tolist() == [3, 11]  # flat: 1 * 3 + 0 and 3 * 3 + 2
    assert res.support_positions == [(1, 0), (3, 2)]
    assert res.support_names == ["(x1, t0)", "(x3, t2)"]
    assert res.to_dict()["support_positions"] == [[1, 0], [3, 2]]
    unnamed = sm.Problem(sm.minimize(sm.sum_squares(X @ W - Y)), [sm.nnz(W) <= 2]).solve()
    assert unnamed.support_names == ["W[1, 0]", "W[3, 2]"]


def test_to_frame_without_pandas_says_so(monkeypatch):
    X = RNG.standard_normal((30, 4))
    w = sm.Variable(4, name="w")
    res = sm.Problem(sm.minimize(sm.sum_squares(X @ w - X[:, 1])), [sm.nnz(w) <= 1]).solve()
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"needs pandas.*coefficients\(\)"):
        res.to_frame()
    assert res.coefficients()[0]["name"] == "w[1]"


def test_rank_results_print_rank_and_singular_values_not_a_support(capsys, tmp_path):
    X = RNG.standard_normal((60, 8))
    Y = X @ (RNG.standard_normal((8, 2)) @ RNG.standard_normal((2, 5))) + 0.1 * RNG.standard_normal((60, 5))
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "Y.npy", Y)
    (tmp_path / "r.sm").write_text(
        'data X : matrix from "X.npy"\ndata Y : matrix from "Y.npy"\nvar W[cols(X), cols(Y)]\n'
        "minimize sum_squares(X @ W - Y) / 2\nsubject to\n    rank(W) <= 2\n"
    )
    code, out, _ = run(capsys, "solve", str(tmp_path / "r.sm"), "--quiet")
    assert code == 0
    res = sm.load(tmp_path / "r.sm").solve()
    sv = np.linalg.svd(res.x, compute_uv=False)
    line = next(x for x in out.splitlines() if x.startswith("rank"))
    assert line.startswith("rank        2 of at most 2; singular values ")
    shown = [float(v) for v in line.split("singular values ")[1].split(", ")]
    np.testing.assert_allclose(shown, sv[:2], rtol=1e-5)
    assert "nonzeros" not in out and "selected" not in out and "nan" not in out
    assert "certificate HT-stable" in out and "sigma_r(W)" in out  # the rank form, from real numbers


def test_a_certificate_from_nan_is_not_reported():
    X = RNG.standard_normal((30, 4))
    w = sm.Variable(4, name="w")
    lp = sm.Problem(sm.minimize(sm.sum_squares(X @ w - X[:, 1])), [sm.nnz(w) <= 1]).lower()
    x = np.array([0.0, 1.0, 0.0, 0.0])
    ok = finish(lp, get_solver("iht")(), x, "converged", 1, Clock(), gamma=0.1)
    assert ok.certificate is not None and ok.certificate["verdict"] == "HT-stable"
    bad = finish(lp, get_solver("iht")(), x, "converged", 1, Clock(), gamma=float("nan"))
    assert bad.certificate is None and "certificate" not in bad.summary()


# ---------------------------------------------------------------------- row and column groups


def test_groups_rows_is_the_hand_written_row_groups(tmp_path):
    """Two spellings of one model: groups = rows and the groups file a user had to write."""
    n, p, m = 300, 6, 3
    X = RNG.standard_normal((n, p))
    B = np.zeros((p, m))
    B[1], B[4] = [2, -2, 0], [0, 2, -2]
    y = np.argmax(X @ B + RNG.gumbel(size=(n, m)), axis=1)
    g = np.repeat(np.arange(p), m)
    body = (
        "data X : matrix\ndata y : vector\ndata g : vector\nlet Y = onehot(y)\nvar W[cols(X), cols(Y)]\n"
        "minimize mean(logsumexp(X @ W, axis = 1)) - sum(Y * (X @ W)) / rows(X)\nsubject to\n"
    )
    data = {"X": X, "y": y, "g": g}
    short = sm.parse(body + "    nnz(W, groups = rows) <= 2\n", data=data).solve("grahtp")
    long = sm.parse(body + "    nnz(W, groups = g) <= 2\n", data=data).solve("grahtp")
    assert (
        short.objective == pytest.approx(long.objective, rel=1e-12) and short.support.tolist() == long.support.tolist()
    )
    assert short.unit == "groups" and short.groups == ["W[1, :]", "W[4, :]"] and long.groups == ["group 1", "group 4"]
    W = sm.Variable((p, m), name="W")
    Yh = np.eye(m)[y]
    obj = sm.mean(sm.logsumexp(X @ W, axis=1)) - sm.sum(Yh * (X @ W)) / n
    built = sm.Problem(sm.minimize(obj), [sm.nnz(W, groups="rows") <= 2]).solve("grahtp")
    assert built.objective == pytest.approx(long.objective, rel=1e-9)
    cols = sm.Problem(sm.minimize(obj), [sm.nnz(W, groups="cols") <= 1]).solve("grahtp")
    assert len({j for _, j in cols.support_positions}) == 1  # one whole column
    with pytest.raises(sm.ModelError, match=r"nnz\(w, groups = rows\) needs a matrix"):
        sm.parse("var w[3]\nminimize sum_squares(w)\nsubject to\n    nnz(w, groups = rows) <= 1\n")
    with pytest.raises(sm.ModelError, match=r"rows is a function; call it like rows\(...\)"):
        sm.parse("data X : matrix\nparam n = rows\n", data={"X": X})


def test_row_groups_print_the_kept_rows_by_name():
    pd = pytest.importorskip("pandas")
    n, p, m = 300, 5, 3
    X = RNG.standard_normal((n, p))
    B = np.zeros((p, m))
    B[0], B[3] = [2, -2, 0], [0, 2, -2]
    y = np.array(["setosa", "versicolor", "virginica"])[np.argmax(X @ B + RNG.gumbel(size=(n, m)), axis=1)]
    codes = {"setosa": 0, "versicolor": 1, "virginica": 2}
    df = pd.DataFrame(X, columns=["sepal", "petal", "stem", "leaf", "root"])
    res = sm.parse(
        "data X : matrix\ndata y : vector\nlet Y = onehot(y)\nvar W[cols(X), cols(Y)]\n"
        "minimize mean(logsumexp(X @ W, axis = 1)) - sum(Y * (X @ W)) / rows(X)\n"
        "subject to\n    nnz(W, groups = rows) <= 2\n",
        data={"X": df, "y": np.vectorize(codes.get)(y)},
    ).solve()
    assert res.groups == ["sepal", "leaf"]
    assert "groups      2 kept: sepal, leaf" in res.summary()
    assert res.support_names[:3] == ["(sepal, 0)", "(sepal, 1)", "(sepal, 2)"]


def test_standardize_and_cov_conventions():
    """standardize divides by the ddof = 0 standard deviation, cov by n (docs/language.md)."""
    X = RNG.standard_normal((7, 3)) * [1.0, 5.0, 0.1] + 2.0
    Z = sm.standardize(X).value
    np.testing.assert_allclose(Z, (X - X.mean(axis=0)) / X.std(axis=0, ddof=0))
    np.testing.assert_allclose(sm.cov(X).value, np.cov(X, rowvar=False, ddof=0))
    assert not np.allclose(sm.cov(X).value, np.cov(X, rowvar=False))  # numpy's default divides by n - 1


# ---------------------------------------------------------------------- notebooks


def test_results_comparisons_paths_and_selections_display_in_notebooks(csv_model):
    prob = sm.load(csv_model / "m.sm")
    res = prob.solve()
    html = res._repr_html_()
    assert "<table>" in html and "dose" in html and "(intercept)" in html and "k = 2 coordinates" in html
    comp = prob.compare(["grahtp", "omp"], k=[1, 2], progress=False)
    path = prob.path(k=[1, 2, 3], solver="grahtp")
    sel = prob.select(k=[1, 2, 3], by="bic", solver="grahtp")
    for report, must in ((comp, "grahtp"), (path, "dose"), (sel, "chosen k = 2 coordinates")):
        page = report._repr_html_()
        assert "<table>" in page and must in page, type(report).__name__
        png = re.search(r'src="data:image/png;base64,([^"]+)"', page)
        assert png is not None and base64.b64decode(png.group(1))[:4] == b"\x89PNG"  # the plot, inline


# ---------------------------------------------------------------------- the examples


@pytest.mark.parametrize(
    "model, names",
    [
        ("caravan_logistic.sm", {" PPERSAUT,", " MOPLLAAG,"}),
        ("sparse_linreg.sm", {" x11,", " x14,"}),
        ("precision.sm", {"(v0, v2),", "(v1, v18),"}),
    ],
)
def test_the_example_models_print_named_supports(capsys, model, names):
    """The README's first example (caravan_logistic.sm) and the example models print their
    supports by name (the CSV header; the archives' X_names / Z_names)."""
    code, out, _ = run(capsys, "solve", str(EXAMPLES / model), "--quiet")
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith(("selected", "edges")))
    assert all(name in line for name in names), line


def test_data_rebound_to_a_named_data_object_keeps_its_names():
    X = RNG.standard_normal((40, 3))
    prob = sm.parse(
        "data X : matrix\nvar w[cols(X)]\nminimize sum_squares(X @ w - X[:, 1])\nsubject to\n  nnz(w) <= 1\n",
        data={"X": sm.Data(X, names=(None, ["u", "v", "z"]))},
    )
    assert prob.solve().support_names == ["v"]
