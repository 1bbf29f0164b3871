"""What every model constraint is (:class:`Constraint`: the variable and coordinates it governs,
its span) and the one check of a bound (:class:`Bounded`: an integer from 0 to the number of units)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from ...errors import ConstraintError, Span
from ..arith import Index
from ..expr import Expr, Variable


def _variable_view(target: Expr, what: str, span: Span | None) -> tuple[Variable, np.ndarray]:
    """Resolve ``w``, ``w[1:]``, ``W[0, :]`` ... to (variable, flat coordinates of the variable)."""
    if isinstance(target, Variable):
        return target, np.arange(target.size)
    if isinstance(target, Index):
        var, coords = _variable_view(target.args[0], what, span)
        return var, coords[target.flat_indices()]
    raise ConstraintError(
        f"{what}(...) applies to a variable or a slice of one; got {target}",
        span or target.span,
        "write nnz(w) <= k, nnz(w[1:]) <= k (intercept w[0] free) or nnz(offdiag(O)) <= 2*k",
    )


class Constraint(ABC):
    kind = "constraint"
    span: Span | None = None

    @property
    @abstractmethod
    def variable(self) -> Variable:
        """The variable the constraint is on."""

    def describe(self) -> str:
        return str(self)


def _bound_value(b: Expr, what: str, span: Span | None) -> float:
    if not b.is_constant() or b.shape != ():
        raise ConstraintError(f"the bound in {what} must be a scalar constant; got {b}", span)
    return float(b.constant_value())


AXIS_GROUPS = ("rows", "cols")  # groups = rows / cols: every row (column) of a matrix is one group


class Bounded(ABC):
    """A constraint with a bound k on what a solver selects: the one place a bound value is checked
    (the model's written bound, the sets' budgets, the sweeps of compare, path and select, the
    CLI's --k all go through :meth:`check_bound`). ``unit`` names what k counts, ``limit`` is how
    many there are, ``unit_size`` the entries per unit (2 for symmetric pairs)."""

    unit: str = "coordinates"
    unit_size: int = 1

    @property
    @abstractmethod
    def limit(self) -> int:
        """How many units k can count (the largest meaningful bound)."""

    def bound_text(self, b: int) -> str:
        return f"{self} (bound {b})"

    def check_bound(self, b: Any, written: bool = False) -> int:
        """The bound b as an integer number of units, or a located error: b must be an integer from
        0 to ``limit``. ``written``: b is the bound as the model writes it (entries for a symmetric
        off-diagonal, converted to edges)."""
        if type(b) is int and not written and 0 <= b <= self.limit:  # (a path's bounds: checked again per point)
            return b
        if (
            isinstance(b, bool)
            or not isinstance(b, (int, np.integer, float, np.floating))
            or not np.isfinite(float(b))
            or float(b) != int(b)
        ):
            raise ConstraintError(
                f"{self}: the bound {b!r} is not an integer",
                self.span,
                f"use an integer 0 <= {self.unit} bound <= {self.limit}",
            )
        b = int(b)
        if b < 0:
            raise ConstraintError(f"{self}: the bound {b} must be nonnegative", self.span)
        units = b // self.unit_size if written else b
        if units > self.limit or (written and b > self.limit * self.unit_size):
            shown = b if written else b * self.unit_size
            extra = f" ({self.limit} edges: the bound counts entries, two per edge)" if self.unit_size > 1 else ""
            outside = " outside free=" if getattr(getattr(self, "nnz", None), "free", None) is not None else ""
            what = (
                f"{self.limit * self.unit_size} entries{extra}"
                if written and self.unit_size > 1
                else f"{self.limit} {self.unit}{outside}"
            )
            expr = getattr(self, "k_expr", None) or getattr(self, "r_expr", None)
            named = f"{expr} = {shown}" if written and expr is not None and str(expr) != str(shown) else f"{shown}"
            letter = "r" if self.unit == "rank" else "k"
            has = f"has rank at most {self.limit}" if self.unit == "rank" else f"has only {what}"
            got = (
                f"{shown} entries ({shown // self.unit_size} {self.unit})"
                if self.unit_size > 1
                else f"{letter} = {shown}"
            )
            raise ConstraintError(
                f"{self.bound_text(shown) if not written else str(self)}: the bound is {named}, but "
                f"{self.target_text} {has}",
                self.span,
                f"{letter} must be between 0 and {self.limit} ({self.unit}); got {got}",
            )
        return units
