"""What every solver shares: the :class:`Solver` base class, the registry of solvers, the two
ends of the bound (:func:`zero_budget`, :func:`full_budget`) and the start point; the options
live in :mod:`.options`, the common ``Result`` and the run history in :mod:`.result`.

A solver is a subclass of :class:`Solver` registered with :func:`register`. It declares the
constraint kinds it handles (``nnz``, ``nnz_groups``, ``nnz_pairs``, ``rank``, ``eig_box``, ``box``), its
options with defaults and help, and implements ``run(lp) -> Result`` on a
:class:`~sparsemodel.lowering.lowered.LoweredProblem`: it sees the oracle (``lp.oracle``), the
design (``lp.design``) and the constraint set (``lp.set``), never cvxpy or the grammar.
``sparsemodel solvers``, ``solver="auto"`` and the error messages all read the same registry."""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ModelError, SolverError, UnboundedError
from ..lowering import lean
from ..sets.registry import KINDS, describe_kind, generic_kind
from ..util import closest, did_you_mean
from .options import SUBPROBLEM13, Option
from .result import CONVERGED, MAX_ITER, UNBOUNDED, History, Result, certify, finish

if TYPE_CHECKING:
    from ..lowering.lowered import LoweredProblem


class Solver:
    """Base class. Subclasses set name, handles, summary, reference, options and implement run()."""

    name = "solver"
    handles: frozenset[str] = frozenset()
    requires: frozenset[str] = frozenset()  # kinds the model must have (sparse PCA's solvers: its ball)
    protocol = False  # works through the set protocol alone: accepts every generic kind (see accepts)
    needs = ""  # what the objective must be, beyond the constraint kinds (words; ``unfit`` tests it)
    stochastic = False  # samples rows of a finite sum (check's samples line says whether one runs)
    summary = ""
    reference = ""
    convex_relaxation = False
    options: dict[str, Option] = {}

    def __init__(self, **opts: Any):
        self.opts = self.validate(opts)
        self.progress: Callable[[int, float], Any] | None = None  # the run's progress callback (solve's argument)
        # (the options of subproblem (13) each run's copy takes: fresh()'s argument, made once)
        self._subproblem = {key: self.opts[name] for name, key in SUBPROBLEM13.items() if name in self.opts}

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
        made = cls.__dict__.get("_defaults")
        if made is None or made[0] is not cls.options:  # (each class's own, made once: a path builds one per point)
            made = (cls.options, {k: o.default for k, o in cls.options.items()})
            cls._defaults = made
        out = dict(made[1])
        for k, v in opts.items():
            if k not in cls.options:
                close = closest(k, cls.options)
                raise SolverError(
                    f"{cls.name} has no option {k!r}" + (f"; did you mean {close!r}?" if close else ""),
                    hint=f"options of {cls.name}: {', '.join(cls.options) or '(none)'}",
                )
            out[k] = cls.options[k].convert(k, cls.name, v)
        return out

    def check(self, lp: LoweredProblem) -> None:
        """Refuse what this solver cannot run on (a constraint kind, or its objective: ``unfit``),
        naming the solvers that can. The verdict reads the model's constraints and the objective's
        form, not the bound or the numbers: once per lowering and class (``guard_cache``, shared by
        the lowering's copies at every bound and made again at a rebinding)."""
        st = lp.set
        key, of = ("check", type(self), type(st)), getattr(st, "constraint", st)
        cache = lp.guard_cache
        if key in cache and cache[key] is of:  # (only a pass is kept: a refusal is made again, a new error each time)
            return
        err = self.refuse(lp.problem.requirements(), lp)
        if err is not None:
            raise err
        cache[key] = of

    @classmethod
    def accepts(cls, kind: str) -> bool:
        """Whether this solver takes a constraint kind: one it names in ``handles``, or, for a
        solver that works through the set protocol alone (``protocol``), any kind registered as
        generic (sets/registry: a new constraint kind needs no edit of such solvers)."""
        return kind in cls.handles or (cls.protocol and generic_kind(kind))

    @classmethod
    def unfit(cls, lp: LoweredProblem) -> ModelError | None:
        """Why this solver, with its default options, cannot run on the lowered problem although it
        takes its constraint kinds (the objective's form: no finite sum, no cvxpy counterpart, no
        lower bound, not the sparse PCA or precision-matrix form): the error its run would raise,
        or None. Subclasses that need more than the kinds say so here (and in ``needs``), so that
        ``check``, the hints and ``auto``'s choice list a solver only where it runs."""
        return None

    @classmethod
    def takes(cls, kinds: Any, lp: LoweredProblem | None = None) -> bool:
        """The one capability test: whether this solver takes a model with these constraint kinds
        (it accepts each, and every kind it ``requires`` is among them: ``tpm`` accepts nnz only
        beside a ball) and, given the lowered problem ``lp``, runs on its objective (``unfit``)."""
        kinds = set(kinds)
        if not (all(cls.accepts(k) for k in kinds) and cls.requires <= kinds):
            return False
        return lp is None or cls.unfit(lp) is None

    @classmethod
    def kinds(cls) -> list[str]:
        """Every registered constraint kind this solver accepts."""
        return sorted(k for k in KINDS if cls.accepts(k))

    @classmethod
    def refuse(cls, constraints: Any, lp: LoweredProblem | None = None) -> ModelError | None:
        """The error for the first constraint this solver cannot take (located at it), then, given
        the lowered problem, the reason it cannot run on its objective (``unfit``); or None. The
        hints name the solvers that do run (on ``lp`` when given)."""
        constraints = sorted(constraints, key=lambda c: c.kind)
        kinds = {c.kind for c in constraints}
        for c in constraints:
            if not cls.accepts(c.kind):
                return SolverError(
                    f"{cls.name} does not handle {describe_kind(c.kind)} constraints",
                    c.span,
                    suggest_for(c.kind, kinds - {c.kind}, lp),
                )
        missing = sorted(cls.requires - kinds)
        if missing:
            return SolverError(
                f"{cls.name} needs {' and '.join(describe_kind(k) for k in missing)} constraints in the model",
                constraints[0].span if constraints else None,
                suggest_for(constraints[0].kind, kinds, lp) if constraints else "",
            )
        return cls.unfit(lp) if lp is not None else None

    def solve(self, lp: LoweredProblem, progress: Callable[..., Any] | None = None, bound: str = "fast") -> Result:
        """Run on a fresh copy of ``lp`` (its own counters and this solver's options of the
        precision-matrix subproblem); ``progress(iteration, objective)`` is called at every iteration. The two ends of the bound are answered
        here, once for every solver, so that every bound from 0 to the full size is accepted the
        same way by solve, compare, path and select: a budget of 0 (the constrained part is zero,
        the free part fitted by one restricted solve) and a budget that allows every unit (the
        constraint does nothing: the minimizer over every coordinate).

        ``bound`` (docs/certify.md): the lower bound put beside the answer, once here for every solver:
        ``fast`` (the default: one dual point from the gradient at the answer), ``tight`` (a few
        Frank-Wolfe steps on the perspective relaxation) or ``none``."""
        check_bound_mode(bound)
        self.progress = progress
        with blas_threads(lp):
            return certify(lp, self._solve(lp), bound)

    def _solve(self, lp: LoweredProblem) -> Result:
        self.check(lp)
        lp = lp.fresh(subproblem=self._subproblem)
        why = lp.unbounded_direction()
        if why is None and lp.set is not None and lp.set.thresholds and lp.set.k == 0:
            return zero_budget(lp, self)
        if why is None and lp.set is not None and lp.set.thresholds and lp.set.vacuous():
            return full_budget(lp, self)
        try:
            if why is not None:
                raise UnboundedError(why)
            res = self.run(lp)
            x = np.concatenate([np.ravel(v) for v in res.values.values()]) if res.values else None
            if x is not None and x.size == lp.n and res.status in (CONVERGED, MAX_ITER):
                if float(x.dot(x)) > RUN_AWAY_SQ and lp.runs_away(x, x):  # |x| > 1e4: the iterates ran away
                    raise UnboundedError(
                        f"{self.name} ended at |x| = {float(np.linalg.norm(x)):.3g} with objective {res.objective:.4g}, "
                        "and the objective keeps decreasing without bound along that direction: it has no minimizer "
                        "on the feasible set"
                    )
            return res
        except UnboundedError as exc:  # no minimizer: say so instead of reporting a point as converged
            from ..util import Clock

            return finish(lp, self, lp.zeros(), UNBOUNDED, 0, Clock(), f=-np.inf, message=exc.message)

    def fold_point(self, lp: LoweredProblem, init: np.ndarray) -> np.ndarray | None:
        """The answer from ``init`` as a flat point with no Result (no lower bound, counters or log):
        a cross-validation fold's warm point, whose answer is read only for its held-out loss and the
        next start (workflows/path.PathRun). The same point ``solve(lp, bound="none")`` of this solver
        with ``init`` would give, or None where that solve must run (the default: always)."""
        return None

    def fold_points(self, lp: LoweredProblem, ks: list[int], init: np.ndarray | None) -> list[np.ndarray]:
        """:meth:`fold_point` at the bounds ``ks`` in turn (``lp`` at ``ks[0]``), each started at the
        last's answer: the answers of the longest prefix of ``ks`` answered this way (the default:
        the first alone, or none). ``init`` None: the path's first point, which has no neighbour
        (the default answers none: the cold solve runs). A solver that answers a whole path in one
        call overrides it (auto: solvers/lean.lean_path, its first point at a bound of 0 by the
        kernel's free fit)."""
        if init is None:
            return []
        x = self.fold_point(lp, init)
        return [] if x is None else [x]

    def fold_kernel(self, lp: LoweredProblem, rows: np.ndarray, factor: float) -> Any:
        """A cross-validation fold's points without the fold's lowering: an object whose
        ``points(ks, init)`` answers what :meth:`fold_points` would on the lowering of the model on
        the sample rows ``rows`` (or none, where that lowering must run), made from ``lp``'s, the
        model on every row, whose data term on a subset is ``factor`` times its rows' sum. None (the
        default, and where the solver cannot): the fold is lowered. (auto: solvers/lean.FoldKernel.)"""
        return None

    def run(self, lp: LoweredProblem) -> Result:  # pragma: no cover - abstract
        raise NotImplementedError


