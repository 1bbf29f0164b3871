"""The fast restricted (debiasing) solves agree with the cvxpy lowering of the same subproblem."""

from __future__ import annotations

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.errors import SolverError
from sparsemodel.model.userfunc import func

REL = 1e-6


def rel_gap(a: float, b: float) -> float:
    return abs(a - b) / max(1.0, abs(b))


def support(rng: np.random.Generator, size: int, s: int) -> np.ndarray:
    return np.sort(rng.choice(size, s, replace=False))


@pytest.mark.parametrize("seed", range(3))
def test_least_squares_with_intercept_and_ridge(seed):
    rng = np.random.default_rng(seed)
    n, p = 40, 25
    X, y = rng.standard_normal((n, p)), rng.standard_normal(n) + 2.0
    w = sm.Variable(p + 1, name="w")
    prob = sm.Problem(sm.minimize(sm.sum_squares(X @ w[1:] + w[0] - y) / (2 * n)), [sm.nnz(w[1:]) <= 5])
    lp = prob.lower()
    assert lp.restricted_method() == "lstsq"
    sel = support(rng, p, 7)
    ref = lp.restricted_minimize(sel, method="cvxpy")
    for m in ("lstsq", "newton", "lbfgs"):
        r = lp.restricted_minimize(sel, method=m)
        assert rel_gap(r.f, ref.f) < REL, m
        assert np.all(r.x[lp.sparsity.coords[np.setdiff1d(np.arange(p), sel)]] == 0)
    assert ref.x[0] != 0  # the intercept is free
    ridge = (0.7, sel[:4])
    ref = lp.restricted_minimize(sel, ridge=ridge, method="cvxpy")
    for m in ("lstsq", "newton", "lbfgs"):
        assert rel_gap(lp.restricted_minimize(sel, ridge=ridge, method=m).f, ref.f) < REL, m


@pytest.mark.parametrize("seed", range(3))
def test_logistic_with_intercept_and_l2(seed):
    rng = np.random.default_rng(10 + seed)
    n, p = 80, 30
    X = rng.standard_normal((n, p))
    v = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    w = sm.Variable(p + 1, name="w")
    obj = sm.mean(sm.logistic(-2 * v * (X @ w[1:] + w[0]))) + 1e-3 / 2 * sm.sum_squares(w)
    lp = sm.Problem(sm.minimize(obj), [sm.nnz(w[1:]) <= 5]).lower()
    assert lp.restricted_method() == "newton"
    sel = support(rng, p, 6)
    ref = lp.restricted_minimize(sel, method="cvxpy")
    for m in ("newton", "lbfgs"):
        assert rel_gap(lp.restricted_minimize(sel, method=m).f, ref.f) < REL, m


def test_huber_weights_quad_form_and_user_function():
    rng = np.random.default_rng(7)
    n, p = 50, 12
    X, y = rng.standard_normal((n, p)), rng.standard_normal(n)
    wts = rng.random(n) + 0.5
    P = np.cov(rng.standard_normal((30, p)), rowvar=False)
    phi = func("phi", "log(1 + exp(-z))")
    v = np.sign(rng.standard_normal(n))
    w = sm.Variable(p, name="w")
    objs = [
        sm.sum(sm.huber(X @ w - y, M=0.5)) / n,
        sm.sum(wts * sm.logistic(X @ w - y)) + sm.quad_form(w, P),
        sm.mean(phi(v * (X @ w))) + 0.01 * sm.sum_squares(w),
    ]
    for obj in objs:
        lp = sm.Problem(sm.minimize(obj), [sm.nnz(w) <= 4]).lower()
        assert lp.restricted_method() == "newton"
        sel = support(rng, p, 5)
        ref = lp.restricted_minimize(sel, method="cvxpy")
        assert rel_gap(lp.restricted_minimize(sel).f, ref.f) < REL, str(obj)
        assert rel_gap(lp.restricted_minimize(sel, method="lbfgs").f, ref.f) < REL, str(obj)


