"""The design: a composite objective's data behind one interface.

A composite objective (see :mod:`sparsemodel.compile.structure`) is

    f(x) = const + lin'x + sum_t c_t sum_i w_ti phi_t((A_t x + b_t)_i)

with phi_t an elementwise loss (square, logistic, huber, exp, a user func ...) or a row-wise one
(``logsumexp(Z, axis=1)``, the softmax loss: one value per row of an (n, m) affine map). Linear
terms are folded into ``lin`` and ``const``. :class:`Design` holds the terms and offers:

* value, gradient (all coordinates or a subset) and exact Hessian-vector products;
* ``reduced(cols)``: the terms restricted to a set of coordinates, ``A_t[:, cols]`` (the columns
  "J B" of a coordinate subspace B), the input of every restricted-solve and scoring kernel;
  ``restrict(...)`` for the low-rank subspaces {U C} of :class:`~sparsemodel.compile.sets.LowRank`;
* the finite-sum view: ``n_samples`` (the common leading dimension of the terms that read data,
  one sample per row) and ``grad_batch(x, rows)``, an unbiased gradient estimate from the rows
  ``rows`` only, at a cost proportional to their stored entries; terms without a sample axis (the
  separable regularizer, e.g. ``lam/2 * sum_squares(w)``) are kept apart and evaluated exactly.

Each affine map is kept in a canonical form when it has one (:class:`AffineMap`): a sum of blocks
``scale * (D @ x[view])`` or ``scale * x[view]`` (broadcast) plus an offset, where ``D`` is a
:class:`~sparsemodel.compile.linop.DataOperator` holding the user's data without copying it. Any
other affine expression (transposes, reductions inside the loss, ...) falls back to
:class:`ExprMap`, which evaluates the expression tree (correct, but a row subset then costs a full
pass).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..model import atoms as A
from ..model.expr import Add, Data, Div, Expr, Index, MatMul, Mul, Neg, Sub, Variable, dense, unbroadcast
from .evaluator import Evaluator, Layout
from .linop import DataOperator
from .structure import Composite, RawTerm, jacobian_columns

DENSE_LIMIT = 1_000_000  # reduced columns are returned dense up to this many entries
FULL_LIMIT = 4_000_000  # entries: cache a term's whole Jacobian below this
CHUNK_ENTRIES = 4_000_000  # entries per block of columns when streaming a Jacobian that is not kept
SMALL_DENSE = 200_000  # entries: a sparse block this small is used dense


class NotCanonical(Exception):
    """The affine expression has no canonical block form (use ExprMap)."""


# ====================================================================== affine maps


class Block:
    """One summand ``scale * broadcast(native(x))`` of an affine map of shape ``shape``.

    ``native(x)`` is ``x[coords].reshape(vshape)`` (``op`` None), ``op @ x[coords]`` for a vector
    view (an (n,) result, or a scalar when ``op`` came from a data vector), or ``op @ X`` with
    ``X = x[coords].reshape(q, m)`` (an (n, m) result); ``right`` (a dense (r, m) array, for
    matrix views) multiplies the result on the right (the row-space subspaces W = B V' of a
    low-rank set). ``scale`` is a float or an array of the map's shape.
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
    ):
        self.coords = np.asarray(coords, dtype=np.int64)
        self.vshape = tuple(vshape)
        self.op = op
        self.scalar_out = scalar_out
        self.right = right
        if op is None:
            self.nshape = self.vshape
        elif scalar_out:
            self.nshape = ()
        else:
            self.nshape = (op.shape[0],) + self.vshape[1:]
        if right is not None:
            self.nshape = (self.nshape[0], right.shape[1])
        self.shape = tuple(shape)
        self.scale = scale if np.ndim(scale) == 0 else np.broadcast_to(np.asarray(scale, dtype=float), self.shape)
        self._inv: np.ndarray | None = None

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
        size = int(np.prod(self.shape, dtype=np.int64))
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
            idx = np.broadcast_to(np.arange(int(np.prod(self.vshape, dtype=np.int64))).reshape(self.vshape), self.shape)
            idx = idx.ravel()
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
        else:
            raise NotCanonical
        if not rows_list:
            return None
        return sp.csc_matrix(
            (np.concatenate(vals_list), (np.concatenate(rows_list), np.concatenate(cols_list))),
            shape=(size, len(cols)),
        )

    # ---- row subsets
    def rows(self, rows: np.ndarray, new_shape: tuple[int, ...]) -> Block:
        scale = self.scale if np.ndim(self.scale) == 0 else np.asarray(self.scale)[rows]
        if self.op is not None and not self.scalar_out:
            return Block(self.coords, self.vshape, self.op.rows(rows), new_shape, scale, right=self.right)
        if self.op is None and len(self.nshape) == len(self.shape) and self.nshape[0] == self.shape[0] > 1:
            c = self.coords.reshape(self.vshape)[rows].ravel()
            return Block(c, (len(rows),) + self.vshape[1:], None, new_shape, scale, right=self.right)
        return Block(self.coords, self.vshape, self.op, new_shape, scale, self.scalar_out, self.right)

    def scaled(self, k: Any, shape: tuple[int, ...]) -> Block:
        if np.ndim(k) == 0 and np.ndim(self.scale) == 0 and shape == self.shape:
            return Block(
                self.coords, self.vshape, self.op, shape, float(self.scale) * float(k), self.scalar_out, self.right
            )
        s = np.broadcast_to(self.scale, self.shape) * np.asarray(k, dtype=float)
        return Block(self.coords, self.vshape, self.op, shape, np.broadcast_to(s, shape), self.scalar_out, self.right)

    def remapped(self, where: np.ndarray) -> Block:
        return Block(where[self.coords], self.vshape, self.op, self.shape, self.scale, self.scalar_out, self.right)


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
        self.size = int(np.prod(self.shape, dtype=np.int64))
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

    def __init__(self, expr: Expr, layout: Layout):
        self.expr = expr
        self.layout = layout
        self.ev = Evaluator(expr, layout)
        self.shape = expr.shape
        self.size = expr.size
        self.n = layout.n
        self.b = np.atleast_1d(dense(self.ev.value(np.zeros(layout.n)))).reshape(-1).astype(float)

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
        self.size = int(np.prod(self.shape, dtype=np.int64))
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


