"""Paper 001, Section 5 and Definition 4 on the 4 x 4 quadratic of examples/ht_stationary_points.py:
IHT leaves every HT-unstable stationary point and stays near the HT-stable ones."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from sparsemodel.solvers import get_solver

spec = importlib.util.spec_from_file_location(
    "ht_example", Path(__file__).resolve().parents[2] / "examples" / "ht_stationary_points.py"
)
ex = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ex)


@pytest.fixture(scope="module")
def setup():
    seed = ex.find_seed()
    return ex.stationary_points(*ex.draw(seed))


def test_six_stationary_points_classified(setup):
    lp, gamma, pts = setup
    assert len(pts) == 6
    for S, x, c in pts:
        g = lp.grad(x)
        assert c["stationary"] and np.abs(g[list(S)]).max() < 1e-10  # gradient vanishes on the support
        off = [j for j in range(4) if j not in S]
        assert c["ht_stable"] == (np.abs(x[list(S)]).min() >= gamma * np.abs(g[off]).max())
    assert sum(c["ht_stable"] for _, _, c in pts) == 2


def test_iht_escapes_unstable_and_stays_at_stable_points(setup):
    lp, gamma, pts = setup
    iht = get_solver("iht")
    rng = np.random.default_rng(1)
    for S, x, c in pts:
        sigma = 0.5 if not c["ht_stable"] else 0.05
        for _ in range(15):
            x0 = x.copy()
            x0[list(S)] += sigma * rng.standard_normal(2)
            r = iht(gamma=gamma, init=x0, max_iter=400, tol=0.0, backtracking=False).solve(lp)
            h = np.asarray(r.history["objective"])
            assert np.all(np.diff(h) <= 1e-12)  # paper 001, Corollary 3: f(x_k) is nonincreasing
            assert r.certificate["ht_stable"]  # Theorem 4: the limit is HT-stable
            assert (tuple(r.support) == S) == c["ht_stable"]


def test_iht_whose_steps_all_fail_is_stopped_not_diverged(monkeypatch):
    """With backtracking f never goes up: when no step size lowers it (here every new point is made
    to look a little worse), IHT returns its last iterate as converged and says why, instead of
    'diverged' with a decreasing objective."""
    import sparsemodel as sm
    from sparsemodel.solvers import get_solver

    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 8))
    y = X @ np.array([3.0, 0, 0, 0, 0, 0, 0, -2.0]) + 0.1 * rng.standard_normal(40)
    w = sm.Variable(8, name="w")
    lp = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y)), [sm.nnz(w) <= 2]).lower()
    true_vg = type(lp).value_and_grad

    f0 = float(y @ y)

    def worse(self, x, coords=None):
        f, g = true_vg(self, x, coords)
        return (f0 + 1.0 if np.any(x) else f), g  # every point but the start (0) looks worse than it

    monkeypatch.setattr(type(lp), "value_and_grad", worse)
    r = get_solver("iht")().solve(lp)
    assert r.status == "converged"
    assert "stopped" in r.message and "diverged" not in r.message
    assert r.extra["step_halvings"] > 60
