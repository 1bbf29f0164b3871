"""The model on [X, X~]: the user's model with a knockoff column beside each constrained column.

The knockoff filter fits the model on the augmented design: the same loss, the same free
coordinates (an intercept, ``w[0]`` of ``nnz(w[1:]) <= k``), the same penalties, and one more unit
per constrained unit -- its knockoff -- all counted by the one bound k. :func:`plan` reads the
model once:

* the constrained variable w and its units (the coordinates of ``nnz(w ...) <= k``, or the rows of
  a matrix W under ``nnz(W, groups = rows) <= k``, a multinomial's or a multi-task model's);
* every place the objective reads w. A read is ``D @ w`` (``D @ w[1:]``, ``X @ W``): D a constant
  (data, ``standardize(X)``, a slice), whose column t multiplies the t-th position read -- the
  **design** of those units; or a separable penalty, a read under elementwise functions and scalar
  factors up to a sum (``lam * sum_squares(w[1:])``), which the augmented model applies to the
  knockoff units too (so that swapping a unit with its knockoff leaves the objective unchanged:
  the statistic's antisymmetry). Anything else (``quad_form(w, S)``, ``c' w``) is refused with
  its place and what to write instead;
* the design of the constrained units, one column per unit (checked equal where two reads share a
  unit): what the knockoffs are made for (:class:`Plan.X`).

:meth:`Plan.augment` then builds the model on [X, X~] for one knockoff copy: the variable w+ has
the knockoff units appended after w's positions (w+[: len(w)] is w), each ``D @ w[I]`` becomes
``[D, D~] @ w+[I, knockoffs of I]``, each penalty reads the augmented positions, and the constraint
is ``nnz(w+ ..., free = w's free positions) <= k``: k units among 2p. The loss atoms, their
parameters, the response and every other variable are the model's own, so every loss the language
writes (least squares, logistic, Poisson, Gamma, Cox, the softmax with row groups, a user ``func``)
is re-solved the same way."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sps

from ..model import atoms as A
from ..model.arith import Concat, Div, Index, MatMul, Mul, Neg
from ..model.constraints import NnzConstraint, bounded
from ..model.constraints.counting import NnzExpr
from ..model.expr import Data, Expr, Variable
from ..model.problem import Model, Objective
from ..model.samples import rebuild
from ..solvers.result import coordinate_label, problem_names
from .base import InferenceError

DENSE_LIMIT = 50_000_000  # entries: a design larger than this is not copied into a dense array


@dataclass
class Read:
    """One place the objective reads the constrained variable: the node (w, or an Index of it),
    the rows of w it reads (positions along its first axis, in the read's order), and the key of
    the other axes (matrices)."""

    node: Expr
    rows: np.ndarray
    rest: tuple[Any, ...]  # the key of the axes after the first (a matrix's columns)
    scalar_row: bool  # the first axis is indexed by an integer (w[0], W[0, :])


@dataclass
class Plan:
    """What :func:`plan` read from a model (the module docstring)."""

    model: Model
    constraint: NnzConstraint
    variable: Variable
    unit_rows: np.ndarray  # per unit: its row of the variable (a vector's coordinate, a matrix's row)
    X: np.ndarray  # the design of the units: n x p, column u multiplies unit u
    names: list[str]  # per unit
    free_rows: np.ndarray  # rows of the variable left free by the constraint
    reads: dict[int, Read] = field(default_factory=dict)
    designs: dict[int, tuple[MatMul, Read]] = field(default_factory=dict)  # D @ read nodes, by uid

    @property
    def p(self) -> int:
        return len(self.unit_rows)

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def k(self) -> int:
        return int(self.constraint.k)

    def augment(self, Xk: np.ndarray, k: int | None = None) -> Model:
        """The model on [X, X~] (``Xk``: n x p, column u the knockoff of unit u), with the bound
        ``k`` (default: the model's), counted over the 2p units."""
        Xk = np.asarray(Xk, dtype=float)
        if Xk.shape != self.X.shape:
            raise InferenceError(
                f"the knockoffs have shape {Xk.shape}; the design of the constrained units has shape {self.X.shape}",
                hint="give one knockoff column per constrained unit, in the units' order",
            )
        w = self.variable
        R0 = w.shape[0]
        aug_shape = (R0 + self.p, *w.shape[1:])
        wa = Variable(aug_shape, name=w.name, span=w.span)
        pos_of = {int(r): u for u, r in enumerate(self.unit_rows)}
        memo: dict[int, Expr] = {}

        def read_of(rd: Read) -> tuple[Expr, np.ndarray]:
            """The augmented read and the units whose knockoffs it appends (in order)."""
            units = np.array([pos_of[int(r)] for r in rd.rows if int(r) in pos_of], dtype=np.int64)
            units = np.sort(units)
            rows = np.concatenate([rd.rows, R0 + units]) if len(units) else rd.rows
            return _rows_expr(wa, rows, rd.rest, rd.scalar_row and not len(units), w), units

        def go(e: Expr) -> Expr:
            if e.uid in memo:
                return memo[e.uid]
            if e.uid in self.designs:
                mm, rd = self.designs[e.uid]
                new_read, units = read_of(rd)
                D = _dense(mm.args[0])
                cols = [D] + ([Xk[:, units]] if len(units) else [])
                Dn = mm.args[0]
                names = _design_names(Dn, D.shape[1], [self.names[u] + "~" for u in units])
                out = MatMul(Data(np.column_stack(cols), name=_design_name(Dn), span=Dn.span, names=names), new_read)
                out.span = mm.span
            elif e.uid in self.reads:
                out = read_of(self.reads[e.uid])[0]
            elif not e.args:
                out = e
            else:
                args = [go(a) for a in e.args]
                out = e if all(a is b for a, b in zip(args, e.args)) else _rebuild(e, args)
            memo[e.uid] = out
            return out

        obj = self.model.objective
        new = go(obj.expr)
        c = self.constraint
        free_pos = _flat_rows(aug_shape, self.free_rows)
        target = wa
        kw: dict[str, Any] = {}
        if c.nnz.axis_groups == "rows":
            kw["groups"] = "rows"
        if len(free_pos):
            kw["free"] = Data(free_pos.astype(float))
        bound = self.k if k is None else int(k)
        nnz = NnzExpr(target, span=c.span, **kw) <= bound
        others = [d for d in self.model.constraints if d is not c]
        out = Model(Objective(new, obj.span), [nnz, *others], source=self.model.source)
        out.solve_with = self.model.solve_with
        return out


def _dense(D: Expr) -> np.ndarray:
    v = D.constant_value()
    if sps.issparse(v):
        if v.shape[0] * v.shape[1] > DENSE_LIMIT:
            raise InferenceError(
                f"the design {D} ({v.shape[0]} x {v.shape[1]}) is too large to copy for knockoffs", D.span
            )
        v = v.toarray()
    return np.asarray(v, dtype=float)


def _design_name(D: Expr) -> str | None:
    return D.name if isinstance(D, Data) else None


def _design_names(D: Expr, width: int, extra: list[str]) -> Any:
    """Axis names of [D, D~]: D's row names; its column names (when it has them) and the knockoffs'."""
    if not isinstance(D, Data) or D.ndim != 2:
        return None
    rows, cols = D.axis_names
    if cols is None:
        return (rows, None)
    return (rows, tuple(cols) + tuple(extra)) if len(cols) == width else (rows, None)


def _flat_rows(shape: tuple[int, ...], rows: np.ndarray) -> np.ndarray:
    """Flat positions (C order) of whole rows of a variable of ``shape``."""
    width = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    return (np.asarray(rows, dtype=np.int64)[:, None] * width + np.arange(width)[None, :]).ravel()


def _runs(rows: np.ndarray) -> list[tuple[int, int]]:
    """Maximal runs of consecutive increasing positions: [(start, stop)]."""
    out: list[tuple[int, int]] = []
    for r in rows.tolist():
        if out and r == out[-1][1]:
            out[-1] = (out[-1][0], r + 1)
        else:
            out.append((r, r + 1))
    return out


def _rows_expr(wa: Variable, rows: np.ndarray, rest: tuple[Any, ...], scalar: bool, w: Variable) -> Expr:
    """The expression reading ``rows`` (first axis) and ``rest`` (other axes) of the augmented
    variable: the variable itself, one slice, or (vectors) the concatenation of slices."""
    if scalar:
        return Index(wa, (int(rows[0]), *rest))
    if len(rows) == wa.shape[0] and np.array_equal(rows, np.arange(wa.shape[0])) and not rest:
        return wa
    runs = _runs(rows)
    if len(runs) == 1:
        a, b = runs[0]
        return Index(wa, (slice(a, b), *rest))
    if len(rows) > 1 and np.all(np.diff(rows) == rows[1] - rows[0]) and rows[1] != rows[0]:
        step = int(rows[1] - rows[0])
        stop = int(rows[-1]) + (1 if step > 0 else -1)
        return Index(wa, (slice(int(rows[0]), stop if stop >= 0 else None, step), *rest))
    if wa.ndim > 1:
        raise InferenceError(
            f"{w} is read through rows that do not form one slice once its knockoff rows are added",
            w.span,
            "read the matrix whole (X @ W) or through one slice of rows (X @ W[1:, :])",
        )
    return Concat([Index(wa, slice(a, b)) for a, b in runs])


def _rebuild(node: Expr, args: list[Expr]) -> Expr:
    if isinstance(node, Concat):
        return Concat(args, span=node.span)
    return rebuild(node, args)


# ====================================================================== reading the model


def _read(node: Expr, w: Variable) -> Read | None:
    """The read of ``w`` that ``node`` is (w itself or an Index of it), else None."""
    if node is w:
        return Read(node, np.arange(w.shape[0]), (), False)
    if isinstance(node, Index) and node.args[0] is w:
        key = node.key
        first = key[0]
        rest = tuple(key[1:])
        if isinstance(first, slice):
            rows = np.arange(w.shape[0])[first]
            return Read(node, rows, rest, False)
        return Read(node, np.array([first % w.shape[0]]), rest, True)
    return None


def _scalar_constant(e: Expr) -> bool:
    return e.is_constant() and e.shape == ()


def _separable(parent: Expr, child_index: int) -> str:
    """How a read reaching ``parent`` through argument ``child_index`` may pass: ``keep`` (an
    elementwise function of it, a scalar factor: the penalty is still separable), ``sum`` (a sum
    of all its entries: a separable penalty ends here), or ``""`` (anything else)."""
    if isinstance(parent, A.Elementwise):
        return "keep"
    if isinstance(parent, (A.sum, A.sum_squares)) and getattr(parent, "axis", None) is None:
        return "sum"
    if isinstance(parent, Neg):
        return "keep"
    if isinstance(parent, Div) and child_index == 0 and _scalar_constant(parent.args[1]):
        return "keep"
    if isinstance(parent, Mul) and not isinstance(parent, Div) and _scalar_constant(parent.args[1 - child_index]):
        return "keep"
    return ""


def _refuse_read(rd: Read, parent: Expr | None, w: Variable) -> InferenceError:
    where = parent if parent is not None else rd.node
    return InferenceError(
        f"knockoffs need every use of {w} to be a design times it (X @ {w}) or a separable penalty "
        f"(lam * sum_squares({w})); here it is used in {where}",
        where.span or w.span,
        "write the loss with the design's product (sum_squares(X @ w - y) rather than quad_form(w, S)), so that "
        "each coefficient has a column of data to make a knockoff of",
    )


def plan(model: Model) -> Plan:
    """Read the model for knockoffs (the module docstring): its constrained units, their design
    and every read of the constrained variable."""
    c = model.nnz_constraint()
    counted = bounded(model.constraints)
    if c is None or len(counted) != 1 or not c.selects_coefficients:
        raise InferenceError(
            "knockoffs select the coefficients of one sparsity constraint nnz(w) <= k (or nnz(W, groups = rows) <= k); "
            "this model has " + (", ".join(str(d) for d in counted) or "none"),
            counted[0].span if counted else model.objective.span,
            "write one nnz(...) <= k on the coefficients whose variables are to be selected",
        )
    w = c.variable
    coords = np.asarray(c.coords, dtype=np.int64)
    if w.ndim == 1:
        if c.groups is not None:
            raise InferenceError(
                f"{c}: knockoffs for groups of coordinates (group knockoffs) are not built here",
                c.span,
                "select coordinates (nnz(w) <= k), or the rows of a coefficient matrix (nnz(W, groups = rows) <= k)",
            )
        unit_rows = coords
    elif w.ndim == 2 and c.nnz.axis_groups == "rows":
        K = w.shape[1]
        rows = np.unique(coords // K)
        whole = np.isin(_flat_rows(w.shape, rows), coords)
        if not whole.all():
            raise InferenceError(
                f"{c}: the knockoff of a row is a whole row; the constraint leaves part of a row out",
                c.span,
                "constrain whole rows: nnz(W, groups = rows) <= k or nnz(W[1:, :], groups = rows) <= k",
            )
        unit_rows = rows
    else:
        raise InferenceError(
            f"{c}: knockoffs need the units of the constraint to be a vector's coordinates or a matrix's rows "
            "(each unit multiplies one column of data)",
            c.span,
            "write nnz(w) <= k, nnz(w[1:]) <= k, or nnz(W, groups = rows) <= k",
        )
    bad = [d for d in model.constraints if d is not c and getattr(d, "variable", None) is w]
    if bad:
        raise InferenceError(
            f"knockoffs keep the model's other constraints only on other variables; {bad[0]} constrains {w}",
            bad[0].span,
            "drop the constraint, or put it on another variable",
        )
    free_rows = np.setdiff1d(np.arange(w.shape[0]), unit_rows)
    out = Plan(model, c, w, unit_rows, np.zeros((0, 0)), [], free_rows)
    _collect(model.objective.expr, w, out)
    _design(out)
    names = problem_names(model).get(w.name)
    if w.ndim == 1:
        out.names = [coordinate_label(names, w.name, w.shape, int(r)) for r in unit_rows]
    else:
        axis = names.axis_names()[0] if names is not None else None
        out.names = [axis[int(r)] if axis is not None else f"{w.name}[{int(r)}, :]" for r in unit_rows]
    return out


def _collect(root: Expr, w: Variable, out: Plan) -> None:
    """Every read of w: under a design product (``out.designs``) or a separable penalty
    (``out.reads``); anything else is refused."""
    parents: dict[int, list[tuple[Expr, int]]] = {}
    for node in root.walk():
        for i, a in enumerate(node.args):
            parents.setdefault(a.uid, []).append((node, i))
    if root is w:
        raise _refuse_read(Read(w, np.arange(w.shape[0]), (), False), None, w)
    for node in root.walk():
        rd = _read(node, w)
        if rd is None:
            continue
        for parent, i in parents.get(node.uid, []):
            if node is w and _read(parent, w) is not None:
                continue  # w[1:]: the index is the read
            if isinstance(parent, MatMul) and i == 1 and parent.args[0].is_constant() and parent.args[0].ndim == 2:
                out.designs[parent.uid] = (parent, rd)
            elif _penalty(parent, i, parents):
                out.reads[node.uid] = rd
            else:
                raise _refuse_read(rd, parent, w)


def _penalty(parent: Expr, i: int, parents: dict[int, list[tuple[Expr, int]]]) -> bool:
    """Whether a read entering ``parent`` as argument ``i`` is a separable penalty: elementwise
    functions and scalar factors up to a sum of all entries."""
    node, idx = parent, i
    while True:
        how = _separable(node, idx)
        if how == "sum":
            return True
        if how != "keep":
            return False
        ups = parents.get(node.uid, [])
        if len(ups) != 1:
            return False
        node, idx = ups[0]


def _design(out: Plan) -> None:
    """The design of the units from the design products: column u of X multiplies unit u."""
    w = out.variable
    pos_of = {int(r): u for u, r in enumerate(out.unit_rows)}
    X: np.ndarray | None = None
    seen = np.zeros(out.p, dtype=bool)
    for mm, rd in out.designs.values():
        D = _dense(mm.args[0])
        if X is None:
            X = np.zeros((D.shape[0], out.p))
        if D.shape[0] != X.shape[0]:
            raise InferenceError(
                f"{w} multiplies designs with {X.shape[0]} and {D.shape[0]} rows; knockoffs need one design",
                mm.span,
            )
        for t, r in enumerate(rd.rows.tolist()):
            u = pos_of.get(int(r))
            if u is None:
                continue
            if seen[u] and not np.allclose(X[:, u], D[:, t], rtol=1e-12, atol=0):
                raise InferenceError(
                    f"the unit {u} of {w} multiplies two different columns of data in {mm}; knockoffs need one "
                    "design column per unit",
                    mm.span,
                )
            X[:, u] = D[:, t]
            seen[u] = True
    if X is None or not seen.all():
        missing = int(np.flatnonzero(~seen)[0]) if X is not None else 0
        raise InferenceError(
            f"the constrained unit {missing} of {w} multiplies no column of data (no X @ {w} in the objective)",
            out.constraint.span,
            "knockoffs are made for the columns of the design a coefficient multiplies",
        )
    out.X = X


__all__ = ["Plan", "plan"]
