"""Data for examples, tests and benchmarks: the papers' synthetic designs and the bundled Caravan set."""

from __future__ import annotations

from importlib import resources

import numpy as np


def sparse_linear_regression(
    n: int, p: int = 500, k: int = 50, mean: float = 5.0, noise: float = 1.0, seed: int | None = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The simulation of paper 000, Section 6.1: a k-sparse w (nonzeros drawn from N(mean, 1), "a
    Gaussian distribution with significant mean"), a dense standard Gaussian design X (n x p) and
    v = X w + standard Gaussian noise. Returns (X, v, w).

    The paper does not state the mean; we use 5 so that every nonzero is well above the noise
    level. With mean 3, about a quarter of the trials at n = 250 contain a coefficient below 0.3
    whose support is not the best 50-sparse fit, so no method can recover it exactly."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    w = np.zeros(p)
    S = rng.choice(p, k, replace=False)
    w[S] = rng.normal(mean, 1.0, k)
    v = X @ w + noise * rng.standard_normal(n)
    return X, v, w


def sparse_logistic_regression(
    n: int, p: int = 500, k: int = 50, mean: float = 5.0, seed: int | None = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The simulation of paper 000, Section 6.2.1: the sparse w and the Gaussian design of Section
    6.1 (:func:`sparse_linear_regression`), labels v in {-1, +1} drawn with
    P(v = 1 | u) = exp(2 w'u) / (1 + exp(2 w'u)) (eq. 7). Returns (X, v, w)."""
    X, _, w = sparse_linear_regression(n, p=p, k=k, mean=mean, seed=seed)
    rng = np.random.default_rng(None if seed is None else seed + 10_000)
    z = 2.0 * (X @ w)
    prob = 0.5 * (1.0 + np.tanh(0.5 * z))  # the logistic function, without overflow
    v = np.where(rng.random(n) < prob, 1.0, -1.0)
    return X, v, w


def low_rank_regression(
    n: int, p: int = 100, m: int = 30, r: int = 5, noise: float = 1.0, seed: int | None = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Multi-task regression with a low-rank coefficient matrix: W = A B / sqrt(r) with A (p x r)
    and B (r x m) standard Gaussian (rank r), a standard Gaussian design X (n x p) and
    Y = X W + noise * standard Gaussian. Returns (X, Y, W)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    W = rng.standard_normal((p, r)) @ rng.standard_normal((r, m)) / np.sqrt(r)
    Y = X @ W + noise * rng.standard_normal((n, m))
    return X, Y, W


def low_rank_plus_sparse(
    n: int = 100, p: int = 20, s: int = 30, r: int = 5, seed: int = 2
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Robust PCA's test problem as abess's test suite draws it (python/pytest, test_RPCA, with its
    defaults): L = A B with A (n x r) and B (r x p) uniform on [0, 1) (rank r, every entry
    positive), s outliers uniform on [0, 10) at s distinct positions of S (drawn in column-major
    order), X = L + S without noise, from NumPy's legacy generator seeded with ``seed`` (the same
    numbers as abess's np.random.seed(2)). Returns (X, L, S)."""
    rng = np.random.RandomState(seed)
    L = rng.rand(n, r) @ rng.rand(r, p)
    where = rng.choice(n * p, s, replace=False)
    S = np.zeros(n * p)
    S[where] = rng.rand(s) * 10
    S = S.reshape(p, n).T
    return L + S, L, S


def correlated_regression(
    n: int, p: int, k: int, rho: float = 0.8, noise: float = 0.5, seed: int | None = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gaussian features with AR(1) correlation corr(x_i, x_j) = rho^|i-j|, a k-sparse w with
    +-1 entries at random positions and v = X w + noise. Returns (X, v, w)."""
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, p))
    X = np.empty_like(Z)
    X[:, 0] = Z[:, 0]
    c = np.sqrt(1 - rho * rho)
    for j in range(1, p):
        X[:, j] = rho * X[:, j - 1] + c * Z[:, j]
    w = np.zeros(p)
    S = rng.choice(p, k, replace=False)
    w[S] = rng.choice((-1.0, 1.0), k)
    return X, X @ w + noise * rng.standard_normal(n), w


def sparse_precision(p: int, n: int = 100, density: float = 0.1, seed: int | None = 0) -> tuple[np.ndarray, np.ndarray]:
    """The simulation of paper 000, Section 6.3.1: O = Theta + sigma I with the off-diagonal entries
    of Theta equal to 1 with probability ``density`` (upper triangle, mirrored) and sigma chosen so
    that cond(O) = p; Z holds n samples of N(0, O^{-1}). Returns (Z, O)."""
    rng = np.random.default_rng(seed)
    T = np.triu((rng.random((p, p)) < density).astype(float), 1)
    T = T + T.T
    lam = np.linalg.eigvalsh(T)
    O = T + (lam[-1] - p * lam[0]) / (p - 1) * np.eye(p)
    Z = rng.multivariate_normal(np.zeros(p), np.linalg.inv(O), size=n)
    return Z, O


def spiked_covariance(
    n: int,
    p: int = 50,
    sizes: tuple[int, ...] = (10, 8),
    variances: tuple[float, ...] = (6.0, 3.0),
    seed: int | None = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Sparse PCA data (the spiked covariance model, Johnstone & Lu 2009): n samples of
    x = sum_j sqrt(variances[j]) z_j v_j + N(0, I_p), the v_j unit vectors with equal entries on
    consecutive disjoint supports of ``sizes`` (so Cov(x) = I + sum_j variances[j] v_j v_j').
    Returns (X, V), V the true directions as columns."""
    rng = np.random.default_rng(seed)
    V = np.zeros((p, len(sizes)))
    start = 0
    for j, s in enumerate(sizes):
        V[start : start + s, j] = 1 / np.sqrt(s)
        start += s
    Z = rng.standard_normal((n, len(sizes))) * np.sqrt(np.asarray(variances, dtype=float))
    return Z @ V.T + rng.standard_normal((n, p)), V


def factor_returns(n: int = 250, p: int = 50, factors: int = 3, seed: int | None = 0) -> tuple[np.ndarray, list[str]]:
    """Daily returns of p assets over n days from a linear factor model (the structure of the
    Fama-French and BARRA risk models): r_t = B f_t + e_t with ``factors`` market-wide factors
    f_t ~ N(0, diag(s^2)) (daily volatilities 1%, 0.5%, 0.4%, ...), loadings B (p x factors) with a
    market beta around 1 and smaller style loadings, and idiosyncratic noise e_t with volatilities
    spread between 0.8% and 2.5% a day; a small positive drift (4% a year). Returns (R, names), R
    of shape (n, p), names A00, A01, ..."""
    rng = np.random.default_rng(seed)
    vols = np.array([0.01] + [0.005 / (1 + 0.25 * j) for j in range(factors - 1)])
    F = rng.standard_normal((n, factors)) * vols
    B = np.column_stack([rng.normal(1.0, 0.3, p)] + [rng.normal(0.0, 0.6, p) for _ in range(factors - 1)])
    idio = rng.uniform(0.008, 0.025, p)
    R = 0.04 / 252 + F @ B.T + rng.standard_normal((n, p)) * idio
    return R, [f"A{j:02d}" for j in range(p)]


def factor_model(p: int, factors: int = 2, seed: int | None = 0) -> tuple[np.ndarray, np.ndarray]:
    """A random factor-model covariance and expected returns for portfolio tests: S = B B' + diag(d)
    with loadings B (p x factors) standard normal and idiosyncratic variances d uniform on [0.2, 1],
    and mu ~ N(0.05, 0.03^2) per asset. Returns (S, mu)."""
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((p, factors))
    S = B @ B.T + np.diag(rng.uniform(0.2, 1.0, p))
    return S, rng.normal(0.05, 0.03, p)


def caravan() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The bundled Caravan insurance data: X (5822 x 85), labels v in {-1, +1} (Purchase = Yes is
    +1) and the feature names."""
    with resources.files("sparsemodel.data").joinpath("Caravan.csv").open("r") as fh:
        header = fh.readline().strip().split(",")
        raw = np.loadtxt(fh, delimiter=",", dtype=str)
    X = raw[:, :-1].astype(float)
    v = np.where(raw[:, -1] == "Yes", 1.0, -1.0)
    return X, v, header[:-1]


def caravan_path() -> str:
    """Filesystem path of the bundled Caravan.csv."""
    return str(resources.files("sparsemodel.data").joinpath("Caravan.csv"))
