"""The columns of a composite design: its Jacobian (whole when small enough to keep, else by
column blocks from the data operators), Hessian columns and diagonals, the reduced design on a
set of coordinates (what the kernels take), separable ridges, and the least-squares forms (the
stacked weighted design, normal equations, the matrix least squares of a rank problem).

:class:`DesignColumns` is a part of :class:`~sparsemodel.objective.design.Design` (a mixin: the
design's data and terms are its state)."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from .affine import _operator_blocks, _read_coords
from .terms import Reduced, Term

DENSE_LIMIT = 1_000_000  # reduced columns are returned dense up to this many entries
FULL_LIMIT = 4_000_000  # entries: cache a term's whole Jacobian below this
CHUNK_ENTRIES = 4_000_000  # entries per block of columns when streaming a Jacobian that is not kept
SMALL_DENSE = 200_000  # entries: a sparse block this small is used dense
FEW_COLUMNS = 8  # columns read from the map directly while the whole Jacobian is not kept ...
FEW_ASKS = 3  # ... this many times; the next request keeps the whole Jacobian


class DesignColumns:
    def full_columns(self, i: int) -> Any | None:
        """Term i's whole Jacobian (n_i x n) when small enough to keep, else None."""
        if i not in self._full:
            t = self.terms[i]
            # a map without data (a ridge, a selection of x) has a sparse Jacobian of at most size entries per block
            sparse = getattr(t.map, "canonical", False) and all(b.op is None for b in t.map.blocks)
            keep = t.map.size * self.n <= FULL_LIMIT or (sparse and t.map.size * len(t.map.blocks) <= FULL_LIMIT)
            canonical = getattr(t.map, "canonical", False) and not any(
                b.op is not None and b.op.chunked for b in t.map.blocks
            )
            if keep and canonical and (t.map.size * self.n <= SMALL_DENSE or t.map.dense_is_natural()):
                F = t.map.dense_jacobian()  # written in place: no sparse matrix for a view block (an intercept)
            else:
                F = t.map.columns(np.arange(self.n)) if keep else None
            if F is not None and sp.issparse(F) and F.shape[0] * F.shape[1] <= SMALL_DENSE:
                F = F.toarray()  # small: a dense column subset is cheaper than sparse indexing
            if F is not None and not sp.issparse(F):
                F = np.asfortranarray(F, dtype=float)  # a column subset gathers contiguous columns
            self._full[i] = F
        return self._full[i]

    def dense_jacobian(self, i: int, out: np.ndarray | None = None) -> np.ndarray | None:
        """Term i's whole Jacobian as a dense C-ordered array (rows contiguous: what the compiled
        kernels read; written into ``out`` when given, an array of its shape) when
        :meth:`full_columns` keeps it dense or its data are dense (``X @ W``, whose Jacobian the
        Python path keeps sparse from SMALL_DENSE entries: a third of it is nonzero for three
        classes), below FULL_LIMIT entries, else None: the kept dense one when it is computed
        already, otherwise written once by :meth:`AffineMap.dense_jacobian` without the
        column-major copy the Python path keeps."""
        t = self.terms[i]
        canonical = getattr(t.map, "canonical", False) and not any(
            b.op is not None and b.op.chunked for b in t.map.blocks
        )
        small = t.map.size * self.n <= SMALL_DENSE
        kept = self._full.get(i)
        if (
            (kept is None or sp.issparse(kept))  # (the Python path keeps a sparse one: X W's)
            and canonical
            and t.map.size * self.n <= FULL_LIMIT
            and (small or t.map.dense_is_natural() or t.map.dense_data())
        ):
            return t.map.dense_jacobian(out)
        F = self.full_columns(i)
        if F is None or sp.issparse(F):
            return None
        if out is None:
            return np.array(F, order="C")  # (a copy: the kept one stays the Python path's)
        np.copyto(out, F)
        return out

    def term_columns(self, i: int, cols: np.ndarray) -> Any:
        if i not in self._full and len(cols) <= FEW_COLUMNS and self._few.get(i, 0) < FEW_ASKS:
            # a few columns (the intercept of a start at k = 0) before the whole Jacobian is kept:
            # read them from the map instead of building all of it (the lean path builds its own)
            self._few[i] = self._few.get(i, 0) + 1
            M = self.terms[i].map.columns(np.asarray(cols, dtype=np.int64))
            return M.toarray() if sp.issparse(M) and M.shape[0] * M.shape[1] <= SMALL_DENSE else M
        F = self.full_columns(i)
        return F[:, cols] if F is not None else self.terms[i].map.columns(cols)

    def _curvatures(self, x: np.ndarray | None) -> list[np.ndarray] | None:
        """c_t * phi_t''(z_t) of every term at x (the constant ones of a quadratic design when x is
        None); None when some term is row-wise or whole-vector (its Hessian is not J' diag(c) J)."""
        out = []
        for t in self.terms:
            if not t.diagonal:
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
            if t.quadratic and t.diagonal and getattr(m, "canonical", False) and not m.reads_data() and not np.any(m.b):
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
        in C at C = 0, free coordinates 0 (``lowering/lowrank_solve.free_lstsq`` eliminates the free
        coordinates with them). With n_free = 0 (the default) nothing else may be there."""
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
