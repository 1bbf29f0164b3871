"""What every command gives back: one meaning of k printed with its
unit, every bound from 0 to the full size treated alike by every command, --json with one meaning,
every solution kept by compare/path/select, progress bars only where someone watches, write errors
reported as such, and the README's examples on the solver a user should use."""

from __future__ import annotations

import csv
import errno
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel import progress
from sparsemodel.cli import main

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(5)


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def small(tmp_path: Path) -> Path:
    """Least squares with p = 6 and names; compare line sweeping the bound."""
    X = RNG.standard_normal((60, 6))
    y = X @ np.array([2.0, 0, -1.5, 0, 0, 1.0]) + 0.1 * RNG.standard_normal(60)
    np.savez(tmp_path / "d.npz", X=X, X_names=np.array(list("abcdef")), y=y)
    (tmp_path / "m.sm").write_text(
        'data X : matrix from "d.npz:X"\ndata y : vector from "d.npz:y"\nvar w[cols(X)]\n'
        "minimize sum_squares(X @ w - y) / (2 * rows(X))\nsubject to\n    nnz(w) <= 3\n"
    )
    return tmp_path


def with_compare_line(d: Path, line: str) -> Path:
    p = d / "c.sm"
    p.write_text((d / "m.sm").read_text() + line + "\n")
    return p


# ---------------------------------------------------------------------- item 3: every bound alike


@pytest.mark.parametrize("k", [0, 6])
def test_every_command_accepts_the_ends_of_the_bound(capsys, small, k):
    m = str(small / "m.sm")
    assert run(capsys, "check", str(with_compare_line(small, f"compare with grahtp, omp at k in {k}:{k}")))[0] == 0
    code, out, _ = run(capsys, "solve", m, "--k", str(k), "--json", "--quiet")
    res = json.loads(out)
    assert code == 0 and res["k"] == k and res["status"] == "converged"
    if k == 6:  # the bound does nothing: least squares over every coordinate
        d = np.load(small / "d.npz")
        np.testing.assert_allclose(res["x"], np.linalg.lstsq(d["X"], d["y"], rcond=None)[0], atol=1e-8)
    code, out, err = run(capsys, "compare", m, "--solvers", "grahtp,omp,lasso", "--k", str(k), "--quiet")
    assert code == 0, out + err
    assert run(capsys, "path", m, "--k", f"0:{k}" if k else "0", "--quiet")[0] == 0
    assert run(capsys, "select", m, "--k", f"0:{k}" if k else "0,1", "--by", "bic", "--quiet")[0] == 0


@pytest.mark.parametrize("k", [7, -1])
def test_every_command_refuses_a_bound_beyond_the_size_before_running(capsys, small, k):
    m = str(small / "m.sm")
    bad = f"{k}" if k < 0 else f"1:{k}"
    code, _, err = run(capsys, "check", str(with_compare_line(small, f"compare with grahtp at k in {bad}")))
    assert code == 2, err
    for args in (
        ("solve", m, "--k", str(k)),
        ("compare", m, "--solvers", "grahtp,omp", "--k", bad),
        ("path", m, "--k", bad),
        ("select", m, "--k", bad, "--by", "bic"),
    ):
        code, out, err = run(capsys, *args, "--quiet")
        assert code == 2 and "Traceback" not in err, (args, err)
        assert ("has only 6 coordinates" in err) if k > 0 else ("negative" in err or "nonnegative" in err), err
        assert "objective" not in out  # nothing ran


def test_a_compare_with_failed_cells_is_a_user_error_not_a_bug(capsys, small):
    """A solver refuses its cell (LASSO does not handle groups): the table is printed, exit 2."""
    np.save(small / "g.npy", np.repeat(np.arange(3), 2))
    g = small / "g.sm"
    g.write_text((small / "m.sm").read_text().replace("nnz(w) <= 3", "nnz(w, groups = g) <= 1").replace(
        "var w", 'data g : vector from "g.npy"\nvar w'))  # fmt: skip
    code, out, err = run(capsys, "compare", str(g), "--solvers", "grahtp,lasso", "--k", "1", "--quiet")
    assert code == 2 and "error" in out and "does not handle group-sparsity" in out
    assert "1 of 2 runs failed" in err and "internal error" not in err


