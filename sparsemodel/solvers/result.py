"""What a run gives back, the same for every solver: the statuses, :class:`Result` (the point,
its support and bound from the constraint set, the objective, history, certificate, names),
:class:`History` (the per-iteration log) and :func:`finish`, which every solver ends with."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..lowering.forms import point_facts
from ..sets.units import k_text
from ..sets.views import View
from ..util import jsonable
from .report import ResultText

if TYPE_CHECKING:  # annotations only
    from ..lowering.lowered import LoweredProblem

CONVERGED = "converged"
MAX_ITER = "max_iter"
DIVERGED = "diverged"
INFEASIBLE = "infeasible"
UNBOUNDED = "unbounded"
OPTIMAL = "optimal"  # bnb: the answer is proved optimal (gap <= gap_tol)
TIME_LIMIT = "time_limit"  # bnb: stopped by its time limit (the answer and the gap reached)
NODE_LIMIT = "node_limit"  # bnb: stopped by its node limit
# the statuses of an answer a solver stands by (a feasible point, its objective, a bound beside it)
USABLE = (CONVERGED, MAX_ITER, OPTIMAL, TIME_LIMIT, NODE_LIMIT)
STATUSES = (CONVERGED, MAX_ITER, OPTIMAL, TIME_LIMIT, NODE_LIMIT, DIVERGED, INFEASIBLE, UNBOUNDED)


class Ran(Protocol):
    """What :func:`finish` reads of the solver that ran (every :class:`~sparsemodel.solvers.base.Solver`
    is one): its name and its options. Stated here so that the results need nothing of base.py,
    which builds on them."""

    name: str
    opts: dict[str, Any]


@dataclass
class Result(ResultText):
    """The outcome of one solve, the same for every solver.

    ``x`` is the constrained (primary) variable in its own shape, ``support`` the 0-based indices
    into its flattening of the selected coordinates, ``values`` every variable by name.
    ``history`` has one entry per iteration: objective, elapsed seconds, IFO count (gradient
    evaluations counted per sample), hard-thresholding count.

    ``k`` is the bound in the constraint's unit (``unit``: coordinates, groups, edges of a
    symmetric matrix, or the rank; ``k_text`` prints it, ``k = 5 edges (10 entries)``), the same
    number as ``--k``, ``k=`` and the ``k`` column of every table.

    Several bounded variables (``rank(L) <= r`` and ``nnz(S) <= k``): ``k`` holds one bound per
    part by name (``r.k == {"L": 5, "S": 30}``, ``unit`` is ``"per variable"``), ``x`` and
    ``support`` are the first bounded variable's, and ``blocks`` says each part's bound, support
    and what its set reports (the rank and singular values of a rank part); ``support_of(name)``
    reads one part's support.

    Names: ``names`` labels every coordinate of every variable (from CSV headers, ``.npz`` names or
    DataFrame columns, :mod:`sparsemodel.model.names`; a coordinate without a name is written as
    its position, ``w[3]`` or ``W[2, 5]``); ``support_names`` and ``support_positions`` (``(row,
    col)`` for a matrix) read the support through them; :meth:`coefficients` and
    :meth:`to_frame` (pandas) give the coefficient table that ``summary()`` prints.
    """

    x: np.ndarray
    support: np.ndarray
    objective: float
    status: str
    iterations: int
    time_s: float
    solver: str
    variable: str
    shape: tuple[int, ...]
    k: int | None  # the bound, from the constraint set, in its unit (``unit``)
    values: dict[str, np.ndarray]
    options: dict[str, Any]
    history: dict[str, list[float]] = field(default_factory=dict)
    certificate: dict[str, Any] | None = None
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    unit: str = ""  # what k counts: coordinates, groups, edges, rank
    counters: dict[str, int] = field(default_factory=dict)  # the run's oracle counters
    names: Mapping[str, Any] = field(
        default_factory=dict
    )  # per variable: its names (model.names.VariableNames; read on first use)
    bound: str = ""  # the constraint as solved, nnz(w[1:]) <= 10
    symmetric: bool = False  # the primary variable is a symmetric matrix (an edge is one pair)
    groups: list[str] = field(default_factory=list)  # the kept groups, by name (group sparsity)
    # docs/certify.md: a lower bound on the best objective of the problem solved (None: none exists or not
    # asked for; ``bound_note`` says which relaxation gave it, or why there is none), and the gap
    # (f - lower_bound) / max(|f|, 1): 0 means the answer is certified optimal
    lower_bound: float | None = None
    gap: float | None = None
    bound_note: str = ""
    bound_how: str = ""  # fast, tight, bnb (the tree's proof) or "" (none)
    # several bounded variables (a product of sets): per part, by name, its variable, bound as
    # solved, k, unit, k_text and support (positions into its variable), and what its set reports
    blocks: dict[str, dict[str, Any]] = field(default_factory=dict)
    # how the reports show what the set selected (the set's facts: sets/views.py); not in to_dict
    view: View = field(default_factory=View, repr=False, compare=False)

    # ------------------------------------------------------------------ names
    @property
    def k_text(self) -> str:
        """The bound with its unit: ``k = 10 coordinates``, ``k = 5 edges (10 entries)``, ``r = 2``."""
        return k_text(self.k, self.unit)

    def label(self, i: int, variable: str | None = None) -> str:
        """The name of coordinate ``i`` (flat, C order) of ``variable`` (default: the primary)."""
        var = variable or self.variable
        return coordinate_label(self.names.get(var), var, np.shape(self.values.get(var, self.x)), i)

    def labels(self, variable: str | None = None) -> list[str]:
        """One label per coordinate (C order) of ``variable`` (default: the primary variable)."""
        var = variable or self.variable
        return [self.label(i, var) for i in range(int(np.size(self.values.get(var, self.x))))]

    def axis_names(self, variable: str | None = None) -> list[list[str] | None]:
        """Per axis of ``variable``: the names of its positions (None for an axis without names)."""
        got = self.names.get(variable or self.variable)
        return (
            got.axis_names()
            if got is not None
            else [None] * len(np.shape(self.values.get(variable or self.variable, self.x)))
        )

    def support_of(self, name: str) -> np.ndarray:
        """The support of a part of several bounds (``blocks``, by name), or of the primary
        variable: positions into the flattened variable."""
        if name in self.blocks:
            return np.asarray(self.blocks[name]["support"], dtype=np.int64)
        if name in (self.variable, None):
            return self.support
        raise KeyError(f"no bounded part named {name!r}; the parts are: {', '.join(self.blocks) or self.variable}")

    @property
    def support_names(self) -> list[str]:
        """The names of the selected coordinates (of ``support``)."""
        var = self.variable
        names, shape = self.names.get(var), np.shape(self.values.get(var, self.x))  # (read once, not per label)
        return [coordinate_label(names, var, shape, int(i)) for i in self.support]

    @property
    def support_positions(self) -> list[tuple[int, ...]]:
        """The support as positions in the variable: ``(i,)`` for a vector, ``(row, col)`` for a
        matrix (not the flat index ``row * cols + col``)."""
        if len(self.shape) == 0:
            return [() for _ in self.support]
        if len(self.shape) == 1:
            return [(int(i),) for i in self.support]
        return [tuple(int(v) for v in np.unravel_index(int(i), self.shape)) for i in self.support]

    def coefficients(self, all: bool = False) -> list[dict[str, Any]]:  # noqa: A002 - the table's word
        """The coefficient table: one row (``variable``, ``position``, ``name``, ``value``) per
        nonzero coordinate of the primary variable (of its upper triangle for a symmetric matrix;
        every coordinate with ``all=True``), then every coordinate of the other variables (free:
        intercepts). Free coordinates of the primary variable (an intercept w[0]) come first."""
        rows: list[dict[str, Any]] = []
        free_first: list[dict[str, Any]] = []
        bounded = {b["variable"] for b in self.blocks.values()}  # several bounds: each part as its nonzeros
        hidden = set() if all else self.view.hidden()  # dense parts (a low-rank matrix: its rank is in blocks)
        for var, value in [(self.variable, self.x)] + [(n, v) for n, v in self.values.items() if n != self.variable]:
            v = np.asarray(value, dtype=float)
            flat = v.ravel()
            if var in hidden:
                continue  # a dense low-rank matrix (its rank and singular values are in blocks)
            if var in bounded and var != self.variable:
                for i in np.flatnonzero(flat) if not all else range(flat.size):
                    pos = tuple(int(p) for p in np.unravel_index(int(i), v.shape)) if v.ndim else ()
                    rows.append(
                        {"variable": var, "position": pos, "name": self.label(int(i), var), "value": float(flat[i])}
                    )
                continue
            primary = var == self.variable
            on = set(int(i) for i in self.support) if primary else set()
            which = np.flatnonzero(flat) if primary and not all else np.arange(flat.size)  # only what is shown
            for i in (int(j) for j in which):
                pos = tuple(int(p) for p in np.unravel_index(i, v.shape)) if v.ndim else ()
                if primary and not all and self.symmetric and len(pos) == 2 and pos[0] > pos[1]:
                    continue
                row = {"variable": var, "position": pos, "name": self.label(i, var), "value": float(flat[i])}
                if primary and self.view.free_first and i not in on and flat[i] != 0:
                    free_first.append(row)  # w[0] of nnz(w[1:]) <= k: always in the model
                else:
                    rows.append(row)
        return free_first + rows

    def to_frame(self, all: bool = False) -> Any:  # noqa: A002
        """The coefficient table (:meth:`coefficients`) as a pandas DataFrame: columns
        ``variable``, ``name``, ``position`` (and ``row``, ``col`` for matrices) and ``value``.
        Needs pandas; without it, :meth:`coefficients` gives the same rows as dicts."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError(
                "Result.to_frame() needs pandas, which is not installed (pip install pandas); "
                "Result.coefficients() gives the same table as a list of dicts"
            ) from None
        rows = []
        for r in self.coefficients(all=all):
            row = {"variable": r["variable"], "name": r["name"], "position": r["position"], "value": r["value"]}
            if len(r["position"]) == 2:
                row["row"], row["col"] = r["position"]
            rows.append(row)
        cols = ["variable", "name", "position"] + (["row", "col"] if any("row" in r for r in rows) else []) + ["value"]
        return pd.DataFrame(rows, columns=cols)

    def to_dict(self) -> dict[str, Any]:
        extra_names: dict[str, Any] = {}
        if len(self.shape) >= 2:
            extra_names["support_positions"] = [list(p) for p in self.support_positions]
        return {
            "solver": self.solver,
            "status": self.status,
            "objective": jsonable(self.objective),
            "variable": self.variable,
            "shape": list(self.shape),
            "k": jsonable(self.k),
            "unit": self.unit,
            "bound": self.bound,
            "k_text": self.k_text,
            "counters": jsonable(self.counters),
            "support": [int(i) for i in self.support],
            "support_names": self.support_names,
            **extra_names,
            "names": jsonable(self.axis_names()),
            "coefficients": [
                {**r, "position": list(r["position"]), "value": jsonable(r["value"])}
                for r in (self.coefficients() if not self.view.dense else [])
            ],
            "x": jsonable(np.asarray(self.x).tolist()),
            "values": {k: jsonable(np.asarray(v).tolist()) for k, v in self.values.items()},
            "lower_bound": jsonable(self.lower_bound),
            "gap": jsonable(self.gap),
            "bound_how": self.bound_how,
            "bound_note": self.bound_note,
            "iterations": int(self.iterations),
            "time_s": float(self.time_s),
            "certificate": jsonable(self.certificate),
            "options": jsonable(self.options),
            "history": jsonable(self.history),
            "message": self.message,
            "extra": jsonable(self.extra),
            **({"blocks": jsonable(self.blocks)} if self.blocks else {}),
        }

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @property
    def top_supports(self) -> list[dict[str, Any]]:
        """bnb's m best supports (``top=m``), best first: each with ``objective``, ``support``
        (positions in the variable), ``names`` and ``units``; ``extra["top_shares"]`` gives each
        unit's share among them. Empty for every other run."""
        return list(self.extra.get("top_supports", []))

    @property
    def gap_text(self) -> str:
        """The gap as the reports print it: ``1.2e-05 (tight bound)``, ``0 (proved optimal)``, or the
        reason there is none."""
        if self.gap is None:
            return f"none ({self.bound_note})" if self.bound_note else "none"
        how = {"bnb": "proved by bnb", "fast": "fast bound", "tight": "tight bound"}.get(self.bound_how, self.bound_how)
        return f"{self.gap:.3g} ({how})"

    def __repr__(self) -> str:
        gap = f", gap={self.gap:.3g}" if self.gap is not None else ""
        return (
            f"Result(solver={self.solver!r}, status={self.status!r}, objective={self.objective:.6g}{gap}, "
            f"nnz={len(self.support)}, iterations={self.iterations}, time_s={self.time_s:.3g})"
        )


