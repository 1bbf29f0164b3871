"""The convex side constraints kept inside the restricted solves: the eigenvalue box
``alpha <= eig(O) <= beta`` (with the data-driven ``auto`` bounds of paper 000, Section 5.3) and
coordinate boxes ``lo <= w <= hi``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import ConstraintError, ShapeError, Span
from ..arith import Index
from ..expr import Expr, Variable, as_expr, dense, fmt_shape
from .base import Constraint, _bound_value, _variable_view

AUTO = "auto"  # a bound of the eigenvalue box computed from the data (paper 000, Section 5.3)


class EigExpr:
    """``eig(O)``: bound it below and/or above (``alpha <= eig(O) <= beta`` in a model file; either
    bound may be ``auto``, the rule of paper 000, Section 5.3, with ``eig(O, xi = 0.01)``)."""

    def __init__(self, O: Any, xi: Any = None, span: Span | None = None):
        e = as_expr(O)
        if not isinstance(e, Variable) or e.ndim != 2 or e.shape[0] != e.shape[1]:
            raise ConstraintError(
                f"eig() applies to a square matrix variable; got {e} of shape {fmt_shape(e.shape)}", span
            )
        if not e.symmetric:
            raise ConstraintError(
                f"eig({e}) bounds the eigenvalues of a symmetric matrix; {e} is not declared symmetric",
                span,
                f"declare it with: var {e}[{e.shape[0]}, {e.shape[1]}] symmetric (Python: symmetric=True)",
            )
        self.var = e
        self.span = span
        self.xi = 1e-2 if xi is None else _bound_value(as_expr(xi), f"eig({e}, xi = ...)", span)
        if not self.xi > 0:
            raise ConstraintError(f"eig({e}, xi = {self.xi:g}): xi must be positive", span)

    def _bound(self, v: Any) -> Any:
        return AUTO if isinstance(v, str) and v == AUTO else as_expr(v)

    def constraint(self, op: str, value: Any, span: Span | None = None) -> EigBoxConstraint:
        """``eig(O) >= alpha`` or ``eig(O) <= beta``: one side of the eigenvalue box (``==`` refused)."""
        if op == "==":
            raise ConstraintError(
                f"{self} == ... fixes every eigenvalue", span or self.span, "write alpha <= eig(O) <= beta"
            )
        v = self._bound(value)
        lower, upper = (v, None) if op == ">=" else (None, v)
        return EigBoxConstraint(self.var, lower=lower, upper=upper, span=span or self.span, xi=self.xi)

    def __ge__(self, alpha: Any) -> EigBoxConstraint:
        return self.constraint(">=", alpha)

    def __le__(self, beta: Any) -> EigBoxConstraint:
        return self.constraint("<=", beta)

    def between(self, alpha: Any, beta: Any, span: Span | None = None) -> EigBoxConstraint:
        return EigBoxConstraint(
            self.var, lower=self._bound(alpha), upper=self._bound(beta), span=span or self.span, xi=self.xi
        )

    def __str__(self) -> str:
        return f"eig({self.var})"


class EigBoxConstraint(Constraint):
    """alpha I <= O <= beta I on a symmetric matrix variable. A bound is a constant expression, or
    ``"auto"``: Lu's rule, alpha = 1 / (||S||_2 + p xi) and beta = (p - alpha tr S) / xi (Lu 2009,
    Prop. 3.1, as paper 000, Section 5.3 uses it; the paper writes n where the dimension p is meant),
    with alpha lowered to 1 / tr(S), the bound every graph's maximum-likelihood estimate satisfies,
    where Lu's is above it (:func:`auto_box`), computed by the lowering from the S of the objective
    -logdet(O) + trace(S @ O)."""

    kind = "eig_box"

    def __init__(
        self,
        O: Variable,
        lower: Expr | str | None = None,
        upper: Expr | str | None = None,
        span: Span | None = None,
        xi: float = 1e-2,
    ):
        self.O = O
        self.lower = lower
        self.upper = upper
        self.span = span
        self.xi = xi
        self.validate()

    @property
    def variable(self) -> Variable:
        return self.O

    @property
    def auto(self) -> bool:
        return AUTO in (self.lower, self.upper)

    def bounds(self, S: np.ndarray | None = None) -> tuple[float, float]:
        """(alpha, beta); ``S`` (the covariance of the objective) resolves ``auto`` bounds."""
        if self.auto:
            if S is None:
                raise ConstraintError(
                    f"{self}: 'auto' computes the box from the S of an objective -logdet(O) + trace(S @ O); "
                    "this objective has no such S",
                    self.span,
                    "give numbers for the bounds",
                )
            a_auto, b_auto = auto_box(S, self.xi)
        lo = (
            -np.inf
            if self.lower is None
            else (a_auto if self.lower == AUTO else _bound_value(self.lower, str(self), self.span))
        )
        hi = (
            np.inf
            if self.upper is None
            else (b_auto if self.upper == AUTO else _bound_value(self.upper, str(self), self.span))
        )
        return lo, hi

    def validate(self, S: np.ndarray | None = None) -> tuple[float, float] | None:
        if self.auto and S is None:
            if self.lower not in (None, AUTO):
                self._check_alpha(_bound_value(self.lower, str(self), self.span))
            return None
        lo, hi = self.bounds(S)
        self._check_alpha(lo)
        if lo >= hi:
            raise ConstraintError(
                f"{self}: the lower bound {lo:g} is not below the upper bound {hi:g}",
                self.span,
                "the box needs alpha < beta",
            )
        return lo, hi

    def _check_alpha(self, lo: float) -> None:
        if self.lower is not None and not lo > 0:
            raise ConstraintError(
                f"{self}: the lower bound {lo:g} must be positive (a precision matrix is positive definite)",
                self.span,
                "use alpha > 0, or auto",
            )

    def merge(self, other: EigBoxConstraint) -> EigBoxConstraint:
        return EigBoxConstraint(
            self.O,
            lower=other.lower if other.lower is not None else self.lower,
            upper=other.upper if other.upper is not None else self.upper,
            span=self.span or other.span,
            xi=other.xi if other.auto else self.xi,
        )

    def __str__(self) -> str:
        lo = f"{self.lower} <= " if self.lower is not None else ""
        hi = f" <= {self.upper}" if self.upper is not None else ""
        return f"{lo}eig({self.O}){hi}"


class BoxConstraint(Constraint):
    """``lo <= target <= hi`` elementwise on a variable or a slice of one (``w >= 0``,
    ``-1 <= w[1:] <= 1``); ``lower`` / ``upper`` are constant scalars or arrays that broadcast to
    the target's shape (either may be None: one-sided). A convex side constraint: the projection
    clips, the restricted solves keep their coordinates in the box, and next to ``nnz(...) <= k``
    the projection onto both ranks coordinates by the gain of keeping their clipped value (see
    ``sparsemodel.sets.side.Box``)."""

    kind = "box"

    def __init__(self, target: Any, lower: Any = None, upper: Any = None, span: Span | None = None):
        e = as_expr(target)
        self.span = span or e.span
        if not isinstance(e, (Variable, Index)) or not _is_view(e):
            raise ConstraintError(
                f"a bound applies to a variable or a slice of one; {e} is an expression",
                self.span,
                "write w >= 0, lo <= w <= hi or w[1:] <= 1 (lo, hi numbers, params or data of w's shape)",
            )
        self.target = e
        self.var, self.coords = _variable_view(e, "a bound", self.span)
        self.target_text = str(e)
        self.lower = None if lower is None else as_expr(lower)
        self.upper = None if upper is None else as_expr(upper)
        self.validate()

    @property
    def variable(self) -> Variable:
        return self.var

    def _side(self, b: Expr | None, default: float) -> np.ndarray:
        if b is None:
            return np.full(len(self.coords), default)
        if not b.is_constant():
            raise ConstraintError(f"{self}: the bound {b} depends on a variable; bounds are constants", self.span)
        v = dense(b.constant_value())
        try:
            full = np.broadcast_to(v, self.target.shape)
        except ValueError:
            raise ShapeError(
                f"{self}: the bound {b} of shape {fmt_shape(np.shape(v))} does not broadcast to "
                f"{self.target_text} of shape {fmt_shape(self.target.shape)}",
                self.span,
                "give a number, or one bound per coordinate",
            ) from None
        full = np.asarray(full, dtype=float).ravel()
        if np.any(np.isnan(full)):
            raise ConstraintError(f"{self}: the bound {b} contains NaN", self.span)
        return full.copy()

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper), one entry per coordinate of the target (flattened, -inf/inf when open)."""
        return self._side(self.lower, -np.inf), self._side(self.upper, np.inf)

    def validate(self) -> None:
        lo, hi = self.bounds()
        bad = np.flatnonzero(lo > hi)
        if bad.size:
            i = int(bad[0])
            raise ConstraintError(
                f"{self}: the lower bound {lo[i]:g} exceeds the upper bound {hi[i]:g} at position {i} of {self.target_text}",
                self.span,
                "an empty box has no feasible point",
            )
        if np.any(lo == np.inf) or np.any(hi == -np.inf):
            raise ConstraintError(f"{self}: a bound is infinite on the wrong side", self.span)

    def __str__(self) -> str:
        if self.upper is None and self.lower is not None:
            return f"{self.target_text} >= {self.lower}"
        lo = f"{self.lower} <= " if self.lower is not None else ""
        hi = f" <= {self.upper}" if self.upper is not None else ""
        return f"{lo}{self.target_text}{hi}"


