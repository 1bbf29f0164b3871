"""The restricted solve on the subspace of a product of sets (several bounded variables): every
back-end (least squares by sparse normal equations or QR, Newton, matrix free, L-BFGS) against
cvxpy's solve of the same problem over the same subspace, and against a closed form on robust PCA."""

from __future__ import annotations

import numpy as np
import pytest

import sparsemodel as sm
import sparsemodel.lowering.product_solve as ps
from sparsemodel.sets.registry import KINDS


def rpca_problem(seed: int = 0, n: int = 12, p: int = 8) -> tuple[sm.Problem, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2)) @ rng.standard_normal((2, p)) + 0.1 * rng.standard_normal((n, p))
    X[rng.integers(0, n, 5), rng.integers(0, p, 5)] += 6.0
    L, S = sm.Variable((n, p), name="L"), sm.Variable((n, p), name="S")
    return sm.Problem(sm.minimize(sm.sum_squares(X - L - S) / 2), [sm.rank(L) <= 2, sm.nnz(S) <= 5]), X


def state_of(lp, seed: int = 1):
    return lp.set.project(np.random.default_rng(seed).standard_normal(lp.n))[1]


@pytest.mark.parametrize("make", ["rpca", "multitask"])
def test_the_joint_refit_matches_cvxpy(make, monkeypatch):
    prob = rpca_problem()[0] if make == "rpca" else sm.Problem.of(KINDS["product"].example())
    lp = prob.lower()
    st = state_of(lp)
    ref = lp.restricted_minimize(st, method="cvxpy")
    got = lp.restricted_minimize(st)
    assert got.method == "lstsq"
    assert np.isclose(got.f, lp.f(got.x), rtol=1e-10, atol=1e-12)  # the value reported is f(x)
    assert got.f <= ref.f + 1e-6 * (1 + abs(ref.f))
    assert np.allclose(got.x, ref.x, atol=1e-4 * (1 + np.abs(ref.x).max()))
    # x lies in the subspace: the projection keeps it, its state uses at most the state's budget
    y, st2 = lp.set.project(got.x)
    assert np.allclose(y, got.x, atol=1e-9) and lp.set.used(st2) <= lp.set.used(st)
    # the gradient vanishes on the subspace (the first-order condition of the refit)
    g = lp.value_and_grad(got.x)[1]
    assert np.abs(lp.set.subspace(st).restrict(g)).max() <= 1e-8 * (1 + np.abs(g).max())
    # the same solve matrix free (LSQR) and by L-BFGS
    monkeypatch.setattr(ps, "MATERIALIZE_LIMIT", 0)
    free = lp.restricted_minimize(st)
    assert np.isclose(free.f, ref.f, rtol=1e-6, atol=1e-8)
    bfgs = lp.restricted_minimize(st, method="lbfgs")
    assert np.isclose(bfgs.f, ref.f, rtol=1e-6, atol=1e-8)


def test_robust_pca_refit_is_the_closed_form():
    """On the column space U of L and a support of S the refit is: S on the support = the residual
    there, and each column of C the least-squares fit of X's column on U over the rows off the
    support."""
    prob, X = rpca_problem(seed=2)
    lp = prob.lower()
    st = state_of(lp, 3)
    U = st.parts[0].U
    on = np.zeros(X.size, dtype=bool)
    on[st.parts[1]] = True
    on = on.reshape(X.shape)
    C = np.column_stack([np.linalg.lstsq(U[~on[:, j]], X[~on[:, j], j], rcond=None)[0] for j in range(X.shape[1])])
    x = lp.restricted_minimize(st).x
    L = lp.layout.get(x, lp.layout.variables[0])
    assert np.allclose(L, U @ C, atol=1e-9)


def test_a_logistic_product_is_refitted_by_newton_as_cvxpy_does():
    rng = np.random.default_rng(4)
    n = 120
    X, Z = rng.standard_normal((n, 6)), rng.standard_normal((n, 8))
    y = np.sign(X[:, 0] - Z[:, 3] + 0.5 * rng.standard_normal(n))
    w, v = sm.Variable(6, name="w"), sm.Variable(8, name="v")
    prob = sm.Problem(sm.minimize(sm.mean(sm.logistic(-y * (X @ w + Z @ v)))), [sm.nnz(w) <= 2, sm.nnz(v) <= 2])
    lp = prob.lower()
    st = state_of(lp, 5)
    got, ref = lp.restricted_minimize(st), lp.restricted_minimize(st, method="cvxpy")
    assert got.method == "newton"
    assert np.isclose(got.f, ref.f, rtol=1e-6) and np.allclose(got.x, ref.x, atol=1e-4)
