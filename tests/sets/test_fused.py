"""Fused sparsity, nnz(diff(w)) <= k: the exact projection, the exact k-changepoint segmentation
reached by GraHTP on denoising, recovery of the breakpoints with a random design, the tv baseline,
the model language and the builder giving one answer."""

from __future__ import annotations

import itertools
import json
from functools import cache

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.cli import main
from sparsemodel.errors import ConstraintError, SolverError
from sparsemodel.sets.fused import best_pieces


def sse_of(v: np.ndarray, breaks: list[int] | np.ndarray) -> float:
    edges = [0, *[int(b) for b in breaks], len(v)]
    return float(sum(((v[a:b] - v[a:b].mean()) ** 2).sum() for a, b in zip(edges[:-1], edges[1:])))


def segmentation_optimum(v: np.ndarray, k: int) -> float:
    """An independent dynamic program: the least sum of squares of v in at most k + 1 pieces, by
    memoized recursion over (pieces left, start) (no vectorization, no prefix sums)."""
    v = [float(t) for t in v]
    m = len(v)

    def seg(a: int, b: int) -> float:
        part = v[a:b]
        mu = sum(part) / len(part)
        return sum((t - mu) ** 2 for t in part)

    @cache
    def best(start: int, changes: int) -> float:
        if start == m:
            return 0.0
        out = seg(start, m)
        if changes > 0:
            for b in range(start + 1, m):
                out = min(out, seg(start, b) + best(b, changes - 1))
        return out

    return best(0, k)


def piecewise(p: int, breaks: list[int], values: list[float]) -> np.ndarray:
    edges = [0, *breaks, p]
    w = np.zeros(p)
    for a, b, v in zip(edges[:-1], edges[1:], values):
        w[a:b] = v
    return w


def test_the_projection_is_the_best_approximation_with_k_changes():
    rng = np.random.default_rng(0)
    for _ in range(40):
        m, k = int(rng.integers(2, 9)), int(rng.integers(0, 4))
        v = rng.standard_normal(m)
        brute = min(sse_of(v, br) for j in range(k + 1) for br in itertools.combinations(range(1, m), j))
        assert sse_of(v, best_pieces(v, k)) == pytest.approx(brute, abs=1e-10)
    w = sm.Variable(30, name="w")
    lp = sm.Problem(sm.minimize(sm.sum_squares(w)), [sm.nnz(sm.diff(w)) <= 3]).lower()
    z = rng.standard_normal(30)
    x, st = lp.set.project(z)
    assert len(st) <= 3 and np.array_equal(st, lp.set.state(x))
    assert np.allclose(lp.set.project(x)[0], x)  # idempotent
    assert sse_of(z, st) == pytest.approx(segmentation_optimum(z, 3), rel=1e-10)


@pytest.mark.parametrize("seed", range(3))
def test_grahtp_reaches_the_exact_k_changepoint_segmentation_when_denoising(seed):
    """X the identity, least squares: the optimum is the best segmentation of y, which an
    independent dynamic program computes."""
    rng = np.random.default_rng(seed)
    p, k = 40, 4
    y = piecewise(p, [7, 15, 26, 33], list(rng.normal(0, 2, 5))) + 0.4 * rng.standard_normal(p)
    w = sm.Variable(p, name="w")
    prob = sm.Problem(sm.minimize(sm.sum_squares(w - y)), [sm.nnz(sm.diff(w)) <= k])
    r = prob.solve("grahtp")
    assert r.status == "converged"
    assert r.objective == pytest.approx(segmentation_optimum(y, k), rel=1e-9, abs=1e-10)
    assert prob.solve("auto").objective == pytest.approx(r.objective, rel=1e-9)


