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


# DiracDelta appears in the second derivative of a body with a kink (abs(z): 2 DiracDelta(z)); its
# value off the kink, 0, is what the numerics use (the kink's jump is read by sign_class)
NUMERIC_MODULES = [
    {"Softplus": lambda u: np.logaddexp(0.0, u), "Sigmoid": expit, "DiracDelta": lambda u, *k: np.zeros_like(u)},
    "numpy",
]


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


def sign_class(
    e: sympy.Expr, f: Callable[[np.ndarray], np.ndarray], jumps: list[float] | None = None
) -> tuple[str, str]:
    """('nonneg'|'nonpos'|'zero'|'unknown', how) for an expression in the real symbol z.

    A second derivative with DiracDelta terms (a body with a kink: abs(z) gives 2 DiracDelta(z))
    is signed by ``f`` off the kinks (DiracDelta is 0 there) and by ``jumps``, the jumps of the
    first derivative at the kinks (:func:`kink_jumps`; None when they are not known)."""
    if e == 0:
        return "zero", "symbolic"
    if e.is_nonnegative:
        return "nonneg", "symbolic"
    if e.is_nonpositive:
        return "nonpos", "symbolic"
    if not e.has(sympy.DiracDelta):
        return _grid_sign(f)
    rest, _ = _grid_sign(f, zero=True)
    if jumps is None or rest == "unknown":
        return "unknown", "numeric"
    if all(j >= 0 for j in jumps) and rest in ("nonneg", "zero"):
        return ("nonneg" if rest == "nonneg" or any(j > 0 for j in jumps) else "zero"), "numeric"
    if all(j <= 0 for j in jumps) and rest in ("nonpos", "zero"):
        return ("nonpos" if rest == "nonpos" or any(j < 0 for j in jumps) else "zero"), "numeric"
    return "unknown", "numeric"


def kink_jumps(body: sympy.Expr, z: sympy.Symbol, d1: Callable[[np.ndarray], np.ndarray]) -> list[float] | None:
    """The jumps d1(r+) - d1(r-) of the first derivative at the kinks r of ``body`` (the real
    zeros of the arguments of its abs() calls); None when sympy cannot find those zeros."""
    jumps = []
    for a in body.atoms(sympy.Abs):
        try:
            roots = [complex(r) for r in sympy.solve(a.args[0], z)]
        except (NotImplementedError, TypeError, ValueError):
            return None
        for r in (r.real for r in roots if abs(r.imag) < 1e-12):
            h = 1e-7 * (1.0 + abs(r))
            with np.errstate(all="ignore"):
                jump = float(np.asarray(d1(np.array([r + h])))[0] - np.asarray(d1(np.array([r - h])))[0])
            if not np.isfinite(jump):
                return None
            jumps.append(jump)
    return jumps


def _grid_sign(f: Callable[[np.ndarray], np.ndarray], zero: bool = False) -> tuple[str, str]:
    """The sign of ``f`` on a grid of [-1000, 1000] (its finite values); with ``zero``, 'zero'
    when every value is 0."""
    with np.errstate(all="ignore"):
        v = np.asarray(f(GRID), dtype=float) * np.ones_like(GRID)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return "unknown", "numeric"
    if zero and not np.any(v):
        return "zero", "numeric"
    tol = 1e-10 * max(1.0, float(np.abs(v).max()))
    if np.all(v >= -tol):
        return "nonneg", "numeric"
    if np.all(v <= tol):
        return "nonpos", "numeric"
    return "unknown", "numeric"


# ----------------------------------------------------------------- the convex conjugate


class ConjugateUnknown(Exception):
    """sympy could not derive what a conjugate needs (the reason is the message)."""


CONJ_MAX_OPS = 200  # sympy's solve and limit can take very long on large bodies


def _real(v: sympy.Expr) -> float:
    """A sympy limit as a float (+-inf allowed); ConjugateUnknown when it is not a real number."""
    if v in (sympy.oo, -sympy.oo):
        return float(v)
    if v.is_real is False or v.has(sympy.zoo, sympy.nan, sympy.AccumBounds, sympy.Limit) or not v.is_number:
        raise ConjugateUnknown(f"the limit {v} is not a real number")
    return float(v)


def _edge_limit(e: sympy.Expr, z: sympy.Symbol, at: sympy.Expr, left: bool) -> sympy.Expr:
    """lim e(z) as z tends to the left (``left``) or right edge ``at`` of the domain, from inside."""
    if at in (sympy.oo, -sympy.oo):
        return sympy.limit(e, z, at)
    return sympy.limit(e, z, at, "+" if left else "-")


def interior_points(lo: float, hi: float) -> np.ndarray:
    """A few points strictly inside (lo, hi) (test points for a candidate formula)."""
    if np.isfinite(lo) and np.isfinite(hi):
        return lo + (hi - lo) * np.array([0.17, 0.5, 0.83])
    if np.isfinite(lo):
        return lo + np.array([0.3, 1.0, 3.7])
    if np.isfinite(hi):
        return hi - np.array([0.3, 1.0, 3.7])
    return np.array([-2.3, 0.4, 1.9])


