"""Recognised non-convex forms: models that are not convex minimizations (or concave
maximizations) but have a solver of their own. There is one: sparse PCA.

**Sparse PCA** (:func:`sparse_pca`)::

    maximize  quad_form(w, S)            (S positive semidefinite, e.g. cov(X))
          or  sum_squares(X @ w)          (S = X'X)
          (either one times or divided by a positive constant, or a sum of such terms in w)
    subject to
        norm(w) <= r                      (or norm(w) == r, or sum_squares(w) <= r^2)
        nnz(w) <= k

over one vector variable w, and no other constraint. Its solvers are the truncated power method
(``tpm``, Yuan & Zhang 2013), a GraHTP-like iteration (``spca_htp``) and the semidefinite
relaxation DSPCA (``dspca``, d'Aspremont et al. 2007). Everything else non-convex keeps the
convexity refusal, whose hint names this form; a model that is almost this form (a missing ball or
bound, an extra constraint, an indefinite matrix) is refused with the reason, at the line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ConstraintError, ConvexityError, ModelError
from .arith import Add, Div, MatMul, Mul
from .constraints import BallConstraint, Constraint, NnzConstraint
from .dcp import CONVEX
from .expr import Expr, Variable, dense
from .objective import Objective

FORM_TEXT = (
    "the one non-convex form sparsemodel recognises is sparse PCA: maximize quad_form(w, S) (S positive "
    "semidefinite) or sum_squares(X @ w), subject to norm(w) <= 1 and nnz(w) <= k, over one vector w "
    "(docs/language.md, 'Sparse PCA')"
)


@dataclass
class SparsePCA:
    """A recognised sparse PCA model: maximize w'Sw subject to ||w|| <= radius, nnz(w) <= k."""

    variable: Variable
    S: np.ndarray  # the quadratic form maximized, symmetric positive semidefinite (p x p)
    nnz: NnzConstraint
    ball: BallConstraint
    spelling: str  # "quad_form" or "sum_squares" (the objective as written)

    @property
    def radius(self) -> float:
        return self.ball.radius


def quadratic(e: Expr) -> tuple[Variable, np.ndarray, str] | None:
    """(w, S, spelling) when e is c * quad_form(w, P) or c * sum_squares(X @ w) (c > 0 a constant,
    sums of such terms in the same w allowed): e(w) = w'Sw; None otherwise."""
    from .atoms import quad_form, sum_squares

    if isinstance(e, Add) and e.op == "+":
        a, b = quadratic(e.args[0]), quadratic(e.args[1])
        if a is None or b is None or a[0] is not b[0]:
            return None
        return a[0], a[1] + b[1], a[2] if a[2] == b[2] else "quad_form"
    if isinstance(e, Mul):  # (Div too)
        a, b = e.args
        if isinstance(e, Div):
            if not (b.is_constant() and b.shape == ()):
                return None
            c, inner = 1.0 / float(b.constant_value()), a
        elif a.is_constant() and a.shape == ():
            c, inner = float(a.constant_value()), b
        elif b.is_constant() and b.shape == ():
            c, inner = float(b.constant_value()), a
        else:
            return None
        q = quadratic(inner)
        if q is None or not c > 0:
            return None
        return q[0], c * q[1], q[2]
    if isinstance(e, quad_form):
        w, P = e.args
        if not isinstance(w, Variable) or w.ndim != 1:
            return None
        Pv = np.asarray(dense(P.constant_value()), dtype=float)
        return w, (Pv + Pv.T) / 2, "quad_form"
    if isinstance(e, sum_squares):
        z = e.args[0]
        if isinstance(z, Variable) and z.ndim == 1:
            return z, np.eye(z.size), "sum_squares"
        if isinstance(z, MatMul) and isinstance(z.args[1], Variable) and z.args[1].ndim == 1:
            X, w = z.args
            if X.is_constant() and X.ndim == 2:
                Xv = np.asarray(dense(X.constant_value()), dtype=float)
                return w, Xv.T @ Xv, "sum_squares"
    return None


def recognise(o: Objective, constraints: Sequence[Constraint]) -> tuple[SparsePCA | None, ModelError | None]:
    """(the sparse PCA form, None) when a model of this objective and these constraints is one;
    (None, the reason) when it is almost one or uses the ball elsewhere; (None, None) when it has
    nothing to do with the form."""
    balls = [c for c in constraints if isinstance(c, BallConstraint)]
    q = quadratic(o.stated) if o.maximize else None
    if q is None:
        if balls:
            return None, ConstraintError(
                f"{balls[0]} is accepted only in the sparse PCA form",
                balls[0].span,
                FORM_TEXT,
            )
        return None, None
    w, S, spelling = q
    if o.stated.curvature != CONVEX:  # a quad_form of an indefinite matrix (its atom checked the spectrum)
        return None, ConvexityError(
            f"maximize {o.stated}: the matrix is not positive semidefinite, so this is not the sparse PCA form",
            o.stated.span,
            "sparse PCA maximizes w'Sw for a positive semidefinite S (a covariance: cov(X), or X'X); " + FORM_TEXT,
        )
    others = [c for c in constraints if not isinstance(c, (BallConstraint, NnzConstraint))]
    nnzs = [c for c in constraints if isinstance(c, NnzConstraint)]
    for c in others + [c for c in nnzs if c.kind != "nnz"] + [c for c in nnzs + balls if c.variable is not w]:
        return None, ConstraintError(
            f"{c}: the sparse PCA form takes norm({w}) <= 1 and nnz({w}) <= k only",
            c.span,
            FORM_TEXT,
        )
    if not balls:
        return None, ConvexityError(
            f"maximize {o.stated} has no maximum without a bound on the norm of {w}",
            o.stated.span or o.span,
            f"add the constraint norm({w}) <= 1 (sparse PCA); " + FORM_TEXT,
        )
    if not nnzs:
        return None, ConvexityError(
            f"maximize {o.stated} subject to {balls[0]} is ordinary PCA: sparsemodel solves it as sparse PCA "
            f"with a bound on nnz({w})",
            o.stated.span or o.span,
            f"add nnz({w}) <= k (k = {w.size} for every coordinate); " + FORM_TEXT,
        )
    if len(balls) > 1 or len(nnzs) > 1:
        dup = balls[1] if len(balls) > 1 else nnzs[1]
        return None, ConstraintError(f"{dup}: a second constraint of its kind on {w}", dup.span, FORM_TEXT)
    if nnzs[0].nnz.free is not None or len(nnzs[0].coords) != w.size:
        return None, ConstraintError(
            f"{nnzs[0]}: the sparse PCA form bounds nnz({w}) over every coordinate", nnzs[0].span, FORM_TEXT
        )
    return SparsePCA(w, S, nnzs[0], balls[0], spelling), None


def sparse_pca(o: Objective, constraints: Sequence[Constraint]) -> SparsePCA | None:
    """The sparse PCA form of a model (see the module docstring), or None when it is not one."""
    return recognise(o, constraints)[0]
