"""Run several solvers on one problem, over a range of the bound or of any param.

:func:`compare` sweeps either the bound of the problem's constraint set (``k=...``: the problem is
lowered once and each budget is ``lp.with_budget(k)``, sharing the data and every cache) or a
param (``sweep=("lam", [...])``: the param is rebound and the problem lowered again for each
value; when the bound is written with that param, ``nnz(offdiag(O)) <= 2 * k``, the bound follows).
The table's first column is named after what was swept, and every row also records the budget
actually used (in the set's unit: ``k (coordinates)``, ``k (edges)``, ``r (rank)``), the same
number as ``Result.k``, and the solution's support (positions and names), so that every answer of
the sweep can be read back from the CSV or the JSON (which keeps each ``x``). Every bound is
checked before anything runs: a bound beyond the constraint's size is refused as a whole, as
``solve``, ``path`` and ``select`` refuse it; 0 and the full size are legal. All solvers at one point see
the same lowered problem. A solver that fails with a :class:`~sparsemodel.errors.ModelError` (an
option it refuses, a k it cannot reach — LASSO — a constraint it does not handle) fails only its
own cell: the cell records status ``error`` and the message, and the sweep goes on.

Fairness of the timings: every run gets its own oracle (``Solver.solve`` runs on ``lp.fresh()``),
so counters are never shared or reset, and one restricted solve on the empty support is run before
the first solver of each point so that cached Jacobian columns are not charged to whichever solver
happens to run first. Times are wall-clock seconds around ``solver.solve(lp)``.

:class:`Comparison` holds the rows and writes them as a table (tabulate), CSV, JSON and a PNG
plot (matplotlib, Agg backend). Writers refuse to touch the problem's inputs (its model file and
every data file it read) and existing files unless ``overwrite=True``.
"""

from __future__ import annotations

import io
import math
import statistics
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConstraintError, ModelError, SolverError
from ..lowering.lowered import LoweredProblem
from ..model.expr import Parameter
from ..outputs import RowSink, check_output, protected_paths, write_output
from ..progress import progress_bar
from ..sets.units import bound_letter, k_header
from ..solvers import get_solver
from ..util import jsonable
from .metrics import Scorer, dof, make_scorer, metric_names, with_metric_columns
from .options import StudyOptions, bounds_of
from .report import ERROR, RUN_COLUMNS, SUPPORT_COLUMNS, Report, report_html, run_cells, support_cells
from .runner import run_tasks

if TYPE_CHECKING:
    from ..model.problem import Model
    from ..solvers.result import Result

COLUMNS = ("solver", "k", "budget", "unit", *RUN_COLUMNS, "time_s", "iterations", *SUPPORT_COLUMNS, "message")
BOUND_NAMES = ("k", "r")  # names that mean "the bound" when no param has them


