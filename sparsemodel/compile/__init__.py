"""Lowerings of the model: NumPy evaluator, restricted solves, smoothness estimates, cvxpy."""

from .evaluator import Evaluator, Layout
from .lowered import LoweredProblem, SparsitySpec

__all__ = ["Evaluator", "Layout", "LoweredProblem", "SparsitySpec"]
