"""Constraint sets: one class per constraint kind, the seam between the model and the solvers.

Every set over the flat vector x (all variables) says:

* ``budget`` -- the bound k, counted in the units a solver selects (``unit``): coordinates for
  ``nnz``, groups for ``nnz(w, groups=g)``, edges for the symmetric off-diagonal (one edge is the
  pair O[i,j], O[j,i]: ``nnz(offdiag(O)) <= 2 * k``, written in entries as nnz counts them, is a
  budget of k edges), the rank for ``rank``; ``with_budget(b)`` is the same set with another
  bound (sweeps, ``--k``). ``Result.k``, the compare sweep, ``check``, the CLI and the certificate
  read the bound only from here, so k means one thing per constraint everywhere. A budget of 0 is
  legal: the constrained part is zero and the free part is still fitted.
* ``project(z)`` -- the Euclidean projection onto the set (hard thresholding to the top k,
  truncated SVD, eigenvalue clipping), with the free coordinates untouched, and the ``state`` of
  the result (its support, or its singular subspaces);
* ``state(x)`` and ``used(state)`` -- the structure of a point and how much budget it uses;
* ``subspace(state)`` -- the linear space on which the restricted (debiasing) problem lives: a map
  from reduced coordinates, plus the free coordinates (:class:`CoordSubspace`,
  :class:`LowRankSubspace`);
* ``certificate(x, g, gamma)`` -- paper 001's Definition 4 in the set's terms (is x a fixed point
  of the projected gradient step with step gamma?).

The rest of the protocol (what ``finish``, ``Result``, the sweeps, ``select``, ``auto`` and the
relaxations read) has defaults in :class:`ConstraintSet`. Adding a constraint kind is one set
class in its own module that registers itself with ``register_kind``, its model constraint and its
example (see docs/architecture.md, with per-group caps, :mod:`.caps`, as the worked example)."""

from __future__ import annotations

import copy
import functools
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import ConstraintError, NoBoundError
from ..model.constraints import (
    Constraint,
)
from ..objective.evaluator import Layout
from .views import View


def ht_verdict(stationary: bool, stable: bool) -> str:
    """The words of a certificate's verdict (paper 001, Definition 4): a fixed point of the projected
    step (HT-stable), a stationary point that is not one (HT-unstable), or neither."""
    return "HT-stable" if stable else ("HT-unstable" if stationary else "not stationary")


@dataclass
class CoordSubspace:
    """Points supported on the flat coordinates ``cols`` (sorted; the support and the free ones)."""

    cols: np.ndarray
    n: int
    form = "coords"  # the restricted solves' back-end (lowering.restricted.BACKENDS)

    @property
    def dim(self) -> int:
        return len(self.cols)

    def embed(self, u: np.ndarray) -> np.ndarray:
        x = np.zeros(self.n)
        x[self.cols] = u
        return x

    def restrict(self, g: np.ndarray) -> np.ndarray:
        return g[self.cols]

    def coords_of(self, x: np.ndarray) -> np.ndarray:
        return x[self.cols]

    def embedding(self) -> sp.csc_matrix:
        """The embedding as a sparse n x dim matrix (x = E u)."""
        d = len(self.cols)
        return sp.csc_matrix((np.ones(d), (self.cols, np.arange(d))), shape=(self.n, d))


