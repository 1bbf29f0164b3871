"""``auto``: the default pipeline -- a start, a swap search scored by the second-order model, every
candidate swap checked by an exact restricted solve.

1. **Start.** GraHTP (paper 000, Algorithm 1) as it runs alone (the unit step at the iterate and the
   support-change line search, see :mod:`.grahtp`): the search below only lowers f, so ``auto``
   never ends above ``grahtp``. On quadratic objectives (least squares: every solve a Cholesky
   update) a second search starts from the *screening* support (the free coordinates fitted, then
   the k units of largest model gain) and the better end point is kept: near the phase transition
   of paper 000, Section 6.1 the two starts end in different local minima (measured: the better of
   the two was at most abess's objective in 17 of 20 seeds, GraHTP's alone in 15). ``start=`` picks
   one start: ``grahtp``, ``fgrahtp``, ``omp`` (paper 003, Algorithm 2) or ``screen``. ``init=``
   (a point; a path over k passes its neighbour's solution) replaces them: its support, cut to the
   k largest units, seeds one search, filled to k by the units of largest model gain.
2. **Swap search** (coordinate and group sparsity on composite objectives). At the restricted
   minimizer x of the current support, :class:`~sparsemodel.lowering.swaps.SwapModel` predicts,
   from the Hessian at x, the change of f for every swap of one selected unit J (coordinate or
   group) against one unselected unit I: the minimum of the Newton model over the support with J
   removed and I added, all other selected units and the free coordinates refitted. On least
   squares this is the exact value of every swap (the closed forms of orthogonal least squares);
   on other losses it is exact to second order. Like the splicing of ABESS (Zhu et al., PNAS 2020)
   a step first tries several disjoint swaps at once (the ``exchange`` best, halved until one set
   lowers f), but it ranks swaps by their joint model value over all pairs (J, I) rather than by
   separate forward and backward sacrifices, and it accepts a swap only after an exact restricted
   solve lowers f. When those fail it checks the next ``tries`` single swaps exactly (the
   Exhaustive Local Search of paper 003, Algorithm 4 scores every insertion exactly but only
   against the smallest |x_j|), and then several swaps at once again, regardless of their single
   predictions (the best disjoint pairs, then ABESS's c smallest removals for the c largest gains).
   Each candidate solve starts at the model's minimizer and is abandoned once its Newton model
   says it cannot end below f (``give_up``). The candidates are the units of largest g_i^2 / H_ii
   up to ``pool`` coordinates (pool // m units of m coordinates); before stopping the step is repeated against every unit (without solving again the
   supports the screened step rejected at this f). The search stops when
   no candidate lowers f: on least squares the end point is then a one-swap local minimum (no
   exchange of one selected for one unselected coordinate lowers f).
3. **Debiasing.** Every point the search visits is the restricted minimizer on its support (the
   GraHTP start is debiased by its step S3), so the answer is debiased.

**Linear constraints** beside nnz over coordinates (``sum(w) == 1``, ``A @ w == b``,
``A @ w <= b``, with or without a box) run the same search with the constraints kept: every
candidate is an exact restricted solve under them, and the swap model is the Newton model over the
support with the constraints' working set at x (every equality, the inequalities that hold with
equality, the coordinates at a bound of the box) kept as equalities: the KKT matrix
[[H_BB, R_B'], [R_B, 0]] takes the place of H_BB in the bordered inverse, and the gradient is the
reduced one, g + R' lambda (:class:`~sparsemodel.lowering.swaps.WorkingRows`); an entering
coordinate whose bound forbids the model's sign (w >= 0) gains nothing alone. With equalities only
on a quadratic the model is f itself (tested against restricted solves, single and double swaps).
The starts are GraHTP and the *relaxed* start (the minimizer over every coordinate under the
constraints, projected onto the set: a feasible k-sparse point); at a one-swap local minimum the
search also tries exchanges of two units at once (:meth:`SwapModel.double_swaps`, their joint model
value), and where the model is not f (inequalities, bounds, other losses) a neighbourhood of at most
``verify`` supports is checked swap by swap before the search stops. Measured on seeded 2-factor
portfolios (p = 12, k = 4, 30 draws each, the optimum by enumerating every support): at the optimum
in 30/30 long-only, 30/30 Markowitz (sum and a target return) with and without w >= 0, 30/30 with
a random second equality and w >= 0, 29/30 with a random second equality and shorts, 29/30 with three
random inequalities (the previous exact search: 1/10 long-only at p = 14, 5/10 with equalities).
Groups under linear constraints run the GraHTP start alone.

Other constraint kinds (pairs of a symmetric matrix, rank, a box without linear constraints),
groups of unequal sizes and objectives without a composite form run the GraHTP start alone;
several bounded variables (a product of sets) run FGraHTP, then GraHTP from its end point (see
``_truncate_then_debias``). ``Result.extra``: ``pipeline`` (what ran),
``start``, ``start_objective``, ``swaps`` (accepted steps), ``starts`` (each start's objective
before and after its search), ``exact_solves``, ``models``, ``batch_sizes``, and the steps accepted
from ``tries``, several swaps, the verification and the double swaps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ModelError
from ..lowering.active import ActiveSet
from ..lowering.forms import edges
from ..lowering.lean import free_fit
from ..lowering.lowered import LoweredProblem
from ..lowering.swaps import SwapModel, model_exact
from ..util import Clock
from .base import RUN_AWAY_SQ, Solver, initial_point, register
from .grahtp import FGraHTP, GraHTP
from .greedy import MIN_DECREASE, RESTRICTED, edge_forward_path, omp_steps
from .options import Option
from .result import CONVERGED, DIVERGED, MAX_ITER, History, Result, finish

# coordinates x samples up to which a fold's path is asked of the kernel in one call (fold_points)
PATH_BATCH_LIMIT = 50_000
RELAXED_LIMIT = 200  # coordinates up to which inequalities or bounds beside linear constraints keep the relaxed start


@register
class Auto(Solver):
    name = "auto"
    protocol = True  # the projection, state, subspace and certificate of any set
    # eig_box: precision matrices; box and linear constraints: see ``_linear_search``
    handles = frozenset({"nnz", "nnz_groups", "nnz_pairs", "rank", "eig_box", "box", "linear_eq", "linear_ineq"})
    summary = "the default: GraHTP start, then swaps ranked by the Newton model and checked by exact refits"
    reference = "paper 000, Algorithm 1 (start); swap search: ELS of paper 003, Algorithm 4, with ABESS-style splicing"
    fills_start = True  # a short init is filled to k by model gains: a path passes its neighbour as it is
    # a path's warm start sits next to a local minimum, so its search usually ends at the first step,
    # confirmed against every unit: a screened pool first would only add a model (measured on the
    # choose-k problems: the warm path 25 to 40 % faster, the same choices)
    warm_options = {"pool": None}
    # the paths of cross-validation's folds, whose answers are read only for their held-out losses:
    # a warm point takes the model's best swaps and stops when they fail (no further single swaps, no
    # several at once). Measured on benchmarks/choose_k.py's designs (150 problems: n = 300, p = 50
    # and n = 500, p = 1000; linear, logistic, Poisson) as many exact supports and false positives as
    # the full search, in 15 to 40 % less time (Poisson most: its exact solves are Newton solves)
    fold_options = {"tries": 0, "exchange": 1}
    options = {
        "start": Option(
            "auto",
            "the start of the swap search: 'grahtp' (paper 000), 'fgrahtp', 'omp' (paper 003, Algorithm 2), "
            "'screen' (the k units of largest model gain at the fit of the free coordinates), 'relaxed' (the "
            "minimizer without the bound, projected onto the set); 'auto' = grahtp, and on quadratic objectives "
            "also screen, under linear constraints also relaxed (with inequalities or bounds up to 200 coordinates; "
            "two searches, the better end point kept)",
            str,
            ("auto", "grahtp", "fgrahtp", "omp", "screen", "relaxed"),
        ),
        "init": Option(
            None,
            "a starting point (Python API; a path passes its neighbour's solution): its support, cut to the k "
            "largest units, seeds a single swap search (instead of the 'start' option's) and is filled to k by "
            "the units of largest model gain",
            "any",
        ),
        "search": Option(True, "run the swap search after the start (false: the start alone)", bool),
        "exchange": Option(
            5, "most disjoint swaps tried at once (halved until a set lowers f; ABESS's C_max)", int, low=1
        ),
        "tries": Option(4, "single swaps checked exactly after the model's best one fails to lower f", int, low=0),
        "candidates": Option(
            64, "unselected units scored in pairs per step (widened until the model's best is exact)", int, low=1
        ),
        "pool": Option(
            256,
            "unselected coordinates modelled per step (pool // m units of m coordinates): the units of largest "
            "g_i^2 / H_ii (ABESS's forward sacrifice; ||g_I||^2 for groups); none: every unit",
            "int_or_none",
            low=1,
        ),
        "verify": Option(
            400,
            "under linear constraints, where the swap model is not f (inequalities, bounds, non-quadratic losses): "
            "the largest one-swap neighbourhood (k (p - k) supports) checked by exact restricted solves before "
            "the search stops, and the largest set of double swaps checked whole (else its verify / 8 best by "
            "the model); 0: none",
            int,
            low=0,
        ),
        "max_iter": Option(1000, "maximum number of accepted swap steps (search=false: none)", int, low=1),
        "lean": Option(
            True,
            "run this pipeline as one compiled call (a C extension built at install) where it applies: single-coordinate sparsity, one data "
            "term of square, logistic, exp or log, ridges, no box or linear constraint; false: the Python pipeline "
            "(the same steps)",
            bool,
        ),
        "min_decrease": MIN_DECREASE,
        "restricted": RESTRICTED,
    }

    def fold_point(self, lp: LoweredProblem, init: np.ndarray) -> np.ndarray | None:
        """The lean kernel's answer from ``init`` (:func:`.lean.lean_point`) where ``solve`` would run
        it and keep its answer: a bound strictly between 0 and every unit (``Solver.solve`` answers
        both ends itself), no direction of unbounded decrease, no precision matrix, the swap search
        on, the iterates not run away (the |x| > 1e4 test of ``Solver._solve``). None otherwise."""
        s = lp.set
        if s is None or not s.thresholds or s.k == 0 or s.vacuous() or not self._folds_lean(lp):
            return None
        from .lean import lean_point

        x = lean_point(self, lp, init)
        if x is None or x.size != lp.n or float(x.dot(x)) > RUN_AWAY_SQ:
            return None
        return x

    def fold_points(self, lp: LoweredProblem, ks: list[int], init: np.ndarray | None) -> list[np.ndarray]:
        """:meth:`fold_point` at the bounds ``ks`` in turn, each from the last's answer, in one kernel
        call (:func:`.lean.lean_path`) where the problem is small (coordinates x samples at most
        PATH_BATCH_LIMIT: there Python's cost per bound exceeds the arithmetic); the same
        points, for the prefix of ``ks`` the kernel answers. ``lp`` is at the bound ``ks[0]``.
        ``init`` None (a path's first point, with no neighbour): answered only at a bound of 0, by
        the kernel's fit of the free coordinates (lowering/lean.free_fit: the point the cold solve's
        ``zero_budget`` gives), the bounds after it from that point."""
        lean = self._folds_lean(lp)  # (the lowering's and options' verdict: the same at every bound)
        head: list[np.ndarray] = []
        if init is None:
            s = lp.set
            if s is None or not s.thresholds or s.k != 0 or self.opts["restricted"] != "auto":
                return []
            fit = free_fit(lp) if lean else None
            if fit is None:
                return []
            head, init = [fit[0]], fit[0].copy()
            if len(ks) == 1:
                return head
            lp, ks = lp.with_budget(ks[1]), ks[1:]
        if len(ks) == 1 or not lean or lp.n * (lp.n_samples or 1) > PATH_BATCH_LIMIT:
            return head + super().fold_points(lp, ks, init)
        from .lean import increasing_run, lean_path

        run = increasing_run(lp.set, ks)
        if not run:
            return head

        X = lean_path(self, lp, run, init)
        return head if X is None or X.shape[1] != lp.n else head + list(X)

    def fold_kernel(self, lp: LoweredProblem, rows: np.ndarray, factor: float) -> Any:
        """The fold's lean kernel problem made from the rows of ``lp``'s (lowering/lean.on_rows),
        where a fold's points would be asked of one kernel call (``fold_points`` on a problem of at
        most PATH_BATCH_LIMIT coordinates x samples); None otherwise."""
        if not self._folds_lean(lp) or lp.n * (lp.n_samples or 1) > PATH_BATCH_LIMIT:
            return None
        from ..lowering.lean import on_rows
        from .lean import FoldKernel

        data = on_rows(lp, rows, factor)
        return FoldKernel(self, data, lp.set) if data is not None else None

    def _folds_lean(self, lp: LoweredProblem) -> bool:
        """A fold's points may be asked of the lean kernel (what :meth:`fold_point` checks of the
        lowering and options, the bound aside)."""
        o, s = self.opts, lp.set
        if not (o["lean"] and o["search"]) or s is None or not s.thresholds:
            return False
        return lp.unbounded_direction() is None and edges(lp) is None and _searchable(lp)

    def run(self, lp: LoweredProblem) -> Result:
        o = self.opts
        clock = Clock()
        if edges(lp) is not None:  # a sparse precision matrix: several starts, each refined by GraHTP
            return edge_pipeline(self, lp, clock)
        if o["lean"] and o["search"] and _searchable(lp):  # the same pipeline in one compiled call
            from .lean import lean_auto

            res = lean_auto(self, lp, clock)
            if res is not None:
                return res
        searchable = _searchable(lp) and o["search"]
        if not searchable and _several_parts(lp):
            return self._truncate_then_debias(lp, clock)
        if not searchable:  # the start alone (with its own support-change line search)
            start = self.part(GraHTP, restricted=o["restricted"], init=o["init"]).run(lp)
            start.solver, start.options, start.time_s = self.name, dict(self.opts), clock()
            start.extra = {**start.extra, "pipeline": ["grahtp"], "start": "grahtp"}
            if not _searchable(lp):
                start.extra["note"] = self.plan(lp)
            return start
        members = lp.set.swap_members()
        starts = self._starts(lp)
        hist = self.history(lp, clock)
        best: dict[str, Any] | None = None
        runs = []
        for how in starts:
            run = self._search_from(lp, how, members, hist, clock)
            if run is None:  # the start failed (outside the domain, diverged): nothing to search from
                continue
            runs.append({k: run[k] for k in ("start", "start_objective", "objective", "swaps")})
            if best is None or run["objective"] < best["objective"]:
                best = run
        if best is None:  # every start failed: report GraHTP's answer and its status
            start = self.part(GraHTP, restricted=o["restricted"]).run(lp)
            start.solver, start.options, start.time_s = self.name, dict(self.opts), clock()
            start.extra = {**start.extra, "pipeline": ["grahtp"], "start": "grahtp"}
            return start
        extra = {
            "pipeline": [best["start"], "swap search"],
            "start": best["start"],
            "start_objective": best["start_objective"],
            "swaps": best["swaps"],
            "starts": runs,
            **best["stats"],
        }
        return finish(
            lp, self, best["x"], best["status"], best["iterations"], clock, hist, f=best["objective"], extra=extra
        )

    def _truncate_then_debias(self, lp: LoweredProblem, clock: Clock) -> Result:
        """Several bounded variables (a product of sets): FGraHTP (the joint gradient step truncated
        part by part, no refit), then GraHTP from its end point (paper 000, Algorithm 1, both
        variants). Debiasing every iterate from the start locks GraHTP into wrong supports of the
        sparse part: measured on abess's robust PCA generator (100 x 20, rank 5, 30 outliers), GraHTP
        from zero found every outlier in 5 of 10 seeds (the others crept to max_iter at objectives
        near 3), FGraHTP then GraHTP in 10 of 10, four times faster; on 8 seeds of four product
        problems (robust PCA with and without noise, a low-rank plus sparse multi-task regression,
        two nnz slices of one vector) it ended lower than GraHTP from zero in 8 runs, equal in 23,
        higher in 1."""
        o = self.opts
        first = self.part(FGraHTP, init=o["init"] if o["init"] is not None else "zeros").run(lp)
        x0 = lp.layout.pack(first.values) if np.isfinite(first.objective) else None
        res = self.part(GraHTP, restricted=o["restricted"], init=x0 if x0 is not None else "zeros").run(lp)
        res.solver, res.options, res.time_s = self.name, dict(self.opts), clock()
        res.iterations += first.iterations
        res.extra = {
            **res.extra,
            "pipeline": ["fgrahtp", "grahtp"],
            "start": "fgrahtp",
            "start_objective": first.objective,
        }
        return res

    def _starts(self, lp: LoweredProblem) -> list[str]:
        """The starts to search from: the option, or with 'auto' GraHTP, and on quadratic objectives
        (where every solve is a cheap Cholesky update) also the screening start."""
        if self.opts["init"] is not None:  # a given start: one search, from it
            return ["init"]
        start = self.opts["start"]
        if start != "auto":
            return [start if (start != "omp" or lp.set.unit_of is None) else "grahtp"]
        rows = lp.set.linear_rows()
        if rows is not None:  # (with inequalities or bounds its dense QP is an active-set method)
            one_solve = lp.set.box_bounds() is None and rows[1] == 0
            return ["grahtp", "relaxed"] if one_solve or lp.set.size <= RELAXED_LIMIT else ["grahtp"]
        return ["grahtp", "screen"] if lp.design.quadratic else ["grahtp"]

    def _search_from(
        self, lp: LoweredProblem, how: str, members: np.ndarray, hist: History, clock: Clock
    ) -> dict[str, Any] | None:
        """The swap search from one start; None when the start is not finite."""
        o = self.opts
        sps = lp.set  # coordinates or groups of one size (``_searchable``): the coordinate API
        t0 = clock()
        act = ActiveSet(lp, method=o["restricted"], gram=True)
        if how in ("grahtp", "fgrahtp"):  # GraHTP as it runs alone: auto never ends above grahtp
            start = (self.part(GraHTP, restricted=o["restricted"]) if how == "grahtp" else self.part(FGraHTP)).run(lp)
            if start.status == DIVERGED or not np.isfinite(start.objective):
                return None
            x = lp.layout.pack(start.values)
            start_its = start.iterations
        elif how == "omp":
            x, _, _ = omp_steps(lp, act, sps.k)
            start_its = sps.k
        elif how == "init":  # the given point, cut to k units (filled to k below)
            x = initial_point(lp, o["init"])
            start_its = 1  # its restricted solve, as the screening start
        elif how == "relaxed":  # the minimizer without the bound, projected onto the set
            x = _relaxed_start(lp)
            if x is None:
                return None
            start_its = 1
        else:  # screen: the free coordinates fitted, then the units of largest gain
            x, _ = act.solve(np.empty(0, dtype=np.int64), x0=lp.inside_domain())
            start_its = 1
        units = _units_of(sps, x)
        if not sps.feasible_units(units):  # a start outside the set (omp, a given point): projected
            x = lp.project(x)[0]
            units = _units_of(sps, x)
        x, f = act.solve(_positions(units, members), x0=x)
        if not np.isfinite(f):
            return None
        if len(units) < sps.k:  # the start used less than the budget: add the units of largest gain
            model = SwapModel(lp, x, act.grad(), units, members, candidates=o["candidates"], pool=o["pool"])
            units = _fill(sps, units, model.units_out[np.argsort(-model.gain, kind="stable")])
            x, f = act.solve(_positions(units, members), x0=x)
        f_start = f
        hist.log(f)
        t_start, t_model = clock() - t0, 0.0
        status, steps = MAX_ITER, 0
        sizes: list[int] = []
        exact_model = model_exact(lp)  # the model is f itself: a swap it rates >= 0 cannot lower f
        g = act.grad()
        stats = {
            "solves": 0,
            "tries_hits": 0,
            "full_models": 0,
            "modelled_units": 0,
            "multi_hits": 0,
            "models": 0,
            "verify_hits": 0,
            "double_hits": 0,
        }
        while steps < o["max_iter"]:
            t1 = clock()
            model = SwapModel(lp, x, g, units, members, candidates=o["candidates"], pool=o["pool"])
            stats["models"] += 1
            stats["modelled_units"] += len(model.units_out)
            t_model += clock() - t1
            rejected: set[tuple[int, ...]] = set()  # supports whose exact solve did not lower this f
            accepted = self._step(act, model, units, members, f, exact_model, stats, sizes, rejected)
            if accepted is None and len(model.units_out) + len(units) < len(members):
                # nothing in the screened pool lowers f: confirm against every unit before stopping
                t1 = clock()
                model = SwapModel(lp, x, g, units, members, candidates=o["candidates"], pool=None)
                stats["models"] += 1
                stats["full_models"] += 1
                stats["modelled_units"] += len(model.units_out)
                t_model += clock() - t1
                accepted = self._step(act, model, units, members, f, exact_model, stats, sizes, rejected)
            if accepted is None:  # (the active set stays at the last candidate: x, f are the answer)
                status = CONVERGED
                break
            units, x, f, g = accepted
            steps += 1
            hist.log(f)
        return {
            "start": how,
            "start_objective": f_start,
            "objective": f,
            "x": x,
            "status": status,
            "swaps": steps,
            "iterations": start_its + steps,
            "stats": {
                "exact_solves": stats["solves"],
                "models": stats["models"],
                "full_models": stats["full_models"],
                "modelled_units": stats["modelled_units"],
                "batch_sizes": sizes,
                "accepted_from_tries": stats["tries_hits"],
                "accepted_multi_swaps": stats["multi_hits"],
                "accepted_from_verification": stats["verify_hits"],
                "accepted_double_swaps": stats["double_hits"],
                "time_start": t_start,
                "time_models": t_model,
            },
        }

    def _step(
        self,
        act: ActiveSet,
        model: SwapModel,
        units: np.ndarray,
        members: np.ndarray,
        f: float,
        exact_model: bool,
        stats: dict[str, int],
        sizes: list[int],
        rejected: set[tuple[int, ...]],
    ) -> tuple[np.ndarray, np.ndarray, float, np.ndarray] | None:
        """One step of the search: the best disjoint swaps together (halved until a set lowers f),
        then the next ``tries`` single swaps; each checked by an exact restricted solve. Returns
        (units, x, f, gradient) of the first candidate that lowers f, or None. ``rejected``: the
        supports already solved at this f without lowering it (by the screened step before the
        step against every unit, which ranks many of the same swaps first): not solved again
        (measured on Khan: a third of the exact solves), and counted as tried as before."""
        o = self.opts
        ranked = model.swaps(limit=4 * o["exchange"] + o["tries"] + 16)
        sps = act.lp.set  # a swap that leaves the set (a cap broken) is no candidate
        ranked = [r_ for r_ in ranked if sps.feasible_units(_swap(units, [r_[:2]]))]
        if exact_model:  # the model is f: a swap it rates >= 0 cannot lower f
            thr = -o["min_decrease"] * max(1.0, abs(f))
            ranked = [r_ for r_ in ranked if r_[2] < thr]
        bar = f - o["min_decrease"] * max(1.0, abs(f))  # a candidate must end below this
        batch = _disjoint(ranked, o["exchange"])
        tried: set[tuple[int, ...]] = set()
        c = len(batch)
        while c >= 1:
            new = _swap(units, batch[:c])
            tried.add(tuple(new))
            got = self._check(act, model, new, members, batch[:c], f, bar, stats, rejected)
            if got is not None:
                sizes.append(c)
                return got
            c //= 2
        extra = 0
        for J, I, _ in ranked:
            if extra >= o["tries"]:
                break
            new = _swap(units, [(J, I)])
            if tuple(new) in tried:
                continue
            tried.add(tuple(new))
            extra += 1
            got = self._check(act, model, new, members, [(J, I)], f, bar, stats, rejected)
            if got is not None:
                stats["tries_hits"] += 1
                return got
        # no single swap lowers f: several at once can (the splicing of ABESS exchanges the C
        # least useful units for the C most promising ones together, whatever each alone would do)
        # (pairs of the joint model, and ABESS's sacrifices: the c smallest removals for the c largest gains)
        joint = _disjoint(model.swaps(limit=4 * o["exchange"] + 16), o["exchange"], any_sign=True)
        outs = model.units_in[np.argsort(model.removal, kind="stable")[: o["exchange"]]]
        ins = model.units_out[np.argsort(-model.gain, kind="stable")[: len(outs)]]
        sacrifice = list(zip(outs.tolist(), ins.tolist()))
        for batch in (joint, sacrifice):
            c = len(batch)
            while c >= 2:
                new = _swap(units, batch[:c])
                if tuple(new) not in tried:
                    tried.add(tuple(new))
                    got = self._check(act, model, new, members, batch[:c], f, bar, stats, rejected)
                    if got is not None:
                        sizes.append(c)
                        stats["multi_hits"] += 1
                        return got
                c //= 2
        # under linear constraints the model keeps only the rows that hold with equality at x (and
        # of the bounds of the units entering only their sign): where it is not f, a neighbourhood of
        # at most ``verify`` swaps is checked swap by swap, in the model's order, before the search stops
        if (
            self.opts["verify"]
            and not exact_model
            and act.lp.set.linear_rows() is not None
            and len(model.units_out) + len(units) == len(members)
            and len(units) * len(model.units_out) <= self.opts["verify"]
        ):
            for J, I, _ in model.every_swap():
                new = _swap(units, [(J, I)])
                if tuple(new) in tried:
                    continue
                tried.add(tuple(new))
                if f + model.floor([J], [I]) >= bar:  # even without the inequalities it cannot lower f
                    continue
                got = self._check(act, model, new, members, [(J, I)], f, bar, stats, rejected)
                if got is not None:
                    stats["verify_hits"] += 1
                    return got
        if act.lp.set.linear_rows() is not None and len(model.units_out) + len(units) == len(members):
            # a one-swap local minimum: exchanges of two units at once, by their joint model value
            # (exact on an equality-constrained quadratic: those it predicts to lower f); where the
            # model is not f, all of them when at most ``verify``, else the verify / 8 it rates best
            if exact_model:
                doubles = model.double_swaps(below=-self.opts["min_decrease"] * max(1.0, abs(f)))
            else:
                doubles = model.double_swaps(limit=self.opts["verify"] + 1)
                if len(doubles) > self.opts["verify"]:
                    doubles = doubles[: self.opts["verify"] // 8]
            for (J1, J2), (I1, I2), _ in doubles:
                new = _swap(units, [(J1, I1), (J2, I2)])
                if tuple(new) in tried:
                    continue
                tried.add(tuple(new))
                if not exact_model and f + model.floor([J1, J2], [I1, I2]) >= bar:
                    continue
                got = self._check(act, model, new, members, [(J1, I1), (J2, I2)], f, bar, stats, rejected)
                if got is not None:
                    stats["double_hits"] += 1
                    return got
        return None

    def _check(
        self,
        act: ActiveSet,
        model: SwapModel,
        new: np.ndarray,
        members: np.ndarray,
        pairs: list[tuple[int, int]],
        f: float,
        bar: float,
        stats: dict[str, int],
        rejected: set[tuple[int, ...]],
    ) -> tuple[np.ndarray, np.ndarray, float, np.ndarray] | None:
        """The exact restricted solve of one candidate support ``new`` (from the model's minimizer,
        abandoned once it cannot end below ``bar``): (units, x, f, gradient) when it lowers f, else
        None; a support in ``rejected`` is not solved again, one that fails is added to it."""
        key = tuple(new)
        if key in rejected or not act.lp.set.feasible_units(new):
            return None
        xn, fn = act.solve(_positions(new, members), x0=self._warm(act, model, pairs), give_up=bar)
        stats["solves"] += 1
        if self._improves(fn, f):
            return new, xn, fn, act.grad()
        rejected.add(key)
        return None

    @staticmethod
    def _warm(act: ActiveSet, model: SwapModel, pairs: list[tuple[int, int]]) -> np.ndarray | None:
        """The model's minimizer on the new support, the start of an iterative restricted solve
        (None where the solve is direct: a quadratic objective's factorization)."""
        return None if act.direct else model.warm(pairs)

    @classmethod
    def plan(cls, lp: LoweredProblem, **opts: Any) -> str:
        """What the pipeline runs on this problem (``sparsemodel check`` prints it)."""
        if edges(lp) is not None:
            st = edge_starts(lp)
            return ", ".join(st[:-1]) + " and " + st[-1] + " starts, each refined by grahtp; the lowest objective kept"
        if _searchable(lp):
            starts = cls(**opts)._starts(lp)
            under = (
                " under the linear constraints (the model keeps their working set)"
                if lp.set.linear_rows() is not None
                else ""
            )
            return (
                " and ".join(starts) + (" start" if len(starts) == 1 else " starts") + ", then the swap search" + under
            )
        if _several_parts(lp):
            return "fgrahtp, then grahtp from its end point (several bounded variables)"
        if (
            lp.set is not None
            and lp.set.linear_rows() is not None
            and lp.design is not None
            and lp.set.swap_members() is not None
        ):
            return "grahtp alone: the swap search under linear constraints exchanges coordinates, not groups"
        if (
            lp.set is not None
            and lp.set.box_bounds() is not None
            and lp.design is not None
            and lp.set.swap_members() is not None
        ):
            return "grahtp alone: the swap model knows no bounds (a box) without linear constraints"
        return "grahtp alone: the swap search needs coordinate sparsity or groups of one size, on a composite objective"

    def _improves(self, f_new: float, f_old: float) -> bool:
        return bool(np.isfinite(f_new)) and f_new < f_old - self.opts["min_decrease"] * max(1.0, abs(f_old))


# ---------------------------------------------------------------------- precision matrices

FORWARD_DEGREE = 2  # the forward start runs for graphs of at most FORWARD_DEGREE * p edges
EDGE_GROWTH = 0.5  # the doubling start adds ceil(EDGE_GROWTH |F|) edges per step


def edge_starts(lp: LoweredProblem) -> list[str]:
    """The starts of ``auto`` on a sparse precision matrix: Algorithm 2 of paper 000 from alpha I,
    forward selection adding half the graph's size per step, and, for graphs of at most 2 p edges,
    forward selection one edge at a time (k refits: at p = 200 and k = 2080 it would cost more than
    ten GraHTP runs)."""
    starts = ["grahtp", "doubling forward"]
    if lp.set.k <= FORWARD_DEGREE * edges(lp).p:
        starts.append("forward")
    return starts


def edge_pipeline(solver: Solver, lp: LoweredProblem, clock: Clock) -> Result:
    """``auto`` on a sparse precision matrix (paper 000, Section 5.3): GraHTP (Algorithm 2) from
    alpha I, and from the graphs of forward selection (FBS, the paper's baseline), each GraHTP run
    monotone from its start; the answer is the one of lowest objective, so ``auto`` never ends above
    ``grahtp`` nor above ``forward`` (when its start runs).

    Why several starts: Algorithm 2's first support is the k largest |S_ij|, and on collinear data
    those pairs are cliques of nearly collinear features whose precision entries are in the
    hundreds, which hard thresholding then never drops. Measured on standardized breast-cancer
    features (p = 30, cond(S) = 1e5) with 10 / 20 / 40 / 80 / 120 edges: GraHTP from alpha I ends at
    1.94 / -2.98 / -18.36 / -26.58 / -31.58, forward selection at -0.53 / -12.63 / -19.98 / -24.95 /
    -28.66, GraHTP from the doubling start at 1.18 / -11.63 / -20.14 / -25.35 / -30.67."""
    o = solver.opts
    hist = solver.history(lp, clock)
    runs: list[dict[str, Any]] = []
    best: Result | None = None
    best_start = ""
    for how in edge_starts(lp):
        if how == "grahtp":
            r = solver.part(GraHTP, restricted=o["restricted"]).run(lp)
            f_start = float(r.history["objective"][0]) if r.history.get("objective") else r.objective
        else:
            growth = EDGE_GROWTH if how == "doubling forward" else 0.0
            x0, f_start, _ = edge_forward_path(lp, o["restricted"], growth)
            r = solver.part(GraHTP, restricted=o["restricted"], init=x0).run(lp)
        runs.append({"start": how, "start_objective": f_start, "objective": r.objective, "status": r.status})
        hist.log(r.objective)
        if best is None or (np.isfinite(r.objective) and not r.objective >= best.objective):
            best, best_start = r, how
    assert best is not None
    extra = {
        "pipeline": [s if s == "grahtp" else f"{s} + grahtp" for s in edge_starts(lp)],
        "start": best_start,
        "starts": runs,
        "eta": best.extra.get("eta"),
    }
    return finish(
        lp,
        solver,
        lp.layout.pack(best.values),
        best.status,
        best.iterations,
        clock,
        hist,
        f=best.objective,
        gamma=best.extra.get("eta"),
        message=best.message,
        extra=extra,
    )


# ---------------------------------------------------------------------- units


def _searchable(lp: LoweredProblem) -> bool:
    """The swap search applies: a composite objective and a set whose budget is spent on
    interchangeable units of one size (coordinates, or groups of one size); under linear
    constraints (with or without a box) single coordinates, whose working set the swap model keeps;
    a box alone the model does not know."""
    if lp.set is None or lp.design is None:
        return False
    members = lp.set.swap_members()
    if members is None:
        return False
    if lp.set.linear_rows() is not None:
        return members.shape[1] == 1
    return lp.set.box_bounds() is None


def _relaxed_start(lp: LoweredProblem) -> np.ndarray | None:
    """The minimizer over every coordinate (the bound dropped, the other constraints kept), projected
    onto the set (under linear constraints the projection keeps them: a feasible k-sparse point);
    None when that minimizer does not exist (an unbounded or undefined objective)."""
    sps = lp.set
    try:
        r = lp.restricted_minimize(None, cols=np.union1d(sps.coords, sps.free))
    except ModelError:
        return None
    if not np.isfinite(r.f):
        return None
    return lp.project(r.x)[0]


def _several_parts(lp: LoweredProblem) -> bool:
    """The set has several parts (several bounded variables: a product of sets)."""
    return lp.set is not None and lp.set.thresholds and len(lp.set.curvature_parts()) > 1


def _units_of(sps: Any, x: np.ndarray) -> np.ndarray:
    """The units with a nonzero coordinate at x (sorted unit ids)."""
    pos = sps.support(x)
    if sps.unit_of is None:
        return pos
    return np.unique(sps.unit_of[pos])


def _fill(sps: Any, units: np.ndarray, ranked: np.ndarray) -> np.ndarray:
    """``units`` filled to the budget from ``ranked`` (best first), each added only when the set
    admits the selection with it (``feasible_units``: a capped group full is skipped)."""
    out = [int(u) for u in units]
    for u in ranked:
        if len(out) >= sps.k:
            break
        if sps.feasible_units(np.array(out + [int(u)], dtype=np.int64)):
            out.append(int(u))
    return np.array(sorted(out), dtype=np.int64)


def _positions(units: np.ndarray, members: np.ndarray) -> np.ndarray:
    return np.sort(members[np.asarray(units, dtype=np.int64)].ravel())


def _disjoint(ranked: list[tuple[int, int, float]], limit: int, any_sign: bool = False) -> list[tuple[int, int]]:
    """The best swaps with predicted decrease (any predicted change with ``any_sign``), no unit
    used twice, at most ``limit``."""
    out: list[tuple[int, int]] = []
    used_out: set[int] = set()
    used_in: set[int] = set()
    for J, I, d in ranked:
        if len(out) >= limit or not (d < 0 or any_sign):
            break
        if J in used_out or I in used_in:
            continue
        out.append((J, I))
        used_out.add(J)
        used_in.add(I)
    if not out and ranked:
        out.append(ranked[0][:2])
    return out


def _swap(units: np.ndarray, pairs: list[tuple[int, int]]) -> np.ndarray:
    out = set(int(u) for u in units)
    for J, I in pairs:
        out.discard(J)
        out.add(I)
    return np.array(sorted(out), dtype=np.int64)
