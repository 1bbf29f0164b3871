"""The Euclidean ball ``norm(w) <= r`` of sparse PCA (:mod:`sparsemodel.model.forms`): a convex
side set. Its projection scales w into the ball; next to ``nnz(w) <= k`` the restricted solve on a
support is the leading eigenvector of S restricted to it (:mod:`sparsemodel.lowering.spca_solve`),
exact for a fixed support."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model.constraints import BallConstraint
from ..objective.evaluator import Layout
from .base import SideSet


class Ball(SideSet):
    """``||w|| <= radius`` on the coordinates of one vector variable."""

    kind = "ball"

    def __init__(self, constraint: BallConstraint, layout: Layout):
        super().__init__(constraint, layout, None)
        self.radius = constraint.radius
        self.coords = layout.coords(constraint.variable)

    def project(self, z: np.ndarray, budget: int | None = None, warm: Any = None) -> tuple[np.ndarray, Any]:
        out = z.copy()
        nz = float(np.linalg.norm(z[self.coords]))
        if nz > self.radius:
            out[self.coords] *= self.radius / nz
        return out, None

    def contains(self, x: np.ndarray, tol: float = 1e-8) -> bool:
        return float(np.linalg.norm(x[self.coords])) <= self.radius * (1 + tol)

    def certificate(self, x: np.ndarray, g: np.ndarray, gamma: float, rtol: float = 1e-6) -> dict[str, Any]:
        return {"norm": float(np.linalg.norm(x[self.coords])), "radius": self.radius}

    def describe(self) -> str:
        return f"norm({self.variable.name}) <= {self.radius:g} (the ball of sparse PCA)"
