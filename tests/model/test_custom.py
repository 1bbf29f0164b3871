"""custom_loss, the escape hatch: skscope's test_no_autodiff problem (a loss given with its
gradient, and Hessian) solved by every first-order solver, one answer with the same loss written
with atoms, gradients and Hessian-vector products through the lowering against differences, rank
constraints, several variables, optimality by enumeration, the solvers that need more refusing
with the names of those that accept it, and the user's mistakes reported."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.errors import ModelError

FIRST_ORDER = ("auto", "grahtp", "fgrahtp", "iht", "omp", "forward", "ompr", "els", "arht", "grasp", "foba")


def skscope_linear(seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """skscope's create_linear_model: make_regression(100, 5, n_informative=2), written out
    (a Gaussian design, two nonzero coefficients, no noise) so the test needs no scikit-learn."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((100, 5))
    coef = np.zeros(5)
    coef[[1, 3]] = rng.uniform(10, 90, 2)
    return X, X @ coef, coef


def least_squares(X: np.ndarray, Y: np.ndarray):
    def loss(w):
        r = Y - X @ w
        return float(r @ r), -2.0 * X.T @ r

    def hvp(w, v):
        return 2.0 * X.T @ (X @ v)

    return loss, hvp


@pytest.mark.parametrize("with_hvp", [False, True])
def test_skscope_no_autodiff_problem_every_first_order_solver(with_hvp):
    X, Y, coef = skscope_linear()
    loss, hvp = least_squares(X, Y)
    w = sm.Variable(5, name="w")
    prob = sm.Problem(sm.minimize(sm.custom_loss(loss, w, hvp=hvp if with_hvp else None)), [sm.nnz(w) <= 2])
    assert ("Newton" in prob.lower().structure) == with_hvp
    ref = sm.Problem(sm.minimize(sm.sum_squares(Y - X @ w)), [sm.nnz(w) <= 2]).solve()
    for solver in FIRST_ORDER:
        r = prob.solve(solver)
        assert set(r.support) == set(np.flatnonzero(coef)), solver
        assert r.objective <= ref.objective + 1e-6 * max(1.0, float(Y @ Y)), solver


def test_gradients_and_hessian_products_through_the_lowering():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 4))
    y = rng.integers(0, 2, 30) * 2.0 - 1.0

    def logistic(z):  # a loss of the affine argument z = X w + b: the chain rule is the package's
        m = -y * z
        p = 1.0 / (1.0 + np.exp(-m))
        return float(np.logaddexp(0, m).sum()), -y * p

    def logistic_hvp(z, v):
        m = -y * z
        p = 1.0 / (1.0 + np.exp(-m))
        return p * (1 - p) * v

    w, b = sm.Variable(4, name="w"), sm.Variable(name="b")
    obj = sm.custom_loss(logistic, X @ w + b, hvp=logistic_hvp) + 0.1 * sm.sum_squares(w)
    from tests.model.test_gradients import fd_check

    fd_check(obj)
    lp = sm.Problem(sm.minimize(obj), [sm.nnz(w) <= 2]).lower()
    assert lp.design is not None
    x = rng.standard_normal(lp.n) * 0.5
    v = rng.standard_normal(lp.n)
    h = 1e-6
    fd = (lp.value_and_grad(x + h * v)[1] - lp.value_and_grad(x - h * v)[1]) / (2 * h)
    np.testing.assert_allclose(lp.oracle.hvp(x, v), fd, atol=1e-6)
    # the same model with the built-in atom: one answer
    same = sm.Problem(sm.minimize(sm.sum(sm.logistic(-y * (X @ w + b))) + 0.1 * sm.sum_squares(w)), [sm.nnz(w) <= 2])
    a = sm.Problem(sm.minimize(obj), [sm.nnz(w) <= 2]).solve()
    assert a.objective == pytest.approx(same.solve().objective, rel=1e-8)


def test_optimal_on_every_support():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((40, 6))
    Y = X @ np.array([1.0, 0, 0.5, 0, 0, -0.7]) + 0.5 * rng.standard_normal(40)
    loss, _ = least_squares(X, Y)
    best = min(
        float(np.sum((Y - X[:, list(S)] @ np.linalg.lstsq(X[:, list(S)], Y, rcond=None)[0]) ** 2))
        for S in itertools.combinations(range(6), 2)
    )
    w = sm.Variable(6, name="w")
    prob = sm.Problem(sm.minimize(sm.custom_loss(loss, w)), [sm.nnz(w) <= 2])
    for solver in ("auto", "omp", "ompr", "els", "grahtp"):
        assert prob.solve(solver).objective <= best * (1 + 1e-7), solver