# ---------------------------------------------------------------------- item 2: one k, one unit


def test_k_is_printed_with_its_unit_the_same_by_every_command(capsys, tmp_path):
    X = RNG.standard_normal((80, 8))
    y = X[:, :2] @ [1.5, -1.0] + 0.1 * RNG.standard_normal(80)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    np.save(tmp_path / "g.npy", np.repeat(np.arange(4), 2))
    (tmp_path / "g.sm").write_text(
        'data X : matrix from "X.npy"\ndata y : vector from "y.npy"\ndata g : vector from "g.npy"\n'
        "var w[cols(X)]\nminimize sum_squares(X @ w - y) / (2 * rows(X))\nsubject to\n    nnz(w, groups = g) <= 2\n"
    )
    m = str(tmp_path / "g.sm")
    _, out, _ = run(capsys, "solve", m, "--k", "1", "--quiet")
    assert "k = 1 group" in out and "groups      1 kept: group 0" in out
    _, out, _ = run(capsys, "compare", m, "--solvers", "grahtp", "--k", "1,2", "--quiet")
    assert out.splitlines()[1].split()[:2] == ["k", "(groups)"]
    _, out, _ = run(capsys, "path", m, "--k", "1:2", "--quiet")
    assert "k (groups)" in out
    _, out, _ = run(capsys, "select", m, "--k", "1:3", "--by", "bic", "--quiet")
    assert "k (groups)" in out and "chosen k = 1 group" in out


def test_edges_are_k_in_param_k_compare_and_result(capsys, tmp_path):
    Z = RNG.standard_normal((100, 5))
    np.save(tmp_path / "Z.npy", Z)
    (tmp_path / "p.sm").write_text(
        'data Z : matrix from "Z.npy"\nparam k = 2\nlet S = cov(Z)\nvar O[cols(Z), cols(Z)] symmetric\n'
        "minimize -logdet(O) + trace(S @ O)\nsubject to\n    nnz(offdiag(O)) <= 2 * k\n"
        "compare with grahtp, forward at k in 1:3\n"
    )
    m = str(tmp_path / "p.sm")
    code, out, _ = run(capsys, "solve", m, "--k", "3", "--quiet", "--solver", "forward")
    assert code == 0 and "k = 3 edges (6 entries)" in out and re.search(r"^edges       3 \(k = 3\)", out, re.M)
    res = json.loads(run(capsys, "solve", m, "--k", "3", "--quiet", "--solver", "forward", "--json")[1])
    assert res["k"] == 3 and res["unit"] == "edges" and res["bound"] == "nnz(offdiag(O)) <= 6"
    assert np.count_nonzero(np.triu(np.array(res["x"]), 1)) == 3
    code, out, _ = run(capsys, "compare", m, "--quiet", "--out", str(tmp_path / "c.json"))
    assert code == 0 and out.splitlines()[1].split()[:2] == ["k", "(edges)"]  # param k is the bound's k
    rows = json.loads((tmp_path / "c.json").read_text())["rows"]
    assert [r["budget"] for r in rows] == [r["k"] for r in rows] == [1, 1, 2, 2, 3, 3]


# ---------------------------------------------------------------------- item 6: outputs


def test_json_is_a_flag_on_every_command(capsys, small):
    m = str(small / "m.sm")
    for args in (("solve", m), ("compare", m, "--solvers", "grahtp,omp", "--k", "1:2"), ("path", m, "--k", "1:2"),
                 ("select", m, "--k", "1:3", "--by", "bic"), ("solvers",), ("demo", "--n", "60")):  # fmt: skip
        code, out, _ = run(capsys, *args, "--json", *(("--quiet",) if args[0] not in ("solvers", "demo") else ()))
        assert code == 0 and isinstance(json.loads(out), dict), args  # stdout is one JSON object
    code, _, err = run(capsys, "compare", m, "--solvers", "grahtp", "--json", str(small / "t.json"))
    assert code == 2 and "--json takes no file name" in err and f"--out {small / 't.json'}" in err