def check_bound_mode(bound: Any) -> str:
    """``bound`` is one of fast, tight, none (a located error otherwise)."""
    if type(bound) is str and bound in _BOUND_MODES:
        return bound
    from ..lowering.bound import BOUND_MODES

    if not isinstance(bound, str) or bound not in BOUND_MODES:
        guess = did_you_mean(bound, BOUND_MODES) if isinstance(bound, str) else ""
        raise SolverError(
            f"bound={bound!r} is not one of {', '.join(BOUND_MODES)}",
            hint=f"{guess}fast: one dual point at the answer (cheap, the default); tight: a few Frank-Wolfe steps on the "
            "relaxation; none: no bound",
        )
    return bound


RUN_AWAY_SQ = 1e8  # |x|^2 above which an answer is tested for iterates that ran away (|x| > 1e4)
_BOUND_MODES = frozenset({"fast", "tight", "none"})  # (lowering/bound.BOUND_MODES, without importing it per solve)
BLAS_THREADS_LIMIT = 10_000_000  # entries (samples x coordinates): a smaller problem runs on one BLAS thread


def blas_threads(lp: LoweredProblem) -> Any:
    """One BLAS/OpenMP thread for a problem with fewer than ``BLAS_THREADS_LIMIT`` samples x
    coordinates (a context manager; nothing otherwise). A solve of such a problem is a stream of
    small factorizations and products, which a second BLAS thread does not speed up, and OpenBLAS's
    threads spin-wait when another process holds the other cores: measured on a busy 2-core machine,
    the Cholesky inverse of a 50 x 50 matrix took 117 ms with two threads against 0.02 ms with one,
    and the Section 6.1 demo's auto solve 2 s against 30 ms."""
    if lp.n_samples * lp.n >= BLAS_THREADS_LIMIT or getattr(_HELD, "depth", 0):
        return contextlib.nullcontext()  # (inside a limit already: a path's point, a fold's solve)
    global _CONTROLLER
    if _CONTROLLER is None:  # inspecting the loaded libraries costs a millisecond: once
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    return _held(_CONTROLLER.lib_controllers)