def lu_box(S: np.ndarray, xi: float = 1e-2) -> tuple[float, float]:
    """Lu (2009), Proposition 3.1, as paper 000, Section 5.3 states it, with p (the dimension) where
    the text writes n: alpha = 1 / (||S||_2 + p xi), beta = (p - alpha tr S) / xi."""
    p = S.shape[0]
    alpha = 1.0 / (float(np.linalg.norm(S, 2)) + p * xi)
    beta = (p - alpha * float(np.trace(S))) / xi
    return alpha, beta


def auto_box(S: np.ndarray, xi: float = 1e-2) -> tuple[float, float]:
    """The ``auto`` box: Lu's rule (:func:`lu_box`, paper 000, Section 5.3) with its lower end
    lowered to 1 / tr(S) where Lu's alpha is above it (a deviation). Lu's alpha = 1 / (||S||_2 + p xi)
    bounds the smallest eigenvalue of the l1-penalized estimate with penalty xi (whose covariance
    W = O^{-1} is within xi of S entrywise, so ||W||_2 <= ||S||_2 + p xi); the l0 estimate on a graph
    fixes W only on the graph and the diagonal, W_ii = S_ii, so the bound that holds for every graph
    is lambda_max(W) <= tr(W) = tr(S): lambda_min(O) >= 1 / tr(S). Lu's alpha can cut the
    maximum-likelihood estimate of a sparse graph (standardized breast-cancer features, 40 edges:
    its smallest eigenvalue 0.0729 below Lu's alpha 0.0736). beta is Lu's."""
    alpha, beta = lu_box(S, xi)
    tr = float(np.trace(S))
    return (min(alpha, 1.0 / tr) if tr > 0 else alpha), beta


def _is_view(e: Expr) -> bool:
    while isinstance(e, Index):
        e = e.args[0]
    return isinstance(e, Variable)
