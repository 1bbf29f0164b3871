"""User-defined elementwise functions: ``func phi(z) = log(1 + exp(-z))``.

The body is a sympy expression in one argument. sympy differentiates it (phi', phi'' for the
gradient and for Newton steps) and the derivatives are compiled with ``lambdify`` to NumPy.
Curvature and monotonicity, needed for the DCP check, come from the sign of phi'' and phi':
decided symbolically by sympy when it can, otherwise checked numerically on a wide grid
(the report says which).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import sympy
from scipy.special import expit

from ..errors import ModelError, Span
from .atoms import Elementwise
from .expr import AFFINE, ANYSIGN, CONCAVE, CONVEX, DECREASING, INCREASING, NONMONOTONE, NONNEG, NONPOS, UNKNOWN


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


_NUMERIC = [{"Softplus": lambda u: np.logaddexp(0.0, u), "Sigmoid": expit}, "numpy"]


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

_SYMPY_FUNCS: dict[str, Any] = {
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


def _sign_class(e: sympy.Expr, f: Callable[[np.ndarray], np.ndarray]) -> tuple[str, str]:
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


class FuncDef:
    """A user function of one argument; call it on an expression to get an elementwise atom."""

    def __init__(self, name: str, param: str, body: sympy.Expr, span: Span | None = None, text: str | None = None):
        self.name = name
        self.span = span
        self.z = sympy.Symbol(param, real=True)
        body = body.subs(sympy.Symbol(param), self.z)
        extra = body.free_symbols - {self.z}
        if extra:
            names = ", ".join(sorted(str(s) for s in extra))
            raise ModelError(
                f"func {name}({param}) uses {names}, which is neither its argument nor a known param",
                span,
                "a func has one argument; refer to params (declared before the func) for constants",
            )
        self.body = body
        self.text = text or str(body)
        d1 = sympy.diff(body, self.z)
        d2 = sympy.diff(d1, self.z)
        # the analysis (signs of phi, phi', phi'') uses the plain body, which sympy reasons about
        # best; the numerics use a stable rewrite of the same function and its derivatives
        self.exprs = (body, sympy.simplify(d1), sympy.simplify(d2))
        num = stable_form(body)
        n1 = sympy.diff(num, self.z)
        n2 = sympy.diff(n1, self.z)
        self.fn, self.d1, self.d2 = (sympy.lambdify(self.z, e, modules=_NUMERIC) for e in (num, n1, n2))
        s2, how2 = _sign_class(self.exprs[2], self.d2)
        s1, _ = _sign_class(self.exprs[1], self.d1)
        s0, _ = _sign_class(body, self.fn)
        self.curvature = {"zero": AFFINE, "nonneg": CONVEX, "nonpos": CONCAVE}.get(s2, UNKNOWN)
        self.curvature_how = how2
        self.monotone = {"nonneg": INCREASING, "nonpos": DECREASING, "zero": INCREASING}.get(s1, NONMONOTONE)
        self.out_sign = {"nonneg": NONNEG, "nonpos": NONPOS}.get(s0, ANYSIGN)
        if self.curvature == UNKNOWN:
            self.curvature_note = f"{name}({param}) = {self.text} is neither convex nor concave"
        else:
            how = "symbolically" if how2 == "symbolic" else "numerically on [-1000, 1000]"
            self.curvature_note = f"{name} is {self.curvature} ({how}: {name}'' = {self.exprs[2]})"

    @classmethod
    def parse(
        cls, name: str, param: str, text: str, consts: dict[str, float] | None = None, span: Span | None = None
    ) -> FuncDef:
        """Build from text such as ``log(1 + exp(-z))`` (constants substituted by name)."""
        ns = dict(_SYMPY_FUNCS)
        ns[param] = sympy.Symbol(param)
        for k, v in (consts or {}).items():
            ns[k] = sympy.Float(v) if not float(v).is_integer() else sympy.Integer(int(v))
        try:
            body = sympy.sympify(text.replace("^", "**"), locals=ns)
        except (sympy.SympifyError, SyntaxError, TypeError) as exc:
            raise ModelError(f"cannot read the body of func {name}: {text!r} ({exc})", span) from None
        return cls(name, param, body, span=span, text=text)

    def __call__(self, arg: Any, span: Span | None = None) -> UserFunc:
        return UserFunc(self, arg, span=span)

    def __repr__(self) -> str:
        return f"func {self.name}({self.z}) = {self.text}"


class UserFunc(Elementwise):
    """phi(arg) for a :class:`FuncDef` phi."""

    def __init__(self, fdef: FuncDef, arg: Any, span: Span | None = None):
        self.fdef = fdef
        self.name = fdef.name
        self.curvature_kind = fdef.curvature
        super().__init__(arg, span=span)

    def monotonicity(self, i: int) -> str:
        return self.fdef.monotone

    def _sign_of(self) -> str:
        return self.fdef.out_sign

    def _curvature(self) -> str:
        if self.fdef.curvature == UNKNOWN and not self.args[0].is_constant():
            return UNKNOWN
        return super()._curvature()

    def curvature_reason(self) -> str:
        if self.fdef.curvature == UNKNOWN:
            return self.fdef.curvature_note
        return super().curvature_reason()

    def fn(self, z):
        return _call(self.fdef.fn, z)

    def d1(self, z):
        return _call(self.fdef.d1, z)

    def d2(self, z):
        return _call(self.fdef.d2, z)

    def to_cvxpy(self, args):
        return sympy_to_cvxpy(self.fdef.body, self.fdef.z, args[0], self.fdef.name, self.span)


def _call(f: Callable[[np.ndarray], Any], z: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(f(z), dtype=float) * np.ones_like(z, dtype=float)


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


def func(name: str, body: str, param: str = "z", **consts: float) -> FuncDef:
    """Python counterpart of ``func phi(z) = body``: ``phi = sm.func("phi", "log(1 + exp(-z))")``."""
    return FuncDef.parse(name, param, body, consts)


__all__ = ["FuncDef", "UserFunc", "func", "sympy_to_cvxpy"]
