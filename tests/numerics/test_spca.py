"""The sparse PCA kernels (sparsemodel/numerics/spca.py) against enumeration and their papers'
promises: the truncated power method's quotients never decrease on a positive semidefinite S
(Yuan & Zhang 2013, Proposition 4), the best k-subset is found on small spiked problems, Schur
complement deflation annihilates every earlier component and adds up to the adjusted variance of
Zou, Hastie & Tibshirani (2006)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from sparsemodel.datasets import spiked_covariance
from sparsemodel.numerics.spca import adjusted_variance, deflate, htp, leading, polish, tpm, truncate


def enumerate_best(S: np.ndarray, k: int) -> tuple[float, tuple[int, ...]]:
    """The largest eigenvalue of every k x k principal submatrix: the exact maximum."""
    return max((float(np.linalg.eigvalsh(S[np.ix_(c, c)])[-1]), c) for c in itertools.combinations(range(len(S)), k))


def spiked(seed: int, p: int = 12) -> np.ndarray:
    X, _ = spiked_covariance(60, p=p, sizes=(4, 3), variances=(4.0, 2.0), seed=seed)
    return np.cov(X, rowvar=False)


@pytest.mark.parametrize("seed", range(12))
def test_tpm_and_htp_find_the_best_support_of_small_spiked_problems(seed):
    S = spiked(seed)
    for k in range(1, 7):
        best, _ = enumerate_best(S, k)
        for solve in (tpm, htp):
            c = solve(S, k, swaps=None)
            assert np.count_nonzero(c.w) == k and np.isclose(np.linalg.norm(c.w), 1.0)
            assert np.isclose(c.value, c.w @ S @ c.w)
            assert c.value >= best * (1 - 1e-10), f"{solve.__name__} k={k}: {c.value} < {best}"


def test_the_polish_never_loses_and_can_only_reach_a_better_support():
    rng = np.random.default_rng(0)
    for _ in range(30):
        X = rng.standard_normal((8, 10)) @ rng.standard_normal((10, 10))
        S = np.cov(X, rowvar=False)
        c = tpm(S, 4, swaps=0)
        w, v, _ = polish(S, c.w, c.value)
        assert v >= c.value and np.isclose(v, w @ S @ w) and np.count_nonzero(w) == 4
        assert v <= enumerate_best(S, 4)[0] * (1 + 1e-12)


def test_the_power_iterations_never_decrease_the_quotient_on_a_psd_matrix():
    rng = np.random.default_rng(1)
    for trial in range(20):
        X = rng.standard_normal((15, 30)) @ rng.standard_normal((30, 30))
        S = np.cov(X, rowvar=False)
        c = tpm(S, 1 + trial % 8, n_starts=3, swaps=0)
        assert len(c.trace) >= 2
        assert np.all(np.diff(c.trace) >= -1e-10 * max(c.trace)), c.trace


def test_leading_is_the_maximum_on_the_support():
    rng = np.random.default_rng(2)
    S = np.cov(rng.standard_normal((40, 9)), rowvar=False)
    C = np.array([1, 4, 5, 8])
    lam, w = leading(S, C)
    assert np.isclose(lam, np.linalg.eigvalsh(S[np.ix_(C, C)])[-1]) and np.isclose(w @ S @ w, lam)
    assert set(np.flatnonzero(w)) <= set(C)
    for _ in range(200):  # no unit vector on C does better
        u = np.zeros(9)
        u[C] = rng.standard_normal(4)
        u /= np.linalg.norm(u)
        assert u @ S @ u <= lam + 1e-12
    assert leading(S, np.array([], dtype=int))[0] == 0.0


def test_schur_deflation_annihilates_every_earlier_component_and_sums_to_the_adjusted_variance():
    X, _ = spiked_covariance(200, p=30, seed=3)
    X = X - X.mean(axis=0)
    S = X.T @ X / len(X)
    St, W, own = S, [], []
    for _ in range(4):
        c = tpm(St, 6)
        W.append(c.w)
        own.append(c.value)
        St = deflate(St, c.w, "schur")
        assert np.linalg.eigvalsh(St)[0] >= -1e-9  # still a covariance
        for w in W:
            assert np.allclose(St @ w, 0, atol=1e-9)  # every earlier component explains nothing more
    W = np.column_stack(W)
    adj = adjusted_variance(S, W)
    assert np.allclose(adj, own)
    # Zou, Hastie & Tibshirani (2006), Section 3.4: the scores XW = QR, adjusted variance R_jj^2 (/ n here)
    R = np.linalg.qr(X @ W, mode="r")
    assert np.allclose(adj, np.diag(R) ** 2 / len(X))
    assert adj.sum() <= sum(w @ S @ w for w in W.T) + 1e-12


def test_projection_deflation_annihilates_the_last_component():
    S = spiked(4, p=15)
    c = tpm(S, 5)
    D = deflate(S, c.w, "projection")
    assert np.allclose(D @ c.w, 0, atol=1e-10) and np.linalg.eigvalsh(D)[0] >= -1e-10
    with pytest.raises(ValueError, match="unknown deflation"):
        deflate(S, c.w, "hotelling")


def test_disjoint_components_are_orthogonal_and_recover_the_spikes():
    X, V = spiked_covariance(2000, p=40, sizes=(8, 6), variances=(8.0, 4.0), seed=5)
    S = np.cov(X, rowvar=False)
    c1 = tpm(S, 8)
    c2 = tpm(deflate(S, c1.w), 6)
    assert set(np.flatnonzero(c1.w)) == set(range(8)) and set(np.flatnonzero(c2.w)) == set(range(8, 14))
    assert abs(c1.w @ c2.w) < 1e-12
    assert abs(c1.w @ V[:, 0]) > 0.99 and abs(c2.w @ V[:, 1]) > 0.99


def test_truncate_keeps_the_k_largest_magnitudes():
    v = np.array([0.1, -3.0, 2.0, 0.5, -2.5])
    assert np.array_equal(np.flatnonzero(truncate(v, 2)), [1, 4])


def test_above_the_internal_limits(monkeypatch):
    """Lanczos for the leading eigenvector above EIGSH_ABOVE coordinates, and the ranked exchanges
    above EXHAUSTIVE_SWAPS: the same maxima as the dense and exhaustive paths."""
    import sparsemodel.numerics.spca as spca

    S = spiked(6, p=40)
    C = np.arange(0, 40, 3)
    dense = leading(S, C)
    exact = tpm(S, 6, swaps=None)
    monkeypatch.setattr(spca, "EIGSH_ABOVE", 4)
    monkeypatch.setattr(spca, "EXHAUSTIVE_SWAPS", 0)
    lam, w = spca.leading(S, C)
    assert np.isclose(lam, dense[0]) and np.allclose(w, dense[1], atol=1e-8)
    ranked = spca.tpm(S, 6, swaps=None)
    assert ranked.value >= tpm(S, 6, swaps=0).value - 1e-12
    assert np.isclose(ranked.value, exact.value)  # a spiked problem: both reach the best support


def test_a_block_diagonal_covariance_still_spends_the_budget():
    """The power method can end on fewer than k coordinates (exact zeros); the support is filled up
    to k, which never lowers the maximum."""
    S = np.diag([5.0, 1.0, 0.5, 0.2, 0.1])
    S[1, 2] = S[2, 1] = 0.3
    c = tpm(S, 3)
    assert np.isclose(c.value, enumerate_best(S, 3)[0]) and c.value >= 5.0
    assert np.isclose(tpm(S, 1).value, 5.0)
