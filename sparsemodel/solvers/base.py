"""What every solver shares: options, the registry, the run history and the common ``Result``.

A solver is a subclass of :class:`Solver` registered with :func:`register`. It declares the
constraint kinds it handles (``nnz``, ``nnz_groups``, ``nnz_pairs``, ``rank``, ``eig_box``, ``box``), its
options with defaults and help, and implements ``run(lp) -> Result`` on a
:class:`~sparsemodel.lowering.lowered.LoweredProblem`: it sees the oracle (``lp.oracle``), the
design (``lp.design``) and the constraint set (``lp.set``), never cvxpy or the grammar.
``sparsemodel solvers``, ``solver="auto"`` and the error messages all read the same registry.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import SolverError, UnboundedError
from ..lowering.restricted import RESTRICTED_METHODS
from ..sets.registry import KINDS, describe_kind, generic_kind
from ..util import jsonable, k_text

if TYPE_CHECKING:
    from ..lowering.lowered import LoweredProblem

CONVERGED = "converged"
MAX_ITER = "max_iter"
DIVERGED = "diverged"
INFEASIBLE = "infeasible"
UNBOUNDED = "unbounded"


@dataclass
class Option:
    default: Any
    help: str
    type: Callable[[Any], Any] | str = float
    choices: tuple[Any, ...] | None = None
    low: float | None = None  # numeric values must be >= low (> low with open_low)
    high: float | None = None  # and <= high (< high with open_high)
    open_low: bool = False
    open_high: bool = False

    def convert(self, name: str, solver: str, value: Any) -> Any:
        t = self.type
        try:
            if value is None:
                v = None
            elif t == "float_or_auto":
                v = value if isinstance(value, str) and value in ("auto", "rss") else float(value)
            elif t == "float_or_name":  # a number, or one of the names in choices
                v = value if isinstance(value, str) and value in (self.choices or ()) else float(value)
            elif t == "int_or_none":
                v = None if isinstance(value, str) and value.lower() == "none" else _int(value)
            elif t is bool:
                v = _bool(value)
            elif t is int:
                v = _int(value)
            elif t == "any":
                v = value
            else:
                v = t(value)  # type: ignore[operator]
        except (TypeError, ValueError):
            raise SolverError(
                f"option {name}={value!r} of {solver} is not a valid {_type_name(t)}",
                hint=f"{name}: {self.help}",
            ) from None
        if self.choices is not None and v not in self.choices and not (t == "float_or_name" and isinstance(v, float)):
            raise SolverError(
                f"option {name}={value!r} of {solver} is not one of {', '.join(map(str, self.choices))}",
                hint=f"{name}: {self.help}",
            )
        if isinstance(v, float) and not math.isfinite(v):
            raise SolverError(f"option {name}={value!r} of {solver} must be finite")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            lo_bad = self.low is not None and (v <= self.low if self.open_low else v < self.low)
            hi_bad = self.high is not None and (v >= self.high if self.open_high else v > self.high)
            if lo_bad or hi_bad:
                raise SolverError(
                    f"{solver}: option {name} must be {self.range_text()}; got {name}={value!r}",
                    hint=f"{name}: {self.help}",
                )
        return v

    def range_text(self) -> str:
        if self.low == 0 and self.high is None:
            return "positive" if self.open_low else "nonnegative"
        lo = "" if self.low is None else f"{'>' if self.open_low else '>='} {self.low:g}"
        hi = "" if self.high is None else f"{'<' if self.open_high else '<='} {self.high:g}"
        return " and ".join(t for t in (lo, hi) if t)


def _type_name(t: Any) -> str:
    return {
        float: "number",
        int: "integer",
        bool: "boolean (true/false)",
        str: "string",
        "float_or_auto": "number (or 'auto'/'rss')",
        "float_or_name": "number (or one of the names listed)",
        "int_or_none": "integer (or none)",
    }.get(t, str(t))


def _int(v: Any) -> int:
    if isinstance(v, bool):
        raise ValueError
    f = float(v)
    if f != int(f):
        raise ValueError
    return int(f)


def _bool(v: Any) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, str) and v.lower() in ("true", "yes", "1", "on"):
        return True
    if isinstance(v, str) and v.lower() in ("false", "no", "0", "off"):
        return False
    if isinstance(v, (int, float)) and v in (0, 1):
        return bool(v)
    raise ValueError


def restricted_option(purpose: str = "the restricted solves") -> Option:
    """The ``restricted`` option every solver with restricted (debiasing) solves shares."""
    return Option(
        "auto",
        f"method of {purpose}: auto (QR/Cholesky for least squares, Newton for composite losses, "
        "L-BFGS otherwise; precision matrices: covsel, barrier Newton or the ADMM where the box is active), "
        "lstsq, newton (precision matrices: the barrier Newton method), lbfgs, cvxpy, admm (paper 000, App. D.2), "
        "covsel",
        str,
        RESTRICTED_METHODS,
    )


SUBPROBLEM13 = {  # option name -> key of LoweredProblem.subproblem (the argument of fresh) (precision matrices, paper 000 (13))
    "admm_tol": "tol",
    "admm_rho": "rho",
    "admm_max_iter": "max_iter",
    "admm_adaptive": "adaptive",
    "covsel_tol": "covsel_tol",
    "covsel_max_sweeps": "covsel_max_sweeps",
}


def subproblem13_options() -> dict[str, Option]:
    """The options of the precision-matrix restricted solve (13) every solver that handles the
    eigenvalue box shares (used only on that model; see docs/precision.md)."""
    return {
        "admm_tol": Option(
            1e-9, "(13) by ADMM: stop when both residuals <= admm_tol * (1 + ||O||_F)", float, low=0, open_low=True
        ),
        "admm_rho": Option(
            1.0,
            "(13) by ADMM: the initial penalty rho (later solves start from the last rho)",
            float,
            low=0,
            open_low=True,
        ),
        "admm_max_iter": Option(5000, "(13) by ADMM: iterations (eigen-decompositions) per solve", int, low=1),
        "admm_adaptive": Option(True, "(13) by ADMM: rescale rho to balance the residuals (false: fixed rho)", bool),
        "covsel_tol": Option(
            1e-6,
            "(13) by covsel: stop when a sweep moves no regression coefficient by more than covsel_tol",
            float,
            low=0,
            open_low=True,
        ),
        "covsel_max_sweeps": Option(100, "(13) by covsel: sweeps before falling back to the ADMM", int, low=1),
    }


@dataclass
class Result:
    """The outcome of one solve, the same for every solver.

    ``x`` is the constrained (primary) variable in its own shape, ``support`` the 0-based indices
    into its flattening of the selected coordinates, ``values`` every variable by name.
    ``history`` has one entry per iteration: objective, elapsed seconds, IFO count (gradient
    evaluations counted per sample), hard-thresholding count.

    ``k`` is the bound in the constraint's unit (``unit``: coordinates, groups, edges of a
    symmetric matrix, or the rank; ``k_text`` prints it, ``k = 5 edges (10 entries)``), the same
    number as ``--k``, ``k=`` and the ``k`` column of every table.

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
    names: dict[str, Any] = field(default_factory=dict)  # per variable: its names (model.names.VariableNames)
    bound: str = ""  # the constraint as solved, nnz(w[1:]) <= 10
    symmetric: bool = False  # the primary variable is a symmetric matrix (an edge is one pair)
    groups: list[str] = field(default_factory=list)  # the kept groups, by name (group sparsity)

    # ------------------------------------------------------------------ names
    @property
    def k_text(self) -> str:
        """The bound with its unit: ``k = 10 coordinates``, ``k = 5 edges (10 entries)``, ``r = 2``."""
        return k_text(self.k, self.unit)

    def label(self, i: int, variable: str | None = None) -> str:
        """The name of coordinate ``i`` (flat, C order) of ``variable`` (default: the primary)."""
        var = variable or self.variable
        got = self.names.get(var)
        if got is not None:
            return got.label(int(i))
        shape = np.shape(self.values.get(var, self.x))
        if len(shape) == 0:
            return var
        return f"{var}[{', '.join(str(int(v)) for v in np.unravel_index(int(i), shape))}]"

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

    @property
    def support_names(self) -> list[str]:
        """The names of the selected coordinates (of ``support``)."""
        return [self.label(int(i)) for i in self.support]

    @property
    def support_positions(self) -> list[tuple[int, ...]]:
        """The support as positions in the variable: ``(i,)`` for a vector, ``(row, col)`` for a
        matrix (not the flat index ``row * cols + col``)."""
        if len(self.shape) == 0:
            return [() for _ in self.support]
        return [tuple(int(v) for v in np.unravel_index(int(i), self.shape)) for i in self.support]

    def coefficients(self, all: bool = False) -> list[dict[str, Any]]:  # noqa: A002 - the table's word
        """The coefficient table: one row (``variable``, ``position``, ``name``, ``value``) per
        nonzero coordinate of the primary variable (of its upper triangle for a symmetric matrix;
        every coordinate with ``all=True``), then every coordinate of the other variables (free:
        intercepts). Free coordinates of the primary variable (an intercept w[0]) come first."""
        rows: list[dict[str, Any]] = []
        free_first: list[dict[str, Any]] = []
        for var, value in [(self.variable, self.x)] + [(n, v) for n, v in self.values.items() if n != self.variable]:
            v = np.asarray(value, dtype=float)
            flat = v.ravel()
            primary = var == self.variable
            on = set(int(i) for i in self.support) if primary else set()
            which = np.flatnonzero(flat) if primary and not all else np.arange(flat.size)  # only what is shown
            for i in (int(j) for j in which):
                pos = tuple(int(p) for p in np.unravel_index(i, v.shape)) if v.ndim else ()
                if primary and not all and self.symmetric and len(pos) == 2 and pos[0] > pos[1]:
                    continue
                row = {"variable": var, "position": pos, "name": self.label(i, var), "value": float(flat[i])}
                if primary and self.unit in ("coordinates", "groups") and i not in on and flat[i] != 0:
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
            "k": self.k,
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
                for r in (self.coefficients() if self.unit != "rank" else [])
            ],
            "x": jsonable(np.asarray(self.x).tolist()),
            "values": {k: jsonable(np.asarray(v).tolist()) for k, v in self.values.items()},
            "iterations": int(self.iterations),
            "time_s": float(self.time_s),
            "certificate": jsonable(self.certificate),
            "options": jsonable(self.options),
            "history": jsonable(self.history),
            "message": self.message,
            "extra": jsonable(self.extra),
        }

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def summary(self, max_support: int = 30) -> str:
        from .report import format_result

        return format_result(self, max_support=max_support)

    def _repr_html_(self) -> str:
        from .report import result_html

        return result_html(self)

    def __repr__(self) -> str:
        return (
            f"Result(solver={self.solver!r}, status={self.status!r}, objective={self.objective:.6g}, "
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


class Solver:
    """Base class. Subclasses set name, handles, summary, reference, options and implement run()."""

    name = "solver"
    handles: frozenset[str] = frozenset()
    protocol = False  # works through the set protocol alone: accepts every generic kind (see accepts)
    summary = ""
    reference = ""
    convex_relaxation = False
    options: dict[str, Option] = {}

    def __init__(self, **opts: Any):
        self.opts = self.validate(opts)
        self.progress: Callable[[int, float], Any] | None = None  # the run's progress callback (solve's argument)

    def history(self, lp: LoweredProblem, clock: Callable[[], float]) -> History:
        """The run's per-iteration log, reporting to the progress callback ``solve`` was given."""
        return History(lp, clock, self.progress)

    def part(self, cls: type[Solver], **opts: Any) -> Solver:
        """Another solver run as a part of this one (its iterations reach the same progress callback)."""
        inner = cls(**opts)
        inner.progress = self.progress
        return inner

    @classmethod
    def validate(cls, opts: dict[str, Any]) -> dict[str, Any]:
        out = {k: o.default for k, o in cls.options.items()}
        for k, v in opts.items():
            if k not in cls.options:
                close = difflib.get_close_matches(k, list(cls.options), n=1)
                raise SolverError(
                    f"{cls.name} has no option {k!r}" + (f"; did you mean {close[0]!r}?" if close else ""),
                    hint=f"options of {cls.name}: {', '.join(cls.options) or '(none)'}",
                )
            out[k] = cls.options[k].convert(k, cls.name, v)
        return out

    def check(self, lp: LoweredProblem) -> None:
        """Refuse constraint kinds this solver cannot handle, naming the solvers that can."""
        err = self.refuse(lp.problem.constraints)
        if err is not None:
            raise err

    @classmethod
    def accepts(cls, kind: str) -> bool:
        """Whether this solver takes a constraint kind: one it names in ``handles``, or, for a
        solver that works through the set protocol alone (``protocol``), any kind registered as
        generic (sets/registry: a new constraint kind needs no edit of such solvers)."""
        return kind in cls.handles or (cls.protocol and generic_kind(kind))

    @classmethod
    def kinds(cls) -> list[str]:
        """Every registered constraint kind this solver accepts."""
        return sorted(k for k in KINDS if cls.accepts(k))

    @classmethod
    def refuse(cls, constraints: Any) -> SolverError | None:
        """The error for the first constraint this solver cannot take (located at it), or None."""
        for c in sorted(constraints, key=lambda c: c.kind):
            if not cls.accepts(c.kind):
                return SolverError(
                    f"{cls.name} does not handle {describe_kind(c.kind)} constraints", c.span, suggest_for(c.kind)
                )
        return None

    def solve(self, lp: LoweredProblem, progress: Callable[[int, float], Any] | None = None) -> Result:
        """Run on a fresh copy of ``lp`` (its own counters and this solver's options of the
        precision-matrix subproblem); ``progress(iteration, objective)`` is called at every iteration. The two ends of the bound are answered
        here, once for every solver, so that every bound from 0 to the full size is accepted the
        same way by solve, compare, path and select: a budget of 0 (the constrained part is zero,
        the free part fitted by one restricted solve) and a budget that allows every unit (the
        constraint does nothing: the minimizer over every coordinate)."""
        self.progress = progress
        with blas_threads(lp):
            return self._solve(lp)

    def _solve(self, lp: LoweredProblem) -> Result:
        self.check(lp)
        lp = lp.fresh(subproblem={key: self.opts[name] for name, key in SUBPROBLEM13.items() if name in self.opts})
        why = lp.unbounded_direction()
        if why is None and lp.set is not None and lp.set.thresholds and lp.set.k == 0:
            return zero_budget(lp, self)
        if why is None and lp.set is not None and lp.set.thresholds and lp.set.budget >= lp.set.limit:
            return full_budget(lp, self)
        try:
            if why is not None:
                raise UnboundedError(why)
            res = self.run(lp)
            x = np.concatenate([np.ravel(v) for v in res.values.values()]) if res.values else None
            if x is not None and x.size == lp.n and res.status in (CONVERGED, MAX_ITER):
                if float(np.linalg.norm(x)) > 1e4 and lp.runs_away(x, x):  # the iterates ran away
                    raise UnboundedError(
                        f"{self.name} ended at |x| = {float(np.linalg.norm(x)):.3g} with objective {res.objective:.4g}, "
                        "and the objective keeps decreasing without bound along that direction: it has no minimizer "
                        "on the feasible set"
                    )
            return res
        except UnboundedError as exc:  # no minimizer: say so instead of reporting a point as converged
            from ..util import Clock

            return finish(lp, self, lp.zeros(), UNBOUNDED, 0, Clock(), f=-np.inf, message=exc.message)

    def run(self, lp: LoweredProblem) -> Result:  # pragma: no cover - abstract
        raise NotImplementedError


BLAS_THREADS_LIMIT = 10_000_000  # entries (samples x coordinates): a smaller problem runs on one BLAS thread


def blas_threads(lp: LoweredProblem) -> Any:
    """One BLAS/OpenMP thread for a problem with fewer than ``BLAS_THREADS_LIMIT`` samples x
    coordinates (a context manager; nothing otherwise). A solve of such a problem is a stream of
    small factorizations and products, which a second BLAS thread does not speed up, and OpenBLAS's
    threads spin-wait when another process holds the other cores: measured on a busy 2-core machine,
    the Cholesky inverse of a 50 x 50 matrix took 117 ms with two threads against 0.02 ms with one,
    and the Section 6.1 demo's auto solve 2 s against 30 ms."""
    if lp.n_samples * lp.n >= BLAS_THREADS_LIMIT:
        return contextlib.nullcontext()
    global _CONTROLLER
    if _CONTROLLER is None:  # inspecting the loaded libraries costs a millisecond: once
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER.limit(limits=1)


_CONTROLLER: Any = None


REGISTRY: dict[str, type[Solver]] = {}


def register(cls: type[Solver]) -> type[Solver]:
    REGISTRY[cls.name] = cls
    return cls


def solvers_for(kind: str) -> list[str]:
    return [n for n, c in REGISTRY.items() if c.accepts(kind)]


def suggest_for(kind: str) -> str:
    names = solvers_for(kind)
    if names:
        return f"solvers that handle {describe_kind(kind)}: {', '.join(names)}"
    return f"no solver handles {describe_kind(kind)}"


def get_solver(name: str) -> type[Solver]:
    if name not in REGISTRY:
        close = difflib.get_close_matches(name, list(REGISTRY), n=1)
        raise SolverError(
            f"unknown solver {name!r}" + (f"; did you mean {close[0]!r}?" if close else ""),
            hint=f"available solvers: {', '.join(sorted(REGISTRY))} (see `sparsemodel solvers`)",
        )
    return REGISTRY[name]


AUTO_ORDER = ("auto", "grahtp")


def auto_solver(lp: LoweredProblem) -> str:
    """The default for a problem: the first solver in AUTO_ORDER that handles all its constraint kinds."""
    for name in AUTO_ORDER + tuple(REGISTRY):
        cls = REGISTRY.get(name)
        if cls is not None and not cls.convex_relaxation and all(cls.accepts(k) for k in lp.kinds):
            return name
    unhandled = sorted(k for k in lp.kinds if not solvers_for(k))
    kind = unhandled[0] if unhandled else sorted(lp.kinds)[0]
    raise SolverError(
        f"no available solver handles all constraints of this problem ({', '.join(describe_kind(k) for k in sorted(lp.kinds))})",
        hint=suggest_for(kind),
    )


def finish(
    lp: LoweredProblem,
    solver: Solver,
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
    support = s.nonzeros(x) if s is not None else np.flatnonzero(np.asarray(values[var.name]).ravel() != 0)
    if lp.eigbox is not None or lp.precision is not None:  # a precision matrix: its spectrum and its graph
        O = lp.layout.get(x, (lp.eigbox or lp.precision).variable if lp.eigbox else lp.precision.var)
        lam = np.linalg.eigvalsh((O + O.T) / 2)
        iu = np.triu_indices(O.shape[0], 1)
        nz = np.flatnonzero(O[iu] != 0)
        extra.setdefault("edges", int(len(nz)))
        extra.setdefault("eig_min", float(lam[0]))
        extra.setdefault("eig_max", float(lam[-1]))
        extra.setdefault("symmetric", bool(np.array_equal(O, O.T)))
        if lp.eigbox is not None:
            extra.setdefault("eig_box", [lp.eigbox.alpha, lp.eigbox.beta])
            extra.setdefault("in_box", bool(lp.eigbox.contains(x)))
        if lp.oracle.counters.eig_decomps:
            extra.setdefault("eig_decomps", lp.oracle.counters.eig_decomps)
        if lp.oracle.counters.newton_steps:
            extra.setdefault("newton_steps", lp.oracle.counters.newton_steps)
    names = problem_names(lp.problem)
    said = s.report(x, support, names.get(var.name)) if s is not None else {}
    for key, v in said.get("extra", {}).items():
        extra.setdefault(key, v)
    kept = said.get("groups", [])
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
        options={k_: (v if not isinstance(v, np.ndarray) else "<array>") for k_, v in solver.opts.items()},
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
    )


def _finite_certificate(c: dict[str, Any]) -> bool:
    return all(math.isfinite(v) for v in c.values() if isinstance(v, (float, int)) and not isinstance(v, bool))


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


def zero_budget(lp: LoweredProblem, solver: Solver) -> Result:
    """Budget 0: the constrained part is zero, the free part is fitted (one restricted solve)."""
    from ..util import Clock

    clock = Clock()
    method = solver.opts.get("restricted", "auto") if isinstance(solver.opts.get("restricted"), str) else "auto"
    r = lp.restricted_minimize(lp.set.empty(), method=method)
    s = lp.set
    free = len(s.free)
    msg = f"{s.bound_text()}: the constrained part is zero{s.zero_note()}" + (
        f"; the {free} free coordinate(s) were fitted" if free else ""
    )
    return finish(lp, solver, r.x, CONVERGED, 1, clock, f=r.f, message=msg)


def full_budget(lp: LoweredProblem, solver: Solver) -> Result:
    """The largest bound (every unit may be nonzero: k = the number of coordinates, groups or
    edges, r = min(p, m)): the constraint does nothing, so the answer is one restricted solve over
    every coordinate (box and eigenvalue constraints kept), reported as the solver's result."""
    from ..util import Clock

    clock = Clock()
    r = lp.restricted_minimize(None, cols=np.arange(lp.n))
    msg = f"{lp.set.bound_text()}: the bound allows every unit, so this is the unconstrained minimizer"
    return finish(lp, solver, r.x, CONVERGED, 1, clock, f=r.f, message=msg)


def divergence_message(
    solver: str,
    f_start: float,
    f_now: float,
    step: float | None,
    step_name: str = "eta",
    advice: str | None = None,
) -> str:
    """The message of a run that diverged (f non-finite, or persistently above its start).
    ``advice``: what to try besides a smaller step (default: backtracking, or rescaling the data)."""
    s = f" with {step_name}={step:.3g}" if step is not None else ""
    tail = advice or f"or leave {step_name}='auto' with backtracking=true, or rescale the data (standardize(X))"
    return (
        f"{solver} diverged: the objective went from {f_start:.6g} to {f_now:.6g}{s}. "
        f"Try a smaller {step_name} (for example {step_name}={(step or 1.0) / 10:.3g}), {tail}."
    )


def initial_point(lp: LoweredProblem, init: Any) -> np.ndarray:
    if init is None or (isinstance(init, str) and init == "zeros"):
        if lp.eigbox is not None:
            return _into_side_sets(lp, lp.zeros())
        return lp.inside_domain()  # zero, or zero with the free coordinates moved into the loss's domain
    x = np.asarray(init, dtype=float).ravel()
    if x.shape == (lp.primary.size,) and lp.n != lp.primary.size:
        full = lp.zeros()
        full[lp.layout.slice(lp.primary)] = x
        x = full
    if x.shape != (lp.n,):
        raise SolverError(
            f"init has {x.size} entries; expected {lp.primary.size} (the variable {lp.primary.name}) or {lp.n}"
        )
    if lp.set is not None and lp.set.thresholds:
        x, _ = lp.project(x)
    return _into_side_sets(lp, x)


def _into_side_sets(lp: LoweredProblem, x: np.ndarray) -> np.ndarray:
    """A start inside the eigenvalue box: its projection (zero becomes alpha I, Algorithm 2's
    Omega(0) of paper 000), sparse whenever the start is diagonal."""
    if lp.eigbox is not None and not lp.eigbox.contains(x):
        x, _ = lp.eigbox.project(x)
    return x


def require_sparsity(lp: LoweredProblem, solver: str) -> Any:
    if lp.sparsity is None:
        raise SolverError(
            f"{solver} solves sparsity-constrained problems; this problem has no nnz(...) <= k constraint"
        )
    return lp.sparsity
