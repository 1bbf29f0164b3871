"""Data larger than memory (the ``[dask]`` extra): ``.npy`` files matched by a pattern and stacked
by rows, Zarr arrays and HDF5 datasets, each read lazily as a dask array in row blocks."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError, Span
from .common import BLOCK_BYTES, DataSpec, _who
from .text import _did_you_mean
from .validation import _fmt_shape


def _natural_key(p: Path) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p.name)]


def _load_npy(path: str) -> np.ndarray:
    return np.asarray(np.load(path, allow_pickle=False), dtype=float)


def _load_h5(path: str, key: str, lo: int, hi: int) -> np.ndarray:
    import h5py

    with h5py.File(path, "r") as f:
        return np.asarray(f[key][lo:hi], dtype=float)


def _need_dask(ds: DataSpec, who: str, span: Span | None) -> Any:
    try:
        import dask.array as da
    except ImportError:
        raise DataError(
            f"{who}{ds.describe()} is read as a chunked (dask) array, and dask is not installed",
            span,
            "pip install 'sparsemodel[dask]'",
        ) from None
    return da


def _numeric_dtype(dtype: Any, where: str, who: str, span: Span | None) -> None:
    if np.dtype(dtype).kind not in "biuf":
        raise DataError(f"{who}{where} holds {np.dtype(dtype)} values, not numbers", span)


def read_chunked(ds: DataSpec, kind: str, *, name: str | None = None, span: Span | None = None) -> Any:
    """A ``dir/*.npy`` pattern, a Zarr array or an HDF5 dataset as a lazy dask array (row blocks).

    Only the headers are read here (shapes, types); a file whose shape or type does not fit the
    others is refused with its name. The values are read when a pass over the data needs them."""
    who = _who(name)
    da = _need_dask(ds, who, span)
    if ds.fmt == "npyglob":
        return _npy_blocks(ds, da, who, span)
    if not ds.path.exists():
        raise DataError(
            f"{who}the data {'store' if ds.fmt == 'zarr' else 'file'} {ds.describe()} does not exist "
            f"(looked for {ds.path.absolute()})",
            span,
        )
    if ds.fmt == "zarr":
        return _zarr_array(ds, da, who, span)
    return _hdf5_blocks(ds, da, who, span)


def _npy_blocks(ds: DataSpec, da: Any, who: str, span: Span | None) -> Any:
    """The ``.npy`` files a ``dir/*.npy`` pattern matches (in natural order), each a block of rows."""
    import dask

    folder = ds.path.parent
    if not folder.is_dir():
        raise DataError(f"{who}the folder of {ds.describe()} does not exist (looked for {folder.absolute()})", span)
    files = sorted((p for p in folder.glob(ds.path.name) if p.is_file()), key=_natural_key)
    if not files:
        raise DataError(
            f"{who}no file matches {ds.describe()} (looked in {folder.absolute()})",
            span,
            "save the row blocks with numpy.save(f'dir/part{i}.npy', block)",
        )
    parts = []
    width: tuple[int, ...] | None = None
    first: tuple[int, ...] = ()
    for f in files:
        try:
            head = np.load(f, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise DataError(f"{who}cannot read {f.name} (matched by {ds.describe()}): {exc}", span) from None
        _numeric_dtype(head.dtype, f"{f.name} (matched by {ds.describe()})", who, span)
        if head.ndim not in (1, 2) or head.shape[0] == 0:
            raise DataError(
                f"{who}{f.name} (matched by {ds.describe()}) holds an array of shape {_fmt_shape(head.shape)}; "
                "each file is a block of rows (2-D, or 1-D for a vector)",
                span,
            )
        if width is None:
            width, first = head.shape[1:], head.shape
        elif head.shape[1:] != width:
            raise DataError(
                f"{who}{f.name} (matched by {ds.describe()}) has shape {_fmt_shape(head.shape)}, but "
                f"{files[0].name} has {_fmt_shape(first)}: "
                "the row blocks must have the same number of columns",
                span,
            )
        parts.append(da.from_delayed(dask.delayed(_load_npy)(str(f)), shape=head.shape, dtype=float))
        del head
    return da.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]


def _zarr_array(ds: DataSpec, da: Any, who: str, span: Span | None) -> Any:
    """The Zarr store's array (or the group's array named by the spec's key, or its only one)."""
    try:
        import zarr

        z = zarr.open(str(ds.path), mode="r")
        if ds.key is not None and hasattr(z, "shape"):
            raise DataError(
                f"{who}{ds.describe()}: the store is a single array, not a group with an array {ds.key!r}",
                span,
                f'write "{ds.path.name}" without ":{ds.key}"',
            )
        if ds.key is not None:
            if ds.key not in list(z.keys()):
                have = list(z.keys()) if hasattr(z, "keys") else []
                raise DataError(
                    f"{who}{ds.describe()} has no array {ds.key!r}", span, _did_you_mean(ds.key, have, "arrays")
                )
            z = z[ds.key]
        elif not hasattr(z, "shape"):
            have = list(z.keys())
            if len(have) != 1:
                raise DataError(
                    f"{who}{ds.describe()} is a Zarr group with {len(have)} arrays; name one",
                    span,
                    f'write "{ds.text}:NAME"; ' + _did_you_mean("", have, "arrays"),
                )
            z = z[have[0]]
    except DataError:
        raise
    except Exception as exc:  # zarr raises many types for a store that is not one
        raise DataError(f"{who}cannot read {ds.describe()} as a Zarr array: {exc}", span) from None
    _numeric_dtype(z.dtype, ds.describe(), who, span)
    return da.from_zarr(z).astype(float)


def _hdf5_blocks(ds: DataSpec, da: Any, who: str, span: Span | None) -> Any:
    """The HDF5 file's dataset (named by the spec's key, or its only one) in row blocks of about
    BLOCK_BYTES, each read when a pass needs it."""
    import dask

    try:
        import h5py
    except ImportError:
        raise DataError(
            f"{who}{ds.describe()} is an HDF5 file and h5py is not installed", span, "pip install h5py"
        ) from None
    try:
        with h5py.File(ds.path, "r") as f:
            names: list[str] = []
            f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
            key = ds.key
            if key is None:
                if len(names) != 1:
                    raise DataError(
                        f"{who}{ds.describe()} holds {len(names)} datasets; name one",
                        span,
                        f'write "{ds.text}:NAME"; ' + _did_you_mean("", names, "datasets"),
                    )
                key = names[0]
            if key.strip("/") not in names:
                raise DataError(
                    f"{who}{ds.describe()} has no dataset {key!r}", span, _did_you_mean(key, names, "datasets")
                )
            dset = f[key]
            shape, dtype = tuple(dset.shape), dset.dtype
    except DataError:
        raise
    except OSError as exc:
        raise DataError(f"{who}cannot read {ds.describe()} as HDF5: {exc}", span) from None
    _numeric_dtype(dtype, ds.describe(), who, span)
    if len(shape) == 0 or shape[0] == 0:
        raise DataError(f"{who}the dataset {key!r} of {ds.describe()} has shape {_fmt_shape(shape)}", span)
    row_bytes = 8 * int(np.prod(shape[1:], dtype=np.int64) or 1)
    step = max(1, BLOCK_BYTES // row_bytes)
    parts = [
        da.from_delayed(
            dask.delayed(_load_h5)(str(ds.path), key, lo, min(lo + step, shape[0])),
            shape=(min(lo + step, shape[0]) - lo,) + shape[1:],
            dtype=float,
        )
        for lo in range(0, shape[0], step)
    ]
    return da.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]
