"""Names of the coordinates of variables, carried from the data into results.

Data may carry names per axis (``Data.axis_names``): a CSV header names the columns of a matrix
(after ``except``), an ``.npz`` archive may hold them next to the array (``X_names``,
``feature_names`` or ``columns``), a pandas DataFrame names its columns, and the data functions keep
them (``standardize``, ``normalize_columns``, slices, transposes; ``cov(Z)`` names both axes after
Z's columns; ``onehot(y)`` names its columns after the labels).

:func:`coordinate_names` reads the objective once and names the coordinates of every variable:

* a variable (or a slice of one) multiplied by data, ``X @ w`` or ``X @ W[1:, :]``: its rows take
  the names of X's columns (``S @ O``: O's rows take S's column names; a symmetric O has the same
  names on both axes);
* the columns of a matrix variable take the names of the data it is compared with, elementwise:
  ``X @ W - Y`` (Y's columns), ``Yhot * (X @ W)`` (``onehot(y)``'s labels);
* a variable added to a larger term by broadcasting (``Z @ w[1:] + w[0]``, ``X @ W + b``) is an
  intercept: ``(intercept)``, one per column of the term for a vector b;
* anything else keeps its position: ``w[3]``, ``W[2, 5]``.

A matrix coordinate is written ``(row, col)`` with each part a name or a 0-based index; a vector
coordinate is its name. Names never change what is solved; they label supports, coefficient
tables, CSV and JSON files and ``Result.to_frame()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .arith import Add, Index, MatMul, Mul, Neg, Transpose
from .atoms import quad_form
from .expr import Data, Expr, Variable

AxisNames = tuple[tuple[str, ...] | None, ...]
INTERCEPT = "(intercept)"


def clean(names: Any, length: int) -> tuple[str, ...] | None:
    """Names as a tuple of ``length`` strings, or None when they do not fit."""
    if names is None:
        return None
    out = tuple(str(n) for n in names)
    return out if len(out) == length else None


def names_of(e: Expr, memo: dict[int, AxisNames] | None = None) -> AxisNames:
    """The names of each axis of ``e`` known from its data (None where unknown)."""
    memo = {} if memo is None else memo
    for node in e.walk():
        if node.uid not in memo:
            memo[node.uid] = _node_names(node, memo)
    return memo[e.uid]


def _none(e: Expr) -> AxisNames:
    return (None,) * e.ndim


def _node_names(e: Expr, memo: dict[int, AxisNames]) -> AxisNames:
    if isinstance(e, Data):
        got = getattr(e, "axis_names", None)
        return tuple(got) if got is not None and len(got) == e.ndim else _none(e)
    if not e.args:
        return _none(e)
    kids = [memo.get(a.uid, _none(a)) for a in e.args]
    if isinstance(e, Transpose):
        return tuple(reversed(kids[0]))
    if isinstance(e, Index):
        return _index_names(e, kids[0])
    if isinstance(e, MatMul):
        a, b = e.args
        rows = kids[0][0] if a.ndim == 2 else None
        cols = kids[1][1] if b.ndim == 2 else None
        out = ([rows] if a.ndim == 2 else []) + ([cols] if b.ndim == 2 else [])
        return tuple(out)
    if isinstance(e, (Add, Mul, Neg)) or _elementwise(e):
        return _broadcast_names(e, list(e.args), kids)
    return _none(e)


def _elementwise(e: Expr) -> bool:
    """Whether e keeps the shape of its one argument entry by entry (exp, logistic, a func, ...)."""
    return len(e.args) == 1 and e.args[0].shape == e.shape and type(e).__name__ not in ("sum", "mean", "logsumexp")


def _broadcast_names(e: Expr, args: list[Expr], kids: list[AxisNames]) -> AxisNames:
    out: list[tuple[str, ...] | None] = [None] * e.ndim
    for a, names in zip(args, kids):
        off = e.ndim - a.ndim
        for i, n in enumerate(names):
            if n is not None and out[off + i] is None and a.shape[i] == e.shape[off + i]:
                out[off + i] = n
    return tuple(out)


def _index_names(e: Index, base: AxisNames) -> AxisNames:
    out = []
    for axis, key in enumerate(list(e.key) + [slice(None)] * (len(base) - len(e.key))):
        if isinstance(key, slice):
            n = base[axis]
            out.append(tuple(np.asarray(n, dtype=object)[key]) if n is not None else None)
    return tuple(out)


# ---------------------------------------------------------------------- variables


def view_of(e: Expr) -> tuple[Variable, list[np.ndarray], list[bool]] | None:
    """(variable, per axis of the variable the positions ``e`` takes on it, per axis whether it is
    an axis of ``e`` (False where an integer index fixes it)) when ``e`` is a variable or a slice
    of one; None otherwise."""
    keys: list[tuple] = []
    node = e
    while isinstance(node, Index):
        keys.append(node.key)
        node = node.args[0]
    if not isinstance(node, Variable):
        return None
    var = node
    pos: list[np.ndarray] = [np.arange(d) for d in var.shape]
    kept = [True] * var.ndim
    for key in reversed(keys):  # the innermost index first
        live = [i for i in range(var.ndim) if kept[i]]
        for i, k in zip(live, list(key) + [slice(None)] * (len(live) - len(key))):
            if isinstance(k, slice):
                pos[i] = pos[i][k]
            else:
                pos[i] = pos[i][[k]]
                kept[i] = False
    return var, pos, kept


def flat_positions(var: Variable, pos: list[np.ndarray]) -> np.ndarray:
    """The flat (C order) positions in ``var`` of a view, in the view's own C order."""
    if var.ndim == 0:
        return np.array([0])
    return np.arange(var.size).reshape(var.shape)[np.ix_(*pos)].ravel()


