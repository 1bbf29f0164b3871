"""Certified answers (docs/certify.md): the lower bound never exceeds the best objective (every subset
enumerated), bnb returns that optimum with status optimal and a zero gap, on least squares and
logistic regression with a free intercept and a ridge, group sparsity, a box (big-M, no ridge),
least squares without a ridge (the Gram's smallest eigenvalue), Poisson and Huber losses; where no
bound exists the words say why, from Python and from the CLI.

The default sweeps are small (each enumeration a few hundred restricted solves); the issue's sizes
(p = 20..30, k = 3..5) run with ``-m slow``."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.cli import main
from sparsemodel.errors import NoBoundError
from sparsemodel.lowering.bound import SEGMENT_ENTRIES, SEGMENT_POINTS, h_values, lower_bound, relaxation

TOL = 1e-9  # a bound may exceed the optimum by rounding only


def brute_force(prob: sm.Problem) -> tuple[float, tuple[int, ...]]:
    """The best objective over every choice of k units (each a restricted solve)."""
    lp = prob.lower()
    units = lp.set.bound_units()
    best, arg = np.inf, ()
    for S in itertools.combinations(range(units.n_units), units.budget):
        f = lp.restricted_minimize(units.positions(np.array(S))).f
        if f < best:
            best, arg = f, S
    return float(best), arg


def flat(prob: sm.Problem, res) -> np.ndarray:
    lp = prob.lower()
    return np.concatenate([np.ravel(res.values[v.name]) for v in lp.layout.variables])


def regression(
    kind: str, seed: int, p: int, k: int, n: int = 40, lam: float = 1e-2, intercept: bool = True
) -> sm.Problem:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[rng.choice(p, k, replace=False)] = rng.uniform(0.5, 2, k) * rng.choice([-1, 1], k)
    w = sm.Variable(p, name="w")
    b = sm.Variable(1, name="b")
    z = X @ w + b if intercept else X @ w
    if kind == "ls":
        y = X @ beta + rng.standard_normal(n)
        obj = sm.sum_squares(z - y) / (2 * n)
    elif kind == "logistic":
        y = (rng.random(n) < 1 / (1 + np.exp(-X @ beta))).astype(float)
        obj = (sm.sum(sm.logistic(z)) - y @ z) / n
    elif kind == "poisson":
        y = rng.poisson(np.exp(0.3 * X @ beta)).astype(float)
        obj = (sm.sum(sm.exp(z)) - y @ z) / n
    else:  # huber
        y = X @ beta + rng.standard_t(2, n)
        obj = sm.sum(sm.huber(z - y, 1.0)) / n
    if lam:
        obj = obj + lam / 2 * sm.sum_squares(w)
    return sm.Problem(sm.minimize(obj), [sm.nnz(w) <= k])


def check_case(prob: sm.Problem, gap_tol: float = 1e-7) -> None:
    """The bounds (fast, tight) at auto's answer and bnb's proof against the enumerated optimum."""
    opt, arg = brute_force(prob)
    scale = max(1.0, abs(opt))
    res = prob.solve(bound="tight")
    x = flat(prob, res)
    lp = prob.lower()
    fast = lower_bound(lp, x, "fast").value
    tight = lower_bound(lp, x, "tight").value
    for lb in (fast, tight, res.lower_bound):
        if lb is not None:
            assert lb <= opt + TOL * scale, (lb, opt)
    if fast is not None:
        assert tight >= fast - TOL * scale  # tight starts where fast ends
    b = prob.solve("bnb", gap_tol=gap_tol)
    assert b.status == "optimal", b.message
    assert b.objective == pytest.approx(opt, rel=1e-8, abs=1e-10)
    assert b.lower_bound <= opt + TOL * scale
    assert b.gap <= max(gap_tol, 1e-6) and b.bound_how == "bnb"
    units = lp.set.bound_units()
    got = tuple(np.unique(units.unit_of[np.searchsorted(units.coords, lp.layout.coords(lp.primary)[b.support])]))
    if abs(b.objective - opt) > 1e-9 * scale:  # pragma: no cover - the assertion above says more
        assert got == arg


# ---------------------------------------------------------------------- the formula's pieces


def test_h_is_the_minimum_over_the_interval():
    """h_j(v) = min over [lo, hi] of v y + r y^2 / 2, against a fine grid (ridge, box, both, a free
    coordinate without either)."""
    rng = np.random.default_rng(0)
    for _ in range(50):
        v, r = rng.standard_normal(), rng.choice([0.0, abs(rng.standard_normal())])
        lo, hi = -abs(rng.standard_normal()) - 0.1, abs(rng.standard_normal()) + 0.1
        grid = np.linspace(lo, hi, 200001)
        want = float(np.min(v * grid + r * grid**2 / 2))
        got = h_values(np.array([v]), np.array([r]), np.array([lo]), np.array([hi]))[0]
        assert got == pytest.approx(want, abs=1e-8)
    assert h_values(np.array([1.0]), np.array([0.0]), np.array([-np.inf]), np.array([np.inf]))[0] == -np.inf
    assert h_values(np.array([0.0]), np.array([0.0]), np.array([-np.inf]), np.array([np.inf]))[0] == 0.0


def test_every_dual_point_gives_a_valid_bound():
    """Weak duality needs no optimality: the bound at random points (not the answer) is still
    below the optimum (least squares with an intercept: the free condition made exact)."""
    prob = regression("ls", 5, p=10, k=3)
    opt, _ = brute_force(prob)
    lp = prob.lower()
    rel = relaxation(lp)
    rng = np.random.default_rng(1)
    for _ in range(20):
        x = rng.standard_normal(lp.n)
        assert rel.bound(x) <= opt + TOL


# ---------------------------------------------------------------------- the sweeps of the issue


@pytest.mark.parametrize("seed", range(20))
def test_least_squares_bound_and_bnb_match_enumeration(seed):
    p, k = 9 + seed % 3, 3
    check_case(regression("ls", seed, p, k, lam=10.0 ** -(1 + seed % 3)))


@pytest.mark.parametrize("seed", range(20))
def test_logistic_bound_and_bnb_match_enumeration(seed):
    p, k = 8 + seed % 2, 2 + seed % 2
    check_case(regression("logistic", 100 + seed, p, k, lam=10.0 ** -(1 + seed % 2)))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(20))
def test_least_squares_at_the_issues_sizes(seed):
    p, k = 20 + seed % 11, 3 + seed % 3
    check_case(regression("ls", 1000 + seed, p, k, n=60, lam=1e-2))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(20))
def test_logistic_at_the_issues_sizes(seed):
    p, k = 20 + seed % 5, 3 + seed % 2
    check_case(regression("logistic", 2000 + seed, p, k, n=80, lam=1e-2))


# ---------------------------------------------------------------------- other forms


def test_poisson_and_huber_bounds_use_their_conjugates():
    for kind in ("poisson", "huber"):
        check_case(regression(kind, 7, p=9, k=2, lam=1e-1))


def test_group_sparsity():
    rng = np.random.default_rng(3)
    n, G, size = 50, 7, 2
    X = rng.standard_normal((n, G * size))
    y = X[:, :2] @ [1.5, -1.0] + X[:, 6:8] @ [1.0, 1.0] + 0.5 * rng.standard_normal(n)
    w = sm.Variable(G * size, name="w")
    prob = sm.Problem(
        sm.minimize(sm.sum_squares(X @ w - y) / n + 0.01 * sm.sum_squares(w)),
        [sm.nnz(w, groups=np.repeat(np.arange(G), size)) <= 2],
    )
    check_case(prob)


def test_a_box_gives_the_big_m_bound_without_a_ridge():
    """-M <= w <= M and no ridge, p > n (no eigenvalue shift): the big-M relaxation alone."""
    rng = np.random.default_rng(4)
    n, p = 8, 12
    X = rng.standard_normal((n, p))
    y = X[:, :3] @ [0.8, -0.6, 0.5] + 0.1 * rng.standard_normal(n)
    w = sm.Variable(p, name="w")
    prob = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y)), [sm.nnz(w) <= 2, w >= -1, w <= 1])
    assert "box (big-M)" in relaxation(prob.lower()).describe()
    check_case(prob)


def test_least_squares_without_a_ridge_gets_the_eigenvalue_shift():
    """n > p, no ridge, a free intercept: no fast bound (said in words), but tight and bnb move the
    Gram's smallest eigenvalue into the perspective and prove the optimum."""
    prob = regression("ls", 11, p=10, k=3, n=60, lam=0.0)
    res = prob.solve()
    assert res.gap is not None and res.bound_how == "fast" or "neither a ridge nor a box" in res.bound_note
    lp = prob.lower()
    assert relaxation(lp, shift=True).shift > 0
    check_case(prob)