class History:
    """Per-iteration log: objective, time, IFO and hard-thresholding count (paper 002, Definition
    1), read from the run's oracle counters."""

    def __init__(
        self, lp: LoweredProblem, clock: Callable[[], float], progress: Callable[[int, float], Any] | None = None
    ):
        self.oracle = lp.oracle
        self.clock = clock
        self.rows: dict[str, list[float]] = {"objective": [], "time_s": [], "ifo": [], "ht": []}
        self.progress = progress  # called with (iteration, objective) at every log (a progress bar)

    def log(self, f: float, **extra: float) -> None:
        if self.progress is not None:
            if "bound" in extra:  # a certifying run (bnb): the bar also shows the bound and the gap
                self.progress(len(self.rows["objective"]) + 1, float(f), **extra)
            else:
                self.progress(len(self.rows["objective"]) + 1, float(f))
        self.rows["objective"].append(float(f))
        self.rows["time_s"].append(self.clock())
        self.rows["ifo"].append(float(self.oracle.ifo))
        self.rows["ht"].append(float(self.oracle.ht))
        for k, v in extra.items():
            self.rows.setdefault(k, []).append(float(v))


def ht_certificate(
    lp: LoweredProblem, x: np.ndarray, gamma: float, g: np.ndarray | None = None, rtol: float = 1e-6
) -> dict[str, Any]:
    """The paper-001 Definition 4 certificate of x for step gamma, in the terms of the problem's
    constraint set (see ``ConstraintSet.certificate``)."""
    if g is None:
        _, g = lp.value_and_grad(x)
    return lp.set.certificate(x, g, gamma, rtol)


