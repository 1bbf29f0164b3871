"""Atoms: the functions a model may use, each with value, gradient and DCP properties.

An atom is one class: ``forward`` computes its value, ``vjp`` its gradient (reverse mode),
``curvature_kind`` / ``monotonicity`` / ``_sign_of`` its DCP properties, ``params`` the constants
it was built with beyond its arguments (huber's ``M``, a reduction's ``axis``, a user func's
definition): :meth:`Atom.rebuild` copies an atom onto new arguments and :meth:`Atom.loss_key`
compares two atoms as functions through them, with no special case per atom. Lowerings live below
the model: the cvxpy counterpart of every atom is one entry of the table in
:mod:`sparsemodel.lowering.cvxpy_lower`.

Loss facts. An atom that can be the loss phi of a composite objective ``c * sum_i w_i phi(z_i)``
(every :class:`Elementwise` atom, and :class:`logsumexp` along the rows of a matrix, the softmax
loss) states every fact the lowering and the solvers read about it, and nothing outside the model
layer restates one (docs/atoms.md):

* ``loss_form`` -- "elementwise", "rowwise" or None (how the atom is a loss, what the recognizer
  of the composite form reads);
* ``derivs(z, order)`` -- phi and its derivatives (``d1``/``d2`` for elementwise atoms);
  ``hessian_apply(z, U)`` -- the loss Hessian at z applied to U (``phi''(z) * U`` entrywise; per
  row ``diag(p) - p p'`` for the softmax, :func:`softmax_hessian_apply`, the one place it is
  written);
* ``curvature_sup`` -- sup phi'' over phi's domain (None when unbounded or unknown): the global
  curvature bound of smoothness constants; ``quadratic`` -- phi(z) = z^2 exactly (the
  least-squares kernels apply);
* ``params`` -- the constants above;
* the convex conjugate: ``conjugate(s)`` (vectorised; +inf outside the domain) and
  ``conjugate_domain(s)`` of the convex one of +-phi (``convex_sign`` says which: +1 for a convex
  atom, -1 for a concave one such as ``log``, whose term enters an objective as ``-c log z``);
  ``conjugate_interval`` the domain of an elementwise conjugate as (lo, hi, lo included, hi
  included). A term ``a * phi(z)`` with a = c w sigma > 0 has the conjugate
  ``a * phi*(s / a)`` (:meth:`sparsemodel.objective.terms.Term.conjugate`). An atom without one
  raises :class:`NoConjugate` with the reason.

Data functions (``cov``, ``rows``, ``cols``, ``standardize`` ...) are not atoms: they run once on
data when the model is built and return data."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import ModelError, ShapeError, Span
from .dcp import (
    AFFINE,
    ANYSIGN,
    CONCAVE,
    CONSTANT,
    CONVEX,
    DECREASING,
    INCREASING,
    NONMONOTONE,
    NONNEG,
    NONPOS,
    UNKNOWN,
)
from .expr import Expr, as_expr, dense, fmt_shape


def expit(z: Any) -> Any:
    """The logistic sigmoid 1 / (1 + exp(-z)) without overflow (numpy only: importing the model
    layer does not load scipy.special)."""
    z = np.asarray(z, dtype=float)
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _lse(z: np.ndarray, axis: Any = None) -> Any:
    """log(sum(exp(z))) along ``axis``, shifted by the maximum (no overflow)."""
    m = np.max(z, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(z - m), axis=axis, keepdims=True)) + m
    return np.squeeze(out, axis=axis) if axis is not None else out.reshape(())


class Atom(Expr):
    """A function application ``name(args...)``; subclasses define the numerics and DCP facts."""

    name = "atom"
    curvature_kind = AFFINE
    precedence = 100

    def __init__(self, *args: Any, span: Span | None = None):
        exprs = [as_expr(a) for a in args]
        super().__init__(exprs, self._shape([a.shape for a in exprs], exprs, span), span)

    # --- to define in subclasses
    def _shape(self, shapes: list[tuple[int, ...]], args: list[Expr], span: Span | None) -> tuple[int, ...]:
        return ()

    def monotonicity(self, i: int) -> str:
        return INCREASING

    def extra_repr(self) -> str:
        return ""

    # --- parameters: what an atom is built with beyond its arguments
    @property
    def params(self) -> dict[str, Any]:
        """The keyword arguments that, with the arguments, rebuild this atom (hashable values):
        ``type(a)(*args, **a.params)`` is the same function of other arguments."""
        return {}

    def rebuild(self, args: list[Any], span: Span | None = None) -> Atom:
        """The same atom (same parameters) applied to other arguments."""
        return type(self)(*args, span=span if span is not None else self.span, **self.params)

    @property
    def loss_form(self) -> str | None:
        """How this atom can be the loss of a composite objective c * sum_i w_i phi(z_i):
        "elementwise" (one phi per entry of its argument), "rowwise" (one per row of a matrix
        argument), or None (not a loss)."""
        return None

    def loss_key(self) -> tuple:
        """What makes two atoms the same function of their arguments: the class and the parameters
        (two huber atoms with different M differ; the arguments do not enter)."""
        return (type(self), tuple(sorted(self.params.items())))

    # --- DCP composition rule
    def _curvature(self) -> str:
        if all(a.is_constant() for a in self.args):
            return CONSTANT
        conv = self.curvature_kind in (CONVEX, AFFINE)
        conc = self.curvature_kind in (CONCAVE, AFFINE)
        for i, a in enumerate(self.args):
            c = a.curvature
            if c in (CONSTANT, AFFINE):
                continue
            m = self.monotonicity(i)
            conv = conv and ((m == INCREASING and c == CONVEX) or (m == DECREASING and c == CONCAVE))
            conc = conc and ((m == INCREASING and c == CONCAVE) or (m == DECREASING and c == CONVEX))
        if conv and conc:
            return AFFINE
        if conv:
            return CONVEX
        if conc:
            return CONCAVE
        return UNKNOWN

    def curvature_reason(self) -> str:
        for i, a in enumerate(self.args):
            if a.curvature in (CONSTANT, AFFINE):
                continue
            m = self.monotonicity(i)
            return (
                f"{self.name} is {self.curvature_kind} and {m} in its argument, but its argument {a} is {a.curvature}"
            )
        return f"{self} is {self.curvature}"

    def _render(self) -> str:
        inner = ", ".join(str(a) for a in self.args)
        extra = self.extra_repr()
        return f"{self.name}({inner}{', ' + extra if extra else ''})"


class NoConjugate(ModelError):
    """The loss has no convex conjugate the package can evaluate (not convex, or not known)."""


class Elementwise(Atom):
    """f applied to each entry, and a loss of a composite objective (the module docstring lists the
    loss facts). ``d1`` and ``d2`` are f' and f''. ``curvature_sup`` is sup f'' over f's domain (a
    global curvature bound, used for smoothness constants valid everywhere), or None when f'' is
    unbounded or the bound is not known; a user ``func`` computes its own.

    The conjugate: a subclass gives ``conjugate_interval`` (the domain of phi*, an interval of the
    real line: (lo, hi, lo included, hi included)) and ``_conjugate(s)`` (its values inside);
    :meth:`conjugate` and :meth:`conjugate_domain` follow from them."""

    curvature_sup: float | None = None
    quadratic = False  # phi(z) = z^2 exactly
    conjugate_interval: tuple[float, float, bool, bool] | None = None
    loss_form = "elementwise"

    def _shape(self, shapes, args, span):
        return shapes[0]

    def fn(self, z: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def d1(self, z: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def d2(self, z: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def derivs(self, z: np.ndarray, order: int = 2) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """f(z) and, up to ``order``, f'(z) and f''(z) (None beyond it), computed together."""
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return (
                self.fn(z),
                self.d1(z) if order >= 1 else None,
                self.d2(z) if order >= 2 else None,
            )

    def hessian_apply(self, z: np.ndarray, U: np.ndarray, d2: np.ndarray | None = None) -> np.ndarray:
        """The Hessian of sum_i phi(z_i), diag(phi''(z)), applied to U (shape of z, or of z with a
        trailing axis of columns); ``d2``: phi''(z) when already computed."""
        if d2 is None:
            d2 = self.derivs(z, 2)[2]
        return d2[..., None] * U if np.ndim(U) > np.ndim(d2) else d2 * U

    def forward(self, vals):
        z = dense(vals[0])
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return self.fn(z)

    def vjp(self, g, vals, out, needs):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return [g * self.d1(dense(vals[0]))]

    # --- the convex conjugate
    @property
    def convex_sign(self) -> int:
        """sigma with sigma * phi convex: +1 (convex or affine), -1 (concave), 0 (neither)."""
        return {CONVEX: 1, AFFINE: 1, CONCAVE: -1}.get(self.curvature_kind, 0)

    def _no_conjugate(self) -> NoConjugate:
        return NoConjugate(
            f"no convex conjugate is known for the loss {self.name}",
            self.span,
            "conjugates exist for convex losses with a closed form (the built-in atoms) and for convex user funcs",
        )

    def conjugate_domain(self, s: Any) -> np.ndarray:
        """Where (sigma phi)*(s) is finite, entrywise."""
        iv = self.conjugate_interval
        if iv is None:
            raise self._no_conjugate()
        lo, hi, lo_in, hi_in = iv
        s = np.asarray(s, dtype=float)
        return ((s >= lo) if lo_in else (s > lo)) & ((s <= hi) if hi_in else (s < hi))

    def conjugate(self, s: Any) -> np.ndarray:
        """(sigma phi)*(s) = sup_z (s z - sigma phi(z)) entrywise, +inf outside the domain."""
        s = np.asarray(s, dtype=float)
        inside = self.conjugate_domain(s)
        out = np.full(s.shape, np.inf)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            out[inside] = self._conjugate(s[inside])
        return out

    def _conjugate(self, s: np.ndarray) -> np.ndarray:
        raise self._no_conjugate()


