"""LASSO tuned by binary search on lambda (paper 003, Sections 2.2.1 and 6.3.2)."""

from __future__ import annotations

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.errors import SolverError


def linreg(X: np.ndarray, y: np.ndarray, k: int, groups: np.ndarray | None = None) -> sm.Problem:
    n, p = X.shape
    w = sm.Variable(p, name="w")
    nnz = sm.nnz(w) if groups is None else sm.nnz(w, groups=groups)
    return sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / (2 * n)), [nnz <= k])


def small(seed: int = 0, n: int = 40, p: int = 12) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = X[:, :3] @ np.array([1.0, -2.0, 3.0]) + 0.1 * rng.standard_normal(n)
    return X, y


def lasso_kkt_violation(lp, x: np.ndarray, lam: float) -> float:
    """Largest violation of the LASSO optimality conditions, relative to lambda: grad_F = 0,
    grad_i = -lam sign(x_i) on the support, |grad_i| <= lam off it."""
    _, g = lp.value_and_grad(x)
    C, F = lp.sparsity.coords, lp.sparsity.free
    gc, xc = g[C], x[C]
    on = xc != 0
    v_on = np.abs(gc[on] + lam * np.sign(xc[on])).max(initial=0.0)
    v_off = np.maximum(np.abs(gc[~on]) - lam, 0.0).max(initial=0.0)
    v_free = np.abs(g[F]).max(initial=0.0)
    return float(max(v_on, v_off, v_free) / lam)


def test_binary_search_hits_every_sparsity_exactly():
    """Generic data: coordinates enter the LASSO path one at a time, so every k in 1..p-1 is hit."""
    X, y = small()
    prob = linreg(X, y, 3)
    for k in range(1, X.shape[1]):
        r = prob.solve("lasso", k=k, debias=False)
        assert r.status == "converged"
        assert len(r.support) == k
        assert r.k == k
        # the reported solution is a LASSO solution at the reported lambda, not just any k-sparse point
        assert lasso_kkt_violation(prob.lower(k), np.ravel(r.x), r.extra["lambda"]) < 1e-4
        assert 0 < r.extra["lambda"] < r.extra["lambda_max"]
        assert r.extra["solves"] == r.iterations >= 1
        path = r.extra["path"]
        assert path[-1] == [r.extra["lambda"], k]


def test_lambda_decreases_with_k():
    X, y = small(1)
    prob = linreg(X, y, 3)
    lams = [prob.solve("lasso", k=k).extra["lambda"] for k in (1, 3, 6, 9)]
    assert all(a > b for a, b in zip(lams, lams[1:]))


def test_unreachable_sparsity_names_the_reachable_ones():
    """Two columns enter the path together, k = 1 is skipped (0 -> 2 nonzeros): orthogonal columns
    make the LASSO solution unique, and columns 1 and 2 are exactly equally correlated with y."""
    rng = np.random.default_rng(2)
    X = np.linalg.qr(rng.standard_normal((40, 12)))[0] * np.sqrt(40)
    y = 3.0 * X[:, 1] + 3.0 * X[:, 2] + 0.1 * X[:, 5]
    prob = linreg(X, y, 1)
    with pytest.raises(SolverError) as info:
        prob.solve("lasso")
    msg = info.value.message
    assert "cannot reach exactly k=1 nonzeros" in msg
    assert "jumps from 0 to 2" in msg
    reached = [int(s) for s in msg.split("sparsities reached along the search:")[1].split(",")]
    assert 1 not in reached and 2 in reached
    assert "duplicated or collinear" in info.value.hint
    r = prob.solve("lasso", k=2)  # the next size is reachable
    assert sorted(r.support) == [1, 2]


def test_k_beyond_largest_lasso_support():
    """With n = 6 samples a least-squares LASSO solution has at most 6 nonzeros."""
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((6, 20)), rng.standard_normal(6)
    prob = linreg(X, y, 10)
    with pytest.raises(SolverError) as info:
        prob.solve("lasso")
    assert "largest LASSO support found has 6 nonzeros" in info.value.message
    assert "min_ratio" in info.value.hint
    assert len(prob.solve("lasso", k=6).support) == 6


