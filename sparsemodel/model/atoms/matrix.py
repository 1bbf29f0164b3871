"""Atoms of square matrices: ``trace``, ``logdet`` (the Gaussian log-likelihood of a precision
matrix, paper 000 Section 5.3) and ``quad_form``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import ModelError, ShapeError, Span
from ..dcp import (
    AFFINE,
    CONCAVE,
    CONVEX,
    NONMONOTONE,
    UNKNOWN,
)
from ..expr import dense, fmt_shape
from .base import Atom


def _square_matrix(shapes, args, span, name):
    s = shapes[0]
    if len(s) != 2 or s[0] != s[1]:
        raise ShapeError(f"{name} needs a square matrix; {args[0]} has shape {fmt_shape(s)}", span)
    return ()


class trace(Atom):
    name = "trace"
    curvature_kind = AFFINE

    def _shape(self, shapes, args, span):
        return _square_matrix(shapes, args, span, self.name)

    def forward(self, vals):
        return float(dense(vals[0]).trace())

    def vjp(self, g, vals, out, needs):
        return [g * np.eye(self.args[0].shape[0])]


class logdet(Atom):
    """log det X for X symmetric positive definite (of the symmetric part (X + X')/2 in general);
    -inf outside the domain."""

    name = "logdet"
    curvature_kind = CONCAVE

    def _shape(self, shapes, args, span):
        return _square_matrix(shapes, args, span, self.name)

    def forward(self, vals):
        X = dense(vals[0])
        try:
            L = np.linalg.cholesky((X + X.T) / 2)
        except np.linalg.LinAlgError:
            return -np.inf
        return float(2.0 * np.log(np.diag(L)).sum())

    def vjp(self, g, vals, out, needs):
        # value and gradient are those of log det(sym(X)), sym(X) = (X + X')/2: identical for the
        # symmetric matrices this atom is meant for, and consistent for any other input
        X = dense(vals[0])
        try:
            inv = np.linalg.inv((X + X.T) / 2)
        except np.linalg.LinAlgError:
            inv = np.full_like(X, np.nan)
        return [g * (inv + inv.T) / 2]


class quad_form(Atom):
    """x' P x with P a constant matrix; convex when P is positive semidefinite."""

    name = "quad_form"

    def __init__(self, x: Any, P: Any, span: Span | None = None):
        super().__init__(x, P, span=span)
        Pe = self.args[1]
        if not Pe.is_constant():
            raise ModelError(f"quad_form's matrix must be constant; {Pe} depends on a variable", span)
        Pv = dense(Pe.constant_value())
        w = np.linalg.eigvalsh((Pv + Pv.T) / 2)
        tol = 1e-10 * max(1.0, float(np.abs(w).max()))
        self.curvature_kind = CONVEX if w.min() >= -tol else CONCAVE if w.max() <= tol else UNKNOWN

    def _shape(self, shapes, args, span):
        x, P = shapes
        if len(x) != 1 or P != (x[0], x[0]):
            raise ShapeError(
                f"quad_form(x, P) needs a vector x of length n and an (n,n) matrix P; got {fmt_shape(x)} and {fmt_shape(P)}",
                span,
            )
        return ()

    def monotonicity(self, i):
        return NONMONOTONE

    def _curvature(self):
        if self.curvature_kind == UNKNOWN and not self.args[0].is_constant():
            return UNKNOWN
        return super()._curvature()

    def curvature_reason(self):
        if self.curvature_kind == UNKNOWN:
            return f"{self}: the matrix {self.args[1]} is indefinite"
        return super().curvature_reason()

    def forward(self, vals):
        x, P = dense(vals[0]), vals[1]
        return float(x @ (P @ x))

    def vjp(self, g, vals, out, needs):
        x, P = dense(vals[0]), vals[1]
        gx = g * (np.asarray(P @ x).ravel() + np.asarray(P.T @ x).ravel())
        return [gx, np.outer(x, x) * g if needs[1] else None]
