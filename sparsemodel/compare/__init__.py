"""Reports: run several solvers on one problem; tables, plots, files."""
