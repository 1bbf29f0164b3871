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
from sparsemodel.datasets import factor_model, factor_returns
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


# ---------------------------------------------------------------------- seeded random portfolios

PORTFOLIOS = ["long-only", "budget", "A w == b", "A w <= b"]


def portfolio(kind: str, p: int, k: int, seed: int) -> sm.Problem:
    """Minimum variance w'Sw of k of p assets, S of a random 2-factor model (datasets.factor_model),
    under: long-only (sum(w) == 1, w >= 0); budget (sum(w) == 1, shorts allowed); A w == b
    (Markowitz: sum(w) == 1 and a target return mu'w == the 70th percentile of the expected returns
    mu, shorts allowed); A w <= b (long-only with three sectors capped at 45 %)."""
    S, mu = factor_model(p, 2, seed)
    w = sm.Variable(p, name="w")
    cons = [sm.nnz(w) <= k]
    if kind == "A w == b":
        cons.append(sm.Data(np.vstack([np.ones(p), mu])) @ w == np.array([1.0, float(np.quantile(mu, 0.7))]))
    else:
        cons.append(sm.sum(w) == 1)
    if kind in ("long-only", "A w <= b"):
        cons.append(w >= 0)
    if kind == "A w <= b":
        sectors = np.zeros((3, p))
        sectors[np.arange(p) % 3, np.arange(p)] = 1.0
        cons.append(sm.Data(sectors) @ w <= 0.45)
    return sm.Problem(sm.minimize(sm.quad_form(w, S)), cons)


def enumerated(lp, p: int, k: int) -> float:
    """The optimum over every support of k assets (each a restricted solve under the constraints)."""
    return min(lp.restricted_minimize(np.array(T)).f for T in itertools.combinations(range(p), k))


# seeds where the search of the previous version stopped above the optimum (measured: by 31 % and 15 %,
# 31 % and 3 %, 11 % and 22 %, 11 % and 22 %), two per form
AUTO_SEEDS = {"long-only": (3, 4), "budget": (3, 6), "A w == b": (2, 9), "A w <= b": (1, 3)}


@pytest.mark.parametrize("kind", PORTFOLIOS)
def test_auto_reaches_the_enumerated_optimum_on_random_portfolios(kind):
    """auto under linear constraints ends at the best of every support (p = 12, k = 4: 495 supports),
    feasible, on seeded portfolios other than the bundled example (the old search ranked entering
    assets by their raw gradient and stopped 1 % to 20 % above the optimum on these draws)."""
    p, k = 12, 4
    for seed in AUTO_SEEDS[kind]:
        prob = portfolio(kind, p, k, seed)
        lp = prob.lower()
        best = enumerated(lp, p, k)
        r = prob.solve()
        assert r.solver == "auto" and np.count_nonzero(r.x) <= k and lp.linear.contains(r.x)
        assert r.objective <= best * (1 + 1e-7), (seed, r.objective / best)


@pytest.mark.parametrize("kind", PORTFOLIOS)
def test_bnb_proves_the_enumerated_optimum_of_random_portfolios(kind):
    """bnb takes the linear constraints (its relaxation keeps them) and proves the optimum: status
    optimal, the objective the best of every support, the bound at most that and within gap_tol of
    it (before, bnb refused linear constraints)."""
    p, k = 12, 4
    seed = AUTO_SEEDS[kind][0]
    prob = portfolio(kind, p, k, seed)
    lp = prob.lower()
    best = enumerated(lp, p, k)
    r = prob.solve("bnb")
    assert r.status == "optimal" and lp.linear.contains(r.x) and np.count_nonzero(r.x) <= k
    assert r.objective == pytest.approx(best, rel=1e-7)
    assert r.lower_bound <= best * (1 + 1e-9) and r.gap <= 1e-4


