"""Convex side sets, kept inside the restricted solves instead of thresholded: the eigenvalue box
``alpha <= eig(O) <= beta`` of a precision matrix and the coordinate box ``lo <= w <= hi``.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from ..errors import ConstraintError
from ..model.constraints import (
    AUTO,
    BoxConstraint,
    EigBoxConstraint,
    lu_box,
)
from ..objective.evaluator import Layout
from .base import SideSet


class EigBox(SideSet):
    """``alpha <= eig(O) <= beta`` on a symmetric matrix variable: a convex set. Its projection
    clips the eigenvalues; it has no budget and no thresholding (it constrains restricted solves)."""

    kind = "eig_box"
    projects_start = True  # Algorithm 2 of paper 000 starts at Omega(0), the projection of 0 (alpha I)

    def __init__(self, constraint: EigBoxConstraint, layout: Layout, S: np.ndarray | None = None):
        super().__init__(constraint, layout, None)
        self.alpha, self.beta = constraint.validate(S) or constraint.bounds(S)  # 'auto' needs the objective's S
        self.auto = constraint.auto
        self.lu = lu_box(S, constraint.xi) if self.auto and S is not None else None  # the paper's box, for describe
        self.shape = tuple(constraint.variable.shape)
        self.W = layout.coords(constraint.variable)
        self.free = layout.complement(self.W)
        self.coords = self.W

    def project(self, z: np.ndarray, budget: int | None = None, warm: Any = None) -> tuple[np.ndarray, Any]:
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

    def project(self, z: np.ndarray, budget: int | None = None, warm: Any = None) -> tuple[np.ndarray, Any]:
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
