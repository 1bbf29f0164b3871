"""Reports: run several solvers on one problem; tables, plots, files."""

from ..errors import OutputError
from ..outputs import protected_paths
from .runner import COLUMNS, Comparison, compare

__all__ = ["COLUMNS", "Comparison", "OutputError", "compare", "protected_paths"]
