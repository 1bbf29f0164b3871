"""A model's lowerings on subsets of its samples (lowering/subsets.py): the first subset of a size
lowered, the others rebound from it; each answers exactly the model on its rows, as a fresh
lowering of that model does, with unnamed data too."""

from __future__ import annotations

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.lowering import lean as lean_mod
from sparsemodel.lowering.lowered import LoweredProblem
from sparsemodel.lowering.rebind import _BoundObjective
from sparsemodel.lowering.subsets import SampleLowerings
from sparsemodel.objective.sampleview import sample_view
from sparsemodel.solvers import get_solver


def problem(family: str, n: int = 61, p: int = 12) -> sm.Problem:
    rng = np.random.default_rng(5)
    X = rng.standard_normal((n, p))
    eta = X[:, :3] @ np.array([1.5, -1.0, 0.8])
    w = sm.Variable(p + 1, name="w")
    z = X @ w[1:] + w[0]  # (the data as arrays: unnamed data nodes)
    if family == "ls":
        y = eta + rng.standard_normal(n)
        loss = sm.sum_squares(z - y) + 0.1 * sm.sum_squares(w[1:])
    else:
        y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)
        loss = sm.sum(sm.logistic(z)) - y @ z + 0.1 * sm.sum_squares(w[1:])
    return sm.Problem(sm.minimize(loss), [sm.nnz(w[1:]) <= 3])