def support_of(cell: str) -> list[int]:
    return [int(s) for s in cell.split()]


def test_compare_path_and_select_keep_every_solution(capsys, small):
    m = str(small / "m.sm")
    code, _, _ = run(capsys, "compare", m, "--solvers", "grahtp,omp", "--k", "1:3", "--quiet",
                     "--csv", str(small / "c.csv"), "--out", str(small / "c.json"))  # fmt: skip
    assert code == 0
    rows = list(csv.DictReader(open(small / "c.csv")))
    details = json.loads((small / "c.json").read_text())["details"]
    assert len(rows) == len(details) == 6
    for r, d in zip(rows, details):
        x = np.array(d["x"])
        assert support_of(r["support"]) == np.flatnonzero(x).tolist()  # the CSV's support reproduces x
        assert r["support_names"].split("; ") == [("abcdef")[i] for i in np.flatnonzero(x)]
        assert d["k"] == int(r["k"]) and r["unit"] == "coordinates"
    code, _, _ = run(capsys, "path", m, "--k", "1:3", "--quiet", "--csv", str(small / "p.csv"),
                     "--out", str(small / "p.json"))  # fmt: skip
    prow = list(csv.DictReader(open(small / "p.csv")))
    points = json.loads((small / "p.json").read_text())["points"]
    for r, pt in zip(prow, points):
        assert support_of(r["support"]) == np.flatnonzero(pt["x"]).tolist()
    code, _, _ = run(capsys, "select", m, "--k", "1:3", "--by", "bic", "--quiet", "--csv", str(small / "s.csv"),
                     "--out", str(small / "s.json"))  # fmt: skip
    srow = list(csv.DictReader(open(small / "s.csv")))
    sel = json.loads((small / "s.json").read_text())
    for r, pt in zip(srow, sel["path"]):
        assert support_of(r["support"]) == np.flatnonzero(pt["x"]).tolist()
    assert sel["k"] == 3 and sel["result"]["support_names"] == ["a", "c", "f"]  # the true support, by name


