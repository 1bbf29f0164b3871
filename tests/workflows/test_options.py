"""One options object for compare, path, select and experiment (workflows/options.py): the facade's
keywords reach the study, the selection or the solver they name, the documented calls run, and a
keyword nobody takes is refused by name instead of failing inside a run."""

from __future__ import annotations

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.workflows.experiment import experiment
from sparsemodel.workflows.options import OptionsError, SelectOptions, StudyOptions


def problem(seed: int = 5):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((60, 10))
    beta = np.zeros(10)
    beta[[0, 3]] = [2.0, -1.5]
    y = X @ beta + 0.3 * rng.standard_normal(60)
    w = sm.Variable(10, name="w")
    Xd, yd = sm.Data(X, name="X"), sm.Data(y, name="y")
    prob = sm.Problem(sm.minimize(sm.sum_squares(Xd @ w - yd) / 120), [sm.nnz(w) <= 2])
    return prob, X, y, beta


def test_split_sends_each_keyword_where_it_belongs():
    study, rest = StudyOptions.split(
        {"progress": True, "truth": {"w": 1}, "gamma": 2.0, "folds": 3, "max_iter": 7}, selecting=True
    )
    assert study.progress is True and study.truth == {"w": 1}
    assert study.select == SelectOptions(gamma=2.0, folds=3)
    assert rest == {"max_iter": 7}
    study, rest = StudyOptions.split({"gamma": 2.0, "start": "warm"}, progress=None)
    assert study.progress is None and study.select == SelectOptions() and rest == {"gamma": 2.0, "start": "warm"}


def test_the_facade_routes_selection_study_and_solver_keywords():
    prob, _, _, beta = problem()
    sel = prob.select(k=range(0, 5), by="ebic", gamma=2.0, solver="grahtp", max_iter=3, early_stop=False)
    assert sel.gamma == 2.0 and sel.early_stop is None and sel.ks == [0, 1, 2, 3, 4]
    assert sel.result.options["max_iter"] == 3  # the solver's option, not the selection's
    sel = prob.select(k=range(0, 5), by="cv", folds=3, seed=0, rule="min", truth={"w": beta})
    assert sel.per_fold.shape[0] == 3 and sel.rule == "min" and "f1" in sel.metric_columns
    path = prob.path(k=range(1, 4), solver="els", start="warm", max_iter=200, truth={"w": beta})
    assert path.start == "warm" and "f1" in path.metric_columns and path.options == {"max_iter": 200}


def test_documented_calls_run():
    prob, X, y, beta = problem()
    comp = prob.compare(["grahtp", "lasso"], k=[1, 2], test={"X": X[:20], "y": y[:20]}, truth={"w": beta})
    assert "test_loss" in comp.columns and "f1" in comp.columns and len(comp.rows) == 4
    study = experiment(
        prob, ["grahtp"], k=range(0, 4), splits=2, select="ebic", select_options={"early_stop": False}, progress=False
    )
    assert len(study.rows) == 2 and all(r["by"] == "ebic" for r in study.rows)


def test_unknown_keywords_are_refused_by_name():
    prob, _, _, _ = problem()
    with pytest.raises(OptionsError, match="(?s)progres=.*did you mean 'progress'"):
        prob.compare(["grahtp"], k=[1], progres=False)
    with pytest.raises(OptionsError, match="(?s)'gama' is not an option of choosing k.*did you mean 'gamma'"):
        experiment(prob, ["grahtp"], k=range(0, 3), select="bic", select_options={"gama": 2.0}, progress=False)
    with pytest.raises(OptionsError, match="splitz="):
        experiment(prob, ["grahtp"], k=[1], splitz=2, progress=False)
