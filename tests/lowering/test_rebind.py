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


def test_a_rebound_lowering_gives_the_bound_a_fresh_one_gives():
    """The lower bound beside a rebound answer is the fresh lowering's: a refusal is kept across
    rebinding only while the ridges that decide it are unchanged (here the ridge's weights are data
    that are rebound from zero to positive, which makes a finite bound exist)."""
    from sparsemodel.solvers import get_solver

    auto = get_solver("auto")
    X1, y1 = draw("logistic", 0)

    def ridged(X, y, lam):
        w = sm.Variable(X.shape[1] + 1, name="w")
        z = sm.Data(X, name="X") @ w[1:] + w[0]
        loss = sm.sum(sm.logistic(z)) - sm.Data(y, name="y") @ z
        ridge = sm.sum(sm.Data(lam, name="lam") * sm.square(w[1:]))
        return sm.Problem(sm.minimize(loss + ridge), [sm.nnz(w[1:]) <= 3])

    zero, half = np.zeros(20), np.full(20, 0.5)
    lp = ridged(X1, y1, zero).lower()
    first = auto().solve(lp)
    assert first.lower_bound is None and "neither a ridge nor a box" in first.bound_note
    for seed, lam in ((1, zero), (2, half), (3, zero)):
        X2, y2 = draw("logistic", seed)
        lp = lp.rebind(X=X2, y=y2, lam=lam)
        got, fresh = auto().solve(lp), auto().solve(ridged(X2, y2, lam).lower())
        assert got.bound_note == fresh.bound_note
        if fresh.lower_bound is None:
            assert got.lower_bound is None
        else:
            assert got.lower_bound == pytest.approx(fresh.lower_bound, rel=1e-9, abs=1e-12)
    assert fresh.lower_bound is None and got.lower_bound is None
    lp = lp.rebind(lam=half)
    assert auto().solve(lp).lower_bound is not None  # the refusal of lam = 0 was not carried


@pytest.mark.parametrize("family", ["ls", "logistic", "poisson"])
def test_a_rebound_lowering_carries_its_relaxation_with_the_new_data(family):
    """With the ridges unchanged the plain relaxation is carried to the rebound lowering (not built
    again), reading the new design: the fast and the tight bounds at the rebound answer are the
    fresh lowering's, and a point's bound moves with the data."""
    from sparsemodel.lowering.bound import lower_bound, relaxation
    from sparsemodel.solvers import get_solver

    auto = get_solver("auto")
    X1, y1 = draw(family, 0)
    lp = model(family, X1, y1).lower()
    auto().solve(lp)
    old = relaxation(lp)
    for seed in (4, 5):
        X2, y2 = draw(family, seed)
        lp2 = lp.rebind(X=X2, y=y2)
        rel = relaxation(lp2)
        assert rel is not old and rel.design is lp2.design and rel.units is old.units  # carried, not rebuilt
        fresh_lp = model(family, X2, y2).lower()
        got = auto().solve(lp2)
        x = lp2.layout.pack(got.values)
        for mode in ("fast", "tight"):
            a, b = lower_bound(lp2, x, mode).value, lower_bound(fresh_lp, x, mode).value
            assert a == pytest.approx(b, rel=1e-9, abs=1e-12), mode
        assert lower_bound(lp2, x).value != pytest.approx(lower_bound(lp, x).value, rel=1e-6)
        lp, old = lp2, rel


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


def test_a_rebound_dataframe_names_the_coordinates_by_its_columns():
    """New data given as a DataFrame names the answer's coordinates by its own columns; an array of
    the same shape keeps the names the model had."""
    pd = pytest.importorskip("pandas")
    from sparsemodel.solvers import get_solver

    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 6))
    y = X[:, 2] - X[:, 4] + 0.1 * rng.standard_normal(80)
    w = sm.Variable(6, name="w")
    Xd = sm.Data(pd.DataFrame(X, columns=list("abcdef")), name="X")
    lp = sm.Problem(sm.minimize(sm.sum_squares(Xd @ w - sm.Data(y, name="y"))), [sm.nnz(w) <= 2]).lower()
    auto = get_solver("auto")()
    assert auto.solve(lp).support_names == ["c", "e"]
    lp2 = lp.rebind(X=pd.DataFrame(X[:, ::-1], columns=list("uvwxyz")))
    assert auto.solve(lp2).support_names == ["v", "x"]
    assert auto.solve(lp.rebind(X=X[:, ::-1])).support_names == ["b", "d"]
