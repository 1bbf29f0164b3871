"""Odd but plausible models reach an answer or a located model error, never an internal error.

Each case here reached the user as an exception that was not a ModelError (the command line's
"internal error (a bug in sparsemodel ...)", or a bare exception in Python) before it was fixed:
a data product broadcast to a larger shape (NotCanonical from the Jacobian's columns), an option
of ``solve with auto(...)`` that ``check`` did not look at (and ``1e400`` for an integer option:
OverflowError), a func with a kink (abs: DiracDelta in its second derivative), an objective that
reads no variable (IndexError), and the Python builder's misuses (a slice step of 0, an axis
given as text, ``nnz(w) <= nan``, ``k=inf``, ``nnz(w) < 3``, a param given text, complex data,
a solver given as a number, a custom loss whose function raises)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import sparsemodel as sm
from sparsemodel.cli import main
from sparsemodel.errors import ConstraintError, ConvexityError, DataError, ModelError, ShapeError, SolverError
from sparsemodel.objective.affine import linearize
from sparsemodel.objective.evaluator import Layout
from sparsemodel.objective.structure import jacobian_columns

RNG = np.random.default_rng(7)
N, P = 30, 6
X = RNG.standard_normal((N, P))
Y = X[:, :2] @ np.array([1.5, -2.0]) + 0.1 * RNG.standard_normal(N)


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------- data products broadcast


def test_the_jacobian_of_a_broadcast_data_product_is_its_columns_repeated():
    """Z - X @ w (X @ w a row repeated down Z) and X @ W1 - Y (a one-column product repeated across
    Y): the canonical map's Jacobian columns equal the expression tree's (exact arithmetic on the
    same numbers, so to rounding)."""
    w, W1 = sm.Variable(P, name="w"), sm.Variable((P, 1), name="W1")
    Z, Y3 = RNG.standard_normal((5, N)), RNG.standard_normal((N, 3))
    Xs = sp.csr_matrix(np.where(X > 0.3, X, 0.0))  # a sparse operator: the same rows repeated
    cases = ((sm.Data(Z) - sm.Data(X) @ w, w), (sm.Data(Z) * (sm.Data(Xs) @ w), w), (sm.Data(X) @ W1 - sm.Data(Y3), W1))
    for e, var in cases:
        layout = Layout([var])
        cols = np.array([0, 2, 5])
        got = linearize(e, layout).columns(cols)
        want = jacobian_columns(e, layout, cols)
        dense = lambda M: M.toarray() if hasattr(M, "toarray") else np.asarray(M)  # noqa: E731
        np.testing.assert_allclose(dense(got), dense(want), rtol=1e-12, atol=1e-12)


def test_a_row_broadcast_residual_reaches_the_enumerated_optimum(tmp_path, capsys):
    """sum_squares(Z - X @ w) = m * |mean of Z's rows - X @ w|^2 + const: least squares on the mean
    row, whose best support of 2 is found by enumerating all 15."""
    Z = Y[None, :] + 0.5 * RNG.standard_normal((4, N))
    w = sm.Variable(P, name="w")
    res = sm.Problem(sm.minimize(sm.sum_squares(sm.Data(Z) - sm.Data(X) @ w)), [sm.nnz(w) <= 2]).solve()

    def value(S):
        b = np.linalg.lstsq(X[:, S], Z.mean(axis=0), rcond=None)[0]
        return float(np.sum((Z - X[:, S] @ b) ** 2))

    best = min(itertools.combinations(range(P), 2), key=lambda S: value(list(S)))
    assert list(res.support) == list(best)
    assert res.objective == pytest.approx(value(list(best)), rel=1e-9)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "Z.npy", Z)
    (tmp_path / "m.sm").write_text(
        'data X : matrix from "X.npy"\ndata Z : matrix from "Z.npy"\nvar w[cols(X)]\n'
        "minimize sum_squares(Z - X @ w)\nsubject to\n    nnz(w) <= 2\n"
    )
    code, out, err = cli(capsys, "solve", str(tmp_path / "m.sm"))
    assert code == 0 and "internal error" not in err


# ---------------------------------------------------------------------- options of auto


@pytest.fixture
def ls_model(tmp_path: Path) -> Path:
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", Y)
    return tmp_path


LS = 'data X : matrix from "X.npy"\ndata y : vector from "y.npy"\nvar w[cols(X)]\nminimize sum_squares(X @ w - y)\n'


@pytest.mark.parametrize(
    "options, fragment",
    [
        ("max_iter = 1e400", "option max_iter=inf of auto is not a valid integer"),
        ("max_iter = -1", "option max_iter must be >= 1"),
        ("nope = 1", "auto has no option 'nope'"),
    ],
)
def test_options_of_solve_with_auto_are_checked_at_their_line(capsys, ls_model, options, fragment):
    path = ls_model / "m.sm"
    path.write_text(LS + f"subject to\n    nnz(w) <= 2\nsolve with auto({options})\n")
    report = sm.load(path).check()
    assert not report.ok and fragment in report.errors[0].message and report.errors[0].span.line == 7
    for command in ("check", "solve"):
        code, out, err = cli(capsys, command, str(path))
        assert code == 2 and "internal error" not in err
        assert f"{path}:7:1: solver error" in out + err and fragment in out + err


def test_options_of_auto_are_checked_as_the_solver_it_runs(tmp_path):
    """On sparse PCA auto runs tpm: components = 1e400 is tpm's option, refused with that said."""
    rng = np.random.default_rng(1)
    np.save(tmp_path / "X.npy", rng.standard_normal((40, 6)))
    (tmp_path / "p.sm").write_text(
        'data X : matrix from "X.npy"\nvar w[cols(X)]\nmaximize quad_form(w, cov(X))\nsubject to\n'
        "    norm(w) <= 1\n    nnz(w) <= 2\nsolve with auto(components = 1e400)\n"
    )
    prob = sm.load(tmp_path / "p.sm")
    with pytest.raises(SolverError) as e:
        prob.solve()
    assert "components=inf of tpm is not a valid integer (auto runs tpm on this model)" in e.value.message
    assert e.value.span.line == 7


