"""A data term read sample by sample: l_i(x) for every row i of its sample data.

A loss written as a sum over samples (``mean(logistic(-v * (X @ w + b)))``, ``sum_squares(X @ w - y)
/ (2 * n)``, ``sum(exp(z) - y * z)``, the softmax ``logsumexp(Z, axis=1) - sum(Y * Z, axis=1)``) is,
in its composite form (:func:`sparsemodel.objective.structure.decompose`),

    f(x) = const + sum_t c_t sum_j w_tj phi_t((A_t x + b_t)_j)

where every term's entries (or rows, for a row-wise phi) lie on the sample axis. Summing each term's
values over the entries of one row gives l_i(x), and f(x) = const + sum_i l_i(x) exactly (up to
rounding; tested). Linear pieces (the ``- y * z`` of the Poisson loss) are terms with phi the
identity, kept per sample here (the design folds them into one vector). Cross-validation compares
two bounds by the per-sample differences of their held-out losses
(:func:`sparsemodel.workflows.select.one_se_paired`).

A loss that couples its samples (``cox``'s risk sets, ``ordinal``'s shared cut-points, a
``custom_loss``), a term without the sample axis, or an objective without a composite form has no
per-sample values: :func:`sample_values` returns None.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .affine import affine_map
from .structure import decompose
from .terms import Term

if TYPE_CHECKING:
    from ..model.expr import Expr
    from .evaluator import Layout


class SampleValues:
    """l_i(x) of each of the ``n`` samples of a data term, and the term's constant."""

    def __init__(self, terms: list[tuple[Term | None, float, np.ndarray | None, object]], const: float, n: int):
        self.terms = terms  # (the term, or None for a linear one; its coefficient; its weights; its map)
        self.const = const
        self.n = n
        self._dense: list[tuple[np.ndarray, np.ndarray] | None] | None = None  # (values_many)
        self._rows_of: list[tuple[np.ndarray, np.ndarray] | None] | None = None  # (on_rows)

    def values(self, x: np.ndarray) -> np.ndarray:
        """The n per-sample losses at the flat point x (the data term is const + their sum)."""
        return self.values_many(np.asarray(x, dtype=float).reshape(1, -1))[0]

    def values_many(self, X: np.ndarray) -> np.ndarray:
        """The per-sample losses at each row of X (points x coordinates), as (points, n): a
        cross-validation fold's held-out losses along its path. With each map's dense Jacobian
        (made once, where it has at most DENSE_LIMIT entries) one product per point and term, the
        loss over all points at once; every row the same bits as the point alone. Else each map's
        own evaluation, point by point."""
        X = np.asarray(X, dtype=float)
        if self._dense is None:
            self._dense = [_dense_map(amap) for _, _, _, amap in self.terms]
        out = np.zeros((len(X), self.n))
        for (term, coef, weights, amap), jb in zip(self.terms, self._dense):
            if jb is None:
                Z = np.array([np.asarray(amap.value(x), dtype=float).ravel() for x in X]).reshape(len(X), -1)
            else:
                J, b = jb
                Z = np.empty((len(X), J.shape[0]))
                for i, x in enumerate(X):  # (a product per point: its bits do not depend on the others)
                    np.dot(J, x, out=Z[i])
                Z += b
            if term is None:  # a linear piece: c * sum_j w_j z_j
                V = Z if weights is None else weights * Z
            else:  # weights applied by the term
                V = np.asarray(term.derivs(Z, 0)[0], dtype=float)
            out += coef * V.reshape(len(X), self.n, -1).sum(axis=2)
        return out

    def on_rows(self, rows: np.ndarray, scale: int) -> SampleValues | None:
        """The per-sample reading of the data term on the samples ``rows`` alone, from this one's
        (every map's rows, offsets and weights of those samples), where
        :func:`~sparsemodel.model.samples.subset_scale` proved the term on a subset of the rows to be
        const + sum of its samples' values (``scale`` 0) or const + (n / |rows|) times that sum
        (``scale`` 1, a mean over the samples: each coefficient times n / |rows|). None where a map
        has no dense Jacobian (then the subset's term is read afresh)."""
        if self._dense is None:
            self._dense = [_dense_map(amap) for _, _, _, amap in self.terms]
        if self._rows_of is None:  # (a map without a dense Jacobian: its columns, for the subsets only)
            self._rows_of = [
                jb if jb is not None else _columns_map(a) for jb, (_, _, _, a) in zip(self._dense, self.terms)
            ]
        rows = np.asarray(rows, dtype=np.int64)
        m = len(rows)
        ratio = self.n / m if scale else 1.0
        terms: list[tuple[Term | None, float, np.ndarray | None, object]] = []
        dense: list[tuple[np.ndarray, np.ndarray] | None] = []
        for (term, coef, weights, amap), jb in zip(self.terms, self._rows_of):
            if jb is None:
                return None
            J, b = jb
            per = J.shape[0] // self.n  # (entries of one sample: C order, a sample's entries together)
            idx = rows if per == 1 else (rows[:, None] * per + np.arange(per)).ravel()
            shape = (m, *tuple(amap.shape)[1:])
            dense.append((J[idx], np.ascontiguousarray(b[idx])))
            if term is None:
                terms.append((None, coef * ratio, weights[idx] if weights is not None else None, _Rows(shape)))
            else:
                w = term.weights
                w = None if w is None else (w[rows] if term.rowwise else w[idx])
                terms.append((Term(1.0, term.phi, _Rows(shape), w, term.rowwise), coef * ratio, None, _Rows(shape)))
        out = SampleValues(terms, self.const, m)
        out._dense = dense
        return out

    def total(self, x: np.ndarray) -> float:
        """The data term at x: const + sum_i l_i(x)."""
        return self.const + float(self.values(x).sum())


