"""A warm-started path over the bound: one solver at k = k_1, k_2, ... on one lowering.

:func:`run_path` lowers the problem once and solves ``lp.with_budget(k)`` at each k in the order
given (data, Jacobian columns and factorizations shared). Each point is warm-started from its
neighbour, the solution at the previous k: the start is that solution plus, on the coordinates
outside its support, a gradient step scaled below its smallest kept entry, so that a solver which
thresholds its start to k entries keeps the neighbour's support and adds the coordinates of
largest gradient (the descent directions a box allows). Solvers without an ``init`` option are
solved cold at every point.

Warm starts and single solves (abess issue #502: ``support_size=[1, 2]`` gave another model at 2
than ``support_size=2``, because the path warm-starts). ``start`` says what a point is:

* ``best`` (default): solve cold (exactly what ``prob.solve(k=k)`` computes) and warm, and keep the
  lower objective; a tie keeps the cold answer. The answer at k is therefore the single solve's,
  or one with a strictly lower objective, and the point records both objectives and which won.
  It costs a second (warm, usually short) solve per point.
* ``cold``: single solves sharing the lowering: identical to ``prob.solve(k=k)`` at every k.
* ``warm``: the warm solve only (fastest); it may differ from the single solve in either direction.

``benchmarks/path_vs_single.py`` measures how often and by how much the warm answer differs.
Each point keeps its own :class:`~sparsemodel.solvers.result.Result` (status, iterations,
certificate); a point that fails with a :class:`~sparsemodel.errors.ModelError` records the error
and the path goes on (the next point starts from the last usable solution found). A solver that
cannot take the model's constraints is refused before the first point, as ``solve`` refuses it.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConstraintError, ModelError
from ..lowering.lowered import LoweredProblem
from ..outputs import protected_paths
from ..progress import progress_bar
from ..sets.units import k_header
from ..solvers.base import blas_threads
from ..solvers.result import USABLE
from ..util import jsonable
from .criteria import degrees_of_freedom
from .figures import new_figure
from .metrics import Scorer, metric_names, with_metric_columns
from .options import bounds_of
from .report import RUN_COLUMNS, SUPPORT_COLUMNS, Report, report_html, run_cells, support_cells

if TYPE_CHECKING:
    from ..model.problem import Model
    from ..solvers.base import Solver
    from ..solvers.result import Result

STARTS = ("best", "cold", "warm")
PATH_COLUMNS = (
    "k",
    "unit",
    *RUN_COLUMNS,
    "start",
    "cold_objective",
    "warm_objective",
    "time_s",
    *SUPPORT_COLUMNS,
    "message",
)


@dataclass
class PathPoint:
    """One point of a path: the bound, its result (None if the solve failed), how it was started
    (``cold``, ``warm``; with start='best' the winner), both objectives when both ran, the time of
    the point (all its solves) and the error message of a failed point."""

    k: int
    result: Result | None
    start: str
    cold_objective: float | None
    warm_objective: float | None
    time_s: float
    message: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)  # df, and the held-out loss and truth's when asked
    # the answer as a flat point and its (df, units used, selectable units): what the curve of select
    # reads again (workflows/select._row); not part of the row
    x: np.ndarray | None = field(default=None, repr=False, compare=False)
    counts: tuple[int, int, int] | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.result is not None

    @property
    def usable(self) -> bool:
        """An answer at k: a result with a usable status (not diverged, infeasible or unbounded), or a
        fold's point answered as a flat point alone (``x`` without a result: Solver.fold_point)."""
        if self.result is None:
            return self.x is not None
        return self.result.status in USABLE

    def row(self) -> dict[str, Any]:
        r = self.result
        return {
            "k": self.k,
            "unit": r.unit if r is not None else None,
            **run_cells(r, self.metrics.get("df")),
            "start": self.start,
            "cold_objective": self.cold_objective,
            "warm_objective": self.warm_objective,
            "time_s": self.time_s,
            **{c: v for c, v in self.metrics.items() if c != "df"},
            **support_cells(r),
            "message": self.message or (r.message if r is not None else ""),
        }


def neighbour_start(lp: LoweredProblem, x: np.ndarray) -> np.ndarray:
    """The warm start at a new bound from the neighbour's solution x (flat): the set's
    (:meth:`~sparsemodel.sets.base.ConstraintSet.neighbour_start`; for coordinate sparsity x on its
    support and a scaled step along -grad f(x) elsewhere, for a rank set x itself)."""
    return lp.set.neighbour_start(x, lambda: lp.oracle.value_and_grad(x)[1])


