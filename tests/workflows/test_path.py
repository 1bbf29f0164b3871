"""The warm-started path over the bound: one lowering, each point its own status, and the answer at
k against the single solve (start='cold' identical, start='best' never worse)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.cli import main
from sparsemodel.errors import ConstraintError
from sparsemodel.workflows.path import neighbour_start


def regression(n: int = 80, p: int = 40, s: int = 6, seed: int = 1):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[rng.choice(p, s, replace=False)] = rng.choice([-2.0, -1.0, 1.0, 2.0], s)
    y = X @ beta + 0.5 * rng.standard_normal(n)
    return X, y, beta


def ls(X, y, k=3, extra=()):
    w = sm.Variable(X.shape[1], name="w")
    return sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / (2 * len(y))), [sm.nnz(w) <= k, *extra])


@pytest.mark.parametrize("solver", ["grahtp", "els", "iht"])
def test_cold_path_is_the_single_solve(solver):
    X, y, _ = regression()
    prob = ls(X, y)
    path = prob.path(k=range(1, 9), solver=solver, start="cold")
    for k in range(1, 9):
        single = prob.solve(solver, k=k)
        assert np.array_equal(path.at(k).x, single.x)
        assert path.at(k).k == k and path.at(k).status == single.status


@pytest.mark.parametrize("solver", ["grahtp", "els"])
def test_best_path_is_never_worse_than_the_single_solve(solver):
    X, y, _ = regression(seed=4)
    prob = ls(X, y)
    path = prob.path(k=range(1, 13), solver=solver)
    assert path.start == "best"
    for pt in path.points[1:]:
        single = prob.solve(solver, k=pt.k)
        assert pt.cold_objective == single.objective  # the cold branch is the single solve
        assert pt.warm_objective is not None
        assert pt.result.objective <= single.objective
        if pt.start == "cold":
            assert np.array_equal(pt.result.x, single.x)
        else:  # the warm start won: strictly lower
            assert pt.result.objective < single.objective
    assert path.points[0].start == "cold" and path.points[0].warm_objective is None


def test_one_lowering_for_the_whole_path(monkeypatch):
    from sparsemodel.lowering import lowered

    X, y, _ = regression()
    prob = ls(X, y)
    made = []
    real = lowered.LoweredProblem.__init__

    def counting(self, *a, **kw):
        made.append(1)
        real(self, *a, **kw)

    monkeypatch.setattr(lowered.LoweredProblem, "__init__", counting)
    prob.path(k=[2, 4, 6], solver="grahtp")
    assert len(made) == 1


def test_each_point_has_its_own_status_and_errors_do_not_stop_the_path():
    """LASSO cannot reach k=1 here (two columns enter together): that point fails, the rest run."""
    rng = np.random.default_rng(0)
    n, p = 40, 12
    X = np.linalg.qr(rng.standard_normal((n, p)))[0] * np.sqrt(n)
    y = 3.0 * X[:, 1] + 3.0 * X[:, 2] - 1.0 * X[:, 5] + 0.5 * X[:, 8]
    path = ls(X, y).path(k=[1, 2, 3], solver="lasso")
    assert [p.ok for p in path.points] == [False, True, True]
    assert "cannot reach exactly k=1" in path.points[0].message
    assert [r["status"] for r in path.rows()] == ["error", "converged", "converged"]
    with pytest.raises(ConstraintError):
        path.at(1)
    assert "takes no starting point" in path.points[1].message  # lasso has no init: solved cold


def test_the_largest_bound_is_the_unconstrained_fit():
    X, y, _ = regression(p=10)
    path = ls(X, y).path(k=[9, 10], solver="grahtp")
    full = path.at(10)
    ref = np.linalg.lstsq(X, y, rcond=None)[0]
    assert np.allclose(full.x, ref, atol=1e-10) and "every unit" in full.message
    assert full.k == 10


def test_neighbour_start_keeps_the_support_and_adds_the_best_gradient_coordinate():
    X, y, _ = regression()
    prob = ls(X, y)
    lp = prob.lower(4)
    prev = prob.solve("grahtp", k=3)
    x = lp.layout.pack(prev.values)
    z = neighbour_start(lp, x)
    kept, sel = lp.set.project(z)
    g = lp.grad(x)
    off = np.setdiff1d(np.arange(lp.n), prev.support)
    best = off[np.argmax(np.abs(g[off]))]
    assert sorted(sel.tolist()) == sorted(prev.support.tolist() + [int(best)])
    assert np.array_equal(kept[prev.support], x[prev.support])


def test_path_with_a_box_stays_in_the_box():
    X, y, _ = regression()
    w = sm.Variable(X.shape[1], name="w")
    prob = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / (2 * len(y))), [sm.nnz(w) <= 3, w >= 0])
    path = prob.path(k=range(1, 8), solver="grahtp")
    assert all(p.result.x.min() >= 0 for p in path.points)


def test_bad_input():
    X, y, _ = regression()
    prob = ls(X, y)
    with pytest.raises(ConstraintError, match="init= is chosen by the path"):
        prob.path(k=[1, 2], solver="grahtp", init=np.zeros(X.shape[1]))
    with pytest.raises(ConstraintError, match="start="):
        prob.path(k=[1, 2], start="lukewarm")
    with pytest.raises(ConstraintError, match="only 40"):
        prob.path(k=[1, 41])
    w = sm.Variable(3, name="w")
    with pytest.raises(ConstraintError, match="has none"):
        sm.Problem(sm.minimize(sm.sum_squares(w - 1))).path(k=[1])


def test_cli_path_writes_reports_and_protects_inputs(tmp_path, capsys):
    X, y, _ = regression()
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    model = tmp_path / "m.sm"
    model.write_text(
        'data X : matrix from "X.npy"\ndata y : vector from "y.npy"\nvar w[cols(X)]\n'
        "minimize sum_squares(X @ w - y) / (2 * rows(X))\nsubject to\n  nnz(w) <= 5\n"
    )
    code = main(
        [
            "path",
            str(model),
            "--k",
            "1:6",
            "--quiet",
            "--out",
            str(tmp_path / "p.json"),
            "--plot",
            str(tmp_path / "p.png"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "path of auto (start=best)" in out  # the default solver
    data = json.loads((tmp_path / "p.json").read_text())
    assert [p["k"] for p in data["points"]] == [1, 2, 3, 4, 5, 6]
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    code = main(["path", str(model), "--k", "1:3", "--quiet", "--csv", str(tmp_path / "X.npy")])
    assert code == 2 and "input of this model" in capsys.readouterr().err
    code = main(["path", str(model), "--k", "1:3", "--quiet", "--plot", str(tmp_path / "p.png")])
    assert code == 2 and "refusing to overwrite" in capsys.readouterr().err
