"""Replicated comparisons: several methods, over k or each at the k it chooses, on many data sets.

:func:`experiment` runs :func:`~sparsemodel.workflows.compare.compare` (or, with ``select=``,
:func:`~sparsemodel.workflows.select.run_select` once per method) on every replication and gathers
the rows in a tidy table, a :class:`Study`: one row per replication, method and k, every metric a
column (:mod:`sparsemodel.workflows.metrics`). A replication is

* a draw of a data generator (``data=draw, reps=20``): ``draw(rng, **point)`` returns the data by
  name (``{"X": X, "y": y}``), or ``(data, truth)`` or ``(data, truth, test)`` with the true
  values by variable name and held-out data by data name; ``over={"n": [100, 200]}`` repeats the
  study at every value of a design parameter, passed to ``draw`` as a keyword;
* a random split of the model's own rows (``splits=20, test_size=0.3``; stratified by class for
  the logistic and softmax losses), the held-out rows scoring the model's own loss;
* or, with neither, the model's data as it is (one replication: a comparison with its metrics).

``problem`` is a model (a model file is built again from its text for each draw, so that
``rows(X)`` and ``let`` data follow; a builder model needs its data named, ``sm.Data(X,
name="X")``) or a function ``problem(**data)`` that builds one. Methods are solver names, or
:class:`External` methods from other libraries run on the same replications.

``select="cv" | "bic" | "ebic" | "gic" | ...`` compares each method at its own chosen k: the
selection runs per method and per replication on the training data, a convex relaxation (lasso,
nuclear, glasso) choosing its penalty among those that give each k by the same criterion; the
row's ``k`` is the chosen k, ``time_s`` the whole selection's time, ``penalty`` a relaxation's
lambda at its choice.

The summary (:meth:`Study.summary`) is the mean and standard error (std / sqrt(replications)) of
every metric per method and k (or design value); a failed run (a k LASSO cannot reach) is left out
of the means and counted in ``errors``."""

from __future__ import annotations

import inspect
import math
import numbers
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from ..errors import ModelError
from ..lowering.lowered import LoweredProblem
from ..model.problem import Model
from ..objective.sampleview import SelectionError, sample_view
from ..outputs import RowSink, check_output
from ..progress import progress_bar
from ..solvers import get_solver
from .compare import _warm_up, compare
from .metrics import (
    TRUTH_METRICS,
    HeldOut,
    MetricError,
    Scorer,
    Truth,
    bound_cells,
    class_labels,
    clean,
    coordinate,
    dof,
    holdout_splits,
    origin,
    rows_data,
    train_model,
    with_data,
)
from .options import Replications, SelectOptions, StudyOptions, bounds_of
from .report import ERROR, RUN_COLUMNS, SUPPORT_COLUMNS, point_support_cells, support_cells
from .runner import run_tasks, tick, workers
from .scheduler import use_scheduler
from .study import Study

SELECT_BY = ("cv", "ebic", "aic", "bic", "ebic_cc", "gic")


BASE = (*RUN_COLUMNS, "time_s", "iterations", "lower_s")


TAIL = (*SUPPORT_COLUMNS, "message")


EXTERNAL_INFO = ("time_s", "penalty", "iterations", "message")  # what an outside method may report


@dataclass
class External:
    """A method from outside sparsemodel (abess, scikit-learn), run on the same replications.

    ``fit(data, k)`` gets the training data by name (``{"X": ..., "y": ...}``) and the bound, and
    returns the constrained variable's value (an array) or every variable's (a dict by name),
    optionally with a dict of what it wants reported: ``(values, {"penalty": lam, "time_s": t})``.
    With ``chooses_k=True`` it chooses its own k: ``fit(data, test)`` is called once per
    replication (``test``: the held-out data by name, or None) and its row's k is the number of
    units it uses; ``time_total`` is the whole call, ``time_s`` the call or the time it reports
    for the fit it chose. Values below 1e-12 times the largest are its numerical zeros."""

    name: str
    fit: Callable[..., Any]
    chooses_k: bool = False