def test_general_smooth_objective_uses_lbfgs():
    rng = np.random.default_rng(3)
    n, p, c = 60, 15, 3
    X = rng.standard_normal((n, p))
    Y = np.eye(c)[rng.integers(0, c, n)]
    W = sm.Variable((p, c), name="W")
    Z = X @ W
    obj = sm.mean(sm.logsumexp(Z, axis=1) - sm.sum(Y * Z, axis=1)) + 0.05 * sm.sum_squares(W)
    lp = sm.Problem(sm.minimize(obj), [sm.nnz(W) <= 10]).lower()
    assert lp.restricted_method() == "newton"  # the softmax loss is a row-wise composite term
    sel = support(rng, p * c, 12)
    ref = lp.restricted_minimize(sel, method="cvxpy")
    assert rel_gap(lp.restricted_minimize(sel).f, ref.f) < REL
    assert rel_gap(lp.restricted_minimize(sel, method="lbfgs").f, ref.f) < REL


def test_method_errors():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((10, 4))
    w = sm.Variable(4, name="w")
    lp = sm.Problem(sm.minimize(sm.sum(sm.logistic(X @ w))), [sm.nnz(w) <= 2]).lower()
    with pytest.raises(SolverError, match="least-squares"):
        lp.restricted_minimize(np.array([0]), method="lstsq")
    with pytest.raises(SolverError, match="unknown restricted-solve method"):
        lp.restricted_minimize(np.array([0]), method="qr")


def test_smoothness_estimate_bounds():
    """M_s from the truncated power method: between the largest diagonal entry and lambda_max,
    and equal to the exact sparse eigenvalue on a small brute-forceable problem."""
    from itertools import combinations

    rng = np.random.default_rng(1)
    n, p = 30, 8
    X = rng.standard_normal((n, p))
    w = sm.Variable(p, name="w")
    lp = sm.Problem(sm.minimize(sm.sum_squares(X @ w) / (2 * n)), [sm.nnz(w) <= 2]).lower()
    H = X.T @ X / n
    exact = max(np.linalg.eigvalsh(H[np.ix_(S, S)])[-1] for S in map(list, combinations(range(p), 3)))
    est = lp.smoothness(3)
    assert np.max(np.diag(H)) - 1e-9 <= est <= exact + 1e-9
    assert est >= 0.95 * exact
    assert lp.mean_curvature(probes=200) == pytest.approx(np.mean(np.diag(H)), rel=0.1)


def test_vector_data_times_variable_and_solvers_subpackage():
    """a @ w with a data vector a (a scalar affine term) in the least-squares path; and
    sparsemodel.solvers stays importable as a package (the registry is sm.registry)."""
    import importlib

    rng = np.random.default_rng(4)
    a, X = rng.standard_normal(6), rng.standard_normal((20, 6))
    w = sm.Variable(6, name="w")
    lp = sm.Problem(sm.minimize(sm.sum_squares(X @ w - 1) + sm.square(a @ w - 2)), [sm.nnz(w) <= 2]).lower()
    assert lp.restricted_method() == "lstsq"
    sel = np.array([1, 3])
    assert rel_gap(lp.restricted_minimize(sel).f, lp.restricted_minimize(sel, method="cvxpy").f) < REL
    assert importlib.import_module("sparsemodel.solvers.iht").__name__ == "sparsemodel.solvers.iht"
    assert "grahtp" in sm.registry


def test_newton_coefficients_are_accurate_to_rounding():
    """The Newton kernel also takes the step that met its stopping test (decrement <= 2 tol (1 + |f|)),
    so the gradient at the returned point is at rounding level (~1e-16), not ~sqrt(tol) (1e-8 to
    1e-7 on these softmax problems without that step); likewise the projected gradient of the
    bounded solve."""
    for seed in range(4):
        rng = np.random.default_rng(seed)
        n, p, K = 15, 30, 3
        X = rng.random((n, p))
        Y = np.eye(K)[rng.integers(0, K, n)]
        W = sm.Variable((p, K), name="W")
        obj = sm.mean(sm.logsumexp(X @ W, axis=1) - sm.sum(Y * (X @ W), axis=1)) + 1 / (2 * n) * sm.sum_squares(W)
        for extra in ([], [W >= -0.05]):
            lp = sm.Problem(sm.minimize(obj), [sm.nnz(W) <= 90, *extra]).lower()
            x = lp.restricted_minimize(None, cols=np.arange(lp.n)).x
            g = lp.grad(x)
            pg = x - (lp.box.clip(x - g) if lp.box is not None else x - g)
            assert np.abs(pg).max() < 1e-13