def test_rank_constraint_and_several_variables():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 6))
    B = rng.standard_normal((6, 1)) @ rng.standard_normal((1, 4))
    Y = X @ B + 1.0 + 0.01 * rng.standard_normal((80, 4))

    def loss(W, c):  # two variables: a gradient per variable
        R = X @ W + c - Y
        return float((R * R).sum()), (2 * X.T @ R, 2 * R.sum(axis=0))

    W, c = sm.Variable((6, 4), name="W"), sm.Variable(4, name="c")
    prob = sm.Problem(sm.minimize(sm.custom_loss(loss, W, c)), [sm.rank(W) <= 1])
    ref = sm.Problem(sm.minimize(sm.sum_squares(X @ W + c - Y)), [sm.rank(W) <= 1]).solve()
    for solver in ("grahtp", "iht", "fgrahtp", "auto"):
        r = prob.solve(solver)
        assert r.objective == pytest.approx(ref.objective, rel=1e-5), solver
        assert np.linalg.matrix_rank(r.values["W"], tol=1e-8) <= 1


def welsch_problem(seed: int, c: float = 1.0):
    """skscope's robust regression test problem (``test_RobustRegression``): n = 1000, p = 10, 5
    coefficients of 1, standard Cauchy noise (gross outliers), with the Welsch loss
    rho(r) = (c^2 / 2)(1 - exp(-(r / c)^2)) (skscope's -exp(-r^2 / gamma) with gamma = c^2, up to
    its constant and scale) as a custom_loss, and its Hessian-vector product."""
    rng = np.random.default_rng(seed)
    n, p = 1000, 10
    X = rng.standard_normal((n, p))
    noise = rng.standard_cauchy(n)
    beta = np.zeros(p)
    beta[rng.choice(p, 5, replace=False)] = 1.0
    y = X @ beta + noise

    def welsch(w):
        r = y - X @ w
        e = np.exp(-((r / c) ** 2))
        return float(c**2 / 2 * np.sum(1 - e)), -X.T @ (r * e)

    def welsch_hvp(w, v):  # rho'' = e (1 - 2 (r/c)^2): negative beyond |r| = c / sqrt 2
        r = y - X @ w
        e = np.exp(-((r / c) ** 2))
        return X.T @ (e * (1 - 2 * (r / c) ** 2) * (X @ v))

    return X, y, beta, welsch, welsch_hvp


@pytest.mark.parametrize("with_hvp", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_nonconvex_welsch_loss_gets_a_local_answer_that_finds_the_truth(seed, with_hvp):
    """The docs promise a local answer for a nonconvex custom loss. The Welsch loss's Hessian at
    the zero start is indefinite (most residuals are beyond c / sqrt 2), so the mean curvature
    (GraHTP's step) and the power-method L_s (IHT's) came out negative or zero and auto, grahtp,
    fgrahtp and iht stopped with 'could not estimate the curvature'. With the magnitudes of those
    estimates they reach the truth (support, and coefficients within 0.3 where least squares is
    off by more than 1 and selects a wrong support)."""
    X, y, beta, welsch, welsch_hvp = welsch_problem(seed)
    truth = sorted(np.flatnonzero(beta))
    w = sm.Variable(X.shape[1], name="w")
    ls = sm.Problem(sm.minimize(sm.sum_squares(y - X @ w)), [sm.nnz(w) <= 5]).solve()
    assert sorted(ls.support) != truth and np.linalg.norm(ls.x - beta) > 1.0
    loss = sm.custom_loss(welsch, w, hvp=welsch_hvp if with_hvp else None)
    prob = sm.Problem(sm.minimize(loss), [sm.nnz(w) <= 5])
    f0 = welsch(np.zeros(X.shape[1]))[0]
    for solver in ("auto", "grahtp", "fgrahtp", "iht"):
        r = prob.solve(solver)
        assert r.status == "converged", solver
        assert sorted(r.support) == truth, solver
        assert np.linalg.norm(r.x - beta) < 0.3, solver
        assert r.objective < f0


def test_solvers_that_need_more_say_so():
    X, Y, _ = skscope_linear()
    loss, _ = least_squares(X, Y)
    w = sm.Variable(5, name="w")
    prob = sm.Problem(sm.minimize(sm.custom_loss(loss, w)), [sm.nnz(w) <= 2])
    with pytest.raises(ModelError, match="custom_loss has no cvxpy counterpart") as err:
        prob.solve("lasso")
    assert "grahtp" in err.value.hint
    with pytest.raises(ModelError, match="finite sum") as err:
        prob.solve("svrg_ht")
    assert "grahtp" in err.value.hint


def test_the_users_mistakes_are_reported(tmp_path):
    X, Y, _ = skscope_linear()
    w = sm.Variable(5, name="w")

    def wrong_shape(v):
        return 1.0, np.zeros(3)

    with pytest.raises(
        ModelError, match=r"custom_loss wrong_shape: its gradient for w has shape \(3,\), expected \(5,\)"
    ):
        sm.Problem(sm.minimize(sm.custom_loss(wrong_shape, w))).solve("grahtp")

    def no_pair(v):
        return 1.0

    with pytest.raises(ModelError, match="did not return"):
        sm.Problem(sm.minimize(sm.custom_loss(no_pair, w))).solve()
    with pytest.raises(ModelError, match="needs a function"):
        sm.custom_loss(np.zeros(3), w)
    (tmp_path / "m.sm").write_text("var w[3]\nminimize custom_loss(w)\n")
    with pytest.raises(ModelError, match="a model file cannot hold") as err:
        sm.load(str(tmp_path / "m.sm"))
    assert err.value.span.line == 2
