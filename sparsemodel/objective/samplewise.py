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

    def values(self, x: np.ndarray) -> np.ndarray:
        """The n per-sample losses at the flat point x (the data term is const + their sum)."""
        out = np.zeros(self.n)
        for term, coef, weights, amap in self.terms:
            z = np.asarray(amap.value(x), dtype=float).ravel()
            if term is None:  # a linear piece: c * sum_j w_j z_j
                v = z if weights is None else weights * z
            else:  # weights applied by the term
                v = np.asarray(term.derivs(z, 0)[0], dtype=float)
            out += coef * v.reshape(self.n, -1).sum(axis=1)
        return out

    def total(self, x: np.ndarray) -> float:
        """The data term at x: const + sum_i l_i(x)."""
        return self.const + float(self.values(x).sum())


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