def _xlogx(s: np.ndarray) -> np.ndarray:
    """s log s with 0 log 0 = 0 (s >= 0)."""
    return np.where(s > 0, s * np.log(np.where(s > 0, s, 1.0)), 0.0)


class square(Elementwise):
    name = "square"
    curvature_kind = CONVEX
    curvature_sup = 2.0
    quadratic = True
    conjugate_interval = (-np.inf, np.inf, False, False)

    def monotonicity(self, i):
        s = self.args[0].sign
        return INCREASING if s == NONNEG else DECREASING if s == NONPOS else NONMONOTONE

    def _sign_of(self):
        return NONNEG

    def fn(self, z):
        return z * z

    def d1(self, z):
        return 2.0 * z

    def d2(self, z):
        return np.full_like(z, 2.0, dtype=float)

    def _conjugate(self, s):
        return 0.25 * s * s


class exp(Elementwise):
    name = "exp"
    curvature_kind = CONVEX
    conjugate_interval = (0.0, np.inf, True, False)  # the Poisson loss: s log s - s, 0 at s = 0

    def _sign_of(self):
        return NONNEG

    def fn(self, z):
        return np.exp(z)

    d1 = fn
    d2 = fn

    def _conjugate(self, s):
        return _xlogx(s) - s


class log(Elementwise):
    """log z, concave: its loss is -log z (a Gamma log-likelihood's), whose conjugate is
    -1 - log(-s) on s < 0."""

    name = "log"
    curvature_kind = CONCAVE
    curvature_sup = 0.0  # sup of -1/z^2 over z > 0 (not attained); its loss -log z has no bound
    conjugate_interval = (-np.inf, 0.0, False, False)

    def fn(self, z):
        # -inf outside the domain so that minimizing -log(.) sees +inf and line searches back off
        return np.where(z > 0, np.log(np.where(z > 0, z, 1.0)), -np.inf)

    def d1(self, z):
        return 1.0 / z

    def d2(self, z):
        return -1.0 / (z * z)

    def _conjugate(self, s):
        return -1.0 - np.log(-s)