@dataclass
class VariableNames:
    """The names known for a variable: per axis, one entry per position (None where unknown),
    and the flat positions that are intercepts."""

    var: Variable
    axes: list[list[str | None]]
    intercept: dict[int, str | None] = field(default_factory=dict)  # flat position -> column name or None

    def set_axis(self, axis: int, positions: np.ndarray, names: tuple[str, ...] | None) -> None:
        if names is None or len(names) != len(positions):
            return
        for p, n in zip(positions, names):
            if self.axes[axis][int(p)] is None:
                self.axes[axis][int(p)] = n

    def label(self, flat: int) -> str:
        """The name of one coordinate (flat position, C order)."""
        shape = self.var.shape
        if flat in self.intercept:
            col = self.intercept[flat]
            return INTERCEPT if col is None else f"{INTERCEPT} {col}"
        if len(shape) == 0:
            return self.var.name
        if len(shape) == 1:
            name = self.axes[0][int(flat)]
            return name if name is not None else f"{self.var.name}[{int(flat)}]"
        idx = np.unravel_index(flat, shape)
        parts = [self.axes[a][int(i)] for a, i in enumerate(idx)]
        if len(shape) == 1:
            return parts[0] if parts[0] is not None else f"{self.var.name}[{int(idx[0])}]"
        if all(p is None for p in parts):
            return f"{self.var.name}[{', '.join(str(int(i)) for i in idx)}]"
        return "(" + ", ".join(p if p is not None else str(int(i)) for p, i in zip(parts, idx)) + ")"

    def labels(self) -> list[str]:
        return [self.label(i) for i in range(self.var.size)]

    def axis_names(self) -> list[list[str] | None]:
        """Per axis: every position's name (a position without one by its index), or None when no
        position of that axis has a name. A position whose coordinates are all intercepts (w[0] of
        ``Z @ w[1:] + w[0]``, the row b of ``X @ W[1:, :] + W[0, :]``) is ``(intercept)``, as
        :meth:`label` names it."""
        shape = self.var.shape
        flat = np.arange(self.var.size).reshape(shape) if shape else None
        out: list[list[str] | None] = []
        for axis, names in enumerate(self.axes):
            named = list(names)
            if self.intercept and flat is not None:
                for i in range(shape[axis]):
                    if named[i] is None and all(int(p) in self.intercept for p in np.take(flat, i, axis=axis).ravel()):
                        named[i] = INTERCEPT
            if all(n is None for n in named):
                out.append(None)
            else:
                out.append([n if n is not None else str(i) for i, n in enumerate(named)])
        return out


