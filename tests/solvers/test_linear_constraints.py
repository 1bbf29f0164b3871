"""The thresholding solvers under linear constraints: skscope's layer test problem (its
test_layer.py: make_regression(100, 5, n_informative=2), sum of squares, sparsity 2, with the
linear, simplex, non-negative and box layers) solved feasibly and to the optimum found by
enumerating every support; a long-only minimum-variance portfolio near its enumerated optimum;
the refusal of solvers that cannot keep an equality."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.datasets import factor_returns
from sparsemodel.errors import SolverError


def skscope_problem():
    from sklearn.datasets import make_regression

    X, Y, _ = make_regression(100, 5, n_informative=2, coef=True, random_state=1)
    return X, Y


LAYERS = {
    "linear": lambda w: [sm.sum(w) == 1],
    "simplex": lambda w: [sm.sum(w) == 1, w >= 0],
    "nonneg": lambda w: [w >= 0],
    "box": lambda w: [sm.box(w, -1.0, 1.0)],
}


def enumerate_optimum(lp, p, k):
    return min(lp.restricted_minimize(np.array(S)).f for S in itertools.combinations(range(p), k))


@pytest.mark.parametrize("layer", sorted(LAYERS))
@pytest.mark.parametrize("solver", ["grahtp", "fgrahtp", "iht"])
def test_skscope_layer_problems_are_solved_feasibly_and_optimally(layer, solver):
    X, Y = skscope_problem()
    w = sm.Variable(5, name="w")
    prob = sm.Problem(sm.minimize(sm.sum_squares(Y - X @ w)), [sm.nnz(w) <= 2, *LAYERS[layer](w)])
    r = prob.solve(solver)
    x = r.x
    assert np.count_nonzero(x) <= 2
    if layer in ("linear", "simplex"):
        assert np.sum(x) == pytest.approx(1)  # skscope's own criterion
    if layer in ("simplex", "nonneg"):
        assert np.all(x >= 0)
    if layer == "box":
        assert np.all(np.abs(x) <= 1 + 1e-12)
    best = enumerate_optimum(prob.lower(), 5, 2)
    # grahtp and fgrahtp reach the optimum; iht (fixed step 1/L_s, no refit) within 5% of it
    slack = 1e-8 if solver != "iht" else 0.05
    assert r.objective <= best * (1 + slack) + 1e-8


def test_a_long_only_portfolio_is_near_its_enumerated_optimum():
    R, _ = factor_returns(250, p=50, factors=3, seed=0)
    worst = 0.0
    for seed in range(3):
        cols = np.random.default_rng(seed).choice(50, 12, replace=False)
        S = np.cov(R[:, cols].T)
        w = sm.Variable(12, name="w")
        prob = sm.Problem(sm.minimize(sm.quad_form(w, S)), [sm.nnz(w) <= 3, sm.sum(w) == 1, w >= 0])
        r = prob.solve()  # the default (auto picks grahtp for linear constraints)
        assert r.solver == "grahtp" and np.isclose(r.x.sum(), 1) and np.all(r.x >= 0)
        worst = max(worst, r.objective / enumerate_optimum(prob.lower(), 12, 3))
    assert worst <= 1.05, worst


def test_solvers_that_cannot_keep_an_equality_say_so_at_the_constraint():
    text = "var w[4]\nminimize sum_squares(w - [1, 2, 3, 4])\nsubject to\n    nnz(w) <= 2\n    sum(w) == 1\n"
    prob = sm.parse(text, name="m.sm")
    with pytest.raises(SolverError) as e:
        prob.solve("omp")
    assert e.value.span.line == 5 and "grahtp, fgrahtp, iht" in e.value.hint


@pytest.mark.slow
@pytest.mark.parametrize("layer", ["simplex", "linear"])
def test_no_worse_than_skscope_on_its_layer_problem(layer):
    """skscope's HTPSolver with the same layer (a reparametrization: params / sum(params)) against
    our grahtp with the constraint itself."""
    jax = pytest.importorskip("jax")
    skscope = pytest.importorskip("skscope")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from skscope import layer as sk_layer

    X, Y = skscope_problem()
    Xj, Yj = jnp.array(X), jnp.array(Y)
    lay = sk_layer.SimplexConstraint(5) if layer == "simplex" else sk_layer.LinearConstraint(5)
    sk = skscope.HTPSolver(5, 2, random_state=42)
    ws = np.asarray(sk.solve(lambda p: jnp.sum(jnp.square(Yj - Xj @ p)), layers=[sk_layer.Identity(5), lay]))
    w = sm.Variable(5, name="w")
    r = sm.Problem(sm.minimize(sm.sum_squares(Y - X @ w)), [sm.nnz(w) <= 2, *LAYERS[layer](w)]).solve("grahtp")
    assert r.objective <= float(np.sum((Y - X @ ws) ** 2)) * (1 + 1e-9)
