"""Per-group caps, nnz(w, per = g, cap = c) <= k: the greedy projection against the projection by
enumeration, auto at the optimum by enumeration, the perspective bound below it (and above the
bound that forgets the caps), the swap search never leaving the caps, path / select / compare, the
model language, the builder and the CLI giving one answer, and located errors for bad caps."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.cli import main
from sparsemodel.errors import ModelError, ShapeError
from sparsemodel.sets.caps import capped_top


def admissible(support: tuple[int, ...] | np.ndarray, group: np.ndarray, caps: np.ndarray, k: int) -> bool:
    s = np.asarray(support, dtype=np.int64)
    return len(s) <= k and bool(np.all(np.bincount(group[s], minlength=len(caps)) <= caps))


def supports(p: int, group: np.ndarray, caps: np.ndarray, k: int):
    """Every admissible support of exactly min(k, largest admissible) entries (and the smaller ones)."""
    for m in range(k + 1):
        for s in itertools.combinations(range(p), m):
            if admissible(s, group, caps, k):
                yield s


def instance(seed: int, p: int = 10, n: int = 40):
    rng = np.random.default_rng(seed)
    G = int(rng.integers(2, 5))
    group = rng.integers(0, G, p)
    group[:G] = np.arange(G)  # every label used
    caps = rng.integers(1, 3, G)
    X = rng.standard_normal((n, p))
    w0 = np.zeros(p)
    w0[rng.choice(p, 5, replace=False)] = rng.choice([-1, 1], 5) * rng.uniform(0.5, 2.0, 5)
    y = X @ w0 + 0.3 * rng.standard_normal(n)
    return X, y, group, caps


def enumerated_optimum(X: np.ndarray, y: np.ndarray, group: np.ndarray, caps: np.ndarray, k: int) -> float:
    n, p = X.shape
    best = float(np.sum(y * y)) / (2 * n)
    for s in supports(p, group, caps, k):
        if s:
            b = np.linalg.lstsq(X[:, s], y, rcond=None)[0]
            best = min(best, float(np.sum((X[:, s] @ b - y) ** 2)) / (2 * n))
    return best


def capped_problem(X, y, group, caps, k):
    w = sm.Variable(X.shape[1], name="w")
    return sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / (2 * len(y))), [sm.nnz(w, per=group, cap=caps) <= k])


def test_the_greedy_projection_is_the_projection_by_enumeration():
    rng = np.random.default_rng(0)
    for _ in range(200):
        p = int(rng.integers(1, 9))
        G = int(rng.integers(1, 4))
        group = rng.integers(0, G, p)
        caps = rng.integers(0, 3, G)
        k = int(rng.integers(0, p + 1))
        z = rng.standard_normal(p) * rng.choice([1.0, 0.0], p, p=[0.85, 0.15])  # with ties at zero
        if rng.random() < 0.3:
            z = np.round(z, 1)  # ties in magnitude
        best = max(float(np.sum(z[list(s)] ** 2)) for s in supports(p, group, caps, k))
        sel = capped_top(np.abs(z), group, caps, k)
        assert admissible(sel, group, caps, k)
        assert float(np.sum(z[sel] ** 2)) == pytest.approx(best, abs=1e-12)


def test_the_set_projects_with_a_box_onto_the_best_admissible_support():
    """With w >= 0 the projection keeps the admissible support of largest gain of clipped values:
    checked against every admissible support's clipped point."""
    rng = np.random.default_rng(1)
    p, group, caps, k = 8, np.array([0, 0, 0, 1, 1, 2, 2, 2]), np.array([2, 1, 1]), 3
    w = sm.Variable(p, name="w")
    prob = sm.Problem(sm.minimize(sm.sum_squares(w)), [sm.nnz(w, per=group, cap=caps) <= k, w >= 0])
    lp = prob.lower()
    for _ in range(50):
        z = rng.standard_normal(p)
        x, _ = lp.set.project(z)
        best = np.inf
        for s in supports(p, group, caps, k):
            v = np.zeros(p)
            v[list(s)] = np.maximum(z[list(s)], 0.0)
            best = min(best, float(np.sum((v - z) ** 2)))
        assert admissible(np.flatnonzero(x), group, caps, k) and np.all(x >= 0)
        assert float(np.sum((x - z) ** 2)) == pytest.approx(best, abs=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_auto_reaches_the_enumerated_optimum_and_the_bound_stays_below_it(seed):
    X, y, group, caps = instance(seed, p=12)
    k = 4
    prob = capped_problem(X, y, group, caps, k)
    opt = enumerated_optimum(X, y, group, caps, k)
    r = prob.solve("auto", bound="tight")
    assert admissible(r.support, group, caps, k)
    assert r.objective == pytest.approx(opt, rel=1e-9, abs=1e-12)
    assert r.lower_bound <= opt * (1 + 1e-9) + 1e-12
    for name in ("grahtp", "fgrahtp", "iht"):
        assert admissible(capped_problem(X, y, group, caps, k).solve(name).support, group, caps, k)


def test_the_bound_uses_the_caps():
    """The caps' bound (the greedy basis as the relaxation's inner maximum) is at least the bound of
    nnz(w) <= k alone at the same point, and strictly above it where the caps bind."""
    from sparsemodel.lowering.bound import Relaxation

    X, y, group, caps = instance(3, p=12)
    group, caps = np.repeat(np.arange(3), 4), np.array([1, 1, 1])
    y = X[:, [0, 1, 2, 3]] @ np.array([2.0, -2.0, 1.5, 1.0]) + 0.1 * np.random.default_rng(0).standard_normal(len(y))
    capped = capped_problem(X, y, group, caps, 3)
    w = sm.Variable(12, name="w")
    plain = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / (2 * len(y))), [sm.nnz(w) <= 3])
    x = capped.lower().layout.pack(capped.solve("auto").values)
    b_caps = Relaxation(capped.lower(), shift=True).frank_wolfe(x)[0].value
    b_plain = Relaxation(plain.lower(), shift=True).frank_wolfe(x)[0].value
    opt = enumerated_optimum(X, y, group, caps, 3)
    assert b_plain < b_caps <= opt * (1 + 1e-9)


