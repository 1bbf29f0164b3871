"""The sympy side of user functions (imported only when a model defines a ``func``).

Stable numerics for the softplus pattern, the table of functions a func body may call, the
sign tests behind the curvature check (the translation of a body to cvxpy lives in
sparsemodel.lowering.cvxpy_lower).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import sympy
from scipy.special import expit


class Softplus(sympy.Function):
    """log(1 + exp(u)), evaluated as logaddexp(0, u) so it neither overflows nor cancels."""

    is_real = True
    is_positive = True

    def fdiff(self, argindex: int = 1) -> sympy.Expr:
        return Sigmoid(self.args[0])


class Sigmoid(sympy.Function):
    """1 / (1 + exp(-u)), evaluated as scipy.special.expit."""

    is_real = True
    is_positive = True

    def fdiff(self, argindex: int = 1) -> sympy.Expr:
        s = Sigmoid(self.args[0])
        return s * (1 - s)


NUMERIC_MODULES = [{"Softplus": lambda u: np.logaddexp(0.0, u), "Sigmoid": expit}, "numpy"]


def stable_form(e: sympy.Expr) -> sympy.Expr:
    """Rewrite log(1 + exp(u)) as Softplus(u) for accurate numerics (also for large |u|)."""

    def is_softplus(t: sympy.Expr) -> bool:
        if not isinstance(t, sympy.log) or not isinstance(t.args[0], sympy.Add) or len(t.args[0].args) != 2:
            return False
        a, b = t.args[0].args
        return (a == 1 and isinstance(b, sympy.exp)) or (b == 1 and isinstance(a, sympy.exp))

    def to_softplus(t: sympy.Expr) -> sympy.Expr:
        a, b = t.args[0].args
        return Softplus((b if a == 1 else a).args[0])

    return e.replace(is_softplus, to_softplus)


GRID = np.concatenate([-np.logspace(3, -3, 400), [0.0], np.logspace(-3, 3, 400), np.linspace(-40, 40, 4001)])

SYMPY_FUNCTIONS: dict[str, Any] = {
    "exp": sympy.exp,
    "log": sympy.log,
    "sqrt": sympy.sqrt,
    "abs": sympy.Abs,
    "logistic": lambda u: sympy.log(1 + sympy.exp(u)),
    "sigmoid": lambda u: 1 / (1 + sympy.exp(-u)),
    "square": lambda u: u**2,
    "tanh": sympy.tanh,
    "sin": sympy.sin,
    "cos": sympy.cos,
}


def sign_class(e: sympy.Expr, f: Callable[[np.ndarray], np.ndarray]) -> tuple[str, str]:
    """('nonneg'|'nonpos'|'zero'|'unknown', how) for an expression in the real symbol z."""
    if e == 0:
        return "zero", "symbolic"
    if e.is_nonnegative:
        return "nonneg", "symbolic"
    if e.is_nonpositive:
        return "nonpos", "symbolic"
    with np.errstate(all="ignore"):
        v = np.asarray(f(GRID), dtype=float) * np.ones_like(GRID)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return "unknown", "numeric"
    tol = 1e-10 * max(1.0, float(np.abs(v).max()))
    if np.all(v >= -tol):
        return "nonneg", "numeric"
    if np.all(v <= tol):
        return "nonpos", "numeric"
    return "unknown", "numeric"