@pytest.mark.parametrize("k", [2, 4, 7])
def test_refit_is_restricted_minimize_and_never_worse(k):
    X, y = small(3)
    prob = linreg(X, y, k)
    r = prob.solve("lasso")
    lp = prob.lower()
    ref = lp.restricted_minimize(np.asarray(r.support))
    assert r.objective == pytest.approx(ref.f, rel=1e-10, abs=1e-14)
    np.testing.assert_allclose(r.x, ref.x, rtol=1e-8, atol=1e-10)
    assert r.objective <= r.extra["lasso_objective"] * (1 + 1e-12)
    raw = prob.solve("lasso", debias=False)
    assert raw.objective == pytest.approx(r.extra["lasso_objective"], rel=1e-12)
    assert list(raw.support) == list(r.support)
    assert raw.extra["l1_norm"] == pytest.approx(np.abs(raw.x).sum(), rel=1e-12)
    assert r.extra["lasso_penalized_objective"] == pytest.approx(
        r.extra["lasso_objective"] + r.extra["lambda"] * r.extra["l1_norm"], rel=1e-12
    )


def test_logistic_with_free_intercept_is_unpenalized():
    rng = np.random.default_rng(1)
    n, p = 200, 15
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[:3] = [2.0, -2.0, 1.5]
    v = np.where(rng.random(n) < 1 / (1 + np.exp(-(X @ beta + 3.0))), 1.0, -1.0)  # mostly +1: big intercept
    w = sm.Variable(p + 1, name="w")
    prob = sm.Problem(sm.minimize(sm.mean(sm.logistic(-v * (X @ w[1:] + w[0])))), [sm.nnz(w[1:]) <= 3])
    r = prob.solve("lasso", debias=False)
    lp = prob.lower()
    lam = r.extra["lambda"]
    _, g = lp.value_and_grad(r.x)
    assert len(r.support) == 3 and 0 not in set(r.support)  # the intercept is never counted
    assert r.x[0] > 1.0  # and not shrunk towards zero
    assert abs(g[0]) < 1e-5 * lam  # stationary in the intercept: no l1 subgradient there
    assert lasso_kkt_violation(lp, r.x, lam) < 1e-4
    # lambda_max is computed at the intercept-only fit, so k = 1 is reached just below it
    r1 = prob.solve("lasso", k=1, debias=False)
    x0 = lp.restricted_minimize(np.empty(0, dtype=np.int64)).x
    assert r1.extra["lambda_max"] == pytest.approx(np.abs(lp.grad(x0)[1:]).max(), rel=1e-8)
    assert len(r1.support) == 1
    # the debiased refit optimizes the intercept too
    rd = prob.solve("lasso")
    ref = lp.restricted_minimize(np.asarray(rd.support) - 1)  # positions into C = w[1:]
    assert rd.objective == pytest.approx(ref.f, rel=1e-9)
    assert rd.objective <= rd.extra["lasso_objective"]


def test_capabilities_and_registry():
    cls = sm.registry["lasso"]
    assert cls.handles == frozenset({"nnz", "box"})
    assert cls.convex_relaxation is True
    X, y = small()
    # never chosen by auto: it is a relaxation
    assert linreg(X, y, 3).solve("auto").solver != "lasso"