def test_free_coordinates_are_exact_and_the_intercept_matters():
    """With an intercept the bound is as valid as without (the free condition corrected to
    rounding), and bnb's optimum differs from the model without it."""
    with_b = regression("logistic", 3, p=9, k=2)
    without = regression("logistic", 3, p=9, k=2, intercept=False)
    check_case(with_b)
    assert with_b.solve("bnb").objective < without.solve("bnb").objective


# ---------------------------------------------------------------------- no bound: words


def test_no_bound_is_said_in_words():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 40))
    y = X[:, :3] @ [1.0, 2.0, 3.0]
    w = sm.Variable(40, name="w")
    prob = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y)), [sm.nnz(w) <= 3])
    res = prob.solve()
    assert res.lower_bound is None and res.gap is None
    assert "neither a ridge nor a box" in res.bound_note
    assert "gap         none: no finite lower bound" in res.summary()
    assert res.to_dict()["gap"] is None and "ridge" in res.to_dict()["bound_note"]
    with pytest.raises(NoBoundError) as e:
        prob.solve("bnb")
    assert "bnb cannot prove anything" in str(e.value) and "sum_squares(w)" in str(e.value)
    # a rank constraint: the set says it has no units
    W = sm.Variable((6, 5), name="W")
    A = rng.standard_normal((30, 6))
    r = sm.Problem(sm.minimize(sm.sum_squares(A @ W - rng.standard_normal((30, 5)))), [sm.rank(W) <= 2]).solve()
    assert r.gap is None and "rank(W) <= 2" in r.bound_note


