"""Structural constraints: sparsity, group sparsity, rank, eigenvalue box, and coordinate boxes.

Each constraint says which variable and which coordinates of it it governs and validates its
bound as written. It is declarative: the projection, the state of a point, the subspace of the
restricted problem and the bound used by solvers live in the matching constraint set
(:mod:`sparsemodel.sets`).

The classes live by job in :mod:`.base` (the constraint and its bound check), :mod:`.counting`
(nnz, changes, rank) and :mod:`.convex` (eigenvalue and coordinate boxes); this module holds the
constructors the builder and the model language call (:func:`constrain` is the one that turns
``target op value`` into a constraint) and the words of the constraint language."""

from __future__ import annotations

from typing import Any

from ...errors import ConstraintError, Span
from ..expr import OPERATORS, Variable, as_expr
from .ball import BallConstraint, NormExpr
from .base import AXIS_GROUPS, Bounded, Constraint
from .convex import AUTO, BoxConstraint, EigBoxConstraint, EigExpr, auto_box, lu_box
from .convex import _is_view as is_view
from .counting import (
    CapsConstraint,
    Diff,
    FusedConstraint,
    NnzConstraint,
    NnzExpr,
    Offdiag,
    RankConstraint,
    RankExpr,
    nnz,
)
from .joint import ProductConstraint, bounded
from .linear import LinearConstraint, linear


def bound(target: Any, op: str, value: Any, span: Span | None = None) -> BoxConstraint:
    """``target <= value`` (op ``<=``) or ``target >= value``: the comparison operators of
    expressions, e.g. ``w >= 0`` in the Python builder."""
    return constrain(target, op, value, span)


def constrain(target: Any, op: str, value: Any, span: Span | None = None) -> Constraint:
    """``target <= value`` (``op`` = ``"<="``), ``target >= value`` or ``target == value``: THE
    builder of one-sided constraints. The comparison operators of ``nnz(...)``, ``rank(...)``,
    ``eig(...)`` and expressions call it; the model language calls it with the whole constraint's
    ``span``. A variable (or a slice of one) against constants is a box; any other affine
    comparison (``A @ w <= b``, ``sum(w) == 1``, ``w[0] >= w[1]``) is a linear constraint."""
    if isinstance(target, (NnzExpr, RankExpr, EigExpr)):
        return target.constraint(op, value, span)
    if op not in ("<=", ">=", "=="):
        raise ConstraintError(f"unknown comparison {op!r} in a constraint", span)
    ball = _ball(target, op, value, span)
    if ball is not None:
        return ball
    e, v = as_expr(target), as_expr(value)
    if op == "==" or not (is_view(e) and v.is_constant()):
        return LinearConstraint(e, op, v, span=span)
    if op == "<=":
        return BoxConstraint(target, upper=value, span=span)
    return BoxConstraint(target, lower=value, span=span)


def _ball(target: Any, op: str, value: Any, span: Span | None) -> BallConstraint | None:
    """``norm(w) <= r``, ``norm(w) == r`` or ``sum_squares(w) <= r^2`` on a vector variable w: the
    ball of sparse PCA (None for any other target)."""
    from ..atoms import sum_squares

    if isinstance(target, NormExpr):
        return target.constraint(op, value, span)
    if isinstance(target, sum_squares) and isinstance(target.args[0], Variable) and target.args[0].ndim == 1:
        v = as_expr(value)
        if op == "<=" and v.is_constant() and v.shape == ():
            r2 = float(v.constant_value())
            if not r2 > 0:
                raise ConstraintError(f"{target} <= {r2:g}: the bound must be positive", span)
            return BallConstraint(target.args[0], r2**0.5, span=span, written=str(target))
    return None


def norm(w: Any, span: Span | None = None) -> NormExpr:
    """``sm.norm(w) <= 1``: the Euclidean unit ball of sparse PCA (a constraint target, not an
    objective atom; ``sm.sum_squares(w) <= 1`` is the same constraint)."""
    return NormExpr(w, span=span)


def equality(lhs: Any, rhs: Any, span: Span | None = None) -> LinearConstraint:
    """``lhs == rhs`` of expressions (``Expr.__eq__``): a linear constraint checked when a model
    takes it (so that ``==`` inside dictionaries and ``in`` never raises; see
    :mod:`.linear`)."""
    return LinearConstraint(lhs, "==", rhs, span=span, deferred=True)


def box(target: Any, lower: Any = None, upper: Any = None, span: Span | None = None) -> BoxConstraint:
    """``sm.box(w, lo, hi)``: lo <= w <= hi elementwise (the model file writes ``lo <= w <= hi``)."""
    return BoxConstraint(target, lower=lower, upper=upper, span=span)


def rank(W: Any, span: Span | None = None) -> RankExpr:
    return RankExpr(W, span=span)


def eig(O: Any, xi: float | None = None, span: Span | None = None) -> EigExpr:
    """``alpha <= sm.eig(O) <= beta``; a bound may be ``"auto"`` (Lu's box from the objective's S,
    with the constant ``xi``, default 1e-2)."""
    return EigExpr(O, xi=xi, span=span)


def offdiag(O: Any, span: Span | None = None) -> Offdiag:
    return Offdiag(O, span=span)


def diff(w: Any, span: Span | None = None) -> Diff:
    """``sm.nnz(sm.diff(w)) <= k``: at most k changes between consecutive entries of w."""
    return Diff(w, span=span)


# what Expr's comparison operators build: == (a linear equality), <= and >= (a box or a linear constraint)
OPERATORS.update(equality=equality, bound=bound)

# the words of the constraint language, read by the model language's parser (a new target or
# constraint function is added here, not in the grammar)
STRUCTURAL_FUNCTIONS = {"nnz": nnz, "rank": rank, "eig": eig, "offdiag": offdiag, "diff": diff, "norm": norm}


STRUCTURAL_TYPES: tuple[type, ...] = (NnzExpr, RankExpr, EigExpr, Offdiag, Diff, NormExpr)


__all__ = [
    "AUTO",
    "AXIS_GROUPS",
    "BallConstraint",
    "NormExpr",
    "STRUCTURAL_FUNCTIONS",
    "STRUCTURAL_TYPES",
    "Bounded",
    "BoxConstraint",
    "CapsConstraint",
    "Constraint",
    "Diff",
    "EigBoxConstraint",
    "LinearConstraint",
    "EigExpr",
    "FusedConstraint",
    "NnzConstraint",
    "NnzExpr",
    "Offdiag",
    "ProductConstraint",
    "RankConstraint",
    "RankExpr",
    "auto_box",
    "bound",
    "bounded",
    "box",
    "constrain",
    "diff",
    "eig",
    "equality",
    "is_view",
    "linear",
    "lu_box",
    "nnz",
    "norm",
    "offdiag",
    "rank",
]
