"""The model language's linear constraints: ``==`` in constraints, both orders, two-sided linear
bounds, and errors located at the constraint (line and column)."""

from __future__ import annotations

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.errors import ConstraintError, ModelError

HEAD = "var w[4]\nminimize sum_squares(w - [1, 2, 3, 4])\nsubject to\n"


def kinds(text):
    return [c.kind for c in sm.parse(HEAD + text, name="m.sm").constraints]


def test_equalities_and_inequalities_parse():
    assert kinds("    sum(w) == 1\n    1 == w[0] + w[1]\n    w[0] >= w[3]\n") == [
        "linear_eq",
        "linear_eq",
        "linear_ineq",
    ]
    assert kinds("    0 <= w[0] + w[1] <= 1\n") == ["linear_ineq", "linear_ineq"]
    assert kinds("    -1 <= w <= 1\n") == ["box"]


def test_an_equality_and_its_mirror_solve_alike():
    a = sm.parse(HEAD + "    sum(w) == 1\n    nnz(w) <= 2\n").solve("grahtp")
    b = sm.parse(HEAD + "    1 == sum(w)\n    nnz(w) <= 2\n").solve("grahtp")
    assert np.allclose(a.x, b.x) and np.isclose(a.x.sum(), 1)


@pytest.mark.parametrize(
    "line,col,needle",
    [
        ("    sum(w) == 1 == 2\n", 5, "does not chain"),
        ("    sum_squares(w) == 1\n", 5, "not affine"),
        ("    nnz(w) == 2\n", 5, "sparsity constraints read nnz"),
    ],
)
def test_errors_are_located_at_the_constraint(line, col, needle):
    with pytest.raises(ModelError) as e:
        sm.parse(HEAD + line, name="m.sm").lower()
    assert needle in str(e.value)
    assert e.value.span.line == 4 and e.value.span.column == col


def test_an_infeasible_combination_points_at_the_sum():
    with pytest.raises(ConstraintError) as e:
        sm.parse(HEAD + "    w >= 0\n    nnz(w) <= 2\n    sum(w) == -1\n", name="m.sm").lower()
    assert e.value.span.line == 6 and "no solution together with w >= 0" in str(e.value)
