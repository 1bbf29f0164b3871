"""The default solver on generalized linear models (abess's and paper 003's GLM problems).

* one function spelled two ways (the built-in ``logistic`` and ``func phi(z) = log(1 + exp(-z))``)
  gives the same step, the same constants and the same answer, from both front ends;
* binomial, multinomial and Poisson data generated as abess's tests generate them (the recipe of
  ``abess.datasets.make_glm_data`` / ``make_multivariate_glm_data``, re-implemented here from its
  documentation: abess is a benchmark competitor, not a test dependency) are recovered by ``auto``;
* insertion scoring (the batched Newton kernel with an extra column) agrees with restricted solves
  on losses with a linear part;
* GraHTP's step rule does not stall on the paper-000 Section 6.2 logistic protocol.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import expit, softmax

import sparsemodel as sm
from sparsemodel.datasets import caravan_path, sparse_logistic_regression
from sparsemodel.lowering.active import insertion_values
from sparsemodel.model.userfunc import func

# ---------------------------------------------------------------------- abess's test data


def _design(rng: np.random.Generator, n: int, p: int, rho: float) -> np.ndarray:
    """Gaussian rows with constant pairwise correlation rho (abess's corr_type='const')."""
    return np.sqrt(rho) * rng.standard_normal((n, 1)) + np.sqrt(1.0 - rho) * rng.standard_normal((n, p))


def glm_data(family: str, n: int, p: int, k: int, seed: int, rho: float = 0.5, classes: int = 3):
    """(X, y, coef) as abess generates them for its tests.

    binomial / poisson: k nonzeros of magnitude U[2m, 10m], random signs, m = 5 sqrt(2 log p / n);
    y ~ Bernoulli(expit(X b)), or y ~ Poisson(exp(X b)) with X scaled by 1/16. multinomial: k nonzero
    rows of N(0, s^2) entries, s = 10, 5, 2 for 30 %, 40 %, 30 % of them, the last class as
    reference (its column subtracted); y one-hot, drawn from softmax(X B)."""
    rng = np.random.default_rng(seed)
    X = _design(rng, n, p, rho)
    S = np.sort(rng.choice(p, k, replace=False))
    m = 5.0 * np.sqrt(2.0 * np.log(p) / n)
    if family == "multinomial":
        B = np.zeros((p, classes))
        strong, moderate = int(0.3 * k), int(0.4 * k)
        scale = np.r_[np.full(strong, 10.0), np.full(moderate, 5.0), np.full(k - strong - moderate, 2.0)]
        B[S] = rng.permutation(scale)[:, None] * rng.standard_normal((k, classes))
        B -= B[:, [classes - 1]]
        P = softmax(X @ B, axis=1)
        labels = (rng.random(n)[:, None] > np.cumsum(P, axis=1)).sum(axis=1)
        return X, np.eye(classes)[np.minimum(labels, classes - 1)], B
    b = np.zeros(p)
    b[S] = rng.uniform(2 * m, 10 * m, k) * rng.choice([-1.0, 1.0], k)
    if family == "binomial":
        return X, (rng.random(n) < expit(np.clip(X @ b, -30, 30))).astype(float), b
    if family == "poisson":
        X = X / 16.0
        return X, rng.poisson(np.exp(np.clip(X @ b, -30, 30))).astype(float), b
    raise ValueError(family)


def glm_problem(family: str, X: np.ndarray, y: np.ndarray, k: int) -> sm.Problem:
    """abess's models with a free intercept: the mean negative log-likelihood under nnz <= k (for
    the multinomial model all classes free, one group per row of W: nnz(W, groups = row) <= k)."""
    n, p = X.shape
    if family == "multinomial":
        m = y.shape[1]
        W = sm.Variable((p, m), name="W")
        b = sm.Variable(m, name="b")
        Z = X @ W + b
        return sm.Problem(
            sm.minimize(sm.mean(sm.logsumexp(Z, axis=1)) - sm.sum(y * Z) / n),
            [sm.nnz(W, groups=np.repeat(np.arange(p), m)) <= k],
        )
    w = sm.Variable(p + 1, name="w")
    z = X @ w[1:] + w[0]
    if family == "binomial":
        loss = sm.mean(sm.logistic(-(2 * y - 1) * z))
    else:
        loss = sm.mean(sm.exp(z) - y * z)
    return sm.Problem(sm.minimize(loss), [sm.nnz(w[1:]) <= k])


def selected(family: str, r: sm.Result) -> set[int]:
    if family == "multinomial":
        return set(np.flatnonzero(np.any(r.values["W"] != 0, axis=1)).tolist())
    return set(np.flatnonzero(r.values["w"][1:]).tolist())


def truth_of(coef: np.ndarray) -> set[int]:
    return set(np.flatnonzero(coef if coef.ndim == 1 else np.any(coef != 0, axis=1)).tolist())


def positions(support: tuple[int, ...], m: int) -> np.ndarray:
    """Positions into the constrained coordinates of the rows (features) ``support``, m per row."""
    return np.sort((np.asarray(support)[:, None] * m + np.arange(m)).ravel())


# ---------------------------------------------------------------------- two spellings

SPELLINGS = {
    "builtin": "minimize mean(logistic(-y * (Z @ w[1:] + w[0]))) + lam / 2 * sum_squares(w[1:])",
    "func": "func phi(z) = log(1 + exp(-z))\nminimize mean(phi(y * (Z @ w[1:] + w[0]))) + lam / 2 * sum_squares(w[1:])",
}


def caravan_model(tmp_path, spelling: str, k: int) -> sm.Problem:
    """examples/caravan_logistic.sm with the loss spelled one way or the other (text front end)."""
    path = caravan_path()
    text = f"""
data X : matrix from "{path}" except "Purchase"
data y : vector from "{path}:Purchase" map {{"Yes": 1, "No": -1}}
param lam = 1e-5
let Z = standardize(X)
var w[cols(X) + 1]
{SPELLINGS[spelling]}
subject to
    nnz(w[1:]) <= {k}
"""
    f = tmp_path / f"caravan_{spelling}.sm"
    f.write_text(text)
    return sm.load(str(f))


def test_two_spellings_of_logistic_give_the_same_constants_step_and_answer(tmp_path):
    """The Caravan model of the issue: logistic(-y z) and func phi(z) = log(1 + exp(-z)) applied
    to y z are one function. The curvature bound comes from the atom (1/4 for both: exact from
    sympy for the func), the step at any point is the same, and every solver ends at the same
    support and objective (before: 0.20352 against 0.20211 at k = 8)."""
    a, b = caravan_model(tmp_path, "builtin", 8), caravan_model(tmp_path, "func", 8)
    la, lb = a.lower(), b.lower()
    assert [t.curvature_sup for t in la.design.terms] == [t.curvature_sup for t in lb.design.terms]
    assert sorted(t.curvature_sup for t in la.design.terms) == [0.25, 2.0]  # the loss, the ridge
    x = np.random.default_rng(0).standard_normal(la.n) * 0.1
    for at in (None, x):
        assert la.mean_curvature(x=at) == pytest.approx(lb.mean_curvature(x=at), rel=1e-12)
    v = np.random.default_rng(1).standard_normal(la.n)
    np.testing.assert_allclose(la.hessian_operator(x)(v), lb.hessian_operator(x)(v), rtol=1e-12)
    np.testing.assert_allclose(la.oracle.hvp(x, v), lb.oracle.hvp(x, v), rtol=1e-9)
    for solver, opts in (("grahtp", {}), ("fgrahtp", {}), ("iht", {"max_iter": 300}), ("auto", {})):
        ra, rb = a.solve(solver, **opts), b.solve(solver, **opts)  # iht: the first 300 steps (1/L_s) agree
        assert ra.support.tolist() == rb.support.tolist(), solver
        assert ra.objective == pytest.approx(rb.objective, rel=1e-9), solver
        if solver == "grahtp":
            assert ra.extra["eta"] == pytest.approx(rb.extra["eta"], rel=1e-12)
            assert ra.iterations == rb.iterations


def test_user_func_curvature_bounds_are_exact_or_absent():
    """sup phi'' of a user func, by sympy: exact where it exists, None where phi'' is unbounded."""
    assert func("phi", "log(1 + exp(-z))").curvature_sup == 0.25
    assert func("h", "sqrt(1 + z^2)").curvature_sup == 1.0
    assert func("q", "3 * z^2").curvature_sup == 6.0
    assert func("e", "exp(z)").curvature_sup is None
    assert func("g", "y0 * z - log(z)", y0=2.0).curvature_sup is None  # 1/z^2 near 0


# ---------------------------------------------------------------------- recovery


@pytest.mark.parametrize("family", ["binomial", "multinomial"])
def test_auto_recovers_the_true_support_of_abess_test_data(family):
    """n = 100, p = 20, k = 3, rho = 0.5 (abess's test sizes), five seeds: auto selects exactly the
    true features, and its objective is at most that of the refit on the true support (measured:
    5 of 5 for both families)."""
    for seed in range(5):
        X, y, coef = glm_data(family, 100, 20, 3, seed)
        prob = glm_problem(family, X, y, 3)
        r = prob.solve("auto")
        assert r.status == "converged" and r.solver == "auto" and r.extra["pipeline"]
        truth = truth_of(coef)
        assert selected(family, r) == truth, (family, seed)
        m = y.shape[1] if family == "multinomial" else 1
        f_truth = prob.lower().restricted_minimize(positions(tuple(sorted(truth)), m)).f
        assert r.objective <= f_truth + 1e-9 * abs(f_truth)


def test_auto_finds_the_best_poisson_subset_of_abess_test_data():
    """abess's Poisson recipe divides X by 16, so the true support is not always the best subset of
    size k (here it is on seed 0 and not on seed 1, where three other features fit better). auto
    must find the best subset, checked by enumerating all C(20, 3) = 1140 supports; on seed 0 that
    is the truth."""
    for seed, truth_is_best in ((0, True), (1, False)):
        X, y, coef = glm_data("poisson", 100, 20, 3, seed)
        prob = glm_problem("poisson", X, y, 3)
        lp = prob.lower()
        values = {S: lp.restricted_minimize(np.array(S)).f for S in itertools.combinations(range(20), 3)}
        best = min(values, key=values.get)
        assert (set(best) == truth_of(coef)) == truth_is_best
        r = prob.solve("auto")
        assert r.objective == pytest.approx(values[best], rel=1e-9, abs=1e-12)
        assert selected("poisson", r) == set(best)


@pytest.mark.parametrize("family", ["poisson", "multinomial"])
def test_insertion_values_equal_restricted_solves_on_losses_with_a_linear_part(family):
    """exp(z) - y z and logsumexp(Z) - sum(Y .* Z) have a linear part; the batched Newton kernel
    that scores insertions must count it for the entering column (it did not: ELS, forward and
    FoBa scored wrongly there)."""
    X, y, _ = glm_data(family, 80, 8, 2, 3)
    lp = glm_problem(family, X, y, 2).lower()
    m = y.shape[1] if family == "multinomial" else 1
    sel = positions((1,), m)  # one unit (a row of W, or a coordinate) selected
    cand = np.array([p for p in range(8 * m) if p not in sel])
    vals = insertion_values(lp, sel, None, cand)
    exact = [lp.restricted_minimize(np.union1d(sel, [c])).f for c in cand]
    np.testing.assert_allclose(vals, exact, rtol=1e-8, atol=1e-10)


# ---------------------------------------------------------------------- the step rule


def logistic62(n: int, seed: int) -> tuple[sm.Problem, set[int]]:
    """Paper 000, Section 6.2.1 (p = 500, 50 nonzeros from N(5, 1), P(v = 1) = expit(2 w'u)): the
    mean logistic loss + 1e-5/2 ||w||^2 under nnz(w) <= 50, and the true support."""
    X, v, wbar = sparse_logistic_regression(n, seed=seed)
    w = sm.Variable(X.shape[1], name="w")
    prob = sm.Problem(sm.minimize(sm.mean(sm.logistic(-v * (X @ w))) + 1e-5 / 2 * sm.sum_squares(w)), [sm.nnz(w) <= 50])
    return prob, set(np.flatnonzero(wbar).tolist())


def test_grahtp_does_not_stall_on_the_section_6_2_logistic_protocol():
    """GraHTP once stopped after a few iterations 3.7 (n = 1000) to 24 (n = 500) times
    abess's objective. Measured now, as ratios to the better of FGraHTP and OMPR on each data set
    (solvers independent of GraHTP): at n = 1000 GraHTP's default step ends at the best objective
    with every true feature found (seeds 0, 1); at n = 500, where the data are nearly separable,
    seeds 0-5 give 7.22, 0.91, 1.39, 1.04, 0.82, 2.69 for the default step and 7.91, 1.64, 2.74,
    4.80, 3.92, 3.56 for the paper's 1/(2 M_2k) (eta='rss'): the default is lower on every seed.
    (GraHTP is auto's start, not its answer: auto's swap search takes it further.)"""

    def reference(prob: sm.Problem) -> float:
        return min(prob.solve(s).objective for s in ("fgrahtp", "ompr"))

    for seed in range(2):
        prob, truth = logistic62(1000, seed)
        r = prob.solve("grahtp")
        assert r.status == "converged"
        assert r.objective <= 1.01 * reference(prob), seed
        assert set(r.support.tolist()) == truth
    for seed, factor in ((0, 8.0), (1, 1.0)):
        prob, _ = logistic62(500, seed)
        r, paper = prob.solve("grahtp"), prob.solve("grahtp", eta="rss")
        assert r.objective < paper.objective
        assert r.objective <= factor * reference(prob), seed


@pytest.mark.parametrize("family", ["poisson", "multinomial"])
def test_the_step_against_every_unit_does_not_solve_again_what_the_screened_step_rejected(family, monkeypatch):
    """With a pool smaller than the unselected units, a step that fails on the screened pool is
    repeated against every unit at the same f; the supports the first step solved without lowering
    f are not solved again (each candidate support is solved at most once per f), and every solve
    counted in ``exact_solves`` is one that ran."""
    from sparsemodel.lowering.active import ActiveSet

    seen: list[tuple[tuple[int, ...], float]] = []
    solve = ActiveSet.solve

    def recording(self, sel, x0=None, ridge=None, give_up=None):
        if give_up is not None:  # a candidate of the swap search (its bar is f's)
            seen.append((tuple(np.asarray(sel).tolist()), give_up))
        return solve(self, sel, x0=x0, ridge=ridge, give_up=give_up)

    monkeypatch.setattr(ActiveSet, "solve", recording)
    X, y, _ = glm_data(family, 100, 30, 3, 0)
    r = glm_problem(family, X, y, 3).solve("auto", pool=4, lean=False)  # the Python pipeline's solves
    assert r.status == "converged" and r.extra["full_models"] >= 1
    assert len(seen) == r.extra["exact_solves"] > 0
    assert len(set(seen)) == len(seen)