def linearize(e: Expr, layout: Layout) -> AffineMap:
    """The canonical block form of the affine expression ``e`` (raises NotCanonical)."""
    n = layout.n
    shape = e.shape
    if e.is_constant():
        return AffineMap([], dense(e.constant_value()), shape, n)
    v = _view(e, layout)
    if v is not None:
        return AffineMap([Block(v[0], v[1], None, shape)], 0.0, shape, n)
    if isinstance(e, MatMul):
        a, b = e.args
        if a.is_constant() and not b.is_constant():
            D = a.constant_value()
            vb = _view(b, layout)
            if vb is not None and np.ndim(D) == 2 and b.ndim in (1, 2):
                return AffineMap([Block(vb[0], vb[1], DataOperator(D), shape)], 0.0, shape, n)
            if vb is not None and np.ndim(D) == 1 and b.ndim == 1:
                return AffineMap([Block(vb[0], vb[1], DataOperator(D), shape, scalar_out=True)], 0.0, shape, n)
            if np.ndim(D) == 2 and b.ndim == 1:  # constant matrix @ (affine vector): fold into the blocks
                inner = linearize(b, layout)
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
            part = linearize(node, layout)
            blocks += [blk.scaled(sign, shape) for blk in part.blocks]
            b = b + sign * np.broadcast_to(part.b.reshape(part.shape), shape)
        return AffineMap(_merge_blocks(blocks), b, shape, n)
    if isinstance(e, Neg):
        pa = linearize(e.args[0], layout)
        return AffineMap([blk.scaled(-1.0, shape) for blk in pa.blocks], -pa.b, shape, n)
    if isinstance(e, (Mul, Div)):
        a, b = e.args
        if isinstance(e, Div):
            if not b.is_constant():
                raise NotCanonical
            k, inner = 1.0 / dense(b.constant_value()), a
        elif a.is_constant():
            k, inner = dense(a.constant_value()), b
        elif b.is_constant():
            k, inner = dense(b.constant_value()), a
        else:
            raise NotCanonical
        pa = linearize(inner, layout)
        kk = float(k) if np.ndim(k) == 0 else k
        bb = np.broadcast_to(pa.b.reshape(pa.shape), shape) * kk
        return AffineMap([blk.scaled(kk, shape) for blk in pa.blocks], bb, shape, n)
    raise NotCanonical


def affine_map(e: Expr, layout: Layout) -> AffineMap | ExprMap:
    try:
        return linearize(e, layout)
    except NotCanonical:
        return ExprMap(e, layout)


# ====================================================================== terms and the design


@dataclass
class Term:
    """c * sum_i w_i phi(z_i), z = map(x); ``rowwise``: phi maps each row of an (n, m) z to a number."""

    coef: float
    phi: Any
    map: Any
    weights: np.ndarray | None = None
    rowwise: bool = False

    @property
    def quadratic(self) -> bool:
        return isinstance(self.phi, A.square)

    @property
    def curvature_sup(self) -> float | None:
        """sup phi'' of the loss (a global curvature bound), as its atom states it (built-in or user
        ``func``); 1/2 for the row-wise softmax, whose Hessian diag(p) - p p' has norm <= 1/2."""
        if self.rowwise:
            return 0.5
        return getattr(self.phi, "curvature_sup", None)

    @property
    def out_size(self) -> int:
        """Number of phi values: entries, or rows for a row-wise loss."""
        return self.map.shape[0] if self.rowwise else self.map.size

    def derivs(self, z: np.ndarray, order: int = 2) -> tuple[np.ndarray, Any, Any]:
        """phi values and derivatives on the last axis of ``z`` (which may carry a leading batch
        axis), weights applied. Elementwise: (v, phi', phi'') per entry. Row-wise: (v per row,
        gradient per entry, None; the Hessian is diag(P) - P P' per row, see :func:`row_hvp`)."""
        w = self.weights
        if self.rowwise:
            m = self.map.shape[1]
            Z = z.reshape(z.shape[:-1] + (-1, m))
            zmax = Z.max(axis=-1, keepdims=True)
            E = np.exp(Z - zmax)
            s = E.sum(axis=-1, keepdims=True)
            v = (np.log(s) + zmax)[..., 0]
            P = (E / s).reshape(z.shape) if order >= 1 else None
            if w is not None:
                v = v * w
                if P is not None:
                    P = (P.reshape(Z.shape) * w[:, None]).reshape(z.shape)
            return v, P, None
        v, d1, d2 = self.phi.derivs(z, order)
        if w is not None:
            v = v * w
            d1 = d1 * w if d1 is not None else None
            d2 = d2 * w if d2 is not None else None
        return v, d1, d2

    def probs(self, z: np.ndarray) -> np.ndarray:
        """Row-wise softmax probabilities (unweighted), same shape as z."""
        m = self.map.shape[1]
        Z = z.reshape(z.shape[:-1] + (-1, m))
        E = np.exp(Z - Z.max(axis=-1, keepdims=True))
        return (E / E.sum(axis=-1, keepdims=True)).reshape(z.shape)

    def curv_apply(self, z: np.ndarray, d2: np.ndarray | None, u: np.ndarray) -> np.ndarray:
        """The loss Hessian at z (per entry or per row) applied to u (same shape as z), weights in."""
        if not self.rowwise:
            return d2 * u
        m = self.map.shape[1]
        P = self.probs(z).reshape(z.shape[:-1] + (-1, m))
        U = u.reshape(P.shape)
        out = P * U - P * (P * U).sum(axis=-1, keepdims=True)
        if self.weights is not None:
            out = out * self.weights[:, None]
        return out.reshape(z.shape)