def finish(
    lp: LoweredProblem,
    solver: Ran,
    x: np.ndarray,
    status: str,
    iterations: int,
    clock: Callable[[], float],
    history: History | None = None,
    f: float | None = None,
    certificate: dict[str, Any] | None = None,
    gamma: float | None = None,
    message: str = "",
    extra: dict[str, Any] | None = None,
) -> Result:
    """Build the common Result (and the HT-stability certificate when a step gamma applies).
    The bound and the support come from the constraint set. A precision matrix that is the last
    restricted solve, done to the loose inner tolerance, is polished first (``lp.polish``)."""
    if status in (CONVERGED, MAX_ITER):
        xp = lp.polish(x)
        if xp is not x:
            x, f = xp, None
    if f is None:
        f = lp.oracle.peek(x)
    if not np.isfinite(f) and status not in (DIVERGED, UNBOUNDED):
        status = INFEASIBLE
        message = message or (
            f"the objective is {f} at the returned point: it lies outside the domain of the loss "
            "(for example logdet or log of a non-positive argument); start inside the domain with init=..."
        )
    s = lp.set
    if (
        certificate is None
        and gamma is not None
        and s is not None
        and s.thresholds
        and status not in (DIVERGED, UNBOUNDED)
    ):
        certificate = ht_certificate(lp, x, gamma)
    var = lp.primary
    values = lp.unpack(x)
    extra = dict(extra or {})
    if getattr(lp.problem.objective, "maximize", False):
        extra.setdefault("maximum", -float(f))  # maximize g is solved as minimize -g: f = -g(x)
    support = s.nonzeros(x) if s is not None else np.flatnonzero(np.asarray(values[var.name]).ravel() != 0)
    for key, v in point_facts(lp, x).items():  # a precision matrix: its spectrum and its graph
        extra.setdefault(key, v)
    names = LazyNames(lp.problem)
    said = s.report(x, support, _LazyVariableNames(names, var.name)) if s is not None else {}
    for key, v in said.get("extra", {}).items():
        extra.setdefault(key, v)
    kept = said.get("groups", [])
    blocks = said.get("blocks", {})
    if certificate is not None and not _finite_certificate(certificate):
        certificate = None  # computed from NaN or inf (a step that is not a number): it says nothing
    return Result(
        x=np.asarray(values[var.name]),
        support=support,
        objective=float(f),
        status=status,
        iterations=int(iterations),
        time_s=clock(),
        solver=solver.name,
        variable=var.name,
        shape=var.shape,
        k=s.budget if s is not None else None,
        values=values,
        options=shown_options(solver),
        history=history.rows if history is not None else {},
        certificate=certificate,
        message=message,
        extra=extra,
        unit=s.unit if s is not None else "",
        counters=lp.oracle.stats(),
        names=names,
        bound=s.bound_text() if s is not None else "",
        symmetric=bool(getattr(var, "symmetric", False)),
        groups=kept,
        blocks=blocks,
        view=s.view if s is not None else View(),
    )


