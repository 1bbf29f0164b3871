"""The thresholding solvers under linear constraints: skscope's layer test problem (its
test_layer.py: make_regression(100, 5, n_informative=2), sum of squares, sparsity 2, with the
linear, simplex, non-negative and box layers) solved feasibly and to the optimum found by
enumerating every support; minimum-variance portfolios at the optimum of cvxpy on every support;
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
@pytest.mark.parametrize("solver", ["auto", "grahtp", "fgrahtp", "iht"])
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
    # auto, grahtp and fgrahtp reach the optimum; iht (fixed step 1/L_s, no refit) within 5% of it
    slack = 1e-8 if solver != "iht" else 0.05
    assert r.objective <= best * (1 + slack) + 1e-8


def cvxpy_support_values(S, k, long):
    """The minimum variance on every support of k assets: one convex QP each, solved by cvxpy."""
    cp = pytest.importorskip("cvxpy")
    out = {}
    for T in itertools.combinations(range(S.shape[0]), k):
        v = cp.Variable(k)
        cons = [cp.sum(v) == 1] + ([v >= 0] if long else [])
        prob = cp.Problem(cp.Minimize(cp.quad_form(v, S[np.ix_(T, T)])), cons)
        prob.solve(solver=cp.CLARABEL)
        out[T] = prob.value
    return out


@pytest.mark.parametrize("long", [True, False], ids=["long-only", "budget-only"])
def test_auto_reaches_the_optimum_of_every_support_solved_by_cvxpy(long):
    """Minimum variance of 3 of 8 assets (56 supports, each a QP in cvxpy): auto (the default)
    reaches the best of them; grahtp's answer is the QP's optimum on its own support (the
    restricted solve keeps the constraints), and it is the global one in some draws only (measured:
    3 of 5, worst 6.3% above; this is what auto's exact swap search is for)."""
    R, _ = factor_returns(250, p=50, factors=3, seed=0)
    misses = 0
    for seed in range(5):
        cols = np.random.default_rng(seed).choice(50, 8, replace=False)
        S = np.cov(R[:, cols].T)
        w = sm.Variable(8, name="w")
        cons = [sm.nnz(w) <= 3, sm.sum(w) == 1] + ([w >= 0] if long else [])
        prob = sm.Problem(sm.minimize(sm.quad_form(w, S)), cons)
        values = cvxpy_support_values(S, 3, long)
        best = min(values.values())
        r = prob.solve()
        assert r.solver == "auto" and np.isclose(r.x.sum(), 1) and np.count_nonzero(r.x) <= 3
        if long:
            assert np.all(r.x >= 0)
        assert r.objective == pytest.approx(best, rel=1e-7), seed
        g = prob.solve("grahtp")
        T = tuple(np.sort(np.argsort(-np.abs(g.x))[:3]))
        assert g.objective == pytest.approx(values[T], rel=1e-7)
        assert g.objective >= best * (1 - 1e-7)
        misses += g.objective > best * (1 + 1e-6)
    assert misses >= 1  # the search is not idle: grahtp alone misses at least one of these optima


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
