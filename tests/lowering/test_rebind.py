"""Solving again with new data of the same shape (``LoweredProblem.rebind``): the rebound lowering
gives the answers of the model lowered afresh with that data, its kernel problem is the old one's
(rewritten in place), and what cannot be rebound is refused at the data's name."""

from __future__ import annotations

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.errors import ModelError
from sparsemodel.lowering import lean as lean_mod


def draw(family: str, seed: int, n: int = 100, p: int = 20) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    eta = X[:, :3] @ np.array([1.5, -1.0, 0.8])
    if family == "ls":
        y = eta + rng.standard_normal(n)
    elif family == "logistic":
        y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)
    else:
        y = rng.poisson(np.exp(0.4 * eta)).astype(float)
    return X, y


def model(family: str, X: np.ndarray, y: np.ndarray, k: int = 3) -> sm.Problem:
    Xd, yd = sm.Data(X, name="X"), sm.Data(y, name="y")
    w = sm.Variable(X.shape[1] + 1, name="w")
    z = Xd @ w[1:] + w[0]
    if family == "ls":
        loss = sm.sum_squares(z - yd)
    elif family == "logistic":
        loss = sm.sum(sm.logistic(z)) - yd @ z
    else:
        loss = sm.sum(sm.exp(z)) - yd @ z
    return sm.Problem(sm.minimize(loss + 0.1 * sm.sum_squares(w[1:])), [sm.nnz(w[1:]) <= k])


@pytest.mark.parametrize("family", ["ls", "logistic", "poisson"])
def test_a_rebound_lowering_solves_the_model_with_the_new_data(family):
    from sparsemodel.solvers import get_solver

    auto = get_solver("auto")
    X1, y1 = draw(family, 0)
    lp = model(family, X1, y1).lower()
    auto().solve(lp)
    kernel = lean_mod.lean_data(lp)
    for seed in (1, 2, 3):
        X2, y2 = draw(family, seed)
        lp2 = lp.rebind(X=X2, y=y2)
        got = auto().solve(lp2)
        fresh = auto().solve(model(family, X2, y2).lower())
        assert abs(got.objective - fresh.objective) <= 1e-9 * max(1.0, abs(fresh.objective))
        assert list(got.support) == list(fresh.support)
        assert np.allclose(got.x, fresh.x, atol=1e-7)
        if kernel is not None:
            assert lean_mod.lean_data(lp2) is kernel  # the same compiled problem, new numbers
            assert got.extra.get("kernel") == "compiled"
        # the objective's value and gradient are the new model's
        x = np.linspace(-0.2, 0.3, X2.shape[1] + 1)
        f2, g2 = lp2.value_and_grad(x)
        f3, g3 = model(family, X2, y2).lower().value_and_grad(x)
        assert np.isclose(f2, f3) and np.allclose(g2, g3)
        lp = lp2


def test_the_old_lowering_still_solves_its_own_data():
    from sparsemodel.solvers import get_solver

    auto = get_solver("auto")
    X1, y1 = draw("logistic", 0)
    X2, y2 = draw("logistic", 5)
    lp = model("logistic", X1, y1).lower()
    before = auto().solve(lp)
    lp.rebind(X=X2, y=y2)
    again = auto().solve(lp)
    assert abs(again.objective - before.objective) <= 1e-9 * max(1.0, abs(before.objective))


def test_what_cannot_be_rebound_is_refused():
    X, y = draw("ls", 0)
    lp = model("ls", X, y).lower()
    with pytest.raises(ModelError, match="no data named 'Z'"):
        lp.rebind(Z=X)
    with pytest.raises(ModelError, match=r"shape \(50, 20\)"):
        lp.rebind(X=X[:50])
    bad = y.copy()
    bad[3] = np.nan
    with pytest.raises(ModelError, match="NaN"):
        lp.rebind(y=bad)
    A = sm.Data(np.ones((1, 20)), name="A")
    w = sm.Variable(20, name="w")
    lpc = sm.Problem(
        sm.minimize(sm.sum_squares(sm.Data(X, name="X") @ w - y) + sm.sum(A @ w)), [sm.nnz(w) <= 3, A @ w == 1]
    ).lower()
    with pytest.raises(ModelError, match="read by a constraint"):
        lpc.rebind(A=np.full((1, 20), 2.0))
