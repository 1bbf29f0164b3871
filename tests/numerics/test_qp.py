"""The small QP kernel of the linear constraints: the active-set method against cvxpy on random
convex QPs (equalities, inequalities, bounds), infeasibility detected, the projection, and the
constrained Newton (SQP) on a logistic loss against cvxpy."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from sparsemodel.numerics.qp import Polyhedron, constrained_newton, feasible_point, project, solve_qp
from sparsemodel.objective.terms import Reduced


def _cvxpy_qp(H, c, P):
    u = cp.Variable(P.d)
    cons = []
    if len(P.b):
        cons.append(P.A @ u == P.b)
    if len(P.h):
        cons.append(P.G @ u <= P.h)
    il, ih = np.isfinite(P.lo), np.isfinite(P.hi)
    if il.any():
        cons.append(u[il] >= P.lo[il])
    if ih.any():
        cons.append(u[ih] <= P.hi[ih])
    prob = cp.Problem(cp.Minimize(0.5 * cp.quad_form(u, cp.psd_wrap(H)) + c @ u), cons)
    prob.solve(solver="CLARABEL")
    return prob


def test_the_active_set_qp_agrees_with_cvxpy_on_random_problems():
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(60):
        d = int(rng.integers(1, 12))
        X = rng.standard_normal((int(rng.integers(d, 30)), d))  # full column rank: bounded
        H, c = X.T @ X, rng.standard_normal(d)
        me, mi = int(rng.integers(0, 3)), int(rng.integers(0, 5))
        P = Polyhedron(
            d,
            rng.standard_normal((me, d)),
            rng.standard_normal(me),
            rng.standard_normal((mi, d)),
            rng.random(mi),
            np.where(rng.random(d) < 0.5, 0.0, -np.inf),
            np.where(rng.random(d) < 0.3, 1.0, np.inf),
        )
        r = solve_qp(H, c, P)
        ref = _cvxpy_qp(H, c, P)
        if ref.status == "infeasible":
            assert r.x is None and r.status == "infeasible"
            continue
        assert r.status == "optimal" and P.contains(r.x, 1e-8)
        f = 0.5 * r.x @ H @ r.x + c @ r.x
        assert f <= ref.value + 1e-7 * (1 + abs(ref.value))
        checked += 1
    assert checked > 30


def test_an_empty_polyhedron_is_reported():
    P = Polyhedron(3, np.ones((1, 3)), [-1.0], lo=np.zeros(3))  # w >= 0, sum(w) = -1
    assert feasible_point(P) is None
    assert solve_qp(np.eye(3), np.zeros(3), P).status == "infeasible"


def test_the_projection_onto_the_simplex_is_the_known_one():
    z = np.array([0.9, 0.5, -0.2, 0.1])
    P = Polyhedron(4, np.ones((1, 4)), [1.0], lo=np.zeros(4))
    x = project(z, P).x
    assert np.allclose(x, [0.7, 0.3, 0.0, 0.0], atol=1e-10)


@pytest.mark.parametrize("eq", [True, False])
def test_constrained_newton_on_a_logistic_loss_agrees_with_cvxpy(eq):
    from sparsemodel.model import atoms as A
    from sparsemodel.model.expr import Variable
    from sparsemodel.model.objective import minimize
    from sparsemodel.model.problem import Model
    from sparsemodel.objective.design import Design
    from sparsemodel.objective.evaluator import Layout
    from sparsemodel.objective.structure import decompose

    rng = np.random.default_rng(3)
    n, d = 80, 6
    X = rng.standard_normal((n, d))
    y = np.sign(X @ rng.standard_normal(d) + 2.0 * rng.standard_normal(n))  # overlapping classes
    w = Variable(d, name="w")
    m = Model(minimize(A.mean(A.logistic(-y * (X @ w)))))
    layout = Layout(m.variables)
    rd = Design(decompose(m.objective.expr, layout), layout).reduced(np.arange(d))
    G = rng.standard_normal((2, d))
    P = Polyhedron(d, np.ones((1, d)), [1.0], lo=np.zeros(d)) if eq else Polyhedron(d, G=G, h=[0.1, 0.1])
    res = constrained_newton(rd, None, P)
    u = cp.Variable(d)
    cons = [cp.sum(u) == 1, u >= 0] if eq else [G @ u <= 0.1]
    ref = cp.Problem(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(y, X @ u))) / n), cons)
    ref.solve(solver="CLARABEL")
    assert res.converged and P.contains(res.u, 1e-9)
    assert res.f <= ref.value + 1e-7
    assert np.allclose(res.u, u.value, atol=1e-4)
    assert isinstance(rd, Reduced)


def _random_polyhedron(rng, d):
    """Equalities (a sum and a random row, consistent with a random point of the simplex, or not),
    random inequalities and a box: about one in five is empty."""
    A = np.vstack([np.ones(d), rng.standard_normal(d)])
    x0 = rng.uniform(0, 1, d)
    x0 /= x0.sum()
    b = A @ x0 * (2.0 if rng.random() < 0.2 else 1.0)
    lo = np.zeros(d) if rng.random() < 0.6 else np.full(d, -0.5)
    hi = None if rng.random() < 0.5 else np.full(d, 0.6)
    return Polyhedron(d, A, b, rng.standard_normal((2, d)), rng.standard_normal(2) + 0.5, lo, hi)


def test_the_nonnegative_least_squares_phase_one_agrees_with_the_linear_program():
    """feasible_point's first resort (one NNLS problem in slack form) finds a point of every polyhedron
    HiGHS finds nonempty, and no point of one HiGHS proves empty; infeasible() is HiGHS's verdict."""
    from sparsemodel.numerics.qp import _nnls_point, infeasible

    rng = np.random.default_rng(3)
    empty = nonempty = 0
    for i in range(200):
        P = _random_polyhedron(rng, 3 + i % 6)
        x, proved_empty = _nnls_point(P)
        ref = _cvxpy_qp(np.eye(P.d), np.zeros(P.d), P)  # an independent verdict (Clarabel)
        if ref.status == "infeasible":
            empty += 1
            assert x is None and infeasible(P) and feasible_point(P) is None
        else:
            nonempty += 1
            assert x is not None and P.contains(x) and not proved_empty and not infeasible(P)
    assert empty > 10 and nonempty > 100