class _held:
    """Hold every BLAS/OpenMP library of ``libs`` (threadpoolctl's controllers) at one thread and
    mark this thread as limited, so that the solves run inside it (a path or a cross-validation
    holds one limit for all its points) do not set and restore the thread counts again at every
    solve (two library calls each: 6 % of a small problem's path). The limit of threadpoolctl's
    ``limit(limits=1)``, without its inspection of every library (versions, architectures: 40 us
    of a 0.6 ms solve): a library already at one thread is left alone, the others are set to one
    and restored to their count on the way out. (A class, not a generator's context manager: it is
    entered at every solve.)

    The outermost region also freezes the garbage collector's heap (``gc.freeze``, undone by
    ``gc.unfreeze`` on the way out, both O(1)): a solve or a study allocates many short-lived
    objects, and every full collection they trigger would otherwise walk every object alive before
    it (numpy's, scipy's, the user's: about 25 ms each on this machine): 6 % of the instructions of
    a small estimator's fit (choosing k at 100 x 20). The objects made inside are collected as usual; nothing is frozen when the caller
    froze objects of its own (``gc.get_freeze_count()``) or disabled the collector."""

    __slots__ = ("libs", "changed", "froze")

    def __init__(self, libs: Any):
        self.libs = libs
        self.changed: list[tuple[Any, int]] = []
        self.froze = False

    def __enter__(self) -> None:
        _HELD.depth = getattr(_HELD, "depth", 0) + 1
        if _HELD.depth == 1 and gc.isenabled() and not gc.get_freeze_count():
            gc.freeze()
            self.froze = True
        try:
            for lib in self.libs:
                n = lib.num_threads
                if n != 1:
                    lib.set_num_threads(1)
                    if n is not None:
                        self.changed.append((lib, n))
        except BaseException:
            self.__exit__()
            raise

    def __exit__(self, *exc: Any) -> None:
        try:
            for lib, n in reversed(self.changed):
                lib.set_num_threads(n)
        finally:
            self.changed.clear()
            _HELD.depth -= 1
            if self.froze:
                self.froze = False
                gc.unfreeze()


