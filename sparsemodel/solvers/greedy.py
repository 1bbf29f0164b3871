"""Greedy support selection: OMP, OMPR, Exhaustive Local Search (paper 003, Algorithms 2-4) and
forward selection by exact decrease (the FBS baseline of paper 000, Section 3.2).

All four keep a support S (positions into the constrained coordinates C) and the restricted
minimizer x(S) = argmin { f(x) : supp_C(x) within S }, with the free coordinates F (intercepts,
other variables) optimized in every restricted solve and never selected, counted or removed. The
restricted solves go through :class:`~sparsemodel.lowering.active.ActiveSet`: on least squares a
Cholesky factorization of the selected columns of the stacked weighted design is updated when a
column enters or leaves; on other losses the lowered problem's Newton / L-BFGS solve is warm started
from the previous iterate (the new coordinate at 0).

* ``omp`` (Algorithm 2, greedy / forward stepwise): s times, add i = argmax_{i not in S} |grad_i f(x)|
  and re-solve.
* ``ompr`` (Algorithm 3): swap i = argmax_{i not in S} |grad_i f(x)| in and j = argmin_{j in S} |x_j|
  out, re-solve, stop at the first swap that does not lower f (returning the last iterate before it).
* ``els`` (Algorithm 4): j = argmin_{j in S} x_j^2 out, and in the i whose insertion gives the lowest
  exact value min { f(x) : supp(x) within S ∪ {i} \\ {j} } (scored by
  :func:`~sparsemodel.lowering.active.insertion_values`); stop when that swap does not lower f, or
  after T = ``max_iter`` iterations.
* ``forward``: s times, add the i whose insertion gives the lowest exact value
  min { f(x) : supp(x) within S ∪ {i} } (orthogonal least squares on least squares; the same exact
  scoring as ELS on other losses).

Initialization. Algorithms 3 and 4 start from S0 = [s], the first s constrained coordinates; paper
003, Section 6.1 initializes every local-search method with the OMP solution of the same sparsity
for its experiments. The default ``init='omp'`` follows Section 6.1; ``init='first'`` is the [s]
start of the algorithms as printed; an array (Python API) starts from its s largest entries on C.

Deviation (numerical): a swap counts as an improvement only if it lowers f by more than
``min_decrease * max(1, |f|)`` (default 1e-12), so that rounding noise between supports of equal
value cannot make OMPR or ELS cycle; ``min_decrease=0`` is the papers' strict test
f(x(t+1)) >= f(x(t)).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from ..errors import SolverError
from ..lowering.active import ActiveSet
from ..lowering.forms import edges, unpaired
from ..lowering.lowered import LoweredProblem
from ..util import Clock
from .base import Solver, initial_point, register
from .options import Option, restricted_option, subproblem13_options
from .result import CONVERGED, MAX_ITER, History, Result, finish

RESTRICTED = restricted_option("the restricted solves (least squares: an incremental Cholesky factor)")
INIT = Option(
    "omp",
    "starting support: 'omp' (OMP of the same sparsity, paper 003 Section 6.1), 'first' (the "
    "first s constrained coordinates, [s] in Algorithms 3-5), or an array whose s largest entries "
    "on the constrained coordinates give the support (Python API)",
    "any",
)
MIN_DECREASE = Option(
    1e-12,
    "a swap must lower f by more than min_decrease * max(1, |f|) to count (0: the papers' strict test)",
    float,
    low=0,
)


def solve_unconstrained(lp: LoweredProblem, solver: Solver, method: str) -> Result:
    """No nnz constraint: nothing to select, one restricted solve over every coordinate."""
    clock = Clock()
    r = lp.restricted_minimize(None, method=method)
    return finish(lp, solver, r.x, CONVERGED, 1, clock, f=r.f)


def omp_steps(
    lp: LoweredProblem, act: ActiveSet, k: int, hist: History | None = None
) -> tuple[np.ndarray, float, np.ndarray]:
    """Algorithm 2 of paper 003 from the empty support: k times add argmax_{i not in S} |grad_i f|
    and re-solve on S ∪ {i} (warm started). Returns (x, f, S)."""
    C = lp.set.coords
    sel = np.empty(0, dtype=np.int64)
    x, f = act.solve(sel)
    for _ in range(k):
        g = act.grad()
        score = lp.set.descent_scores(g[C])
        score[sel] = -np.inf
        i = int(np.argmax(score))
        sel = np.union1d(sel, [i])
        x, f = act.solve(sel, x0=x)
        if hist is not None:
            hist.log(f)
    return x, f, sel


def forward_steps(
    lp: LoweredProblem, act: ActiveSet, k: int, hist: History | None = None
) -> tuple[np.ndarray, float, np.ndarray]:
    """Forward selection by exact decrease: k times add argmin_i min { f : supp within S ∪ {i} }."""
    sel = np.empty(0, dtype=np.int64)
    x, f = act.solve(sel)
    for _ in range(k):
        vals = act.insertion_values()
        cand = np.setdiff1d(np.arange(lp.set.size), sel)
        i = int(cand[int(np.argmin(vals))])
        sel = np.union1d(sel, [i])
        x, f = act.solve(sel, x0=x)
        if hist is not None:
            hist.log(f)
    return x, f, sel


def start_support(lp: LoweredProblem, act: ActiveSet, init: Any, solver: str) -> tuple[np.ndarray, str]:
    """S0 for OMPR / ELS / ARHT: (positions into C, a description)."""
    sps = lp.set  # coordinate sparsity: the greedy solvers take no other kind (handles)
    k = sps.k
    if isinstance(init, str):
        if init == "omp":
            _, _, sel = omp_steps(lp, act, k)
            return sel, "omp"
        if init == "first":
            return np.arange(k, dtype=np.int64), "first"
        raise SolverError(
            f"init={init!r} of {solver} is not a known start",
            hint="use init='omp' (the default), init='first', or an array (Python API)",
        )
    z = np.asarray(init, dtype=float).ravel()
    if z.shape == (lp.n,):
        z = z[sps.coords]
    elif z.shape == (lp.primary.size,):
        z = z[sps.constraint.coords]
    if z.shape != (sps.size,):
        raise SolverError(
            f"init has {z.size} entries; expected {lp.primary.size} (the variable {lp.primary.name}) or {lp.n}",
            hint=f"{solver}: init='omp', init='first' or an array",
        )
    return sps.select(z, k), "array"


def edges_only(name: str, lp: LoweredProblem) -> SolverError | None:
    """The refusal of a greedy solver that moves whole edges (forward, foba) on symmetric pairs of
    an objective other than the precision matrix's, or None."""
    if unpaired(lp):
        return SolverError(
            f"{name} selects symmetric off-diagonal pairs only on the precision-matrix objective "
            "-logdet(O) + trace(S @ O)",
            lp.set.span,
            "use grahtp, grasp or iht for other objectives",
        )
    return None