def shown_options(solver: Ran) -> dict[str, Any]:
    """The solver's options as a Result shows them (an array as ``<array>``): a new dict, from one
    made per solver object (its options are fixed when it is made; a path solves with one many times)."""
    kept = getattr(solver, "__dict__", {})
    shown = kept.get("_shown_options")
    if shown is None or shown[0] is not solver.opts:
        shown = (solver.opts, {k: (v if not isinstance(v, np.ndarray) else "<array>") for k, v in solver.opts.items()})
        kept["_shown_options"] = shown
    return dict(shown[1])


def relative_gap(f: float, lb: float) -> float:
    """(f - lb) / max(|f|, 1), never below 0 (a bound above f by rounding is f itself)."""
    return max(0.0, (f - lb) / max(abs(f), 1.0))


def certify(lp: LoweredProblem, res: Result, mode: str = "fast") -> Result:
    """Attach the lower bound and the gap to a solver's answer (docs/certify.md; ``mode``: fast, tight or
    none, Solver.solve's ``bound`` argument): the bound of the perspective relaxation at the
    answer (lowering/bound.py), or the solver's own proved bound (bnb) when that is higher; where
    no bound exists, ``bound_note`` says why."""
    if mode == "none":
        res.bound_note = res.bound_note or "not computed (bound='none')"
        return res
    if res.status not in USABLE or not math.isfinite(res.objective):
        res.bound_note = f"no bound: the run ended {res.status}"
        return res
    x = np.concatenate([np.ravel(np.asarray(res.values[v.name], dtype=float)) for v in lp.layout.variables])
    from ..lowering.bound import lower_bound  # (here: a solve with bound='none' or unusable never loads it)

    rep = lower_bound(lp, x, mode)
    res.extra["bound_s"] = rep.seconds
    lb, how, note = rep.value, rep.how, rep.note
    if res.lower_bound is not None:  # the solver's own proof (bnb) names the bound; the higher value counts
        lb = res.lower_bound if lb is None else max(lb, res.lower_bound)
        how, note = res.bound_how or "bnb", res.bound_note or note
    if lb is None:
        res.lower_bound, res.gap, res.bound_how, res.bound_note = None, None, "", note
        return res
    lb = min(float(lb), float(res.objective))  # rounding can put a valid bound above f
    res.lower_bound, res.gap, res.bound_how, res.bound_note = lb, relative_gap(res.objective, lb), how, note
    return res


