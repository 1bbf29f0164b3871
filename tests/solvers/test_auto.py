"""The default pipeline (``auto``), its swap model, GraHTP's step rules and starts inside the loss's
domain. The GLM recoveries and the two spellings of logistic are in
tests/test_auto_glm.py."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.errors import SolverError
from sparsemodel.lowering.swaps import SwapModel
from sparsemodel.numerics.newton import newton


def least_squares(seed: int = 0, n: int = 40, p: int = 12, k: int = 3, intercept: bool = True) -> sm.Problem:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + 0.8 * rng.standard_normal((n, 1))  # correlated columns
    beta = np.zeros(p)
    beta[rng.choice(p, k, replace=False)] = rng.choice([-1.0, 1.0], k) * (0.5 + rng.random(k))
    y = X @ beta + 0.7 * rng.standard_normal(n) + 2.0
    w = sm.Variable(p + 1, name="w")
    fit = X @ w[1:] + w[0] if intercept else X @ w[1:]
    return sm.Problem(sm.minimize(sm.sum_squares(fit - y) + 0.1 * sm.sum_squares(w[1:])), [sm.nnz(w[1:]) <= k])


def softmax(seed: int = 0, n: int = 60, p: int = 10, M: int = 3, k: int = 2, ridge: float = 0.2) -> tuple:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    Wt = np.zeros((p, M))
    rows = rng.choice(p, k, replace=False)
    Wt[rows] = 2.5 * rng.standard_normal((k, M))
    Z = X @ Wt
    P = np.exp(Z - Z.max(1, keepdims=True))
    P /= P.sum(1, keepdims=True)
    Y = np.eye(M)[[rng.choice(M, p=pi) for pi in P]]
    W = sm.Variable((p, M), name="W")
    b = sm.Variable(M, name="b")
    Zs = X @ W + b
    loss = sm.sum(sm.logsumexp(Zs, axis=1)) - sm.sum(Y * Zs) + ridge / 2 * sm.sum_squares(W)
    prob = sm.Problem(sm.minimize(loss), [sm.nnz(W, groups=np.repeat(np.arange(p), M)) <= k])
    return prob, set(rows.tolist())


def units_of(lp, x):
    s = lp.sparsity
    pos = s.support(x)
    return np.unique(s.unit_of[pos]) if s.unit_of is not None else pos


def members_of(lp):
    return lp.set.swap_members()


# ---------------------------------------------------------------------- the swap model


def test_swap_model_is_exact_on_least_squares():
    """On least squares the model of every swap, insertion and removal is f itself (the closed
    forms of orthogonal least squares): checked against restricted solves, free intercept refitted."""
    lp = least_squares(1).lower()
    members = members_of(lp)
    units = np.array([0, 4, 7])
    r = lp.restricted_minimize(units, grad=True)
    model = SwapModel(lp, r.x, r.g, units, members, candidates=3)
    for J, I, delta in model.swaps(limit=8):
        new = np.sort([u for u in units if u != J] + [I])
        assert r.f + delta == pytest.approx(lp.restricted_minimize(new).f, rel=1e-9)
    best_in = model.units_out[np.argmax(model.gain)]
    assert r.f - model.gain.max() == pytest.approx(lp.restricted_minimize(np.union1d(units, [best_in])).f, rel=1e-9)
    for j, J in enumerate(model.units_in):
        rest = np.setdiff1d(units, [J])
        assert r.f + model.removal[j] == pytest.approx(lp.restricted_minimize(rest).f, rel=1e-9)
    # the candidates left out of the pair table (candidates=3) cannot beat its best swap
    best = model.delta.min()
    left_out = np.setdiff1d(np.arange(len(model.units_out)), model.cand)
    assert np.all(-model.gain[left_out] >= best - 1e-12)
    # the warm start of a swap is its exact minimizer on least squares
    J, I, _ = model.swaps(limit=1)[0]
    new = np.sort([u for u in units if u != J] + [I])
    np.testing.assert_allclose(model.warm([(J, I)]), lp.restricted_minimize(new).x, atol=1e-9)


def test_the_warm_start_of_several_swaps_solves_its_indefinite_model():
    """Two entering units that both copy a kept one, their cross Hessian taken as zero: the model's
    matrix is indefinite (no Cholesky factor), and the warm start is still its stationary point."""
    rng = np.random.default_rng(3)
    n, p = 50, 6
    X = rng.standard_normal((n, p))
    X[:, 3] = X[:, 0] + 0.05 * rng.standard_normal(n)
    X[:, 4] = X[:, 0] + 0.05 * rng.standard_normal(n)
    y = X[:, :3] @ np.array([1.0, -1.0, 0.5]) + 0.3 * rng.standard_normal(n)
    w = sm.Variable(p, name="w")
    lp = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) + 0.1 * sm.sum_squares(w)), [sm.nnz(w) <= 3]).lower()
    units = np.array([0, 1, 2])
    r = lp.restricted_minimize(units, grad=True)
    model = SwapModel(lp, r.x, r.g, units, members_of(lp), candidates=3)
    got = model.warm([(1, 3), (2, 4)])
    H = 2.0 * X.T @ X + 0.2 * np.eye(p)
    new, out = np.array([0, 3, 4]), np.array([1, 2])
    Hn = H[np.ix_(new, new)]
    Hn[1, 2] = Hn[2, 1] = 0.0
    assert np.linalg.eigvalsh(Hn)[0] < 0  # indefinite: the branch past the Cholesky factor
    rhs = r.g[new] - H[np.ix_(new, out)] @ r.x[out]
    want = np.zeros(p)
    want[new] = -np.linalg.solve(Hn, rhs)
    want[0] += r.x[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


def test_swap_model_on_groups_is_second_order():
    """Row groups of a softmax: the model's swap values are Newton-model values (close to the exact
    ones for small changes), and the best predicted swap is a true decrease here."""
    prob, rows = softmax(3)
    lp = prob.lower()
    members = members_of(lp)
    wrong = min(set(range(10)) - rows)
    units = np.sort([min(rows), wrong])  # one true row, one wrong
    sel = np.sort(members[units].ravel())
    r = lp.restricted_minimize(sel, grad=True)
    model = SwapModel(lp, r.x, r.g, units, members)
    J, I, delta = model.swaps(limit=1)[0]
    new = np.sort(members[np.sort([u for u in units if u != J] + [I])].ravel())
    exact = lp.restricted_minimize(new).f - r.f
    assert delta < 0 and exact < 0
    assert exact == pytest.approx(delta, rel=0.3)


@pytest.mark.parametrize("rows", ["budget", "markowitz", "long-only"])
def test_swap_model_under_linear_constraints(rows):
    """Under linear equalities the swap model keeps them (the KKT matrix in the bordered inverse, the
    reduced gradient): on a quadratic every single swap, insertion, removal and double swap it
    predicts is the restricted solve's value under the constraints. With w >= 0 the bounds are kept
    only through the working set, so the values are a model: the best single swap it ranks first is
    still a true decrease, and no insertion it rates useless (an asset the bound holds at zero) gains."""
    rng = np.random.default_rng(4)
    p = 10
    B = rng.standard_normal((p, 2))
    S = B @ B.T + np.diag(rng.uniform(0.2, 1.0, p))
    w = sm.Variable(p, name="w")
    cons = [sm.nnz(w) <= 4]
    if rows == "markowitz":  # sum(w) == 1 and a target return
        mu = rng.normal(0.05, 0.03, p)
        cons.append(sm.Data(np.vstack([np.ones(p), mu])) @ w == np.array([1.0, float(np.quantile(mu, 0.7))]))
    else:
        cons.append(sm.sum(w) == 1)
    if rows == "long-only":
        cons.append(w >= 0)
    lp = sm.Problem(sm.minimize(sm.quad_form(w, S)), cons).lower()
    units = np.array([0, 3, 5, 8])
    r = lp.restricted_minimize(units, grad=True)
    model = SwapModel(lp, r.x, r.g, units, members_of(lp), pool=None)

    def value(sup):
        return lp.restricted_minimize(np.sort(np.asarray(sup))).f

    if rows != "long-only":
        assert model.exact
        for J, I, delta in model.every_swap():
            assert r.f + delta == pytest.approx(value([u for u in units if u != J] + [I]), rel=1e-7, abs=1e-9)
        for i, I in enumerate(model.units_out):
            assert r.f - model.gain[i] == pytest.approx(value(np.append(units, I)), rel=1e-7, abs=1e-9)
        for j, J in enumerate(model.units_in):
            assert r.f + model.removal[j] == pytest.approx(value(np.setdiff1d(units, [J])), rel=1e-7, abs=1e-9)
        doubles = model.double_swaps()
        assert len(doubles) == 6 * 15  # every pair out (4 choose 2) against every pair in (6 choose 2)
        for (J1, J2), (I1, I2), delta in doubles[:: max(len(doubles) // 20, 1)]:
            new = [u for u in units if u not in (J1, J2)] + [I1, I2]
            assert r.f + delta == pytest.approx(value(new), rel=1e-7, abs=1e-9)
    else:
        assert not model.exact
        J, I, delta = model.swaps(limit=1)[0]
        assert delta < 0 and value([u for u in units if u != J] + [I]) < r.f
        for i, I in enumerate(model.units_out):
            if model.gain[i] == 0:
                assert value(np.append(units, I)) >= r.f - 1e-9 * abs(r.f)
    # the floor the verification skips on (the equalities alone) is never above a swap's exact value
    for J, I, _ in model.every_swap():
        assert r.f + model.floor([J], [I]) <= value([u for u in units if u != J] + [I]) + 1e-9 * abs(r.f)
    for (J1, J2), (I1, I2), _ in model.double_swaps()[::7]:
        new = [u for u in units if u not in (J1, J2)] + [I1, I2]
        assert r.f + model.floor([J1, J2], [I1, I2]) <= value(new) + 1e-9 * abs(r.f)


# ---------------------------------------------------------------------- the pipeline


def test_auto_reports_its_pipeline_and_never_ends_above_its_start():
    prob = least_squares(2)
    r = prob.solve()
    assert r.solver == "auto" and r.status == "converged"
    # least squares: two starts (solves are cheap), the better end point kept
    assert [s["start"] for s in r.extra["starts"]] == ["grahtp", "screen"]
    assert r.objective == min(s["objective"] for s in r.extra["starts"])
    assert r.extra["pipeline"] == [r.extra["start"], "swap search"]
    assert all(s["objective"] <= s["start_objective"] + 1e-12 for s in r.extra["starts"])
    g = prob.solve("auto", start="grahtp")
    assert g.extra["pipeline"] == ["grahtp", "swap search"] and len(g.extra["starts"]) == 1
    assert len(r.support) == 3
    o = prob.solve("auto", start="omp")
    assert o.extra["pipeline"] == ["omp", "swap search"]
    g = prob.solve("auto", search=False)  # the start alone
    assert g.extra["pipeline"] == ["grahtp"] and g.objective == pytest.approx(prob.solve("grahtp").objective, rel=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_auto_ends_at_a_one_swap_local_minimum_on_least_squares(seed):
    """No exchange of one selected for one unselected coordinate lowers f at auto's answer (every
    swap solved exactly), and the answer is never worse than GraHTP's, OMPR's or ELS's."""
    prob = least_squares(seed, k=4)
    lp = prob.lower()
    r = prob.solve("auto")
    units = np.asarray(r.support) - 1  # positions into w[1:]
    for J, I in itertools.product(units, np.setdiff1d(np.arange(12), units)):
        new = np.sort(np.append(np.setdiff1d(units, [J]), I))
        assert lp.restricted_minimize(new).f >= r.objective - 1e-9 * abs(r.objective)
    for other in ("grahtp", "ompr", "els"):
        assert r.objective <= prob.solve(other).objective * (1 + 1e-12)
    assert r.extra["starts"][0]["start_objective"] == pytest.approx(prob.solve("grahtp").objective, rel=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_init_seeds_one_search_filled_to_k_by_model_gains(seed):
    """init= (what a path over k passes): one search from the given support; a start with fewer
    than k units is filled to k by the units of largest model gain, one with more is cut to its k
    largest; the end point is a one-swap local minimum like the cold solve's (least squares), and
    from the cold answer itself the search moves nowhere."""
    prob = least_squares(seed, k=4)
    lp = prob.lower()
    cold = prob.solve("auto")
    same = prob.solve("auto", init=cold.x)
    assert same.extra["start"] == "init" and same.extra["swaps"] == 0 and len(same.extra["starts"]) == 1
    assert same.objective == pytest.approx(cold.objective, rel=1e-12)
    assert sorted(same.support) == sorted(cold.support)
    three = prob.solve("auto", k=3)  # fewer units than k = 4: filled by the largest model gain
    filled = prob.solve("auto", init=three.x)
    units = np.asarray(filled.support) - 1
    assert len(units) == 4 and filled.extra["start_objective"] < three.objective
    for J, I in itertools.product(units, np.setdiff1d(np.arange(12), units)):
        new = np.sort(np.append(np.setdiff1d(units, [J]), I))
        assert lp.restricted_minimize(new).f >= filled.objective - 1e-9 * abs(filled.objective)
    big = prob.solve("auto", k=6)  # more units than k: cut to the 4 largest, then searched
    cut = prob.solve("auto", init=big.x)
    assert len(cut.support) == 4 and cut.objective <= lp.restricted_minimize(
        np.sort(np.argsort(-np.abs(big.x[1:]))[:4])
    ).f * (1 + 1e-12)
    with pytest.raises(SolverError, match="init has 5 entries"):
        prob.solve("auto", init=np.zeros(5))


def test_auto_on_row_groups_recovers_the_rows():
    """A softmax with all classes free and row groups (nnz(W, groups = g) <= k, one label per row of
    W): auto, and every group solver, returns a finite objective; auto finds the true rows."""
    prob, rows = softmax(0, n=150)
    lp = prob.lower()
    r = prob.solve("auto")
    assert set(np.unique(np.asarray(r.support) // 3).tolist()) == rows
    for name in ("grahtp", "fgrahtp", "iht", "grasp"):
        o = prob.solve(name)
        assert np.isfinite(o.objective) and o.objective >= r.objective - 1e-9 * abs(r.objective)
    assert lp.kinds == {"nnz_groups"}


def test_auto_without_a_composite_form_runs_the_start_alone():
    rng = np.random.default_rng(0)
    S = np.cov(rng.standard_normal((100, 5)).T)
    O = sm.Variable((5, 5), name="O")
    prob = sm.Problem(sm.minimize(-sm.logdet(O) + sm.trace(S @ O)), [sm.nnz(sm.offdiag(O)) <= 4])
    r = prob.solve()
    assert r.extra["pipeline"] == ["grahtp"] and "swap search needs" in r.extra["note"]
    assert np.isfinite(r.objective)


# ---------------------------------------------------------------------- domains, curvature, steps


def gamma_problem() -> tuple[sm.Problem, np.ndarray]:
    """A Gamma log-likelihood written out by hand, canonical link: sum(y z - log z), z = X w + b > 0;
    at w = 0, b = 0 it is +inf (log 0)."""
    rng = np.random.default_rng(1)
    n, p = 400, 10
    X = rng.standard_normal((n, p)) / 4
    beta = np.zeros(p)
    beta[[1, 4, 7]] = [1.5, -1.0, 1.2]
    theta = 3.0 + X @ beta  # > 0
    y = rng.gamma(shape=20.0, scale=1.0 / (20.0 * theta))
    w = sm.Variable(p + 1, name="w")
    z = X @ w[1:] + w[0]
    return sm.Problem(sm.minimize(sm.sum(y * z - sm.log(z))), [sm.nnz(w[1:]) <= 3]), np.array([2, 5, 8])


@pytest.mark.parametrize("solver", ["auto", "grahtp", "fgrahtp", "iht", "grasp", "omp", "ompr", "els"])
def test_a_hand_written_gamma_likelihood_starts_inside_its_domain(solver):
    prob, truth = gamma_problem()
    r = prob.solve(solver)
    assert np.isfinite(r.objective) and r.status in ("converged", "max_iter")
    if solver in ("auto", "grahtp", "els", "ompr"):
        assert list(r.support) == list(truth)


def test_inside_domain_moves_only_the_free_coordinates():
    prob, _ = gamma_problem()
    lp = prob.lower()
    assert not np.isfinite(lp.oracle.peek(lp.zeros()))
    x = lp.inside_domain()
    assert np.isfinite(lp.oracle.peek(x)) and np.all(x[lp.sparsity.coords] == 0) and x[0] != 0


@pytest.mark.parametrize("kind", ["logistic", "softmax"])
def test_mean_curvature_is_the_exact_hessian_diagonal_at_the_point(kind):
    rng = np.random.default_rng(0)
    if kind == "softmax":
        prob, _ = softmax(1)
    else:
        X = rng.standard_normal((30, 6))
        v = np.sign(rng.standard_normal(30))
        w = sm.Variable(7, name="w")
        prob = sm.Problem(
            sm.minimize(sm.sum(sm.logistic(-v * (X @ w[1:] + w[0]))) + 0.3 * sm.sum_squares(w[1:])),
            [sm.nnz(w[1:]) <= 2],
        )
    lp = prob.lower()
    x = 0.4 * rng.standard_normal(lp.n)
    C = lp.set.coords
    diag = np.array([lp.oracle.hvp(x, e)[c] for c, e in zip(C, np.eye(lp.n)[C])])
    assert lp.mean_curvature(x=x) == pytest.approx(diag.mean(), rel=1e-10)


def test_step_rules_and_the_support_change_search():
    """'local' is 'htp' on least squares (a constant Hessian); every rule keeps f monotone; the
    support-change line search never ends above the paper's stopping rule; a bad rule name is a
    clear error."""
    prob = least_squares(5, k=4)
    local = prob.solve("grahtp")
    assert local.extra["step_rule"] == "htp"
    for eta in ("local", "bb", "htp", "rss"):
        for search in (True, False):
            r = prob.solve("grahtp", eta=eta, search=search)
            h = np.asarray(r.history["objective"])
            assert np.all(np.diff(h) <= 1e-12 * np.abs(h[:-1]) + 1e-12)
    assert prob.solve("grahtp", eta="rss").objective >= prob.solve("grahtp", eta="rss", search=True).objective - 1e-12
    with pytest.raises(SolverError, match="eta"):
        prob.solve("grahtp", eta="steepest")
    assert prob.solve("fgrahtp").extra["step_rule"] == "bb"


def test_newton_give_up_abandons_only_problems_that_cannot_reach_the_bar():
    prob = least_squares(0)
    lp = prob.lower()
    v = np.sign(np.random.default_rng(0).standard_normal(40))
    w = sm.Variable(13, name="w")
    X = np.random.default_rng(1).standard_normal((40, 12))
    lg = sm.Problem(sm.minimize(sm.sum(sm.logistic(-v * (X @ w[1:] + w[0])))), [sm.nnz(w[1:]) <= 3]).lower()
    for problem in (lp, lg):
        cols = problem.sparsity.flat(np.array([0, 3, 6]))
        rd = problem.design.reduced(cols)
        full = newton(rd, np.zeros((1, len(cols))))
        f_min = float(full.values[0])
        below = newton(rd, np.zeros((1, len(cols))), give_up=f_min + 1.0)  # reachable: solved
        assert below.values[0] == pytest.approx(f_min, rel=1e-12) and below.converged[0]
        above = newton(rd, np.zeros((1, len(cols))), give_up=f_min - 1.0)  # unreachable: abandoned
        assert above.values[0] >= f_min and above.iterations <= full.iterations
