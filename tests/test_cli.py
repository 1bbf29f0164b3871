"""The command line end to end: demo, solvers, check, solve, compare, and every bad input."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sparsemodel.cli import main
from sparsemodel.datasets import sparse_linear_regression

MODEL = """\
data X : matrix from "X.npy"
data v : vector from "v.npy"
var w[cols(X)]
minimize sum_squares(X @ w - v) / (2 * rows(X))
subject to
    nnz(w) <= 5
"""


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    X, v, w = sparse_linear_regression(80, p=40, k=5, seed=3)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "v.npy", v)
    np.save(tmp_path / "w_true.npy", w)
    (tmp_path / "model.sm").write_text(MODEL)
    return tmp_path


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def assert_user_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    for f in fragments:
        assert f in err, (f, err)


def test_demo_recovers_the_support(capsys):
    code, out, _ = run(capsys, "demo", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["grahtp"]["exact_recovery"] and d["grahtp"]["recovered"] == 50
    assert d["grahtp"]["status"] == "converged"
    assert "fgrahtp" in d
    assert d["auto"]["exact_recovery"] and d["auto"]["support_names"][:3] == ["x11", "x14", "x46"]
    code, out, _ = run(capsys, "demo")
    assert code == 0 and "grahtp" in out and "50/50" in out and "HT-stable" in out
    assert "support (auto, the default): x11, x14, x46," in out  # the README's first command: names


def test_solvers_registry(capsys):
    code, out, _ = run(capsys, "solvers", "--json")
    reg = json.loads(out)
    assert code == 0
    assert reg["grahtp"]["handles"] == [
        "box",
        "eig_box",
        "fused",
        "linear_eq",
        "linear_ineq",
        "nnz",
        "nnz_caps",
        "nnz_groups",
        "nnz_pairs",
        "product",
        "rank",
    ]
    assert "eta" in reg["grahtp"]["options"]
    code, out, _ = run(capsys, "solvers", "-v")
    assert "max_iter" in out and "fgrahtp" in out


def test_check_reports_structure(capsys, model_dir):
    code, out, _ = run(capsys, "check", str(model_dir / "model.sm"))
    assert code == 0
    assert (
        "convexity   convex" in out
        and "least squares" in out
        and "auto        auto (grahtp and screen starts, then the swap search)" in out
    )
    assert "k = 5 of 40 coordinates" in out


def test_solve_json_has_the_documented_fields(capsys, model_dir):
    code, out, _ = run(capsys, "solve", str(model_dir / "model.sm"), "--json")
    assert code == 0
    d = json.loads(out)
    for key in ("objective", "support", "x", "shape", "status", "iterations", "time_s", "solver", "certificate"):
        assert key in d
    w = np.load(model_dir / "w_true.npy")
    assert d["support"] == sorted(np.flatnonzero(w).tolist())
    assert d["shape"] == [40] and len(d["x"]) == 40 and d["solver"] == "auto"


def test_solve_options_k_and_data_rebinding(capsys, model_dir):
    code, out, _ = run(
        capsys, "solve", str(model_dir / "model.sm"), "--solver", "fgrahtp", "-o", "max_iter=3", "--json"
    )
    d = json.loads(out)
    assert code == 0 and d["solver"] == "fgrahtp" and d["iterations"] <= 3 and d["options"]["max_iter"] == 3
    code, out, _ = run(capsys, "solve", str(model_dir / "model.sm"), "--k", "3", "--json")
    assert json.loads(out)["k"] == 3 and len(json.loads(out)["support"]) == 3
    X2 = np.random.default_rng(0).standard_normal((80, 25))
    np.save(model_dir / "X2.npy", X2)
    code, out, _ = run(capsys, "solve", str(model_dir / "model.sm"), "--data", f"X={model_dir / 'X2.npy'}", "--json")
    assert code == 0 and json.loads(out)["shape"] == [25]


def test_out_file_and_never_overwriting_inputs(capsys, model_dir):
    model = model_dir / "model.sm"
    before = {p.name: p.read_bytes() for p in model_dir.iterdir()}
    out_path = model_dir / "result.json"
    code, out, _ = run(capsys, "solve", str(model), "--out", str(out_path))
    assert code == 0 and json.loads(out_path.read_text())["status"] == "converged"
    for target in (model, model_dir / "X.npy"):
        code, _, err = run(capsys, "solve", str(model), "--out", str(target), "--force")
        assert_user_error(code, err, "input of this model")
    code, _, err = run(capsys, "solve", str(model), "--out", str(out_path))
    assert_user_error(code, err, "refusing to overwrite")
    for name, data in before.items():
        assert (model_dir / name).read_bytes() == data


def test_syntax_error_location(capsys, tmp_path):
    (tmp_path / "bad.sm").write_text("var w[3]\nminimize sum_squares(w +)\n")
    code, _, err = run(capsys, "check", str(tmp_path / "bad.sm"))
    assert_user_error(code, err, "bad.sm:2:", "^", "expected")


def test_bad_inputs_exit_2_with_a_message(capsys, model_dir):
    model = str(model_dir / "model.sm")
    code, _, err = run(capsys, "solve", model, "--solver", "grahpt")
    assert_user_error(code, err, "unknown solver 'grahpt'", "did you mean 'grahtp'")
    code, _, err = run(capsys, "solve", model, "--solver", "grahtp", "-o", "etta=1")
    assert_user_error(code, err, "no option 'etta'", "did you mean 'eta'")
    code, _, err = run(capsys, "solve", model, "-o", "exchang=2")  # the default solver: auto
    assert_user_error(code, err, "auto has no option 'exchang'", "did you mean 'exchange'")
    code, _, err = run(capsys, "solve", model, "--k", "41")
    assert_user_error(code, err, "has only 40 coordinates")
    code, _, err = run(capsys, "solve", model, "--data", "Y=foo.npy")
    assert_user_error(code, err, "Y")
    code, _, err = run(capsys, "solve", model, "--data", f"X={model_dir / 'missing.npy'}")
    assert_user_error(code, err, "missing.npy")
    bad = np.load(model_dir / "X.npy")
    bad[[3, 7, 9], 2] = np.nan
    np.save(model_dir / "Xnan.npy", bad)
    code, _, err = run(capsys, "solve", model, "--data", f"X={model_dir / 'Xnan.npy'}")
    assert_user_error(code, err, "Xnan.npy", "3")
    (model_dir / "nc.sm").write_text(MODEL.replace("sum_squares(X @ w - v)", "-sum_squares(X @ w - v)"))
    code, _, err = run(capsys, "solve", str(model_dir / "nc.sm"))
    assert_user_error(code, err, "not convex", "nc.sm:4:")
    (model_dir / "shape.sm").write_text(MODEL.replace("var w[cols(X)]", "var w[7]"))
    code, _, err = run(capsys, "check", str(model_dir / "shape.sm"))
    assert_user_error(code, err, "(80,40) @ (7,)")


def test_rank_constraint_says_which_solver_will_handle_it(capsys, tmp_path):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "A.npy", rng.standard_normal((30, 6)))
    np.save(tmp_path / "B.npy", rng.standard_normal((30, 4)))
    (tmp_path / "rank.sm").write_text(
        'data A : matrix from "A.npy"\ndata B : matrix from "B.npy"\nvar W[6, 4]\n'
        "minimize sum_squares(A @ W - B)\nsubject to\n    rank(W) <= 2\n"
    )
    code, out, _ = run(capsys, "check", str(tmp_path / "rank.sm"))
    assert "rank(W) <= 2" in out and "budget r = 2" in out and "grahtp" in out
    code, out, _ = run(capsys, "solve", str(tmp_path / "rank.sm"), "--json")
    res = json.loads(out)
    assert code == 0 and res["k"] == 2 and res["unit"] == "rank" and res["extra"]["rank"] == 2
    assert np.linalg.matrix_rank(np.array(res["x"]), tol=1e-8) == 2


def test_divergence_status_and_advice(capsys, model_dir):
    code, out, _ = run(
        capsys, "solve", str(model_dir / "model.sm"), "--solver", "fgrahtp", "-o", "eta=100", "-o", "backtracking=false"
    )
    assert code == 2 and "diverged" in out and "smaller eta" in out  # said and explained: not a bug (exit 1)


def test_compare_writes_files(capsys, model_dir):
    csv = model_dir / "table.csv"
    code, out, _ = run(
        capsys,
        "compare",
        str(model_dir / "model.sm"),
        "--solvers",
        "grahtp,omp",
        "--k",
        "3:5:2",
        "--csv",
        str(csv),
        "--quiet",
    )
    assert code == 0 and "grahtp" in out and csv.exists()
    assert len(csv.read_text().strip().splitlines()) == 1 + 2 * 2


def test_console_script_prints_no_traceback(tmp_path):
    (tmp_path / "bad.sm").write_text("var w[3]\nminimize sum_squares(q)\n")
    p = subprocess.run(
        [sys.executable, "-m", "sparsemodel.cli", "check", str(tmp_path / "bad.sm")], capture_output=True, text=True
    )
    assert p.returncode == 2
    assert "Traceback" not in p.stderr and "bad.sm:2:22" in p.stderr and "q" in p.stderr


def test_compare_sweeps_a_param_or_the_bound(capsys, model_dir):
    """--at sweeps a param (the table's column is named after it, the bound stays); --k sweeps the
    bound; both write rows with the budget actually used."""
    text = MODEL.replace("var w[cols(X)]", "param lam = 0\nvar w[cols(X)]").replace(
        "/ (2 * rows(X))", "/ (2 * rows(X)) + lam * sum_squares(w)"
    )
    (model_dir / "ridge.sm").write_text(text)
    code, out, _ = run(
        capsys, "compare", str(model_dir / "ridge.sm"), "--solvers", "grahtp,omp", "--at", "lam=0,0.5,1",
        "--quiet", "--csv", str(model_dir / "lam.csv"),
    )  # fmt: skip
    assert code == 0 and out.splitlines()[1].split()[0] == "lam"
    with open(model_dir / "lam.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [float(r["lam"]) for r in rows] == [0, 0, 0.5, 0.5, 1, 1] and {r["budget"] for r in rows} == {"5"}
    objs = [float(r["objective"]) for r in rows if r["solver"] == "grahtp"]
    assert objs[0] < objs[1] < objs[2]
    code, out, _ = run(capsys, "compare", str(model_dir / "ridge.sm"), "--solvers", "grahtp", "--k", "0,3", "--quiet")
    assert code == 0 and out.splitlines()[1].split()[0] == "k"
    code, _, err = run(capsys, "compare", str(model_dir / "ridge.sm"), "--solvers", "grahtp", "--at", "mu=1,2")
    assert_user_error(code, err, "cannot sweep 'mu'", "lam")
    code, _, err = run(capsys, "compare", str(model_dir / "ridge.sm"), "--solvers", "grahtp", "--at", "lam=a,b")
    assert_user_error(code, err, "--at", "lam=0.001")


def test_rank_model_file_from_the_cli(capsys, tmp_path):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((60, 8))
    Y = X @ (rng.standard_normal((8, 2)) @ rng.standard_normal((2, 5))) + 0.1 * rng.standard_normal((60, 5))
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "Y.npy", Y)
    (tmp_path / "mt.sm").write_text(
        'data X : matrix from "X.npy"\ndata Y : matrix from "Y.npy"\nparam r = 2\nvar W[cols(X), cols(Y)]\n'
        "minimize sum_squares(X @ W - Y) / 2\nsubject to\n    rank(W) <= r\n"
        "compare with grahtp, nuclear at r in 1:3\n"
    )
    code, out, _ = run(capsys, "compare", str(tmp_path / "mt.sm"), "--quiet", "--out", str(tmp_path / "r.json"))
    assert code == 0 and out.splitlines()[1].split()[:4] == ["r", "(rank)", "grahtp", "nuclear"]
    j = json.loads((tmp_path / "r.json").read_text())
    assert j["sweep"] == "r" and j["r"] == [1, 2, 3] and [r["budget"] for r in j["rows"][::2]] == [1, 2, 3]
    code, out, _ = run(capsys, "solve", str(tmp_path / "mt.sm"), "--solver", "iht", "--k", "1", "--json")
    res = json.loads(out)
    assert code == 0 and res["k"] == 1 and res["extra"]["rank"] == 1
    code, _, err = run(capsys, "solve", str(tmp_path / "mt.sm"), "--k", "7")
    assert_user_error(code, err, "mt.sm:7:", "rank")
