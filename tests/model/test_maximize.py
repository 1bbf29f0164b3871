"""``maximize f``: solved as the minimization of -f by every solver (Result.objective is -f at the
answer, Result.extra['maximum'] is f), from the model file, the builder and the CLI; a convex f is
refused at the term that is not concave."""

from __future__ import annotations

import json

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.cli import main
from sparsemodel.errors import ConvexityError

C = np.array([1.0, -2.0, 3.0, 0.5, -4.0])
MAX = "var w[5]\nmaximize -sum_squares(w - [1, -2, 3, 0.5, -4])\nsubject to\n    nnz(w) <= 2\n"
MIN = MAX.replace("maximize -sum_squares", "minimize sum_squares")


@pytest.mark.parametrize("solver", ["auto", "grahtp", "fgrahtp", "iht", "omp"])
def test_maximize_is_minimize_of_the_negation(solver):
    a = sm.parse(MAX, name="max.sm").solve(solver)
    b = sm.parse(MIN, name="min.sm").solve(solver)
    assert np.allclose(a.x, b.x) and np.allclose(a.x, [0, 0, 3, 0, -4])  # the two largest |c_j|
    assert a.objective == pytest.approx(b.objective)  # the function minimized: -f
    assert a.extra["maximum"] == pytest.approx(-np.sum((a.x - C) ** 2))  # f as written, at the answer
    assert "maximum" not in b.extra


def test_the_builder_and_the_model_file_agree_with_a_linear_constraint():
    w = sm.Variable(5, name="w")
    built = sm.Problem(sm.maximize(-sm.sum_squares(w - C)), [sm.nnz(w) <= 2, sm.sum(w) == 1]).solve()
    filed = sm.parse(MAX + "    sum(w) == 1\n", name="m.sm").solve()
    assert np.allclose(built.x, filed.x) and np.isclose(built.x.sum(), 1)
    assert built.extra["maximum"] == pytest.approx(-np.sum((built.x - C) ** 2))
    assert str(sm.Problem(sm.maximize(-sm.sum_squares(w - C)), []).objective).startswith("maximize ")


def test_a_convex_objective_is_refused_at_the_term(capsys, tmp_path):
    text = MAX.replace("maximize -sum_squares", "maximize sum_squares")
    with pytest.raises(ConvexityError) as e:
        sm.parse(text, name="m.sm").solve()
    assert e.value.span.line == 2 and e.value.span.column == 10 and "maximize needs a concave" in str(e.value)
    (tmp_path / "m.sm").write_text(text)
    code = main(["solve", str(tmp_path / "m.sm")])
    err = capsys.readouterr().err
    assert code == 2 and "m.sm:2:10" in err and "Traceback" not in err


def test_the_cli_reports_the_maximum(capsys, tmp_path):
    (tmp_path / "m.sm").write_text(MAX)
    assert main(["solve", str(tmp_path / "m.sm"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    x = np.array(out["x"])
    assert out["extra"]["maximum"] == pytest.approx(-np.sum((x - C) ** 2)) == pytest.approx(-out["objective"])


def test_the_summary_shows_the_maximum_as_written(capsys, tmp_path):
    """The objective line of a maximized model is f as the user wrote it, not the -f minimized."""
    (tmp_path / "m.sm").write_text(MAX)
    assert main(["solve", str(tmp_path / "m.sm")]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("objective"))
    r = sm.parse(MAX).solve()
    assert float(line.split()[1]) == pytest.approx(r.extra["maximum"], rel=1e-9)
    assert "maximum" in line
    assert not any("maximum" in ln for ln in out.splitlines() if ln.startswith("details"))  # said once
