"""The ordinal atom (cumulative logit with free cut-points): value against the direct likelihood,
gradient and Hessian-vector products against finite differences, the cut-points kept in order by
the loss's domain, optimality against enumeration of supports, the cvxpy reference, agreement with
abess's OrdinalRegression on its own generator, the model language (levels(y)) and bad input."""

from __future__ import annotations

import contextlib
import io
import itertools

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.errors import DataError, ShapeError
from sparsemodel.model.atoms import NoConjugate, ordinal


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def direct(z: np.ndarray, theta: np.ndarray, y: np.ndarray, levels: np.ndarray | None = None) -> float:
    """-sum log P(y_i), P(y <= j) = sigmoid(theta_j - z), classes = sorted distinct labels."""
    c = np.searchsorted(np.unique(y) if levels is None else levels, y)
    t = np.concatenate([[-np.inf], theta, [np.inf]])
    return float(-np.log(sigmoid(t[c + 1] - z) - sigmoid(t[c] - z)).sum())


def simulate(n: int, p: int, seed: int, cuts=(-1.0, 0.5, 1.5)) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    w = np.zeros(p)
    w[:2] = [1.5, -1.0]
    P = sigmoid(np.asarray(cuts)[None, :] - (X @ w)[:, None])
    y = (rng.random(n)[:, None] > P).sum(axis=1).astype(float)
    return X, y, w


@pytest.mark.parametrize("seed", [0, 1])
def test_value_gradient_hessian(seed):
    rng = np.random.default_rng(seed)
    n, J = 21, 4
    y = rng.integers(0, J, n) * 2.0 + 1.0  # labels 1, 3, 5, 7: only their order matters
    e, t = sm.Variable(n, name="e"), sm.Variable(J - 1, name="t")
    o = ordinal(e, t, y)
    z = np.concatenate([rng.standard_normal(n), np.sort(rng.standard_normal(J - 1)) * 2])
    v, g, _ = o.derivs(z, 1)
    assert v == pytest.approx(direct(z[:n], z[n:], y), rel=1e-12)
    h = 1e-6
    E = np.eye(len(z))
    fd = np.array(
        [
            (direct((z + h * d)[:n], (z + h * d)[n:], y) - direct((z - h * d)[:n], (z - h * d)[n:], y)) / (2 * h)
            for d in E
        ]
    )
    np.testing.assert_allclose(g, fd, atol=1e-7)
    H = np.array([(o.derivs(z + h * d, 1)[1] - o.derivs(z - h * d, 1)[1]) / (2 * h) for d in E])
    U = rng.standard_normal((len(z), 3))
    np.testing.assert_allclose(o.hessian_apply(z, U), H @ U, atol=1e-6)
    np.testing.assert_allclose(o.hessian_apply(z, U[:, 0]), H @ U[:, 0], atol=1e-6)
    assert np.linalg.eigvalsh((H + H.T) / 2).min() > -1e-7  # convex
    with pytest.raises(NoConjugate):
        o.conjugate(z)


def test_the_domain_keeps_the_cut_points_in_order():
    X, y, _ = simulate(50, 3, 0)
    e, t = sm.Variable(50, name="e"), sm.Variable(3, name="t")
    o = ordinal(e, t, y)
    z = np.concatenate([X[:, 0], [-1.0, 0.5, 1.5]])
    assert np.isfinite(o.derivs(z, 0)[0])
    z[50:] = [0.5, -1.0, 1.5]  # two cut-points swapped: no probability for the middle class
    assert o.derivs(z, 0)[0] == np.inf
    z[50:] = 0.3  # all equal (the zero start): the solvers move to an ordered start
    assert o.derivs(z, 0)[0] == np.inf


def test_optimal_on_every_support_and_cvxpy_agrees():
    X, y, _ = simulate(60, 6, 0)
    w, th = sm.Variable(6, name="w"), sm.Variable(3, name="theta")
    prob = sm.Problem(sm.minimize(sm.ordinal(X @ w, th, y)), [sm.nnz(w) <= 2])
    best = np.inf
    for S in itertools.combinations(range(6), 2):
        v, t = sm.Variable(2, name="v"), sm.Variable(3, name="t")
        best = min(best, sm.Problem(sm.minimize(sm.ordinal(X[:, list(S)] @ v, t, y))).solve().objective)
    for solver in ("auto", "grahtp", "omp", "ompr", "els", "arht", "grasp", "iht"):
        r = prob.solve(solver)
        assert r.objective <= best * (1 + 1e-6), solver
        theta = r.values["theta"]
        assert np.all(np.diff(theta) > 0), solver
    lp = prob.lower()
    state = lp.set.state(prob.solve().x)
    a = lp.restricted_minimize(state, method="newton")
    b = lp.restricted_minimize(state, method="cvxpy")
    assert a.f == pytest.approx(b.f, rel=1e-7)
    with pytest.raises(sm.ModelError, match="not a sum over the rows"):
        prob.solve("sg_ht")