class PathRun:
    """A path computed one bound at a time: :func:`run_path` drives one, the lockstep
    cross-validation of :mod:`sparsemodel.workflows.select` drives one per fold. ``step(k)`` solves
    the next point (warm-started from the last solution found), appends it to ``path`` and returns
    it."""

    def __init__(
        self,
        problem: Model,
        lp: LoweredProblem,
        cls: type[Solver],
        options: dict[str, Any] | None = None,
        start: str = "best",
        scorer: Scorer | None = None,
        fold: bool = False,
    ):
        if start not in STARTS:
            raise ConstraintError(
                f"start={start!r} is not one of {', '.join(STARTS)}", hint="best (default), cold or warm"
            )
        if lp.set is None or not lp.set.thresholds:
            raise ConstraintError(
                "a path sweeps the bound of nnz(...) <= k or rank(W) <= r; this problem has none",
                hint="add a sparsity or rank constraint",
            )
        options = dict(options or {})
        if "init" in options and start != "cold":
            raise ConstraintError(
                "init= is chosen by the path at every point after the first (the neighbour's solution)",
                hint="drop init=, or use start='cold' to give every point the same start",
            )
        cls.validate(options)
        # a solver that cannot take the model refuses the whole path here: its points would fail one
        # by one and the largest bound, answered without the solver (full_model), would look chosen
        refused = cls.refuse(problem.requirements(), lp)
        if refused is not None:
            raise refused
        self.lp, self.cls, self.options, self.start = lp, cls, options, start
        self.warmable = "init" in cls.options
        self.prev: np.ndarray | None = None
        self.scorer = scorer
        # a fold of cross-validation: only its solutions are read (the held-out loss, the next start),
        # so no lower bound and no degrees of freedom are computed at its points
        self.fold = fold
        # a fold's warm points are asked of one solver made here (Solver.fold_point: the flat answer
        # with no Result where the solver has one; auto's lean kernel), its options those of
        # _solve_point's warm solve
        self.quick = cls(**warm_options(cls, options)) if fold and start == "warm" else None
        self.ready: deque[tuple[int, np.ndarray]] = deque()  # the next bounds' points, answered ahead
        self.read_ahead: dict[int, Any] = {}  # what a reader of the points answered ahead kept (select)
        self.path = SolutionPath(problem, cls.name, options, start)
        self.path.metric_columns = scorer.columns if scorer is not None else []

    def step(self, kv: int, ahead: Sequence[int] = ()) -> PathPoint:
        """The point at ``kv``. ``ahead``: the bounds a fold's path will be asked next, in order,
        which its solver may answer in the same call (Solver.fold_points; their points are kept
        for those steps, each the one a step at a time would compute)."""
        t0 = time.perf_counter()
        try:
            prev = self.prev if self.warmable else None
            x = lpk = None
            if self.quick is not None:  # (a fold's point: its first, with no neighbour, the cold solve's)
                if self.ready and self.ready[0][0] == kv:
                    x = self.ready.popleft()[1]
                else:
                    lpk = self.lp.with_budget(kv)
                    init = warm_start(lpk, self.cls, prev) if prev is not None else None
                    got = self.quick.fold_points(lpk, [kv, *ahead], init)
                    self.ready = deque(zip(ahead, got[1:]))
                    x = got[0] if got else None
            if x is not None:  # (the solve's answer, read only for the held-out loss and the next start)
                start = "warm" if prev is not None else "cold"
                point = PathPoint(kv, None, start, None, None, time.perf_counter() - t0, x=x)
                self.prev = x
                self.path.points.append(point)
                return point
            lpk = lpk if lpk is not None else self.lp.with_budget(kv)
            point = _solve_point(lpk, self.cls, self.options, kv, prev, self.start, "none" if self.fold else "fast")
        except ModelError as exc:
            msg = exc.message + (f" ({exc.hint})" if exc.hint else "")
            point = PathPoint(kv, None, self.start, None, None, 0.0, msg)
        point.time_s = time.perf_counter() - t0
        if point.ok:
            x = self.lp.layout.pack(point.result.values)
            point.x = x
            if point.usable:  # a diverged point is no start for the next
                self.prev = x
            if not self.fold:
                point.counts = degrees_of_freedom(self.lp, x)
                point.metrics["df"] = int(point.counts[0])
            if self.scorer is not None:
                point.metrics.update(self.scorer.score(self.lp, point.result))
            if not self.warmable and self.start != "cold" and not point.message:
                point.message = f"{self.cls.name} takes no starting point: solved cold"
        self.path.points.append(point)
        return point