@dataclass
class Selector(External, ABC):
    """A method that chooses its units itself, with an error guarantee: the inference layer's
    knockoff filter and stability selection (:mod:`sparsemodel.inference.methods`), run on the same
    replications as the solvers. :meth:`select` returns the chosen units of the problem's
    constraint set (and what to report: ``time_s``, ``message``); the row's point is the model
    refitted on them (a restricted solve), so every metric of a solution applies, and with a truth
    its ``fdr`` and ``power``. Each replication gets its own seed, drawn from (``seed``, its index)."""

    fit: Any = None
    chooses_k: bool = True
    seed: int | None = 0

    @abstractmethod
    def select(self, problem: Model, lp: LoweredProblem, seed: int) -> tuple[np.ndarray, dict[str, Any]]:
        """(the chosen units, the report) on one replication (a class without it cannot be
        instantiated)."""

    def refit(self, problem: Model, lp: LoweredProblem, index: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """The values of the model refitted on the selected units, and the report (the whole
        selection's time)."""
        t0 = time.perf_counter()
        seed = int(np.random.SeedSequence([int(self.seed or 0), int(index)]).generate_state(1)[0])
        units, info = self.select(problem, lp, seed)
        s = lp.set
        x0 = np.zeros(lp.n)
        chosen = np.asarray(units, dtype=np.int64)
        x0[s.coords[chosen] if s.unit_of is None else s.coords[np.isin(s.unit_of, chosen)]] = 1.0
        r = lp.fresh().restricted_minimize(s.state(x0))
        return lp.layout.unpack(r.x), {**info, "time_s": time.perf_counter() - t0}


@dataclass
class Replication:
    """One replication: its index, design values, training model, held-out and true values."""

    index: int
    point: dict[str, Any]
    train: Model
    held: HeldOut | None
    truth: dict[str, Any] | None
    data: dict[str, Any]  # the training data by name (what an External fits)
    test_data: dict[str, Any] | None


def experiment(
    problem: Model | Callable[..., Model],
    solvers: Iterable[str | External] | dict[str, str | External] | str,
    k: Iterable[int] | int | Callable[[int], Iterable[int]] | None = None,
    options: dict[str, dict[str, Any]] | None = None,
    select: str | None = None,
    select_options: dict[str, Any] | None = None,
    study: StudyOptions | None = None,
    replications: Replications | None = None,
    **kw: Any,
) -> Study:
    """Compare ``solvers`` over replications (see the module docstring); returns a :class:`Study`.

    ``k``: the bounds to compare at (default: the model's own), or with ``select`` the candidates
    (default: select's range); a function ``k(t)`` of the number t of true units of each
    replication gives bounds relative to the truth (``lambda t: [t // 2, t, 2 * t]``).
    ``options``: per-solver options; ``select_options``: ``folds``, ``rule``, ``gamma``, ``start``,
    ``early_stop``, ``patience``, ``margin`` of the selection
    (:class:`~sparsemodel.workflows.options.SelectOptions`). ``replications``
    (:class:`~sparsemodel.workflows.options.Replications`, or its keywords): ``data``/``reps``/
    ``over``, replications drawn by a generator; ``splits``/``test_size``/``stratify`` (default:
    stratified for classification losses), random splits of the model's rows; ``seed`` fixes both.
    ``study`` (:class:`~sparsemodel.workflows.options.StudyOptions`, or its keywords): ``test``/
    ``truth``, held-out data and true values for the model as it is (or every split); ``progress``;
    ``csv``, where the tidy rows are written as they finish, and ``overwrite``; ``n_jobs``, the
    replications on that many workers (joblib; -1: every core; None or 1: serially), with
    ``scheduler`` a dask cluster's (a ``Client``, an address or ``"local"``): the rows are the
    serial run's, seed for seed (:mod:`sparsemodel.workflows.runner`)."""
    made, kw = Replications.split(kw, replications)
    study_opts = StudyOptions.merged(study, kw, "experiment", progress=None)
    labels, methods = _methods(solvers)
    options = dict(options or {})
    choose = _check_methods(problem, methods, options, select, select_options)
    if made.seed is not None and (isinstance(made.seed, bool) or not isinstance(made.seed, numbers.Integral)):
        raise MetricError(f"seed={made.seed!r} must be an integer (or None)")
    ks: Any = bounds_of(k) if k is not None and not callable(k) else k
    over_names, points = _grid(made.over, made.data)
    how = _how(problem, made, over_names, study_opts)
    specs = _specs(problem, points, made)
    study = Study(
        problem,
        labels,
        [],
        over_names,
        select,
        {
            "replications": how,
            "reps_each": int(made.reps) if made.data is not None else int(made.splits or 1),
            "seed": made.seed,
            "test_size": made.test_size if made.splits else None,
        },
    )
    n_reps = int(made.reps) * len(points) if made.data is not None else int(made.splits or 1)
    if select or not callable(ks):
        one = sum(
            1 if select or (isinstance(m, External) and m.chooses_k) else len(ks or [None]) for m in methods.values()
        )
        study.total = n_reps * one
    else:
        study.total = None  # k depends on each replication's truth
    progress, csv, overwrite = study_opts.progress, study_opts.csv, study_opts.overwrite
    if csv is not None:
        check_output(csv, study.protected, overwrite)  # before anything runs
    job = _Job(problem, made, study_opts.test, study_opts.truth, methods, ks, select, options, choose, over_names)

    def done(i: int, out: tuple[list[str], list[dict[str, Any]], str, list[str]]) -> None:
        columns, rows, unit, notes = out
        if study.columns == []:  # the first replication's metrics name the columns
            study.columns = columns
            if csv is not None:
                study.sink = RowSink(csv, study.columns, study.protected, overwrite)
        if unit and not study.unit:
            study.unit = unit
        for r in rows:
            study._add(r)
        study.notes += [n for n in notes if n not in study.notes]

    bar = progress_bar(total=study.total, desc="experiment", unit="run", progress=progress)
    n_jobs = study_opts.n_jobs
    with use_scheduler(study_opts.scheduler, problem if isinstance(problem, Model) else None, workers(n_jobs)):
        run_tasks(
            partial(_replicate, job),
            specs,
            n_jobs,
            done=done,
            count=lambda out: len(out[1]),
            bar=bar,
            report=study,
            name="study",
            close=lambda: study.sink.close() if study.sink is not None else None,
        )
    return study


def _check_methods(
    problem: Any,
    methods: dict[str, str | External],
    options: dict[str, dict[str, Any]],
    select: str | None,
    select_options: dict[str, Any] | None,
) -> SelectOptions | None:
    """Every method's options and the way k is chosen, checked before anything runs; the options
    of the selection (None without ``select``)."""
    if isinstance(problem, Model):
        from .session import _refuse_bad_models

        _refuse_bad_models(problem)
    for name in options:
        if name not in methods or isinstance(methods[name], External):
            raise MetricError(f"options were given for {name!r}, which is not among the compared solvers")
    for name, m in methods.items():
        if not isinstance(m, External):
            get_solver(m).validate(options.get(name, {}))
    if select is not None and select not in SELECT_BY:
        raise MetricError(f"select={select!r} is not a way to choose k", hint=f"choose one of: {', '.join(SELECT_BY)}")
    if select is None and select_options:
        raise MetricError("select_options= needs select= (cv, ebic, bic, ...)")
    if select is not None:
        bad = [n for n, m in methods.items() if isinstance(m, External) and not m.chooses_k]
        if bad:
            raise MetricError(
                f"{bad[0]} is an outside method that needs k; with select= every method chooses its own k",
                hint="give it chooses_k=True (fit(data, test) choosing its own k), or compare over k",
            )
    if select is not None and isinstance(problem, Model):  # refused before anything runs
        try:
            sample_view(problem).term()
        except SelectionError as exc:
            raise SelectionError(
                f"select={select}: {exc.message}",
                problem.objective.span,
                "compare over k with held-out data and keep each replication's best k "
                "(Study.best('test_loss')), as benchmarks/precision_synthetic.py does",
            ) from None
    return SelectOptions.of({**(select_options or {}), "by": select}) if select is not None else None


def _how(problem: Any, made: Replications, over_names: list[str], study: StudyOptions) -> str:
    """The replications in words (the study's header), each way of making them checked against
    the others."""
    data, reps, splits, test, truth = made.data, made.reps, made.splits, study.test, study.truth
    if data is not None:
        if splits is not None or test is not None or truth is not None:
            raise MetricError(
                "data= draws every replication (its data, truth and held-out data); splits=, test= and truth= "
                "are for the model's own data",
                hint="return (data, truth, test) from the generator instead",
            )
        if reps is None or isinstance(reps, bool) or not isinstance(reps, numbers.Integral) or reps < 1:
            raise MetricError(f"reps={reps!r}: data= needs a number of replications >= 1")
        how = f"{reps} draws of {getattr(data, '__name__', 'the generator')}" + (
            f" at each {', '.join(over_names)}" if over_names else ""
        )
    else:
        if not isinstance(problem, Model):
            raise MetricError("a problem given as a function needs data= to draw the data it is built from")
        if reps is not None:
            raise MetricError(
                "reps= counts the draws of data=; to repeat random splits of the model's rows use splits="
            )
        if splits is not None and test is not None:
            raise MetricError("give held-out data (test=) or random splits of the model's rows (splits=), not both")
        how = "the model's data"
        if splits is not None:
            kind = "stratified " if made.stratify is not False and class_labels(problem) is not None else ""
            how = f"{splits} {kind}random splits, {made.test_size:g} held out"
    return how


def _methods(solvers: Any) -> tuple[list[str], dict[str, str | External]]:
    if isinstance(solvers, (str, External)):
        solvers = [solvers]
    if isinstance(solvers, dict):
        items = list(solvers.items())
    else:
        items = [(s.name if isinstance(s, External) else s, s) for s in solvers]
    if not items:
        raise MetricError("no methods to compare", hint="give solver names, e.g. ['grahtp', 'lasso']")
    out: dict[str, str | External] = {}
    for label, m in items:
        if not isinstance(label, str) or not isinstance(m, (str, External)):
            raise MetricError(f"{m!r} is not a solver name or an External method")
        if label in out:
            raise MetricError(f"the method {label!r} is listed twice", hint="list each method once")
        if isinstance(m, str):
            get_solver(m)  # an unknown name is refused before anything runs
        out[label] = m
    return list(out), out


def _grid(over: Any, data: Any) -> tuple[list[str], list[dict[str, Any]]]:
    if over is None:
        return [], [{}]
    if data is None:
        raise MetricError("over= varies a parameter of the data generator; it needs data=")
    if not isinstance(over, dict) or not over:
        raise MetricError("over= must be a dict of parameter names to values, e.g. over={'n': [100, 200]}")
    names = list(over)
    values = [list(v) if not isinstance(v, (str, bytes)) and isinstance(v, Iterable) else [v] for v in over.values()]
    points = [{}]
    for name, vals in zip(names, values):
        if not vals:
            raise MetricError(f"over={{{name!r}: ...}} has no values")
        points = [{**p, name: v} for p in points for v in vals]
    return names, points


def _draw(out: Any) -> tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any] | None]:
    if isinstance(out, dict):
        return out, None, None
    if isinstance(out, tuple) and 1 <= len(out) <= 3 and all(o is None or isinstance(o, dict) for o in out):
        parts = list(out) + [None] * (3 - len(out))
        if parts[0] is not None:
            return parts[0], parts[1], parts[2]
    raise MetricError(
        f"the data generator returned {type(out).__name__}",
        hint="return the data by name, {'X': X, 'y': y}, or (data, truth) or (data, truth, test) with the true "
        "values by variable name and held-out data by data name",
    )


