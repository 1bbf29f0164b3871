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