class logistic(Elementwise):
    """log(1 + exp(z)), computed without overflow."""

    name = "logistic"
    curvature_kind = CONVEX
    curvature_sup = 0.25  # at z = 0
    conjugate_interval = (0.0, 1.0, True, True)  # s log s + (1 - s) log(1 - s), 0 at both ends

    def _sign_of(self):
        return NONNEG

    def fn(self, z):
        return np.logaddexp(0.0, z)

    def d1(self, z):
        return expit(z)

    def d2(self, z):
        s = expit(z)
        return s * (1.0 - s)

    def derivs(self, z, order=2):
        # one exp and one log1p for all three (they dominate Newton steps on logistic losses)
        e = np.exp(-np.abs(z))
        v = np.maximum(z, 0.0) + np.log1p(e)
        if order < 1:
            return v, None, None
        inv = 1.0 / (1.0 + e)
        d1 = np.where(z >= 0, inv, e * inv)
        return v, d1, (e * inv * inv if order >= 2 else None)

    def _conjugate(self, s):
        return _xlogx(s) + _xlogx(1.0 - s)


class huber(Elementwise):
    """x^2 for |x| <= M, 2M|x| - M^2 otherwise (cvxpy's convention)."""

    name = "huber"
    curvature_kind = CONVEX
    curvature_sup = 2.0  # on |x| <= M

    def __init__(self, x: Any, M: Any = 1.0, span: Span | None = None):
        m = as_expr(M)
        if not m.is_constant() or m.shape != ():
            raise ModelError(f"huber's threshold M must be a positive scalar constant; got {m}", span)
        self.M = float(m.constant_value())
        if self.M <= 0:
            raise ModelError(f"huber's threshold M must be positive; got {self.M}", span)
        super().__init__(x, span=span)

    @property
    def params(self):
        return {"M": self.M}

    @property
    def conjugate_interval(self):  # phi' runs over [-2M, 2M]
        return (-2.0 * self.M, 2.0 * self.M, True, True)

    def extra_repr(self):
        return f"M={self.M:g}"

    def monotonicity(self, i):
        s = self.args[0].sign
        return INCREASING if s == NONNEG else DECREASING if s == NONPOS else NONMONOTONE

    def _sign_of(self):
        return NONNEG

    def fn(self, z):
        a = np.abs(z)
        return np.where(a <= self.M, z * z, 2 * self.M * a - self.M**2)

    def d1(self, z):
        return np.where(np.abs(z) <= self.M, 2 * z, 2 * self.M * np.sign(z))

    def d2(self, z):
        return np.where(np.abs(z) <= self.M, 2.0, 0.0)

    def _conjugate(self, s):
        return 0.25 * s * s