def _build(problem: Any, values: dict[str, Any], flag: str) -> Model:
    if isinstance(problem, Model):
        return with_data(problem, values, flag)
    try:
        out = problem(**values)
    except TypeError as exc:
        params = ", ".join(inspect.signature(problem).parameters) if callable(problem) else "?"
        raise MetricError(
            f"{flag}: building the problem from {', '.join(sorted(values))} failed: {exc}",
            hint=f"the problem function takes ({params}); the generator must return data under those names",
        ) from None
    if not isinstance(out, Model):
        raise MetricError(f"the problem function returned {type(out).__name__}, not a Problem")
    return out


def _specs(problem: Any, points: list[dict[str, Any]], made: Replications) -> list[tuple[Any, ...]]:
    """What makes each replication, small enough to send to a worker: a draw's index, design point
    and generator seed ``[seed, j, r]``; a split's index and rows; or the model's data as it is.
    The replication itself is built where it runs (:func:`_replication`)."""
    if made.data is not None:
        each = int(made.reps or 1)
        return [(j * each + r, point, (j, r)) for j, point in enumerate(points) for r in range(each)]
    if made.splits is None:
        return [(0, {}, None)]
    n = sample_view(problem).term().n
    lab = class_labels(problem) if made.stratify is not False else None
    if made.stratify and lab is None:
        raise MetricError(
            "stratify=True needs class labels: a logistic loss of +-1 labels or a softmax of one-hot labels",
            hint="drop stratify, or write the loss with labels",
        )
    pairs = holdout_splits(n, made.splits, made.test_size, made.seed, lab[0] if lab else None, lab[1] if lab else None)
    return [(i, {}, (tr, te)) for i, (tr, te) in enumerate(pairs)]


