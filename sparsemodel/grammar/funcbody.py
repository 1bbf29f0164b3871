"""``func`` bodies: the parsed body of ``func NAME(arg) = body`` turned into a sympy expression.

Kept apart from the parser so that sympy is imported only by models that define a func.
"""

from __future__ import annotations

import re
from typing import Any

import sympy
from lark import Transformer_NonRecursive, v_args

from ..errors import ModelError, NameResolutionError, Source, Span
from ..model.expr import Constant, Data, Parameter
from ..model.symbolic import SYMPY_FUNCTIONS
from ..util import did_you_mean
from .tokens import span_of, what


@v_args(meta=True)
class SympyBuilder(Transformer_NonRecursive):
    """Turns the body of ``func NAME(arg) = body`` into a sympy expression (params by value)."""

    def __init__(self, source: Source, env: dict[str, Any], funcs: dict[str, Any], fname: str, arg: str):
        """``env``: the names defined so far; ``funcs``: the funcs defined so far (a body may call them)."""
        super().__init__(visit_tokens=False)
        self.source, self.env, self.funcs = source, env, funcs
        self.fname = fname
        self.arg = arg
        self.symbol = sympy.Symbol(arg)

    def _sp(self, meta: Any) -> Span | None:
        return span_of(self.source, meta)

    def number(self, meta, children):
        text = str(children[0])
        return sympy.Integer(int(text)) if re.fullmatch(r"\d+", text) else sympy.Float(text)

    def name(self, meta, children):
        n = str(children[0])
        span = self._sp(meta)
        if n == self.arg:
            return self.symbol
        obj = self.env.get(n)
        if isinstance(obj, Parameter) and obj.shape == ():
            v = float(obj.value)
            return sympy.Integer(int(v)) if v.is_integer() else sympy.Float(v)
        if isinstance(obj, (Constant, Data)) and obj.shape == ():
            v = float(obj.constant_value())
            return sympy.Integer(int(v)) if v.is_integer() else sympy.Float(v)
        if obj is not None:
            raise ModelError(
                f"func {self.fname}({self.arg}) uses {n}, which is {what(obj)}",
                span,
                f"a func is a scalar function of its argument {self.arg}; it may use scalar params and numbers",
            )
        params = [k for k, v in self.env.items() if isinstance(v, Parameter)]
        raise NameResolutionError(
            f"'{n}' in func {self.fname}({self.arg}) is neither its argument nor a param",
            span,
            did_you_mean(n, [self.arg, *params]) + f"the argument is {self.arg}",
        )

    def add(self, meta, children):
        return children[0] + children[1]

    def sub(self, meta, children):
        return children[0] - children[1]

    def mul(self, meta, children):
        return children[0] * children[1]

    def div(self, meta, children):
        return children[0] / children[1]

    def neg(self, meta, children):
        return -children[0]

    def pos(self, meta, children):
        return children[0]

    def pow(self, meta, children):
        return children[0] ** children[2]

    def _not_scalar(self, meta: Any, what: str) -> None:
        raise ModelError(
            f"{what} is not allowed in the body of func {self.fname}",
            self._sp(meta),
            "a func is an elementwise scalar function: use + - * / ** and exp, log, sqrt, abs, logistic, square, "
            "tanh, sin, cos or other funcs",
        )

    def matmul(self, meta, children):
        self._not_scalar(meta, "@")

    def transpose(self, meta, children):
        self._not_scalar(meta, "transpose")

    def index(self, meta, children):
        self._not_scalar(meta, "indexing")

    def slice(self, meta, children):
        self._not_scalar(meta, "a slice")

    def kwarg(self, meta, children):
        self._not_scalar(meta, "a keyword argument")

    def call(self, meta, children):
        span = self._sp(meta)
        fname = str(children[0])
        args = [c for c in children[1:] if c is not None]
        known = sorted(set(SYMPY_FUNCTIONS) | set(self.funcs))
        if fname in self.funcs:
            f = self.funcs[fname]
            self._arity(fname, args, span)
            return f.body.subs(f.z, args[0])
        if fname in SYMPY_FUNCTIONS:
            self._arity(fname, args, span)
            return SYMPY_FUNCTIONS[fname](args[0])
        raise NameResolutionError(
            f"unknown function '{fname}' in the body of func {self.fname}",
            span,
            did_you_mean(fname, known) + f"a func body may call: {', '.join(known)}",
        )

    def _arity(self, fname: str, args: list[Any], span: Span | None) -> None:
        if len(args) != 1:
            raise ModelError(f"{fname}() takes one argument; got {len(args)}", span)