def _finite_certificate(c: dict[str, Any]) -> bool:
    return all(math.isfinite(v) for v in c.values() if isinstance(v, (float, int)) and not isinstance(v, bool))


def coordinate_label(names: Any, var: str, shape: tuple[int, ...], i: int) -> str:
    """The name of coordinate ``i`` (flat, C order) of the variable ``var``: from its names
    (:class:`~sparsemodel.model.names.VariableNames`, an intercept as ``(intercept)``), else its
    position, ``w[3]`` or ``W[2, 5]``. Every report names coordinates through this function."""
    if names is not None:
        return names.label(int(i))
    if len(shape) == 0:
        return var
    return f"{var}[{', '.join(str(int(v)) for v in np.unravel_index(int(i), shape))}]"


class LazyNames(Mapping):
    """A problem's coordinate names (:func:`problem_names`) read from its objective on first use: a
    solve in a loop (a path, a study, a rebinding) pays nothing for names no report asks for. It
    pickles as the plain dict (a worker's Result does not carry the problem back)."""

    def __init__(self, problem: Any):
        self._names: dict[str, Any] | None = getattr(problem, "_coordinate_names", None)
        self._problem = problem if self._names is None else None

    def _got(self) -> dict[str, Any]:
        if self._names is None:
            self._names = problem_names(self._problem)
            self._problem = None
        return self._names

    def __getitem__(self, key: str) -> Any:
        return self._got()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._got())

    def __len__(self) -> int:
        return len(self._got())

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self._got()),))

    def __repr__(self) -> str:
        return repr(self._got())


class _LazyVariableNames:
    """One variable's names from a :class:`LazyNames`, read when a set's report first asks."""

    def __init__(self, names: LazyNames, var: str):
        self._names, self._var = names, var

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._names[self._var], attr)


def problem_names(problem: Any) -> dict[str, Any]:
    """The names of a problem's variables' coordinates (:func:`sparsemodel.model.names.coordinate_names`,
    read once per problem; labels are made only for the coordinates a report prints)."""
    cached = getattr(problem, "_coordinate_names", None)
    if cached is not None:
        return cached
    from ..model.names import coordinate_names

    out = coordinate_names(problem.objective.expr, problem.variables)
    try:
        problem._coordinate_names = out
    except AttributeError:  # pragma: no cover - a problem object that takes no attributes
        pass
    return out
