"""Without the compiled kernels (an install on a machine without a C compiler, or a source tree used
without ``pip install -e .``) ``auto`` runs its Python pipeline and says so once. This file runs
whether or not the extension is built: the import of the extension is made to fail here."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

import sparsemodel as sm
import sparsemodel.numerics
from sparsemodel.lowering import lean as lean_mod
from sparsemodel.solvers import get_solver


def test_a_missing_extension_warns_once_and_the_python_pipeline_answers(monkeypatch):
    """Warned on the first problem of the lean class (not before: a problem with groups of unequal
    sizes says nothing)."""
    monkeypatch.setattr(lean_mod, "_KERNELS", [])  # not looked up yet in this process
    monkeypatch.setitem(sys.modules, "sparsemodel.numerics._lean", None)  # its import fails
    monkeypatch.delattr(sparsemodel.numerics, "_lean", raising=False)
    rng = np.random.default_rng(3)
    X = rng.standard_normal((60, 10))
    y = X[:, 1] - 2 * X[:, 7] + 0.1 * rng.standard_normal(60)
    w = sm.Variable(10, name="w")
    groups = sm.Problem(
        sm.minimize(sm.sum_squares(X @ w - y)), [sm.nnz(w, groups=np.minimum(np.arange(10) // 2, 3)) <= 2]
    ).lower()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # outside the lean class the kernels are not missed: nothing said
        get_solver("auto")().solve(groups)
    lp = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y)), [sm.nnz(w) <= 2]).lower()
    with pytest.warns(RuntimeWarning, match="compiled kernels are not built.*Python pipeline.*pip install -e ."):
        res = get_solver("auto")().solve(lp)
    assert "kernel" not in res.extra
    assert set(np.flatnonzero(res.x)) == {1, 7}
    ref = get_solver("auto")(lean=False).solve(lp)
    assert res.objective == ref.objective
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once: a second solve says nothing
        assert get_solver("auto")().solve(lp).objective == ref.objective
