"""``bnb``: branch and bound that proves the optimum of a sparsity-constrained problem (docs/certify.md).

* **Incumbent**: ``auto``'s answer (or ``init``'s, through auto).
* **Bounds**: the perspective relaxation of :mod:`sparsemodel.lowering.bound` at every node, with
  units fixed in (their whole score counted) or out (held at zero) and the undecided units' k - |in|
  largest scores: one formula, one dual point. A node's dual point comes from Frank-Wolfe steps on
  the relaxation's unit weights z, warm-started at its parent's z; least squares uses the shifted
  form (the Gram's smallest eigenvalue in the perspective, OKRidge's trick), where one step is a
  solve on the units z touches and one product with the Gram's columns of those units.
* **A node's steps stop once its decision is known** (``node_stop="decided"``, the default; the
  textbook scheme, ``node_stop="iters"``, takes ``node_iters`` steps unless the bound reaches the
  incumbent first). Besides that prune, a node stops (1) as soon as the relaxation's objective at a
  visited point (the step's x and its z: a point of the node's relaxation, so an upper bound on its
  minimum; ``Relaxation.relaxed_value``) lies below the incumbent: no dual point, however many steps
  found it, prunes the node, so it is branched at once; (2) when the bound's progress over the last
  few steps, extrapolated linearly over the steps left, falls short of the incumbent (a heuristic
  on the cost only: Frank-Wolfe's progress slows down, so the extrapolation is optimistic). Neither
  touches a bound's validity: a node's bound is still the best dual value its steps found (weak
  duality). The root keeps its ``root_iters`` steps (its dual point screens every unit).
* **Supports settled by a dual point**: a node whose units left form one support (at most k), or a
  choice among the few of a node that is enumerated, is closed without a restricted solve when its
  bound at the parent's (or the node's) dual point, its units fixed in, reaches the incumbent (with
  ``node_stop="decided"``). The refits that remain start at the last one's solution.
* **A step's point outside the conjugate's domain**: a Newton point far from x(z) can put the dual
  point, once the free coordinates' condition is imposed, outside the loss conjugate's domain; that
  step takes x(z) itself instead (``Relaxation._step_anchor``) rather than stopping the search.
* **Screening** (reduced-cost fixing): with the node's dual point, forcing an undecided unit in
  costs at least t_m - s_u and forcing a counted unit out s_u - t_(m+1) (t: the m-th and (m+1)-th
  largest scores); a unit whose forced side already reaches the incumbent is fixed the other way.
  On a well-posed problem this settles most units at the root.
* **Search**: best-first on the nodes' bounds, with depth-first dives into the better child; at
  every node the counted units (fixed in plus the k - |in| largest scores) are refitted exactly,
  a candidate incumbent; a node with at most k units left is solved exactly. When auto's answer is
  already optimal (Caravan at k = 2..4) the order does not change the tree: every node whose bound
  is below the optimum is expanded whatever the order (``dive`` = 0, 8 and 32 expand the same 1661
  nodes at k = 3); it matters when the tree improves the incumbent.
* **Stopping**: the gap (incumbent - the smallest open bound) / max(|incumbent|, 1) <= ``gap_tol``
  (status ``optimal``), or ``time_limit`` / ``node_limit`` (the gap reached is reported).
* **The m best supports** (``top=m``): every support of k units the search evaluates exactly is
  kept among the m best seen, and the m-th best objective takes the incumbent's place in pruning
  and screening: a node is closed only when its bound reaches the m-th objective (or when every
  support in it has been tried), and a node whose relaxation is tight stays open (its other
  supports may still rank). At ``optimal`` no support outside the list is better than the m-th
  (to ``gap_tol``). ``Result.extra["top_supports"]`` lists them (objective, units, names) and
  ``extra["top_shares"]`` each unit's share among them.

``Result.lower_bound`` is the proved bound, ``Result.gap`` the gap; ``extra`` has ``nodes``,
``root_bound``, ``root_gap``, ``fixed_at_root`` and the incumbent's source.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import NoBoundError
from ..lowering.bound import Anchor, NodeBound, Relaxation, relaxation, shift_pays
from ..lowering.lowered import LoweredProblem
from ..numerics.lstsq import lstsq_normal
from ..util import Clock
from .auto import Auto
from .base import Solver, register
from .options import Option
from .result import NODE_LIMIT, OPTIMAL, TIME_LIMIT, Result, finish, relative_gap

PRUNE_RTOL = 1e-9  # a node is pruned when its bound is within this (relative) of the incumbent
ENUMERATE = 16  # a node with at most this many choices of its undecided units left tries them all
WARM_STEPS = 10  # a child's Frank-Wolfe steps continue its parent's schedule from here


@dataclass
class Node:
    lb: float
    fin: np.ndarray  # units fixed in
    fout: np.ndarray  # units fixed out
    z: np.ndarray  # the relaxation's weights its bound came from (its children start there)
    depth: int
    solved: bool = False  # its best point is known exactly (a leaf, or an integral relaxation)
    anchor: Anchor | None = None  # the dual point of its bound (its children try it first)


@register
class BranchAndBound(Solver):
    name = "bnb"
    handles = frozenset({"nnz", "nnz_groups", "box", "linear_eq", "linear_ineq"})
    summary = "branch and bound on the perspective relaxation: proves the optimum (or reports the gap reached)"
    reference = "perspective relaxation and its Fenchel dual (OKRidge, Liu et al. 2023; L0BnB, Hazimeh et al. 2022)"
    fills_start = True
    needs = (
        "a finite lower bound (docs/certify.md): a composite convex loss with a ridge or a box on the counted "
        "coordinates (or bounds its linear constraints imply), or least squares with a positive definite Gram"
    )
    options = {
        "gap_tol": Option(1e-4, "stop when (incumbent - bound) / max(|incumbent|, 1) <= gap_tol", float, low=0),
        "time_limit": Option(600.0, "seconds before stopping with the gap reached", float, low=0, open_low=True),
        "node_limit": Option(200000, "nodes before stopping with the gap reached", int, low=1),
        "root_iters": Option(200, "Frank-Wolfe steps on the relaxation at the root", int, low=0),
        "node_iters": Option(20, "Frank-Wolfe steps per node (warm-started at the parent's weights)", int, low=0),
        "dive": Option(8, "depth-first steps into the better child before returning to best-first", int, low=0),
        "top": Option(
            1, "keep the m best supports at k and prove that no other support beats the m-th (near-optimal)", int, low=1
        ),
        "init": Option(None, "a starting point for the incumbent (auto's init; a path passes its neighbour)", "any"),
        "node_stop": Option(
            "decided",
            "when a node's Frank-Wolfe steps stop: 'decided' (as soon as its bound reaches the incumbent, or the "
            "relaxation's value at a visited point or the bound's recent progress shows it will not) or 'iters' "
            "(node_iters steps unless pruned)",
            str,
            ("decided", "iters"),
        ),
        "inner": Option(
            "step",
            "x(z) of each Frank-Wolfe step: 'step' (one Newton step from the last point, the Hessian kept; "
            "every point gives a valid bound) or 'exact' (the relaxation's minimizer at z)",
            str,
            ("step", "exact"),
        ),
    }

    def run(self, lp: LoweredProblem) -> Result:
        o = self.opts
        clock = Clock()
        hist = self.history(lp, clock)
        rel = self._relaxation(lp)
        start = self.part(Auto, init=o["init"]).run(lp)
        x_inc = np.concatenate([np.ravel(np.asarray(start.values[v.name], dtype=float)) for v in lp.layout.variables])
        search = Search(lp, rel, x_inc, float(start.objective), o, clock, hist)
        search.run()
        x_best = search.best_point()
        extra = search.top_extra() if o["top"] > 1 else {}
        res = finish(
            lp,
            self,
            x_best,
            search.status,
            search.nodes,
            clock,
            hist,
            extra={
                "nodes": search.nodes,
                "root_bound": search.root_bound,
                "root_gap": search.root_gap,
                "fixed_at_root": search.fixed_at_root,
                "incumbent_from": "auto" if not search.improved else "the tree",
                "auto_objective": float(start.objective),
                "shift": rel.shift,
                **extra,
            },
            message=search.message(),
        )
        res.lower_bound = min(search.lower_bound(best=True), res.objective)
        if extra:
            _name_supports(res, lp, search)
        res.gap = relative_gap(res.objective, res.lower_bound)
        res.bound_how = "bnb"
        res.bound_note = f"branch and bound over {search.nodes} nodes on the {rel.describe()}"
        return res

    @classmethod
    def unfit(cls, lp: LoweredProblem) -> NoBoundError | None:
        """No finite lower bound, no proof: the relaxation's reason (built here once and cached on
        the lowered problem, so the run reuses it)."""
        try:
            cls._relaxation(lp)
        except NoBoundError as exc:
            return exc
        return None

    @staticmethod
    def _relaxation(lp: LoweredProblem) -> Relaxation:
        """The shifted least-squares form when it applies and helps, else the plain one; a model
        without a finite bound is refused with the reason (NoBoundError, a user error)."""
        plain: Relaxation | None = None
        err: NoBoundError | None = None
        try:
            plain = relaxation(lp, shift=False)
        except NoBoundError as exc:
            err = exc
        if shift_pays(lp):
            try:
                return relaxation(lp, shift=True)
            except NoBoundError:
                pass
        if plain is None:
            assert err is not None
            raise NoBoundError(f"bnb cannot prove anything here: {err.message}", err.span, err.hint)
        return plain


class Search:
    """The tree search of one bnb run (the module docstring)."""

    def __init__(
        self,
        lp: LoweredProblem,
        rel: Relaxation,
        x_inc: np.ndarray,
        f_inc: float,
        opts: dict[str, Any],
        clock: Any,
        hist: Any,
    ):
        self.lp, self.rel, self.o, self.clock, self.hist = lp, rel, opts, clock, hist
        self.units = rel.units
        self.k = self.units.budget
        self.nu = self.units.n_units
        self.x_inc = x_inc
        self.f_inc = f_inc
        self.best_units: np.ndarray | None = None  # set when the tree finds a better support
        self.improved = False
        self.nodes = 0
        self.heap: list[tuple[float, int, Node]] = []
        self.stack: list[Node] = []
        self.counter = 0
        self.status = OPTIMAL
        self.root_bound = -np.inf
        self.root_gap = np.inf
        self.fixed_at_root = 0
        self.exact_cache: dict[bytes, float] = {}
        self.last_solve: Any = None  # the last restricted solve of exact (the next one starts there)
        self.t0 = time.perf_counter()
        self.closed_lb = np.inf  # the smallest bound among nodes closed above the prune threshold
        self.top = int(opts.get("top", 1))
        self.tops: dict[bytes, tuple[float, np.ndarray]] = {}  # top > 1: the m best supports of k units seen
        self.kth = np.inf  # ... and the m-th best objective among them

    # ------------------------------------------------------------------ incumbents
    def scale(self) -> float:
        return max(abs(self.f_inc), 1.0)

    def ref(self) -> float:
        """The objective a node must beat to matter: the incumbent's, or with ``top`` = m > 1 the
        m-th best support's (infinite until m supports are known)."""
        return self.f_inc if self.top == 1 else self.kth

    def threshold(self) -> float:
        r = self.ref()
        return r - PRUNE_RTOL * max(abs(r), 1.0) if np.isfinite(r) else np.inf

    def remember(self, key: bytes, units: np.ndarray, f: float) -> None:
        """top > 1: keep a support of k units among the m best seen."""
        if len(units) != self.k or key in self.tops:
            return
        if len(self.tops) >= self.top and f >= self.kth:
            return
        self.tops[key] = (f, units)
        if len(self.tops) > self.top:
            worst = max(self.tops, key=lambda key_: self.tops[key_][0])
            del self.tops[worst]
        if len(self.tops) >= self.top:
            self.kth = max(v[0] for v in self.tops.values())

    def top_list(self) -> list[tuple[float, np.ndarray]]:
        return sorted(self.tops.values(), key=lambda v: (v[0], v[1].tolist()))

    def top_extra(self) -> dict[str, Any]:
        """``top_supports`` (objective and units, best first) and ``top_shares`` (each unit's share
        among them), for the Result."""
        tops = self.top_list()
        units = sorted({int(u) for _, us in tops for u in us})
        shares = {u: sum(1 for _, us in tops if u in us) / len(tops) for u in units} if tops else {}
        return {
            "top_supports": [{"objective": float(f), "units": [int(u) for u in us]} for f, us in tops],
            "top_shares": shares,
            "top_proved": bool(self.status == OPTIMAL),
            "top_gap": float(self.gap()),  # no support outside the list beats the m-th by more (relative)
        }

    def exact(self, units: np.ndarray) -> float:
        """The best objective on a set of units (at most k): a restricted solve, cached. A better
        one becomes the incumbent."""
        units = np.sort(np.asarray(units, dtype=np.int64))
        key = units.tobytes()
        if key in self.exact_cache:
            return self.exact_cache[key]
        pos = self.units.positions(units)
        q = self.rel.quad
        if q is not None and q["direct"]:  # (no rows, no box: the closed form of the shifted form)
            if len(pos):
                xs = lstsq_normal(q["S"][np.ix_(pos, pos)], q["h"][pos])
                f = q["c"] - float(q["h"][pos] @ xs)
            else:
                f = q["c"]
        else:  # warm-started at the last support's solution (a neighbour in the tree: most units shared)
            last = self.last_solve
            r = self.lp.restricted_minimize(
                pos, x0=last.x if last is not None else None, hint=last.hessian if last is not None else None
            )
            self.last_solve = r
            f = float(r.f)
        self.exact_cache[key] = f
        if self.top > 1:
            self.remember(key, units, f)
        if f < self.f_inc - 1e-12 * self.scale():
            self.f_inc = f
            self.best_units = units
            self.improved = True
        return f

    def best_point(self) -> np.ndarray:
        if self.best_units is None:
            return self.x_inc
        r = self.lp.restricted_minimize(self.units.positions(self.best_units))
        return r.x

    # ------------------------------------------------------------------ nodes
    def enumerate(self, fin: np.ndarray, und: np.ndarray, m: int, nb: NodeBound | None = None) -> float:
        """The node's optimum by trying every choice of m of its undecided units (few left); with a
        dual point's bound ``nb`` of the node, a choice whose bound there (the same formula with the
        choice fixed in) already reaches the incumbent is not solved: its bound stands for it."""
        best = np.inf
        base = np.flatnonzero(fin)
        for pick in itertools.combinations(np.flatnonzero(und), m):
            units = np.concatenate([base, np.array(pick, dtype=np.int64)])
            if nb is not None and self.prunes(nb, units):
                best = min(best, nb.value_at(units))
                continue
            best = min(best, self.exact(units))
        return best

    def prunes(self, nb: NodeBound, units: np.ndarray) -> bool:
        """Whether the support ``units`` is settled by the dual point of ``nb`` without a solve: its
        bound there reaches the incumbent (with ``node_stop='decided'``; the textbook scheme solves
        every leaf)."""
        if self.o["node_stop"] != "decided" or not np.isfinite(self.threshold()):
            return False
        return nb.value_at(units) >= self.threshold()

    def evaluate(
        self,
        fin: np.ndarray,
        fout: np.ndarray,
        z: np.ndarray,
        depth: int,
        iters: int,
        parent_lb: float = -np.inf,
        seed: Anchor | None = None,
    ) -> Node:
        """A node's bound (Frank-Wolfe from z; never below its parent's, whose set holds this
        node's), screening, the exact refit of its counted units; a node with few choices left
        (at most ENUMERATE) is solved by trying them all."""
        self.nodes += 1
        k = self.k
        und = ~fin & ~fout
        m = k - int(fin.sum())
        decided = self.o["node_stop"] == "decided"
        seeded = self.rel.node_bound(seed, fin, fout, k) if seed is not None and decided else None
        if m <= 0 or int(und.sum()) <= m:
            units = np.flatnonzero(fin) if m <= 0 else np.flatnonzero(fin | und)
            if seeded is not None and self.prunes(seeded, units):  # the parent's dual point settles it
                return Node(max(seeded.value_at(units), parent_lb), fin, fout, z, depth, solved=True)
            f = self.exact(units)
            if self.top > 1 and len(units) < k:  # no support of k units lies in this node
                f = np.inf
            return Node(f, fin, fout, z, depth, solved=True)
        if math.comb(int(und.sum()), m) <= ENUMERATE:
            return Node(self.enumerate(fin, und, m, seeded), fin, fout, z, depth, solved=True)
        warm = 0 if depth == 0 else WARM_STEPS
        nb, z = self.rel.frank_wolfe(
            None,
            iters,
            fin,
            fout,
            k,
            z=z,
            target=self.threshold(),
            warm=warm,
            seed=seed,
            inner=self.o["inner"],
            decided=depth > 0 and decided,
        )
        if parent_lb > nb.value:
            nb.value = parent_lb
        fin, fout, changed = self.screen(nb, fin, fout)
        if int(fin.sum()) > k:  # every better point would need more than k units: none exists here
            return Node(self.threshold(), fin, fout, z, depth, solved=True)
        if changed:
            und = ~fin & ~fout
            m = k - int(fin.sum())
            if m <= 0 or int(und.sum()) <= m:
                units = np.flatnonzero(fin) if m <= 0 else np.flatnonzero(fin | und)
                f = self.exact(units)
                if self.top > 1 and len(units) < k:
                    f = np.inf
                return Node(max(f, nb.value), fin, fout, z, depth, solved=True)
            nb = self.rel.node_bound(nb.anchor, fin, fout, k)
        if math.comb(int((~fin & ~fout).sum()), k - int(fin.sum())) <= ENUMERATE:
            return Node(self.enumerate(fin, ~fin & ~fout, k - int(fin.sum()), nb), fin, fout, z, depth, solved=True)
        counted = np.union1d(np.flatnonzero(fin), nb.top)
        f = self.exact(counted)
        # the relaxation is tight here: its best support is known (with top > 1 its others may still rank)
        solved = f <= nb.value + PRUNE_RTOL * self.scale() and self.top == 1
        return Node(nb.value if not solved else f, fin, fout, z, depth, solved=solved, anchor=nb.anchor)

    def screen(self, nb: NodeBound, fin: np.ndarray, fout: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        """Fix the units whose other side provably cannot beat the incumbent (the module docstring)."""
        thr = self.threshold()
        S = nb.scores
        und = np.flatnonzero(~fin & ~fout)
        m = self.k - int(fin.sum())
        if len(und) <= m or m <= 0 or not np.isfinite(nb.value):
            return fin, fout, False
        su = np.sort(S[und])[::-1]
        t_m = su[m - 1]
        t_m1 = su[m] if len(su) > m else 0.0
        top = np.zeros(self.nu, dtype=bool)
        top[nb.top] = True
        cand = und
        in_top = top[cand]
        with np.errstate(invalid="ignore"):
            force_in = cand[in_top & (nb.value + S[cand] - t_m1 >= thr)]
            force_out = cand[~in_top & (nb.value + t_m - S[cand] >= thr)]
        if len(force_in) == 0 and len(force_out) == 0:
            return fin, fout, False
        fin = fin.copy()
        fout = fout.copy()
        fin[force_in] = True
        fout[force_out] = True
        return fin, fout, True

    def branch_unit(self, node: Node) -> int:
        """The undecided unit whose weight is most fractional; else the undecided unit of largest
        weight (so that one child fixes what the relaxation uses)."""
        und = np.flatnonzero(~node.fin & ~node.fout)
        zu = node.z[und]
        frac = np.minimum(zu, 1 - zu)
        i = int(np.argmax(frac))
        if frac[i] > 1e-6:
            return int(und[i])
        return int(und[int(np.argmax(zu))])

    # ------------------------------------------------------------------ the search
    def lower_bound(self, best: bool = False) -> float:
        """The smallest bound of the open nodes (and of those closed near the reference): with
        ``best``, a bound on the best objective; else on anything better than :meth:`ref`."""
        lbs = [n.lb for _, _, n in self.heap] + [n.lb for n in self.stack]
        return float(min([self.f_inc if best else self.ref(), self.closed_lb] + lbs))

    def gap(self) -> float:
        r = self.ref()
        if not np.isfinite(r):  # fewer than m supports seen yet (or than exist: then every one is listed)
            return 0.0 if not (self.heap or self.stack) else np.inf
        return relative_gap(r, self.lower_bound())

    def push(self, node: Node) -> None:
        self.counter += 1
        heapq.heappush(self.heap, (node.lb, self.counter, node))

    def keep(self, node: Node) -> bool:
        """Whether a node stays open (its bound below the incumbent); a closed node's bound is
        remembered when it lies between the prune threshold and the incumbent."""
        if node.solved or node.lb >= self.threshold():
            # a closed node's supports are in the list (solved, top > 1) or no better than its bound
            if node.lb < self.ref() and not (node.solved and self.top > 1):
                self.closed_lb = min(self.closed_lb, node.lb)
            return False
        return True

    def run(self) -> None:
        o = self.o
        nu = self.nu
        fin = np.zeros(nu, dtype=bool)
        fout = np.zeros(nu, dtype=bool)
        z0 = self.rel.support_weights(self.x_inc)
        if self.top > 1:  # the incumbent's support is the first of the list
            self.exact(np.flatnonzero(z0 > 0.5))
        root = self.evaluate(fin, fout, z0, 0, o["root_iters"])
        self.root_bound = min(root.lb, self.f_inc) if self.top == 1 else min(root.lb, self.ref())
        self.root_gap = relative_gap(self.f_inc, self.root_bound)
        self.fixed_at_root = int(root.fin.sum() + root.fout.sum())
        if self.keep(root):
            self.push(root)
        dive_left = 0
        while self.heap or self.stack:
            gap = self.gap()
            self.hist.log(self.f_inc, bound=self.lower_bound(), gap=gap, nodes=self.nodes)
            if gap <= o["gap_tol"]:
                break
            if time.perf_counter() - self.t0 > o["time_limit"]:
                self.status = TIME_LIMIT
                break
            if self.nodes >= o["node_limit"]:
                self.status = NODE_LIMIT
                break
            if self.stack:
                node = self.stack.pop()
            else:
                node = heapq.heappop(self.heap)[2]
                dive_left = o["dive"]
            if node.lb >= self.threshold():
                if node.lb < self.ref():
                    self.closed_lb = min(self.closed_lb, node.lb)
                continue
            u = self.branch_unit(node)
            fin_in = node.fin.copy()
            fin_in[u] = True
            fout_out = node.fout.copy()
            fout_out[u] = True
            kids = [
                self.evaluate(fin_in, node.fout.copy(), node.z, node.depth + 1, o["node_iters"], node.lb, node.anchor),
                self.evaluate(node.fin.copy(), fout_out, node.z, node.depth + 1, o["node_iters"], node.lb, node.anchor),
            ]
            live = sorted((c for c in kids if self.keep(c)), key=lambda c: c.lb)
            if live and dive_left > 0:
                dive_left -= 1
                self.stack.append(live[0])
                live = live[1:]
            for c in live:
                self.push(c)
        if self.gap() > o["gap_tol"] and self.status == OPTIMAL and (self.heap or self.stack):
            self.status = TIME_LIMIT  # pragma: no cover - the loop only leaves early at a limit
        self.hist.log(self.f_inc, bound=self.lower_bound(), gap=self.gap(), nodes=self.nodes)

    def message(self) -> str:
        gap = self.gap()
        if self.status == OPTIMAL and self.top > 1:
            return (
                f"the {len(self.tops)} best supports, proved to gap {gap:.3g}: no other support beats the "
                f"{len(self.tops)}-th ({self.nodes} nodes)"
            )
        if self.status == OPTIMAL:
            return f"proved optimal to gap {gap:.3g} ({self.nodes} nodes)"
        limit = "time limit" if self.status == TIME_LIMIT else "node limit"
        return f"stopped at the {limit} after {self.nodes} nodes with gap {gap:.3g} (bound {self.lower_bound():.10g})"


def _name_supports(res: Result, lp: LoweredProblem, search: Search) -> None:
    """Each listed support's coordinates (positions in the variable) and names, and the shares by name."""
    var = lp.layout.variables[0] if lp.set is None else lp.set.constraint.variable
    base = lp.layout.slice(var).start
    coords = search.units.coords
    label = {}
    for entry in res.extra["top_supports"]:
        pos = coords[search.units.positions(np.asarray(entry["units"], dtype=np.int64))] - base
        entry["support"] = [int(i) for i in pos]
        entry["names"] = [res.label(int(i), var.name) for i in pos]
        for u in entry["units"]:
            first = coords[search.units.positions(np.array([u]))[0]] - base
            label[u] = res.label(int(first), var.name)
    res.extra["top_shares"] = {label[u]: share for u, share in res.extra["top_shares"].items()}
