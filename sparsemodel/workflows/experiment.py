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
of the means and counted in ``errors``.
"""

from __future__ import annotations

import csv
import inspect
import io
import json
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
from ..outputs import RowSink, check_output, protected_paths, write_output
from ..progress import progress_bar
from ..solvers import get_solver
from ..util import jsonable, k_header
from .compare import ERROR, _ks, _warm_up, compare, support_cells
from .metrics import (
    HIGHER_IS_BETTER,
    METRICS,
    HeldOut,
    MetricError,
    Scorer,
    Truth,
    class_labels,
    clean,
    coordinate,
    dof,
    holdout_splits,
    metric_names,
    origin,
    rows_data,
    train_model,
    with_data,
)

SELECT_BY = ("cv", "ebic", "aic", "bic", "ebic_cc", "gic")
BASE = ("objective", "nnz", "df", "status", "time_s", "iterations", "lower_s")
TAIL = ("support", "support_names", "message")
EXTERNAL_INFO = ("time_s", "penalty", "iterations", "message")  # what an outside method may report
NUMERIC = ("k", "objective", "nnz", "df", "time_s", "iterations", "lower_s", "penalty", "time_total")


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


# ====================================================================== the tidy table


def _mean_se(vals: list[float]) -> tuple[float, float]:
    v = [float(x) for x in vals if x is not None and math.isfinite(float(x))]
    if not v:
        return math.nan, math.nan
    m = math.fsum(v) / len(v)
    if len(v) < 2:
        return m, math.nan
    var = math.fsum((x - m) ** 2 for x in v) / (len(v) - 1)
    return m, math.sqrt(var / len(v))


def summarize(rows: list[dict[str, Any]], metrics: list[str], by: list[str]) -> list[dict[str, Any]]:
    """Per group of ``by`` (in order of first appearance): runs, errors, and for every metric its
    mean and standard error over the runs that finished (``{m}`` and ``{m}_se``)."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r.get(b) for b in by), []).append(r)
    out = []
    for key, rs in groups.items():
        ok = [r for r in rs if r.get("status") != ERROR]
        entry: dict[str, Any] = dict(zip(by, key))
        entry["runs"] = len(ok)
        entry["errors"] = len(rs) - len(ok)
        for m in metrics:
            entry[m], entry[f"{m}_se"] = _mean_se([r.get(m) for r in ok])
        out.append(entry)
    return out


class Tidy(list):
    """The tidy table without pandas: a list of dict rows (one per replication, method and k),
    with the summaries of :class:`Study` under the same names (``summary``, ``mean``, ``se``)."""

    def __init__(self, rows: Iterable[dict[str, Any]], groups: list[str], metrics: list[str]):
        super().__init__(rows)
        self.groups = groups
        self.metric_names = metrics

    @property
    def columns(self) -> list[str]:
        return list(self[0]) if self else []

    def summary(self, metrics: Any = None, by: Any = None) -> Tidy:
        ms = metric_names(metrics, self.metric_names) if metrics is not None else self.metric_names
        keys = list(by) if by is not None else self.groups
        return Tidy(summarize(list(self), ms, keys), keys, ms)

    def mean(self, metric: str, by: Any = None) -> dict[Any, float]:
        return _column(self.summary([metric], by), metric, by or self.groups)

    def se(self, metric: str, by: Any = None) -> dict[Any, float]:
        return _column(self.summary([metric], by), f"{metric}_se", by or self.groups)


def _column(summary: list[dict[str, Any]], col: str, by: Any) -> dict[Any, float]:
    keys = [by] if isinstance(by, str) else list(by)
    out = {}
    for e in summary:
        key = tuple(e[b] for b in keys)
        out[key[0] if len(key) == 1 else key] = e[col]
    return out


def _frame(rows: list[dict[str, Any]], columns: list[str]) -> Any:
    """A pandas DataFrame of the rows (None when pandas is not installed)."""
    try:
        import pandas as pd
    except ImportError:
        return None
    return pd.DataFrame([{c: r.get(c) for c in columns} for r in rows], columns=columns)


