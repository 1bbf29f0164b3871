"""Second-order knockoff constructions: each S is optimal for its criterion (first-order conditions,
the conic solver's SDP optimum, knockpy's answers where knockpy is installed), feasible
(2 Sigma - S positive definite), and the samplers' copies have the knockoff covariance (model-X)
or the exact knockoff Gram matrix (fixed-X)."""

from __future__ import annotations

import numpy as np
import pytest

from sparsemodel.inference import gaussian as G
from sparsemodel.inference.base import InferenceError


def ar1(p: int, rho: float = 0.5) -> np.ndarray:
    i = np.arange(p)
    return rho ** np.abs(np.subtract.outer(i, i))


def random_corr(p: int, seed: int = 1) -> np.ndarray:
    A = np.random.default_rng(seed).standard_normal((2 * p, p))
    return np.corrcoef(A.T)


MATRICES = {"ar1": ar1(30), "random": random_corr(30)}


@pytest.mark.parametrize("name", list(MATRICES))
def test_mvr_meets_its_first_order_conditions(name):
    """d/ds_j [sum 1/s + tr((2R - S)^-1)] = -1/s_j^2 + ||(2R - S)^-1 e_j||^2 = 0 at the optimum
    (every s_j is interior: s > 0 and 2R - S > 0)."""
    R = MATRICES[name]
    s = G.coordinate_descent(R, "mvr")
    Minv = np.linalg.inv(2 * R - np.diag(s))
    grad = -1 / s**2 + np.sum(Minv**2, axis=0)
    assert np.max(np.abs(grad) * s**2) < 1e-4  # relative to the size of the terms
    assert np.linalg.eigvalsh(2 * R - np.diag(s)).min() > 0 and s.min() > 0


@pytest.mark.parametrize("name", list(MATRICES))
def test_maxent_meets_its_first_order_conditions(name):
    """d/ds_j [sum log s + log det(2R - S)] = 1/s_j - (2R - S)^-1_jj = 0 at the optimum."""
    R = MATRICES[name]
    s = G.coordinate_descent(R, "maxent")
    Minv = np.linalg.inv(2 * R - np.diag(s))
    assert np.max(np.abs(1 / s - np.diag(Minv)) * s) < 1e-4


@pytest.mark.parametrize("name", list(MATRICES))
def test_the_sdp_by_coordinate_descent_reaches_the_conic_optimum(name):
    R = MATRICES[name][:20, :20]
    R = R / np.sqrt(np.outer(np.diag(R), np.diag(R)))
    ours = G.feasible(R, G.coordinate_descent(R, "sdp"))
    ref = G.sdp_reference(R)  # cvxpy's default conic solver, to its own ~1e-6 accuracy
    assert ours.sum() == pytest.approx(ref.sum(), rel=5e-4)
    assert np.all(ours >= 0) and np.all(ours <= 1 + 1e-12)


def test_the_equicorrelated_construction_is_twice_the_smallest_eigenvalue():
    R = ar1(25, 0.6)
    lam = np.linalg.eigvalsh(R).min()
    s = G.s_vector(R, "equi")
    # the feasibility step leaves 2R - S with smallest eigenvalue TOL: s = 2 lam - TOL (below 1 here)
    assert np.allclose(s, 2 * lam - G.TOL, rtol=1e-8)


@pytest.mark.parametrize("method", G.METHODS)
def test_every_construction_is_feasible_on_the_covariance_scale(method):
    rng = np.random.default_rng(0)
    sd = rng.uniform(0.5, 3.0, 15)
    sigma = ar1(15, 0.7) * np.outer(sd, sd)
    s = G.s_vector(sigma, method)
    R, _ = G.correlation(sigma)
    sr = s / sd**2
    assert np.all(sr > 0)
    assert np.linalg.eigvalsh(2 * R - np.diag(sr)).min() >= G.TOL * (1 - 1e-6)


