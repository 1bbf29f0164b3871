"""The checks every loaded value passes (:func:`validate`): the kind fits (``matrix`` 2-D,
``vector`` 1-D or a single row/column, ``scalar`` one value, ``labels`` -1/+1), no value is NaN or
infinite; each failure a :class:`~sparsemodel.errors.DataError` naming the data, the file and the
place in the model file."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import DataError, Span
from ..util import fmt_number, is_dask_array
from .common import KINDS, Value, _who


def _fmt_shape(shape: tuple[int, ...]) -> str:
    return "(" + ",".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def validate(
    value: Any,
    kind: str,
    *,
    name: str | None = None,
    origin: str = "the value",
    span: Span | None = None,
    lines: np.ndarray | None = None,
) -> Value:
    """Check ``value`` against ``kind`` and for NaN/Inf; returns it as float (vectors raveled).

    ``origin`` says where the value came from (``file "X.csv"``, ``data={'X': ...}``) for messages;
    ``lines`` (CSV) maps rows to line numbers of the file.
    """
    who = _who(name)
    if kind not in KINDS:
        raise DataError(f"{who}unknown kind {kind!r}", span, f"the kinds are {', '.join(KINDS)}")
    if is_dask_array(value):
        if kind == "matrix":
            if value.ndim != 2:
                raise DataError(
                    f"{who}declared as a matrix, but {origin} holds an array of shape {_fmt_shape(value.shape)}",
                    span,
                    "declare it with the kind that fits (vector, scalar), or give a 2-D table",
                )
            return value  # stays lazy: Data checks it for NaN/inf in one pass over its blocks
        value = np.asarray(value.compute())
    if np.iscomplexobj(value.data if sp.issparse(value) else value):  # float() would drop the imaginary parts
        raise DataError(f"{who}{origin} holds complex numbers", span, "give real numbers")
    if sp.issparse(value):
        v: Value = sp.csr_matrix(value, dtype=float)
    else:
        try:
            v = np.asarray(value, dtype=float)
        except (TypeError, ValueError) as exc:
            raise DataError(f"{who}{origin} is not numeric: {exc}", span) from None
    shape = tuple(v.shape)
    if kind == "matrix":
        if len(shape) != 2:
            what = "a scalar" if not shape else f"an array of shape {_fmt_shape(shape)}"
            raise DataError(
                f"{who}declared as a matrix, but {origin} holds {what}",
                span,
                "declare it with the kind that fits (vector, scalar), or give a 2-D table",
            )
    elif kind in ("vector", "labels"):
        if len(shape) == 2 and 1 in shape:
            v = (v.toarray() if sp.issparse(v) else v).ravel()
        elif len(shape) != 1:
            what = "a scalar" if not shape else f"an array of shape {_fmt_shape(shape)}"
            raise DataError(
                f"{who}declared as {'a vector' if kind == 'vector' else 'labels (a vector)'}, but {origin} holds {what}",
                span,
                'pick one column with "file.csv:COLUMN" (or "file.npz:KEY"), or declare it as a matrix',
            )
    elif kind == "scalar":
        size = int(np.prod(shape)) if shape else 1
        if size != 1:
            raise DataError(
                f"{who}declared as a scalar, but {origin} holds an array of shape {_fmt_shape(shape)}", span
            )
        v = np.asarray(v.toarray() if sp.issparse(v) else v, dtype=float).reshape(())
    if kind != "scalar" and 0 in tuple(v.shape):
        raise DataError(
            f"{who}{origin} holds no values (shape {_fmt_shape(tuple(v.shape))})",
            span,
            "a model needs data with at least one row and one column",
        )
    _check_finite(v, who, origin, span, lines)
    if kind == "labels":
        check_labels(np.asarray(v), name, origin, span)
    return v


def _check_finite(v: Value, who: str, origin: str, span: Span | None, lines: np.ndarray | None) -> None:
    data = v.data if sp.issparse(v) else np.asarray(v)
    bad = ~np.isfinite(data)
    if not bad.any():
        return
    n_nan = int(np.isnan(data).sum())
    n_inf = int(bad.sum()) - n_nan
    parts = []
    if n_nan:
        parts.append(f"{n_nan} NaN/missing value{'s' if n_nan != 1 else ''}")
    if n_inf:
        parts.append(f"{n_inf} infinite value{'s' if n_inf != 1 else ''}")
    if sp.issparse(v):
        coo = v.tocoo()
        k = int(np.flatnonzero(~np.isfinite(coo.data))[0])
        pos: tuple[int, ...] = (int(coo.row[k]), int(coo.col[k]))
    else:
        pos = tuple(int(i) for i in np.argwhere(bad)[0])
    where = f"first at index [{', '.join(str(i) for i in pos)}]" if pos else "the value itself"
    if lines is not None and pos:
        where += f" (line {int(lines[pos[0]])} of the file)"
    raise DataError(
        f"{who}{origin} contains {' and '.join(parts)}; {where}",
        span,
        "sparsemodel needs finite numbers: remove or impute the missing entries before solving",
    )


def check_labels(y: np.ndarray, name: str | None, origin: str, span: Span | None) -> None:
    """Refuse a label vector whose values are not all -1 or +1 (with a ``map`` suggestion)."""
    vals = np.unique(y)
    if np.all(np.isin(vals, (-1.0, 1.0))):
        return
    shown = ", ".join(fmt_number(x) for x in vals[:8]) + (", ..." if len(vals) > 8 else "")
    if len(vals) == 2:
        hint = f"recode them in the data line: map {{{fmt_number(vals[0])}: -1, {fmt_number(vals[1])}: 1}}"
    elif len(vals) == 1:
        hint = "a label vector needs the values -1 and +1; check that the right file or column is used"
    else:
        hint = (
            f"labels are binary (-1/+1) but there are {len(vals)} distinct values; for several classes "
            "declare it as a vector and use onehot(...)"
        )
    raise DataError(
        f"{_who(name)}labels must be -1 or +1, but {origin} holds the values {{{shown}}}",
        span,
        hint,
    )
