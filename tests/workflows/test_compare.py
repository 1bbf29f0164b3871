"""sparsemodel.compare: sweeps over solvers and k, partial results, files, input protection."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.errors import ConstraintError, ConvexityError, OutputError, SolverError
from sparsemodel.workflows.compare import COLUMNS, Comparison, compare


def problem_with_duplicate(source: str = "<python>", symbols: dict | None = None) -> sm.Problem:
    """Least squares whose LASSO path jumps from 0 to 2 nonzeros (k=1 unreachable): orthogonal
    columns, so the LASSO solution is unique (soft thresholding of X'y), and columns 1 and 2
    exactly equally correlated with y, so they enter together."""
    rng = np.random.default_rng(0)
    n, p = 40, 12
    X = np.linalg.qr(rng.standard_normal((n, p)))[0] * np.sqrt(n)
    y = 3.0 * X[:, 1] + 3.0 * X[:, 2] - 1.0 * X[:, 5] + 0.5 * X[:, 8]
    w = sm.Variable(p, name="w")
    return sm.Problem(
        sm.minimize(sm.sum_squares(X @ w - y) / (2 * n)), [sm.nnz(w) <= 3], source=source, symbols=symbols
    )


@pytest.fixture(scope="module")
def sweep() -> Comparison:
    return compare(problem_with_duplicate(), ["grahtp", "lasso", "grasp", "foba"], k=[1, 2, 3, 4], progress=False)


def test_every_solver_at_every_k_with_partial_results(sweep):
    assert len(sweep.rows) == 16
    assert [r["k"] for r in sweep.rows] == [1] * 4 + [2] * 4 + [3] * 4 + [4] * 4
    assert all(set(r) == set(COLUMNS) for r in sweep.rows)
    failed = sweep.failed()
    assert [(r["solver"], r["k"]) for r in failed] == [("lasso", 1)]
    bad = failed[0]
    assert bad["objective"] is None and bad["nnz"] is None
    assert "cannot reach exactly k=1" in bad["message"]
    for r in sweep.rows:
        if r["status"] == "error":
            continue
        assert r["nnz"] <= r["k"] and r["time_s"] >= 0 and r["iterations"] >= 1
        res = sweep.results[(r["solver"], r["k"])]
        assert res.objective == r["objective"]
    # lasso still ran at the other k, and the debiased LASSO is never better than the l0 solvers' best
    for k in (2, 3, 4):
        best = min(sweep.row(s, k)["objective"] for s in ("grahtp", "grasp", "foba"))
        assert sweep.row("lasso", k)["objective"] >= best - 1e-12


def test_same_problem_for_every_solver(sweep):
    """One lowering per k: a solver's objective is f of its own x on that problem."""
    prob = problem_with_duplicate()
    for (s, k), res in sweep.results.items():
        lp = prob.lower(k)
        assert lp.f(np.ravel(res.x)) == pytest.approx(res.objective, rel=1e-9, abs=1e-12), s


def test_table_shows_objectives_errors_and_time_ratios(sweep):
    text = sweep.table()
    assert "objective" in text and "time" in text and "time / fastest's (median)" in text and "fastest (k)" in text
    lines = text.splitlines()
    head = next(line for line in lines if line.split()[:1] == ["k"])
    assert head.split() == ["k", "(coordinates)", "grahtp", "lasso", "grasp", "foba"]  # the bound with its unit
    row1 = next(line for line in lines if line.split()[:1] == ["1"])
    assert row1.split()[2] == "error"
    assert "lasso at k=1:" in text
    summary = {r["solver"]: r for r in sweep.summary_rows()}
    assert summary["lasso"]["errors"] == 1 and summary["lasso"]["runs"] == 4
    assert min(r["time / fastest's (median)"] for r in summary.values()) >= 1.0
    # every point has a fastest solver, and a solver is called fastest only where it was
    assert sum(r["fastest (k)"] for r in summary.values()) >= len(sweep.values)
    for s, r in summary.items():
        mine = [row for row in sweep.rows if row["solver"] == s and row["status"] != "error"]
        quick = [
            row
            for row in mine
            if all(row["time_s"] <= o["time_s"] for o in sweep.rows if o["k"] == row["k"] and o["status"] != "error")
        ]
        assert r["fastest (k)"] == len(quick)


def test_writes_csv_json_png(sweep, tmp_path):
    c = sweep.to_csv(tmp_path / "out.csv")
    with open(c, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == list(COLUMNS)
    assert len(rows) == 16
    lasso1 = next(r for r in rows if r["solver"] == "lasso" and r["k"] == "1")
    assert lasso1["status"] == "error" and lasso1["objective"] == ""
    g = next(r for r in rows if r["solver"] == "grahtp" and r["k"] == "3")
    assert float(g["objective"]) == sweep.row("grahtp", 3)["objective"]  # full precision
    j = json.loads(sweep.to_json(tmp_path / "out.json").read_text())
    assert j["rows"] == json.loads(json.dumps(sweep.rows))
    assert j["solvers"] == ["grahtp", "lasso", "grasp", "foba"] and j["k"] == [1, 2, 3, 4]
    detail = next(d for d in j["details"] if d["solver"] == "lasso" and d["k"] == 3)
    assert detail["extra"]["solves"] >= 1 and len(detail["support"]) == 3
    png = sweep.plot(tmp_path / "out.png")
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_refuses_existing_files_unless_overwrite(sweep, tmp_path):
    for writer, name in ((sweep.to_csv, "a.csv"), (sweep.to_json, "a.json"), (sweep.plot, "a.png")):
        path = tmp_path / name
        path.write_text("keep me")
        with pytest.raises(OutputError, match="refusing to overwrite"):
            writer(path)
        assert path.read_text() == "keep me"
        writer(path, overwrite=True)
        assert path.read_bytes() != b"keep me"
    with pytest.raises(OutputError, match="does not exist"):
        sweep.to_csv(tmp_path / "missing" / "x.csv")


def test_never_overwrites_model_or_data_files(tmp_path):
    model = tmp_path / "model.sm"
    model.write_text("# a model file\n")
    datafile = tmp_path / "X.npz"
    datafile.write_bytes(b"data")
    d = sm.Data(np.ones(3), name="X")
    d.path = f"{datafile}:X"  # as the front end records it (file:member for .npz)
    prob = problem_with_duplicate(source=str(model), symbols={"X": d})
    comp = compare(prob, ["grahtp"], progress=False)
    for target in (model, datafile, tmp_path / "." / "model.sm"):
        for writer in (comp.to_csv, comp.to_json, comp.plot):
            with pytest.raises(OutputError, match="input of this problem"):
                writer(target, overwrite=True)
    assert model.read_text() == "# a model file\n" and datafile.read_bytes() == b"data"


def test_default_k_and_problem_compare_delegates(capsys):
    """The default bar shows only on a terminal (standard error here is captured, not a TTY);
    progress=True asks for it anywhere, progress=False never shows it."""
    prob = problem_with_duplicate()
    comp = prob.compare(["grahtp", "foba"])
    assert [r["k"] for r in comp.rows] == [3, 3]
    assert capsys.readouterr().err == ""
    asked = prob.compare(["grahtp", "foba"], progress=True)
    assert [r["k"] for r in asked.rows] == [3, 3]
    err = capsys.readouterr().err
    assert "compare" in err and "2/2" in err
    quiet = prob.compare(["grahtp"], k=2, progress=False)
    assert [r["k"] for r in quiet.rows] == [2]
    assert capsys.readouterr().err == ""


def test_errors_per_cell_for_constraints_and_k(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((30, 8))
    w = sm.Variable(8, name="w")
    grouped = sm.Problem(
        sm.minimize(sm.sum_squares(X @ w - X[:, 0])), [sm.nnz(w, groups=np.repeat(np.arange(4), 2)) <= 1]
    )
    with pytest.raises(ConstraintError, match="has only 4 groups"):  # k above the 4 groups: refused before running
        compare(grouped, ["grasp", "lasso"], k=[1, 2, 9], progress=False)
    comp = compare(grouped, ["grasp", "lasso"], k=[1, 2, 4], progress=False)
    status = {(r["solver"], r["k"]): r["status"] for r in comp.rows}
    assert status[("grasp", 1)] == "converged" and status[("grasp", 2)] == "converged"
    assert status[("lasso", 1)] == "error" and "does not handle group-sparsity" in comp.row("lasso", 1)["message"]
    assert status[("grasp", 4)] == "converged" and "allows every unit" in comp.row("grasp", 4)["message"]
    comp.to_csv(tmp_path / "g.csv")
    comp.plot(tmp_path / "g.png")


def test_bad_arguments_fail_before_running():
    prob = problem_with_duplicate()
    with pytest.raises(SolverError, match="unknown solver 'grahpt'; did you mean 'grahtp'"):
        compare(prob, ["grahpt"], progress=False)
    with pytest.raises(SolverError, match="no solvers"):
        compare(prob, [], progress=False)
    with pytest.raises(SolverError, match="listed twice"):
        compare(prob, ["grahtp", "grahtp"], progress=False)
    with pytest.raises(SolverError, match="not among the compared solvers"):
        compare(prob, ["grahtp"], options={"lasso": {"zero_tol": 1e-5}}, progress=False)
    with pytest.raises(SolverError, match="has no option 'etaa'"):
        compare(prob, ["grahtp"], options={"grahtp": {"etaa": 1}}, progress=False)
    with pytest.raises(ConstraintError, match="not an integer"):
        compare(prob, ["grahtp"], k=[2, 2.5], progress=False)
    with pytest.raises(ConstraintError, match="empty"):
        compare(prob, ["grahtp"], k=[], progress=False)
    w = sm.Variable(3, name="w")
    concave = sm.Problem(sm.minimize(sm.log(sm.sum(w) + 5)), [sm.nnz(w) <= 1])
    with pytest.raises(ConvexityError):
        compare(concave, ["grahtp"], progress=False)


def test_options_reach_their_solver():
    prob = problem_with_duplicate()
    comp = compare(prob, ["grasp", "foba"], k=3, options={"grasp": {"prune": "final"}}, progress=False)
    assert comp.results[("grasp", 3)].options["prune"] == "final"
    assert comp.results[("foba", 3)].options["nu"] == 0.5


def test_model_file_and_its_data_are_protected(tmp_path):
    """Through the text front end: the .sm file and every data file it read are never written."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 10))
    np.savetxt(tmp_path / "X.csv", X, delimiter=",")
    np.savetxt(tmp_path / "y.csv", X[:, :2] @ [1.0, 2.0] + 0.1 * rng.standard_normal(40), delimiter=",")
    model = tmp_path / "m.sm"
    model.write_text(
        'data X : matrix from "X.csv"\n'
        'data y : vector from "y.csv"\n'
        "var w[cols(X)]\n"
        "minimize sum_squares(X @ w - y) / (2 * rows(X))\n"
        "subject to\n"
        "    nnz(w) <= 2\n"
    )
    prob = sm.load(str(model))
    comp = prob.compare(["grahtp", "lasso"], k=[1, 2], progress=False)
    assert not comp.failed()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for name in ("m.sm", "X.csv", "y.csv"):
        with pytest.raises(OutputError, match="input of this problem"):
            comp.to_csv(tmp_path / name, overwrite=True)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert comp.to_json(tmp_path / "out.json").exists()