def coordinate_names(objective: Expr, variables: list[Variable]) -> dict[str, VariableNames]:
    """The names of every variable's coordinates read from the objective (see the module
    docstring)."""
    out = {v.name: VariableNames(v, [[None] * d for d in v.shape]) for v in variables}
    memo: dict[int, AxisNames] = {}
    names_of(objective, memo)
    ctx: dict[int, AxisNames] = {}  # names the surroundings give a node's axes (top-down)
    order = list(reversed(objective.walk()))  # parents before children
    for node in order:
        here = tuple(
            c if c is not None else m for c, m in zip(ctx.get(node.uid, _none(node)), memo.get(node.uid, _none(node)))
        )
        if isinstance(node, MatMul):
            _matmul_names(node, memo, here, out)
        if isinstance(node, Add):
            _intercepts(node, here, out)
        if isinstance(node, quad_form):
            _quad_form_names(node, memo, out)
        if isinstance(node, (Add, Mul)) or isinstance(node, Neg) or _elementwise(node):
            for a in node.args:  # the context of an elementwise operand: the node's names, aligned right
                off = node.ndim - a.ndim
                mine = ctx.setdefault(a.uid, _none(a))
                ctx[a.uid] = tuple(
                    m if m is not None else (here[off + i] if a.shape[i] == node.shape[off + i] else None)
                    for i, m in enumerate(mine)
                )
        elif isinstance(node, Transpose):
            a = node.args[0]
            ctx[a.uid] = tuple(reversed(here))
    for vn in out.values():
        if vn.var.symmetric:  # O[i, j] and O[j, i] are one pair of variables: one set of names
            rows, cols = vn.axes
            for i in range(len(rows)):
                rows[i] = rows[i] if rows[i] is not None else cols[i]
                cols[i] = cols[i] if cols[i] is not None else rows[i]
    return out


def _matmul_names(node: MatMul, memo: dict[int, AxisNames], here: AxisNames, out: dict[str, VariableNames]) -> None:
    a, b = node.args
    view_b = view_of(b)
    if view_b is not None and a.is_constant() and view_b[0].name in out:  # X @ w, X @ W, S @ O
        var, pos, kept = view_b
        live = [i for i in range(var.ndim) if kept[i]]
        if live:
            out[var.name].set_axis(live[0], pos[live[0]], memo.get(a.uid, _none(a))[-1])
        if len(live) == 2:  # W's columns: what the product is compared with (Y in X @ W - Y)
            out[var.name].set_axis(live[1], pos[live[1]], here[-1] if here else None)
    view_a = view_of(a)
    if view_a is not None and b.is_constant() and view_a[0].name in out:  # w @ X', W @ B
        var, pos, kept = view_a
        live = [i for i in range(var.ndim) if kept[i]]
        if live:
            out[var.name].set_axis(live[-1], pos[live[-1]], memo.get(b.uid, _none(b))[0])


def _quad_form_names(node: Any, memo: dict[int, AxisNames], out: dict[str, VariableNames]) -> None:
    """quad_form(w, S): w's coordinates take the names of S's rows (cov(R) keeps R's columns), or of
    its columns when only they are named (a pandas DataFrame names its columns; S is symmetric)."""
    x, P = node.args
    view = view_of(x)
    if view is None or not P.is_constant() or view[0].name not in out or x.ndim != 1:
        return
    var, pos, kept = view
    live = [i for i in range(var.ndim) if kept[i]]
    if live:
        rows, cols = memo.get(P.uid, _none(P))
        out[var.name].set_axis(live[0], pos[live[0]], rows if rows is not None else cols)


def _intercepts(node: Add, here: AxisNames, out: dict[str, VariableNames]) -> None:
    """A variable (or a slice) added to a larger term by broadcasting is an intercept."""
    if node.ndim == 0:
        return
    for a in node.args:
        view = view_of(a)
        if a.size >= node.size or view is None or view[0].name not in out:
            continue
        var, pos, _ = view
        cols = here[-1] if a.ndim >= 1 and a.shape[-1] == node.shape[-1] and here else None
        vn = out[var.name]
        for j, p in enumerate(flat_positions(var, pos)):
            vn.intercept.setdefault(int(p), cols[j] if cols is not None and a.ndim == 1 else None)


__all__ = ["INTERCEPT", "VariableNames", "coordinate_names", "flat_positions", "names_of", "view_of"]
