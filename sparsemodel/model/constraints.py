"""Structural constraints: sparsity, group sparsity, rank, eigenvalue box, and coordinate boxes.

Each constraint says which variable and which coordinates of it it governs and validates its
bound as written. It is declarative: the projection, the state of a point, the subspace of the
restricted problem and the bound used by solvers live in the matching constraint set
(:mod:`sparsemodel.sets`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ConstraintError, ModelError, ShapeError, Span
from .arith import Index
from .expr import Constant, Data, Expr, Variable, as_expr, dense, fmt_shape


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


class Diff:
    """``diff(w)``: the changes w[i] - w[i-1] of a vector variable or a slice of one (only inside
    nnz: ``nnz(diff(w)) <= k`` allows at most k changes, a piecewise-constant w)."""

    def __init__(self, w: Any, span: Span | None = None):
        e = as_expr(w)
        self.var, self.coords = _variable_view(e, "diff", span)
        if e.ndim != 1 or len(self.coords) < 2:
            raise ConstraintError(
                f"diff() takes a vector of at least two entries (a variable or a slice of one); got {e} of shape "
                f"{fmt_shape(e.shape)}",
                span,
                "write nnz(diff(w)) <= k with w a vector",
            )
        self.target_text = str(e)
        self.span = span

    def __str__(self) -> str:
        return f"diff({self.target_text})"


AXIS_GROUPS = ("rows", "cols")  # groups = rows / cols: every row (column) of a matrix is one group


class NnzExpr:
    """``nnz(target[, groups=g][, free=idx])``; compare it with ``<= k`` to get a constraint.

    ``groups``: one integer label per coordinate of the target, or ``"rows"`` / ``"cols"`` for a
    matrix target (``nnz(W, groups = rows) <= k``: at most k nonzero rows, the row-group sparsity
    of a multinomial or multi-task model, each row one feature's coefficients).

    ``free``: positions (0-based, into the flattened target) that are always selected: they are
    optimized in every solve, never thresholded, and not counted by the bound (like the intercept
    ``w[0]`` of ``nnz(w[1:]) <= k``, but any index set)."""

    def __init__(self, target: Any, groups: Any = None, span: Span | None = None, free: Any = None):
        self.span = span
        self.pairs = False
        self.fused = isinstance(target, Diff)  # nnz(diff(w)): changes between consecutive entries
        if self.fused:
            if groups is not None or free is not None:
                raise ConstraintError(
                    f"nnz({target}, ...): groups= and free= do not apply to diff(...)", span, "write nnz(diff(w)) <= k"
                )
            self.var, self.coords = target.var, target.coords
            self.target_text = str(target)
            self.offdiag = False
        elif isinstance(target, Offdiag):
            self.var = target.var
            p = target.var.shape[0]
            self.coords = np.array([i * p + j for i in range(p) for j in range(p) if i != j], dtype=np.int64)
            self.target_text = str(target)
            self.offdiag = True
            # a symmetric O has O[i,j] = O[j,i]: its off-diagonal entries are selected in pairs
            self.pairs = bool(target.var.symmetric)
        if not self.fused and not isinstance(target, Offdiag):
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
        self.axis_groups: str | None = None
        if isinstance(groups, str):
            groups = self._axis_groups(groups, target, span)
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
            self.groups_text = self.axis_groups or str(g)
        self.free: np.ndarray | None = None
        self.free_text: str | None = None
        if free is not None:
            self._set_free(free)

    def _axis_groups(self, which: str, target: Any, span: Span | None) -> np.ndarray:
        """The labels of ``groups = rows`` (one group per row of a matrix target) or ``cols``."""
        shape = getattr(as_expr(target), "shape", ()) if not isinstance(target, Offdiag) else ()
        if which not in AXIS_GROUPS:
            raise ConstraintError(
                f"nnz({self.target_text}, groups={which!r}): groups is 'rows', 'cols' or one label per coordinate",
                span,
                "write nnz(W, groups = rows) <= k, nnz(W, groups = cols) <= k or groups = g with g data",
            )
        if isinstance(target, Offdiag) or len(shape) != 2:
            raise ConstraintError(
                f"nnz({self.target_text}, groups = {which}) needs a matrix (a variable or a slice of one); "
                f"{self.target_text} has shape {fmt_shape(tuple(shape))}",
                span,
                "groups = rows makes each row of a matrix one group; for a vector give one label per coordinate",
            )
        r, c = shape
        self.axis_groups = which
        return np.repeat(np.arange(r), c) if which == "rows" else np.tile(np.arange(c), r)

    def _set_free(self, free: Any) -> None:
        """Drop the always-selected positions ``free`` from the constrained coordinates."""
        f = as_expr(free)
        literal = isinstance(f, Data) and not f.name and f.span is not None  # [0, 3] written in the call
        fspan = f.span if literal else self.span
        text = fspan.text if literal and fspan.line == fspan.end_line else str(f)
        where = f"nnz({self.target_text}, free={text})"
        if self.offdiag:
            raise ConstraintError(
                f"{where}: free= does not apply to offdiag(...), whose diagonal is already free",
                fspan,
                "constrain a variable or a slice of one: nnz(w, free = [0, 3]) <= k",
            )
        if not f.is_constant():
            raise ConstraintError(f"{where}: free= must be data (indices); {f} depends on a variable", fspan)
        fv = np.atleast_1d(dense(f.constant_value())).ravel()
        size = len(self.coords)
        usage = (
            f"free= lists 0-based positions in {self.target_text} (integers from 0 to {size - 1}), "
            "as a literal list free = [0, 3] or a data vector"
        )
        if fv.size and (not np.all(np.isfinite(fv)) or not np.all(fv == np.round(fv))):
            bad = fv[~(np.isfinite(fv) & (fv == np.round(fv)))][0]
            raise ConstraintError(f"{where}: the index {bad:g} is not an integer", fspan, usage)
        idx = fv.astype(np.int64)
        out = idx[(idx < 0) | (idx >= size)]
        if out.size:
            raise ConstraintError(
                f"{where}: the index {int(out[0])} is out of range; {self.target_text} has {size} coordinates",
                fspan,
                usage,
            )
        uniq, counts = np.unique(idx, return_counts=True)
        if np.any(counts > 1):
            raise ConstraintError(f"{where}: the index {int(uniq[counts > 1][0])} is listed twice", fspan, usage)
        keep = np.ones(size, dtype=bool)
        keep[idx] = False
        self.coords = self.coords[keep]
        if self.groups is not None:
            self.groups = self.groups[keep]
        self.free = np.sort(idx)
        unnamed = isinstance(f, Constant) or (isinstance(f, Data) and not f.name)
        if unnamed:
            shown = ", ".join(str(int(i)) for i in idx[:8]) + (", ..." if idx.size > 8 else "")
            self.free_text = f"[{shown}]"
        else:
            self.free_text = text

    def __le__(self, k: Any) -> NnzConstraint:
        return constrain(self, "<=", k)

    def __ge__(self, k: Any) -> NnzConstraint:
        return constrain(self, ">=", k)

    def __str__(self) -> str:
        g = f", groups={self.groups_text}" if self.groups_text else ""
        g += f", free={self.free_text}" if self.free_text else ""
        return f"nnz({self.target_text}{g})"


class Bounded:
    """A constraint with a bound k on what a solver selects: the one place a bound value is checked
    (the model's written bound, the sets' budgets, the sweeps of compare, path and select, the
    CLI's --k all go through :meth:`check_bound`). ``unit`` names what k counts, ``limit`` is how
    many there are, ``unit_size`` the entries per unit (2 for symmetric pairs)."""

    unit: str = "coordinates"
    unit_size: int = 1

    @property
    def limit(self) -> int:
        raise NotImplementedError

    def bound_text(self, b: int) -> str:
        return f"{self} (bound {b})"

    def check_bound(self, b: Any, written: bool = False) -> int:
        """The bound b as an integer number of units, or a located error: b must be an integer from
        0 to ``limit``. ``written``: b is the bound as the model writes it (entries for a symmetric
        off-diagonal, converted to edges)."""
        if isinstance(b, bool) or not isinstance(b, (int, np.integer, float, np.floating)) or float(b) != int(b):
            raise ConstraintError(
                f"{self}: the bound {b!r} is not an integer",
                self.span,
                f"use an integer 0 <= {self.unit} bound <= {self.limit}",
            )
        b = int(b)
        if b < 0:
            raise ConstraintError(f"{self}: the bound {b} must be nonnegative", self.span)
        units = b // self.unit_size if written else b
        if units > self.limit or (written and b > self.limit * self.unit_size):
            shown = b if written else b * self.unit_size
            extra = f" ({self.limit} edges: the bound counts entries, two per edge)" if self.unit_size > 1 else ""
            outside = " outside free=" if getattr(getattr(self, "nnz", None), "free", None) is not None else ""
            what = (
                f"{self.limit * self.unit_size} entries{extra}"
                if written and self.unit_size > 1
                else f"{self.limit} {self.unit}{outside}"
            )
            raise ConstraintError(
                f"{self.bound_text(shown) if not written else str(self)}: {self.target_text} has only {what}",
                self.span,
                f"{'r' if self.unit == 'rank' else 'k'} must be between 0 and {self.limit} ({self.unit})",
            )
        return units


class NnzConstraint(Bounded, Constraint):
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

    @property
    def unit(self) -> str:  # type: ignore[override]
        return "edges" if self.nnz.pairs else "groups" if self.groups is not None else "coordinates"

    @property
    def limit(self) -> int:
        return self.n_units

    @property
    def target_text(self) -> str:
        return self.nnz.target_text

    def bound_text(self, b: int) -> str:
        return f"{self.nnz} <= {b}"

    def validate(self) -> int:
        """The bound as written (entries, or groups with groups=), checked."""
        if not self.k_expr.is_constant() or self.k_expr.shape != ():
            raise ConstraintError(f"the bound of {self.nnz} must be an integer constant; got {self.k_expr}", self.span)
        kv = float(self.k_expr.constant_value())
        self.check_bound(int(kv) if kv == int(kv) else kv, written=True)
        return int(kv)

    def __str__(self) -> str:
        return f"{self.nnz} <= {self.k_expr}"


class FusedConstraint(NnzConstraint):
    """``nnz(diff(w)) <= k``: at most k changes between consecutive entries of w (a piecewise-
    constant vector with at most k + 1 pieces; changepoints, fused sparsity)."""

    def __init__(self, nnz: NnzExpr, k: Expr, span: Span | None = None):
        super().__init__(nnz, k, span)
        self.kind = "fused"

    @property
    def unit(self) -> str:  # type: ignore[override]
        return "changes"

    @property
    def n_units(self) -> int:
        return len(self.coords) - 1


class RankExpr:
    def __init__(self, W: Any, span: Span | None = None):
        e = as_expr(W)
        if not isinstance(e, Variable) or e.ndim != 2:
            raise ConstraintError(f"rank() applies to a matrix variable; got {e} of shape {fmt_shape(e.shape)}", span)
        self.var = e
        self.span = span

    def __le__(self, r: Any) -> RankConstraint:
        return constrain(self, "<=", r)

    def __ge__(self, r: Any) -> RankConstraint:
        return constrain(self, ">=", r)

    def __str__(self) -> str:
        return f"rank({self.var})"


class RankConstraint(Bounded, Constraint):
    kind = "rank"
    unit = "rank"

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

    @property
    def limit(self) -> int:
        return min(self.W.shape)

    @property
    def target_text(self) -> str:
        return str(self.W)

    def bound_text(self, b: int) -> str:
        return f"rank({self.W}) <= {b}"

    def validate(self) -> int:
        rv = _bound_value(self.r_expr, str(self), self.span)
        return self.check_bound(int(rv) if rv == int(rv) else rv, written=True)

    def __str__(self) -> str:
        return f"rank({self.W}) <= {self.r_expr}"


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

    def __ge__(self, alpha: Any) -> EigBoxConstraint:
        return constrain(self, ">=", alpha)

    def __le__(self, beta: Any) -> EigBoxConstraint:
        return constrain(self, "<=", beta)

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


def bound(target: Any, op: str, value: Any, span: Span | None = None) -> BoxConstraint:
    """``target <= value`` (op ``<=``) or ``target >= value``: the comparison operators of
    expressions, e.g. ``w >= 0`` in the Python builder."""
    return constrain(target, op, value, span)


def constrain(target: Any, op: str, value: Any, span: Span | None = None) -> Constraint:
    """``target <= value`` (``op`` = ``"<="``) or ``target >= value``: THE builder of one-sided
    constraints. The comparison operators of ``nnz(...)``, ``rank(...)``, ``eig(...)`` and
    expressions call it; the model language calls it with the whole constraint's ``span``."""
    if isinstance(target, (NnzExpr, RankExpr)):
        if op != "<=":
            what = (
                "sparsity constraints read nnz(...) <= k"
                if isinstance(target, NnzExpr)
                else "rank constraints read rank(W) <= r"
            )
            raise ConstraintError(f"{target} >= ... bounds {target} from below", span or target.span, what)
        if isinstance(target, NnzExpr):
            cls = FusedConstraint if target.fused else NnzConstraint
            return cls(target, as_expr(value), span=span or target.span)
        return RankConstraint(target.var, as_expr(value), span=span or target.span)
    if isinstance(target, EigExpr):
        v = target._bound(value)
        lower, upper = (v, None) if op == ">=" else (None, v)
        return EigBoxConstraint(target.var, lower=lower, upper=upper, span=span or target.span, xi=target.xi)
    if op == "<=":
        return BoxConstraint(target, upper=value, span=span)
    return BoxConstraint(target, lower=value, span=span)


def box(target: Any, lower: Any = None, upper: Any = None, span: Span | None = None) -> BoxConstraint:
    """``sm.box(w, lo, hi)``: lo <= w <= hi elementwise (the model file writes ``lo <= w <= hi``)."""
    return BoxConstraint(target, lower=lower, upper=upper, span=span)


def nnz(target: Any, groups: Any = None, free: Any = None, span: Span | None = None) -> NnzExpr:
    """``sm.nnz(w) <= k``, ``sm.nnz(w[1:]) <= k``, ``sm.nnz(w, groups=g) <= k``, ``sm.nnz(sm.offdiag(O)) <= 2*k``;
    ``sm.nnz(W, groups="rows") <= k`` (at most k nonzero rows; ``"cols"``: columns);
    ``sm.nnz(w, free=[0, 3]) <= k`` keeps w[0] and w[3] always selected (not counted by k)."""
    return NnzExpr(target, groups=groups, span=span, free=free)


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


__all__ = [
    "Constraint",
    "NnzConstraint",
    "RankConstraint",
    "EigBoxConstraint",
    "BoxConstraint",
    "box",
    "nnz",
    "rank",
    "eig",
    "offdiag",
    "ModelError",
]


# the words of the constraint language, read by the model language's parser (a new target or
# constraint function is added here, not in the grammar)
STRUCTURAL_FUNCTIONS = {"nnz": nnz, "rank": rank, "eig": eig, "offdiag": offdiag, "diff": diff}
STRUCTURAL_TYPES: tuple[type, ...] = (NnzExpr, RankExpr, EigExpr, Offdiag, Diff)
