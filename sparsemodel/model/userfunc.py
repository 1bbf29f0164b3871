"""User-defined elementwise functions: ``func phi(z) = log(1 + exp(-z))``.

The body is a sympy expression in one argument. sympy differentiates it (phi', phi'' for the
gradient and for Newton steps) and the derivatives are compiled with ``lambdify`` to NumPy.
Curvature and monotonicity, needed for the DCP check, come from the sign of phi'' and phi':
decided symbolically by sympy when it can, otherwise checked numerically on a wide grid
(the report says which).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ModelError, Span
from .atoms import Elementwise

if TYPE_CHECKING:
    import sympy

from .expr import AFFINE, ANYSIGN, CONCAVE, CONVEX, DECREASING, INCREASING, NONMONOTONE, NONNEG, NONPOS, UNKNOWN


class FuncDef:
    """A user function of one argument; call it on an expression to get an elementwise atom."""

    def __init__(self, name: str, param: str, body: sympy.Expr, span: Span | None = None, text: str | None = None):
        import sympy

        from .symbolic import NUMERIC_MODULES, sign_class, stable_form

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
        self.fn, self.d1, self.d2 = (sympy.lambdify(self.z, e, modules=NUMERIC_MODULES) for e in (num, n1, n2))
        s2, how2 = sign_class(self.exprs[2], self.d2)
        s1, _ = sign_class(self.exprs[1], self.d1)
        s0, _ = sign_class(body, self.fn)
        self.curvature = {"zero": AFFINE, "nonneg": CONVEX, "nonpos": CONCAVE}.get(s2, UNKNOWN)
        self.curvature_how = how2
        self.monotone = {"nonneg": INCREASING, "nonpos": DECREASING, "zero": INCREASING}.get(s1, NONMONOTONE)
        self.out_sign = {"nonneg": NONNEG, "nonpos": NONPOS}.get(s0, ANYSIGN)
        if self.curvature == UNKNOWN:
            self.curvature_note = f"{name}({param}) = {self.text} is neither convex nor concave"
        else:
            how = "symbolically" if how2 == "symbolic" else "numerically on [-1000, 1000]"
            self.curvature_note = f"{name} is {self.curvature} ({how}: {name}'' = {self.exprs[2]})"

    @property
    def curvature_sup(self) -> float | None:
        """sup phi'' over the real line, exactly (sympy's ``maximum`` of phi''), computed once; None
        when phi'' is unbounded (exp, 1/z^2, ...) or sympy cannot decide. The same number a built-in
        atom states for the same function (1/4 for log(1 + exp(-z))), so the two spellings get the
        same smoothness constants."""
        if not hasattr(self, "_curvature_sup"):
            self._curvature_sup = _sup(self.exprs[2], self.z)
        return self._curvature_sup

    @classmethod
    def parse(
        cls, name: str, param: str, text: str, consts: dict[str, float] | None = None, span: Span | None = None
    ) -> FuncDef:
        """Build from text such as ``log(1 + exp(-z))`` (constants substituted by name)."""
        import sympy

        from .symbolic import SYMPY_FUNCTIONS

        ns = dict(SYMPY_FUNCTIONS)
        ns[param] = sympy.Symbol(param)
        for k, v in (consts or {}).items():
            ns[k] = sympy.Float(v) if not float(v).is_integer() else sympy.Integer(int(v))
        try:
            body = sympy.sympify(text.replace("^", "**"), locals=ns)
        except (sympy.SympifyError, SyntaxError, TypeError) as exc:
            raise ModelError(f"cannot read the body of func {name}: {text!r} ({exc})", span) from None
        return cls(name, param, body, span=span, text=text)

    def __call__(self, arg: Any, span: Span | None = None) -> UserFunc:
        return UserFunc(arg, self, span=span)

    def __repr__(self) -> str:
        return f"func {self.name}({self.z}) = {self.text}"


def _sup(expr: sympy.Expr, z: sympy.Symbol) -> float | None:
    import sympy
    from sympy.calculus.util import maximum

    if sympy.count_ops(expr) > SUP_MAX_OPS:  # sympy's maximum can take very long on large bodies
        return None
    try:
        m = maximum(expr, z, sympy.S.Reals)
    except Exception:  # sympy raises many kinds of errors on what it cannot decide
        return None
    if m is None or not m.is_real or not m.is_finite:
        return None
    return float(m)


SUP_MAX_OPS = 200


class UserFunc(Elementwise):
    """phi(arg) for a :class:`FuncDef` phi (its one parameter: ``fdef``)."""

    def __init__(self, arg: Any, fdef: FuncDef, span: Span | None = None):
        self.fdef = fdef
        self.name = fdef.name
        self.curvature_kind = fdef.curvature
        super().__init__(arg, span=span)

    @property
    def params(self) -> dict[str, Any]:
        return {"fdef": self.fdef}

    @property
    def curvature_sup(self) -> float | None:  # type: ignore[override]
        return self.fdef.curvature_sup

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


def _call(f: Callable[[np.ndarray], Any], z: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(f(z), dtype=float) * np.ones_like(z, dtype=float)


def func(name: str, body: str, param: str = "z", **consts: float) -> FuncDef:
    """Python counterpart of ``func phi(z) = body``: ``phi = sm.func("phi", "log(1 + exp(-z))")``."""
    return FuncDef.parse(name, param, body, consts)


__all__ = ["FuncDef", "UserFunc", "func"]