def test_the_swap_search_keeps_the_caps_where_the_best_swap_breaks_one():
    """Three strong coordinates in one group capped at 2: without the cap auto selects all three;
    with it every answer has two of them, and it is the enumerated optimum."""
    rng = np.random.default_rng(5)
    n, p = 50, 9
    X = rng.standard_normal((n, p))
    y = X[:, [0, 1, 2, 4]] @ np.array([3.0, 2.5, 2.0, 0.5]) + 0.1 * rng.standard_normal(n)
    group, caps = np.repeat(np.arange(3), 3), np.array([2, 2, 2])
    w = sm.Variable(p, name="w")
    free = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / (2 * n)), [sm.nnz(w) <= 3]).solve("auto")
    assert set(free.support) == {0, 1, 2}
    for start in ("screen", "omp", "grahtp"):
        r = capped_problem(X, y, group, caps, 3).solve("auto", start=start)
        assert admissible(r.support, group, caps, 3)
        assert r.objective == pytest.approx(enumerated_optimum(X, y, group, caps, 3), rel=1e-9)


def test_path_select_and_compare_run_within_the_caps():
    X, y, group, caps = instance(4, p=12)
    caps = np.maximum(caps, 1)
    prob = capped_problem(X, y, group, caps, 4)
    limit = int(np.minimum(caps, np.bincount(group)).sum())
    path = prob.path(range(1, limit + 1), solver="auto")
    objs = [pt.result.objective for pt in path.points]
    for pt in path.points:
        assert admissible(pt.result.support, group, caps, pt.k)
    assert all(b <= a + 1e-9 * max(1.0, abs(a)) for a, b in zip(objs, objs[1:]))  # more room, never worse
    sel = prob.select(by="bic", solver="grahtp")
    assert admissible(sel.result.support, group, caps, sel.k)
    rows = prob.compare(["auto", "grahtp", "iht"], k=[2, 3]).rows
    assert {(r["solver"], r["k"]) for r in rows} == {(s, k) for s in ("auto", "grahtp", "iht") for k in (2, 3)}


