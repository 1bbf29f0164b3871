"""Adaptively Regularized Hard Thresholding: paper 003, Algorithms 5 and 6 (Axiotis & Sviridenko).

ARHT_core(s, opt, eps) (Algorithm 5) runs OMPR on the adaptively regularized objective

    g_R(x) = f(x) + rho/2 * ||x_R||^2,      rho = rho_2^+ (restricted smoothness over 2 coordinates),

starting from R0 = all constrained coordinates and the g_{R0}-minimizer on S0. Each iteration t:

* line 12: if min { f(x) : supp(x) within S(t) } <= opt, return that minimizer;
* lines 15-18: i = argmax |grad_i g_R(x(t))|, j = argmin_{j in S(t)} |x_j|, S(t+1) = S(t) ∪ {i} \\ {j},
  x(t+1) = argmin { g_R(x) : supp(x) within S(t+1) };
* lines 19-23: if g_R(x(t)) - g_R(x(t+1)) < c/s * (g_R(x(t)) - opt) (too little progress, "Type 2"),
  keep S(t), sample i in R with probability proportional to x_i(t)^2, drop it from R (stop
  regularizing it) and re-solve on S(t).

ARHT_robust (Algorithm 6) repeats the core and keeps the best f; ARHT binary-searches the target
value opt between l = B = min_x f(x) and r (Algorithm 6, lines 17-31): a round at m = (l + r)/2
that reaches f(x) <= m + eps/3 lowers r to f(x) and keeps x, otherwise l = m; it stops when
r - l <= eps.

Only constrained coordinates are ever regularized: the free coordinates F (intercepts, other
variables) are never in R, never selected or swapped out, and optimized in every restricted solve.
The gradient argmax of line 15 runs over the constrained coordinates outside S(t) (on S(t) and on F
the gradient of g_R vanishes at the restricted minimizer x(t), so this is the paper's argmax over
[n]). The restricted solves use the incremental Cholesky factorization of
:class:`~sparsemodel.lowering.active.ActiveSet` on least squares (the regularizer is a diagonal on
the Gram matrix: paper 003, Section 6.2.2 encodes it the same way, as identity rows appended to A),
warm-started Newton otherwise. With ``restricted='auto'`` on a logistic or Poisson loss of stored
columns (the lean class of :mod:`sparsemodel.lowering.lean`) the Newton solves run on the gathered
rows J'[S] with the loss Hessian kept across solves and moved to the next support by one column
(``ActiveSet(lean=...)``, :class:`~sparsemodel.lowering.active._LeanNewton`): the same minimizers to
the decrement test (``tol``), iterates within its accuracy, and the points a run returns (its
polished f-minimizer, the start) to rounding; ``restricted='newton'`` runs the general Newton
pipeline instead.

Settings (option ``settings``):

* ``practical`` (default) -- Section 6.3.2: progress condition (17) with c = 1e-3; a core run stops
  early when (17) fails and at least half of the support is unregularized, |S(t) \\ R(t)| >= |S(t)|/2;
  20 runs of the core per ARHT_robust call. The theoretical T still caps each core run.
* ``theory`` -- Algorithms 5 and 6 as stated: c = 1 (progress 1/s), T = 2 s log((f(0) - B)/eps')
  iterations, 5 log(6 n log((f(0) - B)/eps')) runs per ARHT_robust call (eps' = eps/3, the error
  ARHT passes to ARHT_robust; n = number of coordinates).

``progress``, ``max_iter`` and ``restarts`` override the single constants of either setting.

Deviations, each with the paper's version reachable:

* Initialization (Section 6.1): S0 is the OMP support of the same sparsity (``init='omp'``);
  ``init='first'`` is Algorithm 5's S0 = [s]. The bracket starts at b = argmin_{S0} f, r = f(b)
  instead of b = 0, r = f(0): b is s-sparse and f(b) <= f(0), so the bracket is never wider, and the
  answer is never worse than the start.
* A core run returns the f-minimizer on its final support (``polish=true``), whose f is never above
  that of Algorithm 5's x(T) (a g_R-minimizer on the same support); ``polish=false`` returns x(T).
* ARHT_robust stops repeating the core as soon as one run reaches f <= opt, and when a run made no
  random choice (every further run would repeat it); ``all_restarts=true`` runs all of them as
  Algorithm 6 does.
* When R(t) ∩ S(t) holds no nonzero coordinate the sampling of line 21 is impossible; the run stops.
* ``eps='auto'`` is 1e-3 * (f(b) - B) (a number gives the paper's absolute eps).
* Tests decided from value brackets (``screen_tests=true``): line 12 (min_S f <= opt) and the
  progress test of line 19 (Type 1 iff min_{S(t+1)} g_R <= tau' = g - c/s (g - opt)) read one value
  each. A Newton solve knows its value f and, once its decrement dec is small, the quadratic model's
  lower end f - 4 dec / (2 lo) (four times the model's decrease dec / 2; lo the certified curvature
  ratio); it stops as soon as that lower end is above the threshold (the test is false: line 12 does
  not return; Type 2) and either above the threshold at the bracket's current r (the test is then
  false for every later target of the binary search) or keeps 90% of the distance f - threshold (so
  the interval of targets the run records stays nearly that of the exact value, and later rounds
  still replay the run). The run records the lower end in place of the value. A test whose
  threshold lies inside the bracket, and every Type 1 swap (its minimizer is the next iterate), is
  solved to ``tol``; an entry stopped early is resumed when a later test needs more. The lower end
  is the model's estimate, not a proven bound (a convex loss's decrease beyond its Newton model is
  not bounded without global curvature bounds): on the benchmarks and tests the decisions, core
  runs and answers are those of solving every test to ``tol``, which ``screen_tests=false`` does.
* Line 12 decided in groups (``group_tests=true``): a run does not solve min_S f at each new
  support S as it reaches it; it goes on (the g_R-iterates do not depend on line 12 until it holds)
  and decides the tests of up to 8 consecutive supports at once from min f over their union U
  (at most min f over each of them): above opt, every one of them is false; otherwise the first
  half is decided before the second, down to single supports, and at the first that holds the run
  is cut back to its state there, so it ends where Algorithm 5's does. Each support's lower end is
  kept for later runs; a later round whose target passes a group's lower end decides that group
  again instead of recomputing the run. On Caravan at k = 30 the f-solves go from 632 to about
  130 (unions of 33 to 38 columns), the same runs and answer; ``group_tests=false`` solves each
  test at its iteration (Algorithm 5's order).
* Common random numbers (``reuse_runs=true``): restart q of every round of the binary search draws
  from the same random stream (seeded by (seed, q)), so the restarts of one round are still
  independent runs of Algorithm 5, as ARHT_robust needs, while the same restart in two rounds is
  the same run unless the target changes one of its decisions. Only two tests of Algorithm 5 read
  opt: line 12 (min_S f <= opt) and the progress test of line 19, which holds exactly when
  opt >= g - (g - g1) s / c. A run records the interval of targets for which every one of its tests
  comes out the same and a later round inside it reuses the run instead of recomputing it (on
  Caravan at k = 16, 175 of 200 core runs; 28 s -> 1.7 s per k, the same answer). g_R-minimizers
  are cached by (S, R ∩ S) (g_R on S depends on R only through R ∩ S): restarts share their
  deterministic prefix. The gradient at a g_R-minimizer is computed only when line 15 reads it
  (not for one the progress test rejects, or after which line 12 ends the run): at k = 20,
  590 gradients instead of 732, the same run. ``reuse_runs=false`` draws fresh randomness for every run (Algorithm 6 as
  stated) and still uses the cache. Line 15's argmax on the lean solves is screened on a float32
  copy of the rows and the coordinates whose rigorous error bracket reaches the maximum are
  recomputed in double (:meth:`~sparsemodel.lowering.active.ActiveSet.grad_argmax`): not a
  deviation, the same coordinate as the double gradient's argmax, ties included
  (``lowering.active.LEAN_SCREEN = False`` computes every entry in double).

``rho='auto'`` is rho_2^+ over the constrained coordinates (:func:`rho_2_plus`: exact from the
Hessian bound on C when that is cheap, else truncated power as in ``lp.smoothness(2)``; free
coordinates left out, since they are never regularized). B (``lower='auto'``) and rho (``rho='auto'``)
do not read the bound k: they are computed once per lowering and shared by its copies at other
bounds (``lp.solver_cache``: a path or a sweep over k), and again after new data is bound. ``seed`` fixes the sampling (the default
0 makes runs reproducible). A binary search whose bracket is empty or unbounded (B not finite, B
above f(b), or min f not found because f is unbounded below) raises a
:class:`~sparsemodel.errors.SolverError`; more than 10 + 6 log((f(b) - B)/eps) rounds (Lemma 3.7
bounds them by 6 log(...)) end with status ``max_iter``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import SolverError
from ..lowering.active import ActiveSet
from ..lowering.lowered import LoweredProblem
from ..numerics.smooth import power_method
from ..sets.sparsity import top_k
from ..util import Clock
from .base import Solver, register
from .greedy import INIT, solve_unconstrained, start_support
from .options import Option, restricted_option
from .result import CONVERGED, MAX_ITER, Result, finish

PRACTICAL_PROGRESS = 1e-3
PRACTICAL_RESTARTS = 20


@dataclass
class _Core:
    x: np.ndarray
    f: float
    reached: bool
    iterations: int
    type2: int
    sampled: bool
    stop: str


@dataclass
class _Snap:
    """A core run's state at the start of an iteration whose line-12 test is deferred."""

    S: np.ndarray
    x: np.ndarray
    g: float
    gx: list
    lo: float
    hi: float
    it: int
    t2: int
    sampled: bool


