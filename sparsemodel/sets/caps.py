"""Per-group caps: ``nnz(w, per = g, cap = c) <= k``, at most c_g nonzeros in each group g and k
in total (a portfolio of at most 2 assets per sector and 10 in all; at most a few variants per
gene).

The feasible supports are the independent sets of a partition matroid (at most c_g of group g)
truncated at k, which is again a matroid. Over a matroid the greedy rule maximizes any sum of
nonnegative weights, and the projection of z keeps the support S that maximizes sum_{i in S}
gain_i (gain_i = z_i^2 without a box), so it is exact: sort by |z_i|, take an entry when its group
has room and fewer than k are taken. The unit is the coordinate; everything else (the restricted
solves on coordinate subspaces, the box, the degrees of freedom, the lower bound) is coordinate
sparsity's, which the class inherits.

The whole kind is this module, :class:`~sparsemodel.model.constraints.counting.CapsConstraint`
(and the ``per=``, ``cap=`` keywords of ``nnz``) and its example in :mod:`.examples`: the
registration below is found by :mod:`.registry`, which imports every module of this package.

The power method's truncation stays coordinate sparsity's (the s largest entries, no caps): the
smoothness constants bound the curvature over differences of two feasible points, whose supports
may hold 2 c_g entries of a group, and every such direction is s-sparse, so the estimate is an
upper bound, never below the caps' own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..model.constraints import CapsConstraint
from ..objective.evaluator import Layout
from . import examples as ex
from .base import BoundUnits, ht_verdict
from .registry import register_kind
from .side import Box
from .sparsity import CoordinateSparsity


def capped_top(score: np.ndarray, group: np.ndarray, caps: np.ndarray, k: int) -> np.ndarray:
    """Positions of the greedy basis: the largest ``score`` entries, at most ``caps[g]`` of group g
    and ``k`` in all (sorted ascending). Greedy takes an entry when its group has room, so an entry
    is taken exactly when it is among the caps[g] largest of its group and, among those eligible
    entries, among the k largest: computed without a Python loop (ties broken by position)."""
    n = len(score)
    if k <= 0 or n == 0:
        return np.empty(0, dtype=np.int64)
    order = np.lexsort((np.arange(n), -score, group))  # by group, then decreasing score
    g_sorted = group[order]
    starts = np.searchsorted(g_sorted, g_sorted, side="left")
    rank_in_group = np.arange(n) - starts
    eligible = order[rank_in_group < caps[g_sorted]]
    if len(eligible) > k:
        eligible = eligible[np.lexsort((eligible, -score[eligible]))[:k]]
    return np.sort(eligible)


@dataclass
class CappedUnits(BoundUnits):
    """The coordinates as the lower bound's units, with the caps: the relaxation's inner maximum
    over the supports, max sum_u S_u z_u over the convex hull of the supports, is a linear
    objective over a matroid polytope, which the greedy basis attains (Edmonds), so the bound is
    the perspective relaxation of the caps themselves, not only of the total."""

    group: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    caps: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    largest_top = False  # (the greedy basis under the caps)

    def top(self, scores: np.ndarray, undecided: np.ndarray, m: int, fixed_in: np.ndarray) -> np.ndarray:
        """The greedy basis of the undecided units by score with each group's room left after the
        units fixed in (units of nonpositive score add nothing: taken or not, the sum is the same)."""
        room = self.caps - np.bincount(self.group[fixed_in], minlength=len(self.caps))
        pick = capped_top(np.asarray(scores[undecided], dtype=float), self.group[undecided], np.maximum(room, 0), m)
        return undecided[pick]


class GroupCaps(CoordinateSparsity):
    """``nnz(w, per = g, cap = c) <= k`` on the flat coordinates C of a variable: the coordinate
    API of :class:`CoordinateSparsity` with the greedy basis of the truncated partition matroid as
    its selection (``select``), so that its projection, with or without a box, is exact."""

    def __init__(self, constraint: CapsConstraint, layout: Layout, budget: int | None = None, box: Box | None = None):
        super().__init__(constraint, layout, budget, box)
        self.group = np.asarray(constraint.per, dtype=np.int64)
        self.caps = np.asarray(constraint.caps, dtype=np.int64)
        self.relaxation = None  # l1 knows no caps: the lasso path would report supports outside the set
        self.composes_linear = False  # SparseLinear's projections (GSSP, enumeration) know no caps
        self.uniform = False  # some k-subsets break a cap (and the compiled lean path knows no caps)

    @property
    def limit(self) -> int:
        """The largest support the caps allow (sum over groups of min(cap, group size))."""
        return self.constraint.n_units

    def vacuous(self) -> bool:
        """Every coordinate allowed only when no cap is below its group's size (the largest k
        leaves the caps binding)."""
        sizes = np.bincount(self.group, minlength=len(self.caps))
        return bool(self.budget >= self.size and np.all(self.caps >= sizes))

    def with_box(self, box: Box | None) -> GroupCaps:
        plain = super().with_box(box)  # the check that the box allows 0 where the set may zero
        return GroupCaps(self.constraint, self.layout, self.budget, plain.box)

    def select(self, zc: np.ndarray, k: int | None = None) -> np.ndarray:
        """Positions into C of the greedy basis of |zc|: at most cap_g per group, k in all."""
        return capped_top(np.abs(zc), self.group, self.caps, self.k if k is None else k)

    def contains(self, x: np.ndarray) -> bool:
        """Within the budget and every group's cap, without a box (its projection is x itself)."""
        return self.box is None and self.feasible_units(self.support(x))

    def feasible_units(self, units: np.ndarray) -> bool:
        """At most k coordinates, at most cap_g of them in each group g."""
        units = np.asarray(units, dtype=np.int64)
        if len(units) > self.k:
            return False
        counts = np.bincount(self.group[units], minlength=len(self.caps))
        return bool(np.all(counts <= self.caps))

    def bound_units(self) -> BoundUnits:
        """The coordinates with the caps (:class:`CappedUnits`: the bound's greedy inner maximum)."""
        u = super().bound_units()
        return CappedUnits(u.coords, u.unit_of, u.n_units, u.budget, u.free, group=self.group, caps=self.caps)

    def certificate(self, x: np.ndarray, g: np.ndarray, gamma: float, rtol: float = 1e-6) -> dict[str, Any]:
        """Paper 001, Definition 4 over the caps: x is stationary when the gradient (projected onto
        the box, if any) vanishes on its support and on the free coordinates, and HT-stable when
        moreover it is a fixed point of the projected step, x = P(x - gamma g), with P the greedy
        projection (ties may make the fixed point one of several projections: compared in value)."""
        pg = g if self.box is None else x - self.box.clip(x - g)
        on = x[self.coords] != 0
        grad_on = max(
            float(np.max(np.abs(pg[self.coords][on]), initial=0.0)),
            float(np.max(np.abs(pg[self.free]), initial=0.0)),
        )
        scale = max(
            float(np.max(np.abs(g), initial=0.0)), float(np.max(np.abs(x), initial=0.0)) / max(gamma, 1e-300), 1e-300
        )
        stationary = grad_on <= rtol * scale
        z = x - gamma * g
        p, _ = self.project(z)
        kept = float(np.sum((z - x) ** 2))
        best = float(np.sum((z - p) ** 2))
        stable = stationary and kept <= best + 1e-9 * max(1.0, float(np.sum(z * z)))
        return {
            "detail": f"|grad| on support {grad_on:.2e}, ||z - x||^2 {kept:.4g} vs ||z - P(z)||^2 {best:.4g} "
            f"at z = x - gamma g",
            "definition": "paper 001, Definition 4 (fixed point of the projected step onto the caps)",
            "gamma": float(gamma),
            "grad_on_support_inf": grad_on,
            "stationary": bool(stationary),
            "ht_stable": bool(stable),
            "verdict": ht_verdict(stationary, stable),
        }

    def describe(self) -> str:
        var = self.constraint.variable.name
        caps = np.unique(self.caps)
        cap = f"at most {int(caps[0])}" if len(caps) == 1 else f"at most {', '.join(str(int(c)) for c in self.caps)}"
        text = (
            f"budget k = {self.budget} of {self.size} coordinates of {var}, {cap} in each of the "
            f"{len(self.caps)} groups of {self.constraint.nnz.per_text} (greedy projection: exact on a matroid)"
        )
        nfree = self.constraint.variable.size - self.size
        if nfree:
            text += f"; {nfree} coordinate(s) of {var} free"
        if self.box is not None:
            text += "; the box composed into the projection (the greedy order of the clipped values' gains)"
        return text


register_kind(
    CapsConstraint,
    [("nnz_caps", "per-group caps (nnz(w, per=g, cap=c) <= k: at most c in each group, k in all)")],
    lambda c, layout, S: GroupCaps(c, layout),
    generic=True,
    examples={"nnz_caps": ex.caps},
)
