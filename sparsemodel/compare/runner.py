"""Run several solvers on one problem, over a range of the bound or of any param.

:func:`compare` sweeps either the bound of the problem's constraint set (``k=...``: the problem is
lowered once and each budget is ``lp.with_budget(k)``, sharing the data and every cache) or a
param (``sweep=("lam", [...])``: the param is rebound and the problem lowered again for each
value; when the bound is written with that param, ``nnz(offdiag(O)) <= 2 * k``, the bound follows).
The table's first column is named after what was swept, and every row also records the budget
actually used (in the set's unit), the same number as ``Result.k``. All solvers at one point see
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

import csv
import io
import json
import math
import statistics
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..compile.lowered import LoweredProblem
from ..errors import ConstraintError, ModelError, SolverError
from ..model.expr import Parameter
from ..solvers import get_solver
from ..util import jsonable

if TYPE_CHECKING:
    from ..model.problem import Problem
    from ..solvers.base import Result

COLUMNS = ("solver", "k", "budget", "objective", "nnz", "status", "time_s", "iterations", "message")
BOUND_NAMES = ("k", "r")  # names that mean "the bound" when no param has them
ERROR = "error"


class OutputError(ModelError):
    """A report file that must not or cannot be written."""

    kind = "output error"


def compare(
    problem: Problem,
    solvers: Iterable[str] | str,
    k: Iterable[int] | int | None = None,
    options: dict[str, dict[str, Any]] | None = None,
    progress: bool = True,
    sweep: tuple[str, Iterable[float]] | dict[str, Iterable[float]] | None = None,
) -> Comparison:
    """Run every solver at every point of a sweep on ``problem``; returns a :class:`Comparison`.

    ``k``: None (the problem's own bound), an int, or an iterable of ints: values of the bound of
    the sparsity or rank constraint, in its unit. ``sweep``: ``(name, values)`` (or a one-item
    dict) to sweep a param instead (``k``/``r`` name the bound when no param has that name).
    ``options``: per-solver option dicts, ``{"grahtp": {"eta": 0.5}, ...}``. Solver names, option
    names and the swept name are checked before anything runs; errors inside a run are recorded in
    that run's row.
    """
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

    from tqdm import tqdm

    comp = Comparison(problem, names, values, options, column)
    bar = tqdm(total=len(names) * len(values), file=sys.stderr, disable=not progress, desc="compare", unit="run")
    base: LoweredProblem | None = None
    saved = param.value.copy() if param is not None else None
    try:
        for v in values:
            try:
                if param is not None:
                    param.value = v
                    lp = LoweredProblem(problem)
                else:
                    if base is None:
                        base = LoweredProblem(problem)
                    lp = base if v is None else base.with_budget(v)
            except ModelError as exc:
                for n in names:
                    comp._add_error(n, v, None, exc, 0.0)
                    bar.update(1)
                continue
            _warm_up(lp, classes.values())
            for n in names:
                bar.set_postfix_str(f"{n} {column}={v}")
                t0 = time.perf_counter()
                at = lp.budget if (v is None and param is None) else v  # no sweep: the model's own bound
                try:
                    res = classes[n](**options.get(n, {})).solve(lp)
                except ModelError as exc:
                    comp._add_error(n, at, lp.budget, exc, time.perf_counter() - t0)
                else:
                    comp._add_result(n, at, res, time.perf_counter() - t0)
                bar.update(1)
    finally:
        bar.close()
        if param is not None:
            param.value = saved
    return comp


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
        return "k", _ks(k), None
    if isinstance(sweep, dict):
        if len(sweep) != 1:
            raise ConstraintError(f"sweep one name at a time; got {', '.join(map(str, sweep))}")
        sweep = next(iter(sweep.items()))
    name, vals = sweep
    param = find_param(problem, name)
    if param is None:
        if name in BOUND_NAMES:
            return name, _ks(vals), None
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


def _ks(k: Iterable[int] | int | None) -> list[int | None]:
    if k is None:
        return [None]
    items = [k] if isinstance(k, (int, np.integer)) and not isinstance(k, bool) else k
    try:
        items = list(items)  # type: ignore[arg-type]
    except TypeError:
        raise ConstraintError(f"k={k!r} is not an integer or a list of integers") from None
    out: list[int | None] = []
    for v in items:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer, float, np.floating)) or v != int(v):
            raise ConstraintError(
                f"sparsity level k={v!r} is not an integer", hint="use k=10, k=[5, 10] or range(5, 55, 5)"
            )
        if int(v) not in out:
            out.append(int(v))
    if not out:
        raise ConstraintError("no sparsity levels to compare (k is empty)")
    return out


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


class Comparison:
    """Results of :func:`compare`: ``rows`` (one dict per solver and k, keys in ``COLUMNS``),
    ``results`` ({(solver, k): Result} for the runs that finished), writers and a table."""

    def __init__(
        self,
        problem: Problem,
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

    @property
    def columns(self) -> tuple[str, ...]:
        return ("solver", self.column) + COLUMNS[2:]

    # ------------------------------------------------------------------ collecting
    def _add_result(self, solver: str, v: Any, res: Result, elapsed: float) -> None:
        self.results[(solver, v)] = res
        self.rows.append(
            {
                "solver": solver,
                self.column: v,
                "budget": res.k,
                "objective": float(res.objective),
                "nnz": int(len(res.support)),
                "status": res.status,
                "time_s": float(elapsed),
                "iterations": int(res.iterations),
                "message": res.message,
            }
        )

    def _add_error(self, solver: str, v: Any, budget: int | None, exc: ModelError, elapsed: float) -> None:
        msg = exc.message + (f" ({exc.hint})" if exc.hint else "")
        self.rows.append(
            {
                "solver": solver,
                self.column: v,
                "budget": budget,
                "objective": None,
                "nnz": None,
                "status": ERROR,
                "time_s": float(elapsed),
                "iterations": None,
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
        """Per solver: median time, median ratio of its time to the fastest solver's at the same k,
        wins (k where it reaches the best objective, within 1e-9 relative), runs and errors."""
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
            out.append(
                {
                    "solver": s,
                    "median time (s)": statistics.median(times) if times else None,
                    "median time / fastest": statistics.median(ratios) if ratios else None,
                    f"best objective ({col})": wins,
                    "runs": len([r for r in self.rows if r["solver"] == s]),
                    "errors": len([r for r in self.rows if r["solver"] == s and r["status"] == ERROR]),
                }
            )
        return out

    def table(self, fmt: str = "simple") -> str:
        """Objective per solver (columns) at each k (rows), then time medians and ratios per solver."""
        from tabulate import tabulate

        head = [self.column] + self.solvers
        body = []
        for k in self.values:
            line: list[Any] = ["-" if k is None else (f"{k:g}" if isinstance(k, float) else k)]
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
        summ = self.summary_rows()
        parts += ["", "time", tabulate(summ, headers="keys", tablefmt=fmt, floatfmt=".4g", missingval="-")]
        errors = self.failed()
        if errors:
            parts += ["", "errors"]
            parts += [f"  {r['solver']} at {self.column}={r[self.column]}: {r['message']}" for r in errors]
        return "\n".join(parts)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return f"Comparison(solvers={self.solvers}, {self.column}={self.values}, runs={len(self.rows)}, errors={len(self.failed())})"

    # ------------------------------------------------------------------ files
    def check_path(self, path: str | Path, overwrite: bool = False) -> Path:
        """The output path, or an OutputError if it is an input of the problem, an existing file
        (without overwrite=True) or in a missing directory."""
        return check_output(path, self.protected, overwrite)

    def _write(self, path: str | Path, overwrite: bool, data: str | bytes) -> Path:
        return write_output(path, self.protected, overwrite, data)

    def to_csv(self, path: str | Path, overwrite: bool = False) -> Path:
        """One line per solver and k, columns ``COLUMNS`` (empty cells for failed runs)."""
        buf = io.StringIO()
        cols = list(self.columns)
        w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
        w.writeheader()
        for r in self.rows:
            w.writerow({c: ("" if r[c] is None else (repr(r[c]) if isinstance(r[c], float) else r[c])) for c in cols})
        return self._write(path, overwrite, buf.getvalue())

    def to_dict(self) -> dict[str, Any]:
        details = []
        for (s, k), res in self.results.items():
            details.append(
                {
                    "solver": s,
                    self.column: k,
                    "budget": res.k,
                    "support": [int(i) for i in res.support],
                    "options": res.options,
                    "certificate": res.certificate,
                    "extra": res.extra,
                }
            )
        return jsonable(
            {
                "source": self.source,
                "solvers": self.solvers,
                "sweep": self.column,
                self.column: self.values,
                "options": self.options,
                "rows": self.rows,
                "summary": self.summary_rows(),
                "details": details,
            }
        )

    def to_json(self, path: str | Path, overwrite: bool = False, indent: int | None = 2) -> Path:
        """Rows, per-solver summary and per-run details (support, options, certificate, extra)."""
        return self._write(path, overwrite, json.dumps(self.to_dict(), indent=indent, allow_nan=False) + "\n")

    def plot(self, path: str | Path, overwrite: bool = False) -> Path:
        """PNG with two panels: objective versus k per solver, and time versus k per solver."""
        out = self.check_path(path, overwrite)
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=(11, 4.2))
        FigureCanvasAgg(fig)  # the Agg backend for this figure only (pyplot's global backend untouched)
        ax_obj, ax_t = fig.subplots(1, 2)
        ks = self.values
        xpos = {k: (k if k is not None else i) for i, k in enumerate(ks)}
        positive = True
        xs = [xpos[k] for k in ks]
        for s in self.solvers:  # failed runs are gaps (NaN), so lines never bridge them
            rows = [self.row(s, k) for k in ks]
            ok = [r is not None and r["status"] != ERROR for r in rows]
            if not any(ok):
                continue
            objs = [r["objective"] if good else math.nan for r, good in zip(rows, ok)]
            times = [max(r["time_s"], 1e-6) if good else math.nan for r, good in zip(rows, ok)]
            positive = positive and all(v > 0 for v, good in zip(objs, ok) if good)
            ax_obj.plot(xs, objs, marker="o", label=s)
            ax_t.plot(xs, times, marker="o", label=s)
        if positive and any(ax_obj.lines):
            ax_obj.set_yscale("log")
        if any(ax_t.lines):
            ax_t.set_yscale("log")
        for ax, title, ylabel in ((ax_obj, "objective", "f(x)"), (ax_t, "time", "seconds")):
            ax.set_xlabel(self.column if self.column not in BOUND_NAMES else f"{self.column} (bound)")
            ax.set_ylabel(ylabel)
            ax.set_title(title)
            ax.grid(True, alpha=0.3)
            if ax.lines:
                ax.legend(fontsize="small")
        fig.suptitle(
            f"{Path(self.source).name if self.source != '<python>' else 'problem'}: solvers versus {self.column}"
        )
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        return self._write(out, overwrite, buf.getvalue())


def check_output(path: str | Path, protected: set[Path], overwrite: bool = False) -> Path:
    """The output path of a report, or an OutputError if it is an input of the problem
    (``protected``), an existing file (without overwrite=True) or in a missing directory. Every
    report (compare, path, select) writes through this and :func:`write_output`."""
    out = Path(path)
    if out.resolve() in protected:
        raise OutputError(
            f"refusing to write to {path}: it is an input of this problem (model or data file)",
            hint="choose another output file",
        )
    if out.is_dir():
        raise OutputError(f"cannot write {path}: it is a directory")
    if out.exists() and not overwrite:
        raise OutputError(
            f"refusing to overwrite the existing file {path}", hint="choose a new name, or pass overwrite=True"
        )
    if not out.parent.exists():
        raise OutputError(f"cannot write {path}: the directory {out.parent} does not exist")
    return out


def write_output(path: str | Path, protected: set[Path], overwrite: bool, data: str | bytes) -> Path:
    out = check_output(path, protected, overwrite)
    try:
        if isinstance(data, bytes):
            out.write_bytes(data)
        else:
            out.write_text(data)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror}") from None
    return out


def protected_paths(problem: Any) -> set[Path]:
    """The problem's input files: its model file (``Problem.source``) and every data file it read
    (the ``path`` of each data symbol, when the front end recorded one; ``file.npz:member`` names
    the file)."""
    out: set[Path] = set()
    src = getattr(problem, "source", None)
    if src and not str(src).startswith("<") and Path(src).exists():
        out.add(Path(src).resolve())
    for d in getattr(problem, "data", {}).values():
        p = getattr(d, "path", None)
        if not p:
            continue
        p = str(p)
        if not Path(p).exists() and ":" in p:
            p = p.rsplit(":", 1)[0]
        out.add(Path(p).resolve())
    return out