GROUP = 8  # line-12 tests deferred and decided together on the union of their supports (group_tests)
DECIDE_SHARE = 0.9  # a solve stopped by a decided test keeps this share of the distance to the threshold
REPLAY = True  # reuse recorded core runs (tests switch it off to check that the reuse changes nothing)
GCACHE_ENTRIES = 2e7  # floats kept by the cache of g_R-minimizers (their gradients on C)
EXACT_RHO_BUDGET = 5e8  # multiply-adds allowed for forming the Hessian (bound) on C exactly


def rho_2_plus(lp: LoweredProblem, starts: int = 3, iters: int = 100) -> float:
    """rho_2^+: the largest eigenvalue of the Hessian (bound) over directions with at most two
    nonzeros, all on constrained coordinates (its largest |eigenvalue| where it is indefinite: a
    nonconvex custom loss).

    Exact when affordable: the Hessian (bound) restricted to C from |C| Hessian-vector products,
    then the largest eigenvalue of every 2x2 principal submatrix in closed form. Otherwise the
    truncated power method (Yuan & Zhang 2013, the kernel of ``lp.smoothness``) from 2 * ``starts``
    starting vectors. Unlike ``lp.smoothness(2)`` the free coordinates are left out: they are never
    regularized, and an unscaled intercept column (norm^2 = number of samples) would otherwise set
    rho (on Caravan 1456 instead of 0.49 with unit-norm feature columns)."""
    hv = lp.hessian_operator()
    C = lp.set.coords
    nC = len(C)
    full = lp.zeros()
    if nC * max(lp.n_samples, 1) * lp.n <= EXACT_RHO_BUDGET:
        H = np.empty((nC, nC))
        for a, c in enumerate(C):
            full[c] = 1.0
            H[a] = hv(full)[C]
            full[c] = 0.0
        H = 0.5 * (H + H.T)
        d = np.diag(H)
        # the largest |eigenvalue| of each 2 x 2 block: its largest eigenvalue for a convex loss, the
        # magnitude the regularization needs where a nonconvex custom loss's block is indefinite
        lam = 0.5 * np.abs(d[:, None] + d[None, :]) + np.sqrt(0.25 * (d[:, None] - d[None, :]) ** 2 + H * H)
        np.fill_diagonal(lam, np.abs(d))
        return float(lam.max())

    def hv_C(v: np.ndarray) -> np.ndarray:
        full[:] = 0.0
        full[C] = v
        return hv(full)[C]

    def trunc(z: np.ndarray) -> np.ndarray:
        out = np.zeros(nC)
        keep = top_k(z, min(2, nC))
        out[keep] = z[keep]
        return out

    v0s = []
    for seed in range(starts):
        rng = np.random.default_rng(seed)
        v0s += [np.ones(nC) + 1e-3 * rng.standard_normal(nC), rng.standard_normal(nC)]
    return power_method(hv_C, trunc, v0s, iters=iters)