class _Rows:
    """The shape of a map read on a subset of its samples (:meth:`SampleValues.on_rows`: what a term
    asks of its map)."""

    def __init__(self, shape: tuple[int, ...]):
        self.shape = shape
        self.size = int(np.prod(shape))


DENSE_LIMIT = 1_000_000  # entries of a map's dense Jacobian values_many makes (8 MB)


def _dense_map(amap: object) -> tuple[np.ndarray, np.ndarray] | None:
    """A map's (dense Jacobian, offset), or None when it has none or it would be too large."""
    dense_jacobian = getattr(amap, "dense_jacobian", None)
    size, n = getattr(amap, "size", None), getattr(amap, "n", None)
    if dense_jacobian is None or size is None or n is None or size * n > DENSE_LIMIT:
        return None
    return dense_jacobian(), np.broadcast_to(np.asarray(amap.b, dtype=float).reshape(-1), (size,))


def _columns_map(amap: object) -> tuple[np.ndarray, np.ndarray] | None:
    """A map without a dense Jacobian of its own (an expression's, ``sum(Y * Z, axis=1)``): its
    columns made dense, and its offset, or None when they would be too large."""
    size, n = getattr(amap, "size", None), getattr(amap, "n", None)
    if size is None or n is None or size * n > DENSE_LIMIT or not hasattr(amap, "columns"):
        return None
    J = amap.columns(np.arange(n, dtype=np.int64))
    J = np.ascontiguousarray(J.toarray() if hasattr(J, "toarray") else J, dtype=float)
    return J, np.broadcast_to(np.asarray(amap.b, dtype=float).reshape(-1), (size,))


def sample_values(expr: Expr, layout: Layout, n: int) -> SampleValues | None:
    """The per-sample reading of the data term ``expr`` over its ``n`` sample rows (see the module
    docstring), or None when it has none."""
    comp = decompose(expr, layout)
    if comp is None:
        return None
    terms: list[tuple[Term | None, float, np.ndarray | None, object]] = []
    for rt in comp.terms:
        if rt.whole:
            return None
        amap = affine_map(rt.affine, layout)
        shape = tuple(amap.shape)
        if not shape or shape[0] != n:  # no sample axis: its value belongs to no one sample
            return None
        if rt.phi is None:
            terms.append((None, rt.coef, rt.weights, amap))
        else:
            terms.append((Term(1.0, rt.phi, amap, rt.weights, rt.rowwise), rt.coef, None, amap))
    return SampleValues(terms, comp.const, n)


__all__ = ["SampleValues", "sample_values"]
