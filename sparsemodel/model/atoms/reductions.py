"""Reductions: ``sum``, ``mean``, ``sum_squares``, and ``logsumexp`` (along the rows of a matrix:
the softmax loss, with its Hessian written once in :func:`softmax_hessian_apply`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ...errors import ShapeError, Span
from ..dcp import (
    AFFINE,
    CONVEX,
    NONNEG,
    magnitude_monotonicity,
)
from ..expr import Expr, dense, fmt_shape
from .base import Atom, _lse
from .elementwise import _xlogx


def _axis_shape(shape: tuple[int, ...], axis: int | None, name: str, arg: Expr, span: Span | None) -> tuple[int, ...]:
    if axis is None:
        return ()
    if not -len(shape) <= axis < len(shape):
        raise ShapeError(f"{name}(..., axis={axis}) on {arg} of shape {fmt_shape(shape)}", span, "axis out of range")
    ax = axis % len(shape)
    return shape[:ax] + shape[ax + 1 :]


def _axis(axis: Any, name: str, span: Span | None) -> int | None:
    """The axis of a reduction as an integer (None: over every entry), or a located ShapeError."""
    if axis is None:
        return None
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise ShapeError(f"{name}(..., axis={axis!r}): an axis is an integer", span, "axis = 0 (down the rows) or 1")
    return int(axis)


def _expand(g: np.ndarray, shape: tuple[int, ...], axis: int | None) -> np.ndarray:
    if axis is None:
        return np.broadcast_to(g, shape)
    return np.broadcast_to(np.expand_dims(g, axis % len(shape)), shape)


class _Reduction(Atom):
    def __init__(self, x: Any, axis: int | None = None, span: Span | None = None):
        self.axis = _axis(axis, self.name, span)
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
        return magnitude_monotonicity(self.args[0].sign)

    def _sign_of(self):
        return NONNEG

    def forward(self, vals):
        z = dense(vals[0])
        return float(np.dot(z.ravel(), z.ravel()))

    def vjp(self, g, vals, out, needs):
        return [2.0 * g * dense(vals[0])]


SHORT_AXIS = 8  # an axis of fewer entries is reduced slice by slice (:func:`short_reduce`)


def short_reduce(op: np.ufunc, Z: np.ndarray, axis: int = -1) -> np.ndarray:
    """``op.reduce(Z, axis=axis, keepdims=True)`` (``np.add``, ``np.maximum``) for the softmax's
    class axis. NumPy reduces a short axis slowly: one row at a time over a short last axis (~20 us
    for 500 rows of 3 classes), and over the class axis of strided (n, m, q) products (a Hessian
    applied to Jacobian columns) ~270 us where adding the m slices takes ~20 us. So an axis of
    fewer than SHORT_AXIS entries is reduced slice by slice, one vectorized operation per slice:
    the same values (up to the sign of a zero sum), since NumPy adds fewer than 8 entries in order
    too."""
    m = Z.shape[axis]
    if axis >= 0 or not 1 < m < SHORT_AXIS:
        return op.reduce(Z, axis=axis, keepdims=True)
    tail = (slice(None),) * (-1 - axis)  # the axes after the reduced one (indexing, not moveaxis: cheaper)
    out = op(Z[(..., 0, *tail)], Z[(..., 1, *tail)])
    for j in range(2, m):
        out = op(out, Z[(..., j, *tail)])
    return np.asarray(out)[(..., None, *tail)]


def softmax_hessian_apply(P: np.ndarray, U: np.ndarray) -> np.ndarray:
    """The Hessian of logsumexp at each row, diag(p) - p p' (p = softmax of the row, the rows of
    ``P`` (..., m)), applied to ``U`` (..., m) or (..., m, q): the one place this Hessian is
    written (Newton steps, Hessian products and diagonals, the swap model all call it)."""
    if U.ndim == P.ndim:
        PU = P * U
        return PU - P * short_reduce(np.add, PU)
    PU = P[..., None] * U
    return PU - P[..., None] * short_reduce(np.add, PU, axis=-2)


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
        zmax = short_reduce(np.maximum, Z)
        E = np.exp(Z - zmax)
        s = short_reduce(np.add, E)
        v = (np.log(s) + zmax)[..., 0]
        return v, (E / s if order >= 1 else None), None

    def probs(self, Z: np.ndarray) -> np.ndarray:
        """The softmax of each row of Z (the gradient of its logsumexp)."""
        E = np.exp(Z - short_reduce(np.maximum, Z))
        return E / short_reduce(np.add, E)

    def logits(self, Z: np.ndarray) -> np.ndarray | None:
        """As a row-wise loss, the softmax: each row of Z is the logits of its classes, and
        ``logsumexp(Z, axis=1) - sum(Y .* Z, axis=1)`` with one-hot Y is -log p_(y_i)."""
        return np.asarray(Z, dtype=float) if self.loss_form == "rowwise" else None

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