class _GreedyBase(Solver):
    handles = frozenset({"nnz", "box"})

    @classmethod
    def unfit(cls, lp: LoweredProblem) -> SolverError | None:
        return edges_only(cls.name, lp)

    def _setup(self, lp: LoweredProblem) -> ActiveSet:
        return ActiveSet(lp, method=self.opts["restricted"])

    def _before(self, lp: LoweredProblem) -> Result | None:
        """What every greedy run checks first: no sparsity constraint (one restricted solve), the
        edges of a precision matrix (forward selection's own path); None when the run proper goes
        ahead (pairs on another objective were refused before the run: ``unfit``)."""
        if lp.set is None:
            return solve_unconstrained(lp, self, self.opts["restricted"])
        if self.name == "forward" and edges(lp) is not None:
            return edge_forward(lp, self)
        return None

    def _improves(self, f_new: float, f_old: float) -> bool:
        return f_new < f_old - self.opts["min_decrease"] * max(1.0, abs(f_old))


class _Stepwise(_GreedyBase):
    """Greedy selection of k coordinates, one per step (``steps`` says how each is chosen)."""

    options = {"restricted": RESTRICTED}
    steps = staticmethod(omp_steps)

    def run(self, lp: LoweredProblem) -> Result:
        early = self._before(lp)
        if early is not None:
            return early
        act = self._setup(lp)
        clock = Clock()
        hist = self.history(lp, clock)
        x, f, sel = self.steps(lp, act, lp.set.k, hist)
        return finish(lp, self, x, CONVERGED, len(sel), clock, hist, f=f)


