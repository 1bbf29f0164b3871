"""The sympy side of user functions (imported only when a model defines a ``func``).

Stable numerics for the softplus pattern, the table of functions a func body may call, the
sign tests behind the curvature check, and the translation of a body to cvxpy atoms.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import sympy
from scipy.special import expit

from ..errors import ModelError, Span


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


def sympy_to_cvxpy(e: sympy.Expr, z: sympy.Symbol, arg: Any, name: str, span: Span | None) -> Any:
    """Translate a sympy body to cvxpy atoms (recognizing log(1 + exp(u)) as logistic(u))."""
    import cvxpy as cp

    def fail() -> ModelError:
        return ModelError(
            f"func {name} has no cvxpy form that cvxpy accepts as convex, so the cvxpy reference path is unavailable for it",
            span,
            "use the NumPy restricted solves (restricted='auto')",
        )

    def go(t: sympy.Expr) -> Any:
        if t == z:
            return arg
        if t.is_number:
            return float(t)
        if isinstance(t, sympy.Add):
            out = 0
            for a in t.args:
                out = out + go(a)
            return out
        if isinstance(t, sympy.Mul):
            out = 1
            for a in t.args:
                v = go(a)
                out = (
                    v * out
                    if isinstance(v, float) or isinstance(out, float) or isinstance(out, int)
                    else cp.multiply(out, v)
                )
            return out
        if isinstance(t, sympy.Pow):
            b, p = t.args
            if p == 2:
                return cp.square(go(b))
            if p.is_number:
                return cp.power(go(b), float(p))
            raise fail()
        if isinstance(t, sympy.exp):
            return cp.exp(go(t.args[0]))
        if isinstance(t, sympy.log):
            inner = t.args[0]
            if isinstance(inner, sympy.Add) and len(inner.args) == 2:
                a, b = inner.args
                if a == 1 and isinstance(b, sympy.exp):
                    return cp.logistic(go(b.args[0]))
                if b == 1 and isinstance(a, sympy.exp):
                    return cp.logistic(go(a.args[0]))
            return cp.log(go(inner))
        if isinstance(t, sympy.Abs):
            return cp.abs(go(t.args[0]))
        raise fail()

    out = go(e)
    if not hasattr(out, "is_dcp") or not (out.is_convex() or out.is_concave()):
        raise fail()
    return out
