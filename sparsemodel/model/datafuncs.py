"""Functions of data, evaluated once when the model is built (not atoms: no variable enters them):
``cov``, ``center``, ``standardize``, ``normalize_columns``, ``onehot``, ``levels``, ``rows``, ``cols``,
``ones``, ``eye``.
Each keeps the column names of its data where it has them."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import DataError, ModelError, ShapeError, Span
from .expr import Constant, Data, as_expr, dense, fmt_shape


def _data_arg(x: Any, fname: str, span: Span | None) -> tuple[Any, str | None]:
    e = as_expr(x)
    if not e.is_constant():
        raise ModelError(f"{fname}() takes data, but {e} depends on a variable", span)
    return e.constant_value(), str(e)


def _col_names(x: Any) -> tuple[str, ...] | None:
    """The column names of data (a CSV header, a DataFrame's columns), if known."""
    from .names import names_of

    e = as_expr(x)
    names = names_of(e)
    return names[-1] if e.ndim == 2 else None


def cov(Z: Any, span: Span | None = None) -> Data:
    """Sample covariance (1/n) sum (z_i - mean)(z_i - mean)' of the rows of Z: divided by n, not
    n - 1 (the maximum-likelihood estimate, which the Gaussian log-likelihood -logdet(O) +
    trace(S @ O) takes). Both axes are named after Z's columns."""
    v, s = _data_arg(Z, "cov", span)
    v = dense(v)
    if v.ndim != 2:
        raise ShapeError(f"cov() needs a matrix with samples in rows; {s} has shape {fmt_shape(v.shape)}", span)
    c = v - v.mean(axis=0)
    cols = _col_names(Z)
    return Data(c.T @ c / v.shape[0], name=f"cov({s})", span=span, names=(cols, cols))


def rows(X: Any, span: Span | None = None) -> Constant:
    v, s = _data_arg(X, "rows", span)
    if np.ndim(v) < 1:
        raise ShapeError(f"rows() needs a vector or matrix; {s} is a scalar", span)
    return Constant(v.shape[0], span=span, text=f"rows({s})")


def cols(X: Any, span: Span | None = None) -> Constant:
    v, s = _data_arg(X, "cols", span)
    if np.ndim(v) != 2:
        raise ShapeError(f"cols() needs a matrix; {s} has shape {fmt_shape(np.shape(v))}", span)
    return Constant(v.shape[1], span=span, text=f"cols({s})")


def standardize(X: Any, span: Span | None = None) -> Data:
    """Columns centred and scaled to unit standard deviation, the standard deviation with divisor
    n (ddof = 0, NumPy's default and scikit-learn's StandardScaler's; R's scale() divides by
    n - 1); constant columns are left at zero. The column names are kept."""
    v, s = _data_arg(X, "standardize", span)
    v = dense(v)
    sd = v.std(axis=0)
    return Data(
        (v - v.mean(axis=0)) / np.where(sd > 0, sd, 1.0),
        name=f"standardize({s})",
        span=span,
        names=(None, _col_names(X)),
    )


def center(X: Any, span: Span | None = None) -> Data:
    """Columns centred (their means subtracted): sum_squares(center(X) @ w) / rows(X) is
    quad_form(w, cov(X)). The column names are kept."""
    v, s = _data_arg(X, "center", span)
    v = dense(v)
    if v.ndim != 2:
        raise ShapeError(f"center() needs a matrix with samples in rows; {s} has shape {fmt_shape(v.shape)}", span)
    return Data(v - v.mean(axis=0), name=f"center({s})", span=span, names=(None, _col_names(X)))


def normalize_columns(X: Any, span: Span | None = None) -> Data:
    """Columns scaled to unit Euclidean norm (paper 003, Section 6.2.2); zero columns left as is."""
    v, s = _data_arg(X, "normalize_columns", span)
    if sp.issparse(v):
        nrm = np.sqrt(np.asarray(v.multiply(v).sum(axis=0)).ravel())
        out = v @ sp.diags(1.0 / np.where(nrm > 0, nrm, 1.0))
        return Data(out, name=f"normalize_columns({s})", span=span, names=(None, _col_names(X)))
    v = dense(v)
    nrm = np.linalg.norm(v, axis=0)
    return Data(v / np.where(nrm > 0, nrm, 1.0), name=f"normalize_columns({s})", span=span, names=(None, _col_names(X)))


def onehot(y: Any, span: Span | None = None) -> Data:
    """Indicator matrix with one column per distinct label of y, in sorted label order."""
    v, s = _data_arg(y, "onehot", span)
    v = dense(v)
    if v.ndim != 1:
        raise ShapeError(f"onehot() needs a vector of labels; {s} has shape {fmt_shape(v.shape)}", span)
    labels, idx = np.unique(v, return_inverse=True)
    if len(labels) > 1000:
        raise DataError(f"onehot({s}): {len(labels)} distinct labels; is this really a label vector?", span)
    text = getattr(as_expr(y), "label_text", None) or {}  # a map {"setosa": 0, ...} names its codes
    names = tuple(text.get(float(lab), f"{lab:g}") for lab in labels)
    return Data(np.eye(len(labels))[idx], name=f"onehot({s})", span=span, names=(None, names))


def levels(y: Any, span: Span | None = None) -> Constant:
    """The number of distinct values of a label vector (the classes of ``ordinal``: its cut-points
    are ``levels(y) - 1``)."""
    v, s = _data_arg(y, "levels", span)
    v = dense(v)
    if v.ndim != 1:
        raise ShapeError(f"levels() needs a vector of labels; {s} has shape {fmt_shape(v.shape)}", span)
    return Constant(len(np.unique(v)), span=span, text=f"levels({s})")


def ones(n: Any, span: Span | None = None) -> Data:
    k = _positive_int(n, "ones", span)
    return Data(np.ones(k), name=f"ones({k})", span=span)


def eye(n: Any, span: Span | None = None) -> Data:
    k = _positive_int(n, "eye", span)
    return Data(np.eye(k), name=f"eye({k})", span=span)


def _positive_int(n: Any, fname: str, span: Span | None) -> int:
    v, s = _data_arg(n, fname, span)
    if np.ndim(v) != 0 or not np.isfinite(float(v)) or float(v) != int(v) or int(v) <= 0:
        raise ModelError(f"{fname}() needs a positive integer; got {s}", span)
    return int(v)


DATA_FUNCTIONS = {
    "cov": cov,
    "rows": rows,
    "cols": cols,
    "standardize": standardize,
    "center": center,
    "normalize_columns": normalize_columns,
    "onehot": onehot,
    "levels": levels,
    "ones": ones,
    "eye": eye,
}

__all__ = [*DATA_FUNCTIONS, "DATA_FUNCTIONS"]
