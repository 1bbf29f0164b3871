"""Knockoffs and stability selection as methods of a study: each replication's row is the model
refitted on the selected units, with the truth's fdr and power, beside the solvers' rows; the
command line's compare takes them by name."""

from __future__ import annotations

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.cli import main
from sparsemodel.inference.base import InferenceError
from sparsemodel.inference.methods import Knockoffs, Stability, method

P = 12


def model(X: np.ndarray, y: np.ndarray) -> sm.Problem:
    w = sm.Variable(P, name="w")
    return sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / (2 * len(y))), [sm.nnz(w) <= 6])


def draw(rng: np.random.Generator):
    X = rng.standard_normal((150, P))
    beta = np.zeros(P)
    beta[[0, 3, 7, 9]] = [1.0, -1.0, 0.9, 0.8]
    return {"X": X, "y": X @ beta + rng.standard_normal(150)}, {"w": beta}


def test_a_study_runs_the_inference_methods_beside_the_solvers():
    study = sm.experiment(
        model, ["auto", Knockoffs(fdr=0.25), Stability(threshold=0.7, options={"pairs": 5})], data=draw, reps=2
    )
    assert not study.failed() and "fdr" in study.columns and "power" in study.columns
    rows = {(r["rep"], r["solver"]): r for r in study.rows}
    for rep in (0, 1):
        for name in ("knockoffs", "stability"):
            r = rows[(rep, name)]
            assert r["status"] == "selected"
            S = {int(s) for s in r["support"].split()} if r["support"] else set()
            T = {0, 3, 7, 9}
            assert r["k"] is None and r["nnz"] == len(S)  # its replications form one group
            assert r["fdr"] == pytest.approx(len(S - T) / max(len(S), 1))
            assert r["power"] == pytest.approx(len(S & T) / 4)
        # the auto row's fdr is its false share too, at its bound 6: at least 2 of 6 are false
        assert rows[(rep, "auto")]["fdr"] >= 2 / 6 - 1e-12
    # the summary pools a method's replications (its FDR is their mean), whatever it selected
    assert study.summary(["fdr"], by=["solver"]) is not None
    assert study.mean("fdr", by=["solver"])["knockoffs"] == pytest.approx(
        np.mean([rows[(i, "knockoffs")]["fdr"] for i in (0, 1)])
    )
    # the same study again: the same selections (each replication's seed is fixed)
    again = sm.experiment(model, [Knockoffs(fdr=0.25)], data=draw, reps=2)
    assert [r["support"] for r in again.rows] == [rows[(i, "knockoffs")]["support"] for i in (0, 1)]


def test_methods_by_name_take_their_level_and_options():
    m = method("knockoffs", {"fdr": 0.2, "statistic": "coef"}, seed=3)
    assert isinstance(m, Knockoffs) and m.fdr == 0.2 and m.options == {"statistic": "coef"} and m.seed == 3
    assert method("stability", {"threshold": 0.8}).threshold == 0.8
    with pytest.raises(InferenceError, match="knockoffs, stability"):
        method("lasso_ko")


def test_compare_on_the_command_line_takes_knockoffs(tmp_path, capsys):
    (data, truth) = draw(np.random.default_rng(4))
    np.save(tmp_path / "X.npy", data["X"])
    np.save(tmp_path / "y.npy", data["y"])
    np.save(tmp_path / "w.npy", truth["w"])
    (tmp_path / "m.sm").write_text(
        'data X : matrix from "X.npy"\ndata y : vector from "y.npy"\nvar w[cols(X)]\n'
        "minimize sum_squares(X @ w - y) / (2 * rows(X))\nsubject to\n    nnz(w) <= 6\n"
    )
    code = main(
        [
            "compare",
            str(tmp_path / "m.sm"),
            "--solvers",
            "auto,knockoffs",
            "-o",
            "knockoffs:fdr=0.3",
            "--truth",
            f"w={tmp_path / 'w.npy'}",
            "--csv",
            str(tmp_path / "c.csv"),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "knockoffs" in out and "power" in out
    text = (tmp_path / "c.csv").read_text()
    header = text.splitlines()[0].split(",")
    assert "fdr" in header and "power" in header and ",selected," in text