def edge_forward(lp: LoweredProblem, solver: Solver, growth: float = 0.0) -> Result:
    """Forward selection of edges (FBS, the baseline of paper 000, Section 6.3): k times add the
    edge whose single-edge exact line search lowers f the most (:class:`~sparsemodel.lowering.forms.PrecisionEdges`; scoring every
    candidate by a full refit would cost one ADMM per candidate), then refit on the support with
    the restricted solve (covsel, in the eigenvalue box when there is one). ``growth`` > 0 adds the
    max(1, ceil(growth |F|)) best edges per step instead of one (:func:`edge_forward_path`)."""
    clock = Clock()
    hist = solver.history(lp, clock)
    x, f, steps = edge_forward_path(lp, solver.opts["restricted"], growth, hist)
    return finish(lp, solver, x, CONVERGED, steps, clock, hist, f=f, extra={"scoring": "edge line search"})


def edge_forward_path(
    lp: LoweredProblem, method: str, growth: float = 0.0, hist: History | None = None
) -> tuple[np.ndarray, float, int]:
    """The steps of :func:`edge_forward`: (x, f, steps). ``growth`` > 0 adds the
    max(1, ceil(growth |F|)) best edges per step (a graph of k edges in about
    log(k) / log(1 + growth) steps; a start of ``auto``)."""
    moves = edges(lp)
    units = np.empty(0, dtype=np.int64)
    r = lp.restricted_minimize(moves.positions(units), x0=initial_point(lp, "zeros"), method=method)
    x, f = r.x, r.f
    if hist is not None:
        hist.log(f)
    steps = 0
    while len(units) < lp.set.k:
        cand = np.setdiff1d(np.arange(moves.n_units), units)
        if len(cand) == 0:
            break
        b = min(lp.set.k - len(units), max(1, int(np.ceil(growth * len(units)))))
        best = cand[np.argsort(moves.add_values(x, f, cand), kind="stable")[:b]]
        units = np.union1d(units, best)
        steps += 1
        lp.oracle.thresholded()
        r = lp.restricted_minimize(moves.positions(units), x0=x, method=method)
        x, f = r.x, r.f
        if hist is not None:
            hist.log(f)
    return x, f, steps


@register
class OMP(_Stepwise):
    """Orthogonal Matching Pursuit: paper 003, Algorithm 2."""

    name = "omp"
    summary = "Orthogonal Matching Pursuit: add the coordinate of largest |gradient|, re-solve (s steps)"
    reference = "paper 003, Algorithm 2 (Greedy / OMP / forward stepwise)"
    steps = staticmethod(omp_steps)


@register
class Forward(_Stepwise):
    """Forward greedy selection by exact decrease (orthogonal least squares; FBS of paper 000)."""

    name = "forward"
    summary = "forward selection: add the coordinate whose refit lowers f the most (OLS / FBS), s steps"
    reference = "paper 000, Section 3.2 (FBS baseline); exact scoring shared with ELS (paper 003, Algorithm 4)"
    handles = frozenset({"nnz", "box", "nnz_pairs", "eig_box"})  # pairs: precision matrices (edge moves)
    needs = "on symmetric off-diagonal pairs, the precision-matrix objective -logdet(O) + trace(S @ O)"
    steps = staticmethod(forward_steps)


