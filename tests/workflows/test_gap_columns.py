"""The lower bound and the gap as columns of compare, path and select (docs/certify.md): every row
carries its run's Result.lower_bound and Result.gap = (f - lb) / max(|f|, 1), in the table, the
CSV, the JSON and the plots (``--plot gap=FILE``); a model without a bound gets empty cells, never
a number; a warm-started bnb path starts each k from the previous k's proved optimum (item 3)."""

from __future__ import annotations

import csv
import itertools
import json

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.cli import main
from sparsemodel.solvers.bnb import BranchAndBound
from sparsemodel.workflows.experiment import External, experiment


def ridge_problem(seed: int = 0, n: int = 50, p: int = 10, lam: float = 0.05) -> sm.Problem:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = X[:, :3] @ [1.5, -1.0, 2.0] + 0.5 * rng.standard_normal(n)
    w = sm.Variable(p, name="w")
    obj = sm.sum_squares(sm.Data(X, name="X") @ w - sm.Data(y, name="y")) / (2 * n) + lam / 2 * sm.sum_squares(w)
    return sm.Problem(sm.minimize(obj), [sm.nnz(w) <= 3])


def no_bound_problem(seed: int = 1) -> sm.Problem:
    """Least squares without a ridge or a box with p > n: the relaxation has no finite bound."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((15, 30))
    y = X[:, :2] @ [1.0, -1.0] + 0.1 * rng.standard_normal(15)
    w = sm.Variable(30, name="w")
    return sm.Problem(sm.minimize(sm.sum_squares(X @ w - y)), [sm.nnz(w) <= 2])


def enumerated(prob: sm.Problem, k: int) -> float:
    lp = prob.lower().with_budget(k)
    return min(lp.restricted_minimize(np.array(S)).f for S in itertools.combinations(range(lp.set.size), k))


def gap_of(res) -> float:
    return (res.objective - res.lower_bound) / max(abs(res.objective), 1.0)


def test_a_path_row_carries_its_results_bound_and_gap(tmp_path):
    prob = ridge_problem()
    path = prob.path(k=[1, 2, 3, 4], solver="auto")
    for p, row in zip(path.points, path.rows()):
        r = p.result
        assert r.lower_bound is not None
        assert row["lower_bound"] == r.lower_bound
        assert row["gap"] == pytest.approx(gap_of(r), abs=1e-15)
        assert row["lower_bound"] <= enumerated(prob, p.k) + 1e-9
    assert "gap" in path.table().splitlines()[1]
    path.to_csv(tmp_path / "p.csv")
    with open(tmp_path / "p.csv") as fh:
        lines = list(csv.DictReader(fh))
    assert [float(line["gap"]) for line in lines] == [r["gap"] for r in path.rows()]
    path.to_json(tmp_path / "p.json")
    pts = json.loads((tmp_path / "p.json").read_text())["points"]
    assert [q["gap"] for q in pts] == [r["gap"] for r in path.rows()]
    assert [q["lower_bound"] for q in pts] == [r["lower_bound"] for r in path.rows()]


def test_the_full_budget_point_of_a_path_is_certified_too():
    prob = ridge_problem(p=6)
    path = prob.path(k=[2, 6], solver="auto")
    full = path.points[-1]
    assert "allows every unit" in full.result.message
    # the relaxation at k = p is the convex problem itself: the bound meets its minimum
    assert full.row()["gap"] is not None and full.row()["gap"] <= 1e-6


def test_no_bound_gives_empty_cells_not_numbers(tmp_path):
    prob = no_bound_problem()
    path = prob.path(k=[1, 2], solver="auto")
    assert all(r["gap"] is None and r["lower_bound"] is None for r in path.rows())
    assert "no finite lower bound" in path.points[0].result.bound_note
    path.to_csv(tmp_path / "p.csv")
    with open(tmp_path / "p.csv") as fh:
        assert all(line["gap"] == "" and line["lower_bound"] == "" for line in csv.DictReader(fh))
    path.to_json(tmp_path / "p.json")
    assert all(q["gap"] is None for q in json.loads((tmp_path / "p.json").read_text())["points"])
    comp = prob.compare(["auto", "iht"], k=[1, 2])
    assert all(r["gap"] is None for r in comp.rows)
    assert "gap (" not in comp.table()  # no block of dashes when nothing has a bound
    comp.plot(tmp_path / "g.png", metrics="gap")  # an empty panel, not an error
    assert (tmp_path / "g.png").stat().st_size > 0


def test_compare_rows_csv_json_and_table_carry_the_gap(tmp_path):
    prob = ridge_problem(seed=3)
    comp = prob.compare(["auto", "iht", "bnb"], k=[2, 3])
    for (solver, k), res in comp.results.items():
        row = comp.row(solver, k)
        assert row["lower_bound"] == res.lower_bound and row["gap"] == pytest.approx(gap_of(res), abs=1e-15)
        if solver == "bnb":
            assert res.status == "optimal" and row["gap"] <= 1e-4
            assert row["objective"] == pytest.approx(enumerated(prob, k), rel=1e-7)
    text = comp.table()
    assert "gap ((f - lower bound)" in text
    comp.to_csv(tmp_path / "c.csv")
    with open(tmp_path / "c.csv") as fh:
        lines = list(csv.DictReader(fh))
    assert [float(line["gap"]) for line in lines] == [r["gap"] for r in comp.rows]
    d = comp.to_dict()
    assert [r["gap"] for r in d["rows"]] == [r["gap"] for r in comp.rows]
    assert all(x["gap"] == comp.row(x["solver"], x["k"])["gap"] for x in d["details"])


def test_select_curve_carries_the_chosen_paths_gaps(tmp_path):
    prob = ridge_problem(seed=4)
    sel = prob.select(k=range(1, 6), by="bic", early_stop=False)
    for row in sel.curve:
        r = sel.path.at(row["k"])
        assert row["gap"] == pytest.approx(gap_of(r), abs=1e-15) and row["lower_bound"] == r.lower_bound
    assert " gap " in sel.table().splitlines()[1] + " "
    sel.to_csv(tmp_path / "s.csv")
    with open(tmp_path / "s.csv") as fh:
        assert [float(line["gap"]) for line in csv.DictReader(fh)] == [r["gap"] for r in sel.curve]
    assert [r["gap"] for r in sel.to_dict()["curve"]] == [r["gap"] for r in sel.curve]


MODEL = """\
data X : matrix from "X.npy"
data y : vector from "y.npy"
var w[cols(X)]
minimize sum_squares(X @ w - y) / (2 * rows(X)) + 0.025 * sum_squares(w)
subject to
    nnz(w) <= 3
