"""The command line on a Python model module (a .py file defining ``problem``): what a model that
needs Python (``sm.custom_loss``) runs as; solve and check, the output files protected, and the
module's own errors located without a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparsemodel.cli import main

MODULE = """\
import numpy as np
import sparsemodel as sm

rng = np.random.default_rng(1)
X = rng.standard_normal((100, 5))
Y = X @ np.array([0, 2.0, 0, -1.0, 0]) + 0.1 * rng.standard_normal(100)


def loss(w):
    r = Y - X @ w
    return float(r @ r), -2 * X.T @ r


w = sm.Variable(5, name="w")
problem = sm.Problem(sm.minimize(sm.custom_loss(loss, w)), [sm.nnz(w) <= 2])
"""


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_solve_and_check_a_python_model_module(tmp_path: Path, capsys):
    path = tmp_path / "model.py"
    path.write_text(MODULE)
    code, out, _ = run(capsys, "solve", str(path), "--solver", "grahtp", "--json")
    assert code == 0
    res = json.loads(out)
    assert res["status"] == "converged" and sorted(res["support"]) == [1, 3]
    code, out, _ = run(capsys, "check", str(path))
    assert code == 0 and "custom_loss" in out and "svrg_ht" not in out.split("solvers")[-1]
    code, _, err = run(capsys, "solve", str(path), "--solver", "svrg_ht")
    assert code == 2 and "finite sum" in err
    code, _, err = run(capsys, "solve", str(path), "--csv", str(path))
    assert code == 2 and "model" in err and path.read_text() == MODULE  # the module is an input: never overwritten


@pytest.mark.parametrize(
    "text, words",
    [
        ("import numpy as np\nx = 1\n\ny = 1 / 0\n", "failed at line 4: ZeroDivisionError"),
        ("import sparsemodel as sm\nw = sm.Variable(3, name='w')\n", "defines no problem"),
        (
            "import sparsemodel as sm\nw = sm.Variable(3, name='w')\nproblem = sm.Problem(sm.minimize(sm.sum(w ** 3)))\n",
            "power 2",
        ),
    ],
)
def test_the_modules_errors_are_located(tmp_path: Path, capsys, text, words):
    path = tmp_path / "bad.py"
    path.write_text(text)
    code, out, err = run(capsys, "solve", str(path))
    assert code == 2 and words in err and "Traceback" not in err + out


def test_data_and_params_are_for_model_files(tmp_path: Path, capsys):
    path = tmp_path / "model.py"
    path.write_text(MODULE)
    code, _, err = run(capsys, "solve", str(path), "--data", "X=other.csv")
    assert code == 2 and "Python model module builds its own" in err
