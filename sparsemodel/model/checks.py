"""Model-level checks on data that the type system cannot see.

:func:`label_errors` catches labels that do not fit the loss: ``logistic(-y * (X @ w))`` is the
logistic loss only for labels y in {-1, +1}. A data vector with exactly two distinct values that
appears as an elementwise factor inside the argument of ``logistic(...)`` is taken to be a label
vector. When its values are not a symmetric pair {-c, +c} (±1 labels, possibly already scaled,
as ``-2 * y`` becomes in the Python builder) but, typically, 0/1 or 1/2, the model is refused
with a :class:`~sparsemodel.errors.DataError` that suggests the recoding. Vectors with a single
value or with more distinct values (sample weights, offsets) are left alone. It runs in
``Problem.check()`` and ``Problem.solve()``, so it covers model files and the Python builder.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import scipy.sparse as sp

from ..errors import DataError
from .arith import Div, Index, Mul, Neg, Transpose
from .atoms import logistic
from .expr import Data, Expr


def elementwise_factors(e: Expr) -> Iterator[Data]:
    """Data leaves that multiply ``e`` elementwise (through -, *, the numerator of /, [ ], ')."""
    stack = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, Data):
            yield node
        elif isinstance(node, Div):
            stack.append(node.args[0])
        elif isinstance(node, (Mul, Neg, Index, Transpose)):
            stack.extend(node.args)


def _label_values(d: Data) -> np.ndarray | None:
    """The two distinct values of a vector-shaped data leaf that has exactly two (else None)."""
    shape = d.shape
    if not (len(shape) == 1 or (len(shape) == 2 and 1 in shape)) or d.size < 2:
        return None
    v = d.value.toarray() if sp.issparse(d.value) else np.asarray(d.value)
    vals = np.unique(v)
    return vals if len(vals) == 2 else None


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{float(x):g}"


def label_errors(expr: Expr) -> list[DataError]:
    """One :class:`DataError` per two-valued vector inside ``logistic(...)`` whose values are not {-c, +c}."""
    errors: list[DataError] = []
    seen: set[int] = set()
    for node in expr.walk():
        if not isinstance(node, logistic):
            continue
        for d in elementwise_factors(node.args[0]):
            if d.uid in seen:
                continue
            seen.add(d.uid)
            vals = _label_values(d)
            if vals is None or vals[0] == -vals[1]:
                continue
            shown = "{" + ", ".join(_fmt(x) for x in vals) + "}"
            name = d.name or "a data vector"
            what = f"data {d.name}" if d.name else name
            declared = f" (declared at {d.span.location()})" if d.span is not None else ""
            a, b = _fmt(vals[0]), _fmt(vals[1])
            hint = (
                f"logistic(-y * (X @ w)) is the logistic loss for labels y in {{-1, +1}}: recode {name} with "
                f"map {{{a}: -1, {b}: 1}} on its data line (in Python: 2 * (y == {b}) - 1)"
            )
            errors.append(
                DataError(
                    f"{what}{declared} has the values {shown} but multiplies the argument of {node}, "
                    "which expects labels in {-1, +1}",
                    node.span or d.span,
                    hint,
                )
            )
    return errors


__all__ = ["elementwise_factors", "label_errors"]