def _axis_shape(shape: tuple[int, ...], axis: int | None, name: str, arg: Expr, span: Span | None) -> tuple[int, ...]:
    if axis is None:
        return ()
    if not -len(shape) <= axis < len(shape):
        raise ShapeError(f"{name}(..., axis={axis}) on {arg} of shape {fmt_shape(shape)}", span, "axis out of range")
    ax = axis % len(shape)
    return shape[:ax] + shape[ax + 1 :]


def _expand(g: np.ndarray, shape: tuple[int, ...], axis: int | None) -> np.ndarray:
    if axis is None:
        return np.broadcast_to(g, shape)
    return np.broadcast_to(np.expand_dims(g, axis % len(shape)), shape)


class _Reduction(Atom):
    def __init__(self, x: Any, axis: int | None = None, span: Span | None = None):
        self.axis = None if axis is None else int(axis)
        super().__init__(x, span=span)

    def _shape(self, shapes, args, span):
        return _axis_shape(shapes[0], self.axis, self.name, args[0], span)

    @property
    def params(self):
        return {"axis": self.axis}

    def extra_repr(self):
        return "" if self.axis is None else f"axis={self.axis}"


class sum(_Reduction):  # noqa: A001 - the model language's name
    name = "sum"
    curvature_kind = AFFINE

    def _sign_of(self):
        return self.args[0].sign

    def forward(self, vals):
        v = vals[0]
        if sp.issparse(v):
            v = v.toarray()
        r = np.sum(v, axis=self.axis)
        return float(r) if np.ndim(r) == 0 else r

    def vjp(self, g, vals, out, needs):
        return [np.array(_expand(np.asarray(g, dtype=float), self.args[0].shape, self.axis))]


class mean(sum):
    name = "mean"

    def _count(self) -> int:
        shape = self.args[0].shape
        return int(np.prod(shape)) if self.axis is None else shape[self.axis]

    def forward(self, vals):
        return super().forward(vals) / self._count()

    def vjp(self, g, vals, out, needs):
        return [np.array(_expand(np.asarray(g, dtype=float) / self._count(), self.args[0].shape, self.axis))]


