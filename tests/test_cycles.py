"""A solve, a path, a selection and an estimator's fit leave no reference cycle that holds a
lowering: each lowering (its design, kernel arrays, Gram rows, relaxation) is freed by reference
counting as soon as its last user lets go, not whenever the garbage collector next runs. A cycle
there (a cached refusal whose traceback's frames held the lowering; a relaxation and its lowering
pointing at each other) made a loop of fits allocate fresh memory every time: a 500 x 1000
cross-validated fit took 2.5 times as long without ``gc.collect()`` between fits."""

from __future__ import annotations

import gc
import warnings

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.lowering.lowered import LoweredProblem
from sparsemodel.sklearn import SparseLinearRegression, SparseLogisticRegression

RNG = np.random.default_rng(0)
X = RNG.standard_normal((60, 12))
Y = X[:, 0] - X[:, 1] + 0.5 * RNG.standard_normal(60)
w = sm.Variable(12, name="w")
PLAIN = sm.Problem(sm.minimize(sm.sum_squares(X @ w - Y)), [sm.nnz(w) <= 3])  # no finite bound: refused
RIDGE = sm.Problem(sm.minimize(sm.sum_squares(X @ w - Y) + 0.1 * sm.sum_squares(w)), [sm.nnz(w) <= 3])

RUNS = {
    "solve, refused bound": lambda: PLAIN.solve(),
    "solve, relaxation": lambda: RIDGE.solve(),
    "tight bound": lambda: RIDGE.solve(bound="tight"),
    "path": lambda: RIDGE.path(k=range(1, 5)),
    "select by ebic": lambda: PLAIN.select(k=range(0, 5)),
    "select by cv": lambda: RIDGE.select(k=range(0, 5), by="cv"),
    "estimator, k fixed": lambda: SparseLinearRegression(k=3).fit(X, Y),
    "estimator, default k": lambda: SparseLogisticRegression().fit(X, (Y > 0) * 1.0),
    "estimator, k by cv": lambda: SparseLinearRegression(k="cv").fit(X, Y),
}


@pytest.mark.parametrize("name", list(RUNS))
def test_nothing_a_run_lowered_waits_for_the_garbage_collector(name):
    run = RUNS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run()  # (first-use caches filled)
        gc.collect()
        was = gc.get_debug()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            run()
            gc.collect()
            held = [type(o).__name__ for o in gc.garbage if isinstance(o, LoweredProblem)]
        finally:
            gc.set_debug(was)
            gc.garbage.clear()
    assert held == []