def test_breakpoints_recovered_with_a_random_design_as_often_as_tv():
    """n = 500, p = 200, 5 changes (the issue's design, 3 seeds here; benchmarks/fused.py runs 10):
    GraHTP finds the true breakpoints at least as often as total variation."""
    hits = {"grahtp": 0, "tv": 0}
    true = [30, 70, 110, 150, 180]
    for seed in range(3):
        rng = np.random.default_rng(seed)
        w0 = piecewise(200, true, [0, 2, -1, 1.5, -2, 0.5])
        X = rng.standard_normal((500, 200))
        y = X @ w0 + rng.standard_normal(500)
        w = sm.Variable(200, name="w")
        prob = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / 1000), [sm.nnz(sm.diff(w)) <= 5])
        for name in hits:
            r = prob.solve(name)
            hits[name] += r.extra["changepoints"] == true
    assert hits["grahtp"] >= hits["tv"] and hits["grahtp"] == 3


def test_tv_is_tuned_to_exactly_k_changes_and_debiased():
    rng = np.random.default_rng(5)
    y = piecewise(50, [10, 30], [0.0, 3.0, -1.0]) + 0.3 * rng.standard_normal(50)
    w = sm.Variable(50, name="w")
    prob = sm.Problem(sm.minimize(sm.sum_squares(w - y)), [sm.nnz(sm.diff(w)) <= 2])
    r = prob.solve("tv")
    assert len(r.extra["changepoints"]) == 2
    pieces = r.extra["changepoints"]
    assert r.objective == pytest.approx(sse_of(y, pieces), rel=1e-8)  # the refit on its pieces
    assert r.objective >= prob.solve("grahtp").objective - 1e-9


def test_the_model_language_and_the_builder_give_one_answer(tmp_path):
    rng = np.random.default_rng(2)
    y = piecewise(30, [12, 20], [1.0, -1.0, 2.0]) + 0.2 * rng.standard_normal(30)
    np.save(tmp_path / "y.npy", y)
    text = (
        'data y : vector from "y.npy"\nvar w[rows(y)]\nminimize sum_squares(w - y)\nsubject to\n    nnz(diff(w)) <= 2\n'
    )
    (tmp_path / "m.sm").write_text(text)
    r_file = sm.load(tmp_path / "m.sm").solve("grahtp")
    w = sm.Variable(30, name="w")
    r_py = sm.Problem(sm.minimize(sm.sum_squares(w - y)), [sm.nnz(sm.diff(w)) <= 2]).solve("grahtp")
    assert np.array_equal(r_file.support, r_py.support) and r_file.objective == pytest.approx(r_py.objective)
    assert r_file.unit == "changes" and r_file.k == 2


def test_the_cli_compares_grahtp_and_tv(tmp_path, capsys):
    rng = np.random.default_rng(3)
    np.save(tmp_path / "y.npy", piecewise(40, [15, 25], [0.0, 2.0, 0.5]) + 0.3 * rng.standard_normal(40))
    (tmp_path / "m.sm").write_text(
        'data y : vector from "y.npy"\nvar w[rows(y)]\nminimize sum_squares(w - y)\nsubject to\n'
        "    nnz(diff(w)) <= 2\ncompare with grahtp, tv at k in 1:3\n"
    )
    assert main(["compare", str(tmp_path / "m.sm"), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {(r["solver"], r["k"]) for r in rows} == {(s, k) for s in ("grahtp", "tv") for k in (1, 2, 3)}
    assert all(r["status"] == "converged" for r in rows)


def test_who_takes_a_fused_constraint():
    w = sm.Variable(20, name="w")
    prob = sm.Problem(sm.minimize(sm.sum_squares(w - np.arange(20.0))), [sm.nnz(sm.diff(w)) <= 3])
    for name in ("grahtp", "fgrahtp", "iht", "auto"):
        assert prob.solve(name).status == "converged"
    with pytest.raises(SolverError, match="does not handle fused sparsity") as e:
        prob.solve("omp")
    assert "grahtp" in e.value.hint and "tv" in e.value.hint
    assert prob.solve("grahtp", k=0).objective == pytest.approx(float(np.var(np.arange(20.0)) * 20))
    with pytest.raises(ConstraintError, match="has only 19 changes"):
        prob.solve("grahtp", k=20)
    with pytest.raises(ConstraintError, match="do not apply to diff"):
        sm.nnz(sm.diff(w), free=[0])