def test_bound_none_and_bad_modes():
    prob = regression("ls", 1, p=8, k=2)
    r = prob.solve(bound="none")
    assert r.gap is None and "bound='none'" in r.bound_note
    with pytest.raises(sm.ModelError) as e:
        prob.solve(bound="tigth")
    assert "fast, tight, none" in str(e.value) and "did you mean 'tight'" in str(e.value)


def test_the_cli_takes_the_bound_mode(capsys, tmp_path):
    """``solve --bound tight`` gives the tight bound (at least the fast one, at most the answer),
    ``--bound none`` none, a misspelled mode exit 2 with the modes and a guess."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((60, 10))
    y = (X[:, 1] - X[:, 4] + 0.3 * rng.standard_normal(60) > 0).astype(float)
    np.savez(tmp_path / "d.npz", X=X, v=2 * y - 1)
    (tmp_path / "m.sm").write_text(
        'data X : matrix from "d.npz:X"\ndata v : vector from "d.npz:v"\nvar w[cols(X)]\nvar b\n'
        "minimize mean(logistic(-v * (X @ w + b))) + 0.01 / 2 * sum_squares(w)\nsubject to\n    nnz(w) <= 2\n"
    )
    got = {}
    for mode in ("fast", "tight", "none"):
        assert main(["solve", str(tmp_path / "m.sm"), "--bound", mode, "--json"]) == 0
        got[mode] = json.loads(capsys.readouterr().out)
    assert got["none"]["lower_bound"] is None
    assert got["fast"]["lower_bound"] <= got["tight"]["lower_bound"] + TOL <= got["tight"]["objective"] + 2 * TOL
    assert main(["solve", str(tmp_path / "m.sm"), "--bound", "tite"]) == 2
    err = capsys.readouterr().err
    assert "fast, tight, none" in err and "did you mean 'tight'" in err


# ---------------------------------------------------------------------- bnb's limits and progress


def test_bnb_reports_the_gap_reached_at_a_limit():
    prob = regression("logistic", 5, p=30, k=5, n=60, lam=1e-3)
    r = prob.solve("bnb", node_limit=3, gap_tol=0.0)
    assert r.status == "node_limit" and r.gap > 0 and r.lower_bound < r.objective
    assert "node limit" in r.message and r.extra["nodes"] >= 3
    assert np.isfinite(r.extra["root_bound"])
    assert r.history["bound"] and r.history["gap"][-1] == pytest.approx(r.gap, rel=1e-9, abs=1e-12)


def test_bnb_progress_shows_bound_incumbent_and_gap():
    prob = regression("logistic", 6, p=12, k=3)
    seen = []
    from sparsemodel.solvers import get_solver

    get_solver("bnb")(gap_tol=1e-9).solve(prob.lower(), progress=lambda i, f, **kw: seen.append((f, kw)))
    tree = [(f, kw) for f, kw in seen if kw]  # auto's iterations (the incumbent) come first, without
    assert tree and all("bound" in kw and "gap" in kw and "nodes" in kw for _, kw in tree)
    assert all(kw["bound"] <= f + 1e-9 for f, kw in tree)
    assert tree[-1][1]["gap"] <= 1e-9


# ---------------------------------------------------------------------- the mixed-integer reference


def _mip():
    from sparsemodel.lowering.mip import mip_available

    if mip_available() is None:
        pytest.skip("no mixed-integer solver for cvxpy (pip install 'sparsemodel[mip]')")


def test_bnb_agrees_with_the_mixed_integer_program():
    """The same model as a big-M mixed-integer program solved by SCIP: the same optimum as bnb
    (least squares with an intercept, a ridge, groups of two)."""
    _mip()
    from sparsemodel.lowering.mip import mip_reference

    prob = regression("ls", 21, p=8, k=2)
    f_mip, _ = mip_reference(prob.lower())
    b = prob.solve("bnb", gap_tol=1e-8)
    assert b.status == "optimal" and b.objective <= f_mip + 1e-9
    assert b.objective == pytest.approx(f_mip, rel=1e-6)
    assert b.lower_bound <= f_mip + 1e-9


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(5))
def test_bnb_agrees_with_the_mixed_integer_program_on_groups_and_boxes(seed):
    _mip()
    from sparsemodel.lowering.mip import mip_reference

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((40, 16))
    y = X[:, :4] @ [1.0, -1.0, 0.5, 0.5] + 0.3 * rng.standard_normal(40)
    w = sm.Variable(16, name="w")
    for cons in ([sm.nnz(w, groups=np.repeat(np.arange(8), 2)) <= 2], [sm.nnz(w) <= 3, w >= -1, w <= 1]):
        ridge = 0.05 * sm.sum_squares(w) if len(cons) == 1 else 0
        prob = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / 40 + ridge), cons)
        f_mip, _ = mip_reference(prob.lower())
        b = prob.solve("bnb", gap_tol=1e-8)
        assert b.status == "optimal" and b.objective == pytest.approx(f_mip, rel=1e-6)


def test_the_mixed_integer_reference_refuses_what_its_solver_cannot_take():
    _mip()
    from sparsemodel.lowering.mip import mip_reference

    with pytest.raises(sm.ModelError) as e:
        mip_reference(regression("logistic", 1, p=8, k=2).lower())
    assert "mixed-integer reference" in str(e.value)


# ---------------------------------------------------------------------- the CLI


MODEL = """\
data X : matrix from "X.npy"
data y : vector from "y.npy"
param lam = 0.01
var w[cols(X)]
var b
minimize sum_squares(X @ w + b - y) / (2 * rows(X)) + lam / 2 * sum_squares(w)
subject to
    nnz(w) <= 3
