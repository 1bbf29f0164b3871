"""The model language: the language page's opening model, builder/DSL agreement, and every kind of bad input."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.errors import (
    ConstraintError,
    DataError,
    ModelError,
    NameResolutionError,
    ParseError,
    ShapeError,
)
from sparsemodel.model.userfunc import func

LANGUAGE_DOC = Path(__file__).resolve().parents[2] / "docs" / "language.md"

# DESIGN.md's example, verbatim (as indented in the document)
EXAMPLE = """\
    # sparse logistic regression, seed paper 000 section 5.2
    data X : matrix from "X.csv"
    data v : vector from "v.csv"          # labels in {-1, +1}
    param lam = 1e-5
    var w[cols(X)]

    minimize mean(logistic(-2 * v * (X @ w))) + lam / 2 * sum_squares(w)
    subject to
        nnz(w) <= 20

    solve with grahtp(debias = true)
"""


def logistic_data(n: int = 80, p: int = 30, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    v = np.where(X[:, :3].sum(axis=1) + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return X, v


def write_example_data(folder: Path, n: int = 80, p: int = 30) -> tuple[np.ndarray, np.ndarray]:
    X, v = logistic_data(n, p)
    np.savetxt(folder / "X.csv", X, delimiter=",")
    np.savetxt(folder / "v.csv", v, delimiter=",")
    return X, v


def err(text: str, exc: type[ModelError] = ModelError, **kw) -> ModelError:
    with pytest.raises(exc) as e:
        sm.parse(textwrap.dedent(text), name="m.sm", **kw)
    return e.value


def at(e: ModelError) -> tuple[int, int]:
    assert e.span is not None, e.render()
    return e.span.line, e.span.column


# ----------------------------------------------------------------------------- DESIGN.md


def test_design_example_parses_verbatim(tmp_path):
    X, v = write_example_data(tmp_path)
    (tmp_path / "logreg.sm").write_text(EXAMPLE)
    prob = sm.load(tmp_path / "logreg.sm")
    assert prob.source == str(tmp_path / "logreg.sm")
    assert set(prob.symbols) == {"X", "v", "lam", "w"}
    assert prob.variables[0].name == "w" and prob.variables[0].shape == (30,)
    assert prob.solve_with[:2] == ("grahtp", {"debias": True})
    assert prob.nnz_constraint().k == 20
    np.testing.assert_array_equal(prob.symbols["X"].value, np.loadtxt(tmp_path / "X.csv", delimiter=","))
    assert prob.check().ok
    dedented = sm.parse(textwrap.dedent(EXAMPLE), base_dir=tmp_path)
    assert str(dedented) == str(prob)


def test_the_language_page_opens_with_this_model():
    """docs/language.md opens with the model tested here (its own closing directive aside), so the
    page a new user reads first is a model these tests parse and solve."""
    doc = LANGUAGE_DOC.read_text().split("```")[1].strip().splitlines()
    model = textwrap.dedent(EXAMPLE).strip().splitlines()
    directive = next(i for i, line in enumerate(model) if line.startswith("solve with"))
    assert doc[:directive] == model[:directive]


def test_builder_and_dsl_agree_on_value_and_gradient(tmp_path):
    X, v = write_example_data(tmp_path)
    (tmp_path / "m.sm").write_text(EXAMPLE)
    dsl = sm.load(tmp_path / "m.sm")
    w = sm.Variable(X.shape[1], name="w")
    lam = sm.Parameter(1e-5, name="lam")
    built = sm.Problem(
        sm.minimize(sm.mean(sm.logistic(-2 * v * (X @ w))) + lam / 2 * sm.sum_squares(w)), [sm.nnz(w) <= 20]
    )
    a, b = dsl.lower(), built.lower()
    rng = np.random.default_rng(1)
    for _ in range(3):
        x = rng.standard_normal(a.n)
        fa, ga = a.value_and_grad(x)
        fb, gb = b.value_and_grad(x)
        np.testing.assert_allclose(fa, fb, rtol=1e-13)
        np.testing.assert_allclose(ga, gb, rtol=1e-12, atol=1e-15)


def test_builder_and_dsl_agree_for_precision_matrix_and_func(tmp_path):
    rng = np.random.default_rng(2)
    Z = rng.standard_normal((50, 5))
    y = np.sign(rng.standard_normal(50))
    np.save(tmp_path / "Z.npy", Z)
    np.save(tmp_path / "y.npy", y)
    text = """
    data Z : matrix from "Z.npy"
    data y : labels from "y.npy"
    param alpha = 0.05
    let S = cov(Z)
    var O[cols(Z), cols(Z)] symmetric
    var u[cols(Z) + 1]
    func phi(z) = log(1 + exp(-z))
    minimize -logdet(O) + trace(S @ O) + mean(phi(y * (Z @ u[1:] + u[0]))) + alpha * sum_squares(u)
    """
    dsl = sm.parse(textwrap.dedent(text), base_dir=tmp_path)
    O = sm.Variable((5, 5), name="O", symmetric=True)
    u = sm.Variable(6, name="u")
    phi = func("phi", "log(1 + exp(-z))")
    obj = -sm.logdet(O) + sm.trace(sm.cov(Z) @ O) + sm.mean(phi(y * (Z @ u[1:] + u[0]))) + 0.05 * sm.sum_squares(u)
    built = sm.Problem(sm.minimize(obj))
    a, b = dsl.lower(), built.lower()
    A = rng.standard_normal((5, 5))
    x = np.concatenate([(A @ A.T + 5 * np.eye(5)).ravel(), rng.standard_normal(6)])
    fa, ga = a.value_and_grad(x)
    fb, gb = b.value_and_grad(x)
    np.testing.assert_allclose(fa, fb, rtol=1e-12)
    np.testing.assert_allclose(ga, gb, rtol=1e-10, atol=1e-14)


# ----------------------------------------------------------------------------- statements


def test_statements_constraints_and_expressions(tmp_path):
    Z = np.random.default_rng(0).standard_normal((40, 6))
    g = np.repeat(np.arange(3), 2)
    np.save(tmp_path / "Z.npy", Z)
    np.save(tmp_path / "g.npy", g)
    text = """
    # every statement kind
    data Z : matrix from "Z.npy"
    data g : vector from "g.npy"
    param p = cols(Z)
    param k = 2
    param alpha = 0.1
    let S = cov(Z)
    let n = rows(Z)
    let r = Z @ Z.T - Z @ Z'   # two transposes
    var O[p, p] symmetric
    var W[p, 3]
    var w[p]
    func quartic(t) = t^4 + alpha * t**2
    minimize -logdet(O) + trace(S @ O) + sum_squares(Z @ W) / n \\
        + sum(logsumexp(Z @ W, axis = 1)) + sum(huber(Z @ w - Z[:, 0],
                                                      M = 1.5)) + mean(quartic(w[::2]))
    subject to nnz(offdiag(O)) <= 2 * k
        0.01 <= eig(O) <= 1e2
        rank(W) <= 2
    """
    prob = sm.parse(textwrap.dedent(text), base_dir=tmp_path)
    assert set(prob.symbols) == {"Z", "g", "p", "k", "alpha", "S", "n", "r", "O", "W", "w", "quartic"}
    assert isinstance(prob.symbols["k"], sm.Parameter) and isinstance(prob.symbols["S"], sm.Data)
    np.testing.assert_allclose(prob.symbols["r"].value, 0.0, atol=1e-12)
    kinds = [c.kind for c in prob.constraints]
    assert kinds == ["nnz_pairs", "eig_box", "rank"]  # offdiag of the symmetric O: pairs
    assert prob.constraints[0].k == 4 and prob.constraints[1].bounds() == (0.01, 100.0)
    assert prob.symbols["O"].symmetric and prob.symbols["W"].shape == (6, 3)
    assert prob.objective.expr.is_convex()


def test_one_sided_eig_reversed_nnz_groups_and_slices():
    text = """
    data X : matrix
    data g : vector
    var O[3, 3] symmetric
    var w[4]
    minimize -logdet(O) + sum_squares(X @ w)
    subject to
        eig(O) >= 0.5
        2 >= eig(O)
        1 >= nnz(w, groups = g)
    """
    prob = sm.parse(textwrap.dedent(text), data={"X": np.ones((5, 4)), "g": np.array([0, 0, 1, 1])})
    eig_box, groups = prob.constraints
    assert eig_box.bounds() == (0.5, 2.0)
    assert groups.kind == "nnz_groups" and groups.n_units == 2
    free = sm.parse("var w[5]\nminimize sum_squares(w)\nsubject to\n nnz(w[1:]) <= 2\n").constraints[0]
    np.testing.assert_array_equal(free.coords, [1, 2, 3, 4])


def test_solve_and_compare_lines():
    prob = sm.parse(
        "var w[60]\nminimize sum_squares(w - 1)\nsubject to\n nnz(w) <= 5\n"
        'solve with ompr(max_iter = 50, tol = 1e-6, restricted = newton, note = "x", debias = false, shift = -2)\n'
        "compare with grahtp, ompr, lasso at k in 5:50:5\n"
    )
    name, opts, span = prob.solve_with
    assert name == "ompr" and span.line == 5
    assert opts == {"max_iter": 50, "tol": 1e-6, "restricted": "newton", "note": "x", "debias": False, "shift": -2}
    assert isinstance(opts["max_iter"], int)
    cw = prob.compare_with
    assert cw["solvers"] == ["grahtp", "ompr", "lasso"]
    assert cw["k"] == [5, 10, 15, 20, 25, 30, 35, 40, 45, 50] and cw["k_text"] == "5:50:5"
    assert cw["span"].line == 6
    no_range = sm.parse("var w[3]\nminimize sum_squares(w)\ncompare with a, b\n").compare_with
    assert no_range["k"] is None and no_range["k_text"] is None


def test_params_override_and_param_expressions():
    text = "param lam = 0.5\nparam half = lam / 2\nvar w[3]\nminimize half * sum_squares(w)\n"
    prob = sm.parse(text, params={"lam": 4.0})
    assert float(prob.params["lam"].value) == 4.0 and float(prob.params["half"].value) == 2.0
    e = err(text, NameResolutionError, params={"lamb": 1.0})
    assert "lamb" in e.message and "did you mean 'lam'" in e.hint


def test_rebinding_data_rederives_shapes(tmp_path, monkeypatch):
    X, v = write_example_data(tmp_path)
    (tmp_path / "m.sm").write_text(EXAMPLE)
    X2, v2 = logistic_data(40, 25, seed=3)
    prob = sm.load(tmp_path / "m.sm", data={"X": X2, "v": v2})
    assert prob.variables[0].shape == (25,) and prob.symbols["X"].shape == (40, 25)
    np.savetxt(tmp_path / "X3.csv", X2[:, :22], delimiter=",")
    monkeypatch.chdir(tmp_path)
    prob = sm.load("m.sm", data={"X": "X3.csv", "v": v2})
    assert prob.variables[0].shape == (22,)
    assert prob.symbols["X"].path == str((tmp_path / "X3.csv").resolve())
    with pytest.raises(DataError) as e:
        sm.load("m.sm", data={"Y": X2})
    assert "'Y'" in e.value.message and "X, v" in e.value.hint
    with pytest.raises(ShapeError, match=r"\(80,\) and \(40,\)"):
        sm.load("m.sm", data={"X": X2})


# ----------------------------------------------------------------------------- syntax errors


@pytest.mark.parametrize(
    "text, line, column, expected",
    [
        ('data X matrix from "X.csv"\n', 1, 8, "':'"),
        ("var w[3]\nminimize sum_squares(w @@ w)\n", 2, 25, "an expression"),
        ("var w[3]\nminimize sum_squares(w)\nsubject to\n  nnz(w) <=\n", 4, 12, "an expression"),
        ("param lam 1e-5\n", 1, 11, "'='"),
        ("var w[3]\nminimize sum(w)\nsolve with grahtp(debias true)\n", 3, 26, "'='"),
        ("var w[3]\nminimize sum(w) )\n", 2, 17, "the end of the line"),
        ("var w[3]\n\n  # comment\nminimize sum_squares(w)\nsubject to\n  nnz(w) < 2\n", 6, 10, "<= or >="),
        ("var w[3]\nminimize sum(w) +\n", 2, 18, "an expression"),
    ],
)
def test_syntax_error_positions(text, line, column, expected):
    e = err(text, ParseError)
    assert at(e) == (line, column), e.render()
    assert expected in e.hint
    rendered = e.render()
    assert rendered.startswith(f"m.sm:{line}:{column}: syntax error:")
    caret_line = rendered.splitlines()[2]
    assert caret_line.index("^") == rendered.splitlines()[1].index("|") + 2 + column - 1


def test_unclosed_bracket_points_at_the_bracket():
    e = err("var w[3]\nminimize sum_squares(w - 1\nsubject to\n  nnz(w) <= 2\n", ParseError)
    assert at(e) == (2, 21) and "'(' is never closed" in e.message and "')'" in e.hint
    e = err("var w[3\nminimize sum(w)\n", ParseError)
    assert at(e) == (1, 6) and "']'" in e.hint
    e = err("var w[3]\nminimize sum(w", ParseError)
    assert at(e) == (2, 13)


def test_brackets_continue_statements_over_lines():
    prob = sm.parse("var w[3]\nminimize sum_squares(\n    w - 1  # residual\n) + sum(w)\n")
    assert str(prob.objective.expr) == "sum_squares(w - 1) + sum(w)"


def test_keyword_and_kind_mistakes():
    e = err('data X : matrx from "X.csv"\n', ParseError)
    assert at(e) == (1, 10) and "did you mean 'matrix'" in e.hint
    e = err("var w[3]\nminimize sum(w)\nsolve with grahtp(name = 'x')\n", ParseError)
    assert "double quotes" in e.hint
    e = err("var w[3]\nminimize sum(w)\nnnz(w) <= 2\n", ParseError)
    assert at(e) == (3, 1) and "subject to" in e.hint


# ----------------------------------------------------------------------------- names


def test_unknown_names_suggest_the_closest():
    e = err("param lam = 1\nvar w[3]\nminimize sum_squares(w) + lamb * sum(w)\n", NameResolutionError)
    assert at(e) == (3, 27) and e.span.text == "lamb"
    assert "'lamb' is not defined" in e.message and "did you mean 'lam'" in e.hint
    e = err("var w[3]\nminimize sqaure(w)\n", NameResolutionError)
    assert "unknown function 'sqaure'" in e.message and "did you mean 'square'" in e.hint
    assert "sum_squares" in e.hint and "logistic" in e.hint
    e = err("var w[cols(X)]\ndata X : matrix\n", NameResolutionError, data={"X": np.ones((2, 2))})
    assert "before it is declared (on line 2)" in e.message
    e = err("func f(z) = z * q\n", NameResolutionError)
    assert at(e) == (1, 17) and "neither its argument nor a param" in e.message


def test_redefinitions_and_misused_names():
    e = err("param a = 1\nvar a[2]\n")
    assert at(e) == (2, 5) and "already defined on line 1" in e.message
    e = err("var sum[2]\n")
    assert "built-in function" in e.message
    e = err("var w[2]\nminimize w(1)\n")
    assert "w is a variable, not a function" in e.message
    e = err("var w[2]\nminimize sum_squares(w, 3)\n")
    assert "too many positional arguments" in e.message and "usage: sum_squares(x)" in e.hint
    e = err("var w[2]\nminimize sum_squares(w) + sum(nnz(w))\n", ConstraintError)
    assert "nnz(w) cannot be used inside an expression" in e.message
    with pytest.raises(ConstraintError) as ex:  # a linear constraint without coefficients
        sm.parse("var w[2]\nminimize sum_squares(w)\nsubject to\n  w <= w\n", name="m.sm").lower()
    assert at(ex.value) == (4, 3) and "constrains nothing" in ex.value.message
    e = err("var w[2]\nminimize sum_squares(w)\nsubject to\n  1 <= 2\n", ConstraintError)
    assert "not a structural constraint" in e.message and "nnz(EXPR) <= k" in e.hint
    e = err("var w[2]\nminimize sum_squares(w)\nsubject to\n  sum_squares(w) <= w[0]\n", ConstraintError)
    assert at(e) == (4, 3) and "is not affine" in e.message


def test_missing_objective_and_duplicate_lines():
    e = err("var w[2]\n")
    assert "no minimize statement" in e.message
    e = err("var w[2]\nminimize sum(w)\nminimize sum_squares(w)\n")
    assert at(e) == (3, 1) and "first is on line 2" in e.message


# ----------------------------------------------------------------------------- shapes and bounds


def test_shape_mismatch_names_both_shapes():
    text = "data X : matrix\nvar w[400]\nminimize sum_squares(X @ w)\n"
    e = err(text, ShapeError, data={"X": np.zeros((200, 500))})
    assert "(200,500) @ (400,)" in e.message
    assert at(e) == (3, 22) and e.span.text == "X @ w"


def test_bad_dimensions_and_indices():
    e = err("var w[0]\n", ShapeError)
    assert "positive integers" in e.message and at(e) == (1, 7)
    e = err("var w[2.5]\n", ShapeError)
    assert "2.5" in e.message
    e = err("var w[3]\nminimize sum(w[5])\n", ShapeError)
    assert "out of range" in e.message


@pytest.mark.parametrize(
    "bound, pattern",
    [("-1", "must be nonnegative"), ("31", "has only 30 coordinates"), ("2.5", "is not an integer")],
)
def test_sparsity_bound_out_of_range(bound, pattern):
    e = err(f"var w[30]\nminimize sum_squares(w)\nsubject to\n    nnz(w) <= {bound}\n", ConstraintError)
    assert re.search(pattern, e.message) and at(e) == (4, 5)


def test_bound_from_a_param_is_checked_too():
    e = err("param k = 40\nvar w[30]\nminimize sum_squares(w)\nsubject to nnz(w) <= k\n", ConstraintError)
    assert "has only 30 coordinates" in e.message and at(e) == (4, 12)


def test_convexity_error_points_at_the_culprit():
    prob = sm.parse("var w[3]\nminimize 2 * sum(log(w + 1))\n", name="c.sm")
    report = prob.check()
    assert not report.ok
    ce = report.errors[0]
    assert ce.span.line == 2 and ce.span.text == "log(w + 1)"


# ----------------------------------------------------------------------------- data statements


def test_missing_data_file_is_reported_at_the_path(tmp_path):
    e = err('data X : matrix from "X.csv"\n', DataError, base_dir=tmp_path)
    assert at(e) == (1, 22) and e.span.text == '"X.csv"'
    assert "does not exist" in e.message and str(tmp_path) in e.message
    e = err("data X : matrix\n", DataError)
    assert "no file" in e.message and 'data={"X": ...}' in e.hint


def test_nan_data_reports_file_and_count(tmp_path):
    X = np.ones((5, 3))
    X[1, 2] = X[3, 0] = np.nan
    np.save(tmp_path / "X.npy", X)
    e = err('data X : matrix from "X.npy"\n', DataError, base_dir=tmp_path)
    assert '"X.npy"' in e.message and "2 NaN/missing values" in e.message and "[1, 2]" in e.message
    assert at(e) == (1, 22)


def test_label_kind_and_map_clause(tmp_path):
    np.save(tmp_path / "y.npy", np.array([0.0, 1.0, 1.0, 0.0]))
    e = err('data y : labels from "y.npy"\n', DataError, base_dir=tmp_path)
    assert "{0, 1}" in e.message and "map {0: -1, 1: 1}" in e.hint
    prob = sm.parse(
        'data y : labels from "y.npy" map {0: -1, 1: 1}\nvar w[4]\nminimize sum_squares(w - y)\n', base_dir=tmp_path
    )
    np.testing.assert_array_equal(prob.symbols["y"].value, [-1, 1, 1, -1])


# ----------------------------------------------------------------------------- labels that do not fit the loss


LOGREG = """
data X : matrix
data v : vector
var w[cols(X)]
minimize mean(logistic(-2 * v * (X @ w)))
subject to
    nnz(w) <= 3
