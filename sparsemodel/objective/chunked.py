"""The chunked implementation of the data interface: a dask array split into row blocks.

:class:`DaskOperator` offers what :class:`~sparsemodel.objective.operators.DataOperator` offers (the
design, the kernels and the solvers cannot tell them apart) for a matrix held as a dask array:
in the memory of the machine, on its disk (``.npy`` row blocks, Zarr, HDF5: read block by block,
never all at once), or in the memory of a cluster's workers.

* The matrix is chunked by rows (one column chunk; re-chunked once if it comes otherwise) and,
  when it fits in the memory the scheduler has (half of it), **persisted once** on first use: the
  blocks stay on the workers (or in this process) for every later pass. A matrix larger than that
  is streamed from its source at each pass (the out-of-core mode).
* Every product is **one pass** over the row blocks, one task per block: ``X @ x`` reads only the
  columns of x's support and concatenates the blocks' pieces; ``X' r`` (all or selected columns),
  the column norms, ``X_S' X_S`` with ``X_S' y`` (the normal equations of a restricted least-squares
  problem, both in the same pass) and the full Gram are sums over the blocks, combined by a **tree
  reduction** (fan-in :data:`FAN_IN`) on the workers; only the small result reaches the driver.
* Vectors of length n (residuals, the response) and of length p (iterates, gradients) live on the
  driver, as does everything of the size of a support (top-k selection, the Cholesky factor).
* A row subset (a stochastic solver's mini-batch) reads only the blocks that hold those rows and
  returns an in-memory :class:`DataOperator`.

``passes`` counts the passes made over the data (what the progress bar and ``docs/scale.md``
report). dask is imported only here, so it stays an optional extra (``pip install sparsemodel[dask]``).
"""

from __future__ import annotations

import os
from typing import Any

import dask
import dask.array as da
import numpy as np

from ..util import is_dask_array
from .operators import DataOperator, dense_row_top_sq

FAN_IN = 8  # partial sums combined per task of the tree reduction
BLOCK_BYTES = 128 * 2**20  # target size of a row block when the matrix must be re-chunked
MEMORY_FRACTION = 0.5  # persist when the matrix takes at most this fraction of the scheduler's memory

_PERSISTED: dict[tuple[str, Any], Any] = {}  # (array name, scheduler) -> the persisted array
TOTAL_PASSES = [0]  # passes over chunked data in this process (all operators)