"""


def test_the_cli_prints_the_gap(tmp_path, capsys):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((60, 12))
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", X[:, :3] @ [1.0, -1.0, 2.0] + 0.3 * rng.standard_normal(60))
    (tmp_path / "m.sm").write_text(MODEL)
    code = main(["solve", str(tmp_path / "m.sm"), "--solver", "bnb"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "status      optimal" in out and "certified optimal" in out and "from bnb's proof" in out
    code = main(["solve", str(tmp_path / "m.sm"), "--json"])
    d = json.loads(capsys.readouterr()[0])
    assert code == 0 and d["lower_bound"] <= d["objective"] and d["gap"] >= 0 and d["bound_how"] == "fast"


@pytest.mark.parametrize("seed", range(3))
def test_the_fast_bound_searches_the_segment_to_zero(seed):
    """With a small ridge the gradient's dual point pays the perspective's full price for every unit
    (a bound far below 0 on logistic data); the fast bound also tries t theta for t in [0, 1], so it is
    at least the loss's infimum (0 here, t = 0) and at least the gradient's point (t = 1), and it stays
    below the enumerated optimum."""
    rng = np.random.default_rng(seed)
    n, p, k = 60, 12, 3
    X = rng.standard_normal((n, p))
    v = np.where(X[:, :3] @ [1.5, -1.0, 1.0] + 0.5 * rng.standard_normal(n) > 0, 1.0, -1.0)
    w, b = sm.Variable(p, name="w"), sm.Variable(1, name="b")
    obj = sm.mean(sm.logistic(-v * (X @ w + b))) + 1e-4 / 2 * sm.sum_squares(w)
    prob = sm.Problem(sm.minimize(obj), [sm.nnz(w) <= k])
    opt, _ = brute_force(prob)
    res = prob.solve()
    rel = relaxation(prob.lower())
    x = flat(prob, res)
    at_gradient = rel.node_bound(rel.anchor(x)).value
    assert at_gradient < 0  # what the gradient's point alone gave
    assert res.lower_bound >= max(0.0, at_gradient) - 1e-12
    assert res.lower_bound <= opt + 1e-9
    assert res.gap < 1.0


def _segment_models():
    """Losses whose fast bound searches t theta: logistic with an intercept and a small ridge,
    Poisson, a box without a ridge, free coordinates with a ridge, groups, and the softmax (a
    row-wise conjugate)."""
    rng = np.random.default_rng(3)
    n, p = 50, 9
    X = rng.standard_normal((n, p))
    z = X[:, :3] @ np.array([1.0, -1.0, 0.5])
    v = np.where(rng.random(n) < 1 / (1 + np.exp(-z)), 1.0, -1.0)
    yield regression("logistic", 1, p=8, k=3)
    w, b = sm.Variable(p, name="w"), sm.Variable(1, name="b")
    yield sm.Problem(
        sm.minimize(sm.mean(sm.logistic(-v * (X @ w + b))) + 1e-4 / 2 * sm.sum_squares(w)), [sm.nnz(w) <= 3]
    )
    yield regression("poisson", 2, p=8, k=2)
    w = sm.Variable(p, name="w")
    yield sm.Problem(sm.minimize(sm.sum(sm.logistic(-v * (X @ w)))), [sm.nnz(w) <= 3, w <= 2, w >= -2])
    w, b = sm.Variable(p, name="w"), sm.Variable(2, name="b")  # free coordinates with a ridge of their own
    ridged = (
        sm.mean(sm.logistic(-v * (X @ w + b[0] + X[:, 0] * b[1]))) + 1e-3 * sm.sum_squares(w) + 0.5 * sm.sum_squares(b)
    )
    yield sm.Problem(sm.minimize(ridged), [sm.nnz(w) <= 2])
    W = sm.Variable((p, 3), name="W")
    Y = np.eye(3)[rng.integers(0, 3, n)]
    soft = sm.sum(sm.logsumexp(X @ W, axis=1)) - sm.sum(Y * (X @ W)) + 0.05 * sm.sum_squares(W)
    yield sm.Problem(sm.minimize(soft), [sm.nnz(W) <= 6])
    yield sm.Problem(sm.minimize(soft), [sm.nnz(W, groups="rows") <= 2])


@pytest.mark.parametrize("case", range(7))
def test_the_segments_points_in_one_pass_are_the_node_bounds(case):
    """The fast bound scores the grid of t theta in one pass (``segment_values``): the same values as
    the root node's bound at each scaled dual point, one by one; and the grid search ends within
    rounding of the segment's best value on a fine grid (lb is concave in t), never below the
    gradient's point."""
    prob = list(_segment_models())[case]
    lp = prob.lower()
    rel = relaxation(lp)
    assert rel._batched_segment()
    x = flat(prob, prob.solve(bound="none"))
    a = rel.anchor(x)
    ts = np.linspace(0.0, 1.0, 13)
    with np.errstate(all="ignore"):
        one = np.array([rel.node_bound(rel.scaled(a, t)).value for t in ts])
    one = np.where(np.isfinite(one), one, -np.inf)
    got = rel.segment_values(a, ts)
    assert np.array_equal(np.isfinite(got), np.isfinite(one))
    fin = np.isfinite(one)
    assert np.allclose(got[fin], one[fin], rtol=1e-12, atol=1e-12 * max(1.0, float(np.abs(one[fin]).max())))
    grid = np.linspace(0.0, 1.0, 2001)
    fine = rel.segment_values(a, grid)
    j = int(np.argmax(fine))
    top = float(fine[j])
    lb = rel.bound(x)
    assert lb >= rel.node_bound(a).value - 1e-12
    # the search ends within its last grid step (2 / 15^2 in t) of the top; lb concave, so the value
    # there is within that step times the slope beside the top
    step = 2.0 / (SEGMENT_POINTS - 1) ** 2
    near = (np.abs(grid - grid[j]) <= 2 * step) & np.isfinite(fine)
    slope = float(np.max(np.abs(np.diff(fine[near])) / np.diff(grid[near]))) if near.sum() > 1 else 0.0
    assert lb >= top - slope * step - 1e-12 * max(1.0, abs(top))


