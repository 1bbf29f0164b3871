"""The model on [X, X~]: for every loss, the augmented model is the one a user would write by hand
on the augmented design (same objective at every point, same free coordinates, k units among 2p),
and a model whose coefficients have no design column is refused at its place."""

from __future__ import annotations

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.inference.augment import plan
from sparsemodel.inference.base import InferenceError
from sparsemodel.lowering.lowered import LoweredProblem

RNG = np.random.default_rng(0)
N, P = 40, 6
X = RNG.standard_normal((N, P))
XK = RNG.standard_normal((N, P))
Y = X[:, 0] - X[:, 1] + 0.5 * RNG.standard_normal(N)


def same_objective(aug: sm.Problem, hand: sm.Problem, trials: int = 5) -> None:
    """The two models' objectives agree at random points (their variables in the same layout)."""
    la, lh = LoweredProblem(aug), LoweredProblem(hand)
    assert la.n == lh.n
    rng = np.random.default_rng(1)
    for _ in range(trials):
        x = 0.3 * rng.standard_normal(la.n)
        fa, fh = la.oracle.f(x), lh.oracle.f(x)
        assert fa == pytest.approx(fh, rel=1e-12, abs=1e-12)


def test_least_squares_with_an_intercept_column_and_a_ridge():
    X1 = np.column_stack([np.ones(N), X])
    w = sm.Variable(P + 1, name="w")
    prob = sm.Problem(
        sm.minimize(sm.sum_squares(X1 @ w - Y) / (2 * N) + 0.1 * sm.sum_squares(w[1:])), [sm.nnz(w[1:]) <= 3]
    )
    pl = plan(prob)
    assert pl.p == P and np.array_equal(pl.X, X) and list(pl.free_rows) == [0]
    aug = pl.augment(XK)
    v = sm.Variable(2 * P + 1, name="w")
    hand = sm.Problem(
        sm.minimize(sm.sum_squares(np.column_stack([X1, XK]) @ v - Y) / (2 * N) + 0.1 * sm.sum_squares(v[1:])),
        [sm.nnz(v, free=[0]) <= 3],
    )
    same_objective(sm.Problem.of(aug), hand)
    lp = LoweredProblem(aug)
    assert lp.set.n_units == 2 * P and lp.set.budget == 3 and list(lp.set.free) == [0]
    # and by numpy: ||[1 X Xk] w - y||^2 / 2n + 0.1 ||w[1:]||^2
    x = np.random.default_rng(2).standard_normal(2 * P + 1)
    r = np.column_stack([X1, XK]) @ x - Y
    assert lp.oracle.f(x) == pytest.approx(r @ r / (2 * N) + 0.1 * x[1:] @ x[1:], rel=1e-12)


def test_logistic_with_a_separate_intercept_and_the_model_file(tmp_path):
    lab = np.where(Y > 0, 1.0, -1.0)
    np.savetxt(tmp_path / "X.csv", X, delimiter=",", header=",".join(f"g{j}" for j in range(P)), comments="")
    np.savetxt(tmp_path / "y.csv", lab)
    (tmp_path / "m.sm").write_text(
        'data X : matrix from "X.csv"\ndata y : vector from "y.csv"\nvar w[cols(X)]\nvar b\n'
        "minimize mean(logistic(-y * (X @ w + b))) + 0.01 * sum_squares(w)\nsubject to\n    nnz(w) <= 2\n"
    )
    prob = sm.load(tmp_path / "m.sm")
    pl = plan(prob)
    assert pl.names == [f"g{j}" for j in range(P)]
    aug = sm.Problem.of(pl.augment(XK))
    w, b = sm.Variable(2 * P, name="w"), sm.Variable(name="b")
    hand = sm.Problem(
        sm.minimize(sm.mean(sm.logistic(-lab * (np.column_stack([X, XK]) @ w + b))) + 0.01 * sm.sum_squares(w)),
        [sm.nnz(w) <= 2],
    )
    same_objective(aug, hand)
    # the knockoffs are named after their variables
    res = aug.solve("auto", k=2)
    assert res.labels("w")[P:] == [f"g{j}~" for j in range(P)]


