"""Linear constraints beside nnz from the command line: the portfolio example (model file = builder
= CLI), and infeasible combinations reported at the constraint's line with exit 2, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import sparsemodel as sm
from sparsemodel.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_portfolio_example_from_the_cli_the_file_and_the_builder(capsys):
    code, out, err = run(capsys, "solve", str(EXAMPLES / "portfolio.sm"), "--json")
    assert code == 0, err
    cli = json.loads(out)
    x = np.array(cli["x"])
    assert np.isclose(x.sum(), 1) and x.min() >= 0 and np.count_nonzero(x) <= 10
    assert all(name.startswith("A") for name in cli["support_names"])  # the assets, named by the CSV header
    R = np.loadtxt(EXAMPLES / "data" / "returns.csv", delimiter=",", skiprows=1)
    S = np.cov(R.T, bias=True)  # cov(R) of the language: the maximum-likelihood covariance
    assert np.isclose(cli["objective"], x @ S @ x, rtol=1e-9)
    w = sm.Variable(R.shape[1], name="w")
    built = sm.Problem(sm.minimize(sm.quad_form(w, S)), [sm.nnz(w) <= 10, sm.sum(w) == 1, w >= 0]).solve()
    filed = sm.load(EXAMPLES / "portfolio.sm").solve()
    assert np.allclose(built.x, x, atol=1e-8) and np.allclose(filed.x, x, atol=1e-8)
    code, out, err = run(capsys, "solve", str(EXAMPLES / "portfolio.sm"), "--k", "3", "--json")
    assert code == 0 and np.count_nonzero(json.loads(out)["x"]) <= 3


def test_a_sum_with_a_budget_of_zero_is_reported_at_the_sum(capsys, tmp_path):
    (tmp_path / "m.sm").write_text(
        "var w[5]\nminimize sum_squares(w)\nsubject to\n    nnz(w) <= 0\n    sum(w) == 1\n    w >= 0\n"
    )
    code, _, err = run(capsys, "solve", str(tmp_path / "m.sm"))
    assert code == 2 and "Traceback" not in err
    assert "m.sm:5:5" in err and "cannot hold with nnz(w) <= 0" in err


def test_equalities_without_a_k_sparse_solution_are_reported_at_their_line(capsys, tmp_path):
    np.savetxt(tmp_path / "A.csv", np.random.default_rng(6).standard_normal((3, 6)), delimiter=",")
    (tmp_path / "m.sm").write_text(
        'data A : matrix from "A.csv"\nvar w[6]\nminimize sum_squares(w - [1, 2, 3, 4, 5, 6])\n'
        "subject to\n    nnz(w) <= 2\n    A @ w == [1, 1, 1]\n"
    )
    code, _, err = run(capsys, "solve", str(tmp_path / "m.sm"))
    assert code == 2 and "Traceback" not in err
    assert "m.sm:6:5" in err and "no support of 2 coordinates" in err and "rank 3" in err
    code, out, err = run(capsys, "solve", str(tmp_path / "m.sm"), "--k", "3", "--json")
    assert code == 0, err  # three coordinates suffice for three generic equations
    A = np.loadtxt(tmp_path / "A.csv", delimiter=",")
    assert np.allclose(A @ np.array(json.loads(out)["x"]), 1, atol=1e-8)


def test_a_short_sale_bound_that_empties_the_simplex_is_reported(capsys, tmp_path):
    (tmp_path / "m.sm").write_text(
        "var w[4]\nminimize sum_squares(w)\nsubject to\n    nnz(w) <= 2\n    w >= 0\n    sum(w) == -1\n"
    )
    code, out, err = run(capsys, "check", str(tmp_path / "m.sm"))  # check reports on stdout
    assert code == 2 and "Traceback" not in out + err
    assert "m.sm:6:5" in out and "no solution together with w >= 0" in out and "1 problem(s) found" in out
