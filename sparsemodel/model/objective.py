"""The objective of a model: ``minimize f`` or ``maximize f`` as written, and why one is refused
(the DCP rules: a convex minimization or a concave maximization; the recognised non-convex forms are
:mod:`.forms`)."""

from __future__ import annotations

from typing import Any

from ..errors import ConvexityError, ModelError, ShapeError, Span
from .dcp import UNKNOWN
from .expr import Expr, as_expr, fmt_shape


class Objective:
    """The objective: ``minimize f`` or ``maximize f``. ``expr`` is always the function minimized
    (-f for ``maximize``: what the lowering and every solver see, so ``Result.objective`` of a
    maximized model is -f, and ``Result.extra['maximum']`` is f); ``stated`` is f as written."""

    def __init__(self, expr: Any, span: Span | None = None, sense: str = "minimize"):
        e = as_expr(expr)
        if e.shape != ():
            raise ShapeError(
                f"the objective must be a scalar; {e} has shape {fmt_shape(e.shape)}",
                span or e.span,
                "reduce it with sum(...), mean(...) or sum_squares(...)",
            )
        if sense not in ("minimize", "maximize"):
            raise ModelError(f"an objective is minimized or maximized, not {sense!r}", span or e.span)
        self.sense = sense
        self.stated = e
        self.expr = e if sense == "minimize" else -e
        if sense == "maximize":
            self.expr.span = e.span
        self.span = span or e.span

    @property
    def maximize(self) -> bool:
        return self.sense == "maximize"

    def __str__(self) -> str:
        return f"{self.sense} {self.stated}"


def minimize(expr: Any) -> Objective:
    return Objective(expr)


def maximize(expr: Any) -> Objective:
    """``sm.maximize(f)``: maximize f, solved as the minimization of -f (a concave f, or one of
    the recognised non-convex forms: sparse PCA, see :func:`sparsemodel.model.forms.sparse_pca`)."""
    return Objective(expr, sense="maximize")


def find_nonconvex(e: Expr) -> Expr:
    """The sub-expression to blame: for an unknown curvature, the deepest node where DCP
    composition fails (all its children have known curvature); for a concave expression, the
    innermost concave piece it is built from."""
    node = e
    bad_kind = UNKNOWN if e.curvature == UNKNOWN else e.curvature
    while True:
        bad = next((a for a in node.args if a.curvature == bad_kind), None)
        if bad is None:
            return node
        node = bad


def convexity_error(e: Expr, maximized: Expr | None = None) -> ConvexityError | None:
    """Why the objective minimized, ``e``, is refused (None when it is convex); ``maximized``: the
    f of ``maximize f`` (e = -f), which must be concave."""
    if e.is_convex():
        return None
    if maximized is not None:
        culprit = find_nonconvex(maximized) if maximized.curvature != "convex" else maximized
        return ConvexityError(
            f"maximize needs a concave objective: {culprit.curvature_reason()}",
            culprit.span or maximized.span,
            "sparsemodel maximizes concave functions (minimizes convex ones); the one non-convex form it "
            "recognises is sparse PCA: maximize quad_form(w, S) or sum_squares(X @ w) subject to "
            "norm(w) <= 1 and nnz(w) <= k (docs/language.md, 'Sparse PCA')",
        )
    culprit = find_nonconvex(e)
    where = culprit.span or e.span
    return ConvexityError(
        f"the objective is not convex: {culprit.curvature_reason()}",
        where,
        "sparsemodel minimizes convex losses under structural constraints; rewrite the objective "
        "with convex atoms of affine expressions (DCP rules), or define the loss as a func, whose "
        "convexity is checked symbolically",
    )
