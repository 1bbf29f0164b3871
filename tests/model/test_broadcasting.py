"""A vector meeting a matrix of one column (or one row) elementwise is refused where it is written.

NumPy reads a vector as a row, so ``X @ w - y`` with y of shape (n, 1) is the (n, n) matrix of
every difference: a least-squares model that is silently another model (or that the lowering
cannot put in canonical form). The refusal names both shapes and the fix, in the Python builder
and in a model file (at the operator's line and column), in ``check`` as in ``solve``. The
broadcasting that is meant stays: a matrix minus a row vector (centering), a vector added to every
row of a matrix (softmax's intercepts), a column times a row (an outer product)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.cli import main
from sparsemodel.errors import ShapeError

RNG = np.random.default_rng(25)
X = RNG.standard_normal((30, 8))
Y = X[:, :2] @ np.array([2.0, -1.5]) + 0.1 * RNG.standard_normal(30)


def test_a_column_target_is_refused_in_the_builder_with_both_shapes_and_the_fix():
    w, b = sm.Variable(8, name="w"), sm.Variable(name="b")
    with pytest.raises(ShapeError) as e:
        sm.Data(X) @ w + b - Y[:, None]
    msg = str(e.value)
    assert "of shape (30,)" in msg and "a column <data (30,1)> of shape (30,1)" in msg
    assert "(30,30) matrix" in msg and "y[:, 0] or y.ravel()" in e.value.hint
    with pytest.raises(ShapeError) as e:  # a named column: the fix is written with its name
        sm.Data(X) @ w - sm.Data(Y[:, None], name="y")
    assert e.value.hint.startswith("take it as a vector: y[:, 0]")
    with pytest.raises(ShapeError) as e:  # the column on the left, a variable on the right
        sm.Data(Y[:8, None]) - w
    assert "the vector w of shape (8,)" in str(e.value)
    with pytest.raises(ShapeError) as e:  # a product too, and a row
        sm.Data(Y[None, :]) * (sm.Data(X) @ w)
    assert "a row <data (1,30)> of shape (1,30)" in str(e.value) and "y[0, :]" in e.value.hint
    with pytest.raises(ShapeError) as e:  # a 1 x 1 matrix is a scalar
        (sm.Data(X) @ w) / np.ones((1, 1))
    assert "give it as a scalar" in e.value.hint


def test_a_column_right_side_of_a_linear_constraint_is_refused():
    w = sm.Variable(8, name="w")
    A = RNG.standard_normal((2, 8))
    c = sm.Data(A, name="A") @ w == sm.Data(np.array([[1.0], [2.0]]), name="b")  # deferred while built
    with pytest.raises(ShapeError) as e:
        sm.Problem(sm.minimize(sm.sum_squares(sm.Data(X) @ w - Y)), [sm.nnz(w) <= 3, c])
    assert "A @ w == b" in str(e.value) and "(2,2) matrix" in str(e.value) and "b[:, 0]" in e.value.hint


def _files(tmp_path: Path) -> None:
    np.savetxt(tmp_path / "X.csv", X, delimiter=",")
    np.savetxt(tmp_path / "y.csv", Y, delimiter=",")  # one column


MODEL = """data X : matrix from "X.csv"
data y : {kind} from "y.csv"
var w[cols(X)]
var b
minimize sum_squares(X @ w + b - y)
subject to
    nnz(w) <= 2