class Study:
    """The outcome of :func:`experiment`: ``rows`` (one dict per replication, method and k),
    ``tidy`` (a pandas DataFrame when pandas is installed, else a :class:`Tidy` list), the means
    and standard errors (``summary``, ``mean``, ``se``), ``best`` (each replication's method at its
    best k for a metric), a table, CSV, JSON and plots with error bars."""

    def __init__(
        self,
        problem: Any,
        solvers: list[str],
        columns: list[str],
        over: list[str],
        select: str | None,
        meta: dict[str, Any],
    ):
        self.source = getattr(problem, "source", "<python>") if isinstance(problem, Model) else "<function>"
        self.solvers = solvers
        self.columns = columns
        self.over = over
        self.select = select
        self.meta = meta
        self.rows: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.protected = protected_paths(problem) if isinstance(problem, Model) else []
        self.sink: RowSink | None = None
        self.interrupted = False
        self.total = 0
        self.unit = ""

    # ------------------------------------------------------------------ the table
    def _add(self, row: dict[str, Any]) -> None:
        row = {c: row.get(c) for c in self.columns}
        self.rows.append(row)
        if self.sink is not None:
            self.sink.write(row)

    @property
    def metrics(self) -> list[str]:
        """The numeric columns: what summaries average and plots show."""
        return [c for c in self.columns if c in NUMERIC or (c in METRICS and c not in ("status",))]

    @property
    def groups(self) -> list[str]:
        """The default grouping of the summaries: the design values, k (unless chosen), the method."""
        return [*self.over, *([] if self.select else ["k"]), "solver"]

    @property
    def reps(self) -> int:
        """Replications per method and k (per design value with ``over``)."""
        return int(self.meta.get("reps_each") or len({r["rep"] for r in self.rows}))

    @property
    def tidy(self) -> Any:
        """The rows as a pandas DataFrame, or a :class:`Tidy` list without pandas."""
        df = _frame(self.rows, self.columns)
        return df if df is not None else Tidy(self.rows, self.groups, self.metrics)

    def summary(self, metrics: Any = None, by: Any = None) -> Any:
        """Mean and standard error of each metric (default: every numeric column) per group
        (default :attr:`groups`), with the runs and errors: a DataFrame when pandas is installed,
        else a :class:`Tidy` list of dicts with the same columns."""
        ms = metric_names(metrics, self.metrics) if metrics is not None else self.metrics
        keys = list(by) if by is not None else self.groups
        rows = summarize(self.rows, ms, keys)
        cols = keys + ["runs", "errors"] + [c for m in ms for c in (m, f"{m}_se")]
        df = _frame(rows, cols)
        return df if df is not None else Tidy(rows, keys, ms)

    def mean(self, metric: str, by: Any = None) -> dict[Any, float]:
        """{group: mean of ``metric``}, groups as in :meth:`summary` (a single key is the value itself)."""
        keys = list(by) if by is not None else self.groups
        return _column(summarize(self.rows, metric_names([metric], self.metrics), keys), metric, keys)

    def se(self, metric: str, by: Any = None) -> dict[Any, float]:
        """{group: standard error of the mean of ``metric``} (NaN with a single replication)."""
        keys = list(by) if by is not None else self.groups
        return _column(summarize(self.rows, metric_names([metric], self.metrics), keys), f"{metric}_se", keys)

    def where(self, **conditions: Any) -> Study:
        """The study restricted to the rows whose columns have these values (``where(k=50)``)."""
        for c in conditions:
            if c not in self.columns:
                raise MetricError(f"where({c}=...): {c!r} is not a column", hint=f"columns: {', '.join(self.columns)}")
        out = Study.__new__(Study)
        out.__dict__.update(self.__dict__)
        out.rows = [r for r in self.rows if all(r[c] == v for c, v in conditions.items())]
        out.sink = None
        return out

    def median(self, metric: str, by: Any = None) -> dict[Any, float]:
        """{group: median of ``metric``} over the runs that finished (times: quote medians)."""
        keys = list(by) if by is not None else self.groups
        metric_names([metric], self.metrics)
        groups: dict[Any, list[float]] = {}
        for r in self.rows:
            if r["status"] != ERROR and r.get(metric) is not None:
                key = tuple(r[b] for b in keys)
                groups.setdefault(key[0] if len(key) == 1 else key, []).append(float(r[metric]))
        return {g: float(np.median(v)) for g, v in groups.items()}

    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["status"] == ERROR]

    def best(self, metric: str, minimize: bool | None = None) -> Study:
        """Each replication's method at its best k for ``metric`` (the lowest, or the highest for
        precision, recall, f1 and the recovery rates; ``minimize`` overrides): k chosen on a
        held-out set, as a validation protocol does. ``time_total`` is the time of every k the
        choice looked at."""
        metric_names([metric], self.metrics)
        low = metric not in HIGHER_IS_BETTER if minimize is None else minimize
        cols = list(self.columns)
        if "time_total" not in cols:
            cols.insert(cols.index("time_s") + 1, "time_total")
        out = Study.__new__(Study)
        out.__dict__.update(self.__dict__)
        out.columns, out.select, out.rows, out.sink = cols, f"best {metric}", [], None
        groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        for r in self.rows:
            groups.setdefault((r["rep"], *(r[o] for o in self.over), r["solver"]), []).append(r)
        for rs in groups.values():
            ok = [r for r in rs if r["status"] != ERROR and r.get(metric) is not None]
            own = [r["time_total"] for r in rs if r.get("time_total") is not None]  # an outside method's own
            total = math.fsum(own) if own else math.fsum(r["time_s"] for r in rs if r.get("time_s") is not None)
            if not ok:
                out.rows.append({**{c: rs[0].get(c) for c in cols}, "status": ERROR, "time_total": total})
                continue
            pick = min(ok, key=lambda r: r[metric] if low else -r[metric])
            out.rows.append({**{c: pick.get(c) for c in cols}, "time_total": total})
        return out

    # ------------------------------------------------------------------ reports
    def _x(self, x: str | None) -> str | None:
        """The x axis of plots: ``x``, else k (several k), else the design value, else None (the
        methods themselves, side by side)."""
        if x is not None:
            if x not in self.columns or x in ("solver",):
                raise MetricError(f"x={x!r} is not a column to plot against", hint=f"columns: {', '.join(self.groups)}")
            return x
        if not self.select and len({r["k"] for r in self.rows}) > 1:
            return "k"
        if self.over:
            return self.over[0]
        return None if self.select else "k"

    def table(self, fmt: str = "simple", metrics: Any = None) -> str:
        """Mean ± standard error of every metric (columns) per group (rows), then the failures."""
        from tabulate import tabulate

        ms = metric_names(metrics, self.metrics) if metrics is not None else self.default_metrics()
        summ = summarize(self.rows, ms, self.groups)
        reps = self.reps
        head = [(k_header(self.unit) if g == "k" and self.unit else g) for g in self.groups]
        head += ["runs"] + [("k chosen" if m == "k" else m) for m in ms]
        body = []
        for e in summ:
            line = [e[g] for g in self.groups] + [f"{e['runs']}" + (f" ({e['errors']} failed)" if e["errors"] else "")]
            for m in ms:
                mu, se = e[m], e[f"{m}_se"]
                if not math.isfinite(mu):
                    line.append("-")
                elif reps > 1 and math.isfinite(se):
                    line.append(f"{mu:.4g} ± {se:.2g}")
                else:
                    line.append(f"{mu:.4g}")
            body.append(line)
        what = (
            f"each method at the k it chose by {self.select}" if self.select else "mean ± standard error"
        ) + f" over {reps} replication{'s' if reps != 1 else ''} ({self.meta.get('replications', '')})"
        parts = [what, tabulate(body, headers=head, tablefmt=fmt, disable_numparse=True)]
        parts += [f"note: {n}" for n in self.notes]
        errors = self.failed()
        if errors:
            shown = {}
            for r in errors:
                shown.setdefault((r["solver"], r["message"]), []).append(r)
            parts += ["", f"failed runs ({len(errors)})"]
            for (s, msg), rs in list(shown.items())[:10]:
                where = ", ".join(sorted({f"k={r['k']}" for r in rs if r["k"] is not None}))
                parts.append(
                    f"  {s}{' at ' + where if where else ''} ({len(rs)} run{'s' if len(rs) > 1 else ''}): {msg}"
                )
        return "\n".join(parts)

    def default_metrics(self) -> list[str]:
        """What the table shows: the chosen k, the objective, df, the metrics asked for, the time."""
        skip = {"nnz", "iterations", "lower_s", "time_total"}
        return [m for m in self.metrics if m not in skip and (m != "k" or self.select)]

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return f"Study(solvers={self.solvers}, rows={len(self.rows)}, replications={self.reps}, errors={len(self.failed())})"

    def to_dict(self) -> dict[str, Any]:
        summ = summarize(self.rows, self.metrics, self.groups)
        return jsonable(
            {
                "source": self.source,
                "solvers": self.solvers,
                "select": self.select,
                "unit": self.unit,
                **self.meta,
                "columns": self.columns,
                "rows": self.rows,
                "summary": [
                    {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in e.items()}
                    for e in summ
                ],
                "notes": self.notes,
            }
        )

    def to_json(self, path: str | Path, overwrite: bool = False) -> Path:
        return write_output(
            path, json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n", self.protected, overwrite
        )

    def to_csv(self, path: str | Path, overwrite: bool = False) -> Path:
        """The tidy rows: one line per replication, method and k."""
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=self.columns, lineterminator="\n")
        w.writeheader()
        for r in self.rows:
            w.writerow(
                {c: ("" if r[c] is None else (repr(r[c]) if isinstance(r[c], float) else r[c])) for c in self.columns}
            )
        return write_output(path, buf.getvalue(), self.protected, overwrite)

    def plot(self, path: str | Path, overwrite: bool = False, metrics: Any = None, x: str | None = None) -> Path:
        """PNG: one panel per metric (default: the held-out loss, or the objective, and the time),
        the mean over replications with standard-error bars, one line per method."""
        from .path import png_bytes

        check_output(path, self.protected, overwrite)
        return write_output(path, png_bytes(self.figure(metrics, x)), self.protected, overwrite)

    def figure(self, metrics: Any = None, x: str | None = None) -> Any:
        from .figures import metric_figure

        if metrics is None:
            first = "test_loss" if "test_loss" in self.columns else ("f1" if "f1" in self.columns else "objective")
            metrics = [first, "time_s"] if not self.select else ["k", first, "time_s"]
        chosen = metric_names(metrics, self.metrics)
        xc = self._x(x)
        others = [g for g in self.groups if g not in (xc, "solver")]
        varying = [g for g in others if len({r[g] for r in self.rows}) > 1]
        summ = summarize(self.rows, chosen, [*varying, *([xc] if xc else []), "solver"])
        series: dict[str, dict[str, Any]] = {}
        for s in self.solvers:
            lines: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
            for e in summ:
                if e["solver"] == s:
                    lines.setdefault(tuple(e[g] for g in varying), []).append(e)
            for key, es in lines.items():
                label = s + (" (" + ", ".join(f"{g}={v}" for g, v in zip(varying, key)) + ")" if varying else "")
                xs = [e[xc] for e in es] if xc else [0]
                series[label] = {m: (xs, [e[m] for e in es], [e[f"{m}_se"] for e in es]) for m in chosen}
        name = Path(self.source).name if not self.source.startswith("<") else "study"
        what = f"each method at its k chosen by {self.select}" if self.select else "methods"
        title = f"{name}: {what}" + (f", mean ± se over {self.reps} replications" if self.reps > 1 else "")
        xlabel = (k_header(self.unit) if xc == "k" and self.unit else xc) or ""
        return metric_figure(series, chosen, xlabel, title, categorical=xc is None)

    def _repr_html_(self) -> str:
        from .path import report_html

        summ = summarize(self.rows, self.default_metrics(), self.groups)
        return report_html(summ, list(summ[0]) if summ else [], repr(self), self.figure())


