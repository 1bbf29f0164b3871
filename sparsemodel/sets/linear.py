"""Linear constraints as sets: every ``A @ w == b`` / ``A @ w <= b`` of a problem in one convex side
set (:class:`LinearSet`, kept inside every restricted solve), and its composition with
``nnz(w) <= k`` (:class:`SparseLinear`), whose projection is what the thresholding solvers
(grahtp, fgrahtp, iht) use.

The projection onto {nnz(w) <= k} ∩ {linear constraints} ∩ box, and what is exact:

* **The simplex** {w >= 0, sum(w) = s} (s > 0; the budget of a long-only portfolio): exact. The
  nearest k-sparse point keeps the k largest entries of z (by value, not magnitude) and projects
  them onto the simplex: the greedy selector and simplex projector (GSSP) of Kyrillidis, Becker,
  Cevher & Koch, "Sparse projections onto the simplex", ICML 2013 (Theorem 1), with the simplex
  projection of Held, Wolfe & Crowder (1974) / Duchi et al. (2008). :func:`sparse_simplex`.
* **The hyperplane** {sum(w) = s} without bounds: exact, by :func:`sparse_hyperplane`. For a
  support S of k entries the distance is sum_{i not in S} z_i^2 + (s - sum_S z)^2 / k, and as a
  function of any one selected value v it is convex (coefficient 1 - 1/k of v^2), so every
  selected entry is an extreme of those still available: the best S is the a largest and the
  k - a smallest entries for some a, and one scan over a = 0..k with prefix sums finds it (the
  problem of Kyrillidis et al.'s GSHP, solved here by this scan instead of their greedy).
* **The capped budget** {w >= 0, sum(w) <= s}: exact, by :func:`sparse_budget` (the k largest
  entries, clipped at 0, and projected onto the simplex only when their sum exceeds s; the same
  exchange argument as GSSP). These three are recognised when the problem's linear constraints
  are one row with equal coefficients over exactly the coordinates nnz counts (``sum(w) == 1``,
  ``2 * sum(w[1:]) <= 3``), without groups, and the box on them is w >= 0 (or absent, for the
  hyperplane).
* **Any other linear constraints**: the projection of the documented rule below, exact only
  where it enumerates. Candidate supports: the k largest units of z (by magnitude, or by the gain
  of the box's clipped values), the k largest units of the projection of z onto the polyhedron
  without the sparsity bound, and a support found feasible when the set was built. On each, the
  Euclidean projection onto the polyhedron restricted to the support (a small QP,
  :func:`sparsemodel.numerics.qp.project`), and the nearest result wins. When the number of
  supports of the budget's size is at most ``ENUMERATE_LIMIT``, every support is tried and the
  projection is exact; otherwise it is the nearest of the candidates, not in general the nearest
  k-sparse feasible point (that problem contains sparse recovery, which is NP-hard).

Infeasible combinations are refused when the set is built, at the linear constraint's line: an
empty polyhedron (``w >= 0`` with ``sum(w) == -1``), a budget that leaves nothing to satisfy an
equality (``sum(w) == 1`` with ``nnz(w) <= 0``), and a support too small for ``A @ w == b`` (no
support of k units on which the constraints hold was found: exact when the supports were
enumerated, otherwise after the candidates above and the support of an l1-minimal feasible point).
"""

from __future__ import annotations

import copy
import itertools
import math
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import ConstraintError
from ..model.constraints import LinearConstraint, NnzConstraint
from ..numerics.qp import Polyhedron, feasible_point
from ..numerics.qp import project as qp_project
from ..objective.evaluator import Evaluator, Layout
from ..objective.structure import jacobian_columns
from .base import ConstraintSet, SideSet, ht_verdict
from .side import Box
from .sparsity import CoordinateSparsity

ENUMERATE_LIMIT = 120  # supports of the budget's size tried one by one (then the projection is exact)
CONTAINS_TOL = 1e-7  # a point satisfies the constraints up to this (relative) violation