"""


def test_a_column_declared_as_a_matrix_is_refused_at_its_operator_in_check_and_solve(tmp_path, capsys):
    _files(tmp_path)
    path = tmp_path / "m.sm"
    path.write_text(MODEL.format(kind="matrix"))
    with pytest.raises(ShapeError) as e:
        sm.load(path)
    assert (e.value.span.line, e.value.span.column, e.value.span.end_column) == (5, 22, 35)
    assert "declare it data y : vector" in e.value.hint
    for command in ("check", "solve"):
        code = main([command, str(path)])
        out, err = capsys.readouterr()
        assert code == 2, (command, err)
        assert "internal error" not in err
        assert err.startswith(f"{path}:5:22: shape error: X @ w + b - y combines the vector X @ w + b of shape (30,)")
        assert "a column y of shape (30,1)" in err and "y[:, 0]" in err
    # the two fixes the hint names give the least-squares answer of the vector target
    w, b = sm.Variable(8, name="w"), sm.Variable(name="b")
    expected = sm.Problem(sm.minimize(sm.sum_squares(sm.Data(X) @ w + b - Y)), [sm.nnz(w) <= 2]).solve()
    path.write_text(MODEL.format(kind="vector"))
    as_vector = sm.load(path).solve()
    path.write_text(MODEL.format(kind="matrix").replace("b - y)", "b - y[:, 0])"))
    as_slice = sm.load(path).solve()
    for r in (as_vector, as_slice):
        assert list(r.support) == list(expected.support) == [0, 1]
        assert r.objective == pytest.approx(expected.objective, rel=1e-9)


def test_a_column_on_the_right_of_a_linear_constraint_in_a_file_is_refused_at_its_line(tmp_path):
    _files(tmp_path)
    np.savetxt(tmp_path / "A.csv", RNG.standard_normal((2, 8)), delimiter=",")
    np.savetxt(tmp_path / "c.csv", np.array([[1.0], [0.5]]), delimiter=",")
    text = MODEL.format(kind="vector") + 'data A : matrix from "A.csv"\ndata c : matrix from "c.csv"\n'
    (tmp_path / "m.sm").write_text(text + "subject to\n    A @ w == c\n")
    with pytest.raises(ShapeError) as e:
        sm.load(tmp_path / "m.sm")
    assert (e.value.span.line, e.value.span.column) == (11, 5) and "(2,2) matrix" in e.value.message


def test_the_broadcasting_that_is_meant_still_builds_and_solves(tmp_path):
    """Centering (matrix minus a row vector, or minus a 1 x p row), a vector of intercepts added
    to every row (softmax), a column times a row (an outer product), a one-entry vector."""
    mu = X.mean(axis=0)
    w = sm.Variable(8, name="w")
    centered = (sm.Data(X) - mu) @ w
    also = (sm.Data(X) - mu[None, :]) @ w
    for e in (centered, also):
        assert e.shape == (30,)
        r = sm.Problem(sm.minimize(sm.sum_squares(e - (Y - Y.mean()))), [sm.nnz(w) <= 2]).solve()
        beta = np.linalg.lstsq((X - mu)[:, r.support], Y - Y.mean(), rcond=None)[0]
        np.testing.assert_allclose(r.x[r.support], beta, rtol=1e-7)
    W, b = sm.Variable((8, 3), name="W"), sm.Variable(3, name="b")
    assert (sm.Data(X) @ W + b).shape == (30, 3)
    assert (sm.Data(X) @ W + sm.Variable((1, 3), name="c")).shape == (30, 3)
    u, v = RNG.standard_normal(4), RNG.standard_normal(5)
    outer = sm.Data(u[:, None]) * sm.Data(v[None, :])
    np.testing.assert_allclose(outer.constant_value(), np.outer(u, v))
    assert (sm.Data(X[:, :1]) * sm.Variable(1, name="s")).shape == (30, 1)
    # in a model file: centering by a data row
    np.savetxt(tmp_path / "X.csv", X, delimiter=",")
    np.savetxt(tmp_path / "mu.csv", mu[None, :], delimiter=",")
    np.savetxt(tmp_path / "y.csv", Y - Y.mean(), delimiter=",")
    (tmp_path / "c.sm").write_text(
        'data X : matrix from "X.csv"\ndata mu : matrix from "mu.csv"\ndata y : vector from "y.csv"\n'
        "var w[cols(X)]\nminimize sum_squares((X - mu) @ w - y)\nsubject to\n    nnz(w) <= 2\n"
    )
    r = sm.load(tmp_path / "c.sm").solve()
    beta = np.linalg.lstsq((X - mu)[:, r.support], Y - Y.mean(), rcond=None)[0]
    np.testing.assert_allclose(r.x[r.support], beta, rtol=1e-7)


def test_building_a_long_sum_renders_no_text(monkeypatch):
    """The refusal's text is made only when refusing: rendering both operands at every link of a
    chain of n terms costs n^2 (a 10,000-term objective took minutes to parse)."""
    from sparsemodel.model.expr import Expr

    calls = []
    render = Expr.__str__

    def counting(self):
        calls.append(1)
        return render(self)

    monkeypatch.setattr(Expr, "__str__", counting)
    w = sm.Variable(5, name="w")
    total = (w[0] - 1) ** 2
    for i in range(1, 300):
        total = total + (i % 7 + 1) * (w[i % 5] - i % 3) ** 2
    assert calls == []
    with pytest.raises(ShapeError, match="combines the vector"):
        total + w - np.ones((5, 1))  # the refusal still names the operands