def compare(
    problem: Model,
    solvers: Iterable[str] | str,
    k: Iterable[int] | int | None = None,
    options: dict[str, dict[str, Any]] | None = None,
    sweep: tuple[str, Iterable[float]] | dict[str, Iterable[float]] | None = None,
    study: StudyOptions | None = None,
    scorer: Scorer | None = None,
    lowered: LoweredProblem | None = None,
    **kw: Any,
) -> Comparison:
    """Run every solver at every point of a sweep on ``problem``; returns a :class:`Comparison`.

    ``k``: None (the problem's own bound), an int, or an iterable of ints: values of the bound of
    the sparsity or rank constraint, in its unit. ``sweep``: ``(name, values)`` (or a one-item
    dict) to sweep a param instead (``k``/``r`` name the bound when no param has that name).
    ``options``: per-solver option dicts, ``{"grahtp": {"eta": 0.5}, ...}``. Solver names, option
    names and the swept name are checked before anything runs; errors inside a run are recorded in
    that run's row.

    Metrics (:mod:`sparsemodel.workflows.metrics`): every row has the degrees of freedom ``df``;
    ``test`` (held-out data by data name, ``{"X": Xt, "y": yt}``) adds ``test_loss``, the model's
    own loss per held-out sample; ``truth`` (``{"w": w_true}``) adds precision, recall, f1, exact,
    exact_top, covers, fp, fn and error. ``scorer``: those metrics already built, and ``lowered``:
    the problem already lowered (a replication of :func:`sparsemodel.workflows.experiment.experiment`).
    ``study`` (:class:`~sparsemodel.workflows.options.StudyOptions`) holds ``progress``, ``csv``,
    ``overwrite``, ``test`` and ``truth``, which may also be given as keywords. The runs go through
    :func:`sparsemodel.workflows.runner.run_tasks` in this process (a sweep's points share one
    lowering); a study's replications run on workers (``n_jobs`` of
    :func:`sparsemodel.workflows.experiment.experiment`).
    """
    study = StudyOptions.merged(study, kw, "compare", progress=None)
    study.refuse_jobs("compare", "a comparison on the model's data runs its sweep in this process, in order")
    progress, csv, overwrite, test, truth = study.progress, study.csv, study.overwrite, study.test, study.truth
    names = [solvers] if isinstance(solvers, str) else list(solvers)
    if not names:
        raise SolverError("no solvers to compare", hint="give a list of solver names, e.g. ['grahtp', 'lasso']")
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise SolverError(f"solver {dup[0]!r} is listed twice", hint="list each solver once")
    options = dict(options or {})
    for name in options:
        if name not in names:
            raise SolverError(
                f"options were given for {name!r}, which is not among the compared solvers",
                hint=f"compared solvers: {', '.join(names)}",
            )
    classes = {n: get_solver(n) for n in names}
    for n, cls in classes.items():
        if not isinstance(options.get(n, {}), dict):
            raise SolverError(f"options for {n!r} must be a dict of option names to values")
        cls.validate(options.get(n, {}))
    ce = problem.convexity_error()
    if ce is not None:
        raise ce
    column, values, param = _sweep_spec(problem, k, sweep)
    base: LoweredProblem | None = None
    if param is None and values != [None]:  # every bound checked before anything runs
        base = lowered if lowered is not None else LoweredProblem(problem)
        if base.set is None or not base.set.thresholds:
            raise ConstraintError(
                f"k={values} sweeps the bound of nnz(...) <= k or rank(W) <= r, and this problem has none",
                hint="add a sparsity or rank constraint, or sweep a param",
            )
        values = [base.set.check_budget(v) for v in values]
    elif param is not None:
        _check_param_bounds(problem, param, values)

    if scorer is None and (test is not None or truth is not None):
        scorer = make_scorer(problem, base if base is not None else LoweredProblem(problem), test=test, truth=truth)
    comp = Comparison(problem, names, values, options, column)
    comp.param_swept = param is not None
    comp.scorer = scorer
    if base is not None and base.set is not None:
        comp.unit = base.set.unit
    if csv is not None:
        comp.sink = RowSink(csv, list(comp.columns), comp.protected, overwrite)
    bar = progress_bar(total=len(names) * len(values), desc="compare", unit="run", progress=progress)
    point = _Point(problem, classes, options, param, base, lowered)
    saved = param.value.copy() if param is not None else None

    def done(i: int, out: tuple[str, str, Any, Any, Any, float, Any, ModelError | None]) -> None:
        unit, n, at, budget, res, elapsed, lp, exc = out
        if unit and not comp.unit:
            comp.unit = unit
        if exc is not None:
            comp._add_error(n, at, budget, exc, elapsed)
        else:
            comp._add_result(n, at, res, elapsed, lp)

    def close() -> None:
        if comp.sink is not None:
            comp.sink.close()
        if param is not None:
            param.value = saved

    # one task per run, point by point: the runner's Ctrl-C keeps every run that finished
    run_tasks(
        point,
        [(v, n) for v in values for n in names],
        1,
        done=done,
        count=lambda out: 1,
        bar=bar,
        report=comp,
        name="comparison",
        close=close,
    )
    return comp