@pytest.mark.parametrize("n", [2048, 2049])
def test_the_segment_search_on_both_sides_of_the_batch_limit(n):
    """Up to SEGMENT_ENTRIES loss values a pass the grid is scored in one pass, above it the golden
    section runs one t at a time: both end near the segment's top (within 1e-2 in t), above the
    gradient's point and below the enumerated optimum's objective at the answer."""
    rng = np.random.default_rng(n)
    X = rng.standard_normal((n, 5))
    v = np.where(X[:, :2] @ [1.0, -1.0] + rng.standard_normal(n) > 0, 1.0, -1.0)
    w, b = sm.Variable(5, name="w"), sm.Variable(1, name="b")
    prob = sm.Problem(
        sm.minimize(sm.mean(sm.logistic(-v * (X @ w + b))) + 1e-4 / 2 * sm.sum_squares(w)), [sm.nnz(w) <= 2]
    )
    lp = prob.lower()
    rel = relaxation(lp)
    assert rel._batched_segment() == (n * SEGMENT_POINTS <= SEGMENT_ENTRIES)
    res = prob.solve(bound="none")
    x = flat(prob, res)
    a = rel.anchor(x)
    grid = np.linspace(0.0, 1.0, 1001)
    fine = rel.segment_values(a, grid)
    lb = rel.bound(x)
    assert rel.node_bound(a).value - 1e-12 <= lb <= res.objective + 1e-12
    j = int(np.argmax(fine))
    near = (np.abs(grid - grid[j]) <= 0.02) & np.isfinite(fine)
    slope = float(np.max(np.abs(np.diff(fine[near])) / np.diff(grid[near])))
    assert lb >= fine[j] - slope * 1e-2 - 1e-12