def test_poisson_gamma_and_a_user_func():
    counts = RNG.poisson(np.exp(0.3 * X[:, 0]))
    w = sm.Variable(P, name="w")
    for loss in (
        lambda z: sm.mean(sm.exp(z) - counts * z),  # Poisson
        lambda z: sm.mean(z + np.abs(Y) * sm.exp(-z)),  # Gamma (log link)
    ):
        prob = sm.Problem(sm.minimize(loss(X @ w)), [sm.nnz(w) <= 2])
        v = sm.Variable(2 * P, name="w")
        hand = sm.Problem(sm.minimize(loss(np.column_stack([X, XK]) @ v)), [sm.nnz(v) <= 2])
        same_objective(sm.Problem.of(plan(prob).augment(XK)), hand)
    text = (
        "data X : matrix\ndata y : vector\nfunc phi(z) = log(1 + exp(-z))\nvar w[cols(X)]\n"
        "minimize mean(phi(y * (X @ w)))\nsubject to\n    nnz(w) <= 2\n"
    )
    lab = np.where(Y > 0, 1.0, -1.0)
    prob = sm.parse(text, data={"X": X, "y": lab})
    hand = sm.parse(text, data={"X": np.column_stack([X, XK]), "y": lab})
    same_objective(sm.Problem.of(plan(prob).augment(XK)), hand)


def test_cox_and_the_multinomial_with_row_groups():
    time = RNG.exponential(1.0, N).round(1)
    event = (RNG.uniform(size=N) < 0.7).astype(float)
    w = sm.Variable(P, name="w")
    prob = sm.Problem(sm.minimize(sm.cox(X @ w, time, event) / N), [sm.nnz(w) <= 2])
    v = sm.Variable(2 * P, name="w")
    hand = sm.Problem(sm.minimize(sm.cox(np.column_stack([X, XK]) @ v, time, event) / N), [sm.nnz(v) <= 2])
    same_objective(sm.Problem.of(plan(prob).augment(XK)), hand)

    K = 3
    Yh = np.eye(K)[RNG.integers(0, K, N)]
    X1 = np.column_stack([np.ones(N), X])
    W = sm.Variable((P + 1, K), name="W")
    multi = sm.Problem(
        sm.minimize((sm.sum(sm.logsumexp(X1 @ W, axis=1)) - sm.sum(Yh * (X1 @ W))) / N),
        [sm.nnz(W[1:, :], groups="rows") <= 2],
    )
    pl = plan(multi)
    assert pl.p == P and list(pl.unit_rows) == list(range(1, P + 1)) and list(pl.free_rows) == [0]
    aug = sm.Problem.of(pl.augment(XK))
    V = sm.Variable((2 * P + 1, K), name="W")
    Xa = np.column_stack([X1, XK])
    hand = sm.Problem(
        sm.minimize((sm.sum(sm.logsumexp(Xa @ V, axis=1)) - sm.sum(Yh * (Xa @ V))) / N),
        [sm.nnz(V[1:, :], groups="rows") <= 2],
    )
    same_objective(aug, hand)
    lp = LoweredProblem(aug)
    assert lp.set.n_units == 2 * P and len(lp.set.free) == K  # the intercept row stays free


def test_uses_without_a_design_column_are_refused_at_their_place():
    w = sm.Variable(P, name="w")
    S = X.T @ X / N
    with pytest.raises(InferenceError, match="quad_form") as err:
        plan(sm.Problem(sm.minimize(sm.quad_form(w, S) - Y @ X @ w / N), [sm.nnz(w) <= 2]))
    assert "X @ w" in err.value.hint or "design" in err.value.hint
    with pytest.raises(InferenceError, match="group knockoffs"):
        plan(sm.Problem(sm.minimize(sm.sum_squares(X @ w - Y)), [sm.nnz(w, groups=[0, 0, 1, 1, 2, 2]) <= 1]))
    with pytest.raises(InferenceError, match="one sparsity constraint"):
        plan(sm.Problem(sm.minimize(sm.sum_squares(X @ w - Y))))
    with pytest.raises(InferenceError, match="constrains w"):
        plan(sm.Problem(sm.minimize(sm.sum_squares(X @ w - Y)), [sm.nnz(w) <= 2, w >= -1]))


def test_a_refusal_names_the_line_of_the_model_file(tmp_path):
    np.save(tmp_path / "S.npy", X.T @ X / N)
    np.save(tmp_path / "c.npy", X.T @ Y / N)
    (tmp_path / "q.sm").write_text(
        'data S : matrix from "S.npy"\ndata c : vector from "c.npy"\nvar w[6]\n'
        "minimize quad_form(w, S) / 2 - c' @ w\nsubject to\n    nnz(w) <= 2\n"
    )
    prob = sm.load(tmp_path / "q.sm")
    with pytest.raises(InferenceError) as err:
        plan(prob)
    assert err.value.span is not None and err.value.span.line == 4