def test_progress_bars_only_where_someone_watches(capsys, small, monkeypatch):
    m = str(small / "m.sm")
    code, _, err = run(capsys, "compare", m, "--solvers", "grahtp,omp", "--k", "1:2")
    assert code == 0 and err == ""  # standard error is not a terminal here: no bar
    code, _, err = run(capsys, "compare", m, "--solvers", "grahtp,omp", "--k", "1:2", "--progress")
    assert code == 0 and "compare" in err and "4/4" in err  # asked for
    code, _, err = run(capsys, "path", m, "--k", "1:2", "--progress")
    assert "path auto" in err
    # in a notebook: tqdm's notebook form (ipywidgets present), shown without being asked
    made = []

    class Widget:
        def __init__(self, *a, **kw):
            made.append(kw.get("desc"))

    import tqdm.notebook

    monkeypatch.setattr(progress, "in_notebook", lambda: True)
    monkeypatch.setattr(progress.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(tqdm.notebook, "tqdm", Widget)
    assert isinstance(progress.progress_bar(total=3, desc="compare"), Widget) and made == ["compare"]
    monkeypatch.setattr(progress.importlib.util, "find_spec", lambda name: None)  # no ipywidgets: text
    assert not isinstance(progress.progress_bar(total=3, desc="compare"), Widget)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_disk_is_a_write_error(capsys, small):
    m = str(small / "m.sm")
    for args in (("solve", m, "--out", "/dev/full"), ("solve", m, "--csv", "/dev/full"),
                 ("compare", m, "--solvers", "grahtp", "--k", "1:2", "--csv", "/dev/full"),
                 ("compare", m, "--solvers", "grahtp", "--k", "1:2", "--out", "/dev/full"),
                 ("path", m, "--k", "1:2", "--plot", "/dev/full")):  # fmt: skip
        code, _, err = run(capsys, *args, "--force", "--quiet")
        assert code == 2 and "write error: cannot write /dev/full: No space left on device" in err, (args, err)
        assert "internal error" not in err
    with open("/dev/full", "w") as full:  # standard output itself on a full disk
        proc = subprocess.run(
            [sys.executable, "-m", "sparsemodel.cli", "solve", m, "--json", "--quiet"],
            stdout=full, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
    assert proc.returncode == 2 and "write error: cannot write standard output" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr


def test_a_permission_refused_is_a_write_error(capsys, small, monkeypatch):
    import sparsemodel.outputs as outputs

    def refuse(*a, **kw):
        raise PermissionError(errno.EACCES, "Permission denied", str(a[0]))

    monkeypatch.setattr(outputs, "open", refuse, raising=False)
    code, _, err = run(capsys, "solve", str(small / "m.sm"), "--out", str(small / "r.json"), "--quiet")
    assert code == 2 and "cannot write" in err and "Permission denied" in err and "internal error" not in err


# ---------------------------------------------------------------------- item 5: the README's solver


def test_the_readme_and_the_examples_use_auto():
    """The README's model examples and the example models name no solver in `solve with` (auto
    runs); docs/solvers.md says when to name one."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```[^\n]*\n(.*?)```", readme, re.S)
    models = [b for b in blocks if "minimize" in b and "subject to" in b]
    assert len(models) >= 3
    for text in models + [p.read_text() for p in (ROOT / "examples").glob("*.sm")]:
        for line in re.findall(r"^\s*solve with (\w+)", text, re.M):
            assert line == "auto", text
    assert "## When to name a solver" in (ROOT / "docs" / "solvers.md").read_text()
    assert "prob.solve()" in readme and 'solve(solver="grahtp")' not in readme


def test_the_readme_states_the_measured_test_time():
    readme = (ROOT / "README.md").read_text()
    assert re.search(r"test suite \(measured: \d+ s", readme), "the README states the test run's real time"


def test_a_model_used_by_the_first_readme_example_solves_with_auto(capsys):
    code, out, _ = run(capsys, "solve", str(ROOT / "examples" / "caravan_logistic.sm"), "--quiet")
    assert code == 0 and out.startswith("solver      auto") and "PPERSAUT" in out


def test_the_builder_result_says_k_with_its_unit():
    X = RNG.standard_normal((30, 5))
    w = sm.Variable(5, name="w")
    res = sm.Problem(sm.minimize(sm.sum_squares(X @ w - X[:, 0])), [sm.nnz(w) <= 1]).solve()
    assert res.k_text == "k = 1 coordinate" and "bound       nnz(w) <= 1: k = 1 coordinate" in res.summary()


def test_the_test_session_runs_blas_on_one_thread():
    """Item 11: the default run's time is its work (tests/conftest.py pins BLAS and OpenMP to one
    thread; two spinning threads on a busy 2-core machine made it 2.5 times longer)."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    if os.environ.get("SPARSEMODEL_TEST_THREADS", "1") != "1":
        pytest.skip("another thread count was asked for")
    blas = [p for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
    assert blas and all(p["num_threads"] == 1 for p in blas)


def test_check_refuses_a_param_sweep_that_moves_the_bound_too_far():
    """A param in the bound (nnz(offdiag(O)) <= 2 * k, at k in ...) is checked value by value where
    the line is written, as compare checks it before running."""
    Z = RNG.standard_normal((50, 4))
    text = (
        "data Z : matrix\nparam k = 2\nlet S = cov(Z)\nvar O[cols(Z), cols(Z)] symmetric\n"
        "minimize -logdet(O) + trace(S @ O)\nsubject to\n  nnz(offdiag(O)) <= 2 * k\ncompare with grahtp at k in 1:7\n"
    )
    with pytest.raises(sm.ModelError) as e:
        sm.parse(text, data={"Z": Z})
    assert (e.value.span.line, e.value.span.column) == (8, 21) and "at k = 7" in e.value.message
    assert "6 edges" in e.value.message
    prob = sm.parse(text.replace("1:7", "0:6"), data={"Z": Z})
    assert prob.compare_with["values"] == [0, 1, 2, 3, 4, 5, 6]
    with pytest.raises(sm.ModelError, match="at k = 7"):
        prob.compare(["grahtp"], sweep=("k", [6, 7]), progress=False)