# ====================================================================== running it


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
        from .select import SelectionError, data_term

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
    from .select import data_term

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
    metric = (["test_loss"] if rep.held is not None else []) + (
        ["precision", "recall", "f1", "exact", "exact_top", "covers", "fp", "fn", "error"] if rep.truth else []
    )
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


class _Values:
    """What a scorer reads of an outside method's answer: its values by variable name."""

    def __init__(self, values: dict[str, Any]):
        self.values = values


def _external(
    m: External, rep: Replication, lp: LoweredProblem, scorer: Scorer | None, kv: int | None
) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        out = m.fit(rep.data, rep.test_data) if m.chooses_k else m.fit(rep.data, kv)
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
        "k": kv if kv is not None else units,
        "budget": kv,
        "unit": lp.set.unit if lp.set is not None else "",
        "objective": float(f) if math.isfinite(f) else None,
        "nnz": int(np.count_nonzero(x[lp.set.coords])) if coordinate(lp.set) else None,
        "df": dof(lp, x),
        "status": "external",
        "time_s": elapsed,
        "iterations": None,
    }
    if m.chooses_k:
        row["time_total"] = elapsed  # its whole choice; time_s may be the chosen fit's (info)
    row.update(info)
    if scorer is not None:
        row.update(scorer.score(lp, _Values(lp.layout.unpack(x))))
    return row


__all__ = ["External", "Study", "Tidy", "experiment", "summarize"]
