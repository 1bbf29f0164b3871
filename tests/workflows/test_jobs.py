"""Every study on every core: ``n_jobs`` / ``--jobs`` give the serial run's rows exactly, seed for
seed (replications by split and by draw, cross-validation's folds), Ctrl-C keeps the runs that
finished, and a bad ``--jobs`` is refused with a message naming the argument."""

from __future__ import annotations

import math
from csv import DictReader

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.cli import main
from sparsemodel.errors import ModelError
from sparsemodel.workflows.experiment import External, experiment
from sparsemodel.workflows.runner import check_jobs, run_tasks

TIMES = ("time_s", "lower_s", "time_total")  # wall-clock: the only cells that may differ


def problem(seed: int = 0, n: int = 80, p: int = 10) -> sm.Problem:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[:3] = [2.0, -1.5, 1.0]
    y = X @ beta + 0.5 * rng.standard_normal(n)
    w = sm.Variable(p, name="w")
    Xd, yd = sm.Data(X, name="X"), sm.Data(y, name="y")
    return sm.Problem(sm.minimize(sm.sum_squares(Xd @ w - yd) / (2 * n) + 1e-3 * sm.sum_squares(w)), [sm.nnz(w) <= 3])


def draw(rng: np.random.Generator, n: int = 60) -> tuple[dict, dict]:
    """A replication's data, drawn from its own generator (module level: workers import it)."""
    X = rng.standard_normal((n, 8))
    w = np.zeros(8)
    w[[0, 3]] = [1.5, -2.0]
    return {"X": X, "y": X @ w + 0.3 * rng.standard_normal(n)}, {"w": w}


def build(X: np.ndarray, y: np.ndarray) -> sm.Problem:
    w = sm.Variable(X.shape[1], name="w")
    return sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / (2 * len(y))), [sm.nnz(w) <= 2])


def same(a: list[dict], b: list[dict]) -> None:
    """The rows are equal cell for cell (NaN equal to NaN), times aside."""
    assert len(a) == len(b) and len(a) > 0
    for ra, rb in zip(a, b):
        assert ra.keys() == rb.keys()
        for c in ra:
            if c in TIMES:
                continue
            x, y = ra[c], rb[c]
            if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
                continue
            assert x == y, (c, x, y, ra["rep"], ra["solver"])


def test_splits_on_two_workers_give_the_serial_rows():
    """compare --splits: the same rows (objectives, supports, held-out loss, in the same order) on
    two joblib workers as serially; each worker rebuilt the split's model from the pickled model."""
    p = problem()
    kw = dict(k=[1, 2, 3, 4], splits=4, seed=3, progress=False)
    serial = experiment(p, ["grahtp", "omp"], **kw)
    parallel = experiment(p, ["grahtp", "omp"], n_jobs=2, **kw)
    same(serial.rows, parallel.rows)
    assert [r["rep"] for r in parallel.rows] == sorted(r["rep"] for r in parallel.rows)
    assert {r["rep"] for r in serial.rows} == {0, 1, 2, 3}


def test_drawn_replications_take_their_own_seed():
    """Data drawn by a generator: each replication's generator is seeded from (seed, point, r), so
    two workers draw the same data (and the truth's metrics agree) as one process."""
    kw = dict(data=draw, reps=4, over={"n": [40, 60]}, k=[1, 2, 3], seed=5, progress=False)
    serial = experiment(build, ["grahtp"], **kw)
    parallel = experiment(build, ["grahtp"], n_jobs=-1, **kw)
    same(serial.rows, parallel.rows)
    assert {r["n"] for r in serial.rows} == {40, 60} and "f1" in serial.rows[0]


def test_cross_validation_on_workers_gives_the_serial_curve():
    p = problem(seed=1, n=120, p=12)
    serial = p.select(k=range(0, 9), by="cv", folds=4, seed=2)
    parallel = p.select(k=range(0, 9), by="cv", folds=4, seed=2, n_jobs=2)
    assert serial.k == parallel.k and serial.ks == parallel.ks
    np.testing.assert_array_equal(serial.per_fold, parallel.per_fold)
    np.testing.assert_array_equal(serial.per_sample, parallel.per_sample)
    assert serial.curve == parallel.curve
    np.testing.assert_array_equal(serial.result.x, parallel.result.x)


def test_select_inside_replications_on_workers():
    """compare --splits --select cv: each replication's cross-validation runs inside its worker."""
    p = problem(seed=2)
    kw = dict(k=[1, 2, 3, 4], splits=3, select="cv", select_options={"folds": 3}, progress=False)
    same(experiment(p, ["omp"], **kw).rows, experiment(p, ["omp"], n_jobs=2, **kw).rows)


class Bar:
    def __init__(self) -> None:
        self.n = 0

    def update(self, n: int) -> None:
        self.n += n

    def close(self) -> None:
        pass


class Report:
    interrupted = False


def stop_at_three(i: int) -> int:
    if i == 3:
        raise KeyboardInterrupt
    return i * i


def test_the_runner_keeps_what_finished_when_interrupted():
    got, bar, rep = [], Bar(), Report()
    with pytest.raises(KeyboardInterrupt) as e:
        run_tasks(stop_at_three, range(6), done=lambda i, out: got.append((i, out)), count=lambda out: 2, bar=bar,
                  report=rep, name="study")  # fmt: skip
    assert got == [(0, 0), (1, 1), (2, 4)] and bar.n == 6  # 3 tasks of 2 runs
    assert rep.interrupted and e.value.study is rep and e.value.report is rep


