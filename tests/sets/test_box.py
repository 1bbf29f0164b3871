"""Box constraints next to nnz (w >= 0, lo <= w <= hi) and always-selected coordinates
(nnz(w, free = idx) <= k): the exact projection onto {nnz <= k} ∩ box, bounded restricted solves
against cvxpy, every solver staying in its box, free coordinates never dropped, and located errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.errors import ConstraintError, ModelError, ParseError, ShapeError, SolverError
from sparsemodel.lowering.l1 import l1_minimize
from sparsemodel.numerics.proximal import kkt_residual

RNG = np.random.default_rng(11)
BOX_SOLVERS = ["grahtp", "fgrahtp", "iht", "grasp", "omp", "ompr", "els", "forward", "lasso"]


def regression(n: int = 50, p: int = 12, seed: int = 3):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[np.array([1, 4, 7, 9]) % p] = [2.0, -1.5, 1.0, 3.0]
    y = X @ beta + 0.1 * rng.standard_normal(n)
    return X, y


def ls_problem(cons, X, y, w):
    return sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / (2 * len(y))), cons)


# ----------------------------------------------------------------------------- the projection


@pytest.mark.parametrize("groups", [False, True])
def test_projection_onto_sparse_box_is_exact(groups):
    """P(z) onto {nnz <= k} ∩ box is the best of all supports by brute force (clipped values on the
    kept coordinates): ranking by the gain z^2 - (z - clip z)^2 is exact, also for groups."""
    p, k = 8, 3
    w = sm.Variable(p, name="w")
    lo = np.array([0, -1, -0.5, 0, -2, 0, -1, 0.0])
    hi = np.array([1, 0.5, 2, 0.3, 0, 1, 1, 3.0])
    g = np.repeat(np.arange(4), 2) if groups else None
    cons = [sm.nnz(w, groups=g) <= (2 if groups else k), sm.box(w, lo, hi)]
    lp = sm.Problem(sm.minimize(sm.sum_squares(w)), cons).lower()
    units = [np.flatnonzero(g == u) for u in range(4)] if groups else [np.array([i]) for i in range(p)]
    kk = 2 if groups else k
    for _ in range(20):
        z = 2 * RNG.standard_normal(p)
        x, sel = lp.set.project(z)
        assert np.all(x >= lo) and np.all(x <= hi)
        best = np.inf
        for S in itertools.combinations(range(len(units)), kk):
            cols = np.concatenate([units[s] for s in S])
            v = np.zeros(p)
            v[cols] = np.clip(z[cols], lo[cols], hi[cols])
            best = min(best, float(np.sum((v - z) ** 2)))
        assert np.sum((x - z) ** 2) == pytest.approx(best, abs=1e-12)


def test_projection_clips_free_coordinates_and_other_variables():
    w = sm.Variable(5, name="w")
    lp = sm.Problem(sm.minimize(sm.sum_squares(w - 1)), [sm.nnz(w[1:]) <= 1, w >= 0, w <= 2]).lower()
    x, _ = lp.set.project(np.array([-3.0, 5.0, -4.0, 1.0, 0.5]))
    assert x.tolist() == [0.0, 2.0, 0.0, 0.0, 0.0]  # w[0] free but clipped; -4 has gain 0 under w >= 0


# ----------------------------------------------------------------------------- restricted solves


@pytest.mark.parametrize("loss", ["least squares", "logistic"])
def test_bounded_restricted_solve_matches_cvxpy(loss):
    """Projected Newton (lstsq/newton) and L-BFGS-B on a support within the box agree with cvxpy."""
    X, y = regression()
    n, p = X.shape
    w = sm.Variable(p + 1, name="w")
    if loss == "least squares":
        obj = sm.sum_squares(X @ w[1:] + w[0] - y) / (2 * n)
    else:
        v = np.sign(y + 0.3)
        obj = sm.mean(sm.logistic(-v * (X @ w[1:] + w[0]))) + 0.01 * sm.sum_squares(w[1:])
    cons = [sm.nnz(w[1:]) <= 5, sm.box(w[1:], -0.4, 1.2), w[0] >= 0.2]
    lp = sm.Problem(sm.minimize(obj), cons).lower()
    sel = np.array([0, 1, 4, 7, 9])
    ref = lp.restricted_minimize(sel, method="cvxpy")
    for method in ("auto", "lbfgs"):
        r = lp.restricted_minimize(sel, method=method)
        assert lp.box.contains(r.x)
        assert r.f == pytest.approx(ref.f, rel=1e-6, abs=1e-9)
        assert np.max(np.abs(r.x - ref.x)) < 1e-4
    # some bounds are active at the solution (the test exercises the box)
    xs = r.x[1:][sel]
    assert np.any(np.isclose(xs, -0.4) | np.isclose(xs, 1.2))


def test_nonnegative_least_squares_without_nnz_matches_cvxpy():
    import cvxpy as cp

    X, y = regression()
    n, p = X.shape
    w = sm.Variable(p, name="w")
    r = ls_problem([w >= 0], X, y, w).solve()
    u = cp.Variable(p)
    cp.Problem(cp.Minimize(cp.sum_squares(X @ u - y) / (2 * n)), [u >= 0]).solve()
    assert r.x.min() >= 0
    assert np.max(np.abs(r.x - u.value)) < 1e-6


def test_fixed_coordinates_lo_equals_hi():
    """A coordinate with lo = hi is fixed at that value in every solve (here a nonzero one)."""
    X, y = regression()
    w = sm.Variable(X.shape[1], name="w")
    r = ls_problem([sm.nnz(w, free=[0]) <= 3, sm.box(w[0], 0.7, 0.7)], X, y, w).solve("grahtp")
    assert r.x[0] == 0.7


# ----------------------------------------------------------------------------- solvers stay in the box


@pytest.mark.parametrize("solver", BOX_SOLVERS)
def test_solvers_never_leave_the_box(solver):
    X, y = regression()
    n, p = X.shape
    w = sm.Variable(p, name="w")
    lo, hi = -0.5 * np.ones(p), np.full(p, 1.5)
    lo[3] = 0.0
    prob = ls_problem([sm.nnz(w) <= 4, sm.box(w, lo, hi)], X, y, w)
    r = prob.solve(solver)
    assert r.status == "converged"
    assert np.all(r.x >= lo) and np.all(r.x <= hi)
    assert len(r.support) <= 4
    # the unconstrained solution leaves the box (w[9] = 3 > 1.5): the bound is active
    assert np.isclose(r.x, hi).any() or np.isclose(r.x, lo).any()


@pytest.mark.parametrize("solver", ["grahtp", "iht", "lasso", "els"])
def test_nonnegative_sparse_logistic_stays_nonnegative(solver):
    X, y = regression(n=80)
    v = np.where(y > 0, 1.0, -1.0)
    w = sm.Variable(X.shape[1] + 1, name="w")
    obj = sm.mean(sm.logistic(-v * (X @ w[1:] + w[0])))
    r = sm.Problem(sm.minimize(obj), [sm.nnz(w[1:]) <= 3, w[1:] >= 0]).solve(solver)
    assert np.all(r.x[1:] >= 0) and r.x[1:].max() > 0
    assert not set(r.support) & {5}  # beta[4] = -1.5 < 0 (w[5] holds it) can only be zero


def test_box_constrained_l0_optimum_matches_brute_force_cvxpy():
    """On a small problem the best support under the box (brute force, each support solved by cvxpy)
    is what ELS and GraHTP find."""
    X, y = regression(n=30, p=7, seed=5)
    n, p = X.shape
    w = sm.Variable(p, name="w")
    prob = ls_problem([sm.nnz(w) <= 2, sm.box(w, -1.0, 1.0)], X, y, w)
    lp = prob.lower()
    best = min(lp.restricted_minimize(np.array(S), method="cvxpy").f for S in itertools.combinations(range(p), 2))
    for solver in ("els", "grahtp"):
        assert prob.solve(solver).objective == pytest.approx(best, rel=1e-7)


def test_lasso_with_a_box_numpy_matches_cvxpy():
    X, y = regression()
    w = sm.Variable(X.shape[1], name="w")
    lp = ls_problem([sm.nnz(w) <= 4, sm.box(w, -0.3, 1.0)], X, y, w).lower()
    lam = 0.05
    x_np, _ = l1_minimize(lp, lam, x0=lp.zeros())
    x_cp = lp.relaxation("l1").solve(lam)
    assert lp.box.contains(x_np) and lp.box.contains(x_cp)
    assert np.max(np.abs(x_np - x_cp)) < 1e-5
    for backend in ("numpy", "cvxpy"):
        r = ls_problem([sm.nnz(w) <= 4, sm.box(w, -0.3, 1.0)], X, y, w).solve("lasso", backend=backend)
        assert r.x.min() >= -0.3 and r.x.max() <= 1.0 and len(r.support) == 4


def test_kkt_residual_counts_the_normal_cone():
    g = np.array([0.5, -0.2, 0.05])
    # at u = lo = 0 with g > 0 the box holds it: no violation; the l1 term covers |g| <= pen
    assert kkt_residual(np.zeros(3), g, np.full(3, 0.1), lo=np.array([0.0, -1, -1]), hi=np.ones(3)) == pytest.approx(
        0.1
    )  # coordinate 1: |g| - pen = 0.1 (it may move down)
    assert kkt_residual(np.zeros(3), g, np.full(3, 0.1), lo=np.zeros(3), hi=np.ones(3)) == pytest.approx(0.1)
    assert kkt_residual(np.zeros(3), g, np.full(3, 0.6)) == 0.0


def test_certificate_with_a_box():
    X, y = regression()
    w = sm.Variable(X.shape[1], name="w")
    r = ls_problem([sm.nnz(w) <= 4, w >= 0], X, y, w).solve("iht")
    assert r.certificate["stationary"]
    assert "box" in r.certificate["definition"]


def test_solvers_without_box_support_refuse_with_the_list():
    X, y = regression()
    w = sm.Variable(X.shape[1], name="w")
    with pytest.raises(SolverError) as e:
        ls_problem([sm.nnz(w) <= 4, w >= 0], X, y, w).solve("foba")
    assert "box" in e.value.message and "grahtp" in e.value.hint


# ----------------------------------------------------------------------------- always-selected coordinates


@pytest.mark.parametrize("solver", ["grahtp", "fgrahtp", "iht", "grasp", "omp", "ompr", "els", "forward", "arht"])
def test_free_indices_are_never_dropped(solver):
    """Coordinates named in free= are optimized in every solve even when they carry only noise, and
    do not count against k."""
    X, y = regression()
    p = X.shape[1]
    keep = [0, 5, 11]  # pure-noise columns
    w = sm.Variable(p, name="w")
    r = ls_problem([sm.nnz(w, free=keep) <= 4], X, y, w).solve(solver)
    assert np.all(r.x[keep] != 0)
    assert np.count_nonzero(np.delete(r.x, keep)) == 4
    assert set(np.delete(np.arange(p), keep)[np.delete(r.x, keep) != 0].tolist()) == {1, 4, 7, 9}


def test_free_with_budget_zero_fits_only_the_free_coordinates():
    X, y = regression()
    w = sm.Variable(X.shape[1], name="w")
    r = ls_problem([sm.nnz(w, free=[1, 9]) <= 0], X, y, w).solve("grahtp")
    assert np.flatnonzero(r.x).tolist() == [1, 9]


def test_free_spellings_agree(tmp_path):
    """nnz(w, free = [1, 4]) in a model file, free = idx with data idx, and the Python builder."""
    X, y = regression()
    np.savetxt(tmp_path / "X.csv", X, delimiter=",")
    np.savetxt(tmp_path / "y.csv", y, delimiter=",")
    np.savetxt(tmp_path / "idx.csv", [1, 4], delimiter=",")
    head = (
        'data X : matrix from "X.csv"\ndata y : vector from "y.csv"\ndata idx : vector from "idx.csv"\nvar w[cols(X)]\n'
    )
    body = "minimize sum_squares(X @ w - y) / (2 * rows(X))\nsubject to\n  {}\n  w >= -1\n"
    a = sm.parse(head + body.format("nnz(w, free = [1, 4]) <= 2"), base_dir=tmp_path).solve("grahtp")
    b = sm.parse(head + body.format("nnz(w, free = idx) <= 2"), base_dir=tmp_path).solve("grahtp")
    w = sm.Variable(X.shape[1], name="w")
    c = ls_problem([sm.nnz(w, free=np.array([1, 4])) <= 2, w >= -1], X, y, w).solve("grahtp")
    assert np.array_equal(a.x, b.x) and np.allclose(a.x, c.x, atol=1e-12)
    assert "free=idx" in str(sm.parse(head + body.format("nnz(w, free = idx) <= 2"), base_dir=tmp_path).constraints[0])


def test_free_with_groups_drops_their_labels():
    w = sm.Variable(6, name="w")
    c = sm.nnz(w, groups=[0, 0, 1, 1, 2, 2], free=[0, 1]) <= 1
    lp = sm.Problem(sm.minimize(sm.sum_squares(w - np.arange(6.0))), [c]).lower()
    assert lp.set.coords.tolist() == [2, 3, 4, 5] and lp.set.free.tolist() == [0, 1]
    r = sm.Problem(sm.minimize(sm.sum_squares(w - np.arange(6.0))), [c]).solve("grahtp")
    assert r.x.tolist() == [0.0, 1.0, 0.0, 0.0, 4.0, 5.0]


# ----------------------------------------------------------------------------- located errors


def perr(line: str, exc: type[ModelError] = ModelError, head: str = "var w[5]\nvar W[3, 3]\n") -> ModelError:
    text = head + "minimize sum_squares(w) + sum_squares(W)\nsubject to\n  " + line + "\n"
    with pytest.raises(exc) as e:
        sm.parse(text, name="m.sm")
    return e.value


def at(e: ModelError) -> tuple[int, int]:
    return e.span.line, e.span.column


def test_located_errors_of_free():
    e = perr("nnz(w, free = [0, 7]) <= 2", ConstraintError)
    assert at(e) == (5, 17) and "index 7 is out of range" in e.message and "0 to 4" in e.hint
    e = perr("nnz(w, free = [2, 2]) <= 2", ConstraintError)
    assert at(e) == (5, 17) and "listed twice" in e.message
    e = perr("nnz(w, free = [1.5]) <= 2", ConstraintError)
    assert "1.5 is not an integer" in e.message
    e = perr("nnz(w, free = [0, 1, 2]) <= 3", ConstraintError)
    assert at(e) == (5, 3) and "only 2 coordinates outside free=" in e.message
    e = perr("nnz(offdiag(W), free = [0]) <= 2", ConstraintError)
    assert "diagonal is already free" in e.message
    e = perr("nnz(w, free = [0, w]) <= 2")
    assert "a list holds numbers" in e.message and at(e) == (5, 17)
    e = perr("nnz(w, free = []) <= 2", ParseError)
    assert at(e) == (5, 18) and "unexpected ']'" in e.message and e.hint == "expected an expression"


HEAD_LINEAR = "var w[3]\nminimize sum_squares(w - 1)\nsubject to\n"


def test_located_errors_of_boxes():
    e = perr("2 <= w <= 1", ConstraintError)
    assert at(e) == (5, 3) and "lower bound 2 exceeds the upper bound 1" in e.message
    e = perr("w >= [1, 2]", ShapeError)
    assert at(e) == (5, 3) and "does not broadcast" in e.message
    assert [c.kind for c in sm.parse(HEAD_LINEAR + "  w[0] + 1 >= 0\n").constraints] == ["linear_ineq"]
    e = perr("0 <= w <= w", ConstraintError)
    assert "must be constants" in e.message
    text = "var w[5]\nminimize sum_squares(w - 1)\nsubject to\n  nnz(w) <= 2\n  w >= 1\n"
    with pytest.raises(ConstraintError) as ex:
        sm.parse(text, name="m.sm").solve()
    assert at(ex.value) == (5, 3) and "excludes 0" in ex.value.message and "free" in ex.value.hint
    text = "var w[5]\nminimize sum_squares(w - 1)\nsubject to\n  w >= 1\n  w <= 0.5\n"
    with pytest.raises(ConstraintError) as ex:
        sm.parse(text, name="m.sm").solve()
    assert at(ex.value) == (5, 3) and "no feasible value" in ex.value.message
    text = "var W[3, 3]\nminimize sum_squares(W - 1)\nsubject to\n  rank(W) <= 1\n  W >= 0\n"
    with pytest.raises(ConstraintError) as ex:
        sm.parse(text, name="m.sm").solve()
    assert at(ex.value) == (5, 3) and "not with rank" in ex.value.message


def test_builder_comparisons_build_boxes():
    w = sm.Variable(4, name="w")
    assert str(w >= 0) == "w >= 0" and str(0 <= w) == "w >= 0"
    assert str(w[1:] <= 2) == "w[1:] <= 2"
    c = sm.box(w, -1, np.arange(4.0) + 1)
    assert c.bounds()[1].tolist() == [1, 2, 3, 4]
    assert (2 * w >= 0).kind == "linear_ineq"  # an affine expression that is not a view: linear
