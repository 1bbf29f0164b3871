"""Lowerings of the model: evaluator, design, oracle, constraint sets, kernels, cvxpy."""

from .evaluator import Evaluator, Layout
from .lowered import LoweredProblem
from .sets import ConstraintSet, CoordinateSparsity, EigBox, LowRank

__all__ = ["ConstraintSet", "CoordinateSparsity", "EigBox", "Evaluator", "Layout", "LowRank", "LoweredProblem"]
