"""Run several solvers on one problem, over one or several sparsity levels k.

:func:`compare` lowers the problem once per k (``Problem.lower``) and runs every solver of the
registry on that lowered problem, so all solvers see the same data, the same objective and the
same constraint. A solver that fails with a :class:`~sparsemodel.errors.ModelError` (an option it
refuses, a k it cannot reach — LASSO — a constraint it does not handle) fails only its own cell:
the cell records status ``error`` and the message, and the sweep goes on.

Fairness of the timings: the gradient-evaluation counters of the lowered problem are reset before
each solver, and one restricted solve on the empty support is run before the first solver of each
k so that the lowered problem's cached Jacobian columns are not charged to whichever solver
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

from ..errors import ConstraintError, ModelError, SolverError
from ..solvers import get_solver
from ..util import jsonable

if TYPE_CHECKING:
    from ..model.problem import Problem
    from ..solvers.base import Result

COLUMNS = ("solver", "k", "objective", "nnz", "status", "time_s", "iterations", "message")
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
) -> Comparison:
    """Run every solver at every k on ``problem``; returns a :class:`Comparison`.

    ``k``: None (the problem's own bound), an int, or an iterable of ints. ``options``: per-solver
    option dicts, ``{"grahtp": {"eta": 0.5}, ...}``. Solver names and option names are checked
    before anything runs; errors inside a run are recorded in that run's row.
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
    ks = _ks(k)
    ce = problem.convexity_error()
    if ce is not None:
        raise ce

    from tqdm import tqdm

    comp = Comparison(problem, names, ks, options)
    bar = tqdm(total=len(names) * len(ks), file=sys.stderr, disable=not progress, desc="compare", unit="run")
    try:
        for kk in ks:
            try:
                lp = problem.lower(kk)
            except ModelError as exc:
                for n in names:
                    comp._add_error(n, kk, exc, 0.0)
                    bar.update(1)
                continue
            k_eff = lp.sparsity.k if lp.sparsity is not None else kk
            _warm_up(lp, classes.values())
            for n in names:
                bar.set_postfix_str(f"{n} k={k_eff}")
                for key in lp.stats:
                    lp.stats[key] = 0
                t0 = time.perf_counter()
                try:
                    res = classes[n](**options.get(n, {})).solve(lp)
                except ModelError as exc:
                    comp._add_error(n, k_eff, exc, time.perf_counter() - t0)
                else:
                    comp._add_result(n, k_eff, res, time.perf_counter() - t0)
                bar.update(1)
    finally:
        bar.close()
    return comp


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
        if lp.sparsity is not None:
            lp.restricted_minimize(np.empty(0, dtype=np.int64))
    except ModelError:
        pass  # the solvers that need this will report it themselves


class Comparison:
    """Results of :func:`compare`: ``rows`` (one dict per solver and k, keys in ``COLUMNS``),
    ``results`` ({(solver, k): Result} for the runs that finished), writers and a table."""

    def __init__(self, problem: Problem, solvers: list[str], ks: list[int | None], options: dict[str, dict[str, Any]]):
        self.source = getattr(problem, "source", "<python>")
        self.solvers = solvers
        self.requested_k = ks
        self.options = options
        self.rows: list[dict[str, Any]] = []
        self.results: dict[tuple[str, int | None], Result] = {}
        self.protected = protected_paths(problem)

    # ------------------------------------------------------------------ collecting
    def _add_result(self, solver: str, k: int | None, res: Result, elapsed: float) -> None:
        self.results[(solver, k)] = res
        self.rows.append(
            {
                "solver": solver,
                "k": k,
                "objective": float(res.objective),
                "nnz": int(len(res.support)),
                "status": res.status,
                "time_s": float(elapsed),
                "iterations": int(res.iterations),
                "message": res.message,
            }
        )

    def _add_error(self, solver: str, k: int | None, exc: ModelError, elapsed: float) -> None:
        msg = exc.message + (f" ({exc.hint})" if exc.hint else "")
        self.rows.append(
            {
                "solver": solver,
                "k": k,
                "objective": None,
                "nnz": None,
                "status": ERROR,
                "time_s": float(elapsed),
                "iterations": None,
                "message": msg,
            }
        )

    @property
    def ks(self) -> list[int | None]:
        out: list[int | None] = []
        for r in self.rows:
            if r["k"] not in out:
                out.append(r["k"])
        return out

    def row(self, solver: str, k: int | None) -> dict[str, Any] | None:
        return next((r for r in self.rows if r["solver"] == solver and r["k"] == k), None)

    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["status"] == ERROR]

    # ------------------------------------------------------------------ summaries
    def summary_rows(self) -> list[dict[str, Any]]:
        """Per solver: median time, median ratio of its time to the fastest solver's at the same k,
        wins (k where it reaches the best objective, within 1e-9 relative), runs and errors."""
        best: dict[Any, float] = {}
        fastest: dict[Any, float] = {}
        for r in self.rows:
            if r["status"] == ERROR:
                continue
            k = r["k"]
            best[k] = min(best.get(k, math.inf), r["objective"])
            fastest[k] = min(fastest.get(k, math.inf), r["time_s"])
        out = []
        for s in self.solvers:
            mine = [r for r in self.rows if r["solver"] == s and r["status"] != ERROR]
            times = [r["time_s"] for r in mine]
            ratios = [r["time_s"] / fastest[r["k"]] for r in mine if fastest[r["k"]] > 0]
            wins = sum(1 for r in mine if r["objective"] <= best[r["k"]] + 1e-9 * max(1.0, abs(best[r["k"]])))
            out.append(
                {
                    "solver": s,
                    "median time (s)": statistics.median(times) if times else None,
                    "median time / fastest": statistics.median(ratios) if ratios else None,
                    "best objective (k)": wins,
                    "runs": len([r for r in self.rows if r["solver"] == s]),
                    "errors": len([r for r in self.rows if r["solver"] == s and r["status"] == ERROR]),
                }
            )
        return out

    def table(self, fmt: str = "simple") -> str:
        """Objective per solver (columns) at each k (rows), then time medians and ratios per solver."""
        from tabulate import tabulate

        head = ["k"] + self.solvers
        body = []
        for k in self.ks:
            line: list[Any] = ["-" if k is None else k]
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
            parts += [f"  {r['solver']} at k={r['k']}: {r['message']}" for r in errors]
        return "\n".join(parts)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return f"Comparison(solvers={self.solvers}, k={self.ks}, runs={len(self.rows)}, errors={len(self.failed())})"

    # ------------------------------------------------------------------ files
    def check_path(self, path: str | Path, overwrite: bool = False) -> Path:
        """The output path, or an OutputError if it is an input of the problem, an existing file
        (without overwrite=True) or in a missing directory."""
        out = Path(path)
        if out.resolve() in self.protected:
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

    def _write(self, path: str | Path, overwrite: bool, data: str | bytes) -> Path:
        out = self.check_path(path, overwrite)
        try:
            if isinstance(data, bytes):
                out.write_bytes(data)
            else:
                out.write_text(data)
        except OSError as exc:
            raise OutputError(f"cannot write {path}: {exc.strerror}") from None
        return out

    def to_csv(self, path: str | Path, overwrite: bool = False) -> Path:
        """One line per solver and k, columns ``COLUMNS`` (empty cells for failed runs)."""
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(COLUMNS), lineterminator="\n")
        w.writeheader()
        for r in self.rows:
            w.writerow(
                {c: ("" if r[c] is None else (repr(r[c]) if isinstance(r[c], float) else r[c])) for c in COLUMNS}
            )
        return self._write(path, overwrite, buf.getvalue())

    def to_dict(self) -> dict[str, Any]:
        details = []
        for (s, k), res in self.results.items():
            details.append(
                {
                    "solver": s,
                    "k": k,
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
                "k": self.ks,
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
        ks = self.ks
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
            ax.set_xlabel("k (sparsity)")
            ax.set_ylabel(ylabel)
            ax.set_title(title)
            ax.grid(True, alpha=0.3)
            if ax.lines:
                ax.legend(fontsize="small")
        fig.suptitle(f"{Path(self.source).name if self.source != '<python>' else 'problem'}: solvers versus k")
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        return self._write(out, overwrite, buf.getvalue())


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
