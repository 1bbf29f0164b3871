"""The elementwise atoms, each a loss phi with its derivatives, curvature bound and convex conjugate:
``square``, ``exp``, ``log``, ``logistic`` (log(1 + e^z)), ``huber``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import ModelError, Span
from ..dcp import (
    CONCAVE,
    CONVEX,
    NONNEG,
    magnitude_monotonicity,
)
from ..expr import OPERATORS, as_expr
from .base import Elementwise, expit


def _xlogx(s: np.ndarray) -> np.ndarray:
    """s log s with 0 log 0 = 0 (s >= 0)."""
    return np.where(s > 0, s * np.log(np.where(s > 0, s, 1.0)), 0.0)


class square(Elementwise):
    name = "square"
    curvature_kind = CONVEX
    curvature_sup = 2.0
    quadratic = True
    conjugate_interval = (-np.inf, np.inf, False, False)

    def monotonicity(self, i):
        return magnitude_monotonicity(self.args[0].sign)

    def _sign_of(self):
        return NONNEG

    def fn(self, z):
        return z * z

    def d1(self, z):
        return 2.0 * z

    def d2(self, z):
        return np.full_like(z, 2.0, dtype=float)

    def _conjugate(self, s):
        return 0.25 * s * s


class exp(Elementwise):
    name = "exp"
    curvature_kind = CONVEX
    conjugate_interval = (0.0, np.inf, True, False)  # the Poisson loss: s log s - s, 0 at s = 0

    def _sign_of(self):
        return NONNEG

    def fn(self, z):
        return np.exp(z)

    d1 = fn
    d2 = fn

    def derivs(self, z, order=2):
        # one exp for all three (the Poisson loss's Newton steps): copies, never one array three times
        with np.errstate(over="ignore"):
            e = np.exp(z)
        return e, (e.copy() if order >= 1 else None), (e.copy() if order >= 2 else None)

    def _conjugate(self, s):
        return _xlogx(s) - s


class log(Elementwise):
    """log z, concave: its loss is -log z (a Gamma log-likelihood's), whose conjugate is
    -1 - log(-s) on s < 0."""

    name = "log"
    curvature_kind = CONCAVE
    curvature_sup = 0.0  # sup of -1/z^2 over z > 0 (not attained); its loss -log z has no bound
    conjugate_interval = (-np.inf, 0.0, False, False)

    def fn(self, z):
        # -inf outside the domain so that minimizing -log(.) sees +inf and line searches back off
        return np.where(z > 0, np.log(np.where(z > 0, z, 1.0)), -np.inf)

    def d1(self, z):
        return 1.0 / z

    def d2(self, z):
        return -1.0 / (z * z)

    def _conjugate(self, s):
        return -1.0 - np.log(-s)


class logistic(Elementwise):
    """log(1 + exp(z)), computed without overflow."""

    name = "logistic"
    curvature_kind = CONVEX
    curvature_sup = 0.25  # at z = 0
    conjugate_interval = (0.0, 1.0, True, True)  # s log s + (1 - s) log(1 - s), 0 at both ends

    def _sign_of(self):
        return NONNEG

    def fn(self, z):
        return np.logaddexp(0.0, z)

    def d1(self, z):
        return expit(z)

    def d2(self, z):
        s = expit(z)
        return s * (1.0 - s)

    def derivs(self, z, order=2):
        # one exp and one log1p for all three (they dominate Newton steps on logistic losses)
        e = np.exp(-np.abs(z))
        v = np.maximum(z, 0.0) + np.log1p(e)
        if order < 1:
            return v, None, None
        inv = 1.0 / (1.0 + e)
        d1 = np.where(z >= 0, inv, e * inv)
        return v, d1, (e * inv * inv if order >= 2 else None)

    def _conjugate(self, s):
        return _xlogx(s) + _xlogx(1.0 - s)

    def logits(self, z):
        """log(1 + e^z) = log(e^0 + e^z): the log-partition of two classes with logits (0, z). So
        ``logistic(-y * z)`` with labels y in {-1, +1} is -log p_0, the probability expit(y z) of
        the observed label, and ``logistic(z) - y * z`` with y in {0, 1} is -log p_y."""
        z = np.asarray(z, dtype=float)
        return np.stack([np.zeros_like(z), z], axis=-1)


class huber(Elementwise):
    """x^2 for |x| <= M, 2M|x| - M^2 otherwise (cvxpy's convention)."""

    name = "huber"
    curvature_kind = CONVEX
    curvature_sup = 2.0  # on |x| <= M

    def __init__(self, x: Any, M: Any = 1.0, span: Span | None = None):
        m = as_expr(M)
        if not m.is_constant() or m.shape != ():
            raise ModelError(f"huber's threshold M must be a positive scalar constant; got {m}", span)
        self.M = float(m.constant_value())
        if self.M <= 0:
            raise ModelError(f"huber's threshold M must be positive; got {self.M}", span)
        super().__init__(x, span=span)

    @property
    def params(self):
        return {"M": self.M}

    @property
    def conjugate_interval(self):  # phi' runs over [-2M, 2M]
        return (-2.0 * self.M, 2.0 * self.M, True, True)

    def extra_repr(self):
        return f"M={self.M:g}"

    def monotonicity(self, i):
        return magnitude_monotonicity(self.args[0].sign)

    def _sign_of(self):
        return NONNEG

    def fn(self, z):
        a = np.abs(z)
        return np.where(a <= self.M, z * z, 2 * self.M * a - self.M**2)

    def d1(self, z):
        return np.where(np.abs(z) <= self.M, 2 * z, 2 * self.M * np.sign(z))

    def d2(self, z):
        return np.where(np.abs(z) <= self.M, 2.0, 0.0)

    def _conjugate(self, s):
        return 0.25 * s * s


OPERATORS["square"] = square  # x ** 2