def test_constructions_agree_with_knockpy():
    knockpy = pytest.importorskip("knockpy.smatrix")
    import warnings

    for R in MATRICES.values():
        for method, loss in (("mvr", G.mvr_loss), ("maxent", G.maxent_loss)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                theirs = np.diag(knockpy.compute_smatrix(R, method=method))
            ours = G.s_vector(R, method)
            # knockpy stops its coordinate descent at a looser tolerance: ours is at least as good
            assert loss(R, ours) <= loss(R, theirs) * (1 + 1e-6)
            assert np.max(np.abs(ours - theirs) / theirs) < 3e-2


def test_ledoit_wolf_agrees_with_scikit_learn():
    sk = pytest.importorskip("sklearn.covariance")
    rng = np.random.default_rng(2)
    X = rng.standard_normal((40, 25)) @ np.linalg.cholesky(ar1(25, 0.8)).T + 3.0
    cov, shrink = G.ledoit_wolf(X)
    lw = sk.LedoitWolf().fit(X)
    assert shrink == pytest.approx(lw.shrinkage_, rel=1e-10)
    assert np.allclose(cov, lw.covariance_, rtol=1e-10, atol=1e-12)


def test_model_x_copies_have_the_knockoff_covariance():
    """[X, X~] ~ N(0, [[Sigma, Sigma - S], [Sigma - S, Sigma]]): the sample covariance of 200000 rows
    is within a few standard errors (entries of size 1: se ~ sqrt(2 / n)) of it."""
    p, n = 4, 200_000
    sigma = ar1(p, 0.6) * np.outer([1, 2, 1, 0.5], [1, 2, 1, 0.5])
    rng = np.random.default_rng(3)
    X = rng.standard_normal((n, p)) @ np.linalg.cholesky(sigma).T
    s = G.s_vector(sigma, "mvr")
    Xk = G.model_x(X, np.zeros(p), sigma, s, rng)
    C = np.cov(np.hstack([X, Xk]).T)
    want = np.block([[sigma, sigma - np.diag(s)], [sigma - np.diag(s), sigma]])
    scale = np.sqrt(np.outer(np.diag(want), np.diag(want)))
    assert np.max(np.abs(C - want) / scale) < 6 * np.sqrt(2 / n)


def test_fixed_x_copies_have_the_exact_knockoff_gram():
    """Barber and Candes 2015, eq. 1.4: X~'X~ = X'X and X'X~ = X'X - S (centred), and the column
    sums are X's, so the structure holds with an intercept too."""
    rng = np.random.default_rng(4)
    n, p = 60, 12
    X = rng.standard_normal((n, p)) @ np.linalg.cholesky(ar1(p, 0.5)).T * 2.0 + 1.5
    Xk, s = G.fixed_x(X, "mvr", rng)
    Xc, Xkc = X - X.mean(0), Xk - Xk.mean(0)
    assert np.allclose(Xk.mean(0), X.mean(0), atol=1e-12)
    assert np.allclose(Xkc.T @ Xkc, Xc.T @ Xc, atol=1e-9)
    assert np.allclose(Xc.T @ Xkc, Xc.T @ Xc - np.diag(s), atol=1e-9)
    # and the raw Gram (no intercept) has the same structure with the same S
    assert np.allclose(Xk.T @ Xk, X.T @ X, atol=1e-8)
    assert np.allclose(X.T @ Xk, X.T @ X - np.diag(s), atol=1e-8)


def test_fixed_x_needs_enough_samples_and_singular_designs_are_refused():
    rng = np.random.default_rng(5)
    with pytest.raises(InferenceError, match=r"n >= 2p \+ 1"):
        G.fixed_x(rng.standard_normal((20, 10)), "mvr", rng)
    X = rng.standard_normal((50, 4))
    X = np.column_stack([X, X[:, 0] + X[:, 1]])
    with pytest.raises(InferenceError, match="singular"):
        G.sampler(X, shrinkage="none")
    with pytest.raises(InferenceError, match="constant"):
        G.sampler(np.column_stack([X[:, :3], np.ones(50)]))
