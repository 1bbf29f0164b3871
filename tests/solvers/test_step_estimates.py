"""Curvature and step-size estimates never fail on a convex loss: a negative, zero or non-finite
estimate is a number computed in floating point (``LoweredProblem.safe_curvature`` turns it into a
step, and backtracking does the rest), and on (near-)separable data, where a fit drives the
coefficients without bound and the loss flattens, every first-order solver finishes, the Newton
solves reach the infimum 0 and the mean curvature the solvers read is the exact one."""

from __future__ import annotations

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.lowering.constants import MAX_MOVE
from tests.model.test_survival import cox_direct

FIRST_ORDER = ("auto", "grahtp", "fgrahtp", "iht", "omp", "ompr", "els", "arht", "grasp", "foba")
NEWTON = ("auto", "grahtp", "omp", "ompr", "els", "arht", "foba")  # they debias by restricted Newton solves


def separable(seed: int, n: int = 40, p: int = 10):
    """The order of the event times (Cox) and the labels (logistic) are decided by 8 x_0 + 6 x_1:
    the losses have infimum 0, approached only as the coefficients grow without bound."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    eta = 8 * X[:, 0] + 6 * X[:, 1]
    time = np.exp(-eta + 0.01 * rng.standard_normal(n))
    event = np.ones(n)
    event[rng.random(n) < 0.2] = 0
    y = np.sign(X[:, 0] + 0.8 * X[:, 1] + 0.01 * rng.standard_normal(n))
    return X, time, event, y


def test_safe_curvature_turns_every_estimate_into_a_step():
    X, time, event, _ = separable(0)
    w = sm.Variable(X.shape[1], name="w")
    lp = sm.Problem(sm.minimize(sm.cox(X @ w, time, event)), [sm.nnz(w) <= 3]).lower()
    x = np.zeros(lp.n)
    x[0] = 4.0
    g = lp.value_and_grad(x)[1]
    floor = np.linalg.norm(g) / (MAX_MOVE * 4.0)
    assert lp.safe_curvature(-3.6e-07, x, g) == pytest.approx(max(3.6e-07, floor))  # rounding around 0
    assert lp.safe_curvature(-16.0, x, g) == 16.0  # a nonconvex loss's curvature: its magnitude
    assert lp.safe_curvature(2.5, x, g) == 2.5
    for bad in (0.0, np.nan, np.inf, -np.inf, 1e-300):
        M = lp.safe_curvature(bad, x, g)
        assert M == pytest.approx(floor)  # the step moves x by at most MAX_MOVE times its size
        assert np.linalg.norm(g / M) == pytest.approx(MAX_MOVE * np.linalg.norm(x))
    assert lp.safe_curvature(0.0, x, np.zeros(lp.n)) == 1.0  # stationary: any step stays put


def test_cox_mean_curvature_near_separation_is_the_exact_one():
    """GraHTP's step reads tr(X_C' H X_C) / |C| from the loss's Hessian products. At the points a
    fit reaches on separable data (z a hundred apart) the risk sets of the latest times hold
    exp(z) far below the largest one; the old products lost them to underflow and read the mean
    curvature as 150 where it is 27 (and 150 where it is 0.6)."""
    X, time, event, _ = separable(0, n=200, p=20)
    w = sm.Variable(X.shape[1], name="w")
    lp = sm.Problem(sm.minimize(sm.cox(X @ w, time, event)), [sm.nnz(w) <= 3]).lower()
    C = lp.set.curvature_parts()[0]
    for scale in (1.0, 30.0, 1000.0):
        x = np.zeros(lp.n)
        x[0], x[1] = 8 * scale, 6 * scale
        H = cox_direct(X @ x, time, event)[1]
        exact = np.trace(X[:, C].T @ H @ X[:, C]) / len(C)
        assert lp.mean_curvature(x=x) == pytest.approx(exact, rel=1e-8, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("loss", ["cox", "logistic"])
def test_separable_data_every_first_order_solver_finishes(loss, seed):
    """No estimate stops a solver on a loss that flattens: each one returns a finite objective
    below f(0), and those that debias with Newton solves reach the infimum 0 (on the Cox loss the
    old Hessian products stopped them near 1, and arht could not bracket its target)."""
    X, time, event, y = separable(seed)
    w = sm.Variable(X.shape[1], name="w")
    obj = sm.cox(X @ w, time, event) if loss == "cox" else sm.sum(sm.logistic(-(y * (X @ w))))
    prob = sm.Problem(sm.minimize(obj), [sm.nnz(w) <= 3])
    f0 = prob.lower().value_and_grad(np.zeros(X.shape[1]))[0]
    for solver in FIRST_ORDER:
        # iht and fgrahtp crawl towards an infimum at infinity with a step fixed (or measured) where
        # the loss was still curved: a budget of 100 iterations shows that they run, in 0.3 s
        r = prob.solve(solver, max_iter=100) if solver in ("iht", "fgrahtp") else prob.solve(solver)
        assert r.status in ("converged", "max_iter"), solver
        assert np.isfinite(r.objective) and r.objective < f0, solver
        if solver in NEWTON:
            assert r.objective < 1e-6, solver