# ---------------------------------------------------------------------- funcs with a kink


@pytest.mark.parametrize(
    "body, curvature",
    [
        ("abs(z)", "convex"),
        ("z^2 + abs(z - 1)", "convex"),
        ("exp(abs(z))", "convex"),
        ("abs(z)^3", "convex"),
        ("-abs(z)", "concave"),
        ("log(1 + abs(z))", "unknown"),  # convex kink at 0, concave elsewhere
        ("abs(z) - z^2", "unknown"),
        ("abs(z) * z", "unknown"),
    ],
)
def test_a_func_with_a_kink_gets_its_curvature_from_the_jump_of_its_slope(body, curvature):
    prob = sm.parse(f"var w[3]\nfunc f(z) = {body}\nminimize sum(f(w - 1))\n")
    assert prob.symbols["f"].curvature == curvature


def test_a_func_with_a_kink_checks_and_solves_from_the_command_line(capsys, ls_model):
    path = ls_model / "m.sm"
    path.write_text(
        'data X : matrix from "X.npy"\ndata y : vector from "y.npy"\nvar w[cols(X)]\n'
        "func f(z) = z^2 + abs(z)\nminimize sum(f(X @ w - y))\nsubject to\n    nnz(w) <= 2\n"
    )
    code, out, err = cli(capsys, "check", str(path))
    assert code == 0 and "convexity   convex" in out
    code, out, err = cli(capsys, "solve", str(path))
    assert "internal error" not in err and code in (0, 2)


# ---------------------------------------------------------------------- an objective without a variable


def test_an_objective_that_reads_no_variable_is_refused_where_it_is_written(capsys, tmp_path):
    (tmp_path / "m.sm").write_text("var w[3]\nminimize 1\n")
    with pytest.raises(ModelError) as e:
        sm.load(tmp_path / "m.sm")
    assert (e.value.span.line, e.value.span.column) == (2, 10) and "reads no variable" in e.value.message
    code, _, err = cli(capsys, "solve", str(tmp_path / "m.sm"))
    assert code == 2 and "internal error" not in err
    with pytest.raises(ModelError, match="reads no variable"):
        sm.Problem(sm.minimize(3))


# ---------------------------------------------------------------------- the Python builder


W = sm.Variable(P, name="w")
LSQ = sm.minimize(sm.sum_squares(sm.Data(X) @ W - Y))


def _solved(**kw):
    return sm.Problem(LSQ, [sm.nnz(W) <= 2]).solve(**kw)


@pytest.mark.parametrize(
    "make, error, fragment",
    [
        (lambda: W[::0], ShapeError, "has step 0"),
        (lambda: W[0:4:1.5], ShapeError, "not an integer"),
        (lambda: sm.sum(W, axis="rows"), ShapeError, "an axis is an integer"),
        (lambda: sm.Problem(LSQ, [sm.nnz(W) <= float("nan")]), ConstraintError, "the bound nan is not an integer"),
        (lambda: _solved(k=float("inf")), ConstraintError, "the bound inf is not an integer"),
        (lambda: sm.nnz(W) == 2, ConstraintError, "nnz(w) == 2 asks for exactly that count"),
        (lambda: sm.nnz(W) < 3, ConstraintError, "nnz(w) < 3: a strict inequality is not a constraint"),
        (lambda: W > 0, ConstraintError, "w > 0: a strict inequality"),
        (lambda: sm.Parameter("abc", name="lam"), DataError, "param lam is given 'abc', which is not a number"),
        (lambda: sm.Parameter(float("nan")), DataError, "a param must be finite"),
        (lambda: sm.Data(np.array([1.0 + 2j, 3.0])), DataError, "holds complex numbers"),
        (lambda: sm.Variable(3, name=5), ModelError, "a name is a string"),
        (lambda: _solved(solver=123), SolverError, "a solver is given by its name"),
        (lambda: _solved(init="abc"), SolverError, "is not a starting point"),
    ],
)
def test_misuses_of_the_python_builder_are_model_errors(make, error, fragment):
    with pytest.raises(error) as e:
        make()
    assert fragment in e.value.message


