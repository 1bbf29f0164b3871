"""The data interface the solvers' hot loops go through: matvec, rmatvec, column subsets.

Dense NumPy arrays and scipy.sparse matrices both pass through :class:`DataOperator`, so the
evaluator and the solvers do not care which one they got. Products with a vector that is mostly
zero (the iterates of every sparsity solver) use only the columns of its support.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

SPARSE_INPUT_FRACTION = 0.25  # use the column subset when at most this fraction of x is nonzero


class DataOperator:
    """A data matrix ``A`` (dense or sparse) with the few operations solvers need."""

    def __init__(self, A: Any):
        if sp.issparse(A):
            self.A = A.tocsc() if A.format != "csc" else A
            self.sparse = True
            self._csr = None
        else:
            self.A = np.asarray(A, dtype=float)
            self.sparse = False
        self.shape = self.A.shape
        self._col_sq_norms: np.ndarray | None = None

    @property
    def csr(self) -> sp.csr_matrix:
        if self._csr is None:
            self._csr = self.A.tocsr()
        return self._csr

    def matvec(self, x: np.ndarray) -> np.ndarray:
        """A @ x, using only the columns where x is nonzero when x is sparse enough."""
        x = np.asarray(x, dtype=float)
        if x.ndim == 1 and self.shape[1] > 64:
            nz = np.flatnonzero(x)
            if nz.size <= SPARSE_INPUT_FRACTION * x.size:
                if nz.size == 0:
                    return np.zeros(self.shape[0])
                return self.columns(nz) @ x[nz] if not self.sparse else np.asarray(self.A[:, nz] @ x[nz]).ravel()
        if self.sparse:
            r = self.csr @ x
            return np.asarray(r)
        return self.A @ x

    def rmatvec(self, y: np.ndarray, cols: np.ndarray | None = None) -> np.ndarray:
        """A' y, or only its entries ``cols`` (as a vector of length len(cols))."""
        if cols is None:
            if self.sparse:
                return np.asarray(self.csr.T @ y)
            return self.A.T @ y
        if self.sparse:
            return np.asarray(self.A[:, cols].T @ y)
        return self.columns(cols).T @ y

    def columns(self, idx: np.ndarray) -> np.ndarray:
        """The columns ``idx`` as a dense (n, len(idx)) array."""
        if self.sparse:
            return self.A[:, idx].toarray()
        return self.A[:, idx]

    def columns_any(self, idx: np.ndarray) -> Any:
        """The columns ``idx``, sparse if the data is sparse."""
        return self.A[:, idx]

    def col_sq_norms(self) -> np.ndarray:
        if self._col_sq_norms is None:
            if self.sparse:
                self._col_sq_norms = np.asarray(self.A.multiply(self.A).sum(axis=0)).ravel()
            else:
                self._col_sq_norms = np.einsum("ij,ij->j", self.A, self.A)
        return self._col_sq_norms
