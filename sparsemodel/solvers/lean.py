"""``auto`` on a small composite problem in one compiled call (the lean path).

:func:`lean_auto` runs the pipeline of :mod:`.auto` -- the GraHTP start (and the screening start on
quadratic objectives), then the swap search -- through :func:`sparsemodel.numerics._lean.auto_run`
on the arrays :func:`sparsemodel.lowering.lean.lean_data` keeps with the design, and builds the
usual :class:`~.result.Result`. Same algorithm, same supports, same end points as the Python
pipeline (tests/solvers/test_lean.py checks the objectives on the problems of
benchmarks/vs_abess.py); what it saves is the Python call per step (the issue's profile: about 100
us of small NumPy calls per Newton step, a SwapModel built three times per solve).

It applies when :func:`lean_data` covers the problem and the options ask for nothing the kernel does
not do (``restricted='auto'``, ``search=true``, ``start`` auto, grahtp or screen, or ``init``); it
returns None otherwise, and when the kernel meets a case for the general path (a support whose
Hessian is not numerically positive definite, a solve that does not converge), which then runs.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ..lowering.lean import adopt, kernels, lean_data, lean_start
from .base import RUN_AWAY_SQ, initial_point
from .result import CONVERGED, MAX_ITER, Result, finish

if TYPE_CHECKING:
    from ..lowering.lowered import LoweredProblem
    from .base import Solver

START_NAMES = ("grahtp", "screen", "init")
GRAHTP_MAX_ITER, GRAHTP_TOL = 500, 1e-6  # GraHTP's defaults (its options max_iter and tol)


def lean_auto(solver: Solver, lp: LoweredProblem, clock: Any) -> Result | None:
    """``auto``'s result from the compiled kernel, or None where the general pipeline must run."""
    ran = _run(solver, lp, solver.opts["init"])
    if ran is None:
        return None
    kern, starts, x, f, status, its, best, flog, stats, runs = ran
    rows = stats.tolist()  # (Python ints and floats: read below without NumPy's scalar indexing)
    tot = rows[0] if len(starts) == 1 else [sum(c) for c in zip(*rows)]  # (one start: its row)
    n_s = lp.n_samples or 1
    lp.oracle.charge(solves=tot[kern.ST_SOLVES], grads=tot[kern.ST_NEWTON], ifo=n_s * tot[kern.ST_NEWTON])
    lp.oracle.thresholded(tot[kern.ST_HT])
    hist = solver.history(lp, clock)
    for v in flog:
        hist.log(v)
    names = [START_NAMES[s] for s in starts]
    bs, ran = rows[best], runs.tolist()
    extra = {
        "pipeline": [names[best], "swap search"],
        "start": names[best],
        "start_objective": ran[best][0],
        "swaps": int(ran[best][2]),
        "starts": [
            {
                "start": names[i],
                "start_objective": r[0],
                "objective": r[1],
                "swaps": int(r[2]) if math.isfinite(r[1]) else 0,
            }
            for i, r in enumerate(ran)
        ],
        "exact_solves": bs[kern.ST_EXACT],
        "restricted_solves": bs[kern.ST_SOLVES],
        "newton_steps": bs[kern.ST_NEWTON],
        "models": bs[kern.ST_MODELS],
        "full_models": bs[kern.ST_FULL],
        "modelled_units": bs[kern.ST_UNITS],
        "accepted_from_tries": bs[kern.ST_TRIES],
        "accepted_multi_swaps": bs[kern.ST_MULTI],
        "kernel": "compiled",
    }
    return finish(
        lp,
        solver,
        x,
        CONVERGED if status == kern.CONVERGED else MAX_ITER,
        int(its),
        clock,
        hist,
        f=float(f),
        extra=extra,
    )


def lean_point(solver: Solver, lp: LoweredProblem, init: np.ndarray) -> np.ndarray | None:
    """The answer of ``solver`` (auto) started at ``init`` as the flat point the kernel returns, with
    no Result, no counters charged and no log: a cross-validation fold's warm point, whose answer is
    read only for its held-out loss and the next start (:meth:`~.auto.Auto.fold_point`). None where
    :func:`lean_auto` would return None (the general pipeline runs)."""
    ran = _run(solver, lp, init)
    return None if ran is None else ran[2]


def lean_path(solver: Solver, lp: LoweredProblem, ks: list[int], init: np.ndarray) -> np.ndarray | None:
    """The answers of ``solver`` (auto) at the bounds ``ks`` in turn, each started at the last's
    answer (``init`` at the first), as the rows of an array: the points :func:`lean_point` would
    give one call at a time (the kernel's ``path_run``: the same steps, bit for bit), for the
    longest prefix of ``ks`` the kernel answers (no row where the general path must run or the
    answer runs away). None where :func:`lean_auto` would return None at every bound."""
    prep = _prepared(solver, lp, init)
    if prep is None:
        return None
    kern, data, x_in, x_init, opts = prep
    X = np.empty((len(ks), lp.n))
    m = kern.path_run(data.P, np.asarray(ks, dtype=np.int64), x_init, opts, RUN_AWAY_SQ, X)
    return X[:m]


