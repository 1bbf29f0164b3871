"""Numerical kernels: they take arrays, operators and reduced designs, never a lowered problem."""
