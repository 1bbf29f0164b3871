"""Expressions of a model file built into model objects: :class:`ExprBuilder`, a Lark
``Transformer`` producing :mod:`sparsemodel.model` expressions directly, each node with the
:class:`~sparsemodel.errors.Span` of its text (so later shape and convexity errors point at the
right place). Names and calls are the statement builder's (:mod:`.parser`), handed in as two
functions; the pieces both read (spans, quoted words) are in :mod:`.tokens`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from lark import Token, Transformer_NonRecursive, v_args

from ..errors import (
    ConstraintError,
    ModelError,
    ParseError,
    ShapeError,
    Source,
    Span,
)
from ..model import atoms as atoms_mod
from ..model.arith import Add, Div, Index, MatMul, Mul, Neg, Sub, Transpose
from ..model.constraints import (
    AXIS_GROUPS,
    STRUCTURAL_FUNCTIONS,
)
from ..model.expr import Constant, Data, Expr, dense
from .tokens import AxisWord, Text, span_of, structural_name, unquote


@dataclass
class _Kw:
    name: str
    value: Any
    span: Span | None


@dataclass
class _Slice:
    start: Any
    stop: Any
    step: Any
    span: Span | None


@v_args(meta=True)
class ExprBuilder(Transformer_NonRecursive):
    """Builds model expressions (``sparsemodel.model.expr`` nodes) from expression parse trees."""

    def __init__(
        self,
        source: Source,
        env: dict[str, Any],
        lookup: Callable[[Token, Span | None], Any],
        call: Callable[[str, list[Any], dict[str, Any], Span | None], Any],
    ):
        """``env``: the names defined so far; ``lookup`` and ``call``: the statement builder's
        reading of a name and of a call (declarations, data functions, funcs live there)."""
        super().__init__(visit_tokens=False)
        # (not `lookup`, `call`: a Transformer's methods are its rules, and `call` is one)
        self.source, self.env, self.lookup_name, self.call_function = source, env, lookup, call

    def _sp(self, meta: Any) -> Span | None:
        return span_of(self.source, meta)

    # ---- operands
    def _operand(self, x: Any, op: str, span: Span | None) -> Expr:
        if isinstance(x, Expr):
            return x
        if isinstance(x, AxisWord):
            raise ModelError(
                f"{x.word} is a function; call it like {x.word}(...)",
                x.span,
                f"{x.word}(X) is the number of {x.word} of X; the bare word {x.word} means row or column groups "
                f"only in nnz(W, groups = {x.word}) <= k",
            )
        s = structural_name(x)
        if s is not None:
            raise ConstraintError(
                f"{s} cannot be used inside an expression ({op})",
                span,
                f"{', '.join(STRUCTURAL_FUNCTIONS)} only appear in constraints: nnz(w) <= k, rank(W) <= r, "
                "alpha <= eig(O) <= beta, nnz(offdiag(O)) <= 2 * k",
            )
        raise ModelError(f"cannot use {x!r} in an expression", span)

    # ---- leaves
    def number(self, meta, children):
        tok = children[0]
        return Constant(float(tok), span=self._sp(meta), text=str(tok))

    def name(self, meta, children):
        word = str(children[0])
        if word in AXIS_GROUPS and word not in self.env:
            return AxisWord(word, self._sp(meta))
        return self.lookup_name(children[0], self._sp(meta))

    # ---- arithmetic
    def _binary(self, cls: type, op: str, meta: Any, children: list[Any]) -> Expr:
        span = self._sp(meta)
        a, b = (self._operand(c, op, span) for c in children)
        return cls(a, b, span=span)

    def add(self, meta, children):
        return self._binary(Add, "+", meta, children)

    def sub(self, meta, children):
        return self._binary(Sub, "-", meta, children)

    def mul(self, meta, children):
        return self._binary(Mul, "*", meta, children)

    def div(self, meta, children):
        return self._binary(Div, "/", meta, children)

    def matmul(self, meta, children):
        return self._binary(MatMul, "@", meta, children)

    def neg(self, meta, children):
        span = self._sp(meta)
        a = self._operand(children[0], "-", span)
        if isinstance(a, Constant) and not a.shape:
            return Constant(-a.value, span=span, text=f"-{a}")
        return Neg(a, span=span)

    def pos(self, meta, children):
        return self._operand(children[0], "+", self._sp(meta))

    def pow(self, meta, children):
        span = self._sp(meta)
        a = self._operand(children[0], "**", span)
        p = self._operand(children[2], "**", span)
        if not p.is_constant() or p.shape != ():
            raise ModelError(f"the exponent in {a} ** {p} must be a number", span)
        pv = float(p.constant_value())
        if a.is_constant():
            v = np.power(dense(a.constant_value()), pv)
            return Constant(float(v), span=span, text=f"{a}**{p}") if a.shape == () else Data(v, span=span)
        if pv == 2:
            return atoms_mod.square(a, span=span)
        if pv == 1:
            return a
        raise ModelError(
            f"{a} ** {p}: only the power 2 of an expression with variables is supported",
            span,
            "use square(...), sum_squares(...), exp/log, or define the function with func, e.g. func quartic(z) = z^4",
        )

    def list_literal(self, meta, children):
        """``[0, 3, 5]``: a data vector of numbers (for example the indices of ``nnz(w, free = [0, 3])``)."""
        span = self._sp(meta)
        vals = []
        for c in children:
            if c is None:
                continue
            e = self._operand(c, "[ ]", span)
            if not e.is_constant() or e.shape != ():
                raise ModelError(
                    f"a list holds numbers; {e} is {'not a number' if e.shape != () else 'not constant'}",
                    span,
                    "write a list of numbers, e.g. [0, 3, 5]",
                )
            vals.append(float(e.constant_value()))
        return Data(np.array(vals), span=span)

    def transpose(self, meta, children):
        span = self._sp(meta)
        return Transpose(self._operand(children[0], "transpose", span), span=span)

    def slice(self, meta, children):
        return _Slice(*children, span=self._sp(meta))

    def index(self, meta, children):
        span = self._sp(meta)
        base = self._operand(children[0], "[ ]", span)
        key = []
        for c in children[1:]:
            if isinstance(c, _Slice):
                bounds = [self._int_value(x, "slice bound", c.span) for x in (c.start, c.stop, c.step)]
                if bounds[2] == 0:
                    raise ShapeError("a slice step cannot be zero", c.span)
                key.append(slice(*bounds))
            else:
                key.append(self._int_value(c, "index", span))
        return Index(base, tuple(key), span=span)

    def _int_value(self, x: Any, what: str, span: Span | None) -> int | None:
        if x is None:
            return None
        e = self._operand(x, what, span)
        if not e.is_constant() or e.shape != ():
            raise ShapeError(f"an {what} must be an integer constant; got {e}", span)
        v = float(e.constant_value())
        if not np.isfinite(v) or v != int(v):
            raise ShapeError(f"an {what} must be an integer; {e} is {v:g}", span)
        return int(v)

    # ---- calls
    def kwarg(self, meta, children):
        return _Kw(str(children[0]), children[1], self._sp(meta))

    def kwarg_text(self, meta, children):
        span = self._sp(meta)
        return _Kw(str(children[0]), Text(unquote(children[1]), span), span)

    def call(self, meta, children):
        span = self._sp(meta)
        fname = str(children[0])
        raw = [c for c in children[1:] if c is not None]
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for a in raw:
            if isinstance(a, _Kw):
                if a.name in kwargs:
                    raise ModelError(f"{fname}() got the keyword {a.name} twice", a.span)
                kwargs[a.name] = a.value
            else:
                if kwargs:
                    raise ParseError(f"{fname}(): a positional argument follows a keyword argument", span)
                args.append(a)
        return self.call_function(fname, args, kwargs, span)