@dataclass
class BoundUnits:
    """What the perspective relaxation (lowering/bound.py, docs/certify.md) needs from a set: the
    constrained flat coordinates C, the unit of each (0..n_units-1; a coordinate is its own unit
    without groups), the budget k in units, and the free coordinates. The relaxation scores each
    coordinate; the set's part is to add the scores up by unit and to say which k units count."""

    coords: np.ndarray
    unit_of: np.ndarray
    n_units: int
    budget: int
    free: np.ndarray
    # whether :meth:`top` takes the m largest scores (every choice of k units is a support); the
    # relaxation then scores a batch of dual points at once (Relaxation.segment_values)
    largest_top = True

    def __post_init__(self) -> None:
        # every coordinate its own unit, in order: the unit sums are the values themselves
        self._single = self.n_units == len(self.coords) and np.array_equal(self.unit_of, np.arange(len(self.coords)))

    @functools.cached_property
    def _order(self) -> np.ndarray:
        """The positions into C unit by unit (what :meth:`members` and :meth:`positions` read; made
        on first use: a relaxation refused for want of a ridge never reads them)."""
        return np.argsort(self.unit_of, kind="stable")

    @functools.cached_property
    def _starts(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(np.bincount(self.unit_of, minlength=self.n_units))])

    def unit_sums(self, per_coord: np.ndarray) -> np.ndarray:
        """Per unit: the sum of the per-coordinate values over its members (+inf stays +inf); of
        every row of a 2-D ``per_coord`` (a batch of dual points)."""
        if self._single:
            return np.asarray(per_coord, dtype=float)
        if np.ndim(per_coord) == 2:
            return np.stack([np.bincount(self.unit_of, weights=row, minlength=self.n_units) for row in per_coord])
        return np.bincount(self.unit_of, weights=per_coord, minlength=self.n_units)

    def top(self, scores: np.ndarray, undecided: np.ndarray, m: int, fixed_in: np.ndarray) -> np.ndarray:
        """The undecided units (ids in ``undecided``) a support with the units ``fixed_in`` (bool per
        unit) adds to reach the largest sum of ``scores``, m at most: the relaxation's inner maximum
        over the supports is attained there (the m largest; a set whose supports are not every
        choice of k units, such as per-group caps, overrides it with its own exact rule)."""
        su = scores[undecided]
        if m <= 0 or len(su) == 0:
            return np.empty(0, dtype=np.int64)
        if m >= len(su):
            return undecided
        return undecided[np.argpartition(-su, m - 1)[:m]]

    def members(self, u: int) -> np.ndarray:
        """Positions into C of unit u's coordinates."""
        return self._order[self._starts[u] : self._starts[u + 1]]

    def positions(self, units: np.ndarray) -> np.ndarray:
        """Sorted positions into C of the given units' coordinates."""
        units = np.asarray(units, dtype=np.int64)
        if units.size == 0:
            return np.empty(0, dtype=np.int64)
        if len(self._order) == self.n_units:  # one coordinate per unit
            return np.sort(self._order[self._starts[units]])
        mask = np.zeros(self.n_units, dtype=bool)
        mask[units] = True
        return np.flatnonzero(mask[self.unit_of])