class KernelFoldRun:
    """A cross-validation fold's path (:class:`PathRun`'s ``step``, ``ready`` and ``read_ahead``) on
    its solver's kernel alone (``kernel``: :meth:`~sparsemodel.solvers.base.Solver.fold_kernel`),
    with no lowering of the fold's model until the kernel answers no point: then ``make()`` builds
    the fold's :class:`PathRun` on that lowering, which continues from the last point on the same
    kernel problem (``kernel.adopt``). The same points as that run from the start (the kernel's
    calls are the ones its solver's ``fold_points`` makes on that lowering's arrays)."""

    def __init__(self, kernel: Any, make: Callable[[], PathRun]):
        self.kernel, self.make = kernel, make
        self.run: PathRun | None = None
        self.prev: np.ndarray | None = None
        self._ready: deque[tuple[int, np.ndarray]] = deque()
        self.read_ahead: dict[int, Any] = {}

    @property
    def ready(self) -> deque[tuple[int, np.ndarray]]:
        """The next bounds' points, answered ahead (:attr:`PathRun.ready`)."""
        return self.run.ready if self.run is not None else self._ready

    @property
    def lp(self) -> LoweredProblem:
        """The fold's lowering (built on first use)."""
        return self._lowered().lp

    def _lowered(self) -> PathRun:
        if self.run is None:
            self.run = self.make()
            self.run.prev = self.prev
            self.kernel.adopt(self.run.lp)  # (the kernel problem's state kept: the same last bits)
        return self.run

    def step(self, kv: int, ahead: Sequence[int] = ()) -> PathPoint:
        """The point at ``kv`` (:meth:`PathRun.step` of a fold)."""
        if self.run is None:
            t0 = time.perf_counter()
            if self._ready and self._ready[0][0] == kv:
                x: np.ndarray | None = self._ready.popleft()[1]
            else:
                got = self.kernel.points([kv, *ahead], self.prev.copy() if self.prev is not None else None)
                self._ready = deque(zip(ahead, got[1:]))
                x = got[0] if got else None
            if x is not None:
                point = PathPoint(kv, None, "warm" if self.prev is not None else "cold", None, None, 0.0, x=x)
                point.time_s = time.perf_counter() - t0
                self.prev = x
                return point
        return self._lowered().step(kv, ahead)


def run_path(
    problem: Model,
    lp: LoweredProblem,
    cls: type[Solver],
    k: Iterable[int] | int,
    options: dict[str, Any] | None = None,
    start: str = "best",
    progress: bool | None = False,
    stop: Callable[[SolutionPath], str | None] | None = None,
    scorer: Scorer | None = None,
) -> SolutionPath:
    """Solve with ``cls`` at every bound in ``k`` (in order) on ``lp`` (lowered once); see the
    module docstring for ``start``. ``stop`` (the early stop of :mod:`sparsemodel.workflows.select`)
    is asked after every point; when it returns a reason the path ends there and records it
    (``path.stopped``). ``scorer`` adds the held-out loss and the truth's metrics to every point."""
    run = PathRun(problem, lp, cls, options, start, scorer)
    ks = [lp.set.check_budget(v) for v in bounds_of(k) if v is not None]  # every bound checked before anything runs
    bar = progress_bar(total=len(ks), desc=f"path {cls.name}", unit="k", progress=progress)
    try:
        with blas_threads(lp):  # one BLAS thread limit around every point (a solve inside it sets none)
            for j, kv in enumerate(ks):
                bar.set_postfix_str(f"k={kv}")
                run.step(kv)
                bar.update(1)
                why = stop(run.path) if stop is not None and j + 1 < len(ks) else None
                if why:
                    run.path.stopped = why
                    run.path.skipped = ks[j + 1 :]
                    break
    finally:
        bar.close()
    return run.path


def _solve_point(
    lp: LoweredProblem,
    cls: type[Solver],
    options: dict[str, Any],
    k: int,
    prev: np.ndarray | None,
    start: str,
    bound: str = "fast",
) -> PathPoint:
    if lp.set.vacuous():  # every unit allowed: the constraint does nothing
        return PathPoint(k, full_model(lp, cls(**options), bound), "cold", None, None, 0.0)
    cold = warm = None
    if start in ("cold", "best") or prev is None:
        cold = cls(**options).solve(lp, bound=bound)
    if start in ("warm", "best") and prev is not None:
        try:
            warm = cls(**{**warm_options(cls, options), "init": warm_start(lp, cls, prev)}).solve(lp, bound=bound)
        except ModelError:
            if cold is None:
                raise
    fc = cold.objective if cold is not None else None
    fw = warm.objective if warm is not None else None
    if warm is not None and (cold is None or _better(warm, cold)):
        return PathPoint(k, warm, "warm", fc, fw, 0.0)
    return PathPoint(k, cold, "cold", fc, fw, 0.0)