def test_agrees_with_abess_on_its_generator():
    abess = pytest.importorskip("abess")
    np.random.seed(2)
    with contextlib.redirect_stdout(io.StringIO()):  # the generator prints
        data = abess.make_glm_data(n=500, p=20, k=5, family="ordinal")
    X, y = data.x, data.y
    w, th = sm.Variable(20, name="w"), sm.Variable(2, name="theta")
    r = sm.Problem(sm.minimize(sm.ordinal(X @ w, th, y)), [sm.nnz(w) <= 5]).solve()
    model = abess.OrdinalRegression(support_size=[5]).fit(X, y)
    truth = np.flatnonzero(data.coef_)
    assert list(r.support) == list(truth) == list(np.flatnonzero(model.coef_))
    # abess's P(y <= j) = sigmoid(x'beta + eps_j): w = -beta, theta = eps (its first J - 1 intercepts)
    e = sm.Variable(500, name="e")
    theirs = ordinal(e, sm.Variable(2, name="t"), y).derivs(
        np.concatenate([-X @ model.coef_, model.intercept_[:2]]), 0
    )[0]
    assert r.objective <= theirs + 1e-8
    assert np.sign(r.values["w"][truth]).tolist() == np.sign(-model.coef_[truth]).tolist()


def test_model_file_levels_and_bad_input(tmp_path):
    X, y, _ = simulate(80, 5, 3)
    np.savetxt(tmp_path / "X.csv", X, delimiter=",")
    np.savetxt(tmp_path / "y.csv", y, delimiter=",", header="grade", comments="")
    (tmp_path / "m.sm").write_text(
        'data X : matrix from "X.csv"\n'
        'data y : vector from "y.csv"\n'
        "var w[cols(X)]\n"
        "var theta[levels(y) - 1]\n"
        "minimize ordinal(X @ w, theta, y)\n"
        "subject to nnz(w) <= 2\n"
    )
    a = sm.load(str(tmp_path / "m.sm")).solve()
    w, th = sm.Variable(5, name="w"), sm.Variable(3, name="theta")
    b = sm.Problem(sm.minimize(sm.ordinal(X @ w, th, y)), [sm.nnz(w) <= 2]).solve()
    assert a.objective == pytest.approx(b.objective, rel=1e-10)
    bad = tmp_path / "bad.sm"
    bad.write_text(
        'data X : matrix from "X.csv"\ndata y : vector from "y.csv"\nvar w[cols(X)]\nvar theta[2]\n\nminimize ordinal(X @ w, theta, y)\n'
    )
    with pytest.raises(ShapeError, match="4 classes .* need 3 cut-points") as err:
        sm.load(str(bad))
    assert err.value.span.line == 6
    with pytest.raises(DataError, match="one value only"):
        sm.ordinal(X @ w, sm.Variable(1, name="t"), np.ones(80))
    with pytest.raises(DataError, match="must be data"):
        sm.ordinal(X @ w, th, X @ w)


def test_a_subset_of_rows_keeps_the_classes():
    """Cross-validation rebuilds the model on a fold (model/samples.rebind_rows): a fold without
    one class keeps the coding of all the data (the same cut-points)."""
    from sparsemodel.model.samples import rebind_rows, sample_nodes

    X, y, _ = simulate(60, 4, 2)
    w, th = sm.Variable(4, name="w"), sm.Variable(3, name="theta")
    obj = sm.ordinal(X @ w, th, y)
    rows = np.flatnonzero(y != 2)  # a fold without class 2
    sub = rebind_rows(obj, sample_nodes(obj, 60), rows)
    assert sub.J == 4 and sub.args[2].shape == (len(rows),)
    z = np.concatenate([X[rows] @ np.ones(4), [-1.0, 0.0, 1.0]])
    assert sub.derivs(z, 0)[0] == pytest.approx(
        direct(z[: len(rows)], z[len(rows) :], y[rows], np.unique(y)), rel=1e-12
    )
    with pytest.raises(DataError, match="not one of its levels"):
        sm.ordinal(X @ w, th, y, levels=[0, 1, 3, 4])


