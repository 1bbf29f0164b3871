"""Restricted solves under linear constraints: the NumPy paths (active-set QP / SQP, SLSQP) against
the cvxpy reference on the same subproblem, for least squares and a logistic loss, with
equalities, inequalities and a box; a support on which the constraints cannot hold gives +inf."""

from __future__ import annotations

import numpy as np
import pytest

import sparsemodel as sm


def _problem(loss: str, seed: int = 0):
    rng = np.random.default_rng(seed)
    n, p = 60, 9
    X = rng.standard_normal((n, p))
    w = sm.Variable(p, name="w")
    if loss == "ls":
        y = X @ rng.standard_normal(p) + 0.3 * rng.standard_normal(n)
        f = sm.sum_squares(X @ w - y) / (2 * n)
    else:
        y = np.sign(X @ rng.standard_normal(p) + 2.0 * rng.standard_normal(n))
        f = sm.mean(sm.logistic(-y * (X @ w)))
    G = rng.standard_normal((2, p))
    cons = [sm.nnz(w) <= 4, sm.sum(w) == 1, G @ w <= 0.2 * np.ones(2), w[:3] >= -0.5]
    return sm.Problem(sm.minimize(f), cons), G


@pytest.mark.parametrize("loss", ["ls", "logistic"])
def test_the_restricted_solve_keeps_the_constraints_and_agrees_with_cvxpy(loss):
    prob, G = _problem(loss)
    lp = prob.lower()
    rng = np.random.default_rng(1)
    for _ in range(4):
        S = np.sort(rng.choice(9, 4, replace=False))
        ref = lp.restricted_minimize(S, method="cvxpy")
        for method in ("auto", "lbfgs"):
            r = lp.restricted_minimize(S, method=method)
            x = r.x
            assert np.count_nonzero(x[np.setdiff1d(np.arange(9), S)]) == 0
            assert abs(x.sum() - 1) < 1e-8 and np.all(G @ x <= 0.2 + 1e-8) and np.all(x[:3] >= -0.5 - 1e-10)
            tol = 1e-8 if method == "auto" else 1e-6
            assert r.f <= ref.f + tol * (1 + abs(ref.f)), (method, r.f, ref.f)
            assert np.isclose(r.f, lp.f(x), rtol=1e-10, atol=1e-12)


def test_a_support_where_the_constraints_cannot_hold_is_infinite():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((30, 5))
    w = sm.Variable(5, name="w")
    prob = sm.Problem(sm.minimize(sm.sum_squares(X @ w)), [sm.nnz(w) <= 2, sm.sum(w) == 1, w >= 0])
    r = prob.lower().restricted_minimize(np.empty(0, dtype=np.int64))
    assert r.f == np.inf and not r.converged


def test_least_squares_under_equalities_is_one_kkt_solve():
    """With only equalities the restricted least-squares problem is the KKT system: compare with
    its closed form."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((40, 6))
    y = rng.standard_normal(40)
    A = rng.standard_normal((2, 6))
    b = rng.standard_normal(2)
    w = sm.Variable(6, name="w")
    prob = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y)), [sm.nnz(w) <= 6, A @ w == b])
    lp = prob.lower()
    r = lp.restricted_minimize(None, cols=np.arange(6))
    K = np.block([[2 * X.T @ X, A.T], [A, np.zeros((2, 2))]])
    sol = np.linalg.solve(K, np.concatenate([2 * X.T @ y, b]))
    assert np.allclose(r.x, sol[:6], atol=1e-9)
    assert r.iterations == 1