_CONTROLLER: Any = None
_HELD = threading.local()


REGISTRY: dict[str, type[Solver]] = {}


def register(cls: type[Solver]) -> type[Solver]:
    REGISTRY[cls.name] = cls
    return cls


def solvers_for(kind: str, beside: Any = (), lp: LoweredProblem | None = None) -> list[str]:
    """The solvers that take a ``kind`` constraint (in a model whose other kinds are ``beside``),
    and, given the lowered problem ``lp``, run on it (``Solver.takes``)."""
    return [n for n, c in REGISTRY.items() if c.takes({kind, *beside}, lp)]


def suggest_for(kind: str, beside: Any = (), lp: LoweredProblem | None = None) -> str:
    names = solvers_for(kind, beside, lp)
    if names:
        return (
            f"solvers that handle {describe_kind(kind)}"
            + (" on this model" if lp is not None else "")
            + (f": {', '.join(names)}")
        )
    return f"no solver handles {describe_kind(kind)}" + (" on this model" if lp is not None else "")


def runs_on(lp: LoweredProblem) -> list[str]:
    """Every registered solver that runs on the lowered problem (``Solver.takes`` with ``lp``)."""
    return [n for n, c in REGISTRY.items() if c.takes(lp.kinds, lp)]


def get_solver(name: str) -> type[Solver]:
    if not isinstance(name, str):
        raise SolverError(
            f"a solver is given by its name; got {name!r}",
            hint=f"available solvers: {', '.join(sorted(REGISTRY))} (see `sparsemodel solvers`)",
        )
    if name not in REGISTRY:
        close = closest(name, REGISTRY)
        raise SolverError(
            f"unknown solver {name!r}" + (f"; did you mean {close!r}?" if close else ""),
            hint=f"available solvers: {', '.join(sorted(REGISTRY))} (see `sparsemodel solvers`)",
        )
    return REGISTRY[name]


