"""Workflows over a problem: solve, compare solvers, paths over the bound, choosing k; tables,
plots and files. What ``Problem`` and the command line call."""
