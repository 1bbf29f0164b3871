"""``ConstraintSet.contains``: a start the set says it contains is left as it is instead of being
projected (solvers/base.initial_point, every warm point of a path), so wherever it answers True the
projection must return the point itself."""

from __future__ import annotations

import numpy as np

import sparsemodel as sm
from sparsemodel.sets.registry import KINDS


def points(s, rng: np.random.Generator, n: int = 40):
    """Points with 0 to a few more than k units nonzero (sparse ones, which the set may contain)."""
    C = getattr(s, "coords", np.arange(s.n))
    for _ in range(n):
        x = rng.standard_normal(s.n)
        k = s.budget if isinstance(s.budget, int) else len(C)  # (a product's budgets: any count)
        m = int(rng.integers(0, min(len(C), 2 * max(k, 1) + 2) + 1))
        off = rng.choice(len(C), len(C) - m, replace=False)
        x[C[off]] = 0.0
        yield x


def test_a_contained_point_is_its_own_projection_for_every_kind():
    rng = np.random.default_rng(0)
    said = 0
    for name, kind in sorted(KINDS.items()):
        lp = sm.Problem.of(kind.example()).lower()
        s = lp.set
        if s is None or not s.thresholds:
            continue
        for x in points(s, rng):
            if s.contains(x):
                said += 1
                z, _ = s.project(x)
                np.testing.assert_array_equal(z, x, err_msg=f"kind {name}: contains(x) but project(x) != x")
    assert said > 0  # (the plain sparsity sets answer True on their sparse points)


def test_coordinates_groups_and_caps_say_true_exactly_within_the_budget():
    p = 8
    w = sm.Variable(p, name="w")
    X, y = np.eye(p), np.ones(p)
    loss = sm.sum_squares(X @ w - y)
    plain = sm.Problem(sm.minimize(loss), [sm.nnz(w) <= 2]).lower().set
    groups = sm.Problem(sm.minimize(loss), [sm.nnz(w, groups=np.repeat(np.arange(4), 2)) <= 2]).lower().set
    caps = sm.Problem(sm.minimize(loss), [sm.nnz(w, per=np.repeat(np.arange(2), 4), cap=1) <= 2]).lower().set
    x = np.zeros(p)
    x[[0, 1]] = 1.0  # two coordinates, one group, one sector twice
    assert plain.contains(x) and groups.contains(x) and not caps.contains(x)
    x[5] = 1.0  # three coordinates, two groups, sectors (2, 1)
    assert not plain.contains(x) and groups.contains(x) and not caps.contains(x)
    x[[1, 5]] = 0.0
    x[4] = 1.0  # coordinates 0 and 4: one per sector
    assert plain.contains(x) and groups.contains(x) and caps.contains(x)
    assert not plain.with_box(None).with_budget(1).contains(x)