def test_the_conjugate_verdict_kept_per_atom_gives_the_bounds_of_a_fresh_one():
    """lowering/bound._no_conjugate keeps the atom's answer per atom and form: lowerings after the
    first give the same bounds and the same refusal words as with nothing kept (least squares without
    a ridge: no finite bound; logistic and the softmax with a ridge: a bound), and a term's own
    scale is still read (a concave term is refused whatever was kept for its atom)."""
    from sparsemodel.lowering import bound as bound_mod
    from sparsemodel.objective.terms import Term

    rng = np.random.default_rng(3)
    X = rng.standard_normal((30, 6))
    y = X[:, 0] - X[:, 1] + 0.1 * rng.standard_normal(30)
    v = np.where(y > 0, 1.0, -1.0)
    Y = np.eye(3)[rng.integers(0, 3, 30)]

    def models():
        w = sm.Variable(6, name="w")
        W = sm.Variable((6, 3), name="W")
        Z = X @ W
        softmax = sm.sum(sm.logsumexp(Z, axis=1) - sm.sum(Z * Y, axis=1)) + 0.1 * sm.sum_squares(W)
        return [
            sm.Problem(sm.minimize(sm.sum_squares(X @ w - y)), [sm.nnz(w) <= 2]),
            sm.Problem(sm.minimize(sm.sum(sm.logistic(-v * (X @ w))) + 0.1 * sm.sum_squares(w)), [sm.nnz(w) <= 2]),
            sm.Problem(sm.minimize(softmax), [sm.nnz(W) <= 4]),
        ]

    def bounds():
        out = []
        for prob in models():
            lp = prob.lower()
            x = np.zeros(lp.n)
            rep = lower_bound(lp, x)
            out.append((rep.value, rep.note))
        return out

    bound_mod._CONJUGATE_SAID.clear()
    fresh = bounds()
    assert bound_mod._CONJUGATE_SAID  # (kept for the next lowerings)
    kept = bounds()
    assert kept == fresh
    assert fresh[0][0] is None and "no finite lower bound" in fresh[0][1]
    assert fresh[1][0] is not None and fresh[2][0] is not None
    t = models()[1].lower().design.terms[0]
    concave = Term(-t.coef, t.phi, t.map, t.weights, t.rowwise, t.whole)
    assert "not convex" in bound_mod._no_conjugate(concave)
    assert bound_mod._no_conjugate(t) is None
