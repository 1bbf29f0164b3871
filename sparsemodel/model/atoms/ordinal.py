"""Ordinal regression: ``ordinal(z, theta, y)``, the negative log-likelihood of the cumulative
logit (proportional odds) model of McCullagh (1980), "Regression models for ordinal data", JRSS B
42(2):

    P(y <= j | x) = sigmoid(theta_j - z),   z = x'w,   theta_0 < theta_1 < ... < theta_{J-2},

for J ordered classes (the sorted distinct values of y, in that order). Sample i of class c has the
probability sigmoid(a_i) - sigmoid(b_i), a_i = theta_c - z_i and b_i = theta_{c-1} - z_i (a = +inf
for the last class, b = -inf for the first), and contributes

    -log(sigmoid(a) - sigmoid(b)) = softplus(-a) + softplus(b) - log(1 - exp(b - a)),

computed in that form (no cancellation; each piece stays finite at the infinite ends). The loss is
jointly convex in (z, theta) (the logistic density is log-concave, so the probability of an
interval is log-concave in its ends; Pratt 1981) and +inf where a cut-point of an observed class
is not above the one before it: the cut-points are kept in order by the loss's domain -- every
line search of a solver backs off from +inf -- with no constraint to write.

The cut-points are shared by every sample, so the loss is one number of the whole vector
[z; theta] (:class:`~.base.WholeLoss`, ``loss_args = (0, 1)``); its gradient and Hessian-vector
product cost O(n J). The sign convention is McCullagh's (a larger x'w moves y up); abess's
``OrdinalRegression`` uses P(y <= j) = sigmoid(x'beta + eps_j), i.e. beta = -w.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import DataError, ShapeError, Span
from ..dcp import CONVEX, NONMONOTONE, NONNEG
from ..expr import as_expr, dense, fmt_shape
from .base import WholeLoss, expit


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x)


class ordinal(WholeLoss):
    """The cumulative-logit negative log-likelihood of the linear predictor ``z`` (one entry per
    sample), the ``J - 1`` cut-points ``theta`` (a variable) and the ordered labels ``y`` (data;
    J = the number of distinct values), with optional case ``weights`` (data, >= 0: sample i's
    term counted w_i times, so an integer weight is the sample repeated) -- the module docstring
    has the model."""

    name = "ordinal"
    curvature_kind = CONVEX
    loss_args = (0, 1)
    curvature_sup = None  # the curvature grows without bound as two cut-points meet

    def __init__(self, z: Any, theta: Any, y: Any, weights: Any = None, levels: Any = None, span: Span | None = None):
        args = (z, theta, y) if weights is None else (z, theta, y, weights)
        super().__init__(*args, span=span)
        zt, th, yt = self.args[:3]
        if zt.ndim != 1:
            raise ShapeError(
                f"ordinal's linear predictor must be a vector (one entry per sample); {zt} has shape "
                f"{fmt_shape(zt.shape)}",
                span,
                "write ordinal(X @ w, theta, y) with X the samples in rows",
            )
        if not yt.is_constant():
            raise DataError(f"ordinal's labels must be data; {yt} depends on a variable", span)
        if yt.shape != zt.shape:
            raise ShapeError(
                f"ordinal's labels {yt} have shape {fmt_shape(yt.shape)}, the linear predictor {zt} {fmt_shape(zt.shape)}",
                span,
                "one label per sample (row of X)",
            )
        yv = np.ravel(dense(yt.constant_value()))
        if not np.all(np.isfinite(yv)):
            raise DataError(f"ordinal's labels {yt} have values that are not finite numbers", span)
        if levels is None:
            self.levels, cls = np.unique(yv, return_inverse=True)
        else:  # the classes of the whole data, kept on a subset of its rows (a fold may lack one)
            lv = as_expr(levels)
            self.levels = np.unique(np.ravel(dense(lv.constant_value())))
            cls = np.searchsorted(self.levels, yv)
            stray = (cls >= len(self.levels)) | (self.levels[np.minimum(cls, len(self.levels) - 1)] != yv)
            if stray.any():
                raise DataError(f"ordinal's label {yv[np.flatnonzero(stray)[0]]:g} is not one of its levels {lv}", span)
        J = len(self.levels)
        if J < 2:
            raise DataError(f"ordinal's labels {yt} have one value only ({self.levels[0]:g}): nothing to order", span)
        if th.ndim > 1 or th.size != J - 1:
            lv = ", ".join(f"{v:g}" for v in self.levels[:8]) + (", ..." if J > 8 else "")
            raise ShapeError(
                f"ordinal's labels {yt} have {J} classes ({lv}), which need {J - 1} cut-points; "
                f"{th} has shape {fmt_shape(th.shape)}",
                span,
                f"declare the cut-points as var theta[{J - 1}] (or var theta[levels(y) - 1])",
            )
        self.w = np.ones(len(cls)) if weights is None else self._case_weights(zt, span)
        self.cls = cls.astype(np.int64)
        self.J = J
        n = len(cls)
        self.has_a = cls < J - 1  # a_i = theta_c - z_i is finite (not the last class)
        self.has_b = cls > 0  # b_i = theta_{c-1} - z_i is finite (not the first class)
        self.Ma = np.zeros((n, J - 1))  # a = theta @ Ma' - z on has_a
        self.Ma[np.flatnonzero(self.has_a), cls[self.has_a]] = 1.0
        self.Mb = np.zeros((n, J - 1))
        self.Mb[np.flatnonzero(self.has_b), cls[self.has_b] - 1] = 1.0

    def _case_weights(self, zt: Any, span: Span | None) -> np.ndarray:
        wt = self.args[3]
        if not wt.is_constant():
            raise DataError(f"ordinal's weights must be data; {wt} depends on a variable", span)
        if wt.shape != zt.shape:
            raise ShapeError(
                f"ordinal's weights {wt} have shape {fmt_shape(wt.shape)}, the linear predictor {zt} {fmt_shape(zt.shape)}",
                span,
                "one weight per sample (row of X)",
            )
        w = np.ravel(dense(wt.constant_value())).astype(float)
        bad = ~(np.isfinite(w) & (w >= 0))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DataError(
                f"ordinal's weights {wt} must be finite and nonnegative; entry {i} is {w[i]:g}",
                span,
                "case weights: a weight of 2 counts a sample twice, 0 leaves it out",
            )
        return w

    @property
    def params(self) -> dict[str, Any]:
        """The classes (so that the model on a subset of the rows, a fold, codes them alike)."""
        return {"levels": tuple(float(v) for v in self.levels)}

    def monotonicity(self, i: int) -> str:
        return NONMONOTONE

    def _sign_of(self) -> str:
        return NONNEG

    def no_conjugate_reason(self) -> str:
        return (
            "the cumulative-logit likelihood shares its cut-points among all samples; its convex conjugate is an "
            "infimal convolution over them, which has no closed form"
        )

    # ------------------------------------------------------------------ numerics
    def _ends(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(z, a, b) from the loss vector [z; theta] (..., n + J - 1): a and b per sample, +-inf at
        the open ends."""
        n = len(self.cls)
        eta, th = z[..., :n], z[..., n:]
        a = np.where(self.has_a, th @ self.Ma.T - eta, np.inf)
        b = np.where(self.has_b, th @ self.Mb.T - eta, -np.inf)
        return eta, a, b

    def _pieces(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(the per-sample loss, d loss / d a, d loss / d b), each times the sample's weight (a
        weight of 0 keeps +inf outside the domain: the cut-points stay ordered)."""
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            d = a - b  # > 0 inside the domain (+inf at an open end)
            inside = d > 0
            gap = -np.expm1(-np.where(inside, d, 1.0))  # 1 - exp(b - a) in (0, 1]
            v = np.where(inside, _softplus(-a) + _softplus(b) - np.log(gap), np.inf)
            h = np.where(inside & np.isfinite(d), 1.0 / np.expm1(np.where(inside, d, 1.0)), 0.0)  # 1/(e^d - 1)
            la = np.where(self.has_a, -expit(-a) - h, 0.0)
            lb = np.where(self.has_b, expit(b) + h, 0.0)
            v = np.where(np.isfinite(v), self.w * v, v)
        return v, self.w * la, self.w * lb

    def derivs(self, z: np.ndarray, order: int = 1) -> tuple[Any, Any, None]:
        """(the loss, its gradient over [z; theta], None) on the last axis of z."""
        z = np.asarray(z, dtype=float)
        _, a, b = self._ends(z)
        v, la, lb = self._pieces(a, b)
        total = np.sum(v, axis=-1)
        if order < 1:
            return total, None, None
        g = np.concatenate([-(la + lb), la @ self.Ma + lb @ self.Mb], axis=-1)
        return total, g, None

    def hessian_apply(self, z: np.ndarray, U: np.ndarray) -> np.ndarray:
        """The Hessian at [z; theta] applied to U ((n + J - 1,) or (n + J - 1, q)): per sample the
        2 x 2 Hessian in (a, b), [[s_a + k, -k], [-k, s_b + k]] with s = sigmoid(.) sigmoid(-.) and
        k = h (1 + h), h = 1 / (e^(a - b) - 1), pulled back through a = theta_c - z, b = theta_{c-1} - z."""
        z = np.asarray(z, dtype=float)
        U = np.asarray(U, dtype=float)
        n = len(self.cls)
        _, a, b = self._ends(z)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            d = a - b
            ok = (d > 0) & np.isfinite(d)
            h = np.where(ok, 1.0 / np.expm1(np.where(ok, d, 1.0)), 0.0)
            k = h * (1.0 + h)
            k = self.w * k
            sa = self.w * np.where(self.has_a, expit(a) * expit(-a), 0.0)
            sb = self.w * np.where(self.has_b, expit(b) * expit(-b), 0.0)
        cols = U.ndim == 2
        Ue, Ut = U[:n], U[n:]
        da = np.where(self.has_a[:, None] if cols else self.has_a, self.Ma @ Ut - Ue, 0.0)
        db = np.where(self.has_b[:, None] if cols else self.has_b, self.Mb @ Ut - Ue, 0.0)
        if cols:
            sa, sb, k = sa[:, None], sb[:, None], k[:, None]
        ra = (sa + k) * da - k * db
        rb = -k * da + (sb + k) * db
        return np.concatenate([-(ra + rb), self.Ma.T @ ra + self.Mb.T @ rb], axis=0)