def _swap_options(max_iter_help: str) -> dict[str, Option]:
    return {
        "init": INIT,
        "max_iter": Option(1000, max_iter_help, int, low=1),
        "min_decrease": MIN_DECREASE,
        "restricted": RESTRICTED,
        **subproblem13_options(),
    }


class _SwapSearch(_GreedyBase, ABC):
    """The local search loop shared by OMPR and ELS: from the initial support, swap one coordinate
    out and one in (``propose``), re-solve, and stop at the first swap that does not lower f,
    returning the iterate before it."""

    @abstractmethod
    def propose(self, act: ActiveSet, C: np.ndarray, x: np.ndarray, sel: np.ndarray) -> tuple[np.ndarray, Any]:
        """The next support and a warm start for its restricted solve (or None)."""

    def run(self, lp: LoweredProblem) -> Result:
        early = self._before(lp)
        if early is not None:
            return early
        act = self._setup(lp)
        clock = Clock()
        C = lp.set.coords
        sel, how = start_support(lp, act, self.opts["init"], self.name)
        x, f = act.solve(sel)
        f0 = f
        hist = self.history(lp, clock)
        hist.log(f)
        status, it = MAX_ITER, 0
        while it < self.opts["max_iter"]:
            new, warm = self.propose(act, C, x, sel)
            xn, fn = act.solve(new, x0=warm)
            if not self._improves(fn, f):  # f(x(t+1)) >= f(x(t)): return x(t)
                status = CONVERGED
                break
            x, f, sel = xn, fn, new
            it += 1
            hist.log(f)
        return finish(lp, self, x, status, it, clock, hist, f=f, extra={"init": how, "init_objective": f0, "swaps": it})


@register
class OMPR(_SwapSearch):
    """OMP with Replacement: paper 003, Algorithm 3."""

    name = "ompr"
    summary = "OMP with Replacement: swap in argmax |gradient|, swap out argmin |x_j|, while f decreases"
    reference = "paper 003, Algorithm 3 (OMPR / local search); init: Section 6.1"
    options = _swap_options("maximum number of swaps (a safeguard; Algorithm 3 loops until no decrease)")

    def propose(self, act, C, x, sel):
        score = act.lp.set.descent_scores(act.grad()[C])
        score[sel] = -np.inf
        i = int(np.argmax(score))  # line 8
        j = int(sel[np.argmin(np.abs(x[C[sel]]))])  # line 9
        warm = x.copy()
        warm[C[j]] = 0.0
        return np.union1d(np.setdiff1d(sel, [j]), [i]), warm  # line 10 (line 11: the solve)


@register
class ELS(_SwapSearch):
    """Exhaustive Local Search: paper 003, Algorithm 4."""

    name = "els"
    summary = "Exhaustive Local Search: swap out argmin |x_j|, swap in the coordinate whose refit is best"
    reference = "paper 003, Algorithm 4 (Exhaustive Local Search); init: Section 6.1"
    options = _swap_options("T, the maximum number of iterations of Algorithm 4")

    def propose(self, act, C, x, sel):
        j = int(sel[np.argmin(x[C[sel]] ** 2)])  # line 7
        rest = np.setdiff1d(sel, [j])
        warm = x.copy()
        warm[C[j]] = 0.0
        act.solve(rest, x0=warm)
        mask = np.ones(len(C), dtype=bool)
        mask[sel] = False  # i ranges over [n] \ S(t): j itself is not a candidate
        cand = np.flatnonzero(mask)
        vals = act.insertion_values(cand)  # line 8: exact min f on S(t) ∪ {i} \ {j}
        i = int(cand[int(np.argmin(vals))])
        return np.union1d(rest, [i]), None  # line 9 (line 10: the solve)
