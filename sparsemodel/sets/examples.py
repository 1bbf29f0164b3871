"""A small model of every registered constraint kind, with seeded data: what the conformance suite
(tests/test_conformance.py) runs every set and every solver on, as scikit-learn's
``check_estimator`` runs estimators. A kind is registered with its example (sets/registry), so a new
set is tested by registering it."""

from __future__ import annotations

import numpy as np

from ..datasets import spiked_covariance
from ..model import atoms as A
from ..model.constraints import diff, eig, nnz, norm, offdiag, rank
from ..model.expr import Variable
from ..model.objective import maximize, minimize
from ..model.problem import Model


def _regression(seed: int = 3, n: int = 60, p: int = 80) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    w0 = np.zeros(p)
    w0[[3, 17, 40, 66]] = [2.0, -2.5, 3.0, -1.5]
    return X, w0, X @ w0 + 0.1 * rng.standard_normal(n)


def sparsity() -> Model:
    X, _, y = _regression()
    w = Variable(X.shape[1], name="w")
    return Model(minimize(A.sum_squares(X @ w - y) / (2 * len(y))), [nnz(w) <= 4])


def groups() -> Model:
    X, _, _ = _regression()
    rng = np.random.default_rng(4)
    Xg = X[:, :40]
    yg = Xg[:, [4, 5, 20, 21]] @ np.array([2.0, 1.0, -2.0, 1.5]) + 0.1 * rng.standard_normal(len(Xg))
    w = Variable(40, name="w")
    return Model(
        minimize(A.sum_squares(Xg @ w - yg) / (2 * len(yg))), [nnz(w, groups=np.repeat(np.arange(20), 2)) <= 2]
    )


def _covariance(seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    T = np.eye(8) * 2.0
    T[0, 1] = T[1, 0] = T[2, 5] = T[5, 2] = T[3, 7] = T[7, 3] = 0.6
    Z = rng.multivariate_normal(np.zeros(8), np.linalg.inv(T), size=400)
    return np.cov(Z, rowvar=False)


def pairs() -> Model:
    S = _covariance()
    O = Variable((8, 8), symmetric=True, name="O")
    return Model(minimize(-A.logdet(O) + A.trace(S @ O)), [nnz(offdiag(O)) <= 6])


def eigenvalue_box() -> Model:
    S = _covariance()
    O = Variable((8, 8), symmetric=True, name="O")
    return Model(minimize(-A.logdet(O) + A.trace(S @ O)), [nnz(offdiag(O)) <= 6, eig(O).between("auto", "auto")])


def low_rank() -> Model:
    rng = np.random.default_rng(5)
    q, m = 20, 12
    X = rng.standard_normal((100, q))
    Y = X @ (rng.standard_normal((q, 2)) @ rng.standard_normal((2, m))) + 0.1 * rng.standard_normal((100, m))
    W = Variable((q, m), name="W")
    return Model(minimize(A.sum_squares(X @ W - Y) / 200), [rank(W) <= 2])


def box() -> Model:
    X, w0, _ = _regression()
    y = X @ np.abs(w0) + 0.1 * np.random.default_rng(6).standard_normal(len(X))
    w = Variable(X.shape[1], name="w")
    return Model(minimize(A.sum_squares(X @ w - y) / (2 * len(y))), [nnz(w) <= 4, w >= 0])


def fused() -> Model:
    rng = np.random.default_rng(7)
    p = 40
    w0 = np.repeat([0.0, 2.0, -1.0, 1.0], 10)
    X = rng.standard_normal((120, p))
    y = X @ w0 + 0.2 * rng.standard_normal(120)
    w = Variable(p, name="w")
    return Model(minimize(A.sum_squares(X @ w - y) / 240), [nnz(diff(w)) <= 3])


def simplex() -> Model:
    """A long-only minimum-variance portfolio of at most 4 of 12 assets: sum(w) == 1 with w >= 0
    (the exact k-sparse simplex projection)."""
    rng = np.random.default_rng(8)
    n, p = 120, 12
    F = rng.standard_normal((n, 2)) * 0.02
    R = F @ rng.standard_normal((2, p)) + 0.01 * rng.standard_normal((n, p)) * rng.uniform(0.5, 2, p)
    w = Variable(p, name="w")
    return Model(minimize(A.sum_squares(R @ w) / n), [nnz(w) <= 4, A.sum(w) == 1, w >= 0])


def linear_inequality() -> Model:
    """Least squares with three general linear inequalities (A @ w <= b): few supports, so the
    projection enumerates them and is exact."""
    rng = np.random.default_rng(9)
    X = rng.standard_normal((40, 8))
    y = X @ np.array([2.0, -1.5, 0, 0, 1.0, 0, 0, 0]) + 0.1 * rng.standard_normal(40)
    G = rng.standard_normal((3, 8))
    w = Variable(8, name="w")
    return Model(minimize(A.sum_squares(X @ w - y) / 80), [nnz(w) <= 2, G @ w <= 0.5 * np.ones(3)])


def sparse_pca() -> Model:
    """Sparse PCA of a spiked covariance: maximize w'Sw subject to norm(w) <= 1, nnz(w) <= 5."""
    X, _ = spiked_covariance(200, p=20, sizes=(5, 5), variances=(9.0, 4.0), seed=10)
    S = np.cov(X, rowvar=False)
    w = Variable(X.shape[1], name="w")
    return Model(maximize(A.quad_form(w, S)), [norm(w) <= 1, nnz(w) <= 5])


def product() -> Model:
    """Two bounded variables: a low-rank W and a sparse B in one multi-task regression,
    Y = X W + Z B + noise (rank(W) <= 2, nnz(B) <= 5)."""
    rng = np.random.default_rng(8)
    n, q, p, m = 80, 10, 15, 6
    X = rng.standard_normal((n, q))
    Z = rng.standard_normal((n, p))
    W0 = rng.standard_normal((q, 2)) @ rng.standard_normal((2, m))
    B0 = np.zeros((p, m))
    B0[[1, 4, 9, 12, 12], [0, 3, 5, 1, 2]] = [3.0, -2.0, 2.5, 1.5, -3.0]
    Y = X @ W0 + Z @ B0 + 0.1 * rng.standard_normal((n, m))
    W = Variable((q, m), name="W")
    B = Variable((p, m), name="B")
    return Model(minimize(A.sum_squares(X @ W + Z @ B - Y) / (2 * n)), [rank(W) <= 2, nnz(B) <= 5])


def caps() -> Model:
    """At most 2 nonzeros in each of 4 sectors and 5 in all (nnz(w, per = sector, cap = 2) <= 5):
    the truth has 3 in sector 0, so the caps bind."""
    rng = np.random.default_rng(11)
    n, p = 60, 16
    sector = np.repeat(np.arange(4), 4)
    X = rng.standard_normal((n, p))
    w0 = np.zeros(p)
    w0[[0, 1, 2, 5, 9]] = [3.0, -2.5, 2.0, 1.5, -2.0]
    y = X @ w0 + 0.1 * rng.standard_normal(n)
    w = Variable(p, name="w")
    return Model(minimize(A.sum_squares(X @ w - y) / (2 * n)), [nnz(w, per=sector, cap=2) <= 5])
