"""User-defined elementwise functions: ``func phi(z) = log(1 + exp(-z))``.

The body is a sympy expression in one argument. sympy differentiates it (phi', phi'' for the
gradient and for Newton steps) and the derivatives are compiled with ``lambdify`` to NumPy.
Curvature and monotonicity, needed for the DCP check, come from the sign of phi'' and phi':
decided symbolically by sympy when it can, otherwise checked numerically on a wide grid
(the report says which).

A func is a loss atom like the built-in ones and states the same facts (docs/atoms.md): the
curvature bound sup phi'' (exact, by sympy, when finite) and the convex conjugate of sigma phi
(sigma = +1 convex, -1 concave): in closed form when sympy solves s = phi'(z) for z, else
numerically (a safeguarded Newton-bisection solve of phi'(z) = s per entry, vectorised), on the
domain read from the limits of phi' at the edges of phi's domain. A func that is neither convex
nor concave, or whose domain or range of phi' sympy cannot find, raises
:class:`~sparsemodel.model.atoms.NoConjugate` with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ModelError, Span
from .atoms import Elementwise, NoConjugate

if TYPE_CHECKING:
    import sympy

from .dcp import AFFINE, ANYSIGN, CONCAVE, CONVEX, DECREASING, INCREASING, NONMONOTONE, NONNEG, NONPOS, UNKNOWN


class FuncDef:
    """A user function of one argument; call it on an expression to get an elementwise atom."""

    def __init__(self, name: str, param: str, body: sympy.Expr, span: Span | None = None, text: str | None = None):
        import sympy

        from .symbolic import NUMERIC_MODULES, kink_jumps, sign_class, stable_form

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
        s2, how2 = sign_class(self.exprs[2], self.d2, kink_jumps(body, self.z, self.d1))
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

    # ------------------------------------------------------------------ the convex conjugate
    @property
    def convex_sign(self) -> int:
        """sigma with sigma * phi convex: +1 (convex or affine), -1 (concave), 0 (neither)."""
        return {CONVEX: 1, AFFINE: 1, CONCAVE: -1}.get(self.curvature, 0)

    def _conjugate_facts(self) -> dict[str, Any]:
        """The analysis of :func:`~sparsemodel.model.symbolic.conjugate_analysis` for sigma phi,
        with its numerical pieces; computed once (sympy's solve and limits take a moment)."""
        if not hasattr(self, "_conj"):
            self._conj = self._analyse_conjugate()
        if isinstance(self._conj, NoConjugate):
            raise self._conj
        return self._conj

    def _analyse_conjugate(self) -> dict[str, Any] | NoConjugate:
        import sympy

        from .symbolic import NUMERIC_MODULES, ConjugateUnknown, conjugate_analysis, stable_form

        sigma = self.convex_sign
        what = f"func {self.name}({self.z}) = {self.text}"
        hint = "a conjugate exists for convex (or concave) funcs whose domain and range of phi' sympy can find"
        if sigma == 0:
            return NoConjugate(f"no convex conjugate for {what}: it is neither convex nor concave", self.span, hint)
        try:
            facts = conjugate_analysis(sigma * self.body, self.z)
        except ConjugateUnknown as exc:
            return NoConjugate(f"no convex conjugate for {what}: {exc}", self.span, hint)
        closed = facts["closed"]
        facts["sigma"] = sigma
        lo, hi = facts["interval"][:2]
        facts["how"] = "closed form" if closed is not None or lo == hi else "numerical"  # lo = hi: affine
        facts["closed_fn"] = (
            sympy.lambdify(facts["s"], stable_form(closed), modules=NUMERIC_MODULES) if closed is not None else None
        )
        return facts

    @property
    def conjugate_interval(self) -> tuple[float, float, bool, bool]:
        """The domain of (sigma phi)*: (lo, hi, lo included, hi included)."""
        return self._conjugate_facts()["interval"]

    @property
    def conjugate_how(self) -> str:
        """'closed form' (sympy solved s = phi'(z)) or 'numerical'."""
        return self._conjugate_facts()["how"]

    @property
    def conjugate_expr(self) -> sympy.Expr | None:
        """The closed form of (sigma phi)*(s) in the symbol s, or None (numerical)."""
        return self._conjugate_facts()["closed"]

    def conjugate_values(self, s: np.ndarray, numerical: bool = False) -> np.ndarray:
        """(sigma phi)*(s) for s inside its domain (an included end takes its limit value):
        closed form when there is one (unless ``numerical``), else :meth:`numerical_conjugate`."""
        facts = self._conjugate_facts()
        s = np.asarray(s, dtype=float)
        lo, hi, _, _ = facts["interval"]
        out = np.empty(s.shape)
        inner = (s > lo) & (s < hi)
        for end, v in facts["ends"].items():
            out[s == end] = v
        if inner.any():
            f = facts["closed_fn"]
            if f is not None and not numerical:
                with np.errstate(all="ignore"):
                    out[inner] = np.asarray(f(s[inner]), dtype=float) * np.ones(int(inner.sum()))
            else:
                out[inner] = self.numerical_conjugate(s[inner])
        return out

    def numerical_conjugate(self, s: np.ndarray) -> np.ndarray:
        """(sigma phi)*(s) = s z - sigma phi(z) at the root z of sigma phi'(z) = s, for s strictly
        inside the range of sigma phi' (vectorised: one safeguarded Newton-bisection per entry)."""
        facts = self._conjugate_facts()
        sigma = facts["sigma"]
        left, right = (float(e) for e in facts["domain"][:2])
        z = invert_increasing(
            lambda u: sigma * _call(self.d1, u),
            lambda u: sigma * _call(self.d2, u),
            np.asarray(s, dtype=float),
            left,
            right,
            facts["z0"],
        )
        return s * z - sigma * _call(self.fn, z)

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

    @property
    def conjugate_interval(self) -> tuple[float, float, bool, bool]:  # type: ignore[override]
        return self.fdef.conjugate_interval

    def _conjugate(self, s: np.ndarray) -> np.ndarray:
        return self.fdef.conjugate_values(s)

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


def invert_increasing(
    f1: Callable[[np.ndarray], np.ndarray],
    f2: Callable[[np.ndarray], np.ndarray],
    s: np.ndarray,
    left: float,
    right: float,
    z0: float,
    iters: int = 400,
) -> np.ndarray:
    """z with f1(z) = s entrywise, for a nondecreasing f1 on the open interval (left, right) and
    each s strictly inside f1's range there (f2 = f1', used for Newton steps). A bracket [a, b]
    around each root is grown from z0 (doubling steps towards an infinite edge, halving the
    distance to a finite one), then shrunk by Newton steps that stay inside it, every fourth step a
    bisection (so it at least halves every four steps)."""
    s = np.asarray(s, dtype=float)
    a = np.full(s.shape, float(z0))
    b = a.copy()
    step = np.ones(s.shape)

    def out_left(u: np.ndarray) -> np.ndarray:  # a point further left: doubling, or halfway to the edge
        return u - step if not np.isfinite(left) else np.maximum(left + (u - left) / 2, u - step)

    def out_right(u: np.ndarray) -> np.ndarray:
        return u + step if not np.isfinite(right) else np.minimum(right - (right - u) / 2, u + step)

    for _ in range(2200):  # 1e308 by doublings, or the edge to the last bit by halvings
        fa, fb = f1(a), f1(b)
        move_a, move_b = ~(fa <= s), ~(fb >= s)  # (a nan value, an overflow, keeps moving)
        if not (move_a.any() or move_b.any()):
            break
        a = np.where(move_a, out_left(a), a)
        b = np.where(move_b, out_right(b), b)
        step = step * 2.0
    x = 0.5 * (a + b)
    for it in range(iters):
        fx = f1(x) - s
        b = np.where(fx > 0, x, b)
        a = np.where(fx < 0, x, a)
        width = b - a
        done = (fx == 0) | (width <= 4 * np.finfo(float).eps * np.maximum(np.abs(a), np.abs(b)))
        if done.all():
            break
        with np.errstate(all="ignore"):
            xn = x - fx / f2(x)
        newton = np.isfinite(xn) & (xn > a) & (xn < b) & (it % 4 != 3)
        x = np.where(done, x, np.where(newton, xn, 0.5 * (a + b)))
    return x


def func(name: str, body: str, param: str = "z", **consts: float) -> FuncDef:
    """Python counterpart of ``func phi(z) = body``: ``phi = sm.func("phi", "log(1 + exp(-z))")``."""
    return FuncDef.parse(name, param, body, consts)


__all__ = ["FuncDef", "UserFunc", "func", "invert_increasing"]