def _block_rows(X: Any) -> int:
    return max(1, int(BLOCK_BYTES // max(1, 8 * X.shape[1])))


def by_rows(X: Any) -> Any:
    """The dask array as float64 row blocks with all columns in each block."""
    if X.dtype != np.float64:
        X = X.astype(np.float64)
    if X.ndim == 1:
        X = X[None, :]
    if len(X.chunks[1]) > 1:
        X = X.rechunk({0: _block_rows(X), 1: -1})
    return X


def scheduler_memory() -> float:
    """The memory the current scheduler has: the workers' limits of a distributed client, else
    this process's: the smallest of the physical memory, the address-space limit (``ulimit -v``)
    and ``SPARSEMODEL_MEMORY_LIMIT`` (bytes; inf when unknown)."""
    limits = [float("inf")]
    env = os.environ.get("SPARSEMODEL_MEMORY_LIMIT")
    if env:
        try:
            limits.append(float(env))
        except ValueError:
            pass
    try:
        from distributed import get_client

        client = get_client()
        info = client.scheduler_info()
        total = float(sum(w.get("memory_limit", 0) or 0 for w in info.get("workers", {}).values()))
        return min(limits + [total or float("inf")])
    except (ImportError, ValueError):
        pass
    try:
        limits.append(float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")))
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            limits.append(float(soft))
    except (ValueError, OSError, AttributeError, ImportError):  # pragma: no cover - not a POSIX system
        pass
    return min(limits)


def _scheduler_key() -> Any:
    try:
        from distributed import get_client

        return get_client().id
    except (ImportError, ValueError):
        return dask.config.get("scheduler", None)


def persisted(X: Any, persist: bool | str = "auto") -> Any:
    """X persisted on the current scheduler (once per array and scheduler), or X itself when it is
    larger than :data:`MEMORY_FRACTION` of the scheduler's memory (``persist="auto"``) or
    ``persist=False``."""
    if persist is False or (persist == "auto" and X.nbytes > MEMORY_FRACTION * scheduler_memory()):
        return X
    key = (X.name, _scheduler_key())
    if key not in _PERSISTED:
        if len(_PERSISTED) > 16:
            _PERSISTED.pop(next(iter(_PERSISTED)))
        _PERSISTED[key] = X.persist()
    return _PERSISTED[key]


def forget_persisted() -> None:
    """Drop the persisted copies (at the end of a scheduler's use: its memory is released)."""
    _PERSISTED.clear()


def _tree_sum(parts: list[Any]) -> Any:
    while len(parts) > 1:
        parts = [
            dask.delayed(_add, pure=False)(*parts[i : i + FAN_IN]) if len(parts[i : i + FAN_IN]) > 1 else parts[i]
            for i in range(0, len(parts), FAN_IN)
        ]
    return parts[0]


def _add(*xs: Any) -> Any:
    if isinstance(xs[0], tuple):
        return tuple(_add(*t) for t in zip(*xs))
    if np.ndim(xs[0]) == 0:
        return sum(xs)
    out = np.array(xs[0], dtype=float, copy=True)
    for x in xs[1:]:
        out += x
    return out


# ------------------------------------------------------------------ per-block functions (run on workers)


def _b_matvec(B: np.ndarray, cols: np.ndarray | None, x: np.ndarray) -> np.ndarray:
    return (B if cols is None else B[:, cols]) @ x


def _b_rmatvec(B: np.ndarray, y: np.ndarray, cols: np.ndarray | None) -> np.ndarray:
    return (B if cols is None else B[:, cols]).T @ y


def _b_columns(B: np.ndarray, cols: np.ndarray) -> np.ndarray:
    return B[:, cols]


def _b_colsq(B: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->j", B, B)


def _b_gram(B: np.ndarray, cols: np.ndarray | None) -> np.ndarray:
    S = B if cols is None else B[:, cols]
    return S.T @ S


def _b_gram_rhs(
    B: np.ndarray, cols: np.ndarray, y: np.ndarray, w: np.ndarray | None, extra: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    S = B[:, cols] if extra is None else np.hstack([B[:, cols], extra])
    WS = S if w is None else S * w[:, None]
    return WS.T @ S, WS.T @ y


def _b_square(
    B: np.ndarray, zo: np.ndarray, cols: np.ndarray, xs: np.ndarray, w: np.ndarray | None, scale: float
) -> tuple[float, np.ndarray, np.ndarray]:
    z = zo + scale * (B[:, cols] @ xs) if cols.size else zo.copy()
    wz = z if w is None else w * z
    return float(z @ wz), (2.0 * scale) * (B.T @ wz), z


def _first(t: tuple) -> tuple:
    return t[0], t[1]


def _third(t: tuple) -> np.ndarray:
    return t[2]


class DaskOperator(DataOperator):
    """A dask array chunked by rows, behind the :class:`DataOperator` interface (module docstring).

    ``persist``: ``"auto"`` (persist when it fits in half the scheduler's memory), True or False."""

    chunked = True
    sparse = False
    rows_only = False

    def __init__(self, A: Any, rows_only: bool = False, persist: bool | str = "auto"):
        X = A.X if isinstance(A, DaskOperator) else A
        if not is_dask_array(X):
            raise TypeError("DaskOperator needs a dask array")
        self.X = by_rows(X)
        self.A = self.X
        self.persist = persist
        self.shape = tuple(int(d) for d in self.X.shape)  # type: ignore[assignment]
        self.bounds = np.concatenate([[0], np.cumsum(self.X.chunks[0])]).astype(np.int64)
        self._blocks: list[Any] | None = None
        self._col_sq_norms: np.ndarray | None = None
        self._gram: np.ndarray | None = None
        self._csr = None
        self.passes = 0

    # ------------------------------------------------------------------ plumbing
    @property
    def blocks(self) -> list[Any]:
        """The row blocks as delayed objects (of the persisted array when it is persisted)."""
        if self._blocks is None:
            X = persisted(self.X, self.persist)
            self._blocks = list(X.to_delayed().ravel())
        return self._blocks

    @property
    def nnz(self) -> int:
        return int(self.shape[0]) * int(self.shape[1])

    @property
    def csr(self) -> Any:
        raise TypeError("a chunked (dask) operator has no CSR form; use its products")

    def _pass(self) -> None:
        self.passes += 1
        TOTAL_PASSES[0] += 1

    def _concat(self, fn: Any, *args: Any, per_block: Any = None) -> np.ndarray:
        """One pass: fn(block, *args) per block, the results stacked along the rows."""
        parts = [
            dask.delayed(fn, pure=False)(b, *(per_block(i) if per_block else ()), *args)
            for i, b in enumerate(self.blocks)
        ]
        self._pass()
        out = dask.compute(*parts)
        return np.concatenate(out, axis=0)

    def _sum(self, fn: Any, *args: Any, per_block: Any = None) -> Any:
        """One pass: fn(block, ...) per block, summed by a tree reduction on the workers."""
        parts = [
            dask.delayed(fn, pure=False)(b, *(per_block(i) if per_block else ()), *args)
            for i, b in enumerate(self.blocks)
        ]
        self._pass()
        return dask.compute(_tree_sum(parts))[0]

    def _rows_of(self, y: np.ndarray) -> Any:
        return lambda i: (y[self.bounds[i] : self.bounds[i + 1]],)

    # ------------------------------------------------------------------ products
    def matvec(self, x: np.ndarray, cols: np.ndarray | None = None) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        if cols is None and self.shape[1] > 64:
            nz = np.flatnonzero(x)
            if nz.size <= 0.25 * x.size:
                cols, x = nz, x[nz]
        if cols is not None:
            cols = np.asarray(cols, dtype=np.int64)
            if cols.size == 0:
                return np.zeros(self.shape[0])
        return self._concat(_b_matvec, cols, x)

    def matmat(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=float)
        nz = np.flatnonzero(np.any(X != 0, axis=1))
        if nz.size == 0:
            return np.zeros((self.shape[0], X.shape[1]))
        if nz.size <= 0.25 * X.shape[0]:
            return self._concat(_b_matvec, nz, X[nz])
        return self._concat(_b_matvec, None, X)

    def rmatvec(self, y: np.ndarray, cols: np.ndarray | None = None) -> np.ndarray:
        y = np.asarray(y, dtype=float)
        if cols is not None:
            cols = np.asarray(cols, dtype=np.int64)
            if cols.size == 0:
                return np.zeros((0,) + y.shape[1:])
        return self._sum(_b_rmatvec, cols, per_block=self._rows_of(y))

    # ------------------------------------------------------------------ subsets
    def columns(self, cols: np.ndarray, keep_sparse: bool = False) -> np.ndarray:
        """The columns ``cols`` gathered on the driver (n x len(cols)): for a support."""
        cols = np.asarray(cols, dtype=np.int64)
        if cols.size == 0:
            return np.zeros((self.shape[0], 0))
        return self._concat(_b_columns, cols)

    def rows(self, rows: np.ndarray) -> DataOperator:
        """The rows ``rows`` (a mini-batch) read from the blocks that hold them, in memory."""
        rows = np.asarray(rows, dtype=np.int64)
        order = np.argsort(rows, kind="stable")
        srt = rows[order]
        which = np.searchsorted(self.bounds, srt, side="right") - 1
        parts = []
        for i in np.unique(which):
            local = srt[which == i] - self.bounds[i]
            parts.append(dask.delayed(_b_columns_rows, pure=False)(self.blocks[i], local))
        got = np.concatenate(dask.compute(*parts), axis=0) if parts else np.zeros((0, self.shape[1]))
        out = np.empty_like(got)
        out[order] = got
        return DataOperator(out)

    def col_sq_norms(self) -> np.ndarray:
        if self._col_sq_norms is None:
            self._col_sq_norms = self._sum(_b_colsq)
        return self._col_sq_norms

    def gram_all(self) -> np.ndarray:
        if self._gram is None:
            self._gram = self._sum(_b_gram, None)
        return self._gram

    def gram(self, cols: np.ndarray) -> np.ndarray:
        return self._sum(_b_gram, np.asarray(cols, dtype=np.int64))

    def gram_rhs(
        self, cols: np.ndarray, y: np.ndarray, w: np.ndarray | None = None, extra: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(M' W M, M' W y)`` for M = [X_S, extra] in one pass: each block contributes both, and
        the tree reduction sums them on the workers (only a (|S|+e)^2 matrix reaches the driver)."""
        cols = np.asarray(cols, dtype=np.int64)
        y = np.asarray(y, dtype=float)
        if extra is not None and not extra.shape[1]:
            extra = None

        def per(i: int) -> tuple[Any, ...]:
            lo, hi = self.bounds[i], self.bounds[i + 1]
            return (
                cols,
                y[lo:hi],
                None if w is None else w[lo:hi],
                None if extra is None else extra[lo:hi],
            )

        parts = [dask.delayed(_b_gram_rhs, pure=False)(b, *per(i)) for i, b in enumerate(self.blocks)]
        self._pass()
        return dask.compute(_tree_sum(parts))[0]

    def square_pass(
        self, cols: np.ndarray, xs: np.ndarray, zo: np.ndarray, w: np.ndarray | None, scale: float
    ) -> tuple[float, np.ndarray, np.ndarray]:
        """For z = scale * X[:, cols] @ xs + zo: (sum w z^2, scale * X' (2 w z), z) in ONE pass (each
        block forms its piece of z and its share of the product; the shares are tree-summed)."""
        cols = np.asarray(cols, dtype=np.int64)

        def per(i: int) -> tuple[Any, ...]:
            lo, hi = self.bounds[i], self.bounds[i + 1]
            return (zo[lo:hi], cols, xs, None if w is None else w[lo:hi], scale)

        parts = [dask.delayed(_b_square, pure=False)(b, *per(i)) for i, b in enumerate(self.blocks)]
        self._pass()
        vg, zs = dask.compute(
            _tree_sum([dask.delayed(_first)(p) for p in parts]), [dask.delayed(_third)(p) for p in parts]
        )
        return vg[0], vg[1], np.concatenate(zs)

    def row_top_sq(self, top: int | None) -> np.ndarray:
        return self._concat(dense_row_top_sq, top)

    def left_multiply(self, U: np.ndarray) -> DataOperator:
        return DataOperator(self._concat(_b_matvec, None, np.asarray(U, dtype=float)))

    def dense(self) -> np.ndarray:
        self._pass()
        return np.asarray(dask.compute(self.X)[0])


def _b_columns_rows(B: np.ndarray, local: np.ndarray) -> np.ndarray:
    return B[local]


def as_dask(A: Any, rows_per_block: int | None = None) -> Any:
    """A NumPy array as a dask array chunked by rows (tests, benchmarks)."""
    A = np.asarray(A, dtype=float)
    return da.from_array(A, chunks=(rows_per_block or _block_rows(A), A.shape[1]))


__all__ = [
    "DaskOperator",
    "forget_persisted",
    "FAN_IN",
    "TOTAL_PASSES",
    "as_dask",
    "by_rows",
    "persisted",
    "scheduler_memory",
]