def _cvxpy_optimum(prob, k: int) -> float:
    """The optimum by enumeration, every support's convex problem solved by cvxpy (a reference that
    shares nothing with the restricted solves or the relaxation)."""
    cp = pytest.importorskip("cvxpy")
    from sparsemodel.lowering.cvxpy_lower import restricted_cvxpy

    lp = prob.lower()
    P_all = lp.linear.polyhedron(np.arange(lp.n), lp.box)
    C = lp.set.coords
    best = np.inf
    for T in itertools.combinations(range(len(C)), k):
        cols = np.union1d(C[list(T)], lp.set.free)
        P = lp.linear.polyhedron(cols, lp.box)
        try:
            u, _ = restricted_cvxpy(lp.objective, lp.layout, cols, bounds=(P.lo, P.hi), linear=P)
        except Exception:  # noqa: BLE001 - an infeasible support (cvxpy reports no optimum)
            continue
        x = np.zeros(lp.n)
        x[cols] = u
        if P_all.violation(x) <= 1e-6:
            best = min(best, float(lp.f(x)))
    del cp
    return best


def _bound_cases(seeds):
    """Small problems of several forms: the four portfolios (the simplex makes 0 infeasible), a
    logistic loss with a ridge on the simplex (the plain relaxation: its big-M box is the bound
    sum(w) == 1 with w >= 0 implies), and least squares whose sum constraint reads the free
    intercept (the shifted form does not apply: the free coordinate is not eliminated)."""
    out = []
    for kind in PORTFOLIOS:
        for seed in seeds:
            out.append((f"{kind} {seed}", portfolio(kind, 7, 3, 100 + seed)))
    for seed in seeds:
        rng = np.random.default_rng(200 + seed)
        X = rng.standard_normal((30, 7))
        v = np.sign(X[:, 0] - 0.5 * X[:, 1] + 0.3 * rng.standard_normal(30))
        w = sm.Variable(7, name="w")
        obj = sm.sum(sm.logistic(-v * (sm.Data(X) @ w))) + 0.5 * sm.sum_squares(w)
        out.append((f"logistic {seed}", sm.Problem(sm.minimize(obj), [sm.nnz(w) <= 3, sm.sum(w) == 1, w >= 0])))
        y = X @ np.array([1.0, -0.5, 0.7, 0, 0, 0, 0]) + 0.3 * rng.standard_normal(30)
        u = sm.Variable(8, name="u")
        obj = sm.sum_squares(sm.Data(X) @ u[1:] + u[0] - y) + 0.1 * sm.sum_squares(u[1:])
        out.append((f"intercept row {seed}", sm.Problem(sm.minimize(obj), [sm.nnz(u[1:]) <= 3, sm.sum(u) == 1])))
    return out


def test_no_bound_under_linear_constraints_exceeds_the_enumerated_optimum():
    """Soundness: on every case, bnb's proved bound, its root bound, and the fast and tight bounds at
    auto's answer are at most the optimum found by enumeration with cvxpy (up to cvxpy's own
    accuracy, 1e-7 relative), and bnb's answer is that optimum."""
    check_bounds(_bound_cases([0]))


@pytest.mark.slow
def test_no_bound_under_linear_constraints_exceeds_the_enumerated_optimum_on_many_draws():
    check_bounds(_bound_cases(range(1, 9)))


def check_bounds(cases) -> None:
    from sparsemodel.lowering.bound import lower_bound

    for name, prob in cases:
        best = _cvxpy_optimum(prob, 3)
        scale = max(abs(best), 1.0)
        r = prob.solve("bnb")
        lp = prob.lower()
        a = prob.solve()
        x = lp.layout.pack(a.values)
        bounds = [r.lower_bound, r.extra["root_bound"]]
        bounds += [b for b in (lower_bound(lp, x, m).value for m in ("fast", "tight")) if b is not None]
        assert r.status == "optimal" and r.objective == pytest.approx(best, rel=1e-6, abs=1e-9), name
        assert max(bounds) <= best + 1e-7 * scale, (name, max(bounds) - best)