def test_the_model_language_the_builder_and_the_cli_give_one_answer(tmp_path, capsys):
    X, y, group, caps = instance(2, p=10)
    caps = np.maximum(caps, 1)
    np.savez(tmp_path / "d.npz", X=X, y=y, sector=group.astype(float), caps=caps.astype(float))
    text = (
        'data X : matrix from "d.npz:X"\ndata y : vector from "d.npz:y"\n'
        'data sector : vector from "d.npz:sector"\ndata caps : vector from "d.npz:caps"\n'
        "var w[cols(X)]\nminimize sum_squares(X @ w - y) / (2 * rows(X))\nsubject to\n"
        "    nnz(w, per = sector, cap = caps) <= 3\n"
    )
    (tmp_path / "m.sm").write_text(text)
    r_file = sm.load(tmp_path / "m.sm").solve("auto")
    r_py = capped_problem(X, y, group, caps, 3).solve("auto")
    assert np.array_equal(r_file.support, r_py.support) and r_file.objective == pytest.approx(r_py.objective)
    assert r_file.k == 3 and r_file.unit == "coordinates"
    assert main(["solve", str(tmp_path / "m.sm"), "--solver", "grahtp", "--k", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["k"] == 2 and admissible(np.asarray(out["support"]), group, caps, 2)


@pytest.mark.parametrize(
    "line,message,err",
    [
        ("nnz(w, per = sector, cap = -1) <= 3", "the cap -1 is not a nonnegative integer", ModelError),
        ("nnz(w, per = sector, cap = 1.5) <= 3", "the cap 1.5 is not a nonnegative integer", ModelError),
        ("nnz(w, per = short, cap = 2) <= 3", "6 coordinates but per=short has 4 labels", ShapeError),
        ("nnz(w, per = sector, cap = [1, 2]) <= 3", "3 groups but cap=", ShapeError),
        ("nnz(w, per = sector) <= 3", "per= is given without cap=", ModelError),
        ("nnz(w, per = sector, cap = 1) <= 4", "the caps allow at most 3 nonzeros in w", ModelError),
        ("nnz(w, per = sector, cap = 2, groups = sector) <= 3", "do not combine with groups=", ModelError),
    ],
)
def test_bad_caps_are_refused_at_their_line(tmp_path, line, message, err):
    text = (
        "let sector = [0, 0, 1, 1, 2, 2]\nlet short = [0, 1, 0, 1]\nvar w[6]\n"
        f"minimize sum_squares(w - 1)\nsubject to\n    {line}\n"
    )
    (tmp_path / "bad.sm").write_text(text)
    with pytest.raises(err) as e:
        sm.load(tmp_path / "bad.sm")
    assert message in str(e.value)
    assert e.value.span is not None and e.value.span.line == 6


def test_caps_beside_linear_constraints_are_refused_at_the_linear_line(tmp_path):
    """The projections that keep linear constraints (the k-sparse simplex, enumeration) know no
    caps: sum(w) == 1 beside caps is refused where it is written, never solved with a cap broken."""
    text = (
        "let sector = [0, 0, 1, 1, 2, 2]\nvar w[6]\nminimize sum_squares(w - 1)\nsubject to\n"
        "    nnz(w, per = sector, cap = 1) <= 2\n    sum(w) == 1\n"
    )
    (tmp_path / "lin.sm").write_text(text)
    with pytest.raises(ModelError, match="linear constraints combine with nnz") as e:
        sm.load(tmp_path / "lin.sm").solve("grahtp")
    assert e.value.span is not None and e.value.span.line == 6
