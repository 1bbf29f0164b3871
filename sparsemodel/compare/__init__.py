"""Reports: run several solvers on one problem; tables, plots, files."""

from .runner import COLUMNS, Comparison, OutputError, compare, protected_paths

__all__ = ["COLUMNS", "Comparison", "OutputError", "compare", "protected_paths"]
