"""Linear constraints as sets: the exact sparse projections (simplex, hyperplane, capped budget)
against enumeration of every support, the general projection exact when it enumerates, the
structure recognised from the model, and infeasible combinations refused at the constraint."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.errors import ConstraintError
from sparsemodel.numerics.qp import Polyhedron, project
from sparsemodel.sets.linear import simplex_projection, sparse_budget, sparse_hyperplane, sparse_simplex


def enumerate_projection(z, k, polyhedron_on):
    """The nearest point of {nnz <= k} ∩ P by trying every support of size k (each a QP)."""
    best = np.inf
    p = len(z)
    for S in itertools.combinations(range(p), min(k, p)):
        S = np.array(S)
        r = project(z[S], polyhedron_on(S))
        if r.x is None:
            continue
        x = np.zeros(p)
        x[S] = r.x
        best = min(best, float(np.sum((x - z) ** 2)))
    return best


def simplex_on(s):
    return lambda S: Polyhedron(len(S), np.ones((1, len(S))), [s], lo=np.zeros(len(S)))


def hyperplane_on(s):
    return lambda S: Polyhedron(len(S), np.ones((1, len(S))), [s])


def budget_on(s):
    return lambda S: Polyhedron(len(S), G=np.ones((1, len(S))), h=[s], lo=np.zeros(len(S)))


def test_the_simplex_projection_is_the_qp_projection():
    rng = np.random.default_rng(0)
    for _ in range(20):
        z = rng.standard_normal(7) * 2
        s = float(rng.uniform(0.1, 3))
        ref = project(z, simplex_on(s)(np.arange(7))).x
        assert np.allclose(simplex_projection(z, s), ref, atol=1e-9)


@pytest.mark.parametrize(
    "fn,on",
    [(sparse_simplex, simplex_on), (sparse_hyperplane, hyperplane_on), (sparse_budget, budget_on)],
    ids=["simplex", "hyperplane", "budget"],
)
def test_the_exact_sparse_projections_match_enumeration(fn, on):
    rng = np.random.default_rng(1)
    for trial in range(40):
        p = int(rng.integers(2, 8))
        k = int(rng.integers(1, p + 1))
        z = rng.standard_normal(p) * rng.choice([0.3, 1, 3])
        s = float(rng.choice([0.5, 1.0, 2.5])) * (1 if fn is not sparse_hyperplane else rng.choice([-1, 1]))
        x, sel = fn(z, k, s)
        assert np.count_nonzero(x) <= k and len(sel) <= k
        d = float(np.sum((x - z) ** 2))
        ref = enumerate_projection(z, k, on(s))
        assert d <= ref + 1e-9 * (1 + ref), f"trial {trial}: {d} > {ref} (p={p}, k={k}, s={s})"
        assert np.isclose(d, ref, rtol=1e-8, atol=1e-10)


def _portfolio(p=10, k=3, extra=()):
    rng = np.random.default_rng(4)
    R = rng.standard_normal((60, p)) * 0.02
    w = sm.Variable(p, name="w")
    return sm.Problem(sm.minimize(sm.sum_squares(R @ w) / 60), [sm.nnz(w) <= k, sm.sum(w) == 1, w >= 0, *extra]), w


def test_the_model_is_recognised_as_the_simplex_and_projected_exactly():
    prob, _ = _portfolio()
    S = prob.lower().set
    assert S.mode == "simplex" and S.total == 1.0
    z = np.random.default_rng(2).standard_normal(10)
    x, _ = S.project(z)
    assert np.isclose(np.sum((x - z) ** 2), enumerate_projection(z, 3, simplex_on(1.0)))


def test_the_general_projection_enumerates_small_problems_exactly():
    rng = np.random.default_rng(5)
    p, k = 7, 2
    G = rng.standard_normal((3, p))
    A = rng.standard_normal((1, p))
    w = sm.Variable(p, name="w")
    X = rng.standard_normal((30, p))
    prob = sm.Problem(
        sm.minimize(sm.sum_squares(X @ w) / 30), [sm.nnz(w) <= k, G @ w <= 0.3 * np.ones(3), A @ w == 1.0]
    )
    S = prob.lower().set
    assert S.mode == "general"
    for _ in range(5):
        z = rng.standard_normal(p) * 2
        x, sel = S.project(z)
        ref = enumerate_projection(z, k, lambda T: Polyhedron(len(T), A[:, T], [1.0], G[:, T], 0.3 * np.ones(3)))
        assert np.isclose(np.sum((x - z) ** 2), ref, rtol=1e-7, atol=1e-9)
        assert np.count_nonzero(x) <= k and np.all(G @ x <= 0.3 + 1e-8) and np.isclose(A @ x, 1.0)


def test_a_budget_of_zero_with_a_sum_is_refused_at_the_sum():
    text = """var w[5]
minimize sum_squares(w - [1, 2, 3, 4, 5])
subject to
    nnz(w) <= 0
    sum(w) == 1
"""
    prob = sm.parse(text, name="m.sm")
    with pytest.raises(ConstraintError) as e:
        prob.lower()
    assert e.value.span.line == 5 and "nnz(w) <= 0" in str(e.value)


def test_an_empty_polyhedron_is_refused_at_the_constraint_that_empties_it():
    text = """var w[5]
minimize sum_squares(w - [1, 2, 3, 4, 5])
subject to
    w >= 0
    nnz(w) <= 2
    sum(w) == -1
