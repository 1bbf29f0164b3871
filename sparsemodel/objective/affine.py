"""Affine maps of the flat vector x: the A_t x + b_t inside every term of a composite objective.

An :class:`AffineMap` is a sum of :class:`Block` s, each ``scale * (D @ x[view])`` over a
:class:`~sparsemodel.objective.operators.DataOperator` (no copy of the user's data) or a plain view
of x; :func:`linearize` builds it from a model expression, :func:`affine_map` falls back to an
:class:`ExprMap` (products through the evaluator) when an expression is affine but not of that
form. A map gives values, transposed products (one or many cotangents), Jacobian columns, row
subsets (mini-batches, folds) and low-rank reductions.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from ..model.arith import Add, Div, Index, MatMul, Mul, Neg, Sub
from ..model.expr import Data, Expr, Variable, dense, unbroadcast
from ..util import as_slice, progression
from .data import as_operator
from .evaluator import Evaluator, Layout
from .operators import DataOperator
from .structure import jacobian_columns

if TYPE_CHECKING:
    from ..model.samples import Binding


class NotCanonical(Exception):
    """The affine expression has no canonical block form (use ExprMap)."""


class Block:
    """One summand ``scale * broadcast(native(x))`` of an affine map of shape ``shape``.

    ``native(x)`` is ``x[coords].reshape(vshape)`` (``op`` None), ``op @ x[coords]`` for a vector
    view (an (n,) result, or a scalar when ``op`` came from a data vector), or ``op @ X`` with
    ``X = x[coords].reshape(q, m)`` (an (n, m) result); ``right`` (a dense (r, m) array, for
    matrix views) multiplies the result on the right (the row-space subspaces W = B V' of a
    low-rank set). ``scale`` is a float or an array of the map's shape.

    Where its numbers came from, for a rebinding (:meth:`rebound`): ``source``, the constant
    expression whose value ``op`` holds; ``recipe``, (the shape it was made with at scale 1, the
    factors :meth:`scaled` applied since, each (a sign, or (a constant expression, whether its
    reciprocal), the shape)), or None when the numbers were not made that way (a merged, folded,
    row-subset or low-rank block).
    """

    def __init__(
        self,
        coords: np.ndarray,
        vshape: tuple[int, ...],
        op: DataOperator | None,
        shape: tuple[int, ...],
        scale: Any = 1.0,
        scalar_out: bool = False,
        right: np.ndarray | None = None,
        source: Expr | None = None,
        recipe: tuple[tuple[int, ...], tuple[Any, ...]] | None = None,
    ):
        self.coords = np.asarray(coords, dtype=np.int64)
        self.vshape = tuple(vshape)
        self.op = op
        self.scalar_out = scalar_out
        self.right = right
        self.source = source
        self.recipe = recipe
        if op is None:
            self.nshape = self.vshape
        elif scalar_out:
            self.nshape = ()
        else:
            self.nshape = (op.shape[0],) + self.vshape[1:]
        if right is not None:
            self.nshape = (self.nshape[0], right.shape[1])
        self.shape = tuple(shape)
        if np.ndim(scale) and not (
            isinstance(scale, np.ndarray) and scale.shape == self.shape and scale.dtype == float
        ):
            scale = np.broadcast_to(np.asarray(scale, dtype=float), self.shape)
        self.scale = scale
        self._inv: np.ndarray | None = None
        self._where: slice | np.ndarray | None = None
        self._entries: np.ndarray | None = None

    @property
    def where(self) -> slice | np.ndarray:
        """The coordinates, as a slice when they are a run (``w[a:b]``: a view of x, no gather)."""
        if self._where is None:
            self._where = as_slice(self.coords)
        return self._where

    @property
    def entry_coords(self) -> np.ndarray:
        """A view block's coordinate read by each entry of its (flattened) value."""
        if self._entries is None:
            idx = np.broadcast_to(np.arange(math.prod(self.vshape)).reshape(self.vshape), self.shape)
            self._entries = self.coords[idx.ravel()]
        return self._entries

    def _same_coords(self, other: Block) -> Block:
        """(``other`` reads the same coordinates into the same shape: what was derived from them is kept.)"""
        self._inv, self._where = other._inv, other._where
        if self.shape == other.shape:
            self._entries = other._entries
        return self

    # ---- evaluation
    def native(self, x: np.ndarray) -> np.ndarray:
        v = x[self.coords]
        if self.op is None:
            out = v.reshape(self.vshape)
        elif len(self.vshape) == 1:
            r = self.op.matvec(v)
            return r.reshape(()) if self.scalar_out else r
        else:
            out = self.op.matmat(v.reshape(self.vshape))
        return out @ self.right if self.right is not None else out

    def value(self, x: np.ndarray) -> np.ndarray:
        v = self.native(x)
        if v.shape != self.shape:
            v = np.broadcast_to(v, self.shape)
        return v * self.scale

    def vjp(self, cot: np.ndarray, out: np.ndarray, want: np.ndarray | None = None) -> None:
        """out[coords] += (d value / d x[coords])' cot; with ``want`` (a boolean mask over x) only
        those coordinates need to be right (the others may be skipped)."""
        t = cot * self.scale if not (np.ndim(self.scale) == 0 and self.scale == 1.0) else cot
        t = unbroadcast(t, self.nshape)
        if self.right is not None:
            t = t @ self.right.T
        if self.op is None:
            out[self.coords] += np.asarray(t, dtype=float).ravel()
            return
        if len(self.vshape) == 1:
            y = np.atleast_1d(t).reshape(self.op.shape[0])
            if want is not None:
                sel = np.flatnonzero(want[self.coords])
                if len(sel) < len(self.coords):
                    if sel.size:
                        out[self.coords[sel]] += self.op.rmatvec(y, sel)
                    return
            out[self.coords] += self.op.rmatvec(y)
            return
        out[self.coords] += np.asarray(self.op.rmatvec(t)).ravel()

    # ---- columns of the Jacobian
    def local(self, n: int) -> np.ndarray:
        if self._inv is None or len(self._inv) != n:
            inv = np.full(n, -1, dtype=np.int64)
            inv[self.coords] = np.arange(len(self.coords))
            self._inv = inv
        return self._inv

    def columns(self, cols: np.ndarray, n: int) -> Any:
        """The Jacobian columns ``cols`` (flat coordinates) of this block: a (size, len(cols))
        matrix, dense or sparse, zero for columns the block does not read."""
        size = math.prod(self.shape)
        loc = self.local(n)[cols]
        hits = np.flatnonzero(loc >= 0)
        if hits.size == 0:
            return None
        if self.right is not None:  # probe: apply the block to each unit direction
            out = np.zeros((size, len(cols)))
            e = np.zeros(n)
            for h in hits:
                e[cols[h]] = 1.0
                out[:, h] = self.value(e).reshape(-1)
                e[cols[h]] = 0.0
            return out
        scale_full = None if np.ndim(self.scale) == 0 else np.asarray(self.scale).reshape(-1)
        s0 = float(self.scale) if np.ndim(self.scale) == 0 else None
        if self.op is not None and len(self.vshape) == 1 and not self.scalar_out and self.nshape == self.shape:
            D = self.op.columns(loc[hits], keep_sparse=True)
            if sp.issparse(D):
                D = sp.diags(scale_full) @ D if scale_full is not None else D * s0
                D = D.tocsc()
                if hits.size == len(cols):
                    return D
                return _place_sparse(D, hits, len(cols), size)
            D = D * (scale_full[:, None] if scale_full is not None else s0)
            if hits.size == len(cols):
                return D
            out = np.zeros((size, len(cols)))
            out[:, hits] = D
            return out
        rows_list, cols_list, vals_list = [], [], []
        if self.op is None:
            # broadcast of a view: entry e of the output reads view position idx[e]
            idx = np.broadcast_to(np.arange(math.prod(self.vshape)).reshape(self.vshape), self.shape)
            idx = idx.ravel()
            if len(np.unique(loc[hits])) == hits.size:  # each view position asked once: no loop
                col_of = np.full(len(self.coords), -1, dtype=np.int64)
                col_of[loc[hits]] = hits
                c = col_of[idx]
                r = np.flatnonzero(c >= 0)
                rows_list.append(r)
                cols_list.append(c[r])
                vals_list.append(scale_full[r] if scale_full is not None else np.full(len(r), s0))
            else:  # a coordinate asked for twice: one column each
                order = np.argsort(idx, kind="stable")
                starts = np.searchsorted(idx[order], np.arange(len(self.coords) + 1))
                for h in hits:
                    lo, hi = starts[loc[h]], starts[loc[h] + 1]
                    r = order[lo:hi]
                    rows_list.append(r)
                    cols_list.append(np.full(len(r), h))
                    vals_list.append(scale_full[r] if scale_full is not None else np.full(len(r), s0))
        elif self.scalar_out:
            a = self.op.columns(loc[hits]).reshape(-1)  # (1, h) -> (h,)
            for j, h in enumerate(hits):
                r = np.arange(size)
                rows_list.append(r)
                cols_list.append(np.full(size, h))
                vals_list.append(a[j] * (scale_full if scale_full is not None else np.full(size, s0)))
        elif len(self.vshape) == 2 and self.shape == self.nshape:
            q, m = self.vshape
            a_idx, b_idx = np.divmod(loc[hits], m)
            Dc = self.op.columns(a_idx, keep_sparse=True)
            Dc = Dc.tocoo() if sp.issparse(Dc) else sp.coo_matrix(Dc)
            r = Dc.row * m + b_idx[Dc.col]
            v = Dc.data * (scale_full[r] if scale_full is not None else s0)
            rows_list.append(r)
            cols_list.append(hits[Dc.col])
            vals_list.append(v)
        else:  # a data product broadcast to a larger shape (Z - X @ w, (X @ W1) - Y with W1 one column)
            return self._broadcast_columns(loc[hits], hits, len(cols), scale_full, s0)
        if not rows_list:
            return None
        return sp.csc_matrix(
            (np.concatenate(vals_list), (np.concatenate(rows_list), np.concatenate(cols_list))),
            shape=(size, len(cols)),
        )

    def class_values(self, cols: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """For a block of an (samples x classes) map that reads each of its columns ``cols`` in one
        class only -- X @ W (column W[j, c]: X[:, j] in class c) or a vector b broadcast to every row
        (column b[c]: ones in class c) --: (the positions in ``cols`` it reads, their values per
        sample (samples x those), their classes), without the columns' (samples x classes) rows;
        None for another kind of block (:meth:`Term.class_columns` then reads the columns)."""
        if len(self.shape) != 2 or self.right is not None or self.scalar_out:
            return None
        ns, m = self.shape
        loc = self.local(n)[cols]
        hits = np.flatnonzero(loc >= 0)
        scale = None if np.ndim(self.scale) == 0 else np.broadcast_to(np.asarray(self.scale), self.shape).reshape(ns, m)
        if self.op is not None and len(self.vshape) == 2 and self.vshape[1] == m and self.nshape == self.shape:
            a_idx, c_idx = np.divmod(loc[hits], m)
            D = self.op.columns(a_idx)
            D = D.toarray() if sp.issparse(D) else np.array(D, dtype=float)
            D *= scale[:, c_idx] if scale is not None else float(self.scale)
            return hits, D, c_idx
        if self.op is None and self.vshape == (m,) and self.nshape == (m,):  # b broadcast: entry (i, c) reads b[c]
            c_idx = loc[hits]
            if scale is not None:
                return hits, np.array(scale[:, c_idx], dtype=float), c_idx
            return hits, np.full((ns, len(hits)), float(self.scale)), c_idx
        return None

    def _broadcast_columns(
        self, local: np.ndarray, hits: np.ndarray, ncols: int, scale_full: np.ndarray | None, s0: float | None
    ) -> sp.csc_matrix:
        """Jacobian columns of a block whose native value (``op @ x[coords]`` of shape ``nshape``)
        is broadcast to ``shape``: the native columns, each output entry reading the row of the
        native entry the broadcast repeats into it, times the scale."""
        if len(self.vshape) == 1:
            N = self.op.columns(local, keep_sparse=True)
            N = sp.csr_matrix(N) if sp.issparse(N) else sp.csr_matrix(np.asarray(N))
        else:
            m = self.vshape[1]
            a_idx, b_idx = np.divmod(local, m)
            Dc = self.op.columns(a_idx, keep_sparse=True)
            Dc = Dc.tocoo() if sp.issparse(Dc) else sp.coo_matrix(Dc)
            nsize = math.prod(self.nshape)
            N = sp.csr_matrix((Dc.data, (Dc.row * m + b_idx[Dc.col], Dc.col)), shape=(nsize, len(local)))
        nsize = N.shape[0]
        idx = np.broadcast_to(np.arange(nsize).reshape(self.nshape), self.shape).ravel()
        R = N[idx]
        R = sp.diags(scale_full) @ R if scale_full is not None else R * s0
        R = R.tocoo()
        return sp.csc_matrix((R.data, (R.row, hits[R.col])), shape=(len(idx), ncols))

    # ---- row subsets
    def rows(self, rows: np.ndarray, new_shape: tuple[int, ...]) -> Block:
        scale = self.scale if np.ndim(self.scale) == 0 else np.asarray(self.scale)[rows]
        if self.op is not None and not self.scalar_out:
            return Block(self.coords, self.vshape, self.op.rows(rows), new_shape, scale, right=self.right)
        if self.op is None and len(self.nshape) == len(self.shape) and self.nshape[0] == self.shape[0] > 1:
            c = self.coords.reshape(self.vshape)[rows].ravel()
            return Block(c, (len(rows),) + self.vshape[1:], None, new_shape, scale, right=self.right)
        return Block(self.coords, self.vshape, self.op, new_shape, scale, self.scalar_out, self.right)

    def scaled(self, k: Any, shape: tuple[int, ...], factor: tuple[Expr, bool] | None = None) -> Block:
        """The block times ``k`` in a map of shape ``shape``; ``factor``: the constant expression
        k is the value of (and whether its reciprocal), recorded for a rebinding (a sign needs none)."""
        recipe = self.recipe
        if recipe is not None and (factor is not None or np.ndim(k) or float(k) != 1.0 or tuple(shape) != self.shape):
            recipe = (recipe[0], recipe[1] + ((factor if factor is not None else float(k), shape),))
        scale = _times(self.scale, k, shape)
        out = Block(self.coords, self.vshape, self.op, shape, scale, self.scalar_out, self.right, self.source, recipe)
        return out._same_coords(self)

    def rebound(self, binding: Binding) -> Block | None:
        """The block with a rebinding's data (:class:`~sparsemodel.model.samples.Binding`): its
        operator and scale made again from the new values of the expressions its recipe names,
        through the steps that made them (so the same numbers as a fresh linearization); the block
        itself when none of them changed; None when it has no recipe."""
        if self.recipe is None:
            return None
        op = self.op
        if self.source is not None and binding.reads(self.source):
            op = as_operator(binding.value(self.source))
        steps = self.recipe[1]
        if op is self.op and not any(isinstance(f, tuple) and binding.reads(f[0]) for f, _ in steps):
            return self
        scale: Any = 1.0
        for f, shape in steps:
            scale = _times(scale, factor_value(binding.value(f[0]), f[1]) if isinstance(f, tuple) else f, shape)
        out = Block(self.coords, self.vshape, op, self.shape, scale, self.scalar_out, None, self.source, self.recipe)
        return out._same_coords(self)

    def remapped(self, where: np.ndarray) -> Block:
        return Block(where[self.coords], self.vshape, self.op, self.shape, self.scale, self.scalar_out, self.right)


def _times(scale: Any, k: Any, shape: tuple[int, ...]) -> Any:
    """A block's scale times the factor k, as the scale of a block of shape ``shape`` (a float
    stays a float)."""
    if np.ndim(scale) == 0:  # (a scalar scale broadcasts with the value)
        out = float(scale) * (float(k) if np.ndim(k) == 0 else np.asarray(k, dtype=float))
    else:
        out = scale * np.asarray(k, dtype=float)
    if np.ndim(out) and out.shape != tuple(shape):
        out = np.broadcast_to(out, shape)
    return out


def _read_coords(m: Any, n: int) -> np.ndarray:
    """The coordinates an affine map reads (all of them for a map without blocks)."""
    blocks = getattr(m, "blocks", None)
    if blocks is None:
        return np.arange(n)
    return np.unique(np.concatenate([b.coords for b in blocks])) if blocks else np.zeros(0, dtype=np.int64)


def _operator_blocks(m: Any, n: int) -> list[tuple[Block, Any]]:
    """The blocks of an affine map that read a data operator through a vector view (``X @ w``,
    whose Jacobian columns are the operator's columns times the scale), each with its squared
    scale, when every coordinate such a block reads is read by no other block (so squares of the
    Jacobian's entries split by block); [] otherwise or for chunked operators."""
    blocks = getattr(m, "blocks", None)
    if not blocks:
        return []
    out = [
        b
        for b in blocks
        if b.op is not None
        and not b.op.chunked
        and len(b.vshape) == 1
        and not b.scalar_out
        and b.right is None
        and b.nshape == m.shape
    ]
    if not out:
        return []
    seen = np.zeros(n, dtype=np.int64)
    for b in blocks:
        seen[b.coords] += 1
    if any(np.any(seen[b.coords] > 1) for b in out):
        return []
    return [(b, np.asarray(b.scale).reshape(-1) ** 2 if np.ndim(b.scale) else float(b.scale) ** 2) for b in out]


def _place_sparse(D: sp.csc_matrix, hits: np.ndarray, ncols: int, size: int) -> sp.csc_matrix:
    coo = D.tocoo()
    return sp.csc_matrix((coo.data, (coo.row, hits[coo.col])), shape=(size, ncols))


class AffineMap:
    """``x -> sum(blocks) + b`` of shape ``shape`` (see :class:`Block`)."""

    canonical = True

    def __init__(self, blocks: list[Block], b: np.ndarray, shape: tuple[int, ...], n: int):
        self.blocks = blocks
        self.shape = tuple(shape)
        self.size = math.prod(self.shape)
        self.zero_offset = False  # b is known to be zero (a sum of blocks without constants)
        self.expr: Expr | None = None  # the expression linearized (:func:`linearize`), for a rebinding
        if isinstance(b, (int, float)):
            self.b = np.full(self.size, float(b))
            self.zero_offset = b == 0
            self.n = n
            return
        b = np.asarray(b, dtype=float)
        if b.ndim == 1 and b.size == self.size and self.shape != b.shape:
            b = b.reshape(self.shape)  # already flattened
        self.b = np.broadcast_to(b, self.shape).reshape(-1).copy()
        self.n = n

    @property
    def n_rows(self) -> int | None:
        return self.shape[0] if self.shape else None

    def reads_data(self) -> bool:
        return any(b.op is not None for b in self.blocks)

    def rebound(self, binding: Binding) -> AffineMap | None:
        """The map of the same expression with a rebinding's data: each block made again from its
        recipe (:meth:`Block.rebound`), the offset b the expression's value at x = 0 with the new
        data (its definition); None when it was not linearized from an expression or a block has
        no recipe (then the expression with the new data is linearized again)."""
        if self.expr is None:
            return None
        blocks = []
        for blk in self.blocks:
            nb = blk.rebound(binding)
            if nb is None:
                return None
            blocks.append(nb)
        if self.zero_offset:
            b: Any = 0.0
        else:
            b = dense(binding.at_zero(self.expr))
        out = AffineMap(blocks, b, self.shape, self.n)
        out.expr = self.expr
        return out

    def value(self, x: np.ndarray) -> np.ndarray:
        """A x + b, flattened."""
        out = self.b.copy()
        for blk in self.blocks:
            out += blk.value(x).reshape(-1)
        return out

    def vjp(self, cot: np.ndarray, coords: np.ndarray | None = None) -> np.ndarray:
        """A' cot as a flat vector of length n (only ``coords`` guaranteed with coords given)."""
        out = np.zeros(self.n)
        want = None
        if coords is not None:
            want = np.zeros(self.n, dtype=bool)
            want[coords] = True
        c = np.asarray(cot, dtype=float).reshape(self.shape)
        for blk in self.blocks:
            blk.vjp(c, out, want)
        return out

    def vjp_columns(self, C: np.ndarray) -> np.ndarray:
        """A' C for a (size, c) matrix of cotangents, as an (n, c) array: one transposed product
        with the data for blocks that read a data operator through a vector view (X @ w), one
        :meth:`Block.vjp` per column for the others."""
        C = np.asarray(C, dtype=float).reshape(self.size, -1)
        out = np.zeros((self.n, C.shape[1]))
        for blk in self.blocks:
            if (
                blk.op is not None
                and len(blk.vshape) == 1
                and not blk.scalar_out
                and blk.right is None
                and blk.nshape == self.shape
            ):
                S = C * (np.asarray(blk.scale).reshape(-1)[:, None] if np.ndim(blk.scale) else float(blk.scale))
                out[blk.coords] += np.asarray(blk.op.rmatvec(S)).reshape(len(blk.coords), -1)
                continue
            for j in range(C.shape[1]):
                blk.vjp(C[:, j].reshape(self.shape), out[:, j])
        return out

    def dense_jacobian(self, out: np.ndarray | None = None) -> np.ndarray:
        """The whole Jacobian (size, n) as one dense array, written block by block in place (into
        ``out``, a C-ordered array of that shape, when given): a data block's columns are its
        operator's columns times the scale, a dense operator times a matrix view (``X @ W``) writes the
        operator into the rows of each column of W, a view block puts its scale at the coordinate
        each entry reads (no sparse matrix built); any other block adds its :meth:`Block.columns`. Equal to
        ``columns(arange(n))`` made dense."""
        if out is None:
            out = np.empty((self.size, self.n))  # (every entry written below: fresh pages touched once)
        # the first dense data block on a run of coordinates is written, not added: the columns
        # outside it are zeroed, and nothing reads a zero-filled array first (on a fold's 400 x 1000
        # design that first pass over fresh memory was most of the time of this call)
        first = next((b for b in self.blocks if self._dense_run(b) is not None), None)
        if first is None:
            out[...] = 0.0
        else:
            where = self._dense_run(first)
            out[:, : where.start] = 0.0
            out[:, where.stop :] = 0.0
        rows = np.arange(self.size)
        order = self.blocks if first is None else [first, *(b for b in self.blocks if b is not first)]
        for blk in order:  # (the written block first: the others add to it)
            sc = blk.scale
            if blk.right is None and not blk.scalar_out and blk.nshape == blk.shape and len(blk.vshape) == 1:
                if blk.op is not None and not blk.op.sparse and not blk.op.chunked:
                    where = blk.where  # w[a:b]: a view, no gather or scatter
                    D = blk.op.A
                    if blk is first:
                        if np.ndim(sc):
                            np.multiply(D, np.asarray(sc).reshape(-1)[:, None], out=out[:, where])
                        elif float(sc) != 1.0:
                            np.multiply(D, float(sc), out=out[:, where])
                        else:
                            out[:, where] = D
                        continue
                    if np.ndim(sc):
                        D = D * np.asarray(sc).reshape(-1)[:, None]
                    elif float(sc) != 1.0:
                        D = D * float(sc)
                    if isinstance(where, slice):
                        np.add(out[:, where], D, out=out[:, where])
                    else:
                        out[:, where] += D
                    continue
            if blk.op is None and blk.right is None:
                add = np.asarray(sc).reshape(-1) if np.ndim(sc) else float(sc)
                if blk.coords.size == 1:  # one coordinate read by every entry (an intercept): its column
                    out[:, int(blk.coords[0])] += add
                else:
                    out[rows, blk.entry_coords] += add
                continue
            if (
                blk.op is not None
                and not blk.op.sparse
                and not blk.op.chunked
                and blk.right is None
                and not blk.scalar_out
                and len(blk.vshape) == 2
                and blk.nshape == blk.shape
                and np.ndim(sc) == 0
                and len(np.unique(blk.coords)) == blk.coords.size  # (each coordinate read once: += places it)
            ):
                # A @ X with X = x[coords] as a (q, m) matrix (X W): entry (i, c) reads A[i, :] on the
                # coordinates of column c of X, one strided write of A per column c (no sparse matrix)
                m = blk.vshape[1]
                out3 = out.reshape(blk.op.shape[0], m, self.n)
                cols = blk.coords.reshape(blk.vshape)
                D = blk.op.A if float(sc) == 1.0 else blk.op.A * float(sc)
                for c in range(m):
                    out3[:, c, progression(cols[:, c])] += D
                continue
            M = blk.columns(np.arange(self.n, dtype=np.int64), self.n)
            if M is not None:
                out += M.toarray() if sp.issparse(M) else M
        return out

    @staticmethod
    def _dense_run(blk: Any) -> slice | None:
        """The coordinates of a dense data block that :meth:`dense_jacobian` copies as a whole, as
        a slice (a run of consecutive coordinates), else None."""
        if blk.right is not None or blk.scalar_out or blk.nshape != blk.shape or len(blk.vshape) != 1:
            return None
        if blk.op is None or blk.op.sparse or blk.op.chunked:
            return None
        where = blk.where
        return where if isinstance(where, slice) else None

    def dense_is_natural(self) -> bool:
        """Whether :meth:`columns` of every coordinate comes out dense anyway (a dense data block)."""
        return any(
            blk.op is not None
            and not blk.op.sparse
            and blk.right is None
            and not blk.scalar_out
            and blk.nshape == blk.shape
            and len(blk.vshape) == 1
            for blk in self.blocks
        )

    def dense_data(self) -> bool:
        """Whether it reads data and every data block's operator is dense (its whole Jacobian is
        then dense up to a pattern of zeros: X @ W's columns of class c are zero outside class c's
        rows)."""
        ops = [blk.op for blk in self.blocks if blk.op is not None]
        return bool(ops) and all(not op.sparse and not op.chunked for op in ops)

    def columns(self, cols: np.ndarray) -> Any:
        cols = np.asarray(cols, dtype=np.int64)
        acc: Any = None
        for blk in self.blocks:
            M = blk.columns(cols, self.n)
            if M is None:
                continue
            if acc is None:
                acc = M
            elif sp.issparse(acc) and sp.issparse(M):
                acc = acc + M
            elif sp.issparse(acc) or sp.issparse(M):  # one block is dense: so is the sum
                acc = (acc.toarray() if sp.issparse(acc) else acc) + (M.toarray() if sp.issparse(M) else M)
            else:
                acc = acc + M
        if acc is None:
            return sp.csc_matrix((self.size, len(cols)))
        return acc

    def class_values(self, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The Jacobian columns ``cols`` of a (samples x classes) map (a row-wise loss's Z = X W + b)
        as ``Term.class_columns`` gives them -- each column's values per sample and its class --
        read from the blocks (:meth:`Block.class_values`) instead of the columns' samples x classes
        rows; None where some block is of another kind or a column is read by two blocks."""
        cols = np.asarray(cols, dtype=np.int64)
        if len(self.shape) != 2:
            return None
        V = np.zeros((self.shape[0], len(cols)))
        cls = np.full(len(cols), -1, dtype=np.int64)
        for blk in self.blocks:
            got = blk.class_values(cols, self.n)
            if got is None:
                return None
            hits, D, c = got
            if np.any(cls[hits] >= 0):  # (two blocks read one column: leave it to the columns)
                return None
            V[:, hits] = D
            cls[hits] = c
        cls[cls < 0] = 0  # (a column no block reads: zero, counted in class 0 as Term.class_columns does)
        return V, cls

    def rows(self, rows: np.ndarray) -> AffineMap:
        rows = np.asarray(rows, dtype=np.int64)
        new_shape = (len(rows),) + self.shape[1:]
        b = self.b.reshape(self.shape)[rows]
        return AffineMap([blk.rows(rows, new_shape) for blk in self.blocks], b, new_shape, self.n)

    def low_rank(
        self,
        W: np.ndarray,
        shape: tuple[int, int],
        U: np.ndarray | None,
        Vt: np.ndarray | None,
        new_coords: np.ndarray,
        where: np.ndarray,
        n_new: int,
    ) -> AffineMap:
        """The map with the matrix variable at flat coordinates ``W`` (p x m, C order) replaced by
        ``U @ C`` (U given), ``C @ Vt`` (Vt given) or ``U @ C @ Vt`` (both), C at ``new_coords``;
        other coordinates move by ``where``."""
        p, m = shape
        cshape = (U.shape[1] if U is not None else p, Vt.shape[0] if Vt is not None else m)
        inW = np.zeros(self.n, dtype=bool)
        inW[W] = True
        Wset = W.reshape(p, m)
        blocks = []
        for blk in self.blocks:
            touch = inW[blk.coords]
            if not touch.any():
                blocks.append(blk.remapped(where))
                continue
            if not (
                touch.all()
                and blk.vshape == (p, m)
                and blk.right is None
                and np.array_equal(blk.coords.reshape(p, m), Wset)
            ):
                raise NotCanonical
            if U is None:
                op = blk.op
            elif blk.op is None:
                op = DataOperator(U)
            else:
                op = blk.op.left_multiply(U)
            blocks.append(Block(new_coords, cshape, op, blk.shape, blk.scale, right=Vt))
        return AffineMap(blocks, self.b, self.shape, n_new)


class ExprMap:
    """Any affine expression, evaluated through its tree (the fallback of :class:`AffineMap`)."""

    canonical = False

    def __init__(self, expr: Expr, layout: Layout, values: dict[int, Any] | None = None):
        self.expr = expr
        self.layout = layout
        self.ev = Evaluator(expr, layout, values)
        self.shape = expr.shape
        self.size = expr.size
        self.n = layout.n
        self.b = np.atleast_1d(dense(self.ev.value(np.zeros(layout.n)))).reshape(-1).astype(float)

    def rebound(self, binding: Binding) -> ExprMap:
        """The same expression with a rebinding's data (lowering/rebind.py): its evaluator reads the
        new values of the data nodes (``binding.memo``) in the old tree, which is not rebuilt."""
        return ExprMap(self.expr, self.layout, binding.memo)

    @property
    def n_rows(self) -> int | None:
        return self.shape[0] if self.shape else None

    def reads_data(self) -> bool:
        return any(isinstance(nd, Data) for nd in self.expr.walk())

    def value(self, x: np.ndarray) -> np.ndarray:
        return np.atleast_1d(dense(self.ev.value(x))).reshape(-1).astype(float)

    def vjp(self, cot: np.ndarray, coords: np.ndarray | None = None) -> np.ndarray:
        c = np.asarray(cot, dtype=float).reshape(self.shape) if self.shape else float(np.asarray(cot).reshape(-1)[0])
        return self.ev.vjp(np.zeros(self.n), c, coords=coords)

    def columns(self, cols: np.ndarray) -> Any:
        return jacobian_columns(self.expr, self.layout, np.asarray(cols, dtype=np.int64))

    def rows(self, rows: np.ndarray) -> _RowsOfExpr:
        return _RowsOfExpr(self, np.asarray(rows, dtype=np.int64))


class _RowsOfExpr:
    """Rows of an ExprMap: evaluated in full, then subset (no cheaper way through a general tree)."""

    canonical = False

    def __init__(self, base: ExprMap, rows: np.ndarray):
        self.base, self.rows_ = base, rows
        self.shape = (len(rows),) + base.shape[1:]
        self.size = math.prod(self.shape)
        self.n = base.n
        self.b = base.b.reshape(base.shape)[rows].reshape(-1)

    def value(self, x: np.ndarray) -> np.ndarray:
        return self.base.value(x).reshape(self.base.shape)[self.rows_].reshape(-1)

    def vjp(self, cot: np.ndarray, coords: np.ndarray | None = None) -> np.ndarray:
        full = np.zeros(self.base.shape)
        full[self.rows_] = np.asarray(cot, dtype=float).reshape(self.shape)
        return self.base.vjp(full, coords)

    def columns(self, cols: np.ndarray) -> Any:
        J = self.base.columns(cols)
        idx = np.arange(self.base.size).reshape(self.base.shape)[self.rows_].reshape(-1)
        return J[idx]


def _view(e: Expr, layout: Layout) -> tuple[np.ndarray, tuple[int, ...]] | None:
    """(flat coordinates, shape) if e is a variable or a chain of basic indexing of one."""
    if isinstance(e, Variable):
        return layout.coords(e), e.shape
    if isinstance(e, Index):
        inner = _view(e.args[0], layout)
        if inner is not None:
            return inner[0][e.flat_indices()], e.shape
    return None


def _merge_blocks(blocks: list[Block]) -> list[Block]:
    """Blocks that read the same view through the same operator become one (their scales add):
    ``w[0] + 2 * w[0] + ...`` is one block, not one per term."""
    out: dict[tuple, Block] = {}
    for blk in blocks:
        key = (id(blk.op), blk.coords.tobytes(), blk.vshape, id(blk.right), blk.scalar_out)
        if key in out:
            prev = out[key]
            scale = (
                float(prev.scale) + float(blk.scale)
                if np.ndim(prev.scale) == 0 and np.ndim(blk.scale) == 0
                else np.broadcast_to(prev.scale, prev.shape) + np.broadcast_to(blk.scale, blk.shape)
            )
            out[key] = Block(blk.coords, blk.vshape, blk.op, blk.shape, scale, blk.scalar_out, blk.right)
        else:
            out[key] = blk
    return list(out.values())


def linearize(e: Expr, layout: Layout, memo: dict[int, Any] | None = None) -> AffineMap:
    """The canonical block form of the affine expression ``e`` (raises NotCanonical). ``memo``: the
    forms of the subexpressions linearized so far for one design (the softmax's or Poisson's
    linear term -sum(Y .* Z) reads the Z its loss reads: linearized once)."""
    m = _linearize(e, layout, memo)
    m.expr = e
    return m


def _linearize(e: Expr, layout: Layout, memo: dict[int, Any] | None = None) -> AffineMap:
    """:func:`_linearize_node` of ``e``, once per node of a ``memo`` (each use its own map over the
    shared blocks, which nothing modifies)."""
    if memo is None:
        return _linearize_node(e, layout, memo)
    got = memo.get(id(e))
    if got is None or got[0] is not e:
        got = memo[id(e)] = (e, _linearize_node(e, layout, memo))  # (e kept: its id not reused)
    m = got[1]
    out = AffineMap(list(m.blocks), 0.0 if m.zero_offset else m.b, m.shape, m.n)
    return out


def _linearize_node(e: Expr, layout: Layout, memo: dict[int, Any] | None) -> AffineMap:
    n = layout.n
    shape = e.shape
    if e.is_constant():
        return AffineMap([], dense(e.constant_value()), shape, n)
    v = _view(e, layout)
    if v is not None:
        return AffineMap([Block(v[0], v[1], None, shape, recipe=(shape, ()))], 0.0, shape, n)
    if isinstance(e, MatMul):
        a, b = e.args
        if a.is_constant() and not b.is_constant():
            D = a.constant_value()
            vb = _view(b, layout)
            if vb is not None and np.ndim(D) == 2 and b.ndim in (1, 2):
                blk = Block(vb[0], vb[1], as_operator(D), shape, source=a, recipe=(shape, ()))
                return AffineMap([blk], 0.0, shape, n)
            if vb is not None and np.ndim(D) == 1 and b.ndim == 1:
                blk = Block(vb[0], vb[1], as_operator(D), shape, scalar_out=True, source=a, recipe=(shape, ()))
                return AffineMap([blk], 0.0, shape, n)
            if np.ndim(D) == 2 and b.ndim == 1:  # constant matrix @ (affine vector): fold into the blocks
                inner = _linearize(b, layout, memo)
                Dd = dense(D)
                blocks = []
                for blk in inner.blocks:
                    sc = np.broadcast_to(blk.scale, blk.shape) if np.ndim(blk.scale) else float(blk.scale)
                    if blk.op is None and blk.nshape == blk.shape:
                        M = Dd * (sc[None, :] if np.ndim(sc) else sc)
                    elif blk.op is not None and len(blk.vshape) == 1 and not blk.scalar_out and blk.nshape == blk.shape:
                        M = Dd @ ((sc[:, None] if np.ndim(sc) else sc) * blk.op.dense())
                    else:
                        raise NotCanonical
                    blocks.append(Block(blk.coords, blk.vshape, DataOperator(M), shape))
                return AffineMap(blocks, Dd @ inner.b, shape, n)
        raise NotCanonical
    if isinstance(e, (Add, Sub)):
        # a chain of + and - (10,000 terms long in a generated model) without recursion along it
        blocks: list[Block] = []
        b = np.zeros(shape)
        offset = False
        stack = [(e, 1.0)]
        while stack:
            node, sign = stack.pop()
            if isinstance(node, (Add, Sub)):
                stack.append((node.args[1], -sign if isinstance(node, Sub) else sign))
                stack.append((node.args[0], sign))
                continue
            if isinstance(node, Neg):
                stack.append((node.args[0], -sign))
                continue
            part = _linearize(node, layout, memo)
            blocks += [blk.scaled(sign, shape) for blk in part.blocks]
            if not part.zero_offset:
                offset = True
                b = b + sign * np.broadcast_to(part.b.reshape(part.shape), shape)
        return AffineMap(_merge_blocks(blocks), b if offset else 0.0, shape, n)
    if isinstance(e, Neg):
        pa = _linearize(e.args[0], layout, memo)
        return AffineMap([blk.scaled(-1.0, shape) for blk in pa.blocks], 0.0 if pa.zero_offset else -pa.b, shape, n)
    if isinstance(e, (Mul, Div)):
        a, b = e.args
        if isinstance(e, Div):
            if not b.is_constant():
                raise NotCanonical
            factor, inner = (b, True), a
        elif a.is_constant():
            factor, inner = (a, False), b
        elif b.is_constant():
            factor, inner = (b, False), a
        else:
            raise NotCanonical
        pa = _linearize(inner, layout, memo)
        kk = factor_value(factor[0].constant_value(), factor[1])
        bb = 0.0 if pa.zero_offset else np.broadcast_to(pa.b.reshape(pa.shape), shape) * kk
        return AffineMap([blk.scaled(kk, shape, factor) for blk in pa.blocks], bb, shape, n)
    raise NotCanonical


def factor_value(k: Any, reciprocal: bool) -> Any:
    """The factor a block is scaled by for the constant value k (its reciprocal for a division):
    a float, or an array."""
    k = 1.0 / dense(k) if reciprocal else dense(k)
    return float(k) if np.ndim(k) == 0 else k


def affine_map(e: Expr, layout: Layout, memo: dict[int, Any] | None = None) -> AffineMap | ExprMap:
    try:
        return linearize(e, layout, memo)
    except NotCanonical:
        return ExprMap(e, layout)