class sum_squares(Atom):
    name = "sum_squares"
    curvature_kind = CONVEX

    def monotonicity(self, i):
        s = self.args[0].sign
        return INCREASING if s == NONNEG else DECREASING if s == NONPOS else NONMONOTONE

    def _sign_of(self):
        return NONNEG

    def forward(self, vals):
        z = dense(vals[0])
        return float(np.dot(z.ravel(), z.ravel()))

    def vjp(self, g, vals, out, needs):
        return [2.0 * g * dense(vals[0])]


def softmax_hessian_apply(P: np.ndarray, U: np.ndarray) -> np.ndarray:
    """The Hessian of logsumexp at each row, diag(p) - p p' (p = softmax of the row, the rows of
    ``P`` (..., m)), applied to ``U`` (..., m) or (..., m, q): the one place this Hessian is
    written (Newton steps, Hessian products and diagonals, the swap model all call it)."""
    if U.ndim == P.ndim:
        PU = P * U
        return PU - P * PU.sum(axis=-1, keepdims=True)
    PU = P[..., None] * U
    return PU - P[..., None] * PU.sum(axis=-2, keepdims=True)


class logsumexp(_Reduction):
    """log sum exp over an axis (all entries with none). As a loss it is row-wise: one value per
    row of an (n, m) matrix (the softmax loss, ``logsumexp(Z, axis=1)``); its loss facts act on the
    last axis of their arrays (m entries per row)."""

    name = "logsumexp"
    curvature_kind = CONVEX
    curvature_sup = 0.5  # ||diag(p) - p p'|| <= 1/2 for every probability vector p
    quadratic = False
    convex_sign = 1

    @property
    def loss_form(self) -> str | None:
        """Row-wise along the last axis of a matrix (``logsumexp(Z, axis=1)``)."""
        a = self.args[0]
        return "rowwise" if self.axis is not None and a.ndim == 2 and self.axis % 2 == 1 else None

    def derivs(self, Z: np.ndarray, order: int = 1) -> tuple[np.ndarray, np.ndarray | None, None]:
        """(logsumexp of each row of Z (..., m), its gradient: the softmax probabilities (..., m),
        None): the Hessian is not formed (:meth:`hessian_apply`)."""
        zmax = Z.max(axis=-1, keepdims=True)
        E = np.exp(Z - zmax)
        s = E.sum(axis=-1, keepdims=True)
        v = (np.log(s) + zmax)[..., 0]
        return v, (E / s if order >= 1 else None), None

    def probs(self, Z: np.ndarray) -> np.ndarray:
        """The softmax of each row of Z (the gradient of its logsumexp)."""
        E = np.exp(Z - Z.max(axis=-1, keepdims=True))
        return E / E.sum(axis=-1, keepdims=True)

    def hessian_apply(self, Z: np.ndarray, U: np.ndarray) -> np.ndarray:
        """The Hessian of each row's logsumexp at Z (..., m) applied to U ((..., m) or (..., m, q))."""
        return softmax_hessian_apply(self.probs(Z), U)

    SIMPLEX_TOL = 1e-12  # |sum(s) - 1| allowed on the simplex, times m

    def conjugate_domain(self, S: Any) -> np.ndarray:
        """Rows of S (..., m) on the probability simplex (nonnegative, summing to 1)."""
        S = np.asarray(S, dtype=float)
        m = S.shape[-1]
        return np.all(S >= 0, axis=-1) & (np.abs(S.sum(axis=-1) - 1.0) <= self.SIMPLEX_TOL * m)

    def conjugate(self, S: Any) -> np.ndarray:
        """The conjugate of each row's logsumexp: sum_j s_j log s_j (the negative entropy) on the
        simplex, +inf off it; one value per row of S (..., m)."""
        S = np.asarray(S, dtype=float)
        inside = self.conjugate_domain(S)
        v = _xlogx(np.maximum(S, 0.0)).sum(axis=-1)
        return np.where(inside, v, np.inf)

    def forward(self, vals):
        r = _lse(dense(vals[0]), axis=self.axis)
        return float(r) if np.ndim(r) == 0 else r

    def vjp(self, g, vals, out, needs):
        z = dense(vals[0])
        lse = _expand(np.asarray(out, dtype=float), z.shape, self.axis)
        return [np.exp(z - lse) * _expand(np.asarray(g, dtype=float), z.shape, self.axis)]


