"""Linear constraints: ``A @ w == b``, ``sum(w) == 1``, ``A @ w <= b``, ``w[0] >= w[1]``: two affine
sides of one variable compared entrywise (NumPy broadcasting), kept inside every restricted solve
and composed with ``nnz(w) <= k`` by the projection of :mod:`sparsemodel.sets.linear`.

``==`` of expressions builds one (the Python builder's ``sm.sum(w) == 1``). Expressions are also
dictionary keys and set members, and Python compares them with ``==`` there (and in ``in``,
``list.index``, ``list.remove``): so the constraint made by ``==`` is checked only when a model
takes it (:meth:`LinearConstraint.check`, called by its ``variable``), never while it is built, and
its truth value is the old identity test, ``a == b`` true only when a and b are the same node.
``if w == v`` and ``w in [v]`` therefore mean what they meant before, and a problem's
constraint list holds the constraint object."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import ConstraintError, ShapeError, Span
from ..dcp import AFFINE, CONSTANT
from ..expr import Expr, Variable, _join, as_expr, fmt_shape, refuse_vector_meets_line
from .base import Constraint

OPS = ("==", "<=", ">=")


class LinearConstraint(Constraint):
    """``lhs op rhs`` (op ``==``, ``<=`` or ``>=``) with affine sides in one variable, entrywise.

    ``residual`` is the affine expression r(x) the set reads: ``lhs - rhs`` (``==``, ``<=``) or
    ``rhs - lhs`` (``>=``), constrained to r(x) == 0 or r(x) <= 0. ``kind`` is ``linear_eq`` or
    ``linear_ineq``."""

    def __init__(self, lhs: Any, op: str, rhs: Any, span: Span | None = None, deferred: bool = False):
        if op not in OPS:
            raise ConstraintError(f"unknown comparison {op!r}; expected one of {', '.join(OPS)}", span)
        self.lhs = as_expr(lhs, span)
        self.rhs = as_expr(rhs, span)
        self.op = op
        self.span = span or _join(self.lhs, self.rhs)
        self._var: Variable | None = None
        self.residual: Expr | None = None
        if not deferred:
            self.check()

    @property
    def kind(self) -> str:  # type: ignore[override]
        return "linear_eq" if self.op == "==" else "linear_ineq"

    @property
    def equality(self) -> bool:
        return self.op == "=="

    @property
    def variable(self) -> Variable:
        return self.check()

    def check(self) -> Variable:
        """Validate the constraint (once) and return its variable: both sides affine, of shapes that
        broadcast, the constraint reading exactly one variable. A located ConstraintError or
        ShapeError otherwise."""
        if self._var is not None:
            return self._var
        a, b = self.lhs, self.rhs
        text = str(self)
        try:
            np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            raise ShapeError(
                f"{text}: the sides have shapes {fmt_shape(a.shape)} and {fmt_shape(b.shape)}, which do not broadcast",
                self.span,
                "a linear constraint compares two affine expressions entrywise (NumPy broadcasting)",
            ) from None
        refuse_vector_meets_line(a, b, text, self.span)
        for side in (a, b):
            if side.curvature not in (CONSTANT, AFFINE):
                raise ConstraintError(
                    f"{text}: {side} is not affine ({side.curvature}); a linear constraint compares affine "
                    "expressions of a variable",
                    side.span or self.span,
                    "write A @ w == b, sum(w) == 1, A @ w <= b (nnz, rank, eig and norm have their own forms)",
                )
        variables = {v.uid: v for side in (a, b) for v in side.variables()}
        if not variables:
            raise ConstraintError(
                f"{text} compares constants; a constraint must read a variable",
                self.span,
                "write A @ w == b or sum(w) == 1",
            )
        if len(variables) > 1:
            names = ", ".join(sorted(v.name for v in variables.values()))
            raise ConstraintError(
                f"{text} reads the variables {names}; a linear constraint reads one variable",
                self.span,
                "put the coordinates in one variable (var w[p + 1], then w[1:] and w[0]), or constrain each "
                "variable separately",
            )
        self.residual = (b - a) if self.op == ">=" else (a - b)
        self.residual.span = self.span
        self._var = next(iter(variables.values()))
        return self._var

    def __bool__(self) -> bool:
        """The identity test of the two sides: ``a == b`` is true only when a and b are one node
        (what ``==`` of expressions meant before it built constraints; dictionaries, sets, ``in``
        and ``list.index`` rely on it)."""
        if self.op == "==":
            return self.lhs is self.rhs
        return True

    __hash__ = object.__hash__

    def __str__(self) -> str:
        t = self.span.text if self.span is not None and self.span.line == self.span.end_line else None
        if t and sum(t.count(o) for o in OPS) == 1:  # the constraint as written (not half of lo <= e <= hi)
            return t
        return f"{self.lhs} {self.op} {self.rhs}"


def linear(lhs: Any, op: str, rhs: Any, span: Span | None = None, deferred: bool = False) -> LinearConstraint:
    """``lhs op rhs`` as a linear constraint (``deferred``: checked when a model takes it)."""
    return LinearConstraint(lhs, op, rhs, span=span, deferred=deferred)