@dataclass
class Reduced:
    """A design restricted to d coordinates: what the kernels minimize over.

    ``Js[t]`` is term t's Jacobian columns (size_t x d, dense or sparse), ``offsets[t]`` its affine
    value at the fixed part of x (b_t, plus A_t x for coordinates held at a given value), ``lin``
    the gradient of the linear terms on these coordinates."""

    terms: list[Term]
    Js: list[Any]
    offsets: list[np.ndarray]
    lin: np.ndarray
    const: float
    # per term: the diagonal r of a separable ridge on these columns (see Design.separable_diagonal),
    # False for a term that is not one, None where not known (the kernel then checks the columns)
    folds: list[Any] | None = None

    @property
    def d(self) -> int:
        return len(self.lin)

    @property
    def least_squares(self) -> bool:
        return all(t.quadratic and t.coef > 0 for t in self.terms)

    @property
    def quadratic(self) -> bool:
        return all(t.quadratic for t in self.terms)

    def dense(self) -> Reduced:
        Js = [J.toarray() if sp.issparse(J) else np.asarray(J, dtype=float) for J in self.Js]
        return Reduced(self.terms, Js, self.offsets, self.lin, self.const)


class Design:
    """The composite objective of a lowered problem (see the module docstring)."""

    def __init__(self, comp: Composite, layout: Layout):
        self.layout = layout
        self.n = layout.n
        self.const = comp.const
        self.lin = np.zeros(layout.n)
        self.terms: list[Term] = []
        zero = np.zeros(layout.n)
        for rt in comp.terms:
            m = affine_map(rt.affine, layout)
            if rt.phi is None:  # a linear term: c * sum(w * (A x + b))
                w = rt.weights if rt.weights is not None else np.ones(m.size)
                self.lin += rt.coef * m.vjp(np.broadcast_to(w, (m.size,)).reshape(m.shape) if m.shape else w)
                self.const += rt.coef * float(np.sum(w * m.b))
                continue
            self.terms.append(Term(rt.coef, rt.phi, m, rt.weights, rt.rowwise))
        self.lin = layout.symmetrize_grad(self.lin)
        del zero
        self._cache: OrderedDict[bytes, list[Any]] = OrderedDict()
        self._full: dict[int, Any] = {}
        self._separable: dict[int, np.ndarray | None] = {}
        # the sample axis: the largest leading dimension among the terms that read data; the terms
        # with it are the finite sum, every other term (the separable regularizer, a quad_form, a
        # small side term) is evaluated exactly in every mini-batch, which keeps it unbiased
        rows = [t.map.n_rows for t in self.terms if t.map.reads_data() and t.map.shape]
        n_s = max(rows, default=None)
        self.sample_terms = [
            i
            for i, t in enumerate(self.terms)
            if n_s is not None and t.map.shape and t.map.shape[0] == n_s and t.map.reads_data()
        ]
        self.n_samples: int | None = n_s if n_s is not None and n_s > 1 else None
        self._merge_small_terms()
        self._chunked = self.chunked

    MERGE_SIZE = 64  # terms with at most this many entries may be merged

    def _merge_small_terms(self) -> None:
        """Many small terms with the same loss (a model written by a program: one term per
        feature, per group, per weight) become one term over a sparse operator, so that an
        evaluation is one sparse product instead of a Python loop over terms."""
        groups: dict[tuple, list[int]] = {}
        for i, t in enumerate(self.terms):
            if (
                i in self.sample_terms
                or t.rowwise
                or t.coef <= 0
                or t.map.size > self.MERGE_SIZE
                or not getattr(t.map, "canonical", False)
            ):
                continue
            key = (type(t.phi), getattr(t.phi, "M", None), id(getattr(t.phi, "fdef", None)))
            groups.setdefault(key, []).append(i)
        merged: list[Term] = []
        drop: set[int] = set()
        for idx in groups.values():
            if len(idx) < 8:
                continue
            rows, bs, ws = [], [], []
            for i in idx:
                t = self.terms[i]
                cols = (
                    np.unique(np.concatenate([blk.coords for blk in t.map.blocks]))
                    if t.map.blocks
                    else np.zeros(0, int)
                )
                J = sp.csr_matrix(t.map.columns(cols)) if len(cols) else sp.csr_matrix((t.map.size, 0))
                J = sp.csr_matrix((J.data, cols[J.indices], J.indptr), shape=(t.map.size, self.n))
                rows.append(J)
                bs.append(t.map.b)
                w = t.weights if t.weights is not None else np.ones(t.map.size)
                ws.append(t.coef * w)
            J = sp.vstack(rows).tocsc()
            size = J.shape[0]
            m = AffineMap(
                [Block(np.arange(self.n), (self.n,), DataOperator(J), (size,))], np.concatenate(bs), (size,), self.n
            )
            merged.append(Term(1.0, self.terms[idx[0]].phi, m, np.concatenate(ws)))
            drop |= set(idx)
        if merged:
            keep = [t for i, t in enumerate(self.terms) if i not in drop]
            sample = [self.terms[i] for i in self.sample_terms]
            self.terms = keep + merged
            self.sample_terms = [self.terms.index(t) for t in sample]

    def curved_coordinates(self) -> np.ndarray:
        """A mask of the coordinates some (nonlinear) term reads: the others carry only the linear
        part ``lin``, so f is linear along them."""
        touched = np.zeros(self.n, dtype=bool)
        for t in self.terms:
            for blk in getattr(t.map, "blocks", None) or []:
                if blk.op is None or blk.right is not None or blk.scalar_out:
                    touched[blk.coords] = True
                elif len(blk.vshape) == 1:
                    touched[blk.coords[blk.op.col_sq_norms() > 0]] = True
                else:
                    rows_used = blk.op.col_sq_norms() > 0
                    touched[blk.coords.reshape(blk.vshape)[rows_used].ravel()] = True
            if not getattr(t.map, "canonical", False):
                for v in t.map.expr.variables():
                    touched[self.layout.slice(v)] = True
        return touched

    # ------------------------------------------------------------------ facts
    @property
    def least_squares(self) -> bool:
        """Only c * sum_squares(affine) terms with c > 0 (plus linear terms and constants)."""
        return bool(self.terms) and not self.lin.any() and all(t.quadratic and t.coef > 0 for t in self.terms)

    @property
    def quadratic(self) -> bool:
        return all(t.quadratic for t in self.terms)

    def describe(self) -> str:
        if self.least_squares:
            return "least squares (direct QR/Cholesky restricted solves)"
        if self.quadratic:
            return "quadratic (direct Cholesky restricted solves)"
        names = sorted({t.phi.name for t in self.terms})
        return f"sum of losses ({', '.join(names)}) of affine maps (Newton restricted solves)"

    def curvature_bound(self) -> float | None:
        """max over terms of sup phi'' (None if some phi'' is unbounded, e.g. exp or log): each
        term's :attr:`Term.curvature_sup`, which the atom states (built-in or user ``func``)."""
        bounds = []
        for t in self.terms:
            b = t.curvature_sup
            if b is None:
                return None
            bounds.append(b)
        return max(bounds, default=0.0)

    # ------------------------------------------------------------------ evaluation
    def value(self, x: np.ndarray) -> float:
        f = self.const + float(self.lin @ x)
        for t in self.terms:
            v = t.derivs(t.map.value(x), 0)[0]
            f += t.coef * float(np.sum(v))
        return f

    def _one_pass_square(self, t: Term, x: np.ndarray, offset: bool = True) -> tuple[float, np.ndarray] | None:
        """For a square loss over a chunked operator: (sum_i w_i z_i^2, the gradient of it) with
        z = A x (+ b with ``offset``), from ONE pass over the data (each row block forms its z and
        its share of A'(2 w z)); the map's other blocks (views, in-memory data) on the driver.
        None when the term has another form (then two passes: A x, then A' phi'(z))."""
        m = t.map
        if not (self._chunked and t.quadratic and not t.rowwise and getattr(m, "canonical", False)):
            return None
        big = [blk for blk in m.blocks if blk.op is not None and blk.op.chunked]
        if len(big) != 1:
            return None
        blk = big[0]
        if len(blk.vshape) != 1 or blk.scalar_out or blk.right is not None or np.ndim(blk.scale) != 0:
            return None
        if blk.nshape != m.shape:
            return None
        zo = m.b.copy() if offset else np.zeros(m.size)
        for ob in m.blocks:
            if ob is not blk:
                zo += ob.value(x).reshape(-1)
        xs = x[blk.coords]
        nz = np.flatnonzero(xs)
        v, gB, z = blk.op.square_pass(nz, xs[nz], zo, t.weights, float(blk.scale))
        g = np.zeros(self.n)
        g[blk.coords] += gB
        rest = [ob for ob in m.blocks if ob is not blk]
        if rest:
            cot = (2.0 * (t.weights * z if t.weights is not None else z)).reshape(m.shape)
            for ob in rest:
                ob.vjp(cot, g)
        return v, g

    def value_and_grad(self, x: np.ndarray, coords: np.ndarray | None = None) -> tuple[float, np.ndarray]:
        f = self.const + float(self.lin @ x)
        g = self.lin.copy()
        for t in self.terms:
            one = self._one_pass_square(t, x)
            if one is not None:
                f += t.coef * one[0]
                g += t.coef * one[1]
                continue
            v, d1, _ = t.derivs(t.map.value(x), 1)
            f += t.coef * float(np.sum(v))
            g += t.coef * t.map.vjp(d1, coords)
        if not np.isfinite(f):
            return f, np.full(self.n, np.nan)
        return f, self.layout.symmetrize_grad(g)

    def grad_from_derivs(self, d1s: list[np.ndarray]) -> np.ndarray:
        """The gradient from each term's loss derivative phi'(z_t) (weights in, as :meth:`Term.derivs`
        gives it) at a point: lin + sum_t c_t A_t' phi'(z_t), one transposed product per term and no
        forward pass (a Newton solve ends with these derivatives)."""
        g = self.lin.copy()
        for t, d1 in zip(self.terms, d1s):
            g += t.coef * t.map.vjp(d1)
        return self.layout.symmetrize_grad(g)

    def hvp(self, x: np.ndarray, v: np.ndarray, bound: bool = False) -> np.ndarray:
        """Hessian at x times v; with ``bound`` the Hessian with phi'' replaced by its global bound
        (for smoothness constants valid everywhere)."""
        out = np.zeros(self.n)
        use = bound and self.curvature_bound() is not None
        for t in self.terms:
            one = self._one_pass_square(t, v, offset=False) if t.weights is None or not use else None
            if one is not None:  # a square loss: phi'' = 2 w everywhere, A'(2 w A v) in one pass
                out += t.coef * one[1]
                continue
            Jv = t.map.value(v) - t.map.b
            if use and t.coef > 0:  # each term's own bound: sup phi'' of its loss
                cb = t.curvature_sup
                if t.weights is None:
                    r = cb * Jv
                else:
                    w = np.abs(t.weights)
                    r = cb * (np.repeat(w, t.map.shape[1]) if t.rowwise else w) * Jv
            else:
                z = t.map.value(x)
                _, _, d2 = t.derivs(z, 2)
                r = t.curv_apply(z, d2, Jv)
            out += t.coef * t.map.vjp(r)
        return self.layout.symmetrize_grad(out)

    # ------------------------------------------------------------------ columns
    def full_columns(self, i: int) -> Any | None:
        """Term i's whole Jacobian (n_i x n) when small enough to keep, else None."""
        if i not in self._full:
            t = self.terms[i]
            # a map without data (a ridge, a selection of x) has a sparse Jacobian of at most size entries per block
            sparse = getattr(t.map, "canonical", False) and all(b.op is None for b in t.map.blocks)
            keep = t.map.size * self.n <= FULL_LIMIT or (sparse and t.map.size * len(t.map.blocks) <= FULL_LIMIT)
            F = t.map.columns(np.arange(self.n)) if keep else None
            if F is not None and sp.issparse(F) and F.shape[0] * F.shape[1] <= SMALL_DENSE:
                F = F.toarray()  # small: a dense column subset is cheaper than sparse indexing
            if F is not None and not sp.issparse(F):
                F = np.asfortranarray(F, dtype=float)  # a column subset gathers contiguous columns
            self._full[i] = F
        return self._full[i]

    def term_columns(self, i: int, cols: np.ndarray) -> Any:
        F = self.full_columns(i)
        return F[:, cols] if F is not None else self.terms[i].map.columns(cols)

    def _curvatures(self, x: np.ndarray | None) -> list[np.ndarray] | None:
        """c_t * phi_t''(z_t) of every term at x (the constant ones of a quadratic design when x is
        None); None when some term is row-wise (its Hessian is not J' diag(c) J)."""
        out = []
        for t in self.terms:
            if t.rowwise:
                return None
            z = t.map.b if (x is None and t.quadratic) else t.map.value(x if x is not None else np.zeros(self.n))
            out.append(t.coef * t.derivs(z, 2)[2])
        return out

    def hessian_columns(self, cols: np.ndarray, x: np.ndarray | None = None) -> np.ndarray | None:
        """H[:, cols] (n, len(cols)) of the composite part at x (None: a quadratic design's constant
        Hessian): sum_t J_t' diag(c_t phi_t'') J_t[:, cols], from the stored Jacobian when it is
        kept, else from the columns and one transposed product with the data per block of columns
        (no whole Jacobian formed). None for a row-wise term."""
        curv = self._curvatures(x)
        if curv is None:
            return None
        cols = np.asarray(cols, dtype=np.int64)
        out = np.zeros((self.n, len(cols)))
        for i, t in enumerate(self.terms):
            J = self.full_columns(i)
            step = max(1, CHUNK_ENTRIES // max(t.map.size, 1))
            for lo in range(0, len(cols), step):
                blk = cols[lo : lo + step]
                Jb = J[:, blk] if J is not None else t.map.columns(blk)
                L = (sp.diags(curv[i]) @ Jb).toarray() if sp.issparse(Jb) else curv[i][:, None] * np.asarray(Jb)
                if J is not None:
                    out[:, lo : lo + step] += np.asarray(J.T @ L)
                elif hasattr(t.map, "vjp_columns"):
                    out[:, lo : lo + step] += t.map.vjp_columns(L)
                else:
                    for j in range(L.shape[1]):
                        out[:, lo + j] += t.map.vjp(L[:, j])
        return out

    def hessian_diagonal(self, x: np.ndarray | None = None, squares: list[Any] | None = None) -> np.ndarray | None:
        """diag(H) of the composite part at x (None: a quadratic design's constant Hessian):
        sum_t (J_t * J_t)' (c_t phi_t''). ``squares``: each term's stored J * J (or None), else the
        columns are streamed in blocks (one pass over the data). None for a row-wise term."""
        curv = self._curvatures(x)
        if curv is None:
            return None
        out = np.zeros(self.n)
        for i, t in enumerate(self.terms):
            sq = squares[i] if squares is not None else None
            if sq is not None:
                out += np.asarray(sq.T @ curv[i]).ravel()
                continue
            rest = _read_coords(t.map, self.n)
            for blk_, scale2 in _operator_blocks(t.map, self.n):
                out[blk_.coords] += blk_.op.column_square_dot(scale2 * curv[i])
                rest = rest[~np.isin(rest, blk_.coords)]
            step = max(1, CHUNK_ENTRIES // max(t.map.size, 1))
            for lo in range(0, len(rest), step):
                blk = rest[lo : lo + step]
                Jb = t.map.columns(blk)
                if sp.issparse(Jb):
                    out[blk] += np.asarray(Jb.multiply(Jb).T @ curv[i]).ravel()
                else:
                    Jb = np.asarray(Jb)
                    out[blk] += np.einsum("ij,ij,i->j", Jb, Jb, curv[i])
        return out

    def row_square_sums(self, i: int, cols: np.ndarray) -> np.ndarray:
        """sum_{j in cols} J_i[:, j]^2 (one value per entry of term i): from the data operator of
        each block that reads one (X @ w), the other blocks' columns streamed."""
        t = self.terms[i]
        out = np.zeros(t.map.size)
        rest = np.intersect1d(cols, _read_coords(t.map, self.n))
        for blk, scale2 in _operator_blocks(t.map, self.n):
            loc = blk.local(self.n)[cols]
            hit = loc >= 0
            if hit.any():
                out += scale2 * blk.op.row_square_sums(None if hit.sum() == blk.op.shape[1] else loc[hit])
                rest = rest[~np.isin(rest, cols[hit])]
        step = max(1, CHUNK_ENTRIES // max(t.map.size, 1))
        for lo in range(0, len(rest), step):
            Jb = t.map.columns(rest[lo : lo + step])
            out += np.asarray(Jb.multiply(Jb).sum(axis=1)).ravel() if sp.issparse(Jb) else np.einsum("ij,ij->i", Jb, Jb)
        return out

    def columns(self, cols: np.ndarray) -> list[Any]:
        """Each term's Jacobian columns ``cols`` (cached for the last few column sets)."""
        cols = np.asarray(cols, dtype=np.int64)
        key = cols.tobytes()
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        out = []
        for i in range(len(self.terms)):
            J = self.term_columns(i, cols)
            size = J.shape[0] * J.shape[1]
            # dense up to DENSE_LIMIT entries, except a large and mostly empty block (a ridge's selection)
            if sp.issparse(J) and size <= DENSE_LIMIT and (J.nnz > 0.05 * size or size <= SMALL_DENSE):
                J = J.toarray()
            out.append(J)
        if len(self._cache) >= 8:
            self._cache.popitem(last=False)
        self._cache[key] = out
        return out

    def reduced(self, cols: np.ndarray, x_fixed: np.ndarray | None = None, dense_cols: bool = False) -> Reduced:
        """The design on the coordinates ``cols``; the other coordinates are fixed at ``x_fixed``
        (zero by default)."""
        cols = np.asarray(cols, dtype=np.int64)
        Js = self.columns(cols)
        if dense_cols:
            Js = [J.toarray() if sp.issparse(J) else np.asarray(J, dtype=float) for J in Js]
        if x_fixed is None or not np.any(x_fixed):
            offs = [t.map.b for t in self.terms]
        else:
            xf = x_fixed.copy()
            xf[cols] = 0.0
            offs = [t.map.value(xf) for t in self.terms]
        const = self.const + (
            float(self.lin @ x_fixed) - float(self.lin[cols] @ x_fixed[cols]) if x_fixed is not None else 0.0
        )
        folds = []
        for i in range(len(self.terms)):
            r = self.separable_diagonal(i)
            folds.append(False if r is None else r[cols])
        return Reduced(self.terms, Js, offs, self.lin[cols].copy(), const, folds)

    def separable_diagonal(self, i: int) -> np.ndarray | None:
        """For a separable quadratic term c * sum_r w_r (a_r x_(j_r))^2 (a ridge: every entry reads
        one coordinate, no data operator, no offset), the diagonal r over all coordinates with
        c * sum_r w_r (J x)_r^2 = 1/2 sum_j r_j x_j^2 (r_j = 2 c sum_(r: j_r = j) w_r a_r^2); None for
        any other term. Decided once per term from its whole (sparse) Jacobian."""
        if i not in self._separable:
            t = self.terms[i]
            r = None
            m = t.map
            if (
                t.quadratic
                and not t.rowwise
                and getattr(m, "canonical", False)
                and not m.reads_data()
                and not np.any(m.b)
            ):
                J = sp.csr_matrix(m.columns(np.arange(self.n)))
                J.eliminate_zeros()
                if np.diff(J.indptr).max(initial=0) <= 1:
                    w = t.weights if t.weights is not None else np.ones(J.shape[0])
                    r = 2.0 * t.coef * np.asarray(J.multiply(J).T @ w).ravel()
            self._separable[i] = r
        return self._separable[i]

    def stacked(self, cols: np.ndarray) -> np.ndarray:
        """Least squares: columns ``cols`` of the stacked weighted design M = [sqrt(c_t w_t) J_t]_t
        (f = const + ||M x - r||^2), dense."""
        blocks = []
        for i, t in enumerate(self.terms):
            J = self.term_columns(i, cols)
            J = J.toarray() if sp.issparse(J) else np.asarray(J, dtype=float)
            s = self.ls_scale(t)
            blocks.append(J * (s[:, None] if np.ndim(s) else s))
        return np.vstack(blocks) if len(blocks) > 1 else blocks[0]

    @property
    def chunked(self) -> bool:
        """Some term reads a chunked (dask) data operator."""
        return any(
            blk.op is not None and blk.op.chunked for t in self.terms for blk in getattr(t.map, "blocks", None) or []
        )

    def normal_equations(self, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray, float] | None:
        """Least squares on the coordinates ``cols`` (the others zero) as normal equations:
        f(u) = const + u'G u - 2 h'u with G = sum_t c_t J_t' W_t J_t and h = -sum_t c_t J_t' W_t b_t.
        A term that reads a chunked operator gets its share from one pass over the data
        (:meth:`DataOperator.gram_rhs`, columns of views such as an intercept passed along as a small
        dense block); the others from their columns. None when the design is not least squares or a
        chunked term has another form (several chunked blocks, a matrix view, an array scale)."""
        if not self.least_squares:
            return None
        cols = np.asarray(cols, dtype=np.int64)
        d = len(cols)
        G = np.zeros((d, d))
        h = np.zeros(d)
        const = float(self.const)
        for i, t in enumerate(self.terms):
            m = t.map
            w = t.weights
            b = m.b
            const += t.coef * float(np.sum((w if w is not None else 1.0) * b * b))
            blocks = getattr(m, "blocks", None)
            big = [blk for blk in blocks or [] if blk.op is not None and blk.op.chunked]
            if not big:
                J = self.term_columns(i, cols)
                J = J.toarray() if sp.issparse(J) else np.asarray(J, dtype=float)
                WJ = J * w[:, None] if w is not None else J
                G += t.coef * (WJ.T @ J)
                h -= t.coef * (WJ.T @ b)
                continue
            blk = big[0]
            if (
                len(big) > 1
                or len(blk.vshape) != 1
                or blk.scalar_out
                or blk.right is not None
                or np.ndim(blk.scale) != 0
                or blk.nshape != m.shape
            ):
                return None
            loc = blk.local(self.n)[cols]
            hits = np.flatnonzero(loc >= 0)
            other: Any = None
            for ob in blocks:
                if ob is blk:
                    continue
                M = ob.columns(cols, self.n)
                if M is not None:
                    M = M.toarray() if sp.issparse(M) else np.asarray(M)
                    other = M if other is None else other + M
            oc = np.flatnonzero(np.any(other != 0, axis=0)) if other is not None else np.zeros(0, dtype=np.int64)
            E = other[:, oc] if oc.size else None
            GM, hM = blk.op.gram_rhs(loc[hits], b, w, E)
            # J = [D_hits, E] P' with P placing column j of M at coordinate pos[j] (scale s on D's)
            pos = np.concatenate([hits, oc])
            sc = np.concatenate([np.full(hits.size, float(blk.scale)), np.ones(oc.size)])
            GM = GM * np.outer(sc, sc)
            hM = hM * sc
            np.add.at(G, (pos[:, None], pos[None, :]), t.coef * GM)
            np.add.at(h, pos, -t.coef * hM)
        return G, h, const

    @staticmethod
    def ls_scale(t: Term) -> Any:
        return np.sqrt(t.coef) * (np.sqrt(t.weights) if t.weights is not None else 1.0)

    def ls_rhs(self) -> np.ndarray:
        return np.concatenate([-(self.ls_scale(t) * t.map.b) for t in self.terms])

    def ls_rmatvec(self, v: np.ndarray) -> np.ndarray:
        """M' v for the stacked least-squares design (v of length sum of term sizes)."""
        out = np.zeros(self.n)
        o = 0
        for t in self.terms:
            sz = t.map.size
            out += t.map.vjp(self.ls_scale(t) * v[o : o + sz])
            o += sz
        return out

    # ------------------------------------------------------------------ finite sum
    def grad_batch(self, x: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Unbiased estimate of the gradient from the sample rows ``rows`` (without replacement):
        (n / s) * sum over the rows of the sample terms' gradients, plus the exact gradient of the
        terms without a sample axis (the separable regularizer) and of the linear terms."""
        n = self.n_samples
        if n is None:
            raise ValueError("the objective has no sample axis")
        rows = np.asarray(rows, dtype=np.int64)
        scale = n / len(rows)
        g = self.lin.copy()
        for i, t in enumerate(self.terms):
            if i in self.sample_terms:
                m = t.map.rows(rows)
                tb = Term(t.coef, t.phi, m, t.weights[rows] if t.weights is not None and t.rowwise else None, t.rowwise)
                if t.weights is not None and not t.rowwise:
                    tb.weights = t.weights.reshape(t.map.shape)[rows].reshape(-1)
                _, d1, _ = tb.derivs(m.value(x), 1)
                g += scale * t.coef * m.vjp(d1)
            else:
                _, d1, _ = t.derivs(t.map.value(x), 1)
                g += t.coef * t.map.vjp(d1)
        return self.layout.symmetrize_grad(g)

    def sample_smoothness(self, top: int | None) -> float | None:
        """l_s of paper 002's Assumption 2: a bound on the restricted smoothness of every f_i (f =
        (1/n) sum_i f_i, f_i = n times sample i's share of the sample terms, plus the terms without
        a sample axis) over directions with at most ``top`` nonzeros (None: any direction). For a
        sample whose terms read the data row a_i through phi (phi'' <= c), the Hessian of f_i is
        n c w_i a_i a_i' (times the identity over the columns of a matrix variable), so l_s is n c w_i
        times the sum of the ``top`` largest a_ij^2, maximized over i (plus free and regularizer
        contributions). None when a sample term has no canonical form or an unbounded phi''."""
        n = self.n_samples
        if n is None:
            return None
        per = np.zeros(n)
        for i in self.sample_terms:
            t = self.terms[i]
            if not getattr(t.map, "canonical", False):
                return None
            if t.rowwise:
                c = 0.5
            elif isinstance(t.phi, (A.square, A.huber)):
                c = 2.0
            elif isinstance(t.phi, A.logistic):
                c = 0.25
            else:
                return None
            w = np.ones(t.map.shape[0])
            if t.weights is not None:
                ww = np.abs(t.weights).reshape(t.map.shape[0], -1)
                w = ww.max(axis=1)
            acc = np.zeros(n)
            for blk in t.map.blocks:
                sc = (
                    np.abs(np.broadcast_to(blk.scale, blk.shape)).reshape(n, -1).max(axis=1)
                    if np.ndim(blk.scale)
                    else abs(float(blk.scale)) * np.ones(n)
                )
                if blk.op is None:  # a broadcast view (an intercept): each entry at most once per row
                    acc += sc * sc * (int(np.prod(blk.vshape)) if top is None else min(top, int(np.prod(blk.vshape))))
                    continue
                if blk.scalar_out or blk.right is not None:
                    return None
                rowtop = blk.op.row_top_sq(top)
                acc += sc * sc * rowtop
            per += n * abs(t.coef) * c * w * acc
        rest = 0.0  # the terms without a sample axis: their own smoothness bound, exact in every f_i
        for i, t in enumerate(self.terms):
            if i in self.sample_terms:
                continue
            if not isinstance(t.phi, (A.square, A.huber)):
                return None
            wmax = float(np.abs(t.weights).max()) if t.weights is not None else 1.0
            blocks = getattr(t.map, "blocks", None)
            if blocks is not None and all(b.op is None and b.right is None for b in blocks):
                # views of the variables (a ridge term): the Hessian is at most (sum of |scales|)^2
                amp = sum(float(np.max(np.abs(b.scale))) for b in blocks)
                rest += 2.0 * abs(t.coef) * wmax * amp * amp
                continue
            J = self.full_columns(i)
            if J is None:
                return None
            G = (J.T @ J).toarray() if sp.issparse(J) else J.T @ J
            rest += 2.0 * abs(t.coef) * wmax * float(np.abs(G).sum(axis=1).max())  # a Gershgorin bound
        return float(per.max() + rest)

    def sample_nnz(self) -> int:
        """Stored data entries read by one pass over the samples (the cost unit of an IFO)."""
        tot = 0
        for i in self.sample_terms:
            for blk in getattr(self.terms[i].map, "blocks", []):
                if blk.op is not None:
                    tot += blk.op.nnz
        return tot

    def matrix_least_squares(self, q: int, k: int, n_free: int = 0) -> tuple[np.ndarray, np.ndarray, float] | None:
        """Least squares in one matrix unknown C (q x k, the first q k coordinates): when every term
        that reads C is ``c_t ||s_t op_t C R + (blocks of the other coordinates) + b_t||^2`` with a
        scalar s_t, no weights, and one right factor R shared by all terms with orthonormal rows (or
        none), the problem in C decouples into the normal equations G C = H with
        G = sum_t c_t s_t^2 op_t' op_t (q x q) and H = -sum_t c_t s_t op_t' b_t R' (the other
        coordinates at zero). Returns (G, H, the constant ||b_t (I - R'R)||^2 part), or None when the
        terms have another form (then the generic kernels apply). The low-rank refits of a
        multi-task regression are of this form: a q x q system for all k columns at once, with the
        data's Gram computed once (``DataOperator.gram_all``).

        ``n_free``: the design has n_free more coordinates after C (an intercept, other variables);
        blocks that read only those are left out of G and H (terms that read only them are skipped;
        they may have weights), so that G is the C-C block of the Hessian / 2 and -2 H the gradient
        in C at C = 0, free coordinates 0 (:meth:`LoweredProblem._lowrank_free_lstsq` eliminates the
        free coordinates with them). With n_free = 0 (the default) nothing else may be there."""
        qk = q * k
        if self.n != qk + n_free or self.lin.any() or not self.terms:
            return None
        R = None
        G = np.zeros((q, q))
        H = np.zeros((q, k))
        const = self.const
        rights = []
        for t in self.terms:
            m = t.map
            if not (t.quadratic and t.coef > 0 and getattr(m, "canonical", False)):
                return None
            reads_c = [blk for blk in m.blocks if blk.coords.size and int(blk.coords.min()) < qk]
            if not reads_c:  # a term of the free coordinates alone
                if n_free:
                    continue
                return None
            if len(reads_c) != 1 or t.weights is not None or (len(m.blocks) != 1 and not n_free):
                return None
            blk = reads_c[0]
            if blk.vshape != (q, k) or np.ndim(blk.scale) != 0 or not np.array_equal(blk.coords, np.arange(qk)):
                return None
            if blk.nshape != m.shape or len(m.shape) != 2:
                return None
            rights.append(blk.right)
            if blk.right is not None:
                if R is None:
                    R = blk.right
                    if not np.allclose(R @ R.T, np.eye(R.shape[0]), atol=1e-10):
                        return None
                elif R is not blk.right and not np.array_equal(R, blk.right):
                    return None
            elif R is not None:
                return None
            s = float(blk.scale)
            B = m.b.reshape(m.shape)
            if blk.right is not None:
                Bp = B @ blk.right.T
                const += t.coef * float(np.sum(B * B) - np.sum(Bp * Bp))
            else:
                Bp = B
            if blk.op is None:
                G += t.coef * s * s * np.eye(q)
                H -= t.coef * s * Bp
            else:
                G += t.coef * s * s * blk.op.gram_all()
                H -= t.coef * s * blk.op.rmatvec(Bp)
        if not rights or (R is not None and any(r is None for r in rights)):
            return None
        return G, H, const

    # ------------------------------------------------------------------ low-rank subspaces
    def low_rank(
        self,
        W: np.ndarray,
        shape: tuple[int, int],
        U: np.ndarray | None,
        Vt: np.ndarray | None,
        layout_new: Any,
        new_coords: np.ndarray,
        where: np.ndarray,
    ) -> Design | None:
        """The design with the matrix variable at ``W`` replaced by ``U @ C``, ``C @ Vt`` or
        ``U @ C @ Vt`` (None when a term's map has no canonical form that allows it)."""
        try:
            maps = []
            for t in self.terms:
                if not getattr(t.map, "canonical", False):
                    return None
                maps.append(t.map.low_rank(W, shape, U, Vt, new_coords, where, layout_new.n))
        except NotCanonical:
            return None
        d = Design.__new__(Design)
        d.layout = layout_new
        d.n = layout_new.n
        d.const = self.const
        lin = np.zeros(layout_new.n)
        keep = np.ones(self.n, dtype=bool)
        keep[W] = False
        lin[where[np.flatnonzero(keep)]] = self.lin[keep]
        Lw = self.lin[W].reshape(shape)
        if U is not None:
            Lw = U.T @ Lw
        if Vt is not None:
            Lw = Lw @ Vt.T
        lin[new_coords] = Lw.ravel()
        d.lin = lin
        d.terms = [Term(t.coef, t.phi, mp, t.weights, t.rowwise) for t, mp in zip(self.terms, maps)]
        d._cache = OrderedDict()
        d._full = {}
        d._separable = {}
        d.sample_terms = list(self.sample_terms)
        d.n_samples = self.n_samples
        return d


__all__ = [
    "AffineMap",
    "Block",
    "Design",
    "ExprMap",
    "NotCanonical",
    "Reduced",
    "RawTerm",
    "Term",
    "affine_map",
    "linearize",
]