@register
class ARHT(Solver):
    name = "arht"
    handles = frozenset({"nnz"})
    summary = "Adaptively Regularized Hard Thresholding: OMPR on f + rho/2||x_R||^2, restarts, binary search on opt"
    reference = "paper 003, Algorithms 5 (ARHT_core) and 6 (ARHT_robust, ARHT); settings: Section 6.3.2"
    options = {
        "settings": Option(
            "practical",
            "'practical' (Section 6.3.2: progress 1e-3/s, early stop, 20 restarts) or 'theory' "
            "(Algorithms 5-6: progress 1/s, T iterations, 5 log(6 n log(...)) restarts)",
            str,
            ("practical", "theory"),
        ),
        "rho": Option(
            "auto",
            "regularization weight: a number, or 'auto' = rho_2^+ over 2 constrained coordinates (truncated power)",
            "float_or_auto",
            low=0,
            open_low=True,
        ),
        "progress": Option(
            "auto",
            "c in the progress test g(x_t)-g(x_t+1) >= c/s (g(x_t)-opt); 'auto' from settings",
            "float_or_auto",
            low=0,
            open_low=True,
        ),
        "restarts": Option(None, "core runs per ARHT_robust call (none: from settings)", "int_or_none", low=1),
        "max_iter": Option(None, "iterations per core run (none: T = 2 s log((f(0)-B)/eps'))", "int_or_none", low=1),
        "eps": Option(
            "auto", "target error of the binary search: a number, or 'auto' = 1e-3 (f(x0) - B)", "float_or_auto"
        ),
        "lower": Option(
            "auto", "B, a lower bound on the optimal value: a number, or 'auto' = min_x f(x)", "float_or_auto"
        ),
        "seed": Option(0, "seed of the sampling of line 21 (none: not reproducible)", "int_or_none", low=0),
        "init": INIT,
        "polish": Option(True, "a core run returns the f-minimizer on its support (false: x(T), Algorithm 5)", bool),
        "all_restarts": Option(False, "run every restart even after one reached opt (Algorithm 6 verbatim)", bool),
        "reuse_runs": Option(
            True,
            "restart q of every round draws from one random stream and a round reuses a recorded run whose "
            "tests its target does not change (false: fresh randomness for every run, Algorithm 6 as stated)",
            bool,
        ),
        "screen_tests": Option(
            True,
            "stop a restricted solve once its value bracket decides line 12 (f <= opt) or the progress test; "
            "exact solves only when a test is close (false: every solve to tol)",
            bool,
        ),
        "group_tests": Option(
            True,
            "decide line 12 (min_S f <= opt) for up to 8 consecutive supports at once from the minimum of f over "
            "their union (a lower end for each), the run's later iterations computed ahead and dropped when a test "
            "holds (false: one solve per support, at its iteration, as Algorithm 5)",
            bool,
        ),
        "restricted": restricted_option(
            "the restricted solves (least squares: an incremental Cholesky factor; auto on a logistic or "
            "Poisson loss with a stored Jacobian: Newton on its gathered rows with the Hessian kept across "
            "solves; newton: the general Newton pipeline)"
        ),
        "tol": Option(
            1e-12,
            "tolerance of the restricted solves (Newton decrement relative to 1 + |f|); the paper's experiments "
            "use scikit-learn's L-BFGS, far looser",
            float,
            low=0,
            open_low=True,
        ),
    }

    def run(self, lp: LoweredProblem) -> Result:
        o = self.opts
        if lp.set is None:
            return solve_unconstrained(lp, self, o["restricted"])
        clock = Clock()
        lean = o["restricted"] == "auto"  # Newton on the gathered rows where it applies (see the module docstring)
        feng = ActiveSet(lp, method=o["restricted"], tol=o["tol"], lean=lean)  # f-minimizers (line 12, polish)
        shared = feng.lean.sh if feng.lean is not None else False  # the gathered rows, shared
        geng = ActiveSet(lp, method=o["restricted"], tol=o["tol"], lean=shared)  # g_R-minimizers
        sel0, how = start_support(lp, feng, o["init"], self.name)
        xb, fb = feng.solve(sel0, accurate=True)
        hist = self.history(lp, clock)
        hist.log(fb)
        B, b_note, eps, span, log_ratio = self._bracket(lp, o, fb, how)
        runs = _CoreRuns(lp, o, feng, geng, sel0, *self._settings(lp, o, log_ratio))

        # ---- the binary search on opt of Algorithm 6, lines 21-31
        l, r, xbest = B, fb, xb
        rounds, max_rounds = 0, 10 + math.ceil(6 * max(math.log(max(span, eps) / eps), 1.0))
        status = CONVERGED
        while r - l > eps:
            if rounds >= max_rounds:
                status = MAX_ITER
                break
            rounds += 1
            m = 0.5 * (l + r)  # line 22
            res = runs.robust(m, r)  # line 23
            if res.f > m + eps / 3:  # line 24
                l = m
            else:
                xbest, r = res.x, res.f
            hist.log(r, lower=l, target=m)
        extra = {
            "init": how,
            "init_objective": fb,
            "lower_bound": B,
            "lower_bound_note": b_note,
            "final_lower": l,
            "eps": eps,
            "rho": runs.rho,
            "progress": runs.c,
            "settings": o["settings"],
            "T": runs.T,
            "restarts": runs.restarts,
            "rounds": rounds,
            **runs.stats,
        }
        return finish(lp, self, xbest, status, rounds, clock, hist, f=r, extra=extra)

    def _bracket(self, lp: LoweredProblem, o: dict, fb: float, how: str) -> tuple[float, str, float, float, float]:
        """The bracket [B, f(b)] of Algorithm 6, lines 17-20, and its scale: (B, how B was found,
        eps, the span of the bracket, log(span / (eps / 3)))."""
        B, b_note = self._lower_bound(lp, o, fb)
        if not np.isfinite(fb):
            raise SolverError(
                f"arht: the objective is not finite at the start ({fb}); the binary search on opt cannot start",
                hint="check the data, or start elsewhere with init=...",
            )
        if o["lower"] == "auto" and B > fb:  # min_x f is solved to a tolerance: f(start) is a valid lower value too
            B = fb
        if B > fb + 1e-12 * max(1.0, abs(fb)):
            raise SolverError(
                f"arht: the binary search cannot bracket the optimum: the lower bound B = {B:.6g} is above "
                f"f = {fb:.6g} at the {how} start, so the interval [B, f(start)] is empty",
                hint="give lower=<a value at most the optimal objective>, or leave lower='auto' (min_x f(x))",
            )
        if isinstance(o["eps"], str):
            eps = 1e-3 * (fb - B)
        else:
            eps = float(o["eps"])
            if eps <= 0:
                raise SolverError(f"arht: eps must be positive; got {eps}", hint="eps='auto' or a positive number")
        eps = max(eps, 1e-13 * max(1.0, abs(fb)))  # below the rounding of f the bracket cannot shrink
        f_zero = lp.f(lp.zeros())
        top = f_zero if np.isfinite(f_zero) else fb
        span = max(top - B, fb - B)
        log_ratio = math.log(span / (eps / 3)) if span > eps / 3 > 0 else 1.0
        return B, b_note, eps, span, log_ratio

    def _settings(self, lp: LoweredProblem, o: dict, log_ratio: float) -> tuple[int, int, float, float]:
        """T (iterations per core run), the core runs per ARHT_robust call, the progress constant c
        and rho, from the ``settings`` (Algorithms 5-6 or Section 6.3.2) and the options."""
        theory = o["settings"] == "theory"
        T = o["max_iter"] if o["max_iter"] is not None else max(1, math.ceil(2 * lp.set.k * log_ratio))
        if o["restarts"] is not None:
            restarts = max(1, o["restarts"])
        elif theory:
            restarts = max(1, math.ceil(5 * math.log(6 * lp.n * max(log_ratio, 1.0))))
        else:
            restarts = PRACTICAL_RESTARTS
        c = (1.0 if theory else PRACTICAL_PROGRESS) if isinstance(o["progress"], str) else float(o["progress"])
        if isinstance(o["rho"], str):  # the estimate made safe: ~0 on a flat convex loss is rounding
            rho = _per_lowering(lp, "rho", (), lambda: lp.safe_curvature(rho_2_plus(lp), lp.zeros()))
        else:
            rho = float(o["rho"])
        if not np.isfinite(rho) or rho <= 0:
            raise SolverError(f"arht: rho must be positive and finite; got {rho}", hint="give rho=<a positive number>")
        return T, restarts, c, rho

    @staticmethod
    def _lower_bound(lp: LoweredProblem, o: dict, fb: float) -> tuple[float, str]:
        """B of Algorithm 6, line 17: min_x f(x) over every coordinate (or the user's lower)."""
        if not isinstance(o["lower"], str):
            return float(o["lower"]), "given"
        return _per_lowering(lp, "lower", (o["restricted"],), lambda: ARHT._min_f(lp, o))

    @staticmethod
    def _min_f(lp: LoweredProblem, o: dict) -> tuple[float, str]:
        """min_x f(x) over every coordinate, B of ``lower='auto'``, and how it was found."""
        res = lp.restricted_minimize(np.arange(lp.set.size), method=o["restricted"])
        B = float(res.f)
        if not np.isfinite(B):
            raise SolverError(
                f"arht: the binary search cannot bracket the optimum: min_x f(x) = {B} is not finite",
                hint="f must be bounded below; or give lower=<a lower bound on the optimal value>",
            )
        _, g = lp.value_and_grad(res.x)
        _, g0 = lp.value_and_grad(lp.zeros())
        scale = max(1.0, float(np.max(np.abs(g0))) if np.all(np.isfinite(g0)) else 1.0)
        if np.max(np.abs(g)) > 1e-4 * scale:
            raise SolverError(
                "arht: the binary search cannot bracket the optimum: the unconstrained minimum of f, its "
                f"lower end B, was not found (the gradient there is {np.max(np.abs(g)):.3g} > 0; f may be "
                "unbounded below)",
                hint="give lower=<a lower bound on the optimal value>",
            )
        return B, "min_x f(x)" + ("" if res.converged else " (restricted solve not fully converged)")