def test_the_strict_comparisons_name_the_comparison_to_write():
    with pytest.raises(ConstraintError) as e:
        _ = W > 0
    assert e.value.hint.startswith("write w >= 0")
    with pytest.raises(ConstraintError) as e:
        _ = sm.nnz(W) < 3
    assert e.value.hint.startswith("write nnz(w) <= 3")


def test_one_constraint_or_none_is_taken_as_a_list():
    one = sm.Problem(LSQ, sm.nnz(W) <= 2)
    assert [c.kind for c in one.constraints] == ["nnz"]
    assert sm.Problem(LSQ, None).constraints == []
    with pytest.raises(ConstraintError, match="must be a list"):
        sm.Problem(LSQ, 3)


def test_an_exception_in_a_custom_loss_is_the_models_error_with_its_cause(tmp_path, capsys):
    def loss(v):
        raise ZeroDivisionError("the user's bug")

    w = sm.Variable(4, name="w")
    prob = sm.Problem(sm.minimize(sm.custom_loss(loss, w)), [sm.nnz(w) <= 2])
    with pytest.raises(ModelError) as e:
        prob.solve("grahtp")
    assert "custom_loss loss: its fun raised ZeroDivisionError: the user's bug" in e.value.message
    assert isinstance(e.value.__cause__, ZeroDivisionError)  # the user's traceback stays reachable
    module = tmp_path / "model.py"
    module.write_text(
        "import sparsemodel as sm\n"
        "def loss(v):\n    raise ZeroDivisionError('the user''s bug')\n"
        "w = sm.Variable(4, name='w')\n"
        "problem = sm.Problem(sm.minimize(sm.custom_loss(loss, w)), [sm.nnz(w) <= 2])\n"
    )
    code, _, err = cli(capsys, "solve", str(module))
    assert code == 2 and "internal error" not in err and "ZeroDivisionError" in err


def test_convexity_is_still_refused_for_a_concave_func_with_a_kink():
    with pytest.raises(ConvexityError):
        sm.parse("var w[3]\nfunc f(z) = -abs(z)\nminimize sum(f(w - 1))\nsubject to\n    nnz(w) <= 1\n").solve()


def test_data_with_no_values_or_complex_ones_is_refused_at_its_line(tmp_path):
    """An empty table was taken, and the solve ended in a curvature error with no place; complex
    numbers given with data= lost their imaginary parts in silence."""
    np.save(tmp_path / "D.npy", np.zeros((0, 4)))
    (tmp_path / "m.sm").write_text('data D : matrix from "D.npy"\nvar w[4]\nminimize sum_squares(w)\n')
    with pytest.raises(DataError) as e:
        sm.load(tmp_path / "m.sm")
    assert "holds no values (shape (0,4))" in e.value.message and (e.value.span.line, e.value.span.column) == (1, 22)
    with pytest.raises(DataError) as e:
        sm.load(tmp_path / "m.sm", data={"D": np.array([[1.0 + 2j, 3.0, 0.0, 1.0]])})
    assert "holds complex numbers" in e.value.message and e.value.span.line == 1


def test_a_precision_matrix_over_perfectly_correlated_variables_is_unbounded_not_an_error(tmp_path, capsys):
    """-logdet(O) + trace(S @ O) has no minimum on a graph with an edge between two equal
    variables (S singular on the pair): it was an internal error (LinAlgError) for S = ones, and a
    'converged' answer with an eigenvalue of 3e8 for a duplicated column. An upper eigenvalue
    bound restores a minimum."""
    rng = np.random.default_rng(5)
    Z = rng.standard_normal((50, 5))
    Z[:, 1] = Z[:, 0]
    np.save(tmp_path / "Z.npy", Z)
    text = (
        'data Z : matrix from "Z.npy"\nlet S = cov(Z)\nvar O[cols(Z), cols(Z)] symmetric\n'
        "minimize -logdet(O) + trace(S @ O)\nsubject to\n    nnz(offdiag(O)) <= 2\n"
    )
    (tmp_path / "m.sm").write_text(text)
    res = sm.load(tmp_path / "m.sm").solve()
    assert res.status == "unbounded" and "edge (0, 1): S is singular on the pair" in res.message
    code, _, err = cli(capsys, "solve", str(tmp_path / "m.sm"))
    assert code == 2 and "internal error" not in err
    np.save(tmp_path / "S.npy", np.ones((4, 4)))
    (tmp_path / "ones.sm").write_text(
        'data S : matrix from "S.npy"\nvar O[4, 4] symmetric\nminimize -logdet(O) + trace(S @ O)\n'
        "subject to\n    nnz(offdiag(O)) <= 4\n"
    )
    code, out, err = cli(capsys, "solve", str(tmp_path / "ones.sm"))
    assert code == 2 and "internal error" not in err and "unbounded" in out + err
    (tmp_path / "m.sm").write_text(text + "    0.01 <= eig(O) <= 100\n")
    held = sm.load(tmp_path / "m.sm").solve()
    assert held.status == "converged" and np.isfinite(held.objective)
    assert np.linalg.eigvalsh(held.x.reshape(5, 5)).max() <= 100 * (1 + 1e-6)