def conjugate_analysis(g: sympy.Expr, z: sympy.Symbol) -> dict[str, Any]:
    """What the conjugate g*(s) = sup_z (s z - g(z)) of a convex g of one variable needs, derived
    symbolically:

    * ``domain``: g's domain (an interval: (left, right) as sympy numbers, and whether each end is
      included); ``z0`` a point inside it;
    * ``interval``: the domain of g*, (lo, hi, lo included, hi included): g' is nondecreasing, so
      g* is finite on the open range (lo, hi) of g' (its limits at the edges of g's domain), and
      at a finite end lo when lim (lo z - g(z)) at the left edge is finite (that limit is g*(lo));
      the same at hi;
    * ``ends``: {lo: g*(lo), hi: g*(hi)} for the ends included;
    * ``closed``: the sympy expression of g*(s) inside, when sympy solves s = g'(z) for z (the one
      root that checks out numerically at test points), else None;
    * ``s``: the symbol of ``closed``.

    Raises ConjugateUnknown when sympy cannot find the domain or the range of g'."""
    from sympy.calculus.util import continuous_domain

    if sympy.count_ops(g) > CONJ_MAX_OPS:
        raise ConjugateUnknown("its body is too large for the symbolic analysis")
    try:
        D = continuous_domain(g, z, sympy.S.Reals)
    except Exception as exc:  # sympy raises many kinds of errors on what it cannot decide
        raise ConjugateUnknown(f"sympy cannot find its domain ({type(exc).__name__})") from None
    if not isinstance(D, sympy.Interval) or D.measure == 0:
        raise ConjugateUnknown(f"its domain {D} is not an interval")
    left, right = D.inf, D.sup
    if left.is_finite and right.is_finite:
        z0 = float((left + right) / 2)
    elif left.is_finite:
        z0 = float(left) + 1.0
    elif right.is_finite:
        z0 = float(right) - 1.0
    else:
        z0 = 0.0
    g1 = sympy.diff(g, z)
    try:
        lo = _real(_edge_limit(g1, z, left, True))
        hi = _real(_edge_limit(g1, z, right, False))
    except ConjugateUnknown:
        raise
    except Exception as exc:
        raise ConjugateUnknown(f"sympy cannot find the range of its derivative ({type(exc).__name__})") from None
    s = sympy.Symbol("s", real=True)
    ends: dict[float, float] = {}
    lo_in = hi_in = False
    for val, edge, first in ((lo, left, True), (hi, right, False)):
        if not np.isfinite(val):
            continue
        try:
            v = _real(_edge_limit(sympy.nsimplify(val) * z - g, z, edge, first))
        except Exception:
            continue  # an end whose value is not known is left out of the domain
        if np.isfinite(v):
            ends[val] = v
            if first:
                lo_in = True
            else:
                hi_in = True
    closed = None
    if hi > lo:
        closed = _closed_form(g, g1, z, s, lo, hi, left, right)
    return {
        "domain": (left, right, not D.left_open, not D.right_open),
        "z0": z0,
        "interval": (lo, hi, lo_in, hi_in),
        "ends": ends,
        "closed": closed,
        "s": s,
    }


def _closed_form(
    g: sympy.Expr,
    g1: sympy.Expr,
    z: sympy.Symbol,
    s: sympy.Symbol,
    lo: float,
    hi: float,
    left: sympy.Expr,
    right: sympy.Expr,
) -> sympy.Expr | None:
    """s z(s) - g(z(s)) with z(s) the root of g'(z) = s that sympy finds and that checks out at
    test points inside (lo, hi) (real, inside g's domain, g'(z(s)) = s); None when there is none."""
    try:
        roots = sympy.solve(sympy.Eq(g1, s), z)
    except Exception:  # NotImplementedError for transcendental equations, and others
        return None
    if not isinstance(roots, list):
        return None
    ss = interior_points(lo, hi)
    f1 = sympy.lambdify(z, stable_form(g1), modules=NUMERIC_MODULES)
    for r in roots:
        try:
            zr = sympy.lambdify(s, r, modules=["numpy"])
            with np.errstate(all="ignore"):
                zs = np.asarray(zr(ss.astype(complex)), dtype=complex) * np.ones(len(ss))
        except Exception:
            continue
        if not np.all(np.isfinite(zs)) or np.any(np.abs(zs.imag) > 1e-9 * (1 + np.abs(zs.real))):
            continue
        zs = zs.real
        if (left.is_finite and np.any(zs <= float(left))) or (right.is_finite and np.any(zs >= float(right))):
            continue
        with np.errstate(all="ignore"):
            back = np.asarray(f1(zs), dtype=float) * np.ones(len(ss))
        if not np.allclose(back, ss, rtol=1e-8, atol=1e-10):
            continue
        e = s * r - g.subs(z, r)
        if sympy.count_ops(e) <= CONJ_MAX_OPS:
            e = sympy.simplify(e)
        # the formula as it will be evaluated (real arithmetic) against s z(s) - g(z(s))
        gn = sympy.lambdify(z, stable_form(g), modules=NUMERIC_MODULES)
        en = sympy.lambdify(s, stable_form(e), modules=NUMERIC_MODULES)
        with np.errstate(all="ignore"):
            want = ss * zs - np.asarray(gn(zs), dtype=float)
            got = np.asarray(en(ss), dtype=float) * np.ones(len(ss))
        if np.allclose(got, want, rtol=1e-8, atol=1e-10):
            return e
    return None