AUTO_ORDER = ("auto", "grahtp", "tpm")  # tpm: sparse PCA (the kinds nnz and ball)


def auto_solver(lp: LoweredProblem) -> str:
    """The default for a problem: the first solver in AUTO_ORDER that handles all its constraint kinds."""
    for name in AUTO_ORDER + tuple(REGISTRY):
        cls = REGISTRY.get(name)
        if cls is not None and not cls.convex_relaxation and cls.takes(lp.kinds, lp):
            return name
    unhandled = sorted(k for k in lp.kinds if not solvers_for(k))
    kind = unhandled[0] if unhandled else sorted(lp.kinds)[0]
    raise SolverError(
        f"no available solver handles all constraints of this problem ({', '.join(describe_kind(k) for k in sorted(lp.kinds))})",
        hint=suggest_for(kind, lp.kinds - {kind}, lp),
    )


def zero_budget(lp: LoweredProblem, solver: Solver) -> Result:
    """Budget 0: the constrained part is zero, the free part is fitted (one restricted solve)."""
    from ..util import Clock

    clock = Clock()
    method = solver.opts.get("restricted", "auto") if isinstance(solver.opts.get("restricted"), str) else "auto"
    fit = lean.free_fit(lp) if method == "auto" else None  # the compiled kernel's solve, where it applies
    if fit is not None:
        x, f = fit
        lp.oracle.charge(solves=1)
    else:
        r = lp.restricted_minimize(lp.set.empty(), method=method)
        x, f = r.x, r.f
    s = lp.set
    free = len(s.free)
    msg = f"{s.bound_text()}: the constrained part is zero{s.zero_note()}" + (
        f"; the {free} free coordinate(s) were fitted" if free else ""
    )
    return finish(lp, solver, x, CONVERGED, 1, clock, f=f, message=msg)


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
    """The start of a run: ``init`` (an array of the primary variable or of every coordinate,
    projected onto the set) or zero, moved into the side sets that take the start
    (``projects_start``: the eigenvalue box), else into the loss's domain and the set."""
    sides = [s for s in lp.side if s.projects_start]
    if init is None or (isinstance(init, str) and init == "zeros"):
        if sides:
            return _into_side_sets(sides, lp.zeros())
        # zero, or zero with the free coordinates moved into the loss's domain; under constraints that
        # exclude it (sum(w) == 1), the projection of the gradient step from there
        return lp.feasible_start(lp.inside_domain())
    try:
        x = np.asarray(init, dtype=float).ravel()
    except (TypeError, ValueError):
        raise SolverError(
            f"init={init!r} is not a starting point: give an array of numbers (the variable's values)"
        ) from None
    if x.shape == (lp.primary.size,) and lp.n != lp.primary.size:
        full = lp.zeros()
        full[lp.layout.slice(lp.primary)] = x
        x = full
    if x.shape != (lp.n,):
        raise SolverError(
            f"init has {x.size} entries; expected {lp.primary.size} (the variable {lp.primary.name}) or {lp.n}"
        )
    if lp.set is not None and lp.set.thresholds:
        if lp.set.contains(x):  # (a path's neighbour inside the set: its projection is itself)
            lp.oracle.thresholded()
        else:
            x, _ = lp.project(x)
    return _into_side_sets(sides, x)


def _into_side_sets(sides: list[Any], x: np.ndarray) -> np.ndarray:
    """A start inside the side sets that take it: its projection onto each that does not contain
    it (the eigenvalue box: zero becomes alpha I, Algorithm 2's Omega(0) of paper 000, sparse
    whenever the start is diagonal)."""
    for s in sides:
        if not s.contains(x):
            x, _ = s.project(x)
    return x


def require_sparsity(lp: LoweredProblem, solver: str) -> Any:
    """The coordinate-sparsity set of a solver that takes only coordinate kinds (its ``handles``:
    the set, when there is one, offers the coordinate API), or a SolverError when there is none."""
    if lp.set is None:
        raise SolverError(
            f"{solver} solves sparsity-constrained problems; this problem has no nnz(...) <= k constraint"
        )
    return lp.set