@dataclass
class _Job:
    """What every replication of one experiment shares (sent with each task to a worker)."""

    problem: Any
    made: Replications
    test: Any
    truth: Any
    methods: dict[str, Any]
    ks: Any
    select: str | None
    options: dict[str, dict[str, Any]]
    choose: SelectOptions | None
    over_names: list[str]


def _replication(job: _Job, spec: tuple[Any, ...]) -> Replication:
    """The replication of ``spec`` (see :func:`_specs`): its data drawn from its own seed, or its
    rows of the model's data, whichever process builds it."""
    index, point, how = spec
    problem, made = job.problem, job.made
    if made.data is not None:
        j, r = how
        rng = np.random.default_rng(None if made.seed is None else [int(made.seed), j, r])
        values, tr, te = _draw(made.data(rng, **point))
        train = _build(problem, values, "the generator's data")
        held = None
        if te is not None:
            held = (
                HeldOut.of_data(train, te, "the generator's held-out data")
                if isinstance(problem, Model)
                else HeldOut.of_model(_build(problem, te, "the generator's held-out data"))
            )
        return Replication(index, point, train, held, tr, values, te)
    if how is None:
        test = job.test
        held = HeldOut.of_data(problem, test, origin(test, "test")) if test is not None else None
        return Replication(0, {}, problem, held, job.truth, rows_data(problem, None), test)
    tr, te = how
    return Replication(
        index, {}, train_model(problem, tr), HeldOut.of_rows(problem, te), job.truth, rows_data(problem, tr), None
    )