def warm_options(cls: type[Solver], options: dict[str, Any]) -> dict[str, Any]:
    """The options of a warm solve: the solver's own for warm starts (auto: ``warm_options``), then
    the user's."""
    return {**getattr(cls, "warm_options", {}), **options}


def warm_start(lp: LoweredProblem, cls: type[Solver], prev: np.ndarray) -> np.ndarray:
    """The start of a warm solve from the neighbour's solution ``prev``: as it is for a solver that
    fills a short start itself (auto: by the largest model gains), with the gradient step outside
    its support for the others (:func:`neighbour_start`)."""
    return prev.copy() if getattr(cls, "fills_start", False) else neighbour_start(lp, prev)


def full_model(lp: LoweredProblem, solver: Solver, bound: str = "fast") -> Result:
    """The point at the largest bound (every unit may be nonzero), as ``Solver.solve`` answers it
    for every solver (:func:`sparsemodel.solvers.base.full_budget`), with its lower bound."""
    from ..solvers.base import full_budget
    from ..solvers.result import certify

    return certify(lp, full_budget(lp.fresh(), solver), bound)


def _better(a: Result, b: Result) -> bool:
    """a is strictly better than b: a usable status and a lower objective beyond rounding."""
    if a.status not in USABLE:  # bnb's optimal, time_limit and node_limit answers included
        return False
    if b.status not in USABLE or not math.isfinite(b.objective):
        return math.isfinite(a.objective)
    return a.objective < b.objective - 1e-12 * max(1.0, abs(b.objective))


