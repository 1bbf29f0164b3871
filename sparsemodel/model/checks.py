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
from ..util import fmt_number
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
            message, hint = _label_advice(d, vals)
            errors.append(
                DataError(
                    f"{message} but multiplies the argument of {node}, which expects labels in {{-1, +1}}",
                    node.span or d.span,
                    hint,
                )
            )
    return errors


def _label_advice(d: Data, vals: np.ndarray) -> tuple[str, str]:
    """What the two-valued vector is and how to recode the user's own vector to -1/+1.

    A vector declared in a model file is recoded on its data line. An array handed to the Python
    builder with the values {-c, 0} is, in all likelihood, ``-y`` (or ``-c * y``) of labels y in
    {0, 1}: NumPy negated it before the model saw it, so the fix recodes y (``2 * (y > 0) - 1``),
    not the negated vector (whose recoding would flip every label)."""
    a, b = fmt_number(vals[0]), fmt_number(vals[1])
    shown = f"{{{a}, {b}}}"
    loss = "logistic(-y * (X @ w)) is the logistic loss for labels y in {-1, +1}"
    if d.span is not None:  # declared in a model file
        return (
            f"data {d.name} (declared at {d.span.location()}) has the values {shown}",
            f"{loss}: recode {d.name} with map {{{a}: -1, {b}: 1}} on its data line (in Python: 2 * (y == {b}) - 1)",
        )
    name = d.name or "y"
    what = f"data {d.name}" if d.name else "a data vector"
    if not d.name and vals[1] == 0 and vals[0] < 0:  # -y (or -c * y) of 0/1 labels, negated by NumPy
        return (
            f"{what} has the values {shown}, the negation of labels y in {{0, 1}} (NumPy computes -y or -c * y "
            "before the model sees it),",
            f"{loss}: recode the labels before negating them, y = 2 * (y > 0) - 1 (from {{0, 1}} to {{-1, +1}}), "
            "then write -y * (X @ w)",
        )
    return (
        f"{what} has the values {shown}",
        f"{loss}: recode {name} as 2 * ({name} == {b}) - 1 (from {shown} to {{-1, +1}})",
    )


__all__ = ["elementwise_factors", "label_errors"]
