"""Coordinate sparsity: ``nnz(target) <= k`` on the flat coordinates of a variable (a slice or
``free=`` leaves the rest free), by coordinates, by groups (``groups=``) or by symmetric pairs
(``offdiag(O)`` of a symmetric matrix: k counts edges), optionally intersected with a box.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ConstraintError
from ..model.constraints import (
    NnzConstraint,
)
from ..objective.evaluator import Layout
from ..util import shallow_copy
from .base import BoundUnits, ConstraintSet, CoordSubspace, ht_verdict
from .side import Box
from .views import EdgeView, GroupView, View


def top_k(z: np.ndarray, k: int, groups: np.ndarray | None = None) -> np.ndarray:
    """Indices of the k entries of largest magnitude (argpartition, not sort), or of all members of
    the k groups of largest Euclidean norm (``groups``: one integer label per entry, 0..G-1);
    sorted ascending."""
    n = z.shape[0]
    if groups is None:
        if k >= n:
            return np.arange(n)
        if k <= 0:
            return np.empty(0, dtype=np.int64)
        idx = np.argpartition(-np.abs(z), k - 1)[:k]
        return np.sort(idx)
    norms = np.sqrt(np.bincount(groups, weights=z * z))
    keep = top_k(norms, k)
    mask = np.zeros(len(norms), dtype=bool)
    mask[keep] = True
    return np.flatnonzero(mask[groups])


class CoordinateSparsity(ConstraintSet):
    """``nnz(target) <= k`` on the flat coordinates C of a variable (a slice leaves the rest free),
    with groups (k counts groups; selection keeps whole groups by Euclidean norm) or, for the
    off-diagonal of a symmetric matrix, in pairs (O[i,j], O[j,i]): k counts entries, selection
    keeps k // 2 pairs.

    The coordinate API the greedy solvers use: ``coords`` (C), ``free`` (F), ``k`` (selectable
    units), ``select(zc, k)``, ``support(x)`` (the state: sorted positions into C where x is
    nonzero), ``units``, ``flat``, ``project``.
    """

    composes_linear = True  # SparseLinear: the k-sparse projection with A w == b, A w <= b

    def __init__(self, constraint: NnzConstraint, layout: Layout, budget: int | None = None, box: Box | None = None):
        super().__init__(constraint, layout, constraint.k_units if budget is None else None)
        self.box = box  # a Box side set composed with the projection (None: no bounds)
        c = constraint
        self.coords = layout.coords(c.variable, c.coords)
        self.size = len(self.coords)
        self.unit_size = c.unit_size
        self.pairs = c.unit_size == 2
        self.free = layout.complement(self.coords)
        if c.groups is not None:
            _, self.unit_of = np.unique(c.groups, return_inverse=True)
            self.n_units = int(self.unit_of.max()) + 1 if len(self.unit_of) else 0
        else:
            self.unit_of = None
            self.n_units = self.size
        self.kind = c.kind
        self.coordinate = True
        self.relaxation = "glasso" if self.pairs else "l1"
        self.unit = (
            "groups" if (c.groups is not None and not self.pairs) else ("edges" if self.pairs else "coordinates")
        )
        # the free coordinates a slice leaves (an intercept w[0]) lead the coefficient table
        self.view = EdgeView() if self.pairs else GroupView(True) if c.groups is not None else View(True)
        # what the set's copies at other budgets share (with_budget copies the set: a path's points read
        # one dict): bound_text's texts, the bound as written, the layout key
        self._shared: dict[Any, Any] = {}
        if budget is not None:
            self.budget = self.check_budget(budget)

    @property
    def limit(self) -> int:
        return self.n_units

    @property
    def k(self) -> int:
        """The budget (already in selectable units: coordinates, groups or edges)."""
        return self.budget

    def with_budget(self, b: int) -> CoordinateSparsity:
        out = shallow_copy(self)  # the coordinates, groups and free part are the same: only the budget changes
        out.budget = self.check_budget(b)
        return out

    def with_box(self, box: Box | None) -> CoordinateSparsity:
        """The same set intersected with a box (``w >= 0``, ``lo <= w <= hi``). The box must allow 0
        on every constrained coordinate (they are set to zero when not selected)."""
        if box is not None:
            lo, hi = box.lo[self.coords], box.hi[self.coords]
            bad = np.flatnonzero((lo > 0) | (hi < 0))
            if bad.size:
                c = box.constraint_at(self.coords[bad[0]])
                raise ConstraintError(
                    f"{c} excludes 0 on coordinates that {self.constraint} may set to zero",
                    c.span,
                    "bound those coordinates so that 0 is allowed (w >= 0, -1 <= w <= 1), or make them always "
                    "selected: nnz(w, free = [...]) <= k",
                )
        return CoordinateSparsity(self.constraint, self.layout, self.budget, box)

    def gains(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each constrained coordinate: the value it takes if kept (z clipped to the box) and
        the gain of keeping it, ||z_i - 0||^2 - ||z_i - clip(z_i)||^2 = v_i (2 z_i - v_i) >= 0 (the
        box contains 0). Without a box: (z_C, z_C^2)."""
        zc = z[self.coords]
        if self.box is None:
            return zc, zc * zc
        v = np.clip(zc, self.box.lo[self.coords], self.box.hi[self.coords])
        return v, np.maximum(v * (2.0 * zc - v), 0.0)

    def descent_scores(self, gc: np.ndarray) -> np.ndarray:
        """|gradient| on the constrained coordinates, zero where the descent direction -g leaves the
        box at 0 (w >= 0 and g_i > 0): what the greedy rules (OMP, OMPR, GraSP) rank."""
        score = np.abs(gc)
        if self.box is not None:
            lo, hi = self.box.lo[self.coords], self.box.hi[self.coords]
            score[((gc > 0) & (lo >= 0)) | ((gc < 0) & (hi <= 0))] = 0.0
        return score

    def target_text(self) -> str:
        return self.constraint.nnz.target_text

    def bound_text(self, b: int | None = None) -> str:
        """The constraint as the language writes it with the budget b (entries for edges)."""
        b = self.budget if b is None else b
        # every Result names its bound: each text is made once, in a dict the set's copies at other
        # budgets share (with_budget copies the set: a path's points read one dict)
        said = self._shared
        key = (b, b == self.budget)
        if key not in said:
            if "written" not in said:  # the bound as written, in units (checked once: validate walks its expression)
                said["written"] = self.constraint.k_units
            if key[1] and b == said["written"]:
                said[key] = str(self.constraint)  # as written: nnz(offdiag(O)) <= 2 * k
            else:
                said[key] = f"{self.constraint.nnz} <= {b * self.unit_size}"
        return said[key]

    def layout_key(self) -> bytes:
        """The coordinates, free part and groups as one bytes key (made once for the set and its copies):
        what the caches of a design's per-set arrays are keyed by (lowering/lean.py, lowering/guards.py)."""
        key = self._shared.get("layout")
        if key is None:
            units = self.unit_of.tobytes() if self.unit_of is not None else b""
            key = self._shared["layout"] = self.coords.tobytes() + b"|" + self.free.tobytes() + b"|" + units
        return key

    def contains(self, x: np.ndarray) -> bool:
        """Whether x is in the set, so that its projection is x itself: without a box, when at most
        k units of C are nonzero (every nonzero unit is among the k kept)."""
        if self.box is not None:
            return False
        nz = x[self.coords] != 0
        if self.unit_of is None:
            return int(np.count_nonzero(nz)) <= self.budget
        return len(np.unique(self.unit_of[nz])) <= self.budget

    # ---- coordinate API
    def select(self, zc: np.ndarray, k: int | None = None) -> np.ndarray:
        """Positions into C of the k largest |zc| (or of the k units of largest norm)."""
        return top_k(zc, self.k if k is None else k, self.unit_of)

    def support(self, x: np.ndarray) -> np.ndarray:
        """Positions into C where x is nonzero."""
        return np.flatnonzero(x[self.coords] != 0)

    def units(self, sel: np.ndarray) -> int:
        """How many units (coordinates, groups or pairs) the positions ``sel`` touch."""
        if self.unit_of is None:
            return len(sel)
        return len(np.unique(self.unit_of[sel]))

    def flat(self, sel: np.ndarray) -> np.ndarray:
        """Sorted flat coordinates of C[sel] together with the free coordinates."""
        return np.union1d(self.coords[np.asarray(sel, dtype=np.int64)], self.free)

    # ---- the protocol
    def project(self, z: np.ndarray, budget: int | None = None, warm: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """Hard thresholding on C (free coordinates untouched): (projected z, selected positions).

        With a box, the exact projection onto {nnz <= k} ∩ box: a kept coordinate takes its
        clipped value, so the k kept units are those of largest gain z_i^2 - (z_i - clip(z_i))^2
        (summed over a group's members: the box is separable); free coordinates are clipped."""
        k = self.k if budget is None else budget
        if self.box is None:
            sel = self.select(z[self.coords], k)
            out = z.copy()
        else:
            v, gain = self.gains(z)
            sel = self.select(np.sqrt(gain), k)
            out = self.box.clip(z)
            out[self.coords] = v
        drop = np.ones(self.size, dtype=bool)
        drop[sel] = False
        out[self.coords[drop]] = 0.0
        return out, sel

    def state(self, x: np.ndarray) -> np.ndarray:
        return self.support(x)

    def used(self, state: np.ndarray) -> int:
        return self.units(state)

    def same(self, a: np.ndarray, b: np.ndarray) -> bool:
        return np.array_equal(a, b)

    def empty(self) -> np.ndarray:
        return np.empty(0, dtype=np.int64)

    def subspace(self, state: np.ndarray | None) -> CoordSubspace:
        return CoordSubspace(
            self.flat(np.asarray(state if state is not None else self.empty(), dtype=np.int64)), self.n
        )

    # ---- what Result, the sweeps and select read
    def nonzeros(self, x: np.ndarray) -> np.ndarray:
        local = self.constraint.coords  # positions of C inside the variable
        out = local[(x[self.coords] != 0).nonzero()[0]]  # (a new array: sorted in place)
        out.sort()
        return out

    def report(self, x: np.ndarray, support: np.ndarray, names: Any) -> dict[str, Any]:
        if self.unit_of is None or self.pairs:
            return {}
        return {"groups": group_names(self.constraint, support, names)}

    def degrees_of_freedom(self, x: np.ndarray, fixed: np.ndarray) -> tuple[int, int, int]:
        free = len(self.free) - int(np.count_nonzero(fixed[self.free]))
        on = np.flatnonzero(x[self.coords] != 0)
        return len(on) + free, self.units(on), self.n_units

    def ebic_count(self, x: np.ndarray, fixed: np.ndarray) -> int:
        """Groups: each selected group once, plus the free coordinates -- abess's effective number
        of parameters, which counts a multi-response model's feature (a row of W, one column of X)
        once whatever the number of responses; coordinates and edges: the degrees of freedom."""
        df, units, _ = self.degrees_of_freedom(x, fixed)
        if self.unit_of is None or self.pairs:
            return df
        return units + len(self.free) - int(np.count_nonzero(fixed[self.free]))

    def truncation(self, s: int | None) -> Any:
        if s is None or s >= self.size:
            return lambda v: v
        C, F = self.coords, self.free

        def trunc(v: np.ndarray) -> np.ndarray:
            out = np.zeros_like(v)
            keep = C[top_k(v[C], s)]
            out[keep] = v[keep]
            out[F] = v[F]
            return out

        return trunc

    def power_units(self, units: int) -> int:
        """The coordinates of the ``units`` largest groups (pairs, single coordinates)."""
        if self.unit_of is None:
            return min(units, self.size)
        sizes = np.sort(np.bincount(self.unit_of))[::-1]
        return int(sizes[: min(units, len(sizes))].sum())

    def neighbour_start(self, x: np.ndarray, grad: Any) -> np.ndarray:
        """x on its support, and on the other constrained coordinates a step along -grad f(x)
        scaled so that its largest entry is half of x's smallest nonzero one: thresholding to k
        keeps x's support first, then the coordinates of largest admissible gradient."""
        z = x.copy()
        C = self.coords
        on = z[C] != 0
        g = grad()
        score = self.descent_scores(g[C])
        score[on] = 0.0
        top = float(np.max(score, initial=0.0))
        if top > 0 and np.all(np.isfinite(score)):
            m = float(np.min(np.abs(z[C][on]))) if on.any() else 1.0
            z[C] -= np.sign(g[C]) * (score / top) * 0.5 * m
        return z

    def bound_units(self) -> BoundUnits:
        """Coordinates or groups of C, the budget in them, the free coordinates (pairs of a symmetric
        matrix are not covered: their entries are tied, and no composite objective reads them)."""
        if self.pairs or self.variable.symmetric:
            return super().bound_units()
        unit_of = self.unit_of if self.unit_of is not None else np.arange(self.size, dtype=np.int64)
        return BoundUnits(self.coords, np.asarray(unit_of, dtype=np.int64), self.n_units, self.budget, self.free)

    def box_bounds(self) -> tuple[np.ndarray, np.ndarray] | None:
        return (self.box.lo, self.box.hi) if self.box is not None else None

    def sparse_directions(self, units: int) -> int | None:
        return self.power_units(units)

    def free_count(self) -> int:
        return len(self.free)

    def swap_members(self) -> np.ndarray | None:
        """Each unit's positions into C (units x unit size), or None for units of several sizes or
        pairs; found once per set (every solve asks)."""
        if self.pairs or self.variable.symmetric:
            return None
        if self.unit_of is None:
            return np.arange(self.size, dtype=np.int64)[:, None]
        seen = self.__dict__.get("_members")
        if seen is None or seen[0] is not self.unit_of:
            order = np.argsort(self.unit_of, kind="stable")
            counts = np.bincount(self.unit_of, minlength=self.n_units)
            members = None if counts.min() != counts.max() else order.reshape(self.n_units, counts[0])
            seen = (self.unit_of, members)
            self.__dict__["_members"] = seen
        return seen[1]

    def zero_note(self) -> str:
        written = getattr(self.constraint, "k", None)
        if self.pairs and written and self.budget == self.constraint.k_units:
            return f" (entries of a symmetric matrix come in pairs, so the bound {written} allows no edge)"
        return ""

    def certificate(self, x: np.ndarray, g: np.ndarray, gamma: float, rtol: float = 1e-6) -> dict[str, Any]:
        """Paper 001, Definition 4 for step gamma: x is a (basic) stationary point when the gradient
        vanishes on its support and on the free coordinates; it is HT-stable when moreover
        min_{i in I_s} |x_i| >= gamma * max_{j not in supp} |grad_j f(x)| (I_s: the s largest
        entries, so a point with fewer than s nonzeros needs a zero gradient off its support).
        With groups, magnitudes are group Euclidean norms (pairs count as groups of two)."""
        s = self.k
        if self.box is not None:
            return self._box_certificate(x, g, gamma, rtol)
        xc, gc = x[self.coords], g[self.coords]
        if self.unit_of is not None:
            nu = self.n_units
            xu = np.sqrt(np.bincount(self.unit_of, weights=xc * xc, minlength=nu))
            gu = np.sqrt(np.bincount(self.unit_of, weights=gc * gc, minlength=nu))
        else:
            xu, gu = np.abs(xc), np.abs(gc)
        on = xu != 0
        grad_on = max(float(np.max(gu[on], initial=0.0)), float(np.max(np.abs(g[self.free]), initial=0.0)))
        grad_off = float(np.max(gu[~on], initial=0.0))
        top = np.sort(xu)[::-1][:s]
        xmin = float(top[-1]) if len(top) else 0.0
        scale = max(float(np.max(np.abs(g), initial=0.0)), float(np.max(xu, initial=0.0)) / max(gamma, 1e-300), 1e-300)
        stationary = grad_on <= rtol * scale
        stable = stationary and xmin >= gamma * grad_off * (1 - 1e-12)
        strict = stationary and xmin > gamma * grad_off
        verdict = ht_verdict(stationary, stable)
        return {
            "detail": f"|grad| on support {grad_on:.2e}, min |x| top-k {xmin:.4g} vs gamma*max|grad| off "
            f"{gamma * grad_off:.4g}",
            "definition": "paper 001, Definition 4",
            "gamma": float(gamma),
            "grad_on_support_inf": grad_on,
            "min_abs_top_s": xmin,
            "max_abs_grad_off_support": grad_off,
            "stationary": bool(stationary),
            "ht_stable": bool(stable),
            "strictly_ht_stable": bool(strict),
            "verdict": verdict,
        }

    def _box_certificate(self, x: np.ndarray, g: np.ndarray, gamma: float, rtol: float) -> dict[str, Any]:
        """Definition 4 with a box: x is stationary when the projected gradient x - clip(x - g)
        vanishes on its support and on the free coordinates, and HT-stable when moreover it is a
        fixed point of the projected step x = P(x - gamma g) onto {nnz <= k} ∩ box: the s kept
        units' gains (of keeping their clipped values) are at least every other unit's gain."""
        box = self.box
        pg = x - box.clip(x - g)
        on_c = x[self.coords] != 0
        grad_on = max(
            float(np.max(np.abs(pg[self.coords][on_c]), initial=0.0)),
            float(np.max(np.abs(pg[self.free]), initial=0.0)),
        )
        _, gain = self.gains(x - gamma * g)
        if self.unit_of is not None:
            gain = np.bincount(self.unit_of, weights=gain, minlength=self.n_units)
            on = np.bincount(self.unit_of, weights=on_c.astype(float), minlength=self.n_units) > 0
        else:
            on = on_c
        top = np.sort(gain[on])[::-1][: self.k]
        kept = float(top[-1]) if len(top) == self.k and self.k > 0 else 0.0
        off = float(np.max(gain[~on], initial=0.0))
        scale = max(
            float(np.max(np.abs(g), initial=0.0)), float(np.max(np.abs(x), initial=0.0)) / max(gamma, 1e-300), 1e-300
        )
        stationary = grad_on <= rtol * scale
        stable = stationary and kept >= off * (1 - 1e-12)
        verdict = ht_verdict(stationary, stable)
        return {
            "detail": f"|projected grad| on support {grad_on:.2e}, min gain kept {kept:.4g} vs max gain off {off:.4g}",
            "definition": "paper 001, Definition 4 (fixed point of the projected step onto {nnz <= k} ∩ box)",
            "gamma": float(gamma),
            "projected_grad_on_support_inf": grad_on,
            "min_gain_kept": kept,
            "max_gain_off_support": off,
            "stationary": bool(stationary),
            "ht_stable": bool(stable),
            "verdict": verdict,
        }

    def describe(self) -> str:
        c = self.constraint
        var = c.variable.name
        if self.pairs:
            text = (
                f"budget k = {self.budget} edges = {self.budget * 2} entries (pairs O[i,j], O[j,i]) of the "
                f"{self.n_units} edges ({self.size} off-diagonal entries) of {var}"
            )
            written = self.constraint.k
            if written % 2 and self.budget == self.constraint.k_units:
                text += f"; the bound {written} is odd and allows {self.budget} pairs"
        elif self.unit_of is not None:
            text = f"budget k = {self.budget} of {self.n_units} groups of {var}"
        else:
            text = f"budget k = {self.budget} of {self.n_units} coordinates of {var}"
        nfree = c.variable.size - self.size
        if nfree:
            text += f"; {nfree} coordinate(s) of {var} free" + (" (the diagonal)" if c.nnz.offdiag else "")
            if c.nnz.free is not None:
                text += f" ({len(c.nnz.free)} always selected by free=)"
        if self.box is not None:
            text += "; projection onto {nnz <= k} ∩ box (keeps the largest gains of the clipped values)"
        return text


def group_names(c: Any, support: np.ndarray, names: Any) -> list[str]:
    """The kept groups of a group-sparsity constraint ``c``, by name: the row (column) names for
    ``groups = rows`` (``cols``), else ``group LABEL`` with the user's label."""
    local = np.asarray(c.coords)
    pos = np.searchsorted(local, support)  # support: positions in the variable, all inside C
    labels = np.asarray(c.groups)[pos]
    axis = {"rows": 0, "cols": 1}.get(getattr(c.nnz, "axis_groups", None) or "", None)
    out = []
    labs, first = np.unique(labels, return_index=True)  # (each label's first member in the support)
    by_axis = axis is not None and len(c.variable.shape) == 2
    axis_names = names.axis_names()[axis] if by_axis and names is not None and len(labs) else None
    for lab, at in zip(labs.tolist(), first.tolist()):
        member = int(support[at])
        if by_axis:
            i = divmod(member, c.variable.shape[1])[axis]  # (row, column) of a C-ordered matrix
            out.append(
                axis_names[i]
                if axis_names is not None
                else f"{c.variable.name}[{i}, :]"
                if axis == 0
                else f"{c.variable.name}[:, {i}]"
            )
        else:
            out.append(f"group {int(lab)}")
    return out