def _replicate(job: _Job, spec: tuple[Any, ...]) -> tuple[list[str], list[dict[str, Any]], str, list[str]]:
    """One task of the runner: build the replication, run every method on it; returns its columns,
    rows, the constraint's unit and the held-out data's notes."""
    rep = _replication(job, spec)
    rows, unit = _run_replication(rep, job.methods, job.ks, job.select, job.options, job.choose)
    notes = list(rep.held.notes) if rep.held is not None else []
    return _columns(job.over_names, job.select, rep, job.methods), rows, unit, notes


def _columns(over: list[str], select: str | None, rep: Replication, methods: dict[str, Any]) -> list[str]:
    metric = (rep.held.columns if rep.held is not None else []) + (list(TRUTH_METRICS) if rep.truth else [])
    cols = ["rep", *over, "solver", "k", "budget", "unit", *BASE, *metric]
    if any(isinstance(m, External) and m.chooses_k for m in methods.values()):
        cols.insert(cols.index("time_s") + 1, "time_total")
    if select is not None:
        cols.insert(cols.index("k") + 1, "by")
        cols.append("penalty")
    return cols + list(TAIL)


def _run_replication(
    rep: Replication,
    methods: dict[str, str | External],
    ks: list[int | None] | None,
    select: str | None,
    options: dict[str, dict[str, Any]],
    choose: SelectOptions | None,
) -> tuple[list[dict[str, Any]], str]:
    """The rows of every method on one replication, and the constraint's unit; :func:`tick` per
    run (compare's runs tick by themselves), so that a serial study's bar moves run by run."""
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    lp = LoweredProblem(rep.train)
    _warm_up(lp, [])  # the caches every solver of the replication shares (not charged to the first one)
    lower_s = time.perf_counter() - t0
    truth = Truth(rep.train, lp, rep.truth, origin(rep.truth, "truth")) if rep.truth is not None else None
    if callable(ks):  # k relative to the truth: k(t), t the number of true units of this replication
        if truth is None or truth.n_true is None:
            raise MetricError(
                "k= as a function reads the number of true units of each replication; this one has no truth of "
                "the constrained variable",
                hint="return (data, truth) from the generator, or give k as numbers",
            )
        ks = bounds_of(ks(truth.n_true))
    scorer = Scorer(rep.held, truth) if (rep.held is not None or truth is not None) else None
    unit = lp.set.unit if lp.set is not None else ""
    base = {"rep": rep.index, **rep.point, "lower_s": lower_s}
    names = [n for n, m in methods.items() if isinstance(m, str)]
    if select is None:
        sl = [methods[n] for n in names]
        if sl:
            comp = compare(
                rep.train,
                sl,
                k=ks,
                options={methods[n]: o for n, o in options.items()},
                progress=False,
                scorer=scorer,
                lowered=lp,
            )
            for r in comp.rows:
                label = names[sl.index(r["solver"])]
                rows.append({**base, **r, "solver": label, "k": r["k"] if r["k"] is not None else r["budget"]})
        for label, m in methods.items():
            if isinstance(m, External):  # one run per k, or one run choosing its own k
                for kv in [None] if m.chooses_k else ks or [lp.budget]:
                    rows.append({**base, **_external(m, rep, lp, scorer, kv), "solver": label})
                tick(1 if m.chooses_k else len(ks or [lp.budget]))
        return rows, unit
    from .select import run_select
    from .session import solver_class

    for label, m in methods.items():
        if isinstance(m, External):
            rows.append({**base, **_external(m, rep, lp, scorer, None), "solver": label, "by": "own"})
            tick(1)
            continue
        t1 = time.perf_counter()
        try:
            sel = run_select(rep.train, lp, solver_class(lp, m), ks, options.get(label, {}), choose, scorer=scorer)
        except ModelError as exc:
            rows.append(
                {
                    **base,
                    "solver": label,
                    "by": select,
                    "status": ERROR,
                    "time_s": time.perf_counter() - t1,
                    "message": exc.message + (f" ({exc.hint})" if exc.hint else ""),
                }
            )
            tick(1)
            continue
        elapsed = time.perf_counter() - t1
        res = sel.result
        at = next(r for r in sel.curve if r["k"] == sel.k)
        rows.append(
            {
                **base,
                **{c: at.get(c) for c in at if c not in ("value", "se", "loss")},
                "solver": label,
                "k": sel.k,
                "by": select,
                "budget": res.k,
                "unit": res.unit,
                "objective": float(res.objective),
                "status": res.status,
                "time_s": elapsed,
                "iterations": int(res.iterations),
                "penalty": res.extra.get("lambda"),
                **support_cells(res),
                "message": (f"stopped early: {sel.stopped}" if sel.stopped else "") or res.message,
            }
        )
        tick(1)
    return rows, unit