def test_case_weights():
    """weights=w: sum_i w_i l_i -- value, gradient and Hessian by finite differences; integer weights
    equal the samples repeated (at every z); a fold keeps its rows' weights; negative or variable
    weights are refused with the place."""
    from sparsemodel.model.samples import rebind_rows, sample_nodes

    rng = np.random.default_rng(3)
    n, J = 17, 4
    y = rng.integers(0, J, n).astype(float)
    w = rng.integers(0, 4, n).astype(float)
    e, t = sm.Variable(n, name="e"), sm.Variable(J - 1, name="t")
    o = ordinal(e, t, y, weights=w)
    z = np.concatenate([rng.standard_normal(n), np.sort(rng.standard_normal(J - 1)) * 2])

    def weighted(z):
        c = np.searchsorted(np.unique(y), y)
        tt = np.concatenate([[-np.inf], z[n:], [np.inf]])
        return float(-(w * np.log(sigmoid(tt[c + 1] - z[:n]) - sigmoid(tt[c] - z[:n]))).sum())

    v, g, _ = o.derivs(z, 1)
    assert v == pytest.approx(weighted(z), rel=1e-12)
    h, E = 1e-6, np.eye(len(z))
    np.testing.assert_allclose(g, [(weighted(z + h * d) - weighted(z - h * d)) / (2 * h) for d in E], atol=1e-7)
    H = np.array([(o.derivs(z + h * d, 1)[1] - o.derivs(z - h * d, 1)[1]) / (2 * h) for d in E])
    U = rng.standard_normal((len(z), 2))
    np.testing.assert_allclose(o.hessian_apply(z, U), H @ U, atol=1e-6)
    r = np.repeat(np.arange(n), w.astype(int))
    rep = ordinal(sm.Variable(len(r), name="e"), t, y[r], levels=np.unique(y))
    assert rep.derivs(np.concatenate([z[:n][r], z[n:]]), 0)[0] == pytest.approx(v, rel=1e-12)
    X = rng.standard_normal((n, 3))
    b = sm.Variable(3, name="b")
    obj = sm.ordinal(X @ b, t, y, weights=w)
    rows = np.arange(0, n, 2)
    sub = rebind_rows(obj, sample_nodes(obj, n), rows)
    zs = np.concatenate([X[rows] @ np.ones(3), z[n:]])
    full = ordinal(sm.Variable(len(rows), name="e"), t, y[rows], weights=w[rows], levels=np.unique(y))
    assert sub.derivs(zs, 0)[0] == pytest.approx(full.derivs(zs, 0)[0], rel=1e-12)
    with pytest.raises(DataError, match="entry 2 is -1"):
        ordinal(e, t, y, weights=np.r_[1.0, 1.0, -1.0, np.ones(n - 3)])
    with pytest.raises(DataError, match="weights must be data"):
        ordinal(e, t, y, weights=sm.Variable(n, name="u"))


def test_weighted_cvxpy_counterpart_agrees():
    """The cvxpy form (restricted = cvxpy, the relaxations) carries the case weights: its restricted
    minimum equals Newton's on the weighted loss, and differs from the unweighted one."""
    X, y, _ = simulate(60, 6, 1)
    sw = np.random.default_rng(1).uniform(0.2, 3.0, 60)
    w, th = sm.Variable(6, name="w"), sm.Variable(3, name="theta")
    prob = sm.Problem(sm.minimize(sm.ordinal(X @ w, th, y, weights=sw)), [sm.nnz(w) <= 2])
    lp = prob.lower()
    state = lp.set.state(prob.solve().x)
    a = lp.restricted_minimize(state, method="newton")
    b = lp.restricted_minimize(state, method="cvxpy")
    assert a.f == pytest.approx(b.f, rel=1e-7)
    plain = sm.Problem(sm.minimize(sm.ordinal(X @ w, th, y)), [sm.nnz(w) <= 2]).lower()
    assert abs(plain.restricted_minimize(plain.set.state(prob.solve().x), method="cvxpy").f - b.f) > 1e-3 * abs(b.f)