"""
    with pytest.raises(ConstraintError) as e:
        sm.parse(text, name="m.sm").lower()
    assert e.value.span.line == 6 and e.value.span.column == 5 and "no solution" in str(e.value)


def test_a_support_too_small_for_the_equalities_is_refused():
    rng = np.random.default_rng(6)
    A = rng.standard_normal((3, 6))
    w = sm.Variable(6, name="w")
    prob = sm.Problem(sm.minimize(sm.sum_squares(w)), [sm.nnz(w) <= 2, A @ w == np.ones(3)])
    with pytest.raises(ConstraintError) as e:
        prob.lower()
    assert "no support of 2" in str(e.value) and "rank 3" in e.value.hint
    assert prob.lower(k=3).set.k == 3  # three coordinates suffice for three generic equations


def test_a_sum_over_the_free_intercept_uses_the_general_rule():
    prob, w = _portfolio()
    v = sm.Variable(11, name="v")
    rng = np.random.default_rng(7)
    X = rng.standard_normal((40, 11))
    prob = sm.Problem(sm.minimize(sm.sum_squares(X @ v) / 40), [sm.nnz(v[1:]) <= 2, sm.sum(v) == 1])
    S = prob.lower().set
    assert S.mode == "general" and len(S.touched_free) == 1
    x, _ = S.project(rng.standard_normal(11))
    assert np.isclose(x.sum(), 1.0) and np.count_nonzero(x[1:]) <= 2


@pytest.mark.parametrize("mode", ["simplex", "hyperplane", "budget"])
def test_the_start_minimizes_the_diagonal_newton_model_under_the_constraint(mode):
    """start_point(x, g, step, h) is the minimizer of g'(y - x) + 1/2 sum h_i (y_i - x_i)^2 under the
    dense constraint (checked against cvxpy), then projected onto the k-sparse set: with k = p the
    projection keeps it; at x = 0 of a minimum-variance objective (g = 0) it weights by 1 / h_i."""
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(11)
    p = 6
    w = sm.Variable(p, name="w")
    X = rng.standard_normal((40, p))
    cons = {
        "simplex": [sm.sum(w) == 1, w >= 0],
        "hyperplane": [sm.sum(w) == 1],
        "budget": [sm.sum(w) <= 0.5, w >= 0],
    }[mode]
    S = sm.Problem(sm.minimize(sm.sum_squares(X @ w) / 40), [sm.nnz(w) <= p, *cons]).lower().set
    assert S.mode == mode
    for _ in range(3):
        x, g, h = rng.standard_normal(p), rng.standard_normal(p) * 3, rng.uniform(0.5, 4, p)
        y = cp.Variable(p)
        dense = {
            "simplex": [cp.sum(y) == 1, y >= 0],
            "hyperplane": [cp.sum(y) == 1],
            "budget": [cp.sum(y) <= 0.5, y >= 0],
        }
        cp.Problem(cp.Minimize(g @ (y - x) + 0.5 * cp.sum(cp.multiply(h, cp.square(y - x)))), dense[mode]).solve()
        assert np.allclose(S.start_point(x, g, 1.0, h), y.value, atol=1e-6)
    if mode == "simplex":
        h = np.array([1.0, 2.0, 4.0, 4.0, 8.0, 1.0])
        start = S.start_point(np.zeros(p), np.zeros(p), 1.0, h)
        assert np.allclose(start, (1 / h) / np.sum(1 / h))  # the inverse-variance weights at w = 0


def test_the_implied_bounds_hold_on_the_polyhedron_and_are_tight_on_the_simplex():
    """LinearSet.implied_bounds (bnb's big-M box where the model wrote none): sum(w) == 1 with w >= 0
    gives w <= 1 (to rounding); on random polyhedra no point of the polyhedron (the LP's maximum and
    minimum of each coordinate, HiGHS) lies outside them, and 0 stays inside."""
    from scipy.optimize import linprog

    w = sm.Variable(5, name="w")
    lp = sm.Problem(sm.minimize(sm.sum_squares(w - 1)), [sm.nnz(w) <= 2, sm.sum(w) == 1, w >= 0]).lower()
    lo, hi = lp.linear.implied_bounds(lp.box.lo, lp.box.hi)
    assert np.all(lo == 0) and np.allclose(hi, 1.0, rtol=0, atol=1e-8) and np.all(hi >= 1.0)
    rng = np.random.default_rng(2)
    tightened = 0
    for _ in range(30):
        p = 6
        w = sm.Variable(p, name="w")
        G = rng.standard_normal((3, p))
        cons = [sm.nnz(w) <= 3, sm.sum(w) == 1, sm.Data(G) @ w <= 1.0 + rng.random(3), w >= -0.2]
        lp = sm.Problem(sm.minimize(sm.sum_squares(w - 1)), cons).lower()
        lo, hi = lp.linear.implied_bounds(lp.box.lo, lp.box.hi)
        assert np.all(lo <= 0) and np.all(hi >= 0)
        P = lp.linear.polyhedron(box=lp.box)
        bounds = list(zip(P.lo, [None if not np.isfinite(h) else h for h in P.hi]))
        for j in range(p):
            for sign in (1.0, -1.0):
                c = np.zeros(p)
                c[j] = -sign  # maximize sign * x_j
                r = linprog(c, A_ub=P.G, b_ub=P.h, A_eq=P.A, b_eq=P.b, bounds=bounds, method="highs")
                assert r.status == 0
                if sign > 0:
                    assert r.x[j] <= hi[j] + 1e-9
                else:
                    assert r.x[j] >= lo[j] - 1e-9
        tightened += int(np.isfinite(hi).sum())
    assert tightened > 30  # (sum(w) == 1 with w >= -0.2 bounds every coordinate above)
