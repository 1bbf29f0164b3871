"""The data interface: every product with a data matrix goes through :class:`DataOperator`.

A data matrix ``A`` (n x q; dense NumPy or scipy.sparse) offers the few operations the design,
the kernels and the solvers need: products with vectors and matrices (all columns, or the columns
of a support), transposed products (all or selected columns), column and row subsets, column
norms and the Gram block of a support. Products with a vector that is mostly zero (the iterates of
every sparsity solver) use only the columns of its support. No other module slices or densifies
the raw matrix.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

SPARSE_INPUT_FRACTION = 0.25  # use the column subset when at most this fraction of x is nonzero
_BLOCK = 4_000_000  # entries per block of rows or columns in the square sums


class DataOperator:
    """A data matrix ``A`` (dense or sparse) with the operations solvers need.

    :func:`~sparsemodel.objective.data.as_operator` builds the chunked implementation,
    :class:`~sparsemodel.objective.chunked.DaskOperator` (same interface), for a dask array."""

    chunked = False  # the data lives in row blocks (a dask array): each product is a pass over them

    def __init__(self, A: Any, rows_only: bool = False):
        if isinstance(A, DataOperator):
            A = A.A
        if sp.issparse(A):
            # CSC for column subsets (supports); a row subset (a mini-batch) only multiplies, so it
            # stays CSR (no conversion: O(its stored entries))
            self.A = A.tocsc() if A.format != "csc" and not rows_only else A
            if rows_only and A.format != "csr":
                self.A = A.tocsr()
            self.sparse = True
        else:
            rows_only = False
            self.A = np.asarray(A, dtype=float)
            if self.A.ndim == 1:
                self.A = self.A[None, :]
            self.sparse = False
        self._csr: sp.csr_matrix | None = None
        self.rows_only = rows_only
        self.shape: tuple[int, int] = tuple(self.A.shape)  # type: ignore[assignment]
        self._col_sq_norms: np.ndarray | None = None

    @property
    def csr(self) -> sp.csr_matrix:
        if self._csr is None:
            self._csr = self.A if self.A.format == "csr" else self.A.tocsr()
        return self._csr

    @property
    def nnz(self) -> int:
        """Stored entries (the cost of one pass over the data)."""
        return int(self.A.nnz) if self.sparse else int(self.A.size)

    # ------------------------------------------------------------------ products
    def matvec(self, x: np.ndarray, cols: np.ndarray | None = None) -> np.ndarray:
        """``A @ x`` (``x`` of length q), or ``A[:, cols] @ x`` (``x`` of length len(cols)).

        Without ``cols`` only the columns where x is nonzero are used when x is sparse enough."""
        x = np.asarray(x, dtype=float)
        if cols is not None:
            if len(cols) == 0:
                return np.zeros(self.shape[0])
            return np.asarray(self.A[:, cols] @ x).ravel() if self.sparse else self.A[:, cols] @ x
        if self.shape[1] > 64 and not self.rows_only:
            nz = np.flatnonzero(x)
            if nz.size <= SPARSE_INPUT_FRACTION * x.size:
                return self.matvec(x[nz], nz)
        if self.sparse:
            return np.asarray(self.csr @ x).ravel()
        return self.A @ x

    def matmat(self, X: np.ndarray) -> np.ndarray:
        """``A @ X`` for a (q, m) array, using only the rows of X that are not all zero when few are."""
        X = np.asarray(X, dtype=float)
        if self.shape[1] > 64 and not self.rows_only:
            nz = np.flatnonzero(np.any(X != 0, axis=1))
            if nz.size <= SPARSE_INPUT_FRACTION * X.shape[0]:
                if nz.size == 0:
                    return np.zeros((self.shape[0], X.shape[1]))
                sub = self.A[:, nz]
                return np.asarray(sub @ X[nz]) if self.sparse else sub @ X[nz]
        if self.sparse:
            return np.asarray(self.csr @ X)
        return self.A @ X

    def rmatvec(self, y: np.ndarray, cols: np.ndarray | None = None) -> np.ndarray:
        """``A' y`` (y of shape (n,) or (n, m)); with ``cols`` only those rows of the result."""
        y = np.asarray(y, dtype=float)
        if cols is None:
            if self.sparse:
                return np.asarray(self.csr.T @ y)
            return self.A.T @ y
        if len(cols) == 0:
            return np.zeros((0,) + y.shape[1:])
        return np.asarray(self.A[:, cols].T @ y)

    # ------------------------------------------------------------------ subsets
    def columns(self, cols: np.ndarray, keep_sparse: bool = False) -> Any:
        """The columns ``cols`` as an (n, len(cols)) array: dense, or sparse CSC when the data is
        sparse and ``keep_sparse``."""
        cols = np.asarray(cols, dtype=np.int64)
        if self.sparse:
            sub = self.A[:, cols]
            return sub if keep_sparse else sub.toarray()
        return self.A[:, cols]

    def rows(self, rows: np.ndarray) -> DataOperator:
        """The row subset ``A[rows]`` as a new operator (CSR row slicing for sparse data)."""
        rows = np.asarray(rows, dtype=np.int64)
        if self.sparse:
            return DataOperator(self.csr[rows], rows_only=True)
        return DataOperator(self.A[rows])

    def col_sq_norms(self) -> np.ndarray:
        if self._col_sq_norms is None:
            if self.sparse:
                self._col_sq_norms = np.asarray(self.A.multiply(self.A).sum(axis=0)).ravel()
            else:
                self._col_sq_norms = np.einsum("ij,ij->j", self.A, self.A)
        return self._col_sq_norms

    def row_square_sums(self, cols: np.ndarray | None = None) -> np.ndarray:
        """Per row, sum_{j in cols} A[r, j]^2 (all columns when ``cols`` is None), in blocks of rows
        or columns (no copy of the whole matrix)."""
        if self.sparse:
            sub = self.A if cols is None else self.A[:, cols]
            return np.asarray(sub.multiply(sub).sum(axis=1)).ravel()
        n, q = self.shape
        if cols is None or len(cols) == q:
            step = max(1, _BLOCK // max(q, 1))
            return np.concatenate(
                [np.einsum("ij,ij->i", self.A[lo : lo + step], self.A[lo : lo + step]) for lo in range(0, n, step)]
            )
        out = np.zeros(n)
        step = max(1, _BLOCK // max(n, 1))
        for lo in range(0, len(cols), step):
            B = self.A[:, cols[lo : lo + step]]
            out += np.einsum("ij,ij->i", B, B)
        return out

    def column_square_dot(self, w: np.ndarray) -> np.ndarray:
        """(A * A)' w: per column, sum_r w_r A[r, j]^2 (in blocks of rows)."""
        if self.sparse:
            return np.asarray(self.A.multiply(self.A).T @ w).ravel()
        n, q = self.shape
        out = np.zeros(q)
        step = max(1, _BLOCK // max(q, 1))
        for lo in range(0, n, step):
            B = self.A[lo : lo + step]
            out += np.einsum("ij,ij,i->j", B, B, w[lo : lo + step])  # no temporary B * B
        return out

    def gram_all(self) -> np.ndarray:
        """``A' A`` (q x q, dense), computed once and kept."""
        if getattr(self, "_gram", None) is None:
            G = self.A.T @ self.A
            self._gram = G.toarray() if sp.issparse(G) else np.asarray(G)
        return self._gram

    def gram(self, cols: np.ndarray) -> np.ndarray:
        """``A[:, cols]' A[:, cols]`` as a dense array."""
        sub = self.columns(cols, keep_sparse=True)
        G = sub.T @ sub
        return G.toarray() if sp.issparse(G) else np.asarray(G)

    def gram_rhs(
        self, cols: np.ndarray, y: np.ndarray, w: np.ndarray | None = None, extra: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(M' W M, M' W y)`` for M = [A_S, extra] (S = ``cols``; ``extra`` an optional dense
        (n, e) block of further columns, e.g. an intercept's) and row weights ``w`` (None: W = I):
        the normal equations of a restricted least-squares problem, in one pass over the data."""
        sub = self.columns(cols, keep_sparse=True)
        if extra is not None and extra.shape[1]:
            sub = sp.hstack([sub, sp.csc_matrix(extra)]).tocsc() if sp.issparse(sub) else np.hstack([sub, extra])
        wsub = sub if w is None else (sp.diags(w) @ sub if sp.issparse(sub) else sub * w[:, None])
        G = wsub.T @ sub
        return (G.toarray() if sp.issparse(G) else np.asarray(G)), np.asarray(wsub.T @ y).ravel()

    def row_top_sq(self, top: int | None) -> np.ndarray:
        """Per row, the sum of its ``top`` largest squared entries (None: all of them); paper 002's
        sample smoothness l_s reads it (:meth:`Design.sample_smoothness`)."""
        n = self.shape[0]
        if self.sparse:
            A2 = self.csr.multiply(self.csr).tocsr()
            if top is None:
                return np.asarray(A2.sum(axis=1)).ravel()
            out = np.zeros(n)
            for r in range(n):
                d = A2.data[A2.indptr[r] : A2.indptr[r + 1]]
                out[r] = d.sum() if len(d) <= top else np.partition(d, len(d) - top)[-top:].sum()
            return out
        return dense_row_top_sq(self.A, top)

    def left_multiply(self, U: np.ndarray) -> DataOperator:
        """The operator ``A @ U`` (U a dense (q, r) basis): the data of a reduced problem."""
        return DataOperator(np.asarray(self.A @ U) if not self.sparse else np.asarray(self.csr @ U))

    def dense(self) -> np.ndarray:
        return self.A.toarray() if self.sparse else self.A


def dense_row_top_sq(A: np.ndarray, top: int | None) -> np.ndarray:
    """Per row of a dense A, the sum of its ``top`` largest squared entries (all of them for None)."""
    A2 = A * A
    q = A2.shape[1]
    if top is None or top >= q:
        return A2.sum(axis=1)
    return np.partition(A2, q - top, axis=1)[:, -top:].sum(axis=1)


__all__ = ["DataOperator", "SPARSE_INPUT_FRACTION", "dense_row_top_sq"]
