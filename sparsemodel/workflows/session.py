"""Sessions: lower, solve, compare, check, path and select (what ``Problem.solve`` and the CLI call).

This module sits above the solvers and the reports. The model layer never imports the lowerings,
the solvers or the reports: ``Problem.solve`` / ``compare`` / ``check`` / ``lower`` / ``path`` /
``select`` delegate here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ModelError, SolverError, UnboundedError
from ..lowering.lowered import LoweredProblem
from ..model.checks import label_errors
from ..model.dcp import AFFINE, CONSTANT, CONVEX
from ..model.expr import Parameter
from ..model.expr import fmt_shape as _fmt_shape
from ..model.problem import Model
from ..progress import SolveProgress
from ..sets.units import k_text, written_bound
from ..solvers import REGISTRY, auto_solver, get_solver, solvers_for
from ..solvers.result import Result
from ..util import fmt_number
from .options import StudyOptions
from .runner import workers
from .scheduler import use_scheduler


def lower(problem: Model, k: int | None = None) -> LoweredProblem:
    """The lowered problem, with the bound ``k`` (in the constraint set's unit) when given."""
    return LoweredProblem(problem, budget=None if k is None else k)


def _refuse_bad_models(problem: Model) -> None:
    ce = problem.convexity_error()
    if ce is not None:
        raise ce
    bad_labels = label_errors(problem.objective.expr)
    if bad_labels:
        raise bad_labels[0]


def located(exc: ModelError, span: Any) -> ModelError:
    """The error, located at ``span`` when it has no place of its own."""
    if exc.span is None and span is not None:
        exc.span = span
    return exc


def solver_errors(
    problem: Model, name: str, options: dict[str, Any], span: Any, lp: LoweredProblem | None = None
) -> list[ModelError]:
    """What is wrong with running ``name`` with ``options`` on ``problem``: an unknown name or
    option, a bad option value (located at ``span``, the model line that names them), a
    constraint the solver cannot take (located at the constraint), and, given the lowered problem
    ``lp``, an objective it cannot run on (``Solver.unfit``). ``auto`` with options is checked as the
    solver it runs on ``lp`` (without ``lp``: not checked)."""
    if name == "auto":
        if not options or lp is None:
            return []
        try:
            name = auto_solver(lp)
        except SolverError:  # no solver at all: check reports it once, from auto_solver
            return []
        try:
            get_solver(name).validate(options)
        except SolverError as exc:
            said = exc.message if name == "auto" else f"{exc.message} (auto runs {name} on this model)"
            return [SolverError(said, exc.span or span, exc.hint)]
        return []
    try:
        cls = get_solver(name)
    except SolverError as exc:
        return [located(exc, span)]
    errors: list[ModelError] = []
    try:
        cls.validate(options)
    except SolverError as exc:
        errors.append(located(exc, span))
    refused = cls.refuse(problem.requirements(), lp)
    if refused is not None:
        errors.append(refused)
    return errors


def solve(
    problem: Model,
    solver: str | None = None,
    k: int | None = None,
    scheduler: Any = None,
    progress: bool | None = False,
    bound: str = "fast",
    **options: Any,
) -> Result:
    """Solve with a registered solver; see :meth:`Problem.solve`. ``scheduler`` says where passes
    over dask data run (:mod:`sparsemodel.scheduler`); ``progress`` shows a bar (iterations,
    objective, passes over the data) for solves longer than half a second: True always, None on a
    terminal or in a notebook (:mod:`sparsemodel.progress`), False never. ``bound``: the lower
    bound beside the answer (fast, tight or none; docs/certify.md)."""
    with use_scheduler(scheduler, problem):
        return _solve(problem, solver, k, progress, bound, **options)


def _solve(
    problem: Model, solver: str | None, k: int | None, progress: bool | None, bound: str = "fast", **options: Any
) -> Result:
    _refuse_bad_models(problem)
    if problem.solve_with is not None and solver in (None, problem.solve_with[0]):
        name, opts, span = problem.solve_with
        solver = name
        options = {**opts, **options}
        errs = solver_errors(problem, name, options, span)
        if errs:
            raise errs[0]
    solver = solver or "auto"
    lp = lower(problem, k)
    if solver == "auto":
        if problem.solve_with is not None and problem.solve_with[0] == "auto":
            errs = solver_errors(problem, "auto", options, problem.solve_with[2], lp)
            if errs:
                raise errs[0]
        solver = auto_solver(lp)
    cls = get_solver(solver)
    inst = cls(**options)
    bar = SolveProgress(solver, inst.opts.get("max_iter"), enabled=progress) if progress is not False else None
    try:
        result = inst.solve(lp, progress=bar, bound=bound)
    finally:
        if bar is not None:
            bar.close()
    problem.store(result.values)
    return result


def compare(
    problem: Model,
    solvers: Iterable[str] | str,
    k: Iterable[int] | int | None = None,
    options: dict[str, dict[str, Any]] | None = None,
    sweep: Any = None,
    study: StudyOptions | None = None,
):
    """Several solvers side by side over a sweep of the bound or of a param (see
    :func:`sparsemodel.workflows.compare.compare`); ``study``: the progress bar, the scheduler, the
    output CSV, and the held-out data and truth that add their metrics to every row."""
    from .compare import compare as run_compare

    study = study if study is not None else StudyOptions(progress=None)
    with use_scheduler(study.scheduler, problem):
        _refuse_bad_models(problem)
        cw = problem.compare_with or {}
        try:
            return run_compare(problem, solvers, k, options, sweep, study)
        except ModelError as exc:  # the model's compare line named them: point at it
            if cw and list(solvers) == cw.get("solvers"):
                raise located(exc, cw.get("span")) from None
            raise


def _with_default_solver(problem: Model, solver: str | None, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The solver name and options: the given ones, else the model file's ``solve with`` line, else auto."""
    if solver is None and problem.solve_with is not None:
        name, opts, _ = problem.solve_with
        return name, {**opts, **options}
    return solver or "auto", options


def solver_class(lp: LoweredProblem, name: str) -> type[Any]:
    """The registered solver class for ``name``; ``auto`` is the default for the problem's
    constraint kinds (``auto_solver``: the ``auto`` solver when it handles them all)."""
    if name == "auto":
        name = auto_solver(lp)
    return get_solver(name)


def path(
    problem: Model,
    k: Iterable[int] | int,
    solver: str | None = None,
    start: str = "best",
    study: StudyOptions | None = None,
    **options: Any,
):
    """A warm-started path over the bound (see :mod:`sparsemodel.workflows.path`): one lowering,
    ``lp.with_budget(k)`` at each k, each point started from its neighbour's solution; returns a
    :class:`~sparsemodel.workflows.path.SolutionPath`. ``study.test`` and ``study.truth`` add the
    held-out loss and the truth's metrics to every point (:mod:`sparsemodel.workflows.metrics`);
    ``options`` are the solver's."""
    from .path import run_path

    study = study if study is not None else StudyOptions()
    study.refuse_jobs("path", "a path is one warm-started chain, which runs in this process")
    with _session(problem, solver, options, study) as (lp, cls, options, scorer):
        return run_path(problem, lp, cls, k, options, start=start, progress=study.progress, scorer=scorer)


def select(
    problem: Model,
    k: Iterable[int] | int | None = None,
    solver: str | None = None,
    study: StudyOptions | None = None,
    **options: Any,
):
    """Choose the bound among ``k`` (default: 0 to n / (log(log n) log p)) by an information
    criterion (``aic``, ``bic``, ``ebic`` -- the default --, ``gic``) or cross-validation
    (``by="cv"``), as ``study.select`` says, over a warm-started path that stops once the curve has
    clearly turned (see :mod:`sparsemodel.workflows.select`); returns a
    :class:`~sparsemodel.workflows.select.Selection`. ``study.test`` and ``study.truth`` add the
    held-out loss and the truth's metrics to every k of the curve; ``study.n_jobs`` runs
    cross-validation's folds on that many workers (:mod:`sparsemodel.workflows.runner`; with
    ``study.scheduler`` a dask cluster's), the same curve as serially; ``options`` are the solver's."""
    from .select import run_select

    study = study if study is not None else StudyOptions()
    with _session(problem, solver, options, study, workers(study.n_jobs)) as (lp, cls, options, scorer):
        return run_select(problem, lp, cls, k, options, study.select, study.progress, scorer, study.n_jobs)


@contextmanager
def _session(
    problem: Model, solver: str | None, options: dict[str, Any], study: StudyOptions, workers: int | None = None
) -> Iterator[Any]:
    """What path and select run on: the problem refused when it cannot run, lowered once under the
    study's scheduler (``workers``: select's folds on workers; ``scheduler="local"`` is then a
    cluster of that many processes), the solver class (the model file's ``solve with`` when none is
    named) with its options, and the scorer of the study's held-out data and truth."""
    from .metrics import make_scorer

    _refuse_bad_models(problem)
    solver, options = _with_default_solver(problem, solver, options)
    with use_scheduler(study.scheduler, problem, workers):
        lp = lower(problem)
        yield lp, solver_class(lp, solver), options, make_scorer(problem, lp, test=study.test, truth=study.truth)


# ---------------------------------------------------------------------- check


def _fmt_value(v: np.ndarray) -> str:
    """A param's value as the user writes it: ``3``, not ``3.0``; ``1e-05``; a list of them."""
    a = np.asarray(v, dtype=float)
    if a.ndim == 0:
        return fmt_number(a)
    return "[" + ", ".join(fmt_number(x) for x in a.ravel()) + "]"


def _fmt_opt(v: Any) -> str:
    """An option value as the model language writes it."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    return str(v)


@dataclass
class CheckReport:
    """What `sparsemodel check` prints: shapes, convexity, constraint sets, applicable solvers."""

    source: str
    variables: list[tuple[str, tuple[int, ...], bool]]
    data: list[tuple[str, tuple[int, ...], str]]
    params: list[tuple[str, str]]  # (name, value as written: 3, not 3.0)
    objective: str
    curvature: str
    structure: str
    constraints: list[tuple[str, str, str]]
    solvers: list[tuple[str, str]]
    default_solver: str | None
    solve_with: str | None
    compare_with: str | None
    samples: int | None = None
    stochastic: bool = False  # a solver that samples rows runs on the model
    lower_bound: str = ""  # which lower bound the answers get (docs/certify.md), or why none
    errors: list[ModelError] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def render(self) -> str:
        out = [f"model       {self.source}"]
        for name, shape, sym in self.variables:
            out.append(f"variable    {name}  shape {_fmt_shape(shape)}{'  symmetric' if sym else ''}")
        for name, shape, kind in self.data:
            out.append(f"data        {name}  shape {_fmt_shape(shape)}  {kind}")
        for name, val in self.params:
            out.append(f"param       {name} = {val}")
        out.append(f"objective   {self.objective}")
        out.append(f"convexity   {self.curvature}")
        out.append(f"structure   {self.structure}")
        if self.samples:
            which = (
                "the stochastic solvers apply" if self.stochastic else "no stochastic solver takes these constraints"
            )
            out.append(f"samples     {self.samples} (a finite sum: {which})")
        for text, kind, detail in self.constraints:
            out.append(f"constraint  {text}   [{kind}] {detail}")
        if not self.constraints:
            out.append("constraint  (none)")
        if self.solvers:
            out.append("solvers     " + ", ".join(f"{n}" for n, _ in self.solvers))
        if self.lower_bound:
            out.append(f"lower bound {self.lower_bound}")
        if self.default_solver:
            out.append(f"auto        {self.default_solver}")
        if self.solve_with:
            out.append(f"solve with  {self.solve_with}")
        if self.compare_with:
            out.append(f"compare     {self.compare_with}")
        for n in self.notes:
            out.append(f"note        {n}")
        for e in self.errors:
            out.append(e.render())
        out.append("ok" if self.ok else f"{len(self.errors)} problem(s) found")
        return "\n".join(out)

    def __str__(self) -> str:
        """``print(problem.check())`` prints what ``sparsemodel check`` prints."""
        return self.render()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython and Jupyter show the same report
        p.text(self.render())


def bound_notes(lp: LoweredProblem | None) -> list[str]:
    """A param named like the bound (k, or r for a rank) that the bound counts differently
    (``nnz(offdiag(O)) <= k`` counts entries, sparsemodel's k edges): said, since --k, k= and
    Result.k mean the bound in its unit."""
    s = lp.set if lp is not None else None
    if s is None or not s.thresholds:
        return []
    out = []
    for c, part in s.members():  # each part of several bounds
        expr = getattr(c, "k_expr", None) or getattr(c, "r_expr", None)
        for node in expr.walk() if expr is not None else []:
            if isinstance(node, Parameter) and node.name in ("k", "r") and float(node.value) != part.budget:
                want = written_bound(node.name, part.unit)
                out.append(
                    f"param {node.name} = {float(node.value):g} but the bound {part.bound_text()} is "
                    f"{k_text(part.budget, part.unit)}: --k, k= and Result.k count the bound in {part.unit}; "
                    f"write the bound as {want} (or name the param otherwise) so that both mean one thing"
                )
    return out


def _storage(d: Any) -> str:
    if getattr(d, "chunked", False):
        return f"dask ({len(d.value.chunks[0])} row blocks)"
    return "sparse" if not isinstance(d.value, np.ndarray) else "dense"


def _curvature_text(problem: Model) -> str:
    """The convexity line of ``check``: of the function minimized, or of f in ``maximize f``."""
    o = problem.objective
    form = problem.recognised_form() if hasattr(problem, "recognised_form") else None
    if form is not None:
        return f"non-convex, recognised: {form}"
    if o.maximize:
        return {CONVEX: "concave", AFFINE: "affine", CONSTANT: "constant"}.get(
            o.expr.curvature, f"NOT concave ({o.stated.curvature})"
        )
    return {CONVEX: "convex", AFFINE: "affine", CONSTANT: "constant"}.get(
        o.expr.curvature, f"NOT convex ({o.expr.curvature})"
    )


def check(problem: Model) -> CheckReport:
    """Shapes, convexity, labels, the constraint sets with their bounds, and the solvers that apply."""
    errors: list[ModelError] = []
    e = problem.objective.expr
    ce = problem.convexity_error()
    if ce is not None:
        errors.append(ce)
    errors.extend(label_errors(e))
    structure = "(not lowered)"
    default = None
    lp: LoweredProblem | None = None
    try:
        lp = LoweredProblem(problem)
        structure = lp.structure
        why = lp.unbounded_direction()
        if why is not None:
            errors.append(
                UnboundedError(
                    why,
                    problem.objective.span,
                    "add a term with curvature along those coordinates (for example lam * sum_squares(w)), or check the signs",
                )
            )
        if ce is None:
            try:
                default = auto_solver(lp)
                plan = getattr(REGISTRY[default], "plan", None)
                if plan is not None:  # a pipeline: say what it runs on this problem
                    default = f"{default} ({plan(lp)})"
            except SolverError as exc:
                errors.append(exc)
    except ModelError as exc:
        errors.append(exc)
    cons = []
    kinds = set()
    sets = {}
    if lp is not None:
        for s in [lp.set] + lp.side:
            if s is not None:
                for c, part in s.members():  # a Box holds every bound, a product its parts
                    sets[id(c)] = part
    for c in problem.requirements():
        kinds.add(c.kind)
        s = sets.get(id(c))
        if s is None and lp is not None and lp.set is not None and lp.set.kind == c.kind:
            s = lp.set  # the product of several bounds: not a written constraint
        detail = s.describe() if s is not None else f"on {c.variable.name}"
        handlers = solvers_for(c.kind, {k.kind for k in problem.requirements()}, lp)
        detail += f"; solvers: {', '.join(handlers)}" if handlers else "; no solver yet"
        cons.append((str(c), c.kind, detail))
    # the one capability test (Solver.takes with the lowered problem): a solver listed here runs
    applicable = [(n, cls.summary) for n, cls in REGISTRY.items() if cls.takes(kinds, lp)]
    if problem.solve_with:
        name, opts, span = problem.solve_with
        errors.extend(solver_errors(problem, name, opts, span, lp))
    if problem.compare_with:
        cw_ = problem.compare_with
        for name in cw_["solvers"]:
            errors.extend(solver_errors(problem, name, {}, cw_.get("span"), lp))
    sw = None
    if problem.solve_with:
        name, opts, _ = problem.solve_with
        sw = name + ("(" + ", ".join(f"{k} = {_fmt_opt(v)}" for k, v in opts.items()) + ")" if opts else "")
    cw = None
    if problem.compare_with:
        cw = ", ".join(problem.compare_with["solvers"])
        if problem.compare_with.get("sweep") is not None:
            cw += f" at {problem.compare_with['sweep']} in {problem.compare_with['text']}"
    certify_line = ""
    if lp is not None and lp.set is not None and lp.set.thresholds:
        from ..lowering.bound import bound_plan

        certify_line = bound_plan(lp)
    return CheckReport(
        lower_bound=certify_line,
        notes=bound_notes(lp),
        source=problem.source,
        variables=[(v.name, v.shape, v.symmetric) for v in problem.variables],
        data=[(n, d.shape, _storage(d)) for n, d in problem.data.items()],
        params=[(n, _fmt_value(p.value)) for n, p in problem.params.items()],
        objective=str(problem.objective) if problem.objective.maximize else str(e),
        curvature=_curvature_text(problem),
        structure=structure,
        constraints=cons,
        solvers=applicable,
        default_solver=default,
        solve_with=sw,
        compare_with=cw,
        samples=(lp.design.n_samples if lp is not None and lp.design is not None and lp.design.finite_sum else None),
        stochastic=any(REGISTRY[n].stochastic for n, _ in applicable),
        errors=errors,
    )


__all__ = ["CheckReport", "check", "compare", "lower", "path", "select", "solve", "solver_class"]
