"""bnb's Frank-Wolfe steps by one Newton step of x(z) (``inner='step'``, the default) instead of a
minimization of the relaxation at every step (``inner='exact'``): the step's algebra (the exact
x(z) is its fixed point), every node bound still below the best objective of its node (every
support enumerated), bounds close to the exact steps', and the same proven optima as the exact
steps and as enumeration, on logistic and Poisson losses with a free intercept and a ridge."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.lowering.bound import relaxation

TOL = 1e-9


def model(kind: str, seed: int, p: int = 10, k: int = 3, n: int = 60, lam: float = 1e-2) -> sm.Problem:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    X[:, 1] = X[:, 0] + 0.3 * rng.standard_normal(n)  # correlated columns: fractional relaxations
    beta = np.zeros(p)
    beta[rng.choice(p, k, replace=False)] = rng.uniform(0.5, 1.5, k) * rng.choice([-1, 1], k)
    w = sm.Variable(p, name="w")
    b = sm.Variable(1, name="b")
    z = X @ w + b
    if kind == "logistic":
        y = (rng.random(n) < 1 / (1 + np.exp(-X @ beta))).astype(float)
        obj = (sm.sum(sm.logistic(z)) - y @ z) / n
    elif kind == "poisson":
        y = rng.poisson(np.exp(0.3 * X @ beta)).astype(float)
        obj = (sm.sum(sm.exp(z)) - y @ z) / n
    else:  # least squares: bnb's shifted form
        y = X @ beta + rng.standard_normal(n)
        obj = sm.sum_squares(z - y) / (2 * n)
    return sm.Problem(sm.minimize(obj + lam / 2 * sm.sum_squares(w)), [sm.nnz(w) <= k])


def node_optimum(lp, fin: np.ndarray, fout: np.ndarray) -> float:
    """The best objective over the supports of k units that hold ``fin`` and avoid ``fout``."""
    units = lp.set.bound_units()
    k = units.budget
    best = np.inf
    for S in itertools.combinations(range(units.n_units), k):
        s = np.zeros(units.n_units, dtype=bool)
        s[list(S)] = True
        if (fin & ~s).any() or (fout & s).any():
            continue
        best = min(best, float(lp.restricted_minimize(units.positions(np.array(S))).f))
    return best


def test_the_exact_minimizer_is_the_steps_fixed_point():
    """At x(z) minimized exactly, one Newton step moves by the minimization's tolerance only; from
    a point away from it, steps with fresh Hessians converge to it (the gradient, the Hessian, the
    perspective's diagonal and the free intercept of the step agree with the relaxation)."""
    lp = model("logistic", 3).lower()
    rel = relaxation(lp)
    assert rel.steps_apply()
    rng = np.random.default_rng(0)
    z = rng.uniform(0.05, 1.0, lp.set.bound_units().n_units)
    z *= lp.set.k / z.sum()
    xe = rel.phi_point(z)
    a = rel.anchor(xe, z, curv=True)
    x1, _ = rel.newton_point(a, z, fresh=True)
    assert np.max(np.abs(x1 - xe)) <= 1e-6 * (1 + np.max(np.abs(xe)))
    x = rel.phi_point((z > np.median(z)).astype(float))  # the minimizer at other weights
    for _ in range(8):
        x, _ = rel.newton_point(rel.anchor(x, z, curv=True), z, fresh=True)
    assert np.max(np.abs(x - xe)) <= 1e-6 * (1 + np.max(np.abs(xe)))


@pytest.mark.parametrize("kind,seed", [("logistic", 1), ("logistic", 2), ("poisson", 3)])
def test_node_bounds_by_steps_stay_below_the_node_optimum(kind, seed):
    """Weak duality at whatever point a step reaches: at the root and at nodes with units fixed in
    and out (started from a parent's dual point, as bnb does), the bound never exceeds the best
    objective of the node's supports."""
    lp = model(kind, seed).lower()
    rel = relaxation(lp)
    nu = lp.set.bound_units().n_units
    rng = np.random.default_rng(seed)
    z0 = np.full(nu, lp.set.k / nu)
    root, zr = rel.frank_wolfe(None, 40, z=z0, inner="step")
    none = np.zeros(nu, dtype=bool)
    assert root.value <= node_optimum(lp, none, none) + TOL
    for _ in range(6):
        fin, fout = none.copy(), none.copy()
        picks = rng.choice(nu, 3, replace=False)
        fin[picks[0]] = True
        fout[picks[1:]] = True
        nb, _ = rel.frank_wolfe(None, 20, fin, fout, z=zr, warm=10, seed=root.anchor, inner="step")
        assert nb.value <= node_optimum(lp, fin, fout) + TOL


@pytest.mark.parametrize("seed", range(4))
def test_step_bounds_follow_the_exact_ones(seed):
    """After the same number of Frank-Wolfe steps the bound by Newton steps is within a small
    fraction of the bound by exact minimizations (both below the optimum)."""
    lp = model("logistic", 10 + seed, p=12).lower()
    rel = relaxation(lp)
    nu = lp.set.bound_units().n_units
    z0 = np.full(nu, lp.set.k / nu)
    for iters in (30, 100):
        exact, _ = rel.frank_wolfe(None, iters, z=z0, inner="exact")
        step, _ = rel.frank_wolfe(None, iters, z=z0, inner="step")
        scale = max(1.0, abs(exact.value))
        assert step.value >= exact.value - 1e-3 * scale, (iters, step.value, exact.value)


@pytest.mark.parametrize("kind,seed", [("logistic", 20), ("logistic", 21), ("logistic", 22), ("poisson", 23)])
def test_the_same_proven_optimum_as_the_exact_steps_and_enumeration(kind, seed):
    prob = model(kind, seed, p=11)
    lp = prob.lower()
    opt = node_optimum(lp, np.zeros(11, dtype=bool), np.zeros(11, dtype=bool))
    got = {}
    for inner in ("step", "exact"):
        r = prob.solve("bnb", inner=inner, gap_tol=1e-7)
        assert r.status == "optimal", r.message
        assert r.lower_bound <= opt + TOL * max(1.0, abs(opt))
        got[inner] = r
    assert got["step"].objective == pytest.approx(opt, rel=1e-8, abs=1e-10)
    assert got["exact"].objective == pytest.approx(opt, rel=1e-8, abs=1e-10)
    assert sorted(got["step"].support) == sorted(got["exact"].support)