class _Point:
    """One run of a sweep (a task of the runner): a solver at the bound ``v`` of the problem's one
    lowering, or at the param's value ``v`` (the problem lowered again once per value). The
    lowering of the current point is kept for its other solvers, and warmed up before its first
    (:func:`_warm_up`). Returns the constraint's unit, the solver, the value, the budget (errors),
    the result, the time, the lowered problem and the error."""

    def __init__(
        self,
        problem: Any,
        classes: dict[str, Any],
        options: dict[str, Any],
        param: Parameter | None,
        base: LoweredProblem | None,
        lowered: LoweredProblem | None,
    ):
        self.problem, self.classes, self.options, self.param = problem, classes, options, param
        self.base, self.lowered = base, lowered
        self.at: tuple[Any, Any] | None = None  # (value, its lowered problem or the error lowering it)

    def lowering(self, v: Any) -> Any:
        if self.at is not None and self.at[0] is v:
            return self.at[1]
        try:
            if self.param is not None:
                self.param.value = v
                lp: Any = LoweredProblem(self.problem)
            else:
                if self.base is None:
                    self.base = self.lowered if self.lowered is not None else LoweredProblem(self.problem)
                lp = self.base if v is None else self.base.with_budget(v)
        except ModelError as exc:
            lp = exc
        else:
            _warm_up(lp, self.classes.values())
        self.at = (v, lp)
        return lp

    def __call__(self, task: tuple[Any, str]) -> tuple[str, str, Any, Any, Any, float, Any, ModelError | None]:
        v, n = task
        lp = self.lowering(v)
        if isinstance(lp, ModelError):
            return "", n, v, None, None, 0.0, None, lp
        unit = lp.set.unit if lp.set is not None else ""
        t0 = time.perf_counter()
        at = lp.budget if (v is None and self.param is None) else v  # no sweep: the model's own bound
        try:
            res = self.classes[n](**self.options.get(n, {})).solve(lp)
        except ModelError as exc:
            return unit, n, at, lp.budget, None, time.perf_counter() - t0, lp, exc
        return unit, n, at, None, res, time.perf_counter() - t0, lp, None


def _check_param_bounds(problem: Any, param: Parameter, values: list[float]) -> None:
    """A param sweep that moves a bound (``nnz(offdiag(O)) <= 2 * k``): every value's bound is
    checked before anything runs (the param is restored)."""
    saved = param.value.copy()
    try:
        for v in values:
            param.value = np.asarray(float(v))
            for c in problem.constraints:
                if hasattr(c, "k_expr") or hasattr(c, "r_expr"):
                    e = getattr(c, "k_expr", None) or getattr(c, "r_expr", None)
                    if any(node is param for node in e.walk()):
                        try:
                            c.validate()
                        except ConstraintError as exc:
                            raise ConstraintError(
                                f"at {param.name} = {v:g}: {exc.message}", exc.span, exc.hint
                            ) from None
    finally:
        param.value = saved


def find_param(problem: Any, name: str) -> Parameter | None:
    """The param called ``name``: a declared symbol of a model file, or a Parameter node of the
    objective or of a constraint's bound (builder problems)."""
    obj = getattr(problem, "symbols", {}).get(name)
    if isinstance(obj, Parameter):
        return obj
    roots = [problem.objective.expr]
    for c in problem.constraints:
        for attr in ("k_expr", "r_expr", "lower", "upper"):
            e = getattr(c, attr, None)
            if e is not None:
                roots.append(e)
    for r in roots:
        for node in r.walk():
            if isinstance(node, Parameter) and node.name == name:
                return node
    return None


def _sweep_spec(problem: Any, k: Any, sweep: Any) -> tuple[str, list[Any], Parameter | None]:
    """(column name, values, the param to rebind or None for the bound)."""
    if k is not None and sweep is not None:
        raise ConstraintError("give either k (the bound) or sweep (a param), not both")
    if sweep is None:
        return "k", bounds_of(k), None
    if isinstance(sweep, dict):
        if len(sweep) != 1:
            raise ConstraintError(f"sweep one name at a time; got {', '.join(map(str, sweep))}")
        sweep = next(iter(sweep.items()))
    name, vals = sweep
    param = find_param(problem, name)
    if param is None:
        if name in BOUND_NAMES:
            return name, bounds_of(vals), None
        params = sorted(getattr(problem, "params", {}))
        raise ConstraintError(
            f"cannot sweep {name!r}: it is neither a param of the model nor the bound (k)",
            hint=f"sweep k (the bound of the sparsity or rank constraint) or a param: {', '.join(params) or '(none declared)'}",
        )
    try:
        values = [float(v) for v in (vals if isinstance(vals, Iterable) and not isinstance(vals, str) else [vals])]
    except (TypeError, ValueError):
        raise ConstraintError(f"the values of {name!r} must be numbers; got {vals!r}") from None
    if not values:
        raise ConstraintError(f"no values to sweep {name!r} over")
    if not all(math.isfinite(v) for v in values):
        raise ConstraintError(f"the values of {name!r} must be finite; got {values}")
    return name, values, param


def _warm_up(lp: Any, classes: Iterable[Any]) -> None:
    """Build the lowered problem's cached Jacobian columns (and import cvxpy, when a convex
    relaxation is compared) before the first timed solver."""
    if any(getattr(c, "convex_relaxation", False) for c in classes):
        import cvxpy  # noqa: F401
    try:
        if lp.set is not None and lp.set.thresholds:
            lp.restricted_minimize(lp.set.empty())
    except ModelError:
        pass  # the solvers that need this will report it themselves


