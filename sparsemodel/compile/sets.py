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

Adding a constraint kind is one class here plus its entry in :func:`build_set` (see
docs/architecture.md, with :class:`LowRank` as the worked example).
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConstraintError
from ..model.constraints import (
    AUTO,
    BoxConstraint,
    Constraint,
    EigBoxConstraint,
    NnzConstraint,
    RankConstraint,
    lu_box,
)
from .evaluator import Layout

# ====================================================================== projections


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


SVD_FULL_LIMIT = 200  # min(p, m) up to which the truncated SVD is a full LAPACK SVD
SUBSPACE_ITERS = 30  # subspace iterations before falling back to the full SVD


def truncated_svd(
    M: np.ndarray, r: int, method: str = "auto", warm: np.ndarray | None = None, tol: float = 1e-12
) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """The r leading singular triplets (U, s, Vt) of M and the method used.

    ``full``: LAPACK's SVD of the whole matrix. ``subspace``: block subspace iteration on
    max(2r, r + 10) right singular vectors (a randomized range finder, Halko, Martinsson & Tropp
    2011, Algorithm 4.4), iterated until the r leading triplets satisfy ||M' U - V S|| <= tol s_1,
    started from ``warm`` (the previous iterate's right singular vectors) when given: when
    consecutive iterates are close, one or two passes suffice. Without a clear spectral gap it
    falls back to the full SVD after 30 passes, so the result is always the exact projection. ``auto``: full when min(p, m) <= 200 or r is
    not much smaller than min(p, m), else subspace.
    """
    p, m = M.shape
    q = min(p, m)
    if r <= 0:
        return np.zeros((p, 0)), np.zeros(0), np.zeros((0, m)), "none"
    if method == "auto":
        method = "full" if q <= SVD_FULL_LIMIT or 4 * (r + 10) > q else "subspace"
    if method == "full":
        U, s, Vt = np.linalg.svd(M, full_matrices=False)
        return U[:, :r], s[:r], Vt[:r], "full"
    ell = min(q, max(2 * r, r + 10))
    rng = np.random.default_rng(0)
    Q = rng.standard_normal((m, ell))
    if warm is not None and warm.shape[1] == m:
        k = min(warm.shape[0], ell)
        Q[:, :k] = warm[:k].T
    Q, _ = np.linalg.qr(Q)
    for _ in range(SUBSPACE_ITERS):
        Y, _ = np.linalg.qr(M @ Q)
        Q, _ = np.linalg.qr(M.T @ Y)
        Ub, s, Vbt = np.linalg.svd(M @ Q, full_matrices=False)
        U, s, Vt = Ub[:, :r], s[:r], (Q @ Vbt.T).T[:r]
        # converged when the triplets are singular triplets of M: M' u_i = s_i v_i
        if np.linalg.norm(M.T @ U - Vt.T * s) <= tol * max(float(s[0]), 1e-300):
            return U, s, Vt, "subspace"
    U, s, Vt = np.linalg.svd(M, full_matrices=False)  # no clear gap: the exact answer
    return U[:, :r], s[:r], Vt[:r], "full (subspace iteration did not converge)"


# ====================================================================== subspaces


@dataclass
class CoordSubspace:
    """Points supported on the flat coordinates ``cols`` (sorted; the support and the free ones)."""

    cols: np.ndarray
    n: int

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


