"""The constraints that count: ``nnz(x) <= k`` (plain, groups, free coordinates, symmetric pairs
of ``offdiag(O)``), ``nnz(diff(w)) <= k`` (changes) and ``rank(W) <= r``, and the expressions
``nnz(...)``, ``rank(...)``, ``offdiag(...)``, ``diff(...)`` they are written with."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import ConstraintError, ShapeError, Span
from ..expr import Constant, Data, Expr, Variable, as_expr, dense, fmt_shape, refuse_strict
from .base import AXIS_GROUPS, Bounded, Constraint, _bound_value, _variable_view


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


class NnzExpr:
    """``nnz(target[, groups=g][, free=idx])``; compare it with ``<= k`` to get a constraint.

    ``groups``: one integer label per coordinate of the target, or ``"rows"`` / ``"cols"`` for a
    matrix target (``nnz(W, groups = rows) <= k``: at most k nonzero rows, the row-group sparsity
    of a multinomial or multi-task model, each row one feature's coefficients).

    ``free``: positions (0-based, into the flattened target) that are always selected: they are
    optimized in every solve, never thresholded, and not counted by the bound (like the intercept
    ``w[0]`` of ``nnz(w[1:]) <= k``, but any index set).

    ``per`` and ``cap``: at most ``cap`` nonzeros among the coordinates of each label of ``per``
    (one label per coordinate of the target) beside at most k in total: ``nnz(w, per = sector, cap
    = 2) <= 10`` (at most 2 assets per sector, 10 in all); ``cap`` is one integer or one per group
    (the groups in increasing order of their labels)."""

    def __init__(
        self,
        target: Any,
        groups: Any = None,
        span: Span | None = None,
        free: Any = None,
        per: Any = None,
        cap: Any = None,
    ):
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
        self.per: np.ndarray | None = None  # per= labels, one per coordinate (0..G-1)
        self.caps: np.ndarray | None = None  # cap=, one per group
        self.per_text = self.cap_text = ""
        if per is not None or cap is not None:
            self._set_caps(per, cap)
        self.free: np.ndarray | None = None
        self.free_text: str | None = None
        if free is not None:
            self._set_free(free)

    def _set_caps(self, per: Any, cap: Any) -> None:
        """``per = g, cap = c``: the group of each coordinate and the cap of each group, checked."""
        usage = "write nnz(w, per = sector, cap = 2) <= k: one label of per per coordinate, cap one integer or one per group"
        where = f"nnz({self.target_text}, per=..., cap=...)"
        if per is None or cap is None:
            given, missing = ("per", "cap") if cap is None else ("cap", "per")
            raise ConstraintError(f"{where}: {given}= is given without {missing}=", self.span, usage)
        if self.fused or self.offdiag or self.groups is not None:
            what = "diff(...)" if self.fused else "offdiag(...)" if self.offdiag else "groups="
            raise ConstraintError(f"{where}: per-group caps do not combine with {what}", self.span, usage)
        values = []
        for name, v in (("per", per), ("cap", cap)):
            e = as_expr(v)
            if not e.is_constant():
                raise ConstraintError(f"{where}: {name}= must be data; {e} depends on a variable", self.span, usage)
            values.append((e, np.atleast_1d(dense(e.constant_value())).ravel().astype(float)))
        (pe, pv), (ce, cv) = values
        if pv.shape[0] != len(self.coords):
            raise ShapeError(
                f"{where}: {self.target_text} has {len(self.coords)} coordinates but per={pe} has {pv.shape[0]} labels",
                self.span,
                usage,
            )
        if not np.all(np.isfinite(pv)):
            raise ConstraintError(f"{where}: the labels of per={pe} must be finite numbers", self.span, usage)
        labels, self.per = np.unique(pv, return_inverse=True)
        n_groups = len(labels)
        if cv.shape[0] not in (1, n_groups):
            raise ShapeError(
                f"{where}: per={pe} has {n_groups} groups but cap={ce} gives {cv.shape[0]} caps",
                self.span,
                usage,
            )
        bad = cv[~(np.isfinite(cv) & (cv == np.round(cv)) & (cv >= 0))]
        if bad.size:
            raise ConstraintError(
                f"{where}: the cap {bad[0]:g} is not a nonnegative integer",
                self.span,
                "a cap counts coordinates: 0, 1, 2, ...",
            )
        self.caps = np.broadcast_to(cv, (n_groups,)).astype(np.int64).copy()
        self.per_text, self.cap_text = str(pe), (f"{int(cv[0])}" if cv.shape[0] == 1 else str(ce))

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
        if self.per is not None:
            self.per = self.per[keep]
        self.free = np.sort(idx)
        unnamed = isinstance(f, Constant) or (isinstance(f, Data) and not f.name)
        if unnamed:
            shown = ", ".join(str(int(i)) for i in idx[:8]) + (", ..." if idx.size > 8 else "")
            self.free_text = f"[{shown}]"
        else:
            self.free_text = text

    def constraint(self, op: str, value: Any, span: Span | None = None) -> NnzConstraint:
        """``nnz(...) <= k`` (what :func:`~sparsemodel.model.constraints.constrain` builds for this
        target): a sparsity constraint, fused for ``nnz(diff(w))``; any other comparison refused."""
        if op != "<=":
            _refuse_count_comparison(self, op, value, span, "sparsity constraints read nnz(...) <= k")
        cls = FusedConstraint if self.fused else CapsConstraint if self.per is not None else NnzConstraint
        return cls(self, as_expr(value), span=span or self.span)

    def __le__(self, k: Any) -> NnzConstraint:
        return self.constraint("<=", k)

    def __ge__(self, k: Any) -> NnzConstraint:
        return self.constraint(">=", k)

    def __eq__(self, k: object) -> Any:
        """``nnz(w) == k`` in Python: refused as the model language refuses it (not False)."""
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, float, np.integer, np.floating, Expr)):
            return NotImplemented
        return self.constraint("==", k)

    __hash__ = object.__hash__

    def __lt__(self, k: Any) -> Any:
        return refuse_strict(self, "<", k, "<=")

    def __gt__(self, k: Any) -> Any:
        return refuse_strict(self, ">", k, "<=")

    def __str__(self) -> str:
        g = f", groups={self.groups_text}" if self.groups_text else ""
        g += f", free={self.free_text}" if self.free_text else ""
        g += f", per={self.per_text}, cap={self.cap_text}" if self.per is not None else ""
        return f"nnz({self.target_text}{g})"


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
        """How many selectable units there are: coordinates, or distinct groups (counted once per
        groups array: every solve's result and bound read it)."""
        if self.groups is None:
            return len(self.coords)
        seen = self.__dict__.get("_n_units")
        if seen is None or seen[0] is not self.groups:
            seen = (self.groups, len(np.unique(self.groups)))
            self.__dict__["_n_units"] = seen
        return seen[1]

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
    def selects_coefficients(self) -> bool:
        """Whether the units it counts are coefficients (coordinates of the variable, or groups of
        them) that a design multiplies: what variable selection (knockoffs) selects. The edges of
        offdiag(O) and the changes of diff(w) are not."""
        return not self.nnz.offdiag

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
        self.check_bound(int(kv) if np.isfinite(kv) and kv == int(kv) else kv, written=True)
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
    def selects_coefficients(self) -> bool:
        return False

    @property
    def n_units(self) -> int:
        return len(self.coords) - 1


class CapsConstraint(NnzConstraint):
    """``nnz(w, per = g, cap = c) <= k``: at most k nonzero coordinates in total and at most c_g in
    each group g (a portfolio of at most 2 assets per sector; the feasible supports are the
    independent sets of a partition matroid truncated at k, so the projection is greedy)."""

    def __init__(self, nnz: NnzExpr, k: Expr, span: Span | None = None):
        super().__init__(nnz, k, span)
        self.kind = "nnz_caps"

    @property
    def caps(self) -> np.ndarray:
        """The cap of each group (groups 0..G-1, in increasing order of their labels)."""
        assert self.nnz.caps is not None
        return self.nnz.caps

    @property
    def per(self) -> np.ndarray:
        """The group (0..G-1) of each constrained coordinate."""
        assert self.nnz.per is not None
        return self.nnz.per

    def check_bound(self, b: Any, written: bool = False) -> int:
        """The bound checked as nnz's, and above the largest support the caps allow refused with
        the caps named (not only the coordinates)."""
        if isinstance(b, (int, np.integer)) and not isinstance(b, bool) and b > self.limit:
            sizes = np.bincount(self.per, minlength=len(self.caps))
            raise ConstraintError(
                f"{self if written else self.bound_text(int(b))}: the bound is {b}, but the caps allow at most "
                f"{self.limit} nonzeros in {self.target_text} (sum over the {len(self.caps)} groups of min(cap, size))",
                self.span,
                f"k must be between 0 and {self.limit}; caps {self.caps.tolist()}, group sizes {sizes.tolist()}",
            )
        return super().check_bound(b, written)

    @property
    def n_units(self) -> int:
        """The largest support the caps allow: sum over groups of min(cap, group size)."""
        sizes = np.bincount(self.per, minlength=len(self.caps))
        return int(np.minimum(self.caps, sizes).sum())


def nnz(
    target: Any, groups: Any = None, free: Any = None, per: Any = None, cap: Any = None, span: Span | None = None
) -> NnzExpr:
    """``sm.nnz(w) <= k``, ``sm.nnz(w[1:]) <= k``, ``sm.nnz(w, groups=g) <= k``, ``sm.nnz(sm.offdiag(O)) <= 2*k``;
    ``sm.nnz(W, groups="rows") <= k`` (at most k nonzero rows; ``"cols"``: columns);
    ``sm.nnz(w, free=[0, 3]) <= k`` keeps w[0] and w[3] always selected (not counted by k);
    ``sm.nnz(w, per=sector, cap=2) <= k``: at most 2 nonzeros per sector and k in total. The
    builder and the model language call this one function (its keywords are the language's)."""
    return NnzExpr(target, groups=groups, span=span, free=free, per=per, cap=cap)


class RankExpr:
    def __init__(self, W: Any, span: Span | None = None):
        e = as_expr(W)
        if not isinstance(e, Variable) or e.ndim != 2:
            raise ConstraintError(f"rank() applies to a matrix variable; got {e} of shape {fmt_shape(e.shape)}", span)
        self.var = e
        self.span = span

    def constraint(self, op: str, value: Any, span: Span | None = None) -> RankConstraint:
        """``rank(W) <= r``; any other comparison refused."""
        if op != "<=":
            _refuse_count_comparison(self, op, value, span, "rank constraints read rank(W) <= r")
        return RankConstraint(self.var, as_expr(value), span=span or self.span)

    def __le__(self, r: Any) -> RankConstraint:
        return self.constraint("<=", r)

    def __lt__(self, r: Any) -> Any:
        return refuse_strict(self, "<", r, "<=")

    def __gt__(self, r: Any) -> Any:
        return refuse_strict(self, ">", r, "<=")

    def __ge__(self, r: Any) -> RankConstraint:
        return self.constraint(">=", r)

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
        return self.check_bound(int(rv) if np.isfinite(rv) and rv == int(rv) else rv, written=True)

    def __str__(self) -> str:
        return f"rank({self.W}) <= {self.r_expr}"


def _refuse_count_comparison(target: Any, op: str, value: Any, span: Span | None, what: str) -> None:
    """``nnz(w) == k`` or ``rank(W) >= r``: a count is bounded from above only."""
    said = (
        f"{target} == {value} asks for exactly that count"
        if op == "=="
        else f"{target} >= ... bounds {target} from below"
    )
    raise ConstraintError(said, span or target.span, what)