class Comparison(Report):
    """Results of :func:`compare`: ``rows`` (one dict per solver and k, keys in ``COLUMNS``),
    ``results`` ({(solver, k): Result} for the runs that finished), writers and a table."""

    def __init__(
        self,
        problem: Model,
        solvers: list[str],
        values: list[Any],
        options: dict[str, dict[str, Any]],
        column: str = "k",
    ):
        self.source = getattr(problem, "source", "<python>")
        self.solvers = solvers
        self.requested = values
        self.options = options
        self.column = column  # what was swept: "k" (the bound) or a param's name
        self.rows: list[dict[str, Any]] = []
        self.results: dict[tuple[str, Any], Result] = {}
        self.protected = protected_paths(problem)
        self.sink: RowSink | None = None  # rows written as they finish
        self.interrupted = False
        self.total = len(solvers) * len(values)
        self.unit = ""  # what the bound counts: coordinates, groups, edges, rank
        self.param_swept = False  # a param was swept (else the bound, or nothing)
        self.scorer: Scorer | None = None  # held-out loss and truth metrics (None: neither asked)

    @property
    def metric_columns(self) -> list[str]:
        """The columns of the metrics asked for (test_loss, the truth's), beside the objective."""
        return self.scorer.columns if self.scorer is not None else []

    @property
    def columns(self) -> tuple[str, ...]:
        return ("solver", self.column) + with_metric_columns(COLUMNS[2:], self.metric_columns)

    # ------------------------------------------------------------------ collecting
    def _add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        if self.sink is not None:
            self.sink.write(row)

    def _add_result(self, solver: str, v: Any, res: Result, elapsed: float, lp: Any = None) -> None:
        self.results[(solver, v)] = res
        x = lp.layout.pack(res.values) if lp is not None else None
        self._add(
            {
                "solver": solver,
                self.column: v,
                "budget": res.k,
                "unit": res.unit,
                **run_cells(res, dof(lp, x) if lp is not None else None),
                "time_s": float(elapsed),
                "iterations": int(res.iterations),
                **(self.scorer.score(lp, res) if self.scorer is not None and lp is not None else {}),
                **support_cells(res),
                "message": res.message,
            }
        )

    def _add_error(self, solver: str, v: Any, budget: int | None, exc: ModelError, elapsed: float) -> None:
        msg = exc.message + (f" ({exc.hint})" if exc.hint else "")
        self._add(
            {
                "solver": solver,
                self.column: v,
                "budget": budget,
                "unit": self.unit,
                **run_cells(None),
                "time_s": float(elapsed),
                "iterations": None,
                **dict.fromkeys(self.metric_columns),
                **support_cells(None),
                "message": msg,
            }
        )

    @property
    def values(self) -> list[Any]:
        """The swept values that have rows, in order."""
        out: list[Any] = []
        for r in self.rows:
            if r[self.column] not in out:
                out.append(r[self.column])
        return out

    ks = values

    def row(self, solver: str, v: Any) -> dict[str, Any] | None:
        return next((r for r in self.rows if r["solver"] == solver and r[self.column] == v), None)

    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["status"] == ERROR]

    # ------------------------------------------------------------------ summaries
    def summary_rows(self) -> list[dict[str, Any]]:
        """Per solver: median time; the median over the swept points of its time divided by the
        fastest solver's time at the same point (1 = fastest); at how many points it was the
        fastest, and at how many it reached the best objective (within 1e-9 relative); runs and
        errors."""
        best: dict[Any, float] = {}
        fastest: dict[Any, float] = {}
        col = self.column
        for r in self.rows:
            if r["status"] == ERROR:
                continue
            k = r[col]
            best[k] = min(best.get(k, math.inf), r["objective"])
            fastest[k] = min(fastest.get(k, math.inf), r["time_s"])
        out = []
        for s in self.solvers:
            mine = [r for r in self.rows if r["solver"] == s and r["status"] != ERROR]
            times = [r["time_s"] for r in mine]
            ratios = [r["time_s"] / fastest[r[col]] for r in mine if fastest[r[col]] > 0]
            wins = sum(1 for r in mine if r["objective"] <= best[r[col]] + 1e-9 * max(1.0, abs(best[r[col]])))
            quickest = sum(1 for r in mine if r["time_s"] <= fastest[r[col]])
            out.append(
                {
                    "solver": s,
                    "median time (s)": statistics.median(times) if times else None,
                    "time / fastest's (median)": statistics.median(ratios) if ratios else None,
                    f"fastest ({col})": quickest,
                    f"best objective ({col})": wins,
                    "runs": len([r for r in self.rows if r["solver"] == s]),
                    "errors": len([r for r in self.rows if r["solver"] == s and r["status"] == ERROR]),
                }
            )
        return out

    def bound_column(self) -> tuple[str, list[Any]] | None:
        """The bound per swept value when the sweep is over a param that moves it (None otherwise)."""
        if not self.param_swept:
            return None
        per = []
        for v in self.values:
            b = next((r["budget"] for r in self.rows if r[self.column] == v and r["budget"] is not None), None)
            per.append(b)
        if all(b is None for b in per) or len({b for b in per}) <= 1 or per == list(self.values):
            return None  # the bound does not move, or it is the param itself (nnz(w) <= k)
        return k_header(self.unit), per

    def _param_is_bound(self) -> bool:
        budgets = [next((r["budget"] for r in self.rows if r[self.column] == v), None) for v in self.values]
        return bool(self.unit) and budgets == list(self.values)

    def table(self, fmt: str = "simple") -> str:
        """Objective per solver (columns) at each k (rows), then time medians and ratios per solver.
        The bound's column says its unit, ``k (edges)``; a param sweep that moves the bound shows
        the bound beside the param."""
        from tabulate import tabulate

        bound = self.bound_column()
        first = self.column
        if self.param_swept and bound is None and self._param_is_bound():
            first = f"{self.column} ({self.unit})"  # nnz(w) <= k with param k: the param is the bound
        elif self.param_swept:
            first = f"{self.column} (param)"
        elif self.unit:
            first = (
                k_header(self.unit) if self.column in ("k", bound_letter(self.unit)) else f"{self.column} ({self.unit})"
            )
        head = [first] + ([bound[0]] if bound else []) + self.solvers
        body = []
        for i, k in enumerate(self.values):
            line: list[Any] = ["-" if k is None else (f"{k:g}" if isinstance(k, float) else k)]
            if bound:
                line.append("-" if bound[1][i] is None else bound[1][i])
            for s in self.solvers:
                r = self.row(s, k)
                if r is None:
                    line.append("")
                elif r["status"] == ERROR:
                    line.append("error")
                else:
                    cell = f"{r['objective']:.6g}"
                    if r["status"] != "converged":
                        cell += f" ({r['status']})"
                    line.append(cell)
            body.append(line)
        parts = ["objective", tabulate(body, headers=head, tablefmt=fmt, disable_numparse=True)]
        gaps = self.gap_table(head, bound, fmt)
        if gaps:
            parts += ["", "gap ((f - lower bound) / max(|f|, 1); 0 is certified optimal, - no bound)", gaps]
        if self.metric_columns:
            parts += ["", "metrics", self.metrics_table(fmt)]
            parts += [f"note: {n}" for n in (self.scorer.notes if self.scorer is not None else [])]
        summ = self.summary_rows()
        parts += ["", "time", tabulate(summ, headers="keys", tablefmt=fmt, floatfmt=".4g", missingval="-")]
        errors = self.failed()
        if errors:
            parts += ["", "errors"]
            parts += [f"  {r['solver']} at {self.column}={r[self.column]}: {r['message']}" for r in errors]
        return "\n".join(parts)

    def gap_table(self, head: list[str], bound: tuple[str, list[Any]] | None, fmt: str = "simple") -> str:
        """The gap per solver (columns) at each swept value (rows), laid out as the objective's
        table; empty when no run has a bound."""
        from tabulate import tabulate

        if all(r.get("gap") is None for r in self.rows):
            return ""
        body = []
        for i, k in enumerate(self.values):
            line: list[Any] = ["-" if k is None else (f"{k:g}" if isinstance(k, float) else k)]
            if bound:
                line.append("-" if bound[1][i] is None else bound[1][i])
            for s in self.solvers:
                r = self.row(s, k)
                line.append("" if r is None else ("-" if r.get("gap") is None else f"{r['gap']:.3g}"))
            body.append(line)
        return tabulate(body, headers=head, tablefmt=fmt, disable_numparse=True)

    def metrics_table(self, fmt: str = "simple") -> str:
        """One line per swept value and solver: the degrees of freedom and every metric asked for."""
        from tabulate import tabulate

        cols = ["df", *self.metric_columns]
        body = []
        for k in self.values:
            for s in self.solvers:
                r = self.row(s, k)
                if r is None or r["status"] == ERROR:
                    continue
                body.append(
                    [k, s]
                    + ["-" if r[c] is None else (f"{r[c]:.6g}" if isinstance(r[c], float) else r[c]) for c in cols]
                )
        return tabulate(body, headers=[self.column, "solver", *cols], tablefmt=fmt, disable_numparse=True)

    @property
    def metrics(self) -> list[str]:
        """The numeric columns a plot can show."""
        return ["objective", "lower_bound", "gap", "nnz", "df", "time_s", "iterations", *self.metric_columns]

    def __str__(self) -> str:
        return self.table()

    def _repr_html_(self) -> str:
        """A notebook shows the objective table, the time summary and the plot."""
        from ..solvers.report import html_table

        summary = self.summary_rows()
        cols = list(summary[0]) if summary else []
        times = html_table(
            cols,
            [
                [("" if r[c] is None else (f"{r[c]:.4g}" if isinstance(r[c], float) else r[c])) for c in cols]
                for r in summary
            ],
            "time",
        )
        return report_html(self.rows, self.columns, f"compare: solvers versus {self.column}", self.figure(), "") + times

    def __repr__(self) -> str:
        return f"Comparison(solvers={self.solvers}, {self.column}={self.values}, runs={len(self.rows)}, errors={len(self.failed())})"

    # ------------------------------------------------------------------ files
    def check_path(self, path: str | Path, overwrite: bool = False) -> Path:
        """The output path, or an OutputError if it is an input of the problem (under any name),
        an existing file (without overwrite=True), a directory or in a missing directory."""
        return check_output(path, self.protected, overwrite)

    def _write(self, path: str | Path, overwrite: bool, data: str | bytes) -> Path:
        return write_output(path, data, self.protected, overwrite)

    def table_rows(self) -> list[dict[str, Any]]:
        """One line per solver and k, columns ``COLUMNS`` (empty cells for failed runs): the bound
        and its unit, the support as positions (``3 17 42``; ``(0,1) (2,3)`` for a matrix) and as
        names (``MOSTYPE; MAUT1``)."""
        return self.rows

    def to_dict(self) -> dict[str, Any]:
        """Rows, the per-solver summary and every run's result (``details``: the solution ``x``,
        every variable's values, the support by position and name, the coefficients, options,
        certificate and extra, as ``Result.to_dict()`` without the per-iteration history)."""
        details = []
        for (s, k), res in self.results.items():
            d = res.to_dict()
            d.pop("history", None)
            details.append({"solver": s, self.column: k, "budget": res.k, **d})
        return jsonable(
            {
                "source": self.source,
                "solvers": self.solvers,
                "sweep": self.column,
                self.column: self.values,
                "unit": self.unit,
                "options": self.options,
                "rows": self.rows,
                "summary": self.summary_rows(),
                "details": details,
            }
        )

    def plot(self, path: str | Path, overwrite: bool = False, metrics: Any = None) -> Path:
        """PNG: one panel per metric (default: the objective and the time) versus the swept value,
        one line per solver."""
        out = self.check_path(path, overwrite)
        fig = self.figure(metrics)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        return self._write(out, overwrite, buf.getvalue())

    def figure(self, metrics: Any = None) -> Any:
        """The plot as a matplotlib Figure (Agg canvas; pyplot's global state untouched)."""
        from .figures import metric_figure

        chosen = metric_names(metrics, self.metrics) if metrics is not None else ["objective", "time_s"]
        ks = self.values
        named = any(isinstance(k, Mapping) for k in ks)  # several bounds by name: one tick per point
        xs = [k if k is not None and not named else i for i, k in enumerate(ks)]
        series = {}
        for s in self.solvers:  # failed runs are gaps (NaN), so lines never bridge them
            rows = [self.row(s, k) for k in ks]
            ok = [r is not None and r["status"] != ERROR for r in rows]
            if not any(ok):
                continue
            per = {}
            for m in chosen:
                ys = [(r[m] if r[m] is not None else math.nan) if good else math.nan for r, good in zip(rows, ok)]
                if m == "time_s":
                    ys = [max(y, 1e-6) if math.isfinite(y) else y for y in ys]
                per[m] = (xs, ys, None)
            series[s] = per
        xlabel = f"{self.column} (param)" if self.param_swept else (k_header(self.unit) if self.unit else self.column)
        name = Path(self.source).name if self.source != "<python>" else "problem"
        return metric_figure(
            series,
            chosen,
            xlabel,
            f"{name}: solvers versus {self.column}",
            xticks=[str(k) for k in ks] if named else None,
        )
