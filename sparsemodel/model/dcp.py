"""The rules of disciplined convex programming the expression tree applies: curvature (constant,
affine, convex, concave, unknown), sign and monotonicity, and how they combine under sums,
negation and scaling (Grant, Boyd & Ye 2006)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import scipy.sparse as sp

# curvature
CONSTANT = "constant"


AFFINE = "affine"


CONVEX = "convex"


CONCAVE = "concave"


UNKNOWN = "unknown"


# sign
NONNEG = "nonnegative"


NONPOS = "nonpositive"


ANYSIGN = "unknown sign"


# monotonicity
INCREASING = "increasing"


DECREASING = "decreasing"


NONMONOTONE = "nonmonotone"


_ids = itertools.count()


Shape = tuple[int, ...]


def add_curvature(a: str, b: str) -> str:
    if a == CONSTANT:
        return b
    if b == CONSTANT:
        return a
    if a == AFFINE:
        return b
    if b == AFFINE:
        return a
    return a if a == b else UNKNOWN


def negate_curvature(c: str) -> str:
    return {CONVEX: CONCAVE, CONCAVE: CONVEX}.get(c, c)


def scale_curvature(c: str, sign: str) -> str:
    """Curvature of (constant with the given sign) * (expression of curvature c)."""
    if c in (CONSTANT, AFFINE):
        return c
    if sign == NONNEG:
        return c
    if sign == NONPOS:
        return negate_curvature(c)
    return UNKNOWN


def magnitude_monotonicity(sign: str) -> str:
    """The monotonicity of a function that grows with |z| (square, sum_squares, huber) at an
    argument of this sign: increasing where it is nonnegative, decreasing where nonpositive."""
    return INCREASING if sign == NONNEG else DECREASING if sign == NONPOS else NONMONOTONE


def mul_sign(a: str, b: str) -> str:
    if ANYSIGN in (a, b):
        return ANYSIGN
    return NONNEG if a == b else NONPOS


def add_sign(a: str, b: str) -> str:
    return a if a == b else ANYSIGN


def negate_sign(s: str) -> str:
    return {NONNEG: NONPOS, NONPOS: NONNEG}.get(s, s)


def value_sign(v: Any) -> str:
    """Sign of a numeric value (dense or sparse)."""
    if sp.issparse(v):
        data = v.data
        if data.size == 0:
            return NONNEG
        lo, hi = float(data.min()), float(data.max())
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    else:
        a = np.asarray(v, dtype=float)
        if a.size == 0:
            return NONNEG
        lo, hi = float(np.min(a)), float(np.max(a))
    if lo >= 0:
        return NONNEG
    if hi <= 0:
        return NONPOS
    return ANYSIGN