def _external_bound(lp: LoweredProblem, x: np.ndarray, f: float) -> dict[str, float | None]:
    """The fast lower bound at an outside method's answer (any point gives a valid dual point), and
    its gap: how far abess's answer can be from the best subset. None where no bound exists."""
    from ..lowering.bound import lower_bound
    from ..solvers.result import relative_gap

    if not math.isfinite(f):
        return bound_cells(None)
    lb = lower_bound(lp, x, "fast").value
    if lb is None or not math.isfinite(lb):
        return bound_cells(None)
    lb = min(float(lb), float(f))
    return {"lower_bound": lb, "gap": relative_gap(float(f), lb)}


class _Values:
    """What a scorer reads of an outside method's answer: its values by variable name."""

    def __init__(self, values: dict[str, Any]):
        self.values = values


def _external(
    m: External, rep: Replication, lp: LoweredProblem, scorer: Scorer | None, kv: int | None
) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        if isinstance(m, Selector):
            out = m.refit(rep.train, lp, rep.index)
        else:
            out = m.fit(rep.data, rep.test_data) if m.chooses_k else m.fit(rep.data, kv)
    except ModelError as exc:  # a selector refused this replication's model: said in its row
        return {"k": kv, "status": ERROR, "time_s": time.perf_counter() - t0, "message": exc.message}
    except Exception as exc:  # an outside library's failure is that run's, not the study's
        return {"k": kv, "status": ERROR, "time_s": time.perf_counter() - t0, "message": f"{type(exc).__name__}: {exc}"}
    elapsed = time.perf_counter() - t0
    info: dict[str, Any] = {}
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict):
        out, info = out
        unknown = sorted(set(info) - set(EXTERNAL_INFO))
        if unknown:
            raise MetricError(
                f"the outside method {m.name} returned {unknown[0]!r}", hint=f"it may add: {', '.join(EXTERNAL_INFO)}"
            )
    if isinstance(out, dict):
        values = out
    else:
        var = lp.set.constraint.variable if lp.set is not None else rep.train.variables[0]
        values = {var.name: out}
    try:
        x = clean(lp, lp.layout.pack(values))
    except ValueError as exc:
        return {
            "k": kv,
            "status": ERROR,
            "time_s": elapsed,
            "message": f"{m.name} returned values of the wrong shape: {exc}",
        }
    from .metrics import _units

    units = len(_units(lp.set, x)) if coordinate(lp.set) else None
    f = lp.fresh().oracle.f(x)
    row = {
        # a selector's replications form one group (its FDR is their mean): the units it chose are nnz
        "k": kv if kv is not None else (None if isinstance(m, Selector) else units),
        "budget": kv,
        "unit": lp.set.unit if lp.set is not None else "",
        "objective": float(f) if math.isfinite(f) else None,
        **_external_bound(lp, x, f),
        "nnz": int(np.count_nonzero(x[lp.set.coords])) if coordinate(lp.set) else None,
        "df": dof(lp, x),
        "status": "selected" if isinstance(m, Selector) else "external",
        "time_s": elapsed,
        "iterations": None,
        **point_support_cells(lp, x),
    }
    if m.chooses_k:
        row["time_total"] = elapsed  # its whole choice; time_s may be the chosen fit's (info)
    row.update(info)
    if scorer is not None:
        row.update(scorer.score(lp, _Values(lp.layout.unpack(x))))
    return row


__all__ = ["External", "Selector", "Study", "experiment"]
