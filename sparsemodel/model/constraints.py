"""Structural constraints: sparsity, group sparsity, rank, eigenvalue box.

Each constraint says which variable and which coordinates of it it governs and validates its
bound as written. It is declarative: the projection, the state of a point, the subspace of the
restricted problem and the bound used by solvers live in the matching constraint set
(:mod:`sparsemodel.compile.sets`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ConstraintError, ModelError, ShapeError, Span
from .expr import Expr, Index, Variable, as_expr, dense, fmt_shape


def _variable_view(target: Expr, what: str, span: Span | None) -> tuple[Variable, np.ndarray]:
    """Resolve ``w``, ``w[1:]``, ``W[0, :]`` ... to (variable, flat coordinates of the variable)."""
    if isinstance(target, Variable):
        return target, np.arange(target.size)
    if isinstance(target, Index):
        var, coords = _variable_view(target.args[0], what, span)
        return var, coords[target.flat_indices()]
    raise ConstraintError(
        f"{what}(...) applies to a variable or a slice of one; got {target}",
        span or target.span,
        "write nnz(w) <= k, nnz(w[1:]) <= k (intercept w[0] free) or nnz(offdiag(O)) <= 2*k",
    )


class Constraint:
    kind = "constraint"
    span: Span | None = None

    @property
    def variable(self) -> Variable:  # pragma: no cover - defined by subclasses
        raise NotImplementedError

    def describe(self) -> str:
        return str(self)


def _bound_value(b: Expr, what: str, span: Span | None) -> float:
    if not b.is_constant() or b.shape != ():
        raise ConstraintError(f"the bound in {what} must be a scalar constant; got {b}", span)
    return float(b.constant_value())


class Offdiag:
    """``offdiag(O)``: the off-diagonal entries of a square matrix variable (only inside nnz)."""

    def __init__(self, O: Any, span: Span | None = None):
        e = as_expr(O)
        if not isinstance(e, Variable) or e.ndim != 2 or e.shape[0] != e.shape[1]:
            raise ConstraintError(
                f"offdiag() needs a square matrix variable; got {e} of shape {fmt_shape(e.shape)}", span
            )
        self.var = e
        self.span = span

    def __str__(self) -> str:
        return f"offdiag({self.var})"


class NnzExpr:
    """``nnz(target[, groups=g])``; compare it with ``<= k`` to get a constraint."""

    def __init__(self, target: Any, groups: Any = None, span: Span | None = None):
        self.span = span
        self.pairs = False
        if isinstance(target, Offdiag):
            self.var = target.var
            p = target.var.shape[0]
            self.coords = np.array([i * p + j for i in range(p) for j in range(p) if i != j], dtype=np.int64)
            self.target_text = str(target)
            self.offdiag = True
            # a symmetric O has O[i,j] = O[j,i]: its off-diagonal entries are selected in pairs
            self.pairs = bool(target.var.symmetric)
        else:
            e = as_expr(target)
            self.var, self.coords = _variable_view(e, "nnz", span)
            self.target_text = str(e)
            self.offdiag = False
        self.groups: np.ndarray | None = None
        self.groups_text: str | None = None
        if self.pairs:
            if groups is not None:
                raise ConstraintError(
                    f"nnz({self.target_text}, groups=...): the off-diagonal entries of the symmetric "
                    f"{self.var} are already grouped in pairs (O[i,j], O[j,i])",
                    span,
                    "drop groups=, or declare the variable without symmetric",
                )
            i, j = np.divmod(self.coords, p)
            self.groups = np.minimum(i, j) * p + np.maximum(i, j)  # one label per unordered pair
        if groups is not None:
            g = as_expr(groups)
            if not g.is_constant():
                raise ConstraintError(f"groups= must be data; {g} depends on a variable", span)
            gv = dense(g.constant_value()).ravel()
            if gv.shape[0] != len(self.coords):
                raise ShapeError(
                    f"nnz({self.target_text}, groups={g}): {len(self.coords)} coordinates but {gv.shape[0]} group labels",
                    span,
                    "give one group label per coordinate of the constrained expression",
                )
            if not np.all(np.isfinite(gv)) or not np.all(gv == np.round(gv)):
                raise ConstraintError(f"group labels in {g} must be integers", span)
            self.groups = gv.astype(np.int64)
            self.groups_text = str(g)

    def __le__(self, k: Any) -> NnzConstraint:
        return NnzConstraint(self, as_expr(k), span=self.span)

    def __ge__(self, k: Any) -> NnzConstraint:
        raise ConstraintError(
            f"nnz({self.target_text}) >= ... is not a sparsity constraint; write nnz(...) <= k", self.span
        )

    def __str__(self) -> str:
        g = f", groups={self.groups_text}" if self.groups_text else ""
        return f"nnz({self.target_text}{g})"


class NnzConstraint(Constraint):
    """At most k nonzero coordinates (or k nonzero groups) among ``coords`` of ``variable``."""

    def __init__(self, nnz: NnzExpr, k: Expr, span: Span | None = None):
        self.nnz = nnz
        self.k_expr = k
        self.span = span
        self.kind = "nnz_pairs" if nnz.pairs else "nnz_groups" if nnz.groups is not None else "nnz"
        self.unit_size = 2 if nnz.pairs else 1  # entries per selectable unit
        self.validate()

    @property
    def variable(self) -> Variable:
        return self.nnz.var

    @property
    def coords(self) -> np.ndarray:
        return self.nnz.coords

    @property
    def groups(self) -> np.ndarray | None:
        return self.nnz.groups

    @property
    def n_units(self) -> int:
        """How many selectable units there are: coordinates, or distinct groups."""
        return len(np.unique(self.groups)) if self.groups is not None else len(self.coords)

    @property
    def k(self) -> int:
        """The bound as written (entries, or groups with groups=)."""
        return self.validate()

    @property
    def k_units(self) -> int:
        """The bound in selectable units: pairs of entries for a symmetric off-diagonal."""
        return self.k // self.unit_size

    def validate(self) -> int:
        if not self.k_expr.is_constant() or self.k_expr.shape != ():
            raise ConstraintError(f"the bound of {self.nnz} must be an integer constant; got {self.k_expr}", self.span)
        kv = float(self.k_expr.constant_value())
        unit = "coordinates" if self.groups is None or self.nnz.pairs else "groups"
        limit = self.n_units * self.unit_size
        if kv != int(kv):
            raise ConstraintError(f"{self.nnz} <= {kv:g}: the bound must be an integer", self.span)
        k = int(kv)
        if k < 0:
            raise ConstraintError(f"{self.nnz} <= {k}: the bound must be nonnegative", self.span)
        if k > limit:
            raise ConstraintError(
                f"{self.nnz} <= {k}: {self.nnz.target_text} has only {limit} {unit}",
                self.span,
                f"k must be between 0 and {limit}",
            )
        return k

    def with_k(self, k: int) -> NnzConstraint:
        """The same constraint with another bound (for sweeps over k)."""
        return NnzConstraint(self.nnz, as_expr(k), span=self.span)

    def __str__(self) -> str:
        return f"{self.nnz} <= {self.k_expr}"


class RankExpr:
    def __init__(self, W: Any, span: Span | None = None):
        e = as_expr(W)
        if not isinstance(e, Variable) or e.ndim != 2:
            raise ConstraintError(f"rank() applies to a matrix variable; got {e} of shape {fmt_shape(e.shape)}", span)
        self.var = e
        self.span = span

    def __le__(self, r: Any) -> RankConstraint:
        return RankConstraint(self.var, as_expr(r), span=self.span)

    def __str__(self) -> str:
        return f"rank({self.var})"


class RankConstraint(Constraint):
    kind = "rank"

    def __init__(self, W: Variable, r: Expr, span: Span | None = None):
        self.W = W
        self.r_expr = r
        self.span = span
        self.validate()

    @property
    def r(self) -> int:
        """The bound as written (evaluated now: a param in it may have been rebound)."""
        return self.validate()

    @property
    def variable(self) -> Variable:
        return self.W

    def validate(self) -> int:
        rv = _bound_value(self.r_expr, str(self), self.span)
        m = min(self.W.shape)
        if rv != int(rv) or not 0 <= rv <= m:
            raise ConstraintError(f"{self}: the rank bound must be an integer between 0 and {m}", self.span)
        return int(rv)

    def __str__(self) -> str:
        return f"rank({self.W}) <= {self.r_expr}"


class EigExpr:
    """``eig(O)``: bound it below and/or above (``alpha <= eig(O) <= beta`` in a model file)."""

    def __init__(self, O: Any, span: Span | None = None):
        e = as_expr(O)
        if not isinstance(e, Variable) or e.ndim != 2 or e.shape[0] != e.shape[1]:
            raise ConstraintError(
                f"eig() applies to a square matrix variable; got {e} of shape {fmt_shape(e.shape)}", span
            )
        self.var = e
        self.span = span

    def __ge__(self, alpha: Any) -> EigBoxConstraint:
        return EigBoxConstraint(self.var, lower=as_expr(alpha), span=self.span)

    def __le__(self, beta: Any) -> EigBoxConstraint:
        return EigBoxConstraint(self.var, upper=as_expr(beta), span=self.span)

    def between(self, alpha: Any, beta: Any) -> EigBoxConstraint:
        return EigBoxConstraint(self.var, lower=as_expr(alpha), upper=as_expr(beta), span=self.span)

    def __str__(self) -> str:
        return f"eig({self.var})"


class EigBoxConstraint(Constraint):
    kind = "eig_box"

    def __init__(self, O: Variable, lower: Expr | None = None, upper: Expr | None = None, span: Span | None = None):
        self.O = O
        self.lower = lower
        self.upper = upper
        self.span = span
        self.validate()

    @property
    def variable(self) -> Variable:
        return self.O

    def bounds(self) -> tuple[float, float]:
        lo = -np.inf if self.lower is None else _bound_value(self.lower, str(self), self.span)
        hi = np.inf if self.upper is None else _bound_value(self.upper, str(self), self.span)
        return lo, hi

    def validate(self) -> None:
        lo, hi = self.bounds()
        if lo > hi:
            raise ConstraintError(f"{self}: the lower bound {lo:g} exceeds the upper bound {hi:g}", self.span)

    def merge(self, other: EigBoxConstraint) -> EigBoxConstraint:
        return EigBoxConstraint(
            self.O,
            lower=other.lower if other.lower is not None else self.lower,
            upper=other.upper if other.upper is not None else self.upper,
            span=self.span or other.span,
        )

    def __str__(self) -> str:
        lo = f"{self.lower} <= " if self.lower is not None else ""
        hi = f" <= {self.upper}" if self.upper is not None else ""
        return f"{lo}eig({self.O}){hi}"


def nnz(target: Any, groups: Any = None, span: Span | None = None) -> NnzExpr:
    """``sm.nnz(w) <= k``, ``sm.nnz(w[1:]) <= k``, ``sm.nnz(w, groups=g) <= k``, ``sm.nnz(sm.offdiag(O)) <= 2*k``."""
    return NnzExpr(target, groups=groups, span=span)


def rank(W: Any, span: Span | None = None) -> RankExpr:
    return RankExpr(W, span=span)


def eig(O: Any, span: Span | None = None) -> EigExpr:
    return EigExpr(O, span=span)


def offdiag(O: Any, span: Span | None = None) -> Offdiag:
    return Offdiag(O, span=span)


__all__ = [
    "Constraint",
    "NnzConstraint",
    "RankConstraint",
    "EigBoxConstraint",
    "nnz",
    "rank",
    "eig",
    "offdiag",
    "ModelError",
]