def same(a, b) -> None:
    assert a.status == b.status
    assert a.objective == pytest.approx(b.objective, rel=1e-10, abs=1e-12)
    assert list(a.support) == list(b.support)
    np.testing.assert_allclose(a.x, b.x, atol=1e-8)
    assert (a.lower_bound is None) == (b.lower_bound is None)
    if a.lower_bound is not None:
        assert a.lower_bound == pytest.approx(b.lower_bound, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("family", ["ls", "logistic"])
@pytest.mark.parametrize("share", [True, False])
def test_every_subset_answers_its_own_rows_as_a_fresh_lowering(family, share):
    prob = problem(family)
    model = prob  # (a Problem is a Model)
    view = sample_view(model)
    lowerings = SampleLowerings(model, view, share=share)
    rng = np.random.default_rng(0)
    auto = get_solver("auto")
    subsets = [np.sort(rng.choice(61, size, replace=False)) for size in (30, 30, 48, 30, 48)]
    got = [lowerings.lower(rows) for rows in subsets]
    rebound = [isinstance(lp.problem.objective, _BoundObjective) for lp in got]
    assert rebound == [False, True, False, True, True]  # (each size's first lowered, the others rebound)
    answers = [auto().solve(lp) for lp in got]
    for lp, rows, ans in zip(got, subsets, answers):
        fresh = auto().solve(LoweredProblem(view.train(rows)))
        same(ans, fresh)
        same(auto().solve(lp), fresh)  # (again, after the others: its own numbers)
        assert lp.problem.objective.expr is not None  # (the rebound model's tree, built on demand)
    kernels = [lean_mod.lean_data(lp).P for lp in got]
    if share:  # one kernel problem per size, written by whichever is solved
        assert kernels[0] is kernels[1] is kernels[3] and kernels[2] is kernels[4]
    else:  # each its own (folds solved in turn do not write into one another's)
        assert len({id(P) for P in kernels}) == len(kernels)


def test_a_subset_of_the_samples_fits_the_model_of_those_rows():
    """The rebound lowering's model is the model on its rows: its objective at a point is the
    fresh model's."""
    prob = problem("logistic")
    model = prob  # (a Problem is a Model)
    view = sample_view(model)
    lowerings = SampleLowerings(model, view)
    rows0, rows1 = np.arange(0, 40), np.arange(21, 61)
    lowerings.lower(rows0)
    lp1 = lowerings.lower(rows1)
    x = np.random.default_rng(1).standard_normal(lp1.n)
    fresh = LoweredProblem(view.train(rows1))
    assert lp1.f(x) == pytest.approx(fresh.f(x), rel=1e-12)
    assert LoweredProblem(lp1.problem).f(x) == pytest.approx(fresh.f(x), rel=1e-12)


def kernel_model(family: str, n: int = 60, p: int = 10) -> tuple[sm.Problem, np.ndarray]:
    """Models in the lean class whose data term on a subset is a fixed multiple of its rows' sum:
    a sum with a fixed scale and ridges (factor 1), a mean (factor n / |R|), per-sample weights,
    the row-wise softmax (K = 3 entries per sample)."""
    rng = np.random.default_rng(11)
    X = rng.standard_normal((n, p))
    eta = X[:, :3] @ np.array([1.5, -1.0, 0.8])
    w = sm.Variable(p + 1, name="w")
    z = X @ w[1:] + w[0]
    if family == "sum ls":
        loss = sm.sum_squares(z - (eta + rng.standard_normal(n))) / (2 * n) + 0.05 * sm.sum_squares(w[1:])
    elif family == "mean logistic":
        v = np.where(rng.random(n) < 1 / (1 + np.exp(-eta)), 1.0, -1.0)
        loss = sm.mean(sm.logistic(-v * z)) + 1e-3 * sm.sum_squares(w[1:])
    elif family == "sum poisson":  # (a linear piece: -y'z, made again from its rows)
        y = rng.poisson(np.exp(0.5 * eta)).astype(float)
        loss = sm.sum(sm.exp(z) - y * z) / (2 * n)
    elif family == "mean gamma":
        y = rng.gamma(2.0, np.exp(0.3 * eta))
        loss = sm.mean(y * sm.exp(-z) + z)
    elif family == "weighted logistic":
        v = np.where(rng.random(n) < 1 / (1 + np.exp(-eta)), 1.0, -1.0)
        loss = sm.sum(rng.uniform(0.5, 2.0, n) * sm.logistic(-v * z)) / n
    else:  # multinomial: K = 3 classes, one-hot Y
        W = sm.Variable((p, 3), name="W")
        Y = np.eye(3)[rng.integers(0, 3, n)]
        Z = X @ W
        loss = sm.sum(sm.logsumexp(Z, axis=1) - sm.sum(Z * Y, axis=1)) / n
        return sm.Problem(sm.minimize(loss), [sm.nnz(W) <= 4]), X
    return sm.Problem(sm.minimize(loss), [sm.nnz(w[1:]) <= 3]), X


@pytest.mark.parametrize("family", ["sum ls", "mean logistic", "weighted logistic", "sum poisson", "mean gamma"])
def test_a_folds_kernel_problem_is_the_rows_of_the_all_data_one(family):
    """lowering/lean.on_rows: the kernel arrays of the model on a subset of its rows, made from the
    all-data lowering's, are those of that model's own lowering (bit for bit for a sum with a fixed
    scale; a mean's coefficient n / |R| times 1 / n may differ in its last bit)."""
    pytest.importorskip("sparsemodel.numerics._lean", reason="the compiled kernels are not built")
    prob, _ = kernel_model(family)
    view = sample_view(prob)
    dt = view.term()
    assert dt.subset == (1 if family.startswith("mean") else 0)
    lp = LoweredProblem(prob)
    rows = np.sort(np.random.default_rng(3).choice(60, 45, replace=False))
    factor = 60 / 45 if dt.subset == 1 else 1.0
    got = lean_mod.on_rows(lp, rows, factor)
    want = lean_mod.lean_data(LoweredProblem(view.train(rows)))
    assert got is not None and want is not None and got.P is not want.P
    for name in lean_mod.ARRAYS:
        a, b = got.views[name], want.views[name]
        assert a.shape == b.shape, name
        if dt.subset == 0:
            assert np.array_equal(a, b), name
        else:
            # (the coefficient c * n / |R| against 1 / |R|: two roundings of the scalar, one of each
            # product with it, and none else: four units of the last place at most)
            np.testing.assert_allclose(a, b, rtol=4 * np.finfo(float).eps, atol=0, err_msg=name)
    assert got.P.code == want.P.code and got.quadratic == want.quadratic and got.coords == want.coords
    assert got.P.const == pytest.approx(want.P.const, rel=4 * np.finfo(float).eps, abs=0)


def test_a_folds_kernel_problem_is_refused_where_its_rows_do_not_make_it():
    """A linear piece that reads the data across the samples (the logistic written as
    sum(logistic(z)) - y'z: one number, no row per sample) or whose map is not affine block by block
    (the softmax's sum(Z * Y, axis=1)) is not made from rows: on_rows answers None and the fold is
    lowered."""
    pytest.importorskip("sparsemodel.numerics._lean", reason="the compiled kernels are not built")
    lp = LoweredProblem(problem("logistic"))
    assert lean_mod.lean_data(lp) is not None and lp.design.lin.any()
    assert lean_mod.on_rows(lp, np.arange(40), 1.0) is None
    lp = LoweredProblem(kernel_model("multinomial")[0])
    assert lean_mod.lean_data(lp) is not None
    assert lean_mod.on_rows(lp, np.arange(40), 1.0) is None


@pytest.mark.parametrize(
    "family", ["sum ls", "mean logistic", "weighted logistic", "sum poisson", "mean gamma", "multinomial"]
)
def test_cross_validation_on_the_folds_kernels_is_the_lowered_folds(family, monkeypatch):
    """Cross-validation's folds on kernel problems made from the all-data lowering's rows
    (Solver.fold_kernel, workflows/path.KernelFoldRun) give the per-fold losses of the folds
    lowered, bit for bit for a sum with a fixed scale, a linear piece included (a mean: to its
    coefficient's rounding; the softmax, whose linear piece is no affine map, is lowered); and a
    fold whose kernel stops answering part way continues on its lowering (the same kernel problem
    adopted) with the same losses."""
    pytest.importorskip("sparsemodel.numerics._lean", reason="the compiled kernels are not built")
    from sparsemodel.solvers import auto as auto_mod
    from sparsemodel.solvers import lean as solver_lean

    prob, _ = kernel_model(family)
    made = []
    real_kernel = auto_mod.Auto.fold_kernel

    def counted(self, lp, rows, factor):
        got = real_kernel(self, lp, rows, factor)
        made.append(got is not None)
        return got

    monkeypatch.setattr(auto_mod.Auto, "fold_kernel", counted)
    kw = dict(k=range(0, 7), by="cv", folds=4, seed=2, early_stop=False)
    quick = prob.select(**kw)
    assert made == [family != "multinomial"] * 4  # (the softmax's -<Y, Z> is a linear piece: lowered)
    calls = {"n": 0}
    real_points = solver_lean.FoldKernel.points

    def stops(self, ks, init):  # every fold's kernel answers its first call only (k = 0, 1, 2)
        calls["n"] += 1
        return real_points(self, ks[:3], init) if init is None else []

    monkeypatch.setattr(solver_lean.FoldKernel, "points", stops)
    part = prob.select(**kw)
    assert calls["n"] > 4 or family == "multinomial"
    monkeypatch.setattr(auto_mod.Auto, "fold_kernel", lambda self, lp, rows, factor: None)
    lowered = prob.select(**kw)
    assert np.array_equal(quick.per_fold, part.per_fold)
    if family.startswith("mean"):
        np.testing.assert_allclose(quick.per_fold, lowered.per_fold, rtol=1e-12)
    else:
        assert np.array_equal(quick.per_fold, lowered.per_fold)
    assert quick.k == lowered.k == part.k