"""


@pytest.mark.parametrize("command", ["compare", "path", "select"])
def test_the_cli_writes_and_plots_the_gap(tmp_path, capsys, command):
    rng = np.random.default_rng(5)
    X = rng.standard_normal((50, 10))
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", X[:, :3] @ [1.5, -1.0, 2.0] + 0.5 * rng.standard_normal(50))
    (tmp_path / "m.sm").write_text(MODEL)
    args = [command, str(tmp_path / "m.sm"), "--k", "1:4"]
    args += ["--solvers", "auto,bnb"] if command == "compare" else []
    args += ["--csv", str(tmp_path / "t.csv"), "--plot", f"gap,objective={tmp_path / 'g.png'}"]
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 0, err
    assert (tmp_path / "g.png").read_bytes()[:4] == b"\x89PNG"
    with open(tmp_path / "t.csv") as fh:
        lines = list(csv.DictReader(fh))
    gaps = [float(line["gap"]) for line in lines]
    lbs = [float(line["lower_bound"]) for line in lines]
    objs = [float(line["objective"]) for line in lines]
    assert all(g == pytest.approx((f - lb) / max(abs(f), 1.0), abs=1e-12) for g, f, lb in zip(gaps, objs, lbs))
    assert "gap" in out
    # gap is a metric like the others; a name that is not one is refused before anything runs
    code = main([*args[:-2], "--plot", f"gapp={tmp_path / 'h.png'}", "--force"])
    assert code == 2 and "'gapp' is not a metric" in capsys.readouterr()[1]


def test_an_outside_methods_answer_gets_the_fast_bound_at_its_point():
    prob = ridge_problem(seed=6)
    best = prob.solve("bnb", k=3)

    def fit(data, k):
        return best.values["w"]

    study = experiment(prob, {"auto": "auto", "given": External("given", fit)}, k=[3])
    row = next(r for r in study.rows if r["solver"] == "given")
    assert row["objective"] == pytest.approx(best.objective, rel=1e-9)
    assert row["lower_bound"] <= best.objective + 1e-9
    assert row["gap"] == pytest.approx((row["objective"] - row["lower_bound"]) / max(abs(row["objective"]), 1.0))
    assert "gap" in study.metrics


# ---------------------------------------------------------------------- warm-started bnb paths


def test_a_warm_bnb_path_starts_each_k_from_the_previous_proved_optimum(monkeypatch):
    prob = ridge_problem(seed=7, p=12)
    seen: list[np.ndarray | None] = []
    run = BranchAndBound.run

    def spy(self, lp):
        seen.append(None if self.opts["init"] is None else np.array(self.opts["init"], dtype=float))
        return run(self, lp)

    monkeypatch.setattr(BranchAndBound, "run", spy)
    path = prob.path(k=[1, 2, 3, 4], solver="bnb", start="warm")
    assert seen[0] is None  # the first k has no neighbour: auto's own start
    lp = prob.lower()
    for j in range(1, 4):
        assert np.array_equal(seen[j], lp.layout.pack(path.points[j - 1].result.values))
    assert [p.start for p in path.points] == ["cold", "warm", "warm", "warm"]
    for p in path.points:
        assert p.result.status == "optimal"
        assert p.result.objective == pytest.approx(enumerated(prob, p.k), rel=1e-7)
        assert p.row()["gap"] <= 1e-4


def test_a_best_start_path_keeps_a_warm_bnb_answer_that_is_strictly_better():
    """bnb's statuses (optimal, time_limit, node_limit) are usable answers: with start='best' the
    warm answer wins when strictly lower (they were ignored, so the warm solve was wasted)."""
    import dataclasses

    from sparsemodel.workflows.path import _better

    prob = ridge_problem(seed=8)
    a = prob.solve("bnb", k=3)
    worse = dataclasses.replace(a, objective=a.objective + 0.1, status="converged")
    assert a.status == "optimal" and _better(a, worse) and not _better(worse, a)
    for status in ("time_limit", "node_limit"):
        assert _better(dataclasses.replace(a, status=status), worse)