def test_bad_input_is_a_clear_error():
    X, y = small()
    w = sm.Variable(X.shape[1], name="w")
    unconstrained = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y)))
    with pytest.raises(SolverError, match="no nnz"):
        unconstrained.solve("lasso")
    with pytest.raises(SolverError, match="does not handle group-sparsity"):
        linreg(X, y, 2, groups=np.repeat(np.arange(6), 2)).solve("lasso")
    prob = linreg(X, y, 3)
    with pytest.raises(SolverError, match="not one of auto, CLARABEL, SCS"):
        prob.solve("lasso", cvxpy_solver="OSQP")
    with pytest.raises(SolverError, match="zero_tol"):
        prob.solve("lasso", zero_tol=2.0)
    with pytest.raises(SolverError, match="no option 'lambda_tols'"):
        prob.solve("lasso", lambda_tols=1e-3)
    with pytest.raises(SolverError, match="max_solves=1"):
        prob.solve("lasso", k=7, max_solves=1)
    full = prob.solve("lasso", k=12)  # k = p: the unconstrained fit, as every solver answers it
    assert full.k == 12 and "allows every unit" in full.message
    y0 = np.zeros_like(y)
    with pytest.raises(SolverError, match="already minimizes"):
        linreg(X, y0, 3).solve("lasso")


def test_logdet_objective_outside_numpy_domain_at_zero():
    """x_F* (the diagonal only) cannot start from O = 0 under -logdet; the cvxpy path needs no start."""
    rng = np.random.default_rng(0)
    S = np.cov(rng.standard_normal((100, 6)).T)
    O = sm.Variable((6, 6), name="O")  # not symmetric: foba and lasso select single entries
    prob = sm.Problem(sm.minimize(-sm.logdet(O) + sm.trace(S @ O)), [sm.nnz(sm.offdiag(O)) <= 4])
    r = prob.solve("lasso")
    assert r.status == "converged" and len(r.support) == 4 and np.isfinite(r.objective)
    diag_only = prob.lower().restricted_minimize(np.empty(0, dtype=np.int64), method="cvxpy").f
    assert r.objective < diag_only


@pytest.mark.parametrize("loss", ["least_squares", "logistic"])
def test_numpy_and_cvxpy_backends_solve_the_same_relaxation(loss):
    """The proximal-Newton path (sparsemodel.lowering.l1) and cvxpy agree on (1): penalized
    objective to 1e-8 relative and the same support, at several lambdas, with a free intercept."""
    from sparsemodel.lowering.l1 import l1_minimize

    rng = np.random.default_rng(5)
    n, p = 60, 15
    X = rng.standard_normal((n, p))
    w = sm.Variable(p + 1, name="w")
    if loss == "least_squares":
        y = X[:, :4] @ np.array([2.0, -1.0, 1.0, 0.5]) + 1.0 + 0.3 * rng.standard_normal(n)
        obj = sm.sum_squares(X @ w[1:] + w[0] - y) / (2 * n)
    else:
        v = np.where(X[:, 0] - X[:, 1] + 0.5 * rng.standard_normal(n) > 0, 1.0, -1.0)
        obj = sm.mean(sm.logistic(-v * (X @ w[1:] + w[0])))
    lp = sm.Problem(sm.minimize(obj), [sm.nnz(w[1:]) <= 3]).lower()
    ref = lp.relaxation("l1")  # the cvxpy relaxation, built in sparsemodel.lowering.relax
    lam_max = float(np.max(np.abs(lp.grad(lp.restricted_minimize(np.empty(0, int)).x)[1:])))
    for frac in (0.5, 0.2, 0.05):
        lam = frac * lam_max
        xn, _ = l1_minimize(lp, lam)
        xc = ref.solve(lam)
        Fn = lp.f(xn) + lam * np.abs(xn[1:]).sum()
        Fc = lp.f(xc) + lam * np.abs(xc[1:]).sum()
        assert Fn <= Fc + 1e-8 * abs(Fc)
        assert abs(Fn - Fc) <= 1e-7 * abs(Fc)
        nz_c = np.abs(xc[1:]) > 1e-6 * np.abs(xc[1:]).max()
        assert np.array_equal(xn[1:] != 0, nz_c)
        assert lasso_kkt_violation(lp, xn, lam) < 1e-6
    for backend in ("numpy", "cvxpy"):
        r = sm.Problem(sm.minimize(obj), [sm.nnz(w[1:]) <= 3]).solve("lasso", backend=backend)
        assert len(r.support) == 3 and r.extra["backend"] == backend
