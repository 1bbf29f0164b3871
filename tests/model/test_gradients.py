"""Value and reverse-mode gradient of every atom and operator against central finite differences."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import sparsemodel as sm
from sparsemodel.model.userfunc import func
from sparsemodel.objective.evaluator import Evaluator, Layout

RNG = np.random.default_rng(12345)


def fd_check(objective: sm.Expr, x: np.ndarray | None = None, h: float = 1e-6, rtol: float = 1e-5) -> None:
    """Compare the evaluator's gradient with central differences in every coordinate."""
    layout = Layout(objective.variables())
    ev = Evaluator(objective, layout)
    if x is None:
        x = RNG.standard_normal(layout.n)
    f, g = ev.value_and_grad(x)
    assert np.isfinite(f)
    fd = np.empty(layout.n)
    for i in range(layout.n):
        e = np.zeros(layout.n)
        e[i] = h
        fd[i] = (ev.value(x + e) - ev.value(x - e)) / (2 * h)
    scale = max(1.0, np.abs(fd).max())
    np.testing.assert_allclose(g, fd, rtol=0, atol=rtol * scale)


X = RNG.standard_normal((7, 5))
y = RNG.standard_normal(7)
v = np.sign(RNG.standard_normal(7))


def test_square_sum_mean_sum_squares():
    w = sm.Variable(5, name="w")
    fd_check(sm.sum(sm.square(X @ w - y)) + 3 * sm.mean(X @ w) + sm.sum_squares(w) / 2)


def test_logistic_exp_log_huber():
    w = sm.Variable(5, name="w")
    fd_check(sm.mean(sm.logistic(-2 * v * (X @ w))))
    fd_check(sm.sum(sm.exp(0.3 * (X @ w))))
    fd_check(sm.sum(sm.huber(X @ w - y, M=0.7)))
    # log on a positive affine expression
    fd_check(-sm.sum(sm.log(X @ w + 20.0)), x=0.1 * RNG.standard_normal(5))


def test_logsumexp_axes_softmax():
    W = sm.Variable((5, 3), name="W")
    Y = np.eye(3)[RNG.integers(0, 3, 7)]
    Z = X @ W
    fd_check(sm.mean(sm.logsumexp(Z, axis=1) - sm.sum(Y * Z, axis=1)))
    fd_check(sm.logsumexp(Z))
    fd_check(sm.sum(sm.logsumexp(Z, axis=0)))


def test_trace_logdet_quad_form_transpose():
    O = sm.Variable((4, 4), name="O")
    S = np.cov(RNG.standard_normal((30, 4)), rowvar=False)
    x0 = (np.eye(4) * 2 + 0.1 * RNG.standard_normal((4, 4))).ravel()
    fd_check(-sm.logdet(O) + sm.trace(S @ O), x=x0)
    fd_check(sm.trace(O.T @ S), x=x0)
    w = sm.Variable(5, name="w")
    P = X.T @ X
    fd_check(sm.quad_form(w - 1.0, P) + sm.sum(w))


def test_slices_intercept_and_division():
    w = sm.Variable(6, name="w")
    fd_check(sm.sum_squares(X @ w[1:] + w[0] - y) / 14 + sm.sum_squares(w[1:3]))
    W = sm.Variable((3, 4), name="W")
    fd_check(sm.sum_squares(W[0, :] - 1) + sm.sum(sm.exp(W[:, 1])) + sm.sum_squares(W.T[2, :] / 3))


def test_sparse_data_matches_dense():
    Xs = sp.random(30, 12, density=0.2, random_state=1, format="csr")
    ys = RNG.standard_normal(30)
    w = sm.Variable(12, name="w")
    obj_s = sm.sum_squares(sm.Data(Xs) @ w - ys) / 60
    obj_d = sm.sum_squares(Xs.toarray() @ w - ys) / 60
    fd_check(obj_s)
    x = RNG.standard_normal(12)
    ls, ld = Layout([w]), Layout([w])
    fs, gs = Evaluator(obj_s, ls).value_and_grad(x)
    fdn, gd = Evaluator(obj_d, ld).value_and_grad(x)
    assert fs == pytest.approx(fdn, rel=1e-12)
    np.testing.assert_allclose(gs, gd, atol=1e-12)


def test_restricted_gradient_and_sparse_iterate():
    """coords= computes exactly those gradient entries; sparse iterates use column subsets."""
    Xb = RNG.standard_normal((50, 300))
    yb = RNG.standard_normal(50)
    w = sm.Variable(301, name="w")
    obj = sm.sum_squares(Xb @ w[1:] + w[0] - yb) / 100
    lay = Layout([w])
    ev = Evaluator(obj, lay)
    x = np.zeros(301)
    x[[0, 4, 17, 200]] = RNG.standard_normal(4)
    f, g = ev.value_and_grad(x)
    r = Xb @ x[1:] + x[0] - yb
    assert f == pytest.approx(r @ r / 100)
    np.testing.assert_allclose(g[1:], Xb.T @ r / 50, atol=1e-12)
    coords = np.array([0, 3, 99])
    _, gr = ev.value_and_grad(x, coords=coords)
    np.testing.assert_allclose(gr[coords], g[coords], atol=1e-12)


def test_user_function_derivatives_and_curvature():
    phi = func("phi", "log(1 + exp(-z))")
    assert phi.curvature == "convex" and phi.monotone == "decreasing"
    w = sm.Variable(5, name="w")
    fd_check(sm.mean(phi(v * (X @ w))))
    z = np.linspace(-30, 30, 101)
    np.testing.assert_allclose(phi.fn(z), np.logaddexp(0, -z), rtol=1e-10)
    psi = func("psi", "z^3")
    assert psi.curvature == "unknown"
    assert func("h", "sqrt(1 + z^2)").curvature == "convex"
    assert func("c", "log(z)").curvature == "concave"


def test_symmetric_variable_gradient_is_symmetric():
    O = sm.Variable((3, 3), name="O", symmetric=True)
    C = RNG.standard_normal((3, 3))  # not symmetric
    lay = Layout([O])
    _, g = Evaluator(sm.trace(C @ O), lay).value_and_grad(np.eye(3).ravel())
    G = g.reshape(3, 3)
    np.testing.assert_allclose(G, G.T)
    np.testing.assert_allclose(G, (C + C.T) / 2)


def test_data_functions_values():
    """cov is the (1/n) centred sample covariance; rows/cols give shapes; standardize,
    normalize_columns and onehot do what their names say."""
    Z = RNG.standard_normal((40, 3)) * [1.0, 2.0, 3.0] + 5.0
    np.testing.assert_allclose(sm.cov(Z).value, np.cov(Z, rowvar=False, bias=True))
    assert sm.rows(Z).value == 40 and sm.cols(Z).value == 3
    S = sm.standardize(Z).value
    np.testing.assert_allclose(S.mean(axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(S.std(axis=0), 1)
    np.testing.assert_allclose(np.linalg.norm(sm.normalize_columns(Z).value, axis=0), 1)
    np.testing.assert_array_equal(sm.onehot(np.array([2.0, 0.0, 2.0, 1.0])).value, np.eye(3)[[2, 0, 2, 1]])
