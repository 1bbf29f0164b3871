"""The arithmetic nodes of the expression tree: sums, differences, negation, elementwise products
and quotients, matrix products, transposes and indexing, each with its shape (NumPy broadcasting),
its curvature and sign (:mod:`.dcp`), its printing, ``forward`` and ``vjp``."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import ModelError, ShapeError, Span
from .dcp import (
    AFFINE,
    CONCAVE,
    CONSTANT,
    CONVEX,
    UNKNOWN,
    Shape,
    add_curvature,
    add_sign,
    mul_sign,
    negate_curvature,
    negate_sign,
    scale_curvature,
)
from .expr import OPERATORS, Expr, _join, broadcast_shapes, dense, fmt_shape, unbroadcast


class Add(Expr):
    precedence = 10
    op = "+"

    def __init__(self, a: Expr, b: Expr, span: Span | None = None):
        super().__init__((a, b), broadcast_shapes(a.shape, b.shape, self.op, a, b, span), span or _join(a, b))

    def _spine(self) -> tuple[Expr, list[tuple[str, Expr]]]:
        """The leftmost operand and the (operator, right operand) pairs of a chain of + and -."""
        rights = []
        node: Expr = self
        while isinstance(node, Add):
            rights.append((node.op, node.args[1]))
            node = node.args[0]
        rights.reverse()
        return node, rights

    def _text_deps(self) -> tuple[Expr, ...]:
        first, rights = self._spine()
        return (first,) + tuple(b for _, b in rights)

    def _render(self) -> str:  # the whole chain at once: linear in its length
        first, rights = self._spine()
        parts = [self.wrap(first)]
        parts += [f" {op} {self.wrap(b, self.precedence + 1)}" for op, b in rights]
        return "".join(parts)

    def _curvature(self) -> str:
        a, b = self.args
        return add_curvature(a.curvature, b.curvature)

    def curvature_reason(self) -> str:
        a, b = self.args
        if self.op == "-" and b.curvature == CONVEX:
            return f"{self} subtracts the convex {b} (minus a convex term is concave) from the {a.curvature} {a}"
        if {a.curvature, b.curvature} == {CONVEX, CONCAVE}:
            cave, vex = (a, b) if a.curvature == CONCAVE else (b, a)
            return f"{self} adds the concave {cave} to the convex {vex}"
        if self.op == "-" and a.curvature == CONCAVE:
            return f"{self} subtracts from the concave {a}"
        return f"{self} is {self.curvature}"

    def _sign_of(self) -> str:
        return add_sign(self.args[0].sign, self.args[1].sign)

    def forward(self, vals: list[Any]) -> Any:
        return dense(vals[0]) + dense(vals[1])

    def vjp(self, g, vals, out, needs):
        return [unbroadcast(g, a.shape) if n else None for a, n in zip(self.args, needs)]


class Sub(Add):
    op = "-"

    def _curvature(self) -> str:
        a, b = self.args
        return add_curvature(a.curvature, negate_curvature(b.curvature))

    def _sign_of(self) -> str:
        return add_sign(self.args[0].sign, negate_sign(self.args[1].sign))

    def forward(self, vals: list[Any]) -> Any:
        return dense(vals[0]) - dense(vals[1])

    def vjp(self, g, vals, out, needs):
        a, b = self.args
        return [unbroadcast(g, a.shape) if needs[0] else None, -unbroadcast(g, b.shape) if needs[1] else None]


class Neg(Expr):
    precedence = 30

    def __init__(self, a: Expr, span: Span | None = None):
        super().__init__((a,), a.shape, span or a.span)

    def _render(self) -> str:
        return f"-{self.wrap(self.args[0])}"

    def _curvature(self) -> str:
        return negate_curvature(self.args[0].curvature)

    def _sign_of(self) -> str:
        return negate_sign(self.args[0].sign)

    def forward(self, vals):
        return -dense(vals[0])

    def vjp(self, g, vals, out, needs):
        return [-g]


class Mul(Expr):
    """Elementwise product (``*``) with broadcasting; one factor must be constant."""

    precedence = 20
    op = "*"

    def __init__(self, a: Expr, b: Expr, span: Span | None = None):
        super().__init__((a, b), broadcast_shapes(a.shape, b.shape, self.op, a, b, span), span or _join(a, b))

    def _render(self) -> str:
        a, b = self.args
        return f"{self.wrap(a)} {self.op} {self.wrap(b, self.precedence + 1)}"

    def _curvature(self) -> str:
        a, b = self.args
        if a.is_constant() and b.is_constant():
            return CONSTANT
        if a.is_constant():
            return scale_curvature(b.curvature, a.sign)
        if b.is_constant():
            return scale_curvature(a.curvature, b.sign)
        return UNKNOWN

    def curvature_reason(self) -> str:
        a, b = self.args
        if not a.is_constant() and not b.is_constant():
            return f"{self} multiplies two expressions that both depend on variables"
        c, e = (a, b) if a.is_constant() else (b, a)
        return f"{self} scales {e.curvature} {e} by {c}, whose sign is {c.sign}"

    def _sign_of(self) -> str:
        return mul_sign(self.args[0].sign, self.args[1].sign)

    def forward(self, vals):
        a, b = vals
        if sp.issparse(a) or sp.issparse(b):
            a, b = dense(a), dense(b)
        return a * b

    def vjp(self, g, vals, out, needs):
        a, b = (dense(v) for v in vals)
        return [
            unbroadcast(g * b, self.args[0].shape) if needs[0] else None,
            unbroadcast(g * a, self.args[1].shape) if needs[1] else None,
        ]


class Div(Mul):
    op = "/"

    def __init__(self, a: Expr, b: Expr, span: Span | None = None):
        super().__init__(a, b, span)
        if b.is_constant():
            with np.errstate(all="ignore"):
                v = b.constant_value()
                zero = not np.all(np.abs(dense(v)) > 0)
            if zero:
                what = f"{b} is 0" if b.shape == () else f"{b} has zero entries"
                raise ModelError(f"division by zero in {self}: {what}", self.span, "divide by a nonzero constant")

    def _curvature(self) -> str:
        a, b = self.args
        if not b.is_constant():
            return CONSTANT if a.is_constant() and b.is_constant() else UNKNOWN
        return CONSTANT if a.is_constant() else scale_curvature(a.curvature, b.sign)

    def curvature_reason(self) -> str:
        a, b = self.args
        if not b.is_constant():
            return f"{self} divides by {b}, which depends on a variable"
        return f"{self} divides {a.curvature} {a} by {b}, whose sign is {b.sign}"

    def forward(self, vals):
        return dense(vals[0]) / dense(vals[1])

    def vjp(self, g, vals, out, needs):
        a, b = (dense(v) for v in vals)
        return [
            unbroadcast(g / b, self.args[0].shape) if needs[0] else None,
            unbroadcast(-g * a / (b * b), self.args[1].shape) if needs[1] else None,
        ]


def matmul_shape(a: Shape, b: Shape, left: Expr, right: Expr, span: Span | None) -> Shape:
    bad = ShapeError(
        f"matrix product {left} @ {right} of shapes {fmt_shape(a)} @ {fmt_shape(b)}",
        span,
        "the last dimension of the left operand must equal the first (for vectors: only) dimension of the right",
    )
    if not a or not b or len(a) > 2 or len(b) > 2:
        raise ShapeError(
            f"@ needs vector or matrix operands; got {fmt_shape(a)} @ {fmt_shape(b)} in {left} @ {right}",
            span,
            "use * for products with scalars",
        )
    if a[-1] != b[0]:
        raise bad
    return a[:-1] + b[1:]


class MatMul(Expr):
    precedence = 20

    def __init__(self, a: Expr, b: Expr, span: Span | None = None):
        span = span or _join(a, b)
        super().__init__((a, b), matmul_shape(a.shape, b.shape, a, b, span), span)

    def _render(self) -> str:
        a, b = self.args
        return f"{self.wrap(a)} @ {self.wrap(b, self.precedence + 1)}"

    def _curvature(self) -> str:
        a, b = self.args
        if a.is_constant() and b.is_constant():
            return CONSTANT
        if a.is_constant():
            return AFFINE if b.curvature == AFFINE else scale_curvature(b.curvature, a.sign)
        if b.is_constant():
            return AFFINE if a.curvature == AFFINE else scale_curvature(a.curvature, b.sign)
        return UNKNOWN

    def curvature_reason(self) -> str:
        a, b = self.args
        if not a.is_constant() and not b.is_constant():
            return f"{self} multiplies two expressions that both depend on variables"
        return (
            f"{self} applies a matrix of unknown sign to a {b.curvature if a.is_constant() else a.curvature} expression"
        )

    def forward(self, vals):
        a, b = vals
        if sp.issparse(b) and not sp.issparse(a):
            return np.asarray((b.T @ np.asarray(a).T).T)
        r = a @ b
        return dense(r) if sp.issparse(r) else np.asarray(r)

    def vjp(self, g, vals, out, needs):
        a, b = vals
        sa, sb = self.args[0].shape, self.args[1].shape
        ga = gb = None
        if needs[0]:
            if len(sa) == 1 and len(sb) == 1:
                ga = g * dense(b)
            elif len(sa) == 1:  # (n,) @ (n,q) -> (q,)
                ga = dense(b @ g)
            elif len(sb) == 1:  # (m,n) @ (n,) -> (m,)
                ga = np.outer(g, dense(b))
            else:
                ga = dense(g @ b.T) if not sp.issparse(b) else np.asarray((b @ g.T).T)
        if needs[1]:
            if len(sa) == 1 and len(sb) == 1:
                gb = g * dense(a)
            elif len(sb) == 1:  # (m,n) @ (n,)
                gb = np.asarray(a.T @ g).ravel() if sp.issparse(a) else a.T @ g
            elif len(sa) == 1:  # (n,) @ (n,q)
                gb = np.outer(dense(a), g)
            else:
                gb = dense(a.T @ g)
        return [ga, gb]


class Transpose(Expr):
    precedence = 90

    def __init__(self, a: Expr, span: Span | None = None):
        super().__init__((a,), a.shape[::-1], span or a.span)

    def _render(self) -> str:
        return f"{self.wrap(self.args[0])}'"

    def _curvature(self) -> str:
        return self.args[0].curvature

    def _sign_of(self) -> str:
        return self.args[0].sign

    def forward(self, vals):
        v = vals[0]
        return v.T if sp.issparse(v) else np.transpose(v)

    def vjp(self, g, vals, out, needs):
        return [np.transpose(g)]


def _normalize_key(key: Any, shape: Shape, base: Expr, span: Span | None) -> tuple:
    if not isinstance(key, tuple):
        key = (key,)
    if len(key) > len(shape):
        raise ShapeError(f"too many indices for {base} of shape {fmt_shape(shape)}", span)
    out = []
    for k, d in zip(key, shape):
        if isinstance(k, slice):
            parts = (k.start, k.stop, k.step)
            if any(v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer))) for v in parts):
                raise ShapeError(f"the slice {_fmt_key((k,))} of {base} has a part that is not an integer", span)
            if k.step == 0:
                raise ShapeError(
                    f"the slice {_fmt_key((k,))} of {base} has step 0", span, "a step is a nonzero integer"
                )
            out.append(k)
        elif isinstance(k, (int, np.integer)):
            if not -d <= int(k) < d:
                raise ShapeError(f"index {int(k)} is out of range for {base} of shape {fmt_shape(shape)}", span)
            out.append(int(k))
        else:
            raise ShapeError(f"unsupported index {k!r} for {base}; use integers and slices like w[1:]", span)
    return tuple(out)


def _fmt_key(key: tuple) -> str:
    def one(k: Any) -> str:
        if isinstance(k, slice):
            s = "" if k.start is None else str(k.start)
            s += ":" + ("" if k.stop is None else str(k.stop))
            if k.step is not None:
                s += ":" + str(k.step)
            return s
        return str(k)

    return ", ".join(one(k) for k in key)


class Index(Expr):
    """Basic indexing with integers and slices (``w[1:]``, ``W[0, :]``)."""

    precedence = 90

    def __init__(self, a: Expr, key: Any, span: Span | None = None):
        span = span or a.span
        k = _normalize_key(key, a.shape, a, span)
        shape = np.broadcast_to(np.empty(()), a.shape)[k].shape
        if 0 in shape:
            raise ShapeError(f"{a}[{_fmt_key(k)}] selects nothing from shape {fmt_shape(a.shape)}", span)
        super().__init__((a,), shape, span)
        self.key = k

    def _render(self) -> str:
        return f"{self.wrap(self.args[0])}[{_fmt_key(self.key)}]"

    def flat_indices(self) -> np.ndarray:
        """Positions in the flattened argument selected by this index, in output (C) order (read
        once per node: a node does not change; the array is read-only)."""
        got = self.__dict__.get("_flat")
        if got is None:
            got = np.arange(self.args[0].size).reshape(self.args[0].shape)[self.key].ravel()
            got.setflags(write=False)
            self._flat = got
        return got

    def _curvature(self) -> str:
        return self.args[0].curvature

    def _sign_of(self) -> str:
        return self.args[0].sign

    def forward(self, vals):
        v = vals[0]
        r = v[self.key]
        return dense(r) if sp.issparse(r) else (np.asarray(r) if np.ndim(r) else float(r))

    def vjp(self, g, vals, out, needs):
        z = np.zeros(self.args[0].shape)
        z[self.key] = g
        return [z]


class Concat(Expr):
    """The entries of several expressions, each flattened (C order), one after another: a vector.

    Not a word of the model language: the recognizer of the composite form builds it for a loss
    of several arguments (``ordinal(X @ w, theta, y)`` is a whole-vector loss of the vector
    ``[X @ w; theta]``), so that the loss has one affine map like every other."""

    def __init__(self, parts: list[Expr], span: Span | None = None):
        super().__init__(tuple(parts), (int(sum(a.size for a in parts)),), span)

    def _render(self) -> str:
        return "[" + "; ".join(str(a) for a in self.args) + "]"

    def _curvature(self) -> str:
        curv = CONSTANT
        for a in self.args:
            c = a.curvature
            if c == CONSTANT:
                continue
            if c != AFFINE:
                return UNKNOWN
            curv = AFFINE
        return curv

    def forward(self, vals):
        return np.concatenate([np.ravel(dense(v) if sp.issparse(v) else np.asarray(v, dtype=float)) for v in vals])

    def vjp(self, g, vals, out, needs):
        g = np.asarray(g, dtype=float)
        res: list[Any] = []
        at = 0
        for a, need in zip(self.args, needs):
            part = g[at : at + a.size]
            at += a.size
            res.append((part.reshape(a.shape) if a.shape else float(part[0])) if need else None)
        return res


# what Expr's operators build: + - * / @, unary minus, indexing, .T
OPERATORS.update(add=Add, sub=Sub, mul=Mul, div=Div, matmul=MatMul, neg=Neg, index=Index, transpose=Transpose)

__all__ = ["Add", "Sub", "Neg", "Mul", "Div", "MatMul", "Transpose", "Index", "Concat", "matmul_shape"]