class ConstraintSet(ABC):
    """The protocol every solver uses (see the module docstring)."""

    kind: str = "set"
    unit: str = ""
    thresholds: bool = True  # projected by hard thresholding (False: a convex set)
    coordinate: bool = False  # offers the coordinate API (coords, free, select, support, units, ...)
    relaxation: str | None = None  # the convex relaxation that stands for it: "l1", "nuclear", "glasso"
    counts_units: bool = True  # criteria that price the selected units (EBIC, GIC) apply
    view: View = View()  # how a Result shows what the set selected (sets/views.py)
    projects_start: bool = False  # a solver's start is projected onto it (the eigenvalue box: 0 -> alpha I)
    composes_linear: bool = False  # linear constraints compose into its projection (sets/linear.SparseLinear)

    def __init__(self, constraint: Constraint, layout: Layout, budget: int | None):
        self.constraint = constraint
        self.layout = layout
        self.n = layout.n
        self.variable = constraint.variable
        self.budget = budget

    @property
    def span(self) -> Any:
        return self.constraint.span

    @property
    @abstractmethod
    def limit(self) -> int:
        """The largest meaningful budget (every unit selected)."""

    def check_budget(self, b: Any) -> int:
        """A budget value checked by the constraint's one bound check (an integer from 0 to
        ``limit`` units; a located error otherwise). A bound by name (``{"w": 5}``, the spelling
        of several bounds) is taken when it names this set's variable."""
        if isinstance(b, Mapping):
            name = self.variable.name
            if set(map(str, b)) != {name}:
                raise ConstraintError(
                    f"k={dict(b)!r} names bounds by variable, but this model has one bound, {self.constraint}",
                    self.span,
                    f"give k as a number in its unit (k={self.budget}), or by its variable's name: k={{{name!r}: ...}}",
                )
            b = next(iter(b.values()))
        return self.constraint.check_bound(b)

    @abstractmethod
    def with_budget(self, b: int) -> ConstraintSet: ...

    @abstractmethod
    def project(self, z: np.ndarray, budget: int | None = None, warm: Any = None) -> tuple[np.ndarray, Any]:
        """The projection of z (to ``budget`` units; ``warm``: the state of a previous projection,
        which some sets use to start from) and the state of the result."""

    @abstractmethod
    def state(self, x: np.ndarray) -> Any: ...

    @abstractmethod
    def used(self, state: Any) -> int: ...

    @abstractmethod
    def same(self, a: Any, b: Any) -> bool: ...

    @abstractmethod
    def subspace(self, state: Any) -> Any: ...

    @abstractmethod
    def empty(self) -> Any:
        """The state of a point that uses none of the budget (only the free part nonzero)."""

    @abstractmethod
    def certificate(self, x: np.ndarray, g: np.ndarray, gamma: float, rtol: float = 1e-6) -> dict[str, Any]: ...

    @abstractmethod
    def describe(self) -> str: ...

    # ---- what the solvers, Result, the sweeps, select and the CLI read (defaults for any set)
    def nonzeros(self, x: np.ndarray) -> np.ndarray:
        """Result.support: the positions (into the flattened variable) where x is nonzero."""
        return np.flatnonzero(np.asarray(x[self.layout.coords(self.variable)]) != 0)

    def report(self, x: np.ndarray, support: np.ndarray, names: Any) -> dict[str, Any]:
        """What a Result says of x beyond its support: ``extra`` entries and ``groups`` (names)."""
        return {}

    def degrees_of_freedom(self, x: np.ndarray, fixed: np.ndarray) -> tuple[int, int, int]:
        """(df, units used, selectable units) of x; ``fixed`` marks coordinates a box fixes. A set
        that selects no units (a side set: a box, a ball, linear constraints) has none to count."""
        raise ConstraintError(
            f"{self.describe()} selects no units, so it has no degrees of freedom to count",
            self.span,
            "degrees of freedom (df, the criteria of select) count the units of nnz(...) <= k or rank(W) <= r",
        )

    def ebic_count(self, x: np.ndarray, fixed: np.ndarray) -> int:
        """What the EBIC of :mod:`sparsemodel.workflows.criteria` prices at log n + 2 gamma log p
        each: the degrees of freedom (a set of groups counts each selected group once)."""
        return self.degrees_of_freedom(x, fixed)[0]

    def truncation(self, s: int | None) -> Any:
        """The power method's truncation for a budget of s units: v -> the part of v a budget-s
        point of the set may use (free coordinates kept)."""
        if s is None or s >= self.limit:
            return lambda v: v
        return lambda v: self.project(v, s)[0]

    def power_units(self, units: int) -> int:
        """The truncation budget of the smoothness estimates for ``units`` units."""
        return min(units, self.limit)

    def curvature_parts(self) -> list[np.ndarray]:
        """The coordinates over which the unit step's curvature is averaged, one array per part
        whose curvatures add up (``LoweredProblem.mean_curvature``): the constrained coordinates."""
        return [self.coords]

    def neighbour_start(self, x: np.ndarray, grad: Any) -> np.ndarray:
        """The warm start at another bound from a neighbour's solution x (``grad()`` gives the
        gradient at x if the set needs it): x itself by default."""
        return x.copy()

    def within(self, free: np.ndarray) -> ConstraintSet:
        """The same set with the free coordinates ``free`` (a part of a product of sets: the other
        parts' coordinates are neither its own nor free, so its subspaces, certificate and degrees
        of freedom count only its own coordinates and the product's free ones)."""
        out = copy.copy(self)
        out.free = np.asarray(free, dtype=np.int64)
        return out

    def members(self) -> list[tuple[Any, ConstraintSet]]:
        """(model constraint, the set that describes it) for every constraint this set stands for
        (what ``check`` prints per constraint: a box holds every bound, a product its parts)."""
        return [(c, self) for c in getattr(self, "constraints", [self.constraint])]

    def with_box(self, box: Any) -> ConstraintSet:
        """The set intersected with a coordinate box (only sparsity sets compose with one)."""
        raise ConstraintError(
            f"{box.constraint} together with {self.constraint}: box constraints combine with nnz(...) <= k, "
            f"not with {self.kind} constraints",
            box.span,
            "drop the bounds, or constrain the sparsity instead",
        )

    def admits(self, x: np.ndarray) -> bool:
        """Whether x is a point of the set a solver may start from (sets whose points exclude zero,
        such as sum(w) == 1, answer False for it; see ``start_point``)."""
        return True

    def contains(self, x: np.ndarray) -> bool:
        """Whether x is known to be in the set, so that its projection would return x itself (a start
        that needs no projection); False where the set cannot tell cheaply (the projection decides)."""
        return False

    def start_point(self, x: np.ndarray, g: np.ndarray, step: float, h: np.ndarray | None = None) -> np.ndarray:
        """A start the set admits near x (``g``: the gradient at x, ``step``: a step size, ``h``: the
        Hessian's diagonal at x when known): x itself unless the set overrides it."""
        return x

    def box_bounds(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The coordinate box composed into the set's projection, as (lo, hi) over every flat
        coordinate (``w >= 0``: lo 0 on w's coordinates, -inf elsewhere), or None without one."""
        return None

    def sparse_directions(self, units: int) -> int | None:
        """At most how many nonzero coordinates a direction within ``units`` units of the set has
        (the coordinates of the largest units), or None when the set counts no coordinates (a
        rank, changes): what per-sample smoothness bounds over sparse directions read."""
        return None

    def free_count(self) -> int:
        """How many free coordinates (an intercept) a fit on any support of a set of coordinates
        estimates beside its units; 0 for a set that selects no coordinates. What ``select``'s
        default range of k leaves for the residual."""
        return 0

    def swap_members(self) -> np.ndarray | None:
        """Positions into C of each unit's coordinates (units x size) when the budget is spent on
        interchangeable units of one size, so that one unit can be swapped for another (auto's
        swap search); None otherwise."""
        return None

    def vacuous(self) -> bool:
        """Whether the set at its budget excludes no point (every unit allowed: k = the number of
        coordinates, groups or edges, r = min(p, m)), so that a solve is the unconstrained one
        (``full_budget``, the path's last point). Per-group caps still bind at their largest k."""
        return bool(self.budget >= self.limit)

    #: Whether every selection of at most ``budget`` units is a support the set admits (a uniform
    #: matroid: the projection keeps the largest units). False where some are excluded (per-group
    #: caps), which keeps a set out of the compiled lean path (lowering/lean.py).
    uniform: bool = True

    def linear_rows(self) -> tuple[int, int] | None:
        """The numbers of equality and inequality rows of the linear constraints the set keeps with
        its selection (``A w == b``, ``A w <= b``: its projections and restricted solves hold them),
        or None when it keeps none: what auto's swap search asks to keep their working set in its
        model and to check a one-swap minimum by pair exchanges."""
        return None

    def feasible_units(self, units: np.ndarray) -> bool:
        """Whether the units ``units`` (ids of ``swap_members`` rows) together are a support the set
        admits: what auto's swap search asks of every candidate before solving it, so that a swap
        leaving the set (a fourth asset of a sector capped at three) is never taken. Every
        selection the search builds (it keeps at most k units), unless the set says otherwise."""
        return True

    def zero_note(self) -> str:
        """Why a budget of 0 leaves nothing constrained (a bound too small for its unit)."""
        return ""

    def bound_units(self) -> BoundUnits:
        """The units the perspective relaxation sums its scores over (the lower bound of docs/certify.md);
        a set without a cardinality structure of independent units raises NoBoundError saying so."""
        raise NoBoundError(
            f"no lower bound for {self.constraint}: the perspective relaxation covers nnz(...) <= k on "
            "coordinates or groups, not this constraint"
        )

    def target_text(self) -> str:
        return str(self.variable)

    def bound_text(self, b: int | None = None) -> str:
        return f"{self.constraint}" if b is None else f"{self.constraint} (bound {b})"


class SideSet(ConstraintSet):
    """A convex set kept inside the restricted solves (``thresholds = False``): no budget, no
    structure to select, and its restricted problem is the whole space. Subclasses give the
    projection, ``contains``, the certificate and ``describe``."""

    unit = ""
    thresholds = False

    @property
    def limit(self) -> int:
        return 0

    def with_budget(self, b: int) -> SideSet:
        raise ConstraintError(f"{self.constraint} has no bound to change", self.span)

    def state(self, x: np.ndarray) -> None:
        return None

    def used(self, state: Any) -> int:
        return 0

    def same(self, a: Any, b: Any) -> bool:
        return True

    def empty(self) -> None:
        return None

    def subspace(self, state: Any) -> CoordSubspace:
        return CoordSubspace(np.arange(self.n), self.n)