class _CoreRuns:
    """The runs of ARHT_core (Algorithm 5) and ARHT_robust (Algorithm 6) of one ARHT call: the
    f-minimizers and g_R-minimizers on supports (cached), one random stream per restart index, and
    the record of each run's interval of targets (see the module docstring)."""

    def __init__(
        self,
        lp: LoweredProblem,
        o: dict,
        feng: ActiveSet,
        geng: ActiveSet,
        sel0: np.ndarray,
        T: int,
        restarts: int,
        c: float,
        rho: float,
    ):
        self.lp, self.o, self.feng, self.geng, self.sel0 = lp, o, feng, geng, sel0
        self.T, self.restarts, self.c, self.rho = T, restarts, c, rho
        self.C, self.s = lp.set.coords, lp.set.k
        self.theory = o["settings"] == "theory"
        # one random stream per restart index, the same in every round of the binary search (common
        # random numbers): restart q of every round is an independent draw of Algorithm 5, and a round
        # whose target lies where a recorded run of restart q made the same decisions reuses that run
        self.base_seed = o["seed"] if o["seed"] is not None else int(np.random.SeedSequence().entropy % (1 << 62))
        # support -> its f-minimizer's nonzeros, value, lower end, solved to tol, last step accurate
        self.fcache: dict[bytes, list] = {}
        self.gcache: dict[bytes, list] = {}  # (S, R ∩ S) -> g_R-minimizer
        self.flower: dict[bytes, float] = {}  # support -> a lower end for min f there from a union (group_tests)
        self.gcache_cap = max(256, int(GCACHE_ENTRIES // max(len(self.C), 1)))
        self.top = np.inf  # every later target of the binary search lies below this (its r)
        self.latest: list | None = None  # the cache entry of geng's last solve (its gradient comes cheaply from it)
        self.stats = {
            "core_runs": 0,
            "core_iterations": 0,
            "type2": 0,
            "replayed_runs": 0,
            "g_solves": 0,
            "f_solves": 0,
            "stopped_solves": 0,
            "union_solves": 0,
        }
        # restart -> (lo, hi, run, checks): the same run for lo <= opt < hi while every deferred line-12
        # test of checks (lower end, group of supports) stays false at opt (see _replay)
        self.runs: dict[int, list[list]] = {}

    def fmin(
        self, sel: np.ndarray, warm: np.ndarray | None = None, opt: float | None = None, accurate: bool = False
    ) -> tuple[np.ndarray, float, float]:
        """The f-minimizer on the support sel, its value, and a lower end for min_sel f (the value
        itself once solved to tol). With ``opt`` (line 12's test f <= opt) and ``screen_tests`` the
        solve may stop once that lower end is above opt (the test is decided: false); without,
        the minimizer to tol; ``accurate``: its last Newton step from the true Hessian, so the point
        (one a run returns) is accurate to rounding. Solved once per support (an early stop is
        resumed when needed)."""
        key = sel.tobytes()
        ent = self.fcache.get(key)
        if ent is None or not (ent[4] or (opt is not None and ent[3] > opt)) or (accurate and not ent[5]):
            start = warm if ent is None else self._point(ent)
            decide = _decided(opt, self.top) if opt is not None and self.o["screen_tests"] else None
            x_, f_ = self.feng.solve(sel, x0=start, decide=decide, accurate=accurate)
            nz = x_.nonzero()[0]  # (x_ is flat: np.flatnonzero without its wrappers, as below)
            ent = self.fcache[key] = [nz, x_[nz], f_, self.feng.lower, self.feng.exact, accurate]
            self.stats["f_solves"] += 1
            self.stats["stopped_solves"] += not self.feng.exact
        return self._point(ent), ent[2], ent[3]

    def _point(self, ent: list) -> np.ndarray:
        x_ = self.lp.zeros()
        x_[ent[0]] = ent[1]
        return x_

    def gmin(
        self,
        sel: np.ndarray,
        R: np.ndarray,
        warm: np.ndarray | None,
        thr: float | None = None,
        top: float = np.inf,
    ) -> tuple[np.ndarray, float, list]:
        """The g_R-minimizer on sel, its value, and its cache entry (for :meth:`line15`; entry [4]
        a lower end for min_sel g_R, entry [5] whether it was solved to tol). It depends on R only
        through R ∩ sel: solved once per (sel, R ∩ sel). With ``thr`` (the progress test: Type 1
        iff min g_R <= thr) and ``screen_tests`` the solve may stop once the lower end is above thr
        (Type 2 decided; the point is then not used as an iterate); ``top``: the threshold at the
        binary search's r (see :func:`_decided`)."""
        key = sel.tobytes() + np.packbits(R[sel]).tobytes()
        hit = self.gcache.get(key)
        if hit is None or not (hit[5] or (thr is not None and hit[4] > thr)):
            start = warm if hit is None else self._point(hit)
            decide = _decided(thr, top) if thr is not None and self.o["screen_tests"] else None
            x_, g_ = self.geng.solve(sel, x0=start, ridge=(self.rho, R.nonzero()[0]), decide=decide)
            nz = x_.nonzero()[0]
            if len(self.gcache) >= self.gcache_cap:
                self.gcache.clear()
            hit = self.gcache[key] = [nz, x_[nz], g_, None, self.geng.lower, self.geng.exact]
            self.latest = hit
            self.stats["g_solves"] += 1
            self.stats["stopped_solves"] += not self.geng.exact
        return self._point(hit), hit[2], hit

    def line15(self, hit: list, x_: np.ndarray, S: np.ndarray) -> int:
        """Line 15 at a g_R-minimizer x_ on the support S (its cache entry ``hit``): the position into C
        of argmax_{i not in S} |grad_i g_R(x_)|, the first on ties. Off S, x_ is 0, so grad g_R = grad f
        there and the answer does not depend on R: computed once per entry (entry [3]), when line 15
        first needs it (a minimizer rejected by the progress test, or after which line 12 ends the
        run, never needs it). When it is geng's last solve, from its loss derivatives and only off S
        (``ActiveSet.grad_argmax``: a float32 screen and a double recheck, the same answer as the
        double gradient's argmax), else from a full evaluation."""
        if hit[3] is None:
            off = np.ones(len(self.C), dtype=bool)
            off[S] = False
            offp = off.nonzero()[0]
            if len(offp) == 0:  # (no coordinate off S: np.argmax of -inf everywhere)
                hit[3] = 0
            elif hit is self.latest:
                hit[3] = int(offp[self.geng.grad_argmax(self.C[offp])])
            else:
                hit[3] = int(offp[int(np.argmax(np.abs(self.lp.value_and_grad(x_)[1][self.C[offp]])))])
        return hit[3]

    def core(self, opt: float, q: int) -> _Core:
        """Algorithm 5 (with the Section 6.3.2 stopping rule in the practical setting), the
        q-th restart's random stream. Only two tests read opt (line 12, f <= opt, and the
        progress test of line 19); the run records the interval of targets for which each test
        would come out the same, and a later call inside it returns the same run."""
        o, C, s, c, rho = self.o, self.C, self.s, self.c, self.rho
        for rec in self.runs.get(q, ()) if REPLAY else ():
            if rec[0] <= opt < rec[1]:
                return self._replay(rec, opt, q)
        rng = np.random.default_rng([self.base_seed, q if o["reuse_runs"] else self.stats["core_runs"]])
        lo, hi = -np.inf, np.inf
        R = np.ones(len(C), dtype=bool)
        S = self.sel0
        x, g, gx = self.gmin(S, R, None)
        it = t2 = 0
        sampled = False
        stop = "max_iter"
        xf = None
        group = o["group_tests"]
        pending: list[_Snap] = []  # line-12 tests deferred (group_tests), with the run's state at each
        checks: list[tuple[float, list[_Snap]]] = []  # deferred tests decided false: (lower end, the group)
        back = None  # (state, value) at the first deferred test found true
        while it < self.T:
            if group and not self._known(S, opt):  # line 12 deferred: decided with the next ones at once
                low = self.flower.get(S.tobytes(), -np.inf)  # (a group decided false before holds S)
                if low > opt:
                    checks.append((low, [_Snap(S, x, g, gx, lo, hi, it, t2, sampled)]))
                elif not pending or pending[-1].S is not S:  # (a Type 2 keeps S: the same test)
                    pending.append(_Snap(S, x, g, gx, lo, hi, it, t2, sampled))
                    if len(pending) >= GROUP:
                        back, xf = self._flush(pending, opt, xf, checks)
                        if back is not None:
                            break
            else:
                if pending and self.fcache[S.tobytes()][2] <= opt:  # (known true: earlier deferred ones first)
                    back, xf = self._flush(pending, opt, xf, checks)
                    if back is not None:
                        break
                xf, ff, ff_lo = self.fmin(S, x if xf is None else _blend(xf, x, C, S), opt)
                if ff <= opt:  # line 12 (solved to tol: a stopped solve's lower end is above opt)
                    lo = max(lo, ff)
                    stop = "reached opt"
                    break
                hi = min(hi, ff_lo)
            it += 1
            i = self.line15(gx, x, S)  # line 15
            j = int(S[np.abs(x[C[S]]).argmin()])  # line 16
            S1 = S.copy()  # line 17: S ∪ {i} \ {j}, sorted
            S1[S1 == j] = i
            S1.sort()
            warm = x.copy()
            warm[C[j]] = 0.0
            x1, g1, gx1 = self.gmin(S1, R, warm, g - c / s * (g - opt), g - c / s * (g - self.top))  # line 18
            type1 = gx1[5] and g - g1 >= c / s * (g - opt)  # (a stopped solve: Type 2 decided)
            if c > 0:  # the test is opt >= tau (at most tau when Type 2 with min g_R >= its lower end)
                tau = g - (g - (g1 if type1 else gx1[4])) * s / c
                lo, hi = (max(lo, tau), hi) if type1 else (lo, min(hi, tau))
            elif c < 0:  # a negative c reverses the test: such runs are not reused
                lo, hi = np.inf, -np.inf
            if type1:  # Type 1
                S, x, g, gx = S1, x1, g1, gx1
                continue
            t2 += 1  # Type 2 (line 19 true)
            if not self.theory and np.count_nonzero(~R[S]) >= len(S) / 2:
                stop = "half of the support unregularized (Section 6.3.2)"
                break
            pool = S[R[S]]
            wts = x[C[pool]] ** 2
            if len(pool) == 0 or not wts.sum() > 0:
                stop = "no regularized nonzero coordinate left to sample"
                break
            cdf = np.cumsum(wts)
            pick = int(pool[min(int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right")), len(pool) - 1)])
            sampled = True  # line 21: i with probability x_i^2 / ||x_R||^2
            R[pick] = False  # line 22
            x, g, gx = self.gmin(S, R, x)  # line 23
        if pending:  # the run ends: its deferred tests decide whether it ended earlier
            back, xf = self._flush(pending, opt, xf, checks)
        checks.sort(key=lambda ch: ch[1][0].it)  # (in the order of the run: _replay decides them so)
        if back is not None:  # line 12 held at a deferred test: the run ends there, as Algorithm 5's does
            return self._reached(q, back, xf, checks)
        self.stats["core_runs"] += 1
        self.stats["core_iterations"] += it
        self.stats["type2"] += t2
        if stop == "reached opt" or o["polish"]:
            xf, ff, _ = self.fmin(S, x if stop != "reached opt" else xf, accurate=True)
            run = _Core(xf, ff, stop == "reached opt" or ff <= opt, it, t2, sampled, stop)
        else:  # x(T) (to rounding, as the point returned)
            x, _ = self.geng.solve(S, x0=x, ridge=(rho, np.flatnonzero(R)), accurate=True)
            self.latest = None  # geng moved: no cache entry's gradient comes from it now
            run = _Core(x, self.lp.f(x), False, it, t2, sampled, stop)
        if o["reuse_runs"]:
            self.runs.setdefault(q, []).append([lo, hi, run, checks])
        return run

    def _reached(
        self, q: int, back: tuple[_Snap, float], xf: np.ndarray, checks: list[tuple[float, list[_Snap]]]
    ) -> _Core:
        """The run that ends at a deferred line-12 test found true (its state ``back``; ``xf`` the
        f-minimizer there; ``checks`` the deferred tests before it, decided false)."""
        snap, ff = back
        checks = [ch for ch in checks if ch[1][-1].it < snap.it]  # the tests before it
        self.stats["core_runs"] += 1
        self.stats["core_iterations"] += snap.it
        self.stats["type2"] += snap.t2
        xp, fp, _ = self.fmin(snap.S, xf, accurate=True)
        run = _Core(xp, fp, True, snap.it, snap.t2, snap.sampled, "reached opt")
        if self.o["reuse_runs"]:  # (line 12 holds for every target from the test's value on)
            self.runs.setdefault(q, []).append([max(snap.lo, ff), snap.hi, run, checks])
        return run

    def _replay(self, rec: list, opt: float, q: int) -> _Core:
        """The recorded run ``rec`` at a target inside its interval of the progress tests and the
        line-12 tests solved one by one: the same run when every deferred line-12 test stays false
        at opt (those whose lower end is not above opt decided again, and their record updated),
        else the run ends at the first that holds, as Algorithm 5's does."""
        checks = rec[3]
        if any(low <= opt for low, _ in checks):
            new: list[tuple[float, list[_Snap]]] = []
            xf = None
            for low, grp in checks:
                if low > opt:
                    new.append((low, grp))
                    continue
                back, xf = self._flush(list(grp), opt, xf, new)
                if back is not None:  # (from its value on the recorded run no longer holds)
                    rec[1] = min(rec[1], back[1])
                    return self._reached(q, back, xf, new)
            checks[:] = new  # (every lower end only rose: the interval of the record widened)
        self.stats["replayed_runs"] += 1
        return rec[2]

    def _known(self, S: np.ndarray, opt: float) -> bool:
        """Line 12's test on S is answered by the cache (no solve)."""
        ent = self.fcache.get(S.tobytes())
        return ent is not None and (ent[4] or ent[3] > opt)

    def _flush(
        self,
        pending: list[_Snap],
        opt: float,
        xf: np.ndarray | None,
        checks: list[tuple[float, list[_Snap]]],
    ) -> tuple[tuple[_Snap, float] | None, np.ndarray | None]:
        """Decide the deferred line-12 tests (min_S f <= opt) of ``pending`` in order and empty it:
        the first that holds, with its value (None: none holds), and the last f-minimizer solved.
        min f over the union U of several supports is at most min f over each of them, so when it is
        above opt every one of those tests is false (the lower end and the group join ``checks``);
        otherwise the first half is decided before the second, down to single supports (the exact
        tests)."""
        C = self.C
        found = None
        stack = [list(pending)]
        pending.clear()
        while stack:
            grp = stack.pop()
            sel = grp[0].S if len(grp) == 1 else np.unique(np.concatenate([p.S for p in grp]))
            last = grp[-1]
            warm = last.x if xf is None else _blend(xf, last.x, C, sel)
            solves = self.stats["f_solves"]
            xf, ff, ff_lo = self.fmin(sel, warm, opt)
            self.stats["union_solves"] += len(grp) > 1 and self.stats["f_solves"] > solves
            if len(grp) == 1 and ff <= opt:
                found = (last, ff)
                break
            if ff_lo > opt:  # every test of the group is false
                checks.append((ff_lo, grp))
                for p in grp:  # (a lower end for each support: later runs visiting it need no solve)
                    key = p.S.tobytes()
                    self.flower[key] = max(self.flower.get(key, -np.inf), ff_lo)
                continue
            half = len(grp) // 2  # (the union's minimum is at most opt: decide the halves, in order)
            stack += [grp[half:], grp[:half]]
        return found, xf

    def robust(self, opt: float, top: float = np.inf) -> _Core:
        """ARHT_robust: the best of ``restarts`` core runs. ``top``: every later target of the
        binary search lies below it (its current r)."""
        self.top = top
        best = None
        for q in range(self.restarts):
            run = self.core(opt, q)
            if best is None or run.f < best.f:
                best = run
            if not self.o["all_restarts"] and (run.f <= opt or not run.sampled):
                break
        return best


def _per_lowering(lp: LoweredProblem, what: str, key: tuple, make: Callable[[], object]) -> Any:
    """``make()``, once per lowering: B (min_x f) and rho_2^+ read the numbers and the constrained
    coordinates, not the bound, so the lowering's copies at other bounds (a path over k, a sweep)
    share them (``lp.solver_cache``, emptied when new data is bound). A failure raises again at
    every call (only values are kept)."""
    full = ("arht", what, type(lp.set), lp.set.coords.tobytes(), *key)
    cache = lp.solver_cache
    if full not in cache:
        cache[full] = make()
    return cache[full]


def _decided(thr: float, top: float) -> Callable[[float, float], bool]:
    """The test ``min > thr`` of a solve whose minimum lies in [lower, f]: decided (true) once
    lower > thr; the solve stops there when the test is decided for every later target of the
    binary search too (lower > top, the threshold at the bracket's upper end r, which later targets
    stay below), or lower keeps DECIDE_SHARE of the distance f - thr. The interval of targets the
    run records then holds every later target, or that share of the exact one: later rounds of the
    binary search still reuse the run."""
    return lambda f, lower: lower > thr and (lower > top or lower - thr >= DECIDE_SHARE * (f - thr))


def _blend(xf: np.ndarray, x: np.ndarray, C: np.ndarray, S: np.ndarray) -> np.ndarray:
    """The warm start of the f-minimizer on S: the previous f-minimizer (one swap away), with the
    coordinate that left set to 0 and the one that entered taken from the g_R-minimizer x (which
    the regularizer shrinks, so it is a worse start for f than its unregularized neighbour)."""
    w = xf.copy()
    on = np.zeros(len(C), dtype=bool)
    on[S] = True
    w[C[~on]] = 0.0
    new = C[S][w[C[S]] == 0.0]
    w[new] = x[new]
    return w
