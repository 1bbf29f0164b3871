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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelError
from ..lowering.lowered import LoweredProblem
from ..model.problem import Model
from ..outputs import RowSink, check_output
from ..progress import progress_bar
from ..solvers import get_solver
from .compare import ERROR, _ks, _warm_up, compare, point_support_cells, support_cells
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
from .study import Study

SELECT_BY = ("cv", "ebic", "aic", "bic", "ebic_cc", "gic")


BASE = ("objective", "lower_bound", "gap", "nnz", "df", "status", "time_s", "iterations", "lower_s")


TAIL = ("support", "support_names", "message")


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
class Selector(External):
    """A method that chooses its units itself, with an error guarantee: the inference layer's
    knockoff filter and stability selection (:mod:`sparsemodel.inference.methods`), run on the same
    replications as the solvers. :meth:`select` returns the chosen units of the problem's
    constraint set (and what to report: ``time_s``, ``message``); the row's point is the model
    refitted on them (a restricted solve), so every metric of a solution applies, and with a truth
    its ``fdr`` and ``power``. Each replication gets its own seed, drawn from (``seed``, its index)."""

    fit: Any = None
    chooses_k: bool = True
    seed: int | None = 0

    def select(self, problem: Model, lp: LoweredProblem, seed: int) -> tuple[np.ndarray, dict[str, Any]]:
        raise NotImplementedError  # pragma: no cover - every selector defines it

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
    data: Callable[..., Any] | None = None,
    reps: int | None = None,
    over: dict[str, Iterable[Any]] | None = None,
    splits: int | None = None,
    test_size: float = 0.3,
    seed: int | None = 0,
    stratify: bool | None = None,
    select: str | None = None,
    test: dict[str, Any] | None = None,
    truth: dict[str, Any] | None = None,
    options: dict[str, dict[str, Any]] | None = None,
    select_options: dict[str, Any] | None = None,
    progress: bool | None = None,
    csv: str | Path | None = None,
    overwrite: bool = False,
) -> Study:
    """Compare ``solvers`` over replications (see the module docstring); returns a :class:`Study`.

    ``k``: the bounds to compare at (default: the model's own), or with ``select`` the candidates
    (default: select's range); a function ``k(t)`` of the number t of true units of each
    replication gives bounds relative to the truth (``lambda t: [t // 2, t, 2 * t]``).
    ``data``/``reps``/``over``: replications drawn by a generator; ``splits``/``test_size``/
    ``stratify`` (default: stratified for classification losses): random splits of the model's
    rows; ``seed`` fixes both. ``test``/``truth``: held-out data and true
    values for the model as it is (or every split). ``options``: per-solver options;
    ``select_options``: ``folds``, ``rule``, ``gamma``, ``start``, ``early_stop``, ``patience``,
    ``margin`` of the selection. ``csv``: the tidy rows are written there as they finish."""
    if isinstance(problem, Model):
        from .session import _refuse_bad_models

        _refuse_bad_models(problem)
    labels, methods = _methods(solvers)
    options = dict(options or {})
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
        from .criteria import SelectionError, data_term

        try:
            data_term(problem, LoweredProblem(problem))
        except SelectionError as exc:
            raise SelectionError(
                f"select={select}: {exc.message}",
                problem.objective.span,
                "compare over k with held-out data and keep each replication's best k "
                "(Study.best('test_loss')), as benchmarks/precision_synthetic.py does",
            ) from None
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
        raise MetricError(f"seed={seed!r} must be an integer (or None)")
    ks: Any = _ks(k) if k is not None and not callable(k) else k
    over_names, points = _grid(over, data)
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
            kind = "stratified " if stratify is not False and class_labels(problem) is not None else ""
            how = f"{splits} {kind}random splits, {test_size:g} held out"
    reps_iter = _replications(problem, data, reps, points, splits, test_size, seed, stratify, test, truth)
    study = Study(
        problem,
        labels,
        [],
        over_names,
        select,
        {
            "replications": how,
            "reps_each": int(reps) if data is not None else int(splits or 1),
            "seed": seed,
            "test_size": test_size if splits else None,
        },
    )
    n_reps = int(reps) * len(points) if data is not None else int(splits or 1)
    if select or not callable(ks):
        one = sum(
            1 if select or (isinstance(m, External) and m.chooses_k) else len(ks or [None]) for m in methods.values()
        )
        study.total = n_reps * one
    else:
        study.total = None  # k depends on each replication's truth
    if csv is not None:
        check_output(csv, study.protected, overwrite)  # before anything runs
    first = True
    bar = progress_bar(total=study.total, desc="experiment", unit="run", progress=progress)
    try:
        for rep in reps_iter:
            if first:
                study.columns = _columns(over_names, select, rep, methods)
                if csv is not None:
                    study.sink = RowSink(csv, study.columns, study.protected, overwrite)
                first = False
            _run_replication(study, rep, methods, ks, select, options, dict(select_options or {}), bar)
            for n in rep.held.notes if rep.held is not None else []:
                if n not in study.notes:
                    study.notes.append(n)
    except KeyboardInterrupt as exc:
        study.interrupted = True
        exc.study = study  # type: ignore[attr-defined]
        raise
    finally:
        bar.close()
        if study.sink is not None:
            study.sink.close()
    return study


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