def _square_matrix(shapes, args, span, name):
    s = shapes[0]
    if len(s) != 2 or s[0] != s[1]:
        raise ShapeError(f"{name} needs a square matrix; {args[0]} has shape {fmt_shape(s)}", span)
    return ()


class trace(Atom):
    name = "trace"
    curvature_kind = AFFINE

    def _shape(self, shapes, args, span):
        return _square_matrix(shapes, args, span, self.name)

    def forward(self, vals):
        return float(dense(vals[0]).trace())

    def vjp(self, g, vals, out, needs):
        return [g * np.eye(self.args[0].shape[0])]


class logdet(Atom):
    """log det X for X symmetric positive definite (of the symmetric part (X + X')/2 in general);
    -inf outside the domain."""

    name = "logdet"
    curvature_kind = CONCAVE

    def _shape(self, shapes, args, span):
        return _square_matrix(shapes, args, span, self.name)

    def forward(self, vals):
        X = dense(vals[0])
        try:
            L = np.linalg.cholesky((X + X.T) / 2)
        except np.linalg.LinAlgError:
            return -np.inf
        return float(2.0 * np.log(np.diag(L)).sum())

    def vjp(self, g, vals, out, needs):
        # value and gradient are those of log det(sym(X)), sym(X) = (X + X')/2: identical for the
        # symmetric matrices this atom is meant for, and consistent for any other input
        X = dense(vals[0])
        try:
            inv = np.linalg.inv((X + X.T) / 2)
        except np.linalg.LinAlgError:
            inv = np.full_like(X, np.nan)
        return [g * (inv + inv.T) / 2]


class quad_form(Atom):
    """x' P x with P a constant matrix; convex when P is positive semidefinite."""

    name = "quad_form"

    def __init__(self, x: Any, P: Any, span: Span | None = None):
        super().__init__(x, P, span=span)
        Pe = self.args[1]
        if not Pe.is_constant():
            raise ModelError(f"quad_form's matrix must be constant; {Pe} depends on a variable", span)
        Pv = dense(Pe.constant_value())
        w = np.linalg.eigvalsh((Pv + Pv.T) / 2)
        tol = 1e-10 * max(1.0, float(np.abs(w).max()))
        self.curvature_kind = CONVEX if w.min() >= -tol else CONCAVE if w.max() <= tol else UNKNOWN

    def _shape(self, shapes, args, span):
        x, P = shapes
        if len(x) != 1 or P != (x[0], x[0]):
            raise ShapeError(
                f"quad_form(x, P) needs a vector x of length n and an (n,n) matrix P; got {fmt_shape(x)} and {fmt_shape(P)}",
                span,
            )
        return ()

    def monotonicity(self, i):
        return NONMONOTONE

    def _curvature(self):
        if self.curvature_kind == UNKNOWN and not self.args[0].is_constant():
            return UNKNOWN
        return super()._curvature()

    def curvature_reason(self):
        if self.curvature_kind == UNKNOWN:
            return f"{self}: the matrix {self.args[1]} is indefinite"
        return super().curvature_reason()

    def forward(self, vals):
        x, P = dense(vals[0]), vals[1]
        return float(x @ (P @ x))

    def vjp(self, g, vals, out, needs):
        x, P = dense(vals[0]), vals[1]
        gx = g * (np.asarray(P @ x).ravel() + np.asarray(P.T @ x).ravel())
        return [gx, np.outer(x, x) * g if needs[1] else None]


ATOMS: dict[str, type[Atom]] = {
    cls.name: cls
    for cls in (square, exp, log, logistic, huber, sum, mean, sum_squares, logsumexp, trace, logdet, quad_form)
}


__all__ = [*ATOMS, "Atom", "Elementwise", "NoConjugate", "softmax_hessian_apply", "ATOMS", "ANYSIGN"]
