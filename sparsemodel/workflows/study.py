"""The outcome of :func:`sparsemodel.workflows.experiment.experiment`: a :class:`Study`, the tidy
table of its rows (one per replication, method and k, every metric a column; a pandas DataFrame
when pandas is installed, else a :class:`Tidy` list), the means and standard errors
(:func:`summarize`: std / sqrt(replications), failed runs left out and counted), the best k per
replication, the table, CSV, JSON and plots with error bars."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..model.problem import Model
from ..outputs import RowSink, check_output, protected_paths, write_output
from ..sets.units import k_header
from ..util import jsonable
from .metrics import (
    HIGHER_IS_BETTER,
    METRICS,
    MetricError,
    metric_names,
)
from .report import ERROR, Report, report_html

NUMERIC = ("k", "objective", "nnz", "df", "time_s", "iterations", "lower_s", "penalty", "time_total")


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


def paired_differences(
    rows: list[dict[str, Any]], metrics: list[str], by: list[str], baseline: str, solvers: list[str]
) -> list[dict[str, Any]]:
    """Per group of ``by`` (the design values and k; not the method) and per method other than
    ``baseline``: the mean over replications of the paired difference d_r = m_r(method) -
    m_r(baseline) of each metric, on the replications (``rep``) where both ran without error and
    both have the metric, and its standard error sd(d) / sqrt(pairs) (``{m}`` and ``{m}_se``);
    ``pairs`` counts the replications where both ran. The methods share each replication's data,
    so the difference varies less than either method's own mean: this is the paired comparison."""
    cells: dict[tuple[Any, ...], dict[str, dict[Any, dict[str, Any]]]] = {}
    for r in rows:
        if r.get("status") == ERROR:
            continue
        key = tuple(r.get(b) for b in by)
        cells.setdefault(key, {}).setdefault(r["solver"], {})[r["rep"]] = r
    out = []
    for key, by_method in cells.items():
        base = by_method.get(baseline, {})
        for s in solvers:
            if s == baseline or s not in by_method:
                continue
            reps = [rep for rep in by_method[s] if rep in base]
            entry: dict[str, Any] = {**dict(zip(by, key)), "solver": s, "baseline": baseline, "pairs": len(reps)}
            for m in metrics:
                d = []
                for rep in reps:
                    a, b = by_method[s][rep].get(m), base[rep].get(m)
                    if a is not None and b is not None:
                        d.append(float(a) - float(b))
                entry[m], entry[f"{m}_se"] = _mean_se(d)
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


class Study(Report):
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
        self.baseline = solvers[0] if solvers else None  # the method the paired differences are against

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

    def paired(self, metrics: Any = None, baseline: str | None = None, by: Any = None) -> Any:
        """Paired differences against ``baseline`` (default :attr:`baseline`, the first method):
        per group (default: the design values and k) and method, the mean over the replications of
        each metric's difference method - baseline on the same replication, its standard error
        sd / sqrt(pairs) and the number of pairs (:func:`paired_differences`). A DataFrame when
        pandas is installed, else a :class:`Tidy` list."""
        base = self._baseline(baseline)
        ms = metric_names(metrics, self.metrics) if metrics is not None else self.paired_metrics()
        keys = list(by) if by is not None else [g for g in self.groups if g != "solver"]
        rows = paired_differences(self.rows, ms, keys, base, self.solvers)
        cols = keys + ["solver", "baseline", "pairs"] + [c for m in ms for c in (m, f"{m}_se")]
        df = _frame(rows, cols)
        return df if df is not None else Tidy(rows, keys + ["solver"], ms)

    def _baseline(self, baseline: str | None) -> str:
        base = baseline if baseline is not None else self.baseline
        if base not in self.solvers:
            raise MetricError(
                f"the baseline {base!r} of the paired differences is not among the compared methods",
                hint=f"methods: {', '.join(self.solvers)}",
            )
        return base

    def paired_metrics(self) -> list[str]:
        """The metrics of the paired table: those of the table but the degrees of freedom (the
        same k gives the same df)."""
        return [m for m in self.default_metrics() if m != "df"]

    def _paired_rows(self, metrics: list[str] | None = None, baseline: str | None = None) -> list[dict[str, Any]]:
        """The rows of :meth:`paired` against the baseline, per design value and k (none without a
        baseline among the methods)."""
        base = baseline if baseline is not None else self.baseline
        if base not in self.solvers:
            return []
        ms = metrics if metrics is not None else self.paired_metrics()
        return paired_differences(self.rows, ms, [g for g in self.groups if g != "solver"], base, self.solvers)

    def paired_table(self, fmt: str = "simple", metrics: Any = None, baseline: str | None = None) -> str:
        """The paired differences against the baseline as text: mean ± standard error per group
        and method (empty without two methods and two replications)."""
        from tabulate import tabulate

        base = self._baseline(baseline)
        if len(self.solvers) < 2 or self.reps < 2:
            return ""
        ms = metric_names(metrics, self.metrics) if metrics is not None else self.paired_metrics()
        keys = [g for g in self.groups if g != "solver"]
        rows = self._paired_rows(ms, base)
        head = [(k_header(self.unit) if g == "k" and self.unit else g) for g in keys]
        head += ["solver", "pairs"] + [f"{'k chosen' if m == 'k' else m} - {base}" for m in ms]
        body = []
        for e in rows:
            line = [e[g] for g in keys] + [e["solver"], e["pairs"]]
            for m in ms:
                mu, se = e[m], e[f"{m}_se"]
                line.append(
                    "-" if not math.isfinite(mu) else f"{mu:.4g} ± {se:.2g}" if math.isfinite(se) else f"{mu:.4g}"
                )
            body.append(line)
        what = (
            f"paired differences against {base}: mean ± standard error over the replications of (method - {base}) "
            "on the same replication"
        )
        return "\n".join([what, tabulate(body, headers=head, tablefmt=fmt, disable_numparse=True)])

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
        paired = self.paired_table(fmt, metrics) if self.baseline in self.solvers else ""
        if paired:
            parts += ["", paired]
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
        """What the table shows: the chosen k, the objective, df, the metrics asked for, the time
        (the gap, a mean of per-run certificates, is in the CSV and JSON and ``table(metrics=...)``)."""
        skip = {"nnz", "iterations", "lower_s", "time_total", "lower_bound", "gap"}
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
                "baseline": self.baseline,
                "paired": [
                    {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in e.items()}
                    for e in self._paired_rows()
                ],
                "notes": self.notes,
            }
        )

    def table_rows(self) -> list[dict[str, Any]]:
        """The tidy rows: one line per replication, method and k."""
        return self.rows

    def plot(self, path: str | Path, overwrite: bool = False, metrics: Any = None, x: str | None = None) -> Path:
        """PNG: one panel per metric (default: the held-out loss, or the objective, and the time),
        the mean over replications with standard-error bars, one line per method."""
        from .figures import png_bytes

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
        summ = summarize(self.rows, self.default_metrics(), self.groups)
        return report_html(summ, list(summ[0]) if summ else [], repr(self), self.figure())


__all__ = ["NUMERIC", "Study", "Tidy", "paired_differences", "summarize"]