# ---------------------------------------------------------------------- exact sparse projections
def simplex_projection(z: np.ndarray, s: float = 1.0) -> np.ndarray:
    """The Euclidean projection of z onto {u >= 0, sum(u) = s} (s >= 0): u = max(z - tau, 0) with
    tau from the sorted values (Held, Wolfe & Crowder 1974; Duchi, Shalev-Shwartz, Singer & Chandra
    2008, Figure 1)."""
    z = np.asarray(z, dtype=float)
    if z.size == 0:
        return z.copy()
    if s <= 0:
        return np.zeros_like(z)
    z = z - float(np.max(z))  # the projection is invariant under z + c 1; this keeps huge z exact
    v = np.sort(z)[::-1]
    css = np.cumsum(v) - s
    idx = np.arange(1, len(v) + 1)
    rho = int(np.flatnonzero(v - css / idx > 0)[-1]) + 1  # (j = 1 always qualifies: v_1 = 0 < s)
    tau = css[rho - 1] / rho
    return np.maximum(z - tau, 0.0)


def _largest(z: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k largest values of z (by value), sorted; ties broken by position."""
    k = min(k, len(z))
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    order = np.lexsort((np.arange(len(z)), -z))
    return np.sort(order[:k])


def sparse_simplex(z: np.ndarray, k: int, s: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """The exact projection of z onto {u >= 0, sum(u) = s, nnz(u) <= k} (s > 0, k >= 1): GSSP of
    Kyrillidis, Becker, Cevher & Koch (2013): the k largest entries, projected onto the simplex.
    Returns (u, the selected positions)."""
    sel = _largest(z, k)
    u = np.zeros_like(z, dtype=float)
    u[sel] = simplex_projection(z[sel], s)
    return u, sel


def sparse_budget(z: np.ndarray, k: int, s: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """The exact projection of z onto {u >= 0, sum(u) <= s, nnz(u) <= k} (s >= 0): the k largest
    entries clipped at 0, projected onto the simplex of sum s when their sum exceeds s."""
    sel = _largest(z, k)
    u = np.zeros_like(z, dtype=float)
    v = np.maximum(z[sel], 0.0)
    u[sel] = v if v.sum() <= s else simplex_projection(z[sel], s)
    return u, sel


def sparse_hyperplane(z: np.ndarray, k: int, s: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """The exact projection of z onto {sum(u) = s, nnz(u) <= k} (k >= 1): the a largest and the
    k - a smallest entries for the best a (see the module docstring), shifted by (s - their sum) / k."""
    p = len(z)
    k = min(k, p)
    order = np.lexsort((np.arange(p), -z))  # descending by value
    v = z[order]
    top_s = np.concatenate([[0.0], np.cumsum(v)])
    top_q = np.concatenate([[0.0], np.cumsum(v * v)])
    bot_s = np.concatenate([[0.0], np.cumsum(v[::-1])])
    bot_q = np.concatenate([[0.0], np.cumsum(v[::-1] ** 2)])
    a = np.arange(k + 1)
    tot = top_s[a] + bot_s[k - a]
    gain = top_q[a] + bot_q[k - a] - (s - tot) ** 2 / k
    best = int(np.argmax(gain))
    sel = np.sort(np.concatenate([order[:best], order[p - (k - best) :] if k - best else order[:0]]))
    u = np.zeros(p)
    u[sel] = z[sel] + (s - float(z[sel].sum())) / k
    return u, sel


EXACT_PROJECTIONS = {"simplex": sparse_simplex, "budget": sparse_budget, "hyperplane": sparse_hyperplane}


# ---------------------------------------------------------------------- the side set
def _rows(c: LinearConstraint, layout: Layout) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(flat coordinates of its variable, J, r0): the residual r(x) = J x[cols] + r0, flattened."""
    var = c.check()
    cols = layout.coords(var)
    J = jacobian_columns(c.residual, layout, cols)
    J = J.toarray() if sp.issparse(J) else np.asarray(J, dtype=float)
    r0 = np.asarray(Evaluator(c.residual, layout).value(np.zeros(layout.n)), dtype=float).ravel()
    J = J.reshape(-1, len(cols))
    r0 = np.broadcast_to(r0, (J.shape[0],)).copy() if r0.size == 1 else r0
    return cols, J, r0


class LinearSet(SideSet):
    """Every linear constraint of a problem: {x : A x[cols] = b, G x[cols] <= h} over the flat
    coordinates ``cols`` of the variables they read (``merge`` joins two), each row remembering its
    constraint (``owner``) for located messages. A convex side set: its projection is the QP of
    :func:`sparsemodel.numerics.qp.project`; next to ``nnz(...) <= k`` it composes with the sparsity
    set (:meth:`compose`)."""

    kind = "linear"

    def __init__(self, constraint: LinearConstraint, layout: Layout):
        super().__init__(constraint, layout, None)
        self.constraints = [constraint]
        cols, J, r0 = _rows(constraint, layout)
        keep = np.any(J != 0, axis=1)
        bad = np.flatnonzero(~keep & ((r0 != 0) if constraint.equality else (r0 > 0)))
        if bad.size:
            raise ConstraintError(
                f"{constraint}: entry {int(bad[0])} reads no coordinate and does not hold ({r0[bad[0]]:g} "
                f"{'!=' if constraint.equality else '>'} 0)",
                constraint.span,
                "every entry of a linear constraint must involve the variable",
            )
        if not keep.any():
            raise ConstraintError(
                f"{constraint} holds for every value of {constraint.variable}: it constrains nothing",
                constraint.span,
                "remove it, or write the constraint meant (A @ w == b, sum(w) == 1, A @ w <= b)",
            )
        J, r0 = J[keep], r0[keep]
        self.cols = cols
        d = len(cols)
        if constraint.equality:
            self.A, self.b = J, -r0
            self.G, self.h = np.zeros((0, d)), np.zeros(0)
            self.own_eq, self.own_in = np.zeros(len(r0), dtype=np.int64), np.zeros(0, dtype=np.int64)
        else:
            self.A, self.b = np.zeros((0, d)), np.zeros(0)
            self.G, self.h = J, -r0
            self.own_eq, self.own_in = np.zeros(0, dtype=np.int64), np.zeros(len(r0), dtype=np.int64)

    # ---- assembly
    def merge(self, other: LinearSet) -> LinearSet:
        """Both sets' rows over the union of their coordinates."""
        out = copy.copy(self)
        cols = np.union1d(self.cols, other.cols)
        out.cols = cols

        def widen(M: np.ndarray, src: np.ndarray) -> np.ndarray:
            W = np.zeros((M.shape[0], len(cols)))
            W[:, np.searchsorted(cols, src)] = M
            return W

        out.A = np.vstack([widen(self.A, self.cols), widen(other.A, other.cols)])
        out.G = np.vstack([widen(self.G, self.cols), widen(other.G, other.cols)])
        out.b = np.concatenate([self.b, other.b])
        out.h = np.concatenate([self.h, other.h])
        m = len(self.constraints)
        out.own_eq = np.concatenate([self.own_eq, other.own_eq + m])
        out.own_in = np.concatenate([self.own_in, other.own_in + m])
        out.constraints = self.constraints + other.constraints
        return out

    def _subset(self, upto: int) -> LinearSet:
        """The set of the first ``upto`` constraints only (to say which one makes it empty)."""
        out = copy.copy(self)
        e, i = self.own_eq < upto, self.own_in < upto
        out.A, out.b, out.own_eq = self.A[e], self.b[e], self.own_eq[e]
        out.G, out.h, out.own_in = self.G[i], self.h[i], self.own_in[i]
        out.constraints = self.constraints[:upto]
        return out

    def polyhedron(self, cols: np.ndarray | None = None, box: Box | None = None) -> Polyhedron:
        """The constraints in the flat coordinates ``cols`` (default: the set's own), every other
        coordinate at zero, with the box's bounds on ``cols``."""
        cols = self.cols if cols is None else np.asarray(cols, dtype=np.int64)
        pos = np.searchsorted(self.cols, cols)
        inside = (pos < len(self.cols)) & (self.cols[np.minimum(pos, len(self.cols) - 1)] == cols)
        A = np.zeros((len(self.b), len(cols)))
        G = np.zeros((len(self.h), len(cols)))
        A[:, inside] = self.A[:, pos[inside]]
        G[:, inside] = self.G[:, pos[inside]]
        lo = box.lo[cols] if box is not None else None
        hi = box.hi[cols] if box is not None else None
        return Polyhedron(len(cols), A, self.b, G, self.h, lo, hi)

    def check_feasible(self, box: Box | None) -> None:
        """Refuse an empty polyhedron (with the box), at the first constraint that empties it."""
        if feasible_point(self.polyhedron(box=box)) is not None:
            return
        for i in range(1, len(self.constraints) + 1):
            if feasible_point(self._subset(i).polyhedron(box=box)) is None:
                c = self.constraints[i - 1]
                others = [str(o) for o in self.constraints[: i - 1]] + (
                    [str(b) for b in box.constraints] if box is not None else []
                )
                raise ConstraintError(
                    f"{c} has no solution" + (f" together with {', '.join(others)}" if others else ""),
                    c.span,
                    "no value of the variable satisfies these constraints at once; check the signs and the "
                    "right-hand sides (w >= 0 with sum(w) == -1 is empty)",
                )

    def compose(self, main: ConstraintSet, box: Box | None) -> ConstraintSet:
        """The thresholded set intersected with these constraints (only coordinate sparsity composes)."""
        if not main.composes_linear:
            raise ConstraintError(
                f"{self.constraints[0]} together with {main.constraint}: linear constraints combine with "
                f"nnz(...) <= k, not with {main.kind} constraints",
                self.constraints[0].span,
                "drop the linear constraint, or constrain the sparsity instead",
            )
        return SparseLinear(main.constraint, main.layout, main.budget, box, self)

    # ---- the side-set protocol
    def contains(self, x: np.ndarray, tol: float = CONTAINS_TOL) -> bool:
        return self.polyhedron().contains(x[self.cols], tol)

    @property
    def holds_at_zero(self) -> bool:
        """Whether the constraints hold with every coordinate they read at zero."""
        return bool(np.all(self.b == 0) and np.all(self.h >= 0))

    def touches(self, cols: np.ndarray) -> bool:
        """Whether any of the flat coordinates ``cols`` appears in a constraint."""
        return bool(np.isin(cols, self.cols).any())

    def project(self, z: np.ndarray, budget: int | None = None, warm: Any = None) -> tuple[np.ndarray, Any]:
        out = z.copy()
        res = qp_project(z[self.cols], self.polyhedron())
        if res.x is not None:
            out[self.cols] = res.x
        return out, None

    def certificate(self, x: np.ndarray, g: np.ndarray, gamma: float, rtol: float = 1e-6) -> dict[str, Any]:
        y = self.project(x - gamma * g)[0]
        return {
            "projected_step_inf": float(np.max(np.abs(y - x), initial=0.0)),
            "max_violation": self.polyhedron().violation(x[self.cols]),
        }

    def describe(self) -> str:
        ne, ni = len(self.b), len(self.h)
        parts = []
        if ne:
            parts.append(f"{ne} linear equalit{'y' if ne == 1 else 'ies'}")
        if ni:
            parts.append(f"{ni} linear inequalit{'y' if ni == 1 else 'ies'}")
        return (
            f"{' and '.join(parts) or 'no rows'} on {len(self.cols)} coordinate(s); "
            "restricted solves: active-set QP / SQP (Newton), SLSQP without a composite form"
        )

    def implied_bounds(self, lo: np.ndarray, hi: np.ndarray, passes: int = 3) -> tuple[np.ndarray, np.ndarray]:
        """Bounds on every flat coordinate that hold at every point of the polyhedron with the box
        lo <= x <= hi (full-length arrays): each row a'x <= c (an equality as two) bounds a_j x_j
        by c minus the smallest the other terms can be, sum_(i != j) min(a_i lo_i, a_i hi_i), a few
        passes of this bound propagation (``sum(w) == 1`` with ``w >= 0`` gives w <= 1). Each new
        bound is loosened by 1e-9 of the magnitudes summed (rounding), and never moved past zero
        (the sparsity sets keep 0 inside the box; a bound that excluded it would only add a
        constraint the budget already implies). The box is returned unchanged where nothing follows."""
        lo, hi = np.array(lo, dtype=float), np.array(hi, dtype=float)
        M = np.vstack([self.A, -self.A, self.G])
        c = np.concatenate([self.b, -self.b, self.h])
        cols = self.cols
        for _ in range(passes):
            l, u = lo[cols], hi[cols]
            with np.errstate(invalid="ignore"):
                least = np.where(M > 0, M * l, np.where(M < 0, M * u, 0.0))  # each term's smallest value
            inf = np.isinf(least)
            n_inf = inf.sum(axis=1)
            total = np.where(inf, 0.0, least).sum(axis=1)
            size = np.where(inf, 0.0, np.abs(least)).sum(axis=1) + np.abs(c)
            changed = False
            for r in np.flatnonzero(n_inf <= 1):
                on = np.flatnonzero(M[r] != 0)
                for j in on:
                    if n_inf[r] == 1 and not inf[r, j]:
                        continue  # another term is unbounded below: nothing bounds this one
                    rest = total[r] - (0.0 if inf[r, j] else least[r, j])
                    val = (c[r] - rest) / M[r, j]
                    pad = 1e-9 * (size[r] / abs(M[r, j]) + abs(val))
                    k = cols[j]
                    if M[r, j] > 0 and max(val + pad, 0.0) < hi[k]:
                        hi[k], changed = max(val + pad, 0.0), True
                    elif M[r, j] < 0 and min(val - pad, 0.0) > lo[k]:
                        lo[k], changed = min(val - pad, 0.0), True
            if not changed:
                break
        return lo, hi

    def blame(self) -> LinearConstraint:
        """The constraint to point at: the first equality, else the first constraint."""
        eq = [c for c in self.constraints if c.equality]
        return eq[0] if eq else self.constraints[0]


# ---------------------------------------------------------------------- composed with nnz
class SparseLinear(CoordinateSparsity):
    """``nnz(w) <= k`` intersected with the problem's linear constraints (and box): the projection of
    the module docstring (exact for the simplex, the hyperplane and the capped budget, exact by
    enumeration on small problems, the documented candidate rule otherwise); every restricted solve
    keeps the constraints (lowering/linear_solve.py)."""

    def linear_rows(self) -> tuple[int, int] | None:
        """The linear constraints kept with the selection: (equalities, inequalities)."""
        return len(self.linear.b), len(self.linear.h)

    def __init__(
        self,
        constraint: NnzConstraint,
        layout: Layout,
        budget: int | None,
        box: Box | None,
        linear: LinearSet,
    ):
        super().__init__(constraint, layout, budget, box)
        self.linear = linear
        self.touched_free = np.intersect1d(self.free, linear.cols)  # free coordinates in the rows
        self.mode, self.total = self._structure()
        self._witness: np.ndarray | None = None  # a support found feasible (positions into C)
        self._check_budget_feasible()

    # ---- structure
    def _structure(self) -> tuple[str, float]:
        """'simplex', 'budget', 'hyperplane' (one row with equal coefficients over exactly C, the
        matching box, no groups) or 'general'; and the row's right-hand side over its coefficient."""
        lin = self.linear
        if self.unit_of is not None or len(self.touched_free) or len(lin.b) + len(lin.h) != 1:
            return "general", 0.0
        row = lin.A[0] if len(lin.b) else lin.G[0]
        rhs = float(lin.b[0] if len(lin.b) else lin.h[0])
        on = lin.cols[row != 0]
        if not np.array_equal(np.sort(on), np.sort(self.coords)):
            return "general", 0.0
        vals = row[row != 0]
        alpha = float(vals[0])
        if not np.allclose(vals, alpha, rtol=1e-12, atol=0):
            return "general", 0.0
        s = rhs / alpha
        lo = self.box.lo[self.coords] if self.box is not None else np.full(self.size, -np.inf)
        hi = self.box.hi[self.coords] if self.box is not None else np.full(self.size, np.inf)
        nonneg = bool(np.all(lo == 0) and np.all(hi == np.inf))
        free = bool(np.all(lo == -np.inf) and np.all(hi == np.inf))
        if len(lin.b):
            if nonneg and s > 0:
                return "simplex", s
            if free:
                return "hyperplane", s
        elif alpha > 0 and nonneg and s >= 0:
            return "budget", s
        return "general", 0.0

    def with_budget(self, b: int) -> SparseLinear:
        return SparseLinear(self.constraint, self.layout, b, self.box, self.linear)

    def with_box(self, box: Box | None) -> SparseLinear:
        base = CoordinateSparsity(self.constraint, self.layout, self.budget).with_box(box)
        return SparseLinear(base.constraint, self.layout, self.budget, box, self.linear)

    # ---- feasibility of the budget
    def _support_polyhedron(self, sel: np.ndarray) -> tuple[np.ndarray, Polyhedron]:
        """(flat coordinates, the polyhedron on them) for the selected positions ``sel`` of C with
        the free coordinates the rows read; every other constrained coordinate at zero."""
        V = np.union1d(self.coords[np.asarray(sel, dtype=np.int64)], self.touched_free)
        return V, self.linear.polyhedron(V, self.box)

    def _feasible(self, sel: np.ndarray) -> bool:
        return feasible_point(self._support_polyhedron(sel)[1]) is not None

    def _unit_members(self, units: np.ndarray) -> np.ndarray:
        """Positions into C of the given units (coordinates, or groups)."""
        if self.unit_of is None:
            return np.sort(np.asarray(units, dtype=np.int64))
        return np.flatnonzero(np.isin(self.unit_of, units))

    def _supports(self, k: int) -> Any:
        """Every support of exactly k units (positions into C), when there are at most
        ENUMERATE_LIMIT of them; None otherwise."""
        k = min(k, self.n_units)
        if math.comb(self.n_units, k) > ENUMERATE_LIMIT:
            return None
        return (self._unit_members(np.array(u, dtype=np.int64)) for u in itertools.combinations(range(self.n_units), k))

    def _check_budget_feasible(self) -> None:
        """Refuse a budget under which the constraints cannot hold (see the module docstring)."""
        k = self.k
        lin = self.linear
        if k >= self.n_units:
            return
        if self.mode in ("simplex", "hyperplane"):
            if k == 0 and self.total != 0:
                self._refuse(k)
            return
        if self.mode == "budget":
            return
        if self._feasible(self.empty()):
            self._witness = self.empty()
            return
        if k == 0:
            self._refuse(k)
        sups = self._supports(k)
        if sups is not None:
            for sel in sups:
                if self._feasible(sel):
                    self._witness = sel
                    return
            self._refuse(k, exhaustive=True)
        # an l1-minimal feasible point's support, then its k largest units
        x = _l1_point(lin.polyhedron(np.concatenate([self.coords, self.touched_free]), self.box), len(self.coords))
        if x is not None:
            sel = self.select(x[: len(self.coords)], k)
            if self._feasible(sel):
                self._witness = sel
                return
        self._refuse(k)

    def _refuse(self, k: int, exhaustive: bool = False) -> None:
        c = self.linear.blame()
        var = self.constraint.variable.name
        rank = int(np.linalg.matrix_rank(self.linear.A)) if len(self.linear.b) else 0
        if k == 0:
            msg = f"{c} cannot hold with {self.bound_text(0)}: a budget of 0 sets every coordinate it counts to zero"
            hint = "raise the bound k, or free the coordinates the constraint needs: nnz(w, free = [...]) <= k"
        else:
            how = "no support" if exhaustive else "found no support"
            msg = (
                f"{c} cannot hold with {self.bound_text(k)}: {how} of {k} {self.unit} of {var} satisfies the "
                "linear constraints" + ("" if exhaustive else " (the supports were not all tried)")
            )
            hint = (
                f"the equalities have rank {rank}: a generic right-hand side needs at least {rank} nonzeros; raise k"
                if rank
                else "raise k, or loosen the inequalities"
            )
        raise ConstraintError(msg, c.span, hint)

    # ---- the projection
    def contains(self, x: np.ndarray) -> bool:
        """False: the projection decides (a point within the budget may still leave the linear rows)."""
        return False

    def admits(self, x: np.ndarray) -> bool:
        """Whether x is feasible (the constraints hold and the budget is kept)."""
        return (
            self.units(self.support(x)) <= self.k
            and self.linear.contains(x)
            and (self.box is None or self.box.contains(x, 1e-12))
        )

    def project(self, z: np.ndarray, budget: int | None = None, warm: Any = None) -> tuple[np.ndarray, np.ndarray]:
        k = self.k if budget is None else budget
        C = self.coords
        out = self.box.clip(z) if self.box is not None else z.copy()
        if self.mode != "general" and (k > 0 or self.total == 0 or self.mode == "budget"):
            if min(k, self.size) == 0:
                out[C] = 0.0
                return out, self.empty()
            u, sel = EXACT_PROJECTIONS[self.mode](z[C], min(k, self.size), self.total)
            out[C] = u
            return out, sel
        if k >= self.n_units:
            sel = np.arange(self.size)
            return self._on_support(z, out, sel)[0], sel
        best: tuple[float, np.ndarray, np.ndarray] | None = None
        for bound, sel in self._candidates(z, k):
            if best is not None and bound >= best[0]:
                break  # (enumeration, by increasing lower bound: no later support can be nearer)
            got = self._on_support(z, out, sel)
            if got is None:
                continue
            y, d = got
            if best is None or d < best[0] - 1e-12 * (1.0 + d):
                best = (d, y, sel)
        if best is None:  # no candidate feasible: the witness support (found when the set was built)
            sel = self._witness if self._witness is not None else self.empty()
            got = self._on_support(z, out, sel)
            if got is None:
                raise ConstraintError(f"{self.linear.blame()}: no feasible point on the support tried", self.span)
            return got[0], sel
        return best[1], best[2]

    def _candidates(self, z: np.ndarray, k: int) -> Any:
        """The supports (positions into C) the projection tries, each with a lower bound on its
        squared distance to z: all of them when few (by increasing bound: the distance of zeroing
        the others, sum_{i not in S} z_i^2 less what the box's clipping keeps, so the projection
        stops at the first bound beyond the nearest point found), otherwise the thresholding
        rule, the thresholded projection onto the polyhedron and the witness (bound 0)."""
        C = self.coords
        v, gain = self.gains(z)
        sups = self._supports(k)
        if sups is not None:
            total = float(np.sum(z[C] ** 2))
            ranked = sorted(
                ((total - float(gain[sel].sum()), i, sel) for i, sel in enumerate(sups)), key=lambda t: t[:2]
            )
            for bound, _, sel in ranked:
                yield bound - 1e-12 * (1.0 + total), sel
            return
        seen: list[np.ndarray] = []

        def fresh(sel: np.ndarray) -> bool:
            if any(np.array_equal(sel, s) for s in seen):
                return False
            seen.append(sel)
            return True

        sel = self.select(np.sqrt(gain), k)
        if fresh(sel):
            yield 0.0, sel
        V = np.union1d(C, self.touched_free)
        if len(V) <= 2000:
            res = qp_project(z[V], self.linear.polyhedron(V, self.box))
            if res.x is not None:
                y = z.copy()
                y[V] = res.x
                sel = self.select(np.sqrt(self.gains(y)[1]), k)
                if fresh(sel):
                    yield 0.0, sel
        if self._witness is not None and fresh(self._witness):
            yield 0.0, self._witness

    def _on_support(self, z: np.ndarray, base: np.ndarray, sel: np.ndarray) -> tuple[np.ndarray, float] | None:
        """The projection of z onto the constraints with the constrained coordinates outside
        ``sel`` at zero (None when none is feasible there), and its squared distance to z."""
        V, P = self._support_polyhedron(sel)
        res = qp_project(z[V], P)
        if res.x is None:
            return None
        y = base.copy()
        y[self.coords] = 0.0
        y[V] = res.x
        return y, float(np.sum((y - z) ** 2))

    # ---- reports
    def certificate(self, x: np.ndarray, g: np.ndarray, gamma: float, rtol: float = 1e-6) -> dict[str, Any]:
        """Stationarity under the constraints: x is a (restricted) stationary point when it is the
        projection of x - gamma g onto the constraints on its own support, and a fixed point of the
        projected step (the analogue of paper 001's HT-stable point) when it is the projection of
        x - gamma g onto the whole set."""
        z = x - gamma * g
        sel = np.flatnonzero(x[self.coords] != 0)
        got = self._on_support(z, self.box.clip(z) if self.box is not None else z.copy(), sel)
        scale = max(1.0, float(np.max(np.abs(x), initial=0.0)))
        on = float(np.max(np.abs(got[0] - x), initial=0.0)) if got is not None else np.inf
        full = float(np.max(np.abs(self.project(z)[0] - x), initial=0.0))
        stationary = on <= 1e-6 * scale
        fixed = stationary and full <= 1e-6 * scale
        return {
            "detail": f"|x - P_supp(x - gamma g)| {on:.2e}, |x - P(x - gamma g)| {full:.2e}",
            "definition": "fixed point of the projected step onto {nnz <= k} ∩ linear constraints (paper 001, "
            "Definition 4, with this set's projection)",
            "gamma": float(gamma),
            "step_on_support_inf": on,
            "step_inf": full,
            "stationary": bool(stationary),
            "ht_stable": bool(fixed),
            "verdict": ht_verdict(stationary, fixed),
        }

    def describe(self) -> str:
        how = {
            "simplex": f"exact k-sparse simplex projection (sum = {self.total:g}; GSSP, Kyrillidis et al. 2013)",
            "budget": f"exact k-sparse capped-simplex projection (sum <= {self.total:g})",
            "hyperplane": f"exact k-sparse hyperplane projection (sum = {self.total:g})",
            "general": "support by thresholding (or enumeration when few supports), then the Euclidean projection "
            "onto the constraints on it",
        }[self.mode]
        text = super().describe()
        text = text.split("; projection onto")[0]
        return f"{text}; with {self.linear.describe().split(';')[0]}; projection: {how}"

    def start_point(self, x: np.ndarray, g: np.ndarray, step: float, h: np.ndarray | None = None) -> np.ndarray:
        """A feasible start near x: for the sum constraints (simplex, hyperplane, budget) with the
        Hessian's diagonal h known, the minimizer of the diagonal Newton model
        g'(y - x) + 1/2 sum h_i (y_i - x_i)^2 under the dense constraint (a projection in the metric
        diag(h): y_i = x_i - (g_i + tau) / h_i, clipped at 0 for the simplex, tau by bisection),
        then the set's projection of it; otherwise the projection of the gradient step
        x - step * g. (At x = 0 a minimum-variance objective has g = 0, and the Euclidean
        projection of 0 ties every asset; the model's minimizer weights them by 1 / h_i.)"""
        C = self.coords
        if self.mode == "general" or h is None or not np.all(np.isfinite(h[C])) or np.any(h[C] <= 0):
            return self.project(x - step * g)[0]
        hc, zc = h[C], x[C] - g[C] / h[C]
        if self.mode == "hyperplane":
            y = zc - (zc.sum() - self.total) / np.sum(1.0 / hc) / hc
        else:
            y = np.maximum(zc, 0.0)
            if self.mode == "simplex" or y.sum() > self.total:
                lo, hi = float(np.min(zc * hc)) - abs(self.total) * float(np.max(hc)), float(np.max(zc * hc))
                for _ in range(200):  # sum(max(z - tau / h, 0)) is decreasing in tau
                    tau = 0.5 * (lo + hi)
                    if np.maximum(zc - tau / hc, 0.0).sum() > self.total:
                        lo = tau
                    else:
                        hi = tau
                y = np.maximum(zc - hi / hc, 0.0)
        z = x.copy()
        z[C] = y
        return self.project(z)[0]


def _l1_point(P: Polyhedron, nc: int) -> np.ndarray | None:
    """A point of P of smallest l1 norm on its first ``nc`` coordinates (a linear program, HiGHS):
    a sparse feasible point, whose support suggests a feasible one of k units."""
    from scipy.optimize import linprog

    d = P.d
    # x = xp - xm on the first nc coordinates (both >= 0), the rest as they are
    nx = d + nc
    c = np.concatenate([np.zeros(d), np.ones(nc)])
    # |x_i| <= t_i:  x_i - t_i <= 0, -x_i - t_i <= 0
    E = np.zeros((2 * nc, nx))
    E[np.arange(nc), np.arange(nc)] = 1.0
    E[nc + np.arange(nc), np.arange(nc)] = -1.0
    E[np.arange(nc), d + np.arange(nc)] = -1.0
    E[nc + np.arange(nc), d + np.arange(nc)] = -1.0
    A_ub = np.vstack([np.hstack([P.G, np.zeros((len(P.h), nc))]), E])
    b_ub = np.concatenate([P.h, np.zeros(2 * nc)])
    A_eq = np.hstack([P.A, np.zeros((len(P.b), nc))]) if len(P.b) else None
    bounds = [(None if not np.isfinite(a) else a, None if not np.isfinite(b) else b) for a, b in zip(P.lo, P.hi)]
    bounds += [(0, None)] * nc
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=P.b if len(P.b) else None, bounds=bounds, method="highs")
    if res.status != 0 or res.x is None:
        return None
    return np.asarray(res.x[:d], dtype=float)


__all__ = [
    "ENUMERATE_LIMIT",
    "LinearSet",
    "SparseLinear",
    "simplex_projection",
    "sparse_budget",
    "sparse_hyperplane",
    "sparse_simplex",
]