def test_an_interrupted_study_keeps_its_finished_replications():
    """Ctrl-C during the third replication (an outside method's fit): the study keeps the rows of
    the first two, in order, and says it was interrupted."""
    calls = {"n": 0}

    def fit(data, k):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return np.linalg.lstsq(data["X"], data["y"], rcond=None)[0] * 0

    with pytest.raises(KeyboardInterrupt) as e:
        experiment(problem(), ["omp", External("zero", fit)], k=[2], splits=5, progress=False)
    study = e.value.study
    assert study.interrupted and [r["rep"] for r in study.rows] == [0, 0, 1, 1]


def test_the_progress_bar_counts_finished_runs(monkeypatch):
    import sparsemodel.workflows.experiment as ex

    bars = []

    def fake(*a, **kw):
        bars.append(Bar())
        return bars[-1]

    monkeypatch.setattr(ex, "progress_bar", fake)
    for n_jobs in (1, 2):
        bars.clear()
        study = experiment(problem(), ["grahtp", "omp"], k=[1, 2, 3], splits=3, n_jobs=n_jobs)
        assert bars[0].n == len(study.rows) == study.total == 18


def test_bad_n_jobs_are_refused():
    for bad in (0, -2, 1.5, "2", True):
        with pytest.raises(ModelError, match="not a number of workers"):
            check_jobs(bad)
    assert check_jobs(None) == 1 and check_jobs(-1) == -1
    with pytest.raises(ModelError, match="n_jobs=0"):
        experiment(problem(), ["omp"], k=[1], splits=2, n_jobs=0)
    with pytest.raises(ModelError, match="n_jobs='x'"):
        problem().select(by="cv", n_jobs="x")


def test_n_jobs_is_a_study_option_that_only_studies_take():
    """n_jobs lives in StudyOptions (checked when the options are made, None meaning serial); a
    comparison on the model's data and a path run in this process and refuse it by name instead of
    ignoring it."""
    from sparsemodel.workflows.options import OptionsError, StudyOptions

    assert StudyOptions(n_jobs=None).n_jobs == 1 and StudyOptions(n_jobs=-1).n_jobs == -1
    with pytest.raises(OptionsError, match="n_jobs=0 is not a number of workers"):
        StudyOptions(n_jobs=0)
    p = problem()
    with pytest.raises(OptionsError, match="compare: n_jobs=2 .* runs its sweep in this process"):
        p.compare(["omp"], k=[1, 2], n_jobs=2)
    with pytest.raises(OptionsError, match="path: n_jobs=2 .* one warm-started chain"):
        p.path(k=[1, 2], n_jobs=2)
    assert len(p.compare(["omp"], k=[1, 2], n_jobs=1, progress=False).rows) == 2


@pytest.fixture
def model_file(tmp_path):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((60, 6))
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", X[:, 0] - X[:, 2] + 0.3 * rng.standard_normal(60))
    (tmp_path / "m.sm").write_text(
        'data X : matrix from "X.npy"\ndata y : vector from "y.npy"\nvar w[cols(X)]\n'
        "minimize sum_squares(X @ w - y) / 120\nsubject to\n    nnz(w) <= 2\n"
    )
    return tmp_path / "m.sm"


@pytest.mark.parametrize("bad", ["0", "two", "-3", "1.5"])
def test_cli_refuses_a_bad_jobs_value(capsys, model_file, bad):
    for command in (["compare", str(model_file), "--solvers", "omp", "--splits", "2"], ["select", str(model_file)]):
        with pytest.raises(SystemExit) as e:
            main([*command, f"--jobs={bad}"])
        err = capsys.readouterr().err
        assert e.value.code == 2 and f"argument --jobs: '{bad}' is not a number of workers" in err
        assert "Traceback" not in err


def test_cli_jobs_runs_the_splits_on_workers(capsys, model_file, tmp_path):
    outs = []
    for jobs in ("1", "2"):
        csv = tmp_path / f"s{jobs}.csv"
        code = main(["compare", str(model_file), "--solvers", "omp,grahtp", "--k", "1:3", "--splits", "3",
                     "--quiet", "--jobs", jobs, "--csv", str(csv)])  # fmt: skip
        out = capsys.readouterr().out
        assert code == 0
        with open(csv) as fh:
            outs.append([{c: v for c, v in r.items() if c not in TIMES} for r in DictReader(fh)])
        assert "3 random splits" in out
    assert outs[0] == outs[1] and len(outs[0]) == 3 * 3 * 2
    code = main(["compare", str(model_file), "--solvers", "omp", "--jobs", "2", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "--jobs 2 runs the replications of --splits" in err


def test_a_dask_cluster_runs_the_same_study():
    """scheduler= a distributed Client: the replications and cross-validation's folds run on its
    workers (in-process workers here, to keep the test short) with the serial rows."""
    distributed = pytest.importorskip("distributed")
    p = problem(seed=3)
    kw = dict(k=[1, 2, 3], splits=3, seed=1, progress=False)
    serial = experiment(p, ["omp", "grahtp"], **kw)
    cv = p.select(k=range(0, 7), by="cv", folds=3, seed=0)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as lc:
        with distributed.Client(lc) as client:
            same(serial.rows, experiment(p, ["omp", "grahtp"], n_jobs=2, scheduler=client, **kw).rows)
            on_dask = p.select(k=range(0, 7), by="cv", folds=3, seed=0, n_jobs=2, scheduler=client)
    assert cv.curve == on_dask.curve and cv.k == on_dask.k
    np.testing.assert_array_equal(cv.per_sample, on_dask.per_sample)