def test_stale_factor_steps_match_fresh_hessians(monkeypatch):
    """A single restricted solve that reuses its last Cholesky factor (conjugate gradients on the
    Newton system, _stale_direction) ends at the same minimizer, to rounding, as one that
    forms every Hessian; the ridge term folded into the diagonal and the gradient taken from the
    solve's loss derivatives agree with a full evaluation; removal scoring of a one-coordinate
    support (a coordinate held at zero) agrees with the direct solve."""
    from sparsemodel.lowering.active import ActiveSet
    from sparsemodel.numerics import newton as newton_mod
    from sparsemodel.numerics.evaluation import _State

    rng = np.random.default_rng(3)
    n, p = 300, 20
    X = rng.standard_normal((n, p))
    v = np.where(X[:, :3].sum(1) + rng.standard_normal(n) > 0, 1.0, -1.0)
    w = sm.Variable(p + 1, name="w")
    obj = sm.mean(sm.logistic(-v * (X @ w[1:] + w[0]))) + 1e-3 / 2 * sm.sum_squares(w[1:])
    lp = sm.Problem(sm.minimize(obj), [sm.nnz(w[1:]) <= 8]).lower()
    sels = [support(rng, p, 8) for _ in range(6)]

    def run() -> list:
        act = ActiveSet(lp)
        out = []
        for i, sel in enumerate(sels):  # warm starts from the previous support, with and without ridge
            ridge = (0.5, sel[:3]) if i % 2 else None
            x, f = act.solve(sel, ridge=ridge)
            out.append((x.copy(), f, act.grad()))
        return out

    formed = [0]
    hessians = _State.hessians

    def counting(self: _State, idx: np.ndarray) -> np.ndarray:
        formed[0] += 1
        return hessians(self, idx)

    monkeypatch.setattr(_State, "hessians", counting)
    monkeypatch.setattr(newton_mod, "STALE_MIN_DIM", 0)  # these problems are small: reuse factors anyway
    fast = run()
    fast_hessians, formed[0] = formed[0], 0
    monkeypatch.setattr(newton_mod, "STALE_RATIO", 1.0)  # no curvature ever counts as unchanged: fresh Hessians
    fresh = run()
    assert fast_hessians < formed[0]
    for (x1, f1, g1), (x2, f2, g2) in zip(fast, fresh):
        assert abs(f1 - f2) <= 1e-14 * abs(f2)
        assert np.abs(x1 - x2).max() <= 1e-10 * (1 + np.abs(x2).max())
        assert np.abs(g1 - lp.grad(x1)).max() <= 1e-14
        assert np.abs(g1 - g2).max() <= 1e-10
    act = ActiveSet(lp)
    act.solve(sels[0][:1])
    assert rel_gap(act.removal_values()[0], lp.restricted_minimize(np.empty(0, dtype=np.int64)).f) < 1e-12


@pytest.mark.parametrize("method", ["auto", "covsel", "admm", "newton", "lbfgs"])
def test_every_method_solves_the_precision_subproblem_under_the_eigenvalue_box(method):
    """Under alpha <= eig(O) <= beta each method a solver's options accept reaches the minimum of
    subproblem (13) (paper 000) that cvxpy finds; 'lbfgs', which cannot keep the box, is run by the
    ADMM (it used to end in a raw LinAlgError)."""
    from sparsemodel.sets import examples

    m = examples.eigenvalue_box()
    lp = sm.Problem(m.objective, m.constraints).lower()
    _, st = lp.project(np.eye(int(np.sqrt(lp.n))).ravel() + 0.3)
    ref = lp.restricted_minimize(st, method="cvxpy")
    got = lp.restricted_minimize(st, method=method)
    assert got.method in ("covsel", "admm", "newton")
    assert rel_gap(got.f, ref.f) <= REL
