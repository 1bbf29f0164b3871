"""The unit-ball constraint of sparse PCA: ``norm(w) <= r`` (also written ``sum_squares(w) <= r^2``
or ``norm(w) == r``) on a vector variable. It is accepted only inside the recognised sparse PCA
form (:mod:`sparsemodel.model.forms`); its set is :mod:`sparsemodel.sets.ball`."""

from __future__ import annotations

from typing import Any

from ...errors import ConstraintError, Span
from ..expr import Variable, as_expr, fmt_shape
from .base import Constraint, _bound_value


class NormExpr:
    """``norm(w)``: the Euclidean norm of a vector variable, a constraint target (``norm(w) <= 1``);
    it is not an atom of objectives."""

    def __init__(self, w: Any, span: Span | None = None):
        e = as_expr(w)
        if not isinstance(e, Variable) or e.ndim != 1:
            raise ConstraintError(
                f"norm() bounds a vector variable; got {e} of shape {fmt_shape(e.shape)}",
                span or e.span,
                "write norm(w) <= 1 with w declared as var w[p]",
            )
        self.var = e
        self.span = span

    def constraint(self, op: str, value: Any, span: Span | None = None) -> BallConstraint:
        """``norm(w) <= r`` (or ``== r``, the sphere, with the same maximizers in sparse PCA)."""
        if op == ">=":
            raise ConstraintError(
                f"{self} >= ... bounds the norm from below (a non-convex set)",
                span or self.span,
                "write norm(w) <= 1 (sparse PCA: maximize quad_form(w, S) subject to norm(w) <= 1, nnz(w) <= k)",
            )
        return BallConstraint(self.var, value, span=span or self.span, sphere=op == "==")

    def __le__(self, r: Any) -> BallConstraint:
        return self.constraint("<=", r)

    def __str__(self) -> str:
        return f"norm({self.var})"


class BallConstraint(Constraint):
    """``norm(w) <= radius`` (``sphere``: written ``norm(w) == radius``; for the sparse PCA form,
    whose objective is a positive semidefinite quadratic form, both have the same maximizers)."""

    kind = "ball"

    def __init__(self, w: Variable, radius: Any, span: Span | None = None, sphere: bool = False, written: str = ""):
        self.var = w
        self.span = span
        self.sphere = sphere
        what = written or f"norm({w})"
        r = _bound_value(as_expr(radius), what, span)
        if not r > 0:
            raise ConstraintError(f"{what}: the radius {r:g} must be positive", span, "write norm(w) <= 1")
        self.radius = r
        self.written = written

    @property
    def variable(self) -> Variable:
        return self.var

    def __str__(self) -> str:
        return f"norm({self.var}) {'==' if self.sphere else '<='} {self.radius:g}"
