"""Hardening, case by case: valid large models, bad input caught where it is written, results never
lost or overwritten, wrong answers never called converged, and the CLI's last net."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.cli import main
from sparsemodel.errors import ConstraintError, DataError, ModelError, ShapeError, SolverError
from sparsemodel.solvers.base import REGISTRY, Solver, register
from sparsemodel.solvers.options import Option
from sparsemodel.solvers.result import finish

RNG = np.random.default_rng(11)


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def ls_dir(tmp_path: Path) -> Path:
    X = RNG.standard_normal((40, 12))
    v = X[:, :3] @ np.array([2.0, -1.0, 1.5]) + 0.1 * RNG.standard_normal(40)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "v.npy", v)
    (tmp_path / "m.sm").write_text(
        'data X : matrix from "X.npy"\ndata v : vector from "v.npy"\nvar w[cols(X)]\n'
        "minimize sum_squares(X @ w - v)\nsubject to\n    nnz(w) <= 3\n"
    )
    return tmp_path


# ---------------------------------------------------------------------- valid large models


def test_a_10000_term_objective_checks_and_solves():
    terms = " + ".join(f"{i % 7 + 1}*(w[{i % 5}] - {i % 3})^2" for i in range(10000))
    text = f"var w[5]\nminimize {terms}\nsubject to\n    nnz(w) <= 2\n"
    assert len(text) > 150_000  # one line of 170,000 characters
    prob = sm.parse(text)
    assert prob.check().ok
    res = prob.solve("grahtp")
    # the exact answer: per coordinate, the weighted mean of its targets; keep the best two
    a = np.zeros(5)
    b = np.zeros(5)
    for i in range(10000):
        a[i % 5] += i % 7 + 1
        b[i % 5] += (i % 7 + 1) * (i % 3)
    best = b / a
    assert res.status == "converged" and len(res.support) == 2
    np.testing.assert_allclose(res.x[res.support], best[res.support], rtol=1e-9)
    affine = " + ".join(f"{(i % 7 + 1) / 3}*w[{i % 5}]" for i in range(3000))
    deep = sm.parse(f"var w[5]\nminimize sum_squares({affine} - 1) + sum_squares(w)\nsubject to\n    nnz(w) <= 2\n")
    assert deep.solve("omp").status == "converged"
    assert str(deep.objective).startswith("minimize sum_squares(")


# ---------------------------------------------------------------------- errors where they are written


@pytest.mark.parametrize(
    "line, fragment",
    [
        ("solve with nope", "unknown solver 'nope'"),
        ("solve with grahtp(eta = -1)", "option eta must be positive"),
        ('solve with grahtp(tol = "x")', "tol"),
        ("solve with grahtp(nope = 1)", "no option 'nope'"),
        ("solve with grahtp(max_iter = 0)", "max_iter must be >= 1"),
        ("compare with grahtp, nope", "unknown solver 'nope'"),
    ],
)
def test_check_validates_solver_lines_at_their_location(capsys, ls_dir, line, fragment):
    path = ls_dir / "m.sm"
    path.write_text(path.read_text() + line + "\n")
    code, out, _ = run(capsys, "check", str(path))
    assert code == 2 and fragment in out and "m.sm:7:1" in out
    if line.startswith("solve"):
        code, _, err = run(capsys, "solve", str(path))
        assert code == 2 and fragment in err and "m.sm:7:1" in err and "Traceback" not in err


def test_a_constraint_a_solver_cannot_take_is_pointed_at(capsys, tmp_path):
    np.save(tmp_path / "A.npy", RNG.standard_normal((20, 4)))
    np.save(tmp_path / "B.npy", RNG.standard_normal((20, 3)))
    (tmp_path / "r.sm").write_text(
        'data A : matrix from "A.npy"\ndata B : matrix from "B.npy"\nvar W[4, 3]\n'
        "minimize sum_squares(A @ W - B)\nsubject to\n    rank(W) <= 1\nsolve with omp\n"
    )
    code, out, _ = run(capsys, "check", str(tmp_path / "r.sm"))
    assert code == 2 and "omp does not handle rank" in out and "r.sm:6:5" in out
    code, _, err = run(capsys, "solve", str(tmp_path / "r.sm"), "--solver", "els")
    assert code == 2 and "els does not handle rank" in err and "r.sm:6:5" in err


def test_cli_nonsense_is_refused(capsys, ls_dir):
    m = str(ls_dir / "m.sm")
    code, _, err = run(capsys, "solve", m, "-o", "max_iter=0")
    assert code == 2 and "max_iter must be >= 1" in err
    code, _, err = run(capsys, "solve", m, "--out", "")
    assert code == 2 and "empty" in err
    for a, b in (("--csv", "--plot"), ("--csv", "--out")):
        code, _, err = run(
            capsys, "compare", m, "--solvers", "grahtp", a, str(ls_dir / "same.out"), b, str(ls_dir / "same.out")
        )
        assert code == 2 and "both write" in err and not (ls_dir / "same.out").exists()
    code, _, err = run(capsys, "demo", "--seed", "-1")
    assert code == 2 and "seed" in err
    with pytest.raises(ConstraintError, match="negative"):
        sm.load(m).compare(["grahtp"], k=[-1], progress=False)


def test_user_errors_that_were_internal_errors(capsys, tmp_path):
    (tmp_path / "z.sm").write_text("param a = 0\nvar w[3]\nminimize sum_squares(w) / a\n")
    code, _, err = run(capsys, "check", str(tmp_path / "z.sm"))
    assert code == 2 and "division by zero" in err and "z.sm:3:10" in err
    (tmp_path / "o.sm").write_text("var w[1/0]\nminimize sum_squares(w)\n")
    code, _, err = run(capsys, "check", str(tmp_path / "o.sm"))
    assert code == 2 and "division by zero" in err and "o.sm:1:7" in err
    (tmp_path / "i.sm").write_text("var w[1e400]\nminimize sum_squares(w)\n")
    code, _, err = run(capsys, "check", str(tmp_path / "i.sm"))
    assert code == 2 and "i.sm:1:7" in err and "internal error" not in err


def test_python_api_errors():
    for bad in (2.5, "abc", (2, "x")):
        with pytest.raises(ShapeError, match="dimension"):
            sm.Variable(bad)
    w = sm.Variable(3, name="w")
    with pytest.raises(DataError, match="1 NaN and 1 infinite"):
        sm.Problem(sm.minimize(sm.sum_squares(w - np.array([1.0, np.nan, np.inf]))))


def test_data_files_in_other_encodings_and_garbage(tmp_path):
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbfa,b\n1,2\n3,4\n")
    (tmp_path / "lat.csv").write_bytes(b"caf\xe9,b\n1,2\n3,4\n")
    (tmp_path / "bad.npy").write_bytes(b"garbage")
    for name in ("bom.csv", "lat.csv"):
        p = sm.parse(f'data X : matrix from "{name}"\nvar w[2]\nminimize sum_squares(X @ w - 1)\n', base_dir=tmp_path)
        np.testing.assert_array_equal(p.symbols["X"].value, [[1, 2], [3, 4]])
    with pytest.raises(DataError) as e:
        sm.parse('data X : matrix from "bad.npy"\nvar w[2]\nminimize sum_squares(X @ w)\n', base_dir=tmp_path)
    assert "allow_pickle" not in e.value.render() and e.value.span.line == 1


# ---------------------------------------------------------------------- unbounded objectives


def test_unbounded_objectives_are_reported_not_converged(capsys, ls_dir):
    (ls_dir / "u.sm").write_text(
        'data X : matrix from "X.npy"\ndata v : vector from "v.npy"\nvar w[cols(X)]\n'
        "minimize sum(X @ w - v)\nsubject to\n    nnz(w) <= 3\n"
    )
    code, out, _ = run(capsys, "check", str(ls_dir / "u.sm"))
    assert code == 2 and "unbounded" in out and "u.sm:4:10" in out
    code, out, _ = run(capsys, "solve", str(ls_dir / "u.sm"), "--solver", "omp", "--json")
    assert code == 2 and json.loads(out)["status"] == "unbounded"
    X = RNG.standard_normal((50, 8))
    y = np.sign(RNG.standard_normal(50))
    w = sm.Variable(8, name="w")
    p = sm.Problem(sm.minimize(sm.mean(sm.logistic(-y * (X @ w))) - 10 * sm.sum(w)), [sm.nnz(w) <= 3])
    for s in ("grahtp", "omp", "iht"):  # curved, but linear at infinity: caught as the iterates run away
        r = p.solve(s)
        assert r.status == "unbounded" and "without bound" in r.message, s
    ok = sm.Problem(
        sm.minimize(sm.mean(sm.logistic(-y * (X @ w))) + 0.1 * sm.sum_squares(w) - sm.sum(w)), [sm.nnz(w) <= 3]
    )
    assert ok.solve("grahtp").status == "converged"  # a ridge makes it bounded


# ---------------------------------------------------------------------- results never lost or overwritten


@pytest.fixture
def flaky():
    """A solver that stops the sweep with Ctrl-C at its third run (and may create a file first)."""

    @register
    class Flaky(Solver):
        name = "flaky_test"
        handles = frozenset({"nnz"})
        options = {"touch": Option("", "a file to create during the run", str)}
        calls = 0

        def run(self, lp):
            from sparsemodel.util import Clock

            type(self).calls += 1
            if self.opts["touch"]:
                Path(self.opts["touch"]).write_text("the user's file\n")
            if type(self).calls == 3:
                raise KeyboardInterrupt
            r = lp.restricted_minimize(np.arange(lp.set.k))
            return finish(lp, self, r.x, "converged", 1, Clock(), f=r.f)

    yield Flaky
    del REGISTRY["flaky_test"]


def test_an_interrupted_sweep_keeps_its_finished_rows(capsys, ls_dir, flaky):
    out = ls_dir / "part.csv"
    code, stdout, err = run(
        capsys, "compare", str(ls_dir / "m.sm"), "--solvers", "grahtp,flaky_test", "--k", "1:4", "--quiet",
        "--csv", str(out), "--out", str(ls_dir / "part.json"),
    )  # fmt: skip
    assert code == 130 and "interrupted after 5 of 8 runs" in err  # Ctrl-C during flaky_test's third run
    with open(out) as fh:
        rows = list(csv.DictReader(fh))
    done = [("grahtp", "1"), ("flaky_test", "1"), ("grahtp", "2"), ("flaky_test", "2"), ("grahtp", "3")]
    assert [(r["solver"], r["k"]) for r in rows] == done
    assert len(json.loads((ls_dir / "part.json").read_text())["rows"]) == 5
    assert "grahtp" in stdout  # the table of the finished runs


def test_a_file_created_during_the_sweep_is_not_overwritten(capsys, ls_dir, flaky):
    target = ls_dir / "late.json"
    flaky.calls = -100  # never interrupts here
    code, _, err = run(
        capsys, "compare", str(ls_dir / "m.sm"), "--solvers", "flaky_test", "--k", "1", "--quiet",
        "-o", f"flaky_test:touch={target}", "--out", str(target),
    )  # fmt: skip
    assert code == 2 and "refusing to overwrite the existing file" in err and "late.json" in err
    assert target.read_text() == "the user's file\n"


def test_a_hard_link_to_the_model_is_refused_even_with_force(capsys, ls_dir):
    link = ls_dir / "alias.out"
    os.link(ls_dir / "m.sm", link)
    before = (ls_dir / "m.sm").read_text()
    code, _, err = run(capsys, "solve", str(ls_dir / "m.sm"), "--out", str(link), "--force")
    assert code == 2 and "input of this model" in err
    assert (ls_dir / "m.sm").read_text() == before


# ---------------------------------------------------------------------- rough edges


def test_solvers_listing_is_true_and_fits(capsys):
    code, out, _ = run(capsys, "solvers", "-v")
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 100
    fg = out.split("fgrahtp options:")[1].split("options:")[0]
    assert "debias         default False" in fg
    assert sm.registry["fgrahtp"]().opts["debias"] is False


def test_plot_uses_a_log_axis_only_over_a_wide_range(ls_dir):
    prob = sm.load(ls_dir / "m.sm")
    narrow = prob.compare(["grahtp", "omp"], k=[3, 4], progress=False)
    assert narrow.figure().axes[0].get_yscale() == "linear"
    wide = prob.compare(["grahtp"], k=[1, 3], progress=False)
    objs = [r["objective"] for r in wide.rows]
    assert max(objs) / min(objs) > 10 and wide.figure().axes[0].get_yscale() == "log"


def test_a_closed_pipe_ends_quietly(tmp_path):
    (tmp_path / "big.sm").write_text("var w[40000]\nminimize sum_squares(w - 1)\nsubject to\n    nnz(w) <= 3\n")
    p = subprocess.Popen(  # about a megabyte of JSON: more than a pipe holds
        [sys.executable, "-m", "sparsemodel.cli", "solve", str(tmp_path / "big.sm"), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    p.stdout.read(10)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait() == 141 and err == ""


def test_every_model_error_subclass_is_documented():
    text = (Path(__file__).resolve().parents[1] / "docs" / "language.md").read_text()
    import sparsemodel.errors as E

    kinds = {c.kind for c in vars(E).values() if isinstance(c, type) and issubclass(c, ModelError)}
    for kind in kinds:
        assert f"`{kind}`" in text, kind
    assert issubclass(SolverError, ModelError)


def test_warnings_print_one_line_without_internal_paths(capsys, ls_dir):
    @register
    class Warns(Solver):
        name = "warns_test"
        handles = frozenset({"nnz"})

        def run(self, lp):
            import warnings

            from sparsemodel.util import Clock

            for _ in range(3):
                warnings.warn("overflow encountered in exp", RuntimeWarning, stacklevel=1)
            r = lp.restricted_minimize(np.arange(lp.set.k))
            return finish(lp, self, r.x, "converged", 1, Clock(), f=r.f)

    try:
        code, _, err = run(capsys, "solve", str(ls_dir / "m.sm"), "--solver", "warns_test")
    finally:
        del REGISTRY["warns_test"]
    assert code == 0 and err == "warning: overflow encountered in exp\n"
