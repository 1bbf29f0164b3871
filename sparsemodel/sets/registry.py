"""From a model constraint to its set: the one registration point of a constraint kind."""

from __future__ import annotations

import numpy as np

from ..errors import ConstraintError
from ..model.constraints import (
    BoxConstraint,
    Constraint,
    EigBoxConstraint,
    NnzConstraint,
    RankConstraint,
)
from ..objective.evaluator import Layout
from .base import ConstraintSet
from .lowrank import LowRank
from .side import Box, EigBox
from .sparsity import CoordinateSparsity


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