@dataclass
class LowRankSubspace:
    """Points whose matrix variable W (flat coordinates ``W``, p x m) is ``U @ C`` (side
    ``column``: C is r x m, the column space fixed), ``C @ Vt`` (``row``: C is p x r) or
    ``U @ C @ Vt`` (``both``: C is r x r); the free coordinates ``free`` are unrestricted. The
    reduced coordinates are (C flattened, x[free])."""

    W: np.ndarray
    shape: tuple[int, int]
    U: np.ndarray | None
    Vt: np.ndarray | None
    free: np.ndarray
    n: int
    side: str = "alternate"

    @property
    def cshape(self) -> tuple[int, int]:
        p, m = self.shape
        r = self.U.shape[1] if self.U is not None else self.Vt.shape[0]
        return {"column": (r, m), "alternate": (r, m), "row": (p, r), "both": (r, r)}[self.side]

    def on_side(self, side: str, U: np.ndarray | None = None, Vt: np.ndarray | None = None) -> LowRankSubspace:
        return LowRankSubspace(
            self.W, self.shape, self.U if U is None else U, self.Vt if Vt is None else Vt, self.free, self.n, side
        )

    @property
    def dim(self) -> int:
        a, b = self.cshape
        return a * b + len(self.free)

    def matrix(self, C: np.ndarray) -> np.ndarray:
        if self.side in ("column", "alternate"):
            return self.U @ C
        if self.side == "row":
            return C @ self.Vt
        return self.U @ C @ self.Vt

    def embed(self, u: np.ndarray) -> np.ndarray:
        a, b = self.cshape
        x = np.zeros(self.n)
        x[self.W] = self.matrix(u[: a * b].reshape(a, b)).ravel()
        x[self.free] = u[a * b :]
        return x

    def restrict(self, g: np.ndarray) -> np.ndarray:
        """The adjoint of embed: the gradient in reduced coordinates. The bases are orthonormal,
        so it is also the inverse of embed on the subspace (``coords_of``)."""
        G = g[self.W].reshape(self.shape)
        if self.side in ("column", "alternate"):
            Gc = self.U.T @ G
        elif self.side == "row":
            Gc = G @ self.Vt.T
        else:
            Gc = self.U.T @ G @ self.Vt.T
        return np.concatenate([Gc.ravel(), g[self.free]])

    def coords_of(self, x: np.ndarray) -> np.ndarray:
        """Reduced coordinates of a point (the orthogonal projection onto the subspace, then its
        coordinates)."""
        return self.restrict(x)

    def restrict_columns(self, M: np.ndarray) -> np.ndarray:
        """:meth:`restrict` of each column of M (n x c), the matrix part only: (a b) x c, a x b =
        ``cshape`` (C order), in one product per side."""
        p, m = self.shape
        T = M[self.W].reshape(p, m, -1)
        if self.side in ("column", "alternate", "both"):
            T = np.einsum("pr,pmc->rmc", self.U, T)
        if self.side in ("row", "both"):
            T = np.einsum("amc,rm->arc", T, self.Vt)
        return T.reshape(-1, M.shape[1])


# ====================================================================== the protocol


class ConstraintSet(ABC):
    """The protocol every solver uses (see the module docstring)."""

    kind: str = "set"
    unit: str = ""
    thresholds: bool = True  # projected by hard thresholding (False: a convex set)

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
    def limit(self) -> int:
        """The largest meaningful budget (every unit selected)."""
        raise NotImplementedError

    def check_budget(self, b: Any) -> int:
        if isinstance(b, bool) or not isinstance(b, (int, np.integer, float, np.floating)) or float(b) != int(b):
            raise ConstraintError(
                f"{self.constraint}: the bound {b!r} is not an integer",
                self.span,
                f"use an integer 0 <= {self.unit} bound <= {self.limit}",
            )
        b = int(b)
        if b < 0:
            raise ConstraintError(f"{self.constraint}: the bound {b} must be nonnegative", self.span)
        if b > self.limit:
            raise ConstraintError(
                f"{self.bound_text(b)}: {self.target_text()} has only {self.limit} {self.unit}",
                self.span,
                f"{'r' if self.unit == 'rank' else 'k'} must be between 0 and {self.limit} ({self.unit})",
            )
        return b

    @abstractmethod
    def with_budget(self, b: int) -> ConstraintSet: ...

    @abstractmethod
    def project(self, z: np.ndarray, budget: int | None = None) -> tuple[np.ndarray, Any]: ...

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

    def target_text(self) -> str:
        return str(self.variable)

    def bound_text(self, b: int | None = None) -> str:
        return f"{self.constraint}" if b is None else f"{self.constraint} (bound {b})"


# ---------------------------------------------------------------------- coordinate sparsity