"""


def test_zero_one_labels_in_logistic_are_refused():
    X, v = logistic_data()
    prob = sm.parse(LOGREG, data={"X": X, "v": (v > 0).astype(float)}, name="lr.sm")
    report = prob.check()
    assert not report.ok
    e = report.errors[0]
    assert isinstance(e, DataError) and "data v" in e.message and "{0, 1}" in e.message
    assert "map {0: -1, 1: 1}" in e.hint and e.span.line == 5
    with pytest.raises(DataError, match="expects labels in"):
        prob.solve("grahtp")


def test_plus_minus_one_labels_and_sample_weights_pass():
    X, v = logistic_data()
    assert sm.parse(LOGREG, data={"X": X, "v": v}).check().ok
    weights = np.random.default_rng(0).uniform(0.5, 2.0, size=len(v))
    assert sm.parse(LOGREG, data={"X": X, "v": weights}).check().ok
    assert sm.parse(LOGREG, data={"X": X, "v": 2 * v}).check().ok  # labels already scaled: {-2, 2}
    assert not sm.parse(LOGREG, data={"X": X, "v": v + 2}).check().ok  # {1, 3}


def test_label_check_applies_to_the_python_builder():
    X, v = logistic_data()
    y01 = sm.Data((v > 0).astype(float), name="y")
    w = sm.Variable(X.shape[1], name="w")
    prob = sm.Problem(sm.minimize(sm.mean(sm.logistic(-y01 * (X @ w)))), [sm.nnz(w) <= 3])
    with pytest.raises(DataError, match=r"data y has the values \{0, 1\}"):
        prob.solve("grahtp")
    ok = sm.Problem(sm.minimize(sm.mean(sm.logistic(-2 * v * (X @ w)))), [sm.nnz(w) <= 3])
    assert ok.solve("grahtp").status in ("converged", "max_iter")


def test_errors_render_as_one_paragraph_without_traceback():
    e = err("var w[3]\nminimize sum_squares(w) + lamb\n")
    text = e.render()
    assert "Traceback" not in text and text.count("\n") <= 3
    assert text.splitlines()[0].startswith("m.sm:2:27: unknown name:")


@pytest.mark.parametrize(
    "text",
    [
        "var w[3]\nminimize sum(w[::0])\n",
        "var w[3]\nminimize sum(w)\nsubject to nnz(w) <= 1/0\n",
        "func f(z) = 1/0\n",
        "var w[3]\nminimize sum(w[w])\n",
        "var w[3]\nminimize sum(w, axis = 1.5)\n",
        "var w[3]\nminimize sum(w)\nsubject to 1 <= nnz(w) <= 2\n",
        "var W[3, 3]\nminimize sum(W)\nsubject to 3 <= eig(W) <= 2\n",
        "var w[3]\nminimize sum(w)\nsubject to rank(w) <= 1\n",
        "var w[3]\nminimize w ** 0.5\n",
        "var w[3] symmetric\n",
        "func f(z) = z @ z\n",
        "var z[2]\nfunc f(z) = z\n",
        "var w[3]\nminimize sum(w)\ncompare with a at k in 5:1\n",
        "var w[3]\nminimize sum(w)\nsolve with a(x = 1, x = 2)\n",
    ],
)
def test_odd_input_gives_a_model_error_with_a_place(text):
    e = err(text)
    assert e.span is not None and e.span.source.name == "m.sm"
    assert "Traceback" not in e.render()


def test_compare_range_beyond_the_variable_is_refused():
    e = err(
        "var w[30]\nminimize sum_squares(w)\nsubject to nnz(w) <= 3\ncompare with a at k in 5:50:5\n", ConstraintError
    )
    assert at(e) == (4, 16) and "k = 50" in e.message and "only 30 coordinates" in e.message