def _prepared(solver: Solver, lp: LoweredProblem, init: Any) -> tuple[Any, ...] | None:
    """What a kernel call on ``lp`` from ``init`` (None: auto's starts) takes: (the kernels, the
    lean data, the start inside the loss's domain, the start, the options array), or None where
    the kernel does not apply."""
    o = solver.opts
    if o["restricted"] != "auto" or not o["search"]:
        return None
    if init is None and o["start"] not in ("auto", "grahtp", "screen"):
        return None
    data = lean_data(lp)
    if data is None:
        return None
    x_in = lean_start(lp, data)
    x_init = initial_point(lp, init) if init is not None else x_in
    return kernels(), data, x_in, x_init, _options(o, data)


def _options(o: dict[str, Any], data: Any) -> np.ndarray:
    """The kernel's options array of auto's options ``o`` on the lean data ``data``."""
    pool = o["pool"] if o["pool"] is not None else data.coords
    return np.array(
        [
            o["exchange"],
            o["tries"],
            o["candidates"],
            pool,
            o["max_iter"],
            o["min_decrease"],
            GRAHTP_MAX_ITER,
            GRAHTP_TOL,
        ],
        dtype=float,
    )


def increasing_run(s: Any, ks: list[int]) -> list[int]:
    """The bounds of ``ks`` the kernel's ``path_run`` answers in one call on the set ``s``: the
    longest prefix strictly between 0 and every unit (``Solver.solve`` answers both ends itself)
    and increasing (the kernel takes each answer as the next start as it is, inside every larger
    bound's set only), as the set's bounds."""
    run: list[int] = []
    shared = getattr(s, "_shared", None)  # (a dict the set's copies at every bound share: sets/sparsity.py)
    for kv in ks:
        got = shared.get(("run", kv)) if shared is not None else None
        if got is None:  # (the set at that bound: its k and whether it allows every unit, once per bound)
            at = s.with_budget(kv)
            got = (at.k, at.vacuous())
            if shared is not None:
                shared[("run", kv)] = got
        k, vacuous = got
        if k == 0 or vacuous or (run and k <= run[-1]):
            break
        run.append(k)
    return run


class FoldKernel:
    """A cross-validation fold's points of ``auto`` (:meth:`~.auto.Auto.fold_points`) on a kernel
    problem alone, with no lowering of the fold's model: ``data`` the fold's lean arrays
    (:func:`sparsemodel.lowering.lean.on_rows`: rows of the all-data problem's), ``s`` the set (the
    constraints read no sample data: the all-data one), ``solver`` the fold's ``auto``. The points
    ``fold_points`` computes on the fold's lowering, by the same kernel calls on the same arrays;
    ``points`` answers none where that lowering must be read (the free fit's start outside the
    loss's domain, a bound at either end, a start the set does not contain, a case the kernel leaves
    to the general path): the fold's path then continues on its lowering
    (workflows/path.KernelFoldRun)."""

    def __init__(self, solver: Solver, data: Any, s: Any):
        self.solver, self.data, self.s = solver, data, s
        self.opts = _options(solver.opts, data)

    def adopt(self, lp: LoweredProblem) -> None:
        """The fold's lowering ``lp`` (built where the kernel answered no point) takes this kernel
        problem as its own (lowering/lean.adopt): its path goes on where the kernel's stopped."""
        adopt(lp, self.data)

    def points(self, ks: list[int], init: np.ndarray | None) -> list[np.ndarray]:
        """The fold's points at the bounds ``ks`` in turn, each from the last's (``init`` at the
        first; None: the path's first point, answered only at a bound of 0 by the free fit): those
        of the longest prefix the kernel answers."""
        kern, P = kernels(), self.data.P
        n = self.data.views["lin"].shape[0]
        head: list[np.ndarray] = []
        if init is None:
            if self.s.with_budget(ks[0]).k != 0 or self.solver.opts["restricted"] != "auto":
                return []
            zero = np.zeros(n)  # (lowering/lean.lean_start's start, where the loss is finite there)
            if not np.isfinite(kern.value_and_grad(P, zero)[0]):
                return []
            x, f, ok = kern.free_fit(P, zero)
            if not ok or not np.isfinite(f):
                return []
            head, init, ks = [x], x.copy(), ks[1:]
            if not ks:
                return head
        run = increasing_run(self.s, ks)
        if not run or init.shape != (n,) or not self.s.with_budget(run[0]).contains(init):
            return head  # (initial_point would project the start: the lowering's path does)
        X = np.empty((len(run), n))
        m = kern.path_run(P, np.asarray(run, dtype=np.int64), init, self.opts, RUN_AWAY_SQ, X)
        return head + list(X[:m])


def _run(solver: Solver, lp: LoweredProblem, init: Any) -> tuple[Any, ...] | None:
    """The kernel's ``auto_run`` on ``lp`` from ``init`` (None: auto's starts), or None where it does
    not apply or leaves the case to the general path."""
    prep = _prepared(solver, lp, init)
    if prep is None:
        return None
    kern, data, x_in, x_init, opts = prep
    o = solver.opts
    if init is not None:
        starts = [2]
    elif o["start"] == "auto":
        starts = [0, 1] if data.quadratic else [0]
    else:
        starts = [START_NAMES.index(o["start"])]
    k = int(lp.set.k)
    st = np.array(starts, dtype=np.int64)
    stats = np.zeros((len(starts), kern.N_STATS), dtype=np.int64)
    runs = np.empty((len(starts), 5))
    runs.fill(np.nan)
    x, f, status, its, best, flog = kern.auto_run(data.P, k, st, x_in, x_init, opts, stats, runs)
    if status == kern.FALLBACK:
        return None
    return kern, starts, x, f, status, its, best, flog, stats, runs