class CoordinateSparsity(ConstraintSet):
    """``nnz(target) <= k`` on the flat coordinates C of a variable (a slice leaves the rest free),
    with groups (k counts groups; selection keeps whole groups by Euclidean norm) or, for the
    off-diagonal of a symmetric matrix, in pairs (O[i,j], O[j,i]): k counts entries, selection
    keeps k // 2 pairs.

    The coordinate API the greedy solvers use: ``coords`` (C), ``free`` (F), ``k`` (selectable
    units), ``select(zc, k)``, ``support(x)`` (the state: sorted positions into C where x is
    nonzero), ``units``, ``flat``, ``project``.
    """

    def __init__(self, constraint: NnzConstraint, layout: Layout, budget: int | None = None, box: Box | None = None):
        super().__init__(constraint, layout, constraint.k_units if budget is None else None)
        self.box = box  # a Box side set composed with the projection (None: no bounds)
        c = constraint
        self.coords = layout.coords(c.variable, c.coords)
        self.size = len(self.coords)
        self.unit_size = c.unit_size
        self.pairs = c.unit_size == 2
        mask = np.ones(layout.n, dtype=bool)
        mask[self.coords] = False
        self.free = np.flatnonzero(mask)
        if c.groups is not None:
            _, self.unit_of = np.unique(c.groups, return_inverse=True)
            self.n_units = int(self.unit_of.max()) + 1 if len(self.unit_of) else 0
        else:
            self.unit_of = None
            self.n_units = self.size
        self.kind = c.kind
        self.unit = (
            "groups" if (c.groups is not None and not self.pairs) else ("edges" if self.pairs else "coordinates")
        )
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
        return CoordinateSparsity(self.constraint, self.layout, b, self.box)

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
        if b == self.budget and b == self.constraint.k_units:
            return str(self.constraint)  # as written: nnz(offdiag(O)) <= 2 * k
        return f"{self.constraint.nnz} <= {b * self.unit_size}"

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
    def project(self, z: np.ndarray, budget: int | None = None) -> tuple[np.ndarray, np.ndarray]:
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
        return CoordSubspace(self.flat(state if state is not None else self.empty()), self.n)

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
        verdict = "HT-stable" if stable else ("HT-unstable" if stationary else "not stationary")
        return {
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
        verdict = "HT-stable" if stable else ("HT-unstable" if stationary else "not stationary")
        return {
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


# ---------------------------------------------------------------------- low rank


@dataclass
class LowRankState:
    """The leading singular triplets of the matrix variable: W = U diag(s) Vt."""

    U: np.ndarray
    s: np.ndarray
    Vt: np.ndarray

    @property
    def rank(self) -> int:
        return len(self.s)


class LowRank(ConstraintSet):
    """``rank(W) <= r`` on a matrix variable W (p x m); every other variable is free.

    Projection: the best rank-r approximation (Eckart-Young), by :func:`truncated_svd` (LAPACK
    for small matrices, subspace iteration warm-started from the previous projection when r is much
    smaller than min(p, m); ``svd`` option). The restricted (debiasing) problem of a state U S Vt
    lives on ``side``:

    * ``column``: {U C : C r x m}, the column space fixed. For the usual W in ``X @ W`` (multi-task,
      multi-class and reduced-rank regression) this is the regression of every task on the r
      derived features X U, the analogue of refitting on a support's columns: it contains U S Vt
      (so debiasing never increases f) and, for the canonical designs, is again a composite
      problem with data X U;
    * ``row``: {C Vt : C p x r}; ``both``: {U C Vt : C r x r}, the smallest;
    * ``alternate`` (default): the column refit, then a row refit on the row space of its result
      (two restricted solves; f never increases, the rank never exceeds r). Measured on multi-task
      least squares (n = 500, p = 100, m = 30, r = 5): with ``column`` alone GraHTP creeps to the
      optimum (435 iterations, the objective still 1e-9 relative above it), with ``alternate`` it
      reaches the global optimum (the reduced-rank regression solution) in a few iterations: the
      row refit is a step of subspace iteration on the fitted values.
    """

    kind = "rank"
    unit = "rank"

    def __init__(
        self,
        constraint: RankConstraint,
        layout: Layout,
        budget: int | None = None,
        side: str = "alternate",
        svd: str = "auto",
    ):
        super().__init__(constraint, layout, constraint.r if budget is None else None)
        self.shape = tuple(constraint.variable.shape)
        self.W = layout.coords(constraint.variable)
        mask = np.ones(layout.n, dtype=bool)
        mask[self.W] = False
        self.free = np.flatnonzero(mask)
        self.coords = self.W
        self.side = side
        self.svd = svd
        if budget is not None:
            self.budget = self.check_budget(budget)
        self.last_method = "none"

    @property
    def limit(self) -> int:
        return min(self.shape)

    @property
    def k(self) -> int:
        """The budget in selectable units (the rank)."""
        return self.budget

    def with_budget(self, b: int) -> LowRank:
        return LowRank(self.constraint, self.layout, b, self.side, self.svd)

    def with_options(self, side: str | None = None, svd: str | None = None) -> LowRank:
        return LowRank(self.constraint, self.layout, self.budget, side or self.side, svd or self.svd)

    def svd_method(self, r: int | None = None) -> str:
        r = self.budget if r is None else r
        if self.svd != "auto":
            return self.svd
        q = min(self.shape)
        return "full" if q <= SVD_FULL_LIMIT or 4 * (r + 10) > q else "subspace"

    def matrix(self, x: np.ndarray) -> np.ndarray:
        return x[self.W].reshape(self.shape)

    def project(
        self, z: np.ndarray, budget: int | None = None, warm: LowRankState | None = None
    ) -> tuple[np.ndarray, LowRankState]:
        r = self.budget if budget is None else budget
        U, s, Vt, how = truncated_svd(self.matrix(z), r, self.svd, warm=warm.Vt if warm is not None else None)
        self.last_method = how
        keep = s > 0
        U, s, Vt = U[:, keep], s[keep], Vt[keep]
        out = z.copy()
        out[self.W] = ((U * s) @ Vt).ravel()
        return out, LowRankState(U, s, Vt)

    def state(self, x: np.ndarray) -> LowRankState:
        M = self.matrix(x)
        U, s, Vt = np.linalg.svd(M, full_matrices=False)
        keep = s > 1e-12 * max(float(s[0]) if len(s) else 0.0, 1e-300)
        return LowRankState(U[:, keep], s[keep], Vt[keep])

    def used(self, state: LowRankState) -> int:
        return state.rank

    def same(self, a: LowRankState, b: LowRankState, tol: float = 1e-10) -> bool:
        """Equal column spaces (and row spaces for sides both/row): the sine of the largest
        principal angle, ||U_b - U_a U_a' U_b||_2, at most ``tol``."""
        if a.rank != b.rank:
            return False
        if a.rank == 0:
            return True
        ok = np.linalg.norm(b.U - a.U @ (a.U.T @ b.U), 2) <= tol
        if self.side not in ("column", "alternate"):
            ok = ok and np.linalg.norm(b.Vt.T - a.Vt.T @ (a.Vt @ b.Vt.T), 2) <= tol
        return bool(ok)

    def empty(self) -> LowRankState:
        p, m = self.shape
        return LowRankState(np.zeros((p, 0)), np.zeros(0), np.zeros((0, m)))

    def subspace(self, state: LowRankState | None) -> LowRankSubspace:
        st = state if state is not None else self.empty()
        return LowRankSubspace(self.W, self.shape, st.U, st.Vt, self.free, self.n, self.side)

    def certificate(self, x: np.ndarray, g: np.ndarray, gamma: float, rtol: float = 1e-6) -> dict[str, Any]:
        """The rank analogue of paper 001, Definition 4: stationary when the gradient projected on
        the subspace of the restricted problem (and on the free coordinates) vanishes; HT-stable
        when moreover the smallest kept singular value sigma_r(W) is at least gamma times the
        largest singular value of the gradient off that subspace, (I - U U') G (a point of rank
        below r needs a zero gradient off its subspace)."""
        st = self.state(x)
        G = g[self.W].reshape(self.shape)
        sub = self.subspace(st)
        on = sub.restrict(g)
        grad_on = float(np.linalg.norm(on)) if on.size else 0.0
        off = G - st.U @ (st.U.T @ G)
        grad_off = float(np.linalg.norm(off, 2)) if off.size else 0.0
        r = self.budget
        smin = float(st.s[r - 1]) if st.rank >= r and r > 0 else 0.0
        scale = max(float(np.linalg.norm(G, 2)), float(st.s[0]) / max(gamma, 1e-300) if st.rank else 0.0, 1e-300)
        stationary = grad_on <= rtol * scale * max(1.0, np.sqrt(on.size))
        stable = stationary and smin >= gamma * grad_off * (1 - 1e-12)
        verdict = "HT-stable" if stable else ("HT-unstable" if stationary else "not stationary")
        return {
            "definition": "paper 001, Definition 4, rank form",
            "gamma": float(gamma),
            "grad_on_subspace_norm": grad_on,
            "sigma_r": smin,
            "max_sv_grad_off_subspace": grad_off,
            "stationary": bool(stationary),
            "ht_stable": bool(stable),
            "verdict": verdict,
        }

    def describe(self) -> str:
        p, m = self.shape
        how = self.svd_method()
        proj = "full LAPACK SVD" if how == "full" else "subspace iteration (randomized range finder, warm-started)"
        side = {
            "column": "column space {U C}",
            "row": "row space {C V'}",
            "both": "both spaces {U C V'}",
            "alternate": "column space {U C}, then the row space of the result {C V'}",
        }[self.side]
        return f"budget r = {self.budget} of min({p}, {m}) = {min(p, m)}; projection: truncated SVD by {proj}; debias on the {side}"


# ---------------------------------------------------------------------- convex side sets


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


# ---------------------------------------------------------------------- eigenvalue box


class EigBox(SideSet):
    """``alpha <= eig(O) <= beta`` on a symmetric matrix variable: a convex set. Its projection
    clips the eigenvalues; it has no budget and no thresholding (it constrains restricted solves)."""

    kind = "eig_box"

    def __init__(self, constraint: EigBoxConstraint, layout: Layout, S: np.ndarray | None = None):
        super().__init__(constraint, layout, None)
        self.alpha, self.beta = constraint.validate(S) or constraint.bounds(S)  # 'auto' needs the objective's S
        self.auto = constraint.auto
        self.lu = lu_box(S, constraint.xi) if self.auto and S is not None else None  # the paper's box, for describe
        self.shape = tuple(constraint.variable.shape)
        self.W = layout.coords(constraint.variable)
        mask = np.ones(layout.n, dtype=bool)
        mask[self.W] = False
        self.free = np.flatnonzero(mask)
        self.coords = self.W

    def project(self, z: np.ndarray, budget: int | None = None) -> tuple[np.ndarray, Any]:
        M = z[self.W].reshape(self.shape)
        lam, V = np.linalg.eigh((M + M.T) / 2)
        lam = np.clip(lam, self.alpha, self.beta)
        out = z.copy()
        out[self.W] = ((V * lam) @ V.T).ravel()
        return out, None

    def eigenvalues(self, x: np.ndarray) -> np.ndarray:
        M = x[self.W].reshape(self.shape)
        return np.linalg.eigvalsh((M + M.T) / 2)

    def contains(self, x: np.ndarray, tol: float = 1e-8) -> bool:
        lam = self.eigenvalues(x)
        return bool(lam[0] >= self.alpha - tol and lam[-1] <= self.beta + tol)

    def certificate(self, x: np.ndarray, g: np.ndarray, gamma: float, rtol: float = 1e-6) -> dict[str, Any]:
        lam = self.eigenvalues(x)
        return {"eig_min": float(lam[0]), "eig_max": float(lam[-1]), "alpha": self.alpha, "beta": self.beta}

    def describe(self) -> str:
        how = ""
        if self.auto:
            how = f" (auto: Lu's rule, xi = {self.constraint.xi:g}"
            if self.lu is not None and self.constraint.lower == AUTO and self.alpha < self.lu[0]:
                how += (
                    f", with alpha lowered from Lu's {self.lu[0]:.6g} to 1/tr(S), the bound of every graph's "
                    "maximum-likelihood estimate"
                )
            how += ")"
        return f"eigenvalues of {self.variable.name} in [{self.alpha:.6g}, {self.beta:.6g}]{how}"


# ---------------------------------------------------------------------- coordinate box


class Box(SideSet):
    """``lo <= x <= hi`` coordinatewise over the flat vector (every box constraint of a problem,
    intersected: ``merge``). A convex side set (``thresholds = False``): its projection clips; the
    restricted solves keep their coordinates in it (projected Newton, L-BFGS-B with bounds, cvxpy);
    next to ``nnz(...) <= k`` the sparsity set composes its projection with it
    (:meth:`CoordinateSparsity.with_box`). Coordinates with lo = hi are fixed."""

    kind = "box"

    def __init__(self, constraint: BoxConstraint, layout: Layout):
        super().__init__(constraint, layout, None)
        self.constraints = [constraint]
        self.lo = np.full(layout.n, -np.inf)
        self.hi = np.full(layout.n, np.inf)
        idx = layout.coords(constraint.variable, constraint.coords)
        lo, hi = constraint.bounds()
        self.lo[idx] = lo
        self.hi[idx] = hi
        self.owner = np.full(layout.n, -1, dtype=np.int64)
        self.owner[idx] = 0

    def merge(self, other: Box) -> Box:
        """The intersection of two boxes (an empty one is refused, at the second constraint)."""
        out = copy.copy(self)
        out.constraints = self.constraints + other.constraints
        out.lo = np.maximum(self.lo, other.lo)
        out.hi = np.minimum(self.hi, other.hi)
        out.owner = np.where(other.owner >= 0, other.owner + len(self.constraints), self.owner)
        bad = np.flatnonzero(out.lo > out.hi)
        if bad.size:
            c = out.constraint_at(int(bad[0]))
            raise ConstraintError(
                f"{c} leaves no feasible value for a coordinate of {c.variable} together with "
                f"{' and '.join(str(b) for b in self.constraints)} (lower {out.lo[bad[0]]:g} > upper {out.hi[bad[0]]:g})",
                c.span,
                "the boxes on one variable intersect; make them overlap",
            )
        return out

    def constraint_at(self, i: int) -> BoxConstraint:
        """The (last) box constraint that bounds flat coordinate i."""
        j = int(self.owner[i])
        return self.constraints[j if j >= 0 else -1]

    def clip(self, z: np.ndarray) -> np.ndarray:
        return np.clip(z, self.lo, self.hi)

    def project(self, z: np.ndarray, budget: int | None = None) -> tuple[np.ndarray, Any]:
        return self.clip(z), None

    def contains(self, x: np.ndarray, tol: float = 0.0) -> bool:
        return bool(np.all(x >= self.lo - tol) and np.all(x <= self.hi + tol))

    def bounded(self, cols: np.ndarray) -> bool:
        """Whether any of the flat coordinates ``cols`` has a finite bound."""
        return bool(np.any(np.isfinite(self.lo[cols])) or np.any(np.isfinite(self.hi[cols])))

    def certificate(self, x: np.ndarray, g: np.ndarray, gamma: float, rtol: float = 1e-6) -> dict[str, Any]:
        pg = x - self.clip(x - g)
        return {"projected_grad_inf": float(np.max(np.abs(pg), initial=0.0)), "in_box": self.contains(x, 1e-12)}

    def describe(self) -> str:
        nb = int(np.sum(np.isfinite(self.lo) | np.isfinite(self.hi)))
        fixed = int(np.sum(self.lo == self.hi))
        text = f"{nb} coordinate(s) bounded; projection: clipping; restricted solves: projected Newton / L-BFGS-B"
        if fixed:
            text += f"; {fixed} fixed (lo = hi)"
        return text


def build_set(c: Constraint, layout: Layout, S: np.ndarray | None = None) -> ConstraintSet:
    """The set for a model constraint (the registration point of a new constraint kind). ``S``:
    the covariance of a Gaussian log-likelihood objective (resolves ``auto`` eigenvalue bounds)."""
    if isinstance(c, NnzConstraint):
        return CoordinateSparsity(c, layout)
    if isinstance(c, RankConstraint):
        return LowRank(c, layout)
    if isinstance(c, EigBoxConstraint):
        return EigBox(c, layout, S)
    if isinstance(c, BoxConstraint):
        return Box(c, layout)
    raise ConstraintError(f"no constraint set for {c}", c.span)  # pragma: no cover


__all__ = [
    "Box",
    "ConstraintSet",
    "CoordSubspace",
    "CoordinateSparsity",
    "EigBox",
    "LowRank",
    "LowRankState",
    "LowRankSubspace",
    "SideSet",
    "build_set",
    "top_k",
    "truncated_svd",
]