class SolutionPath(Report):
    """The points of :func:`run_path`: ``points`` (one :class:`PathPoint` per k), ``at(k)`` (the
    Result at k), a table, CSV, JSON and a PNG plot (objective and time versus k)."""

    def __init__(self, problem: Any, solver: str, options: dict[str, Any], start: str):
        self.source = getattr(problem, "source", "<python>")
        self.solver = solver
        self.options = options
        self.start = start
        self.points: list[PathPoint] = []
        self.stopped: str | None = None  # why the path ended before its last k (an early stop)
        self.skipped: list[int] = []  # the k not computed after an early stop
        self.protected = protected_paths(problem)
        self.metric_columns: list[str] = []  # test_loss and the truth's metrics, when asked

    @property
    def columns(self) -> tuple[str, ...]:
        return with_metric_columns(PATH_COLUMNS, self.metric_columns)

    @property
    def metrics(self) -> list[str]:
        """The numeric columns a plot can show."""
        return ["objective", "lower_bound", "gap", "nnz", "df", "time_s", *self.metric_columns]

    # ------------------------------------------------------------------ access
    @property
    def ks(self) -> list[int]:
        return [p.k for p in self.points]

    @property
    def objectives(self) -> list[float | None]:
        return [p.result.objective if p.ok else None for p in self.points]

    @property
    def results(self) -> dict[int, Result]:
        return {p.k: p.result for p in self.points if p.ok}

    def at(self, k: int) -> Result:
        for p in self.points:
            if p.k == k:
                if p.result is None:
                    raise ConstraintError(f"the path failed at k={k}: {p.message}")
                return p.result
        raise ConstraintError(f"k={k} is not on this path", hint=f"the path has k = {self.ks}")

    def failed(self) -> list[PathPoint]:
        return [p for p in self.points if not p.ok]

    @property
    def unit(self) -> str:
        """What k counts (coordinates, groups, edges, rank), from the points solved."""
        return next((p.result.unit for p in self.points if p.ok), "")

    def rows(self) -> list[dict[str, Any]]:
        return [p.row() for p in self.points]

    def table_rows(self) -> list[dict[str, Any]]:
        return self.rows()

    def __repr__(self) -> str:
        return f"SolutionPath(solver={self.solver!r}, start={self.start!r}, k={self.ks}, errors={len(self.failed())})"

    # ------------------------------------------------------------------ reports
    def table(self, fmt: str = "simple") -> str:
        from tabulate import tabulate

        body = []
        for r in self.rows():
            body.append(
                [
                    r["k"],
                    "error" if r["objective"] is None else f"{r['objective']:.8g}",
                    "-" if r["gap"] is None else f"{r['gap']:.3g}",
                    "" if r["nnz"] is None else r["nnz"],
                    r["status"],
                    r["start"],
                    f"{r['time_s']:.3g}",
                ]
                + ["-" if r.get(c) is None else f"{r[c]:.6g}" for c in ["df", *self.metric_columns]]
            )
        head = [
            k_header(self.unit),
            "objective",
            "gap",
            "nnz",
            "status",
            "start",
            "time (s)",
            "df",
            *self.metric_columns,
        ]
        parts = [f"path of {self.solver} (start={self.start})", tabulate(body, headers=head, tablefmt=fmt)]
        if self.start == "best":
            won = sum(1 for p in self.points if p.ok and p.start == "warm")
            parts.append(f"the warm start was strictly better at {won} of {len(self.points)} points")
        if self.stopped:
            parts.append(
                f"stopped early after k={self.points[-1].k}: {self.stopped}; not computed: k = {_span(self.skipped)}"
            )
        notes = [f"  k={p.k}: {p.message}" for p in self.points if p.message]
        if notes:
            parts += ["notes"] + notes
        return "\n".join(parts)

    def __str__(self) -> str:
        return self.table()

    def to_dict(self) -> dict[str, Any]:
        details = []
        for p in self.points:
            d = p.row()
            if p.ok:
                r = p.result.to_dict()
                r.pop("history", None)
                d.update({key: v for key, v in r.items() if key not in ("k", "objective", "status", "message")})
            details.append(d)
        return jsonable(
            {
                "source": self.source,
                "solver": self.solver,
                "start": self.start,
                "unit": self.unit,
                "options": self.options,
                "stopped": self.stopped,
                "skipped": self.skipped,
                "points": details,
            }
        )

    def _repr_html_(self) -> str:
        """A notebook shows the table and the plot."""
        return report_html(self.rows(), self.columns, f"path of {self.solver} (start={self.start})", self.figure())

    def figure(self, metrics: Any = None) -> Any:
        """The plot as a matplotlib Figure (Agg canvas; pyplot's global state untouched)."""
        name = Path(self.source).name if not self.source.startswith("<") else "problem"
        if metrics is not None:
            from .figures import metric_figure

            chosen = metric_names(metrics, self.metrics)
            rows = self.rows()
            named = any(isinstance(r["k"], Mapping) for r in rows)  # several bounds by name: one tick each
            xs = list(range(len(rows))) if named else [r["k"] for r in rows]
            per = {m: (xs, [math.nan if r[m] is None else r[m] for r in rows], None) for m in chosen}
            return metric_figure(
                {self.solver: per},
                chosen,
                k_header(self.unit) or "k (bound)",
                f"{name}: path of {self.solver} over k",
                xticks=[str(r["k"]) for r in rows] if named else None,
            )
        fig, (ax_o, ax_t) = new_figure(2)
        named = any(isinstance(p.k, Mapping) for p in self.points)  # several bounds by name: one tick per point
        at = {id(p): (i if named else p.k) for i, p in enumerate(self.points)}
        ks = [at[id(p)] for p in self.points]
        objs = [p.result.objective if p.ok else math.nan for p in self.points]
        ax_o.plot(ks, objs, marker="o", label=self.solver)
        warm = [(at[id(p)], p.result.objective) for p in self.points if p.ok and p.start == "warm"]
        if warm and self.start == "best":
            ax_o.plot(*zip(*warm), "s", mfc="none", ms=10, label="warm start better")
        if all(v > 0 for v in objs if not math.isnan(v)) and any(not math.isnan(v) for v in objs):
            ax_o.set_yscale("log")
        ax_t.plot(ks, [max(p.time_s, 1e-6) for p in self.points], marker="o")
        ax_t.set_yscale("log")
        for ax, title, ylabel in ((ax_o, "objective", "f(x)"), (ax_t, "time per point", "seconds")):
            ax.set_xlabel(k_header(self.unit) or "k (bound)")
            if named:
                ax.set_xticks(ks, [str(p.k) for p in self.points], rotation=30, fontsize="small")
            ax.set_ylabel(ylabel)
            ax.set_title(title)
            ax.grid(True, alpha=0.3)
        ax_o.legend(fontsize="small")
        fig.suptitle(f"{name}: path of {self.solver} over k (start={self.start})")
        return fig


def _span(ks: list[int]) -> str:
    """k = 18..40 for a run of consecutive bounds, else the list."""
    if len(ks) > 2 and ks == list(range(ks[0], ks[0] + len(ks))):
        return f"{ks[0]}..{ks[-1]}"
    return ", ".join(str(k) for k in ks)


__all__ = ["PathPoint", "PathRun", "STARTS", "SolutionPath", "neighbour_start", "report_html", "run_path"]
