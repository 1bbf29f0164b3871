"""The cox atom (Breslow partial likelihood): value against the direct O(n^2) formula with ties,
gradient and Hessian-vector products against finite differences, the whole-vector loss in the
composite form (Newton restricted solves, cvxpy reference), optimality against enumeration of
supports, every deterministic solver on it, the stochastic ones refusing it, and bad input."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.errors import DataError, ModelError, ShapeError
from sparsemodel.model.atoms import NoConjugate, cox


def breslow_direct(z: np.ndarray, time: np.ndarray, event: np.ndarray) -> float:
    """The textbook formula: for each event, the log of the sum over everyone with time >= its time."""
    v = 0.0
    for i in np.flatnonzero(event):
        risk = time >= time[i]
        v += np.log(np.exp(z[risk]).sum()) - z[i]
    return float(v)


def breslow_hessian(z: np.ndarray, time: np.ndarray, event: np.ndarray) -> np.ndarray:
    H = np.zeros((len(z), len(z)))
    for i in np.flatnonzero(event):
        p = np.where(time >= time[i], np.exp(z), 0.0)
        p /= p.sum()
        H += np.diag(p) - np.outer(p, p)
    return H


def survival_data(n: int, seed: int, ties: int = 6) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    time = rng.integers(0, ties, n).astype(float)  # few distinct times: many ties
    event = (rng.random(n) < 0.7).astype(float)
    return time, event


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_value_gradient_hessian_against_the_direct_formula(seed):
    n = 23
    time, event = survival_data(n, seed)
    w = sm.Variable(n, name="w")
    c = cox(w, time, event)
    rng = np.random.default_rng(seed + 10)
    z = rng.standard_normal(n)
    v, g, _ = c.derivs(z, 1)
    assert v == pytest.approx(breslow_direct(z, time, event), rel=1e-12)
    h = 1e-6
    fd = np.array(
        [(breslow_direct(z + h * e, time, event) - breslow_direct(z - h * e, time, event)) / (2 * h) for e in np.eye(n)]
    )
    np.testing.assert_allclose(g, fd, atol=1e-7)
    H = breslow_hessian(z, time, event)
    U = rng.standard_normal((n, 3))
    np.testing.assert_allclose(c.hessian_apply(z, U), H @ U, atol=1e-12)
    np.testing.assert_allclose(c.hessian_apply(z, U[:, 0]), H @ U[:, 0], atol=1e-12)
    # a batch of points at once (the batched Newton kernels pass (m, n))
    vb, gb, _ = c.derivs(np.stack([z, 2 * z]), 1)
    assert vb[1] == pytest.approx(breslow_direct(2 * z, time, event), rel=1e-12)
    np.testing.assert_allclose(gb[0], g)


def test_distinct_times_no_events_and_large_predictors():
    n = 12
    time = np.arange(n, dtype=float)[::-1]
    event = np.ones(n)
    w = sm.Variable(n, name="w")
    z = np.linspace(-1, 1, n)
    assert cox(w, time, event).derivs(z, 0)[0] == pytest.approx(breslow_direct(z, time, event))
    none = cox(w, time, np.zeros(n))
    v, g, _ = none.derivs(z, 1)
    assert v == 0 and not g.any()
    big = 500 * z  # exp(500) overflows: the log-space sums do not
    v, g, _ = cox(w, time, event).derivs(big, 1)
    assert np.isfinite(v) and np.all(np.isfinite(g))
    assert np.all(np.isfinite(cox(w, time, event).hessian_apply(big, np.ones(n))))


def test_reverse_mode_and_facts():
    n, p = 15, 4
    rng = np.random.default_rng(3)
    X = rng.standard_normal((n, p))
    time, event = survival_data(n, 3)
    w = sm.Variable(p, name="w")
    obj = sm.cox(X @ w, time, event) / n
    from tests.model.test_gradients import fd_check

    fd_check(obj)
    c = sm.cox(X @ w, time, event)
    assert c.loss_form == "whole" and c.is_convex() and c.sign == "nonnegative"
    assert c.events == int(event.sum())
    with pytest.raises(NoConjugate, match="no closed form"):
        c.conjugate(np.zeros(n))


def make_problem(n: int = 60, p: int = 8, k: int = 2, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[:k] = [1.5, -1.0, 0.8][:k]
    t = rng.exponential(np.exp(-X @ beta))
    c = rng.exponential(2.0, n)
    time = np.round(np.minimum(t, c), 1)  # rounding makes ties
    event = (t <= c).astype(float)
    w = sm.Variable(p, name="w")
    return sm.Problem(sm.minimize(sm.cox(X @ w, time, event)), [sm.nnz(w) <= k]), X, time, event


def test_composite_form_newton_and_cvxpy_agree():
    prob, *_ = make_problem()
    lp = prob.lower()
    assert lp.design is not None and "cox" in lp.structure
    assert not lp.design.finite_sum
    state = lp.set.state(prob.solve("grahtp").x)
    a = lp.restricted_minimize(state, method="newton")
    b = lp.restricted_minimize(state, method="cvxpy")
    assert a.f == pytest.approx(b.f, rel=1e-8)
    np.testing.assert_allclose(a.x, b.x, atol=1e-5)
    # the design's Hessian-vector product against differences of its gradient
    x = np.random.default_rng(1).standard_normal(lp.n) * 0.3
    v = np.random.default_rng(2).standard_normal(lp.n)
    h = 1e-6
    fd = (lp.design.value_and_grad(x + h * v)[1] - lp.design.value_and_grad(x - h * v)[1]) / (2 * h)
    np.testing.assert_allclose(lp.design.hvp(x, v), fd, atol=1e-6)


def test_optimal_on_every_support_of_a_small_problem():
    prob, X, time, event = make_problem(n=40, p=6, k=2, seed=4)
    best = np.inf
    for S in itertools.combinations(range(6), 2):
        v = sm.Variable(2, name="v")
        best = min(best, sm.Problem(sm.minimize(sm.cox(X[:, list(S)] @ v, time, event))).solve().objective)
    for solver in ("auto", "grahtp", "omp", "ompr", "els", "arht", "foba", "grasp", "fgrahtp", "iht"):
        r = prob.solve(solver)
        assert r.objective <= best * (1 + 1e-6) + 1e-9, solver


def test_stochastic_solvers_refuse_with_the_reason():
    prob, *_ = make_problem()
    with pytest.raises(ModelError, match="not a sum over the rows") as err:
        prob.solve("svrg_ht")
    assert "grahtp" in err.value.hint
    assert "svrg_ht" not in [n for n, _ in prob.check().solvers]


@pytest.mark.parametrize(
    "args, error, words",
    [
        (lambda X, w, t, e: (X @ w, t, 2 * e), DataError, "must be 0 or 1"),
        (lambda X, w, t, e: (X @ w, t[1:], e), ShapeError, "one time and one event"),
        (lambda X, w, t, e: (X @ w, X @ w, e), DataError, "must be data"),
        (lambda X, w, t, e: (np.ones((3, 3)) @ sm.Variable((3, 2), name="W"), t[:3], e[:3]), ShapeError, "vector"),
    ],
)
def test_bad_input_is_located(args, error, words):
    _, X, time, event = make_problem()
    w = sm.Variable(X.shape[1], name="w")
    with pytest.raises(error, match=words):
        sm.cox(*args(X, w, time, event))


def test_model_file_and_builder_give_one_answer(tmp_path):
    prob, X, time, event = make_problem(seed=5)
    np.savetxt(tmp_path / "X.csv", X, delimiter=",")
    np.savetxt(tmp_path / "y.csv", np.c_[time, event], delimiter=",", header="time,event", comments="")
    (tmp_path / "m.sm").write_text(
        'data X : matrix from "X.csv"\n'
        'data y : matrix from "y.csv"\n'
        "var w[cols(X)]\n"
        "minimize cox(X @ w, y[:, 0], y[:, 1])\n"
        "subject to nnz(w) <= 2\n"
    )
    a = sm.load(str(tmp_path / "m.sm")).solve()
    b = prob.solve()
    assert a.objective == pytest.approx(b.objective, rel=1e-10)
    assert list(a.support) == list(b.support)
    bad = tmp_path / "bad.sm"
    bad.write_text(
        'data X : matrix from "X.csv"\ndata y : matrix from "y.csv"\nvar w[cols(X)]\n'
        "minimize cox(X @ w, y[:, 0], y[:, 0])\n"
    )
    with pytest.raises(DataError) as err:
        sm.load(str(bad))
    assert err.value.span.line == 4
