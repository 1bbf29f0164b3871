"""Linear constraints in the model: ``==`` of expressions builds one while keeping the identity
semantics that dictionaries, sets, ``in`` and ``list.index`` rely on; ``<=`` of non-view affine
expressions builds one; errors are located at the constraint."""

from __future__ import annotations

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.errors import ConstraintError, ShapeError
from sparsemodel.model.constraints import BoxConstraint, LinearConstraint


def test_equality_of_expressions_builds_a_constraint():
    w = sm.Variable(4, name="w")
    c = sm.sum(w) == 1
    assert isinstance(c, LinearConstraint) and c.kind == "linear_eq" and str(c) == "sum(w) == 1"
    r = 1 == w[0]  # reflected: w[0] == 1
    assert isinstance(r, LinearConstraint) and r.kind == "linear_eq"
    a = np.ones(4) == w  # numpy defers to the expression
    assert isinstance(a, LinearConstraint)
    prob = sm.Problem(sm.minimize(sm.sum_squares(w - 1)), [c, w >= 0])
    assert {k.kind for k in prob.constraints} == {"linear_eq", "box"}


def test_expressions_keep_their_identity_semantics_in_containers():
    w, v, u = sm.Variable(4, name="w"), sm.Variable(3, name="v"), sm.Variable(4, name="u")
    assert bool(w == w) and not bool(w == u) and (w != u) and not (w != w)
    d = {w: 1, v: 2, u: 3}
    assert d[w] == 1 and d[v] == 2 and d[u] == 3
    assert len({w, v, u, w}) == 3
    assert w in [v, w] and u not in [v, w]  # shapes (4,) vs (3,): compared without raising
    assert [v, u, w].index(w) == 2
    items = [v, w]
    items.remove(w)
    assert items == [v]
    assert not (w == "w") and (w != None)  # noqa: E711 - the comparison itself is what is tested


def test_a_deferred_equality_is_checked_when_a_model_takes_it():
    w, v = sm.Variable(4, name="w"), sm.Variable(3, name="v")
    bad_shape = w == v  # no error while building (it may be a containment test)
    with pytest.raises(ShapeError) as e:
        sm.Problem(sm.minimize(sm.sum_squares(w) + sm.sum_squares(v)), [bad_shape])
    assert "do not broadcast" in str(e.value)
    with pytest.raises(ConstraintError) as e:
        sm.Problem(sm.minimize(sm.sum_squares(w)), [sm.sum_squares(w) == 1])
    assert "not affine" in str(e.value)
    x = sm.Variable(4, name="x")
    with pytest.raises(ConstraintError) as e:
        sm.Problem(sm.minimize(sm.sum_squares(w) + sm.sum_squares(x)), [w == x])
    assert "reads the variables" in str(e.value)


def test_inequalities_of_affine_expressions_are_linear_and_views_against_constants_are_boxes():
    w, v = sm.Variable(4, name="w"), sm.Variable(4, name="v")
    A = np.arange(8.0).reshape(2, 4)
    assert isinstance(A @ w <= np.ones(2), LinearConstraint)
    assert isinstance(w >= 0, BoxConstraint) and isinstance(w[1:] <= 1, BoxConstraint)
    assert isinstance(w[0] >= w[1], LinearConstraint) and (w[0] >= w[1]).kind == "linear_ineq"
    with pytest.raises(ConstraintError):  # <= is checked at once (it is never a containment test)
        _ = w <= v
    assert isinstance(sm.sum(w) >= 1, LinearConstraint)


def test_the_model_file_and_the_builder_give_one_answer(tmp_path):
    rng = np.random.default_rng(0)
    R = rng.standard_normal((80, 10)) * 0.02 + 0.01 * rng.standard_normal((80, 1))
    np.save(tmp_path / "R.npy", R)
    (tmp_path / "m.sm").write_text(
        'data R : matrix from "R.npy"\nvar w[cols(R)]\nminimize sum_squares(R @ w) / rows(R)\n'
        "subject to\n    nnz(w) <= 3\n    sum(w) == 1\n    w >= 0\n"
    )
    a = sm.load(tmp_path / "m.sm").solve("grahtp")
    w = sm.Variable(10, name="w")
    b = sm.Problem(sm.minimize(sm.sum_squares(R @ w) / 80), [sm.nnz(w) <= 3, sm.sum(w) == 1, w >= 0]).solve("grahtp")
    assert np.allclose(a.x, b.x) and np.isclose(a.objective, b.objective)
    assert np.isclose(a.x.sum(), 1) and np.all(a.x >= 0) and np.count_nonzero(a.x) <= 3
