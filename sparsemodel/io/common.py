"""What every reader of data shares: the kinds of data, the formats and their extensions, the
missing-value words, and :class:`DataSpec` (a parsed data spec: format, path, key)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

KINDS = ("matrix", "vector", "scalar", "labels")


LIBSVM_EXTENSIONS = (".svm", ".libsvm", ".svmlight")


FORMATS = {
    ".npy": "npy",
    ".npz": "npz",
    ".csv": "csv",
    ".tsv": "csv",
    ".txt": "csv",
    ".mtx": "mtx",
    ".zarr": "zarr",
    ".h5": "hdf5",
    ".hdf5": "hdf5",
    **{ext: "libsvm" for ext in LIBSVM_EXTENSIONS},
}


CHUNKED_FORMATS = ("npyglob", "zarr", "hdf5")  # read lazily as dask arrays (the [dask] extra)


BLOCK_BYTES = 128 * 2**20  # rows per block of an HDF5 dataset: about this many bytes


MISSING = ("", "NA", "N/A", "NaN", "nan", "NAN", "null", "NULL", "?")


Value = np.ndarray | sp.csr_matrix


MapKey = str | float


@dataclass(frozen=True)
class DataSpec:
    """A parsed data spec: format, resolved file path, optional key/column, and the text as given."""

    fmt: str
    path: Path
    key: str | None
    text: str

    def describe(self) -> str:
        return f'"{self.text}"'


def _who(name: str | None) -> str:
    return f"data {name}: " if name else ""


def _apply_number_map(a: np.ndarray, num: dict[float, float]) -> np.ndarray:
    out = a.astype(float, copy=True)
    for k, v in num.items():
        out[a == k] = v
    return out