def _replications(
    problem: Any,
    data: Any,
    reps: int | None,
    points: list[dict[str, Any]],
    splits: int | None,
    test_size: float,
    seed: int | None,
    stratify: bool | None,
    test: Any,
    truth: Any,
) -> Iterable[Replication]:
    """The replications, built one at a time (a draw's data is made when its turn comes)."""
    if data is not None:
        i = 0
        for j, point in enumerate(points):
            for r in range(int(reps or 1)):
                rng = np.random.default_rng(None if seed is None else [int(seed), j, r])
                values, tr, te = _draw(data(rng, **point))
                train = _build(problem, values, "the generator's data")
                held = None
                if te is not None:
                    held = (
                        HeldOut.of_data(train, te, "the generator's held-out data")
                        if isinstance(problem, Model)
                        else HeldOut.of_model(_build(problem, te, "the generator's held-out data"))
                    )
                yield Replication(i, point, train, held, tr, values, te)
                i += 1
        return
    if splits is None:
        held = HeldOut.of_data(problem, test, origin(test, "test")) if test is not None else None
        yield Replication(0, {}, problem, held, truth, rows_data(problem, None), test)
        return
    from .criteria import data_term

    n = data_term(problem, LoweredProblem(problem)).n
    lab = class_labels(problem) if stratify is not False else None
    if stratify and lab is None:
        raise MetricError(
            "stratify=True needs class labels: a logistic loss of +-1 labels or a softmax of one-hot labels",
            hint="drop stratify, or write the loss with labels",
        )
    pairs = holdout_splits(n, splits, test_size, seed, lab[0] if lab else None, lab[1] if lab else None)
    for i, (tr, te) in enumerate(pairs):
        yield Replication(
            i, {}, train_model(problem, tr), HeldOut.of_rows(problem, te), truth, rows_data(problem, tr), None
        )


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
    study: Study,
    rep: Replication,
    methods: dict[str, str | External],
    ks: list[int | None] | None,
    select: str | None,
    options: dict[str, dict[str, Any]],
    select_options: dict[str, Any],
    bar: Any,
) -> None:
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
        ks = _ks(ks(truth.n_true))
    scorer = Scorer(rep.held, truth) if (rep.held is not None or truth is not None) else None
    if lp.set is not None and not study.unit:
        study.unit = lp.set.unit
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
                study._add({**base, **r, "solver": label, "k": r["k"] if r["k"] is not None else r["budget"]})
                bar.update(1)
        for label, m in methods.items():
            if isinstance(m, External):  # one run per k, or one run choosing its own k
                for kv in [None] if m.chooses_k else ks or [lp.budget]:
                    study._add({**base, **_external(m, rep, lp, scorer, kv), "solver": label})
                bar.update(1 if m.chooses_k else len(ks or [lp.budget]))
        return
    from .select import run_select
    from .session import solver_class

    for label, m in methods.items():
        if isinstance(m, External):
            study._add({**base, **_external(m, rep, lp, scorer, None), "solver": label, "by": "own"})
            bar.update(1)
            continue
        t1 = time.perf_counter()
        try:
            sel = run_select(
                rep.train,
                lp,
                solver_class(lp, m),
                ks,
                by=select,
                options=options.get(label, {}),
                scorer=scorer,
                **select_options,
            )
        except ModelError as exc:
            study._add(
                {
                    **base,
                    "solver": label,
                    "by": select,
                    "status": ERROR,
                    "time_s": time.perf_counter() - t1,
                    "message": exc.message + (f" ({exc.hint})" if exc.hint else ""),
                }
            )
            bar.update(1)
            continue
        elapsed = time.perf_counter() - t1
        res = sel.result
        at = next(r for r in sel.curve if r["k"] == sel.k)
        study._add(
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
        bar.update(1)


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
