"""Reading the data a model binds: ``.npy``, ``.npz``, ``.csv``/``.tsv``/``.txt``, ``.mtx`` and libsvm.

A *data spec* is the string after ``from`` in ``data NAME : KIND from "SPEC"`` (or a path given
from Python or the CLI):

========================  ==============================================================
``X.npy``                 a NumPy array
``D.npz:key``             one array of an ``.npz`` archive (the key may be left out when the
                          archive holds a single array; ``scipy.sparse.save_npz`` files load
                          as sparse matrices)
``X.csv``                 a delimited table (``,`` ``;`` or tab, detected from the first line;
                          ``.tsv`` is tab-separated, ``.txt`` whitespace-separated unless it
                          has commas/semicolons/tabs).  A header line is detected: the first
                          line is a header when some column is text on it and numeric below
                          it, or when all of its cells are text that does not recur in its
                          column.
``X.csv:Purchase``        one column, by header name or by 0-based index
``A.mtx``                 Matrix Market; coordinate files load as ``scipy.sparse`` CSR
``a9a.svm``               libsvm / svmlight text (``label idx:val ...``, 1-based indices);
``libsvm:a9a.txt``        the extensions ``.svm``, ``.libsvm``, ``.svmlight`` or the explicit
                          ``libsvm:`` prefix select it.  Kind ``matrix`` gives the features as
                          a sparse CSR matrix, ``vector``/``labels`` the labels.
``dir/*.npy``             data larger than memory (needs the ``[dask]`` extra): the ``.npy``
                          files matching the pattern, in natural order (``part2`` before
                          ``part10``), stacked by rows as one dask array, each file one row
                          block read only when a pass reaches it
``X.zarr`` / ``X.zarr:a`` a Zarr array (or the array ``a`` of a Zarr group), as a dask array
``X.h5:name``             a dataset of an HDF5 file (``.h5``/``.hdf5``; ``name`` may be a path
                          ``group/dataset``; optional when the file holds one dataset), read in
                          row blocks as a dask array
========================  ==============================================================

A dask matrix stays lazy: ``matrix`` data is never loaded whole (the solvers run on it through
:class:`~sparsemodel.objective.chunked.DaskOperator`); a ``vector``/``labels``/``scalar`` read from
these sources is loaded (a vector of length n is what the solvers hold anyway).

Recoding: ``exclude`` (the model's ``except "col", ...``) drops CSV columns; ``mapping`` (the
model's ``map {"Yes": 1, "No": -1}``) replaces text cells by numbers and numbers by numbers.
Empty cells and ``NA``/``NaN`` count as missing (NaN) and are refused by the validation.

Validation (:func:`validate`): the kind must fit (``matrix`` 2-D, ``vector`` 1-D or a single
row/column, ``scalar`` one value, ``labels`` a vector of -1/+1), and no value may be NaN or
infinite.  Every failure is a :class:`~sparsemodel.errors.DataError` naming the data, the file
and, when known, the place in the model file.
"""

from __future__ import annotations

import csv
import difflib
import re
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from .errors import DataError, Span
from .util import did_you_mean, is_dask_array

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


def parse_spec(
    spec: str | Path, base_dir: str | Path = ".", name: str | None = None, span: Span | None = None
) -> DataSpec:
    """Split ``"file.ext[:key]"`` / ``"libsvm:file"`` into format, path (relative to ``base_dir``) and key."""
    text = str(spec)
    body = text
    fmt: str | None = None
    key: str | None = None
    if body.lower().startswith("libsvm:"):
        fmt, body = "libsvm", body[len("libsvm:") :]
    m = re.match(r"^(.*?\.(?:csv|tsv|txt|npz))(?::([^:/\\]+))$", body, flags=re.IGNORECASE)
    m = m or re.match(r"^(.*?\.(?:h5|hdf5|zarr))(?::([^:\\]+))$", body, flags=re.IGNORECASE)
    if m and fmt is None:
        body, key = m.group(1), m.group(2)
    if fmt is None and any(c in Path(body).name for c in "*?["):
        if not Path(body).name.lower().endswith(".npy"):
            raise DataError(
                f"{_who(name)}the pattern {text!r} does not end in .npy",
                span,
                'a pattern names row blocks saved with numpy.save: write "dir/*.npy"',
            )
        fmt = "npyglob"
    path = Path(body).expanduser()
    if not path.is_absolute():
        path = Path(base_dir) / path
    if fmt is None:
        ext = path.suffix.lower()
        fmt = FORMATS.get(ext)
        if fmt is None:
            known = ", ".join(sorted(FORMATS))
            raise DataError(
                f"{_who(name)}cannot tell the format of {text!r} from its extension {ext or '(none)'}",
                span,
                f'supported: {known}; write "libsvm:{text}" for a libsvm file with another extension',
            )
    if key is not None and fmt not in ("csv", "npz", "hdf5", "zarr"):
        raise DataError(
            f"{_who(name)}{text!r}: ':{key}' picks a column or key, which only .csv, .npz, .h5 and .zarr files have",
            span,
        )
    return DataSpec(fmt, path, key, text)


def read_data(
    spec: str | Path,
    kind: str = "matrix",
    *,
    base_dir: str | Path = ".",
    exclude: Sequence[str] = (),
    mapping: Mapping[MapKey, float] | None = None,
    name: str | None = None,
    span: Span | None = None,
) -> Value:
    """Read a data file, apply ``except``/``map``, and validate it as ``kind``.

    Returns a dense float ``ndarray`` or a ``scipy.sparse`` CSR matrix (``.mtx`` coordinate files,
    libsvm features, sparse ``.npz``). Raises :class:`DataError` for anything wrong with the file.
    """
    if kind not in KINDS:
        raise DataError(f"{_who(name)}unknown kind {kind!r}", span, f"the kinds are {', '.join(KINDS)}")
    ds = parse_spec(spec, base_dir, name, span)
    value, lines = load_spec(ds, kind, exclude=exclude, mapping=mapping, name=name, span=span)
    return validate(value, kind, name=name, origin=f"file {ds.describe()}", span=span, lines=lines)


def load_spec(
    ds: DataSpec,
    kind: str,
    *,
    exclude: Sequence[str] = (),
    mapping: Mapping[MapKey, float] | None = None,
    name: str | None = None,
    span: Span | None = None,
    info: dict[str, Any] | None = None,
    rebound: bool = False,
) -> tuple[Value, np.ndarray | None]:
    """Read the file of a parsed spec; returns the raw value and (for CSV) each row's line number.

    ``info`` (a dict, filled in): ``names`` (per axis, the names of the positions: a CSV header's
    columns, an .npz archive's ``KEY_names`` / ``feature_names`` / ``columns``), ``label_text`` (the
    text each number of a ``map`` came from) and ``notes`` (what the reading did not apply, for
    warnings). ``rebound``: the file replaces the one of the model's data line (``data=``,
    ``--data``), so the line's ``except`` and ``map`` apply where they fit the new file and are
    skipped, with a note, where they do not (``except`` on a file without those columns, a text
    ``map`` on numbers)."""
    who = _who(name)
    info = {} if info is None else info
    notes: list[str] = info.setdefault("notes", [])
    if rebound:
        exclude, mapping = _fit_clauses(ds, exclude, mapping, notes, name)
    if ds.fmt in CHUNKED_FORMATS:
        if exclude or mapping:
            raise DataError(f"{who}'except' and 'map' recode CSV tables; {ds.describe()} is read lazily as is", span)
        return read_chunked(ds, kind, name=name, span=span), None
    if not ds.path.exists():
        raise DataError(
            f"{who}the data file {ds.describe()} does not exist (looked for {ds.path.absolute()})",
            span,
            "paths in a model file are relative to the model file's folder; paths given from Python or "
            "the command line are relative to the current directory",
        )
    if not ds.path.is_file():
        raise DataError(f"{who}{ds.describe()} is not a file ({ds.path})", span)
    if exclude and ds.fmt != "csv":
        raise DataError(f"{who}'except' drops columns of a CSV table; {ds.describe()} is not one", span)
    mapping = dict(mapping or {})
    try:
        if ds.fmt == "csv":
            return read_csv(ds, exclude=exclude, mapping=mapping, name=name, span=span, info=info, rebound=rebound)
        if ds.fmt == "npy":
            try:
                value: Value = np.load(ds.path, allow_pickle=False)
            except ValueError as exc:
                if "pickle" not in str(exc):
                    raise
                raise DataError(
                    f"{who}cannot read {ds.describe()}: it is not a NumPy array file (not an .npy header followed by numbers: "
                    "a damaged file, or one holding Python objects, which sparsemodel never loads)",
                    span,
                    "write the array with numpy.save(path, array) from a numeric array",
                ) from None
        elif ds.fmt == "npz":
            value = _read_npz(ds, name, span, info)
        elif ds.fmt == "mtx":
            import scipy.io  # only for Matrix Market files

            m = scipy.io.mmread(str(ds.path))
            value = sp.csr_matrix(m) if sp.issparse(m) else np.asarray(m)
        else:
            labels, feats = read_libsvm(ds.path, name=name, span=span, text=ds.describe())
            if kind == "scalar":
                raise DataError(f"{who}a libsvm file holds labels and features, not a scalar", span)
            value = feats if kind == "matrix" else labels
    except DataError:
        raise
    except (OSError, ValueError, TypeError, EOFError, csv.Error, zipfile.BadZipFile) as exc:
        raise DataError(f"{who}cannot read {ds.describe()} as {ds.fmt}: {exc}", span) from None
    return _numeric(_map_numbers(value, mapping, who, ds, span), who, ds, span), None


# ---------------------------------------------------------------------------- chunked sources (dask)


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
    import dask

    if ds.fmt == "npyglob":
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
    if not ds.path.exists():
        raise DataError(
            f"{who}the data {'store' if ds.fmt == 'zarr' else 'file'} {ds.describe()} does not exist "
            f"(looked for {ds.path.absolute()})",
            span,
        )
    if ds.fmt == "zarr":
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


def _who(name: str | None) -> str:
    return f"data {name}: " if name else ""


def _numeric(value: Any, who: str, ds: DataSpec, span: Span | None) -> Value:
    if sp.issparse(value):
        return sp.csr_matrix(value, dtype=float)
    a = np.asarray(value)
    if a.dtype.kind not in "biuf":
        raise DataError(f"{who}{ds.describe()} holds {a.dtype} values, not numbers", span)
    return a.astype(float)


def _map_numbers(value: Any, mapping: dict[MapKey, float], who: str, ds: DataSpec, span: Span | None) -> Any:
    num = {float(k): float(v) for k, v in mapping.items() if not isinstance(k, str)}
    text_keys = [k for k in mapping if isinstance(k, str)]
    if text_keys:
        raise DataError(
            f"{who}map has text keys ({', '.join(repr(k) for k in text_keys)}) but {ds.describe()} holds numbers",
            span,
            "text keys recode CSV cells; for numeric files map numbers, e.g. map {0: -1, 1: 1}",
        )
    if not num:
        return value
    if sp.issparse(value):
        if 0.0 in num and num[0.0] != 0.0:
            raise DataError(f"{who}map would change the zeros of the sparse matrix {ds.describe()}", span)
        out = sp.csr_matrix(value, dtype=float, copy=True)
        out.data = _apply_number_map(out.data, num)
        return out
    return _apply_number_map(np.asarray(value, dtype=float), num)


def _apply_number_map(a: np.ndarray, num: dict[float, float]) -> np.ndarray:
    out = a.astype(float, copy=True)
    for k, v in num.items():
        out[a == k] = v
    return out


NAME_KEYS = ("{key}_names", "feature_names", "columns")  # where an .npz archive keeps column names


def _read_npz(ds: DataSpec, name: str | None, span: Span | None, info: dict[str, Any] | None = None) -> Value:
    """One array of an archive. Arrays of text are names, not data: ``KEY_names`` (or
    ``feature_names`` / ``columns``) names the columns of ``KEY``, and an archive holding one numeric
    array and its names needs no key."""
    with np.load(ds.path, allow_pickle=False) as z:
        keys = list(z.files)
        if {"format", "shape", "data"} <= set(keys) and ds.key is None:
            return sp.load_npz(ds.path).tocsr()
        texts = {k for k in keys if z[k].dtype.kind in "US"}
        numeric = [k for k in keys if k not in texts]
        key = ds.key
        if key is None:
            if len(numeric) == 1:
                key = numeric[0]
            else:
                raise DataError(
                    f"{_who(name)}{ds.describe()} holds several arrays ({', '.join(numeric)})",
                    span,
                    f'pick one with "{ds.text}:{numeric[0] if numeric else keys[0]}"',
                )
        if key not in keys:
            raise DataError(
                f"{_who(name)}{ds.path.name} has no array named {key!r}",
                span,
                _did_you_mean(key, keys, "arrays"),
            )
        value = np.asarray(z[key])
        if info is not None and value.ndim == 2:
            for pattern in NAME_KEYS:
                nk = pattern.format(key=key)
                if nk in texts and z[nk].ndim == 1 and len(z[nk]) == value.shape[1]:
                    info["names"] = (None, tuple(str(s) for s in z[nk]))
                    break
        return value


def _did_you_mean(word: str, options: Iterable[str], what: str) -> str:
    opts = list(options)
    listing = ", ".join(opts[:30]) + (", ..." if len(opts) > 30 else "")
    return did_you_mean(word, opts) + f"the {what} are: {listing}"


# ---------------------------------------------------------------------------- CSV


def _is_number(s: str) -> bool:
    t = s.strip()
    if t in MISSING:
        return True
    try:
        float(t)
    except ValueError:
        return False
    return True


def _sniff_delimiter(first: str, ext: str) -> str | None:
    if ext == ".tsv":
        return "\t"
    counts = {d: first.count(d) for d in (",", ";", "\t")}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] > 0 else None


def read_text_file(path: Path) -> str:
    """A text data file: UTF-8 (a byte-order mark is dropped), else Windows-1252 / Latin-1, which
    the spreadsheets that write such files use."""
    raw = path.read_bytes()
    if b"\x00" in raw:
        raise ValueError("it holds binary data (NUL bytes), not a text table")
    for enc in ("utf-8-sig", "cp1252", "latin-1"):
        try:
            return raw.decode(enc)
        except UnicodeDecodeError:
            continue
    return raw.decode("latin-1")  # pragma: no cover - latin-1 decodes every byte


def _rows(path: Path) -> tuple[list[list[str]], list[int]]:
    """The non-empty rows of a delimited text file and their 1-based line numbers."""
    text = read_text_file(path).replace("\r\n", "\n")
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    delim = _sniff_delimiter(first, path.suffix.lower())
    rows: list[list[str]] = []
    lines: list[int] = []
    if delim is None:
        for i, ln in enumerate(text.splitlines(), 1):
            parts = ln.split()
            if parts:
                rows.append(parts)
                lines.append(i)
        return rows, lines
    reader = csv.reader(text.splitlines(), delimiter=delim)
    for r in reader:
        if r and any(c.strip() for c in r):
            rows.append(r)
            lines.append(reader.line_num)
    return rows, lines


def _has_header(rows: list[list[str]]) -> bool:
    first = rows[0]
    sample = rows[1:51]
    text_cols = [j for j, c in enumerate(first) if not _is_number(c)]
    if not text_cols:
        return False
    for j in text_cols:
        if sample and all(j < len(r) and _is_number(r[j]) for r in sample):
            return True
    if len(text_cols) == len(first):
        return all(all(j >= len(r) or r[j].strip() != first[j].strip() for r in sample) for j in text_cols)
    return False


def read_csv(
    ds: DataSpec,
    *,
    exclude: Sequence[str] = (),
    mapping: Mapping[MapKey, float] | None = None,
    name: str | None = None,
    span: Span | None = None,
    info: dict[str, Any] | None = None,
    rebound: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """A delimited table as a float matrix (or one column of it) and each row's line number;
    ``info`` receives the names of the kept columns (``names``), the text each mapped number
    came from (``label_text``) and notes (a ``map`` key that matched no cell)."""
    who = _who(name)
    info = {} if info is None else info
    notes: list[str] = info.setdefault("notes", [])
    rows, lines = _rows(ds.path)
    if not rows:
        raise DataError(f"{who}{ds.describe()} is empty", span)
    header: list[str] | None = None
    if _has_header(rows):
        header = [c.strip() for c in rows[0]]
        rows, lines = rows[1:], lines[1:]
        if not rows:
            raise DataError(f"{who}{ds.describe()} has a header line but no data rows", span)
    width = len(header) if header is not None else len(rows[0])
    for r, ln in zip(rows, lines):
        if len(r) != width:
            raise DataError(
                f"{who}line {ln} of {ds.describe()} has {len(r)} fields, but the {'header' if header else 'first line'} has {width}",
                span,
                "every row of a CSV table needs the same number of fields",
            )
    names = header if header is not None else [str(j) for j in range(width)]
    keep = list(range(width))
    for col in exclude:
        if rebound and not (header is not None and col in header) and not re.fullmatch(r"\d+", col):
            notes.append(f'the model\'s except "{col}" does not apply: {ds.describe()} has no column {col!r}')
            continue
        j = _column_index(col, header, width, who, ds, span, "except")
        if j in keep:
            keep.remove(j)
    if ds.key is not None:
        j = _column_index(ds.key, header, width, who, ds, span, "pick")
        if j not in keep:
            raise DataError(f"{who}column {ds.key!r} of {ds.describe()} is both picked and excluded", span)
        keep = [j]
    if not keep:
        raise DataError(f"{who}'except' drops every column of {ds.describe()}", span)
    mapping = dict(mapping or {})
    text_map = {k: float(v) for k, v in mapping.items() if isinstance(k, str)}
    num_map = {float(k): float(v) for k, v in mapping.items() if not isinstance(k, str)}
    line_no = np.asarray(lines)
    if header is not None and ds.key is None:
        info["names"] = (None, tuple(header[j] for j in keep))
    if text_map and len(set(text_map.values())) == len(text_map):
        info["label_text"] = {v: k for k, v in text_map.items()}
    used: set[Any] = set()
    out: np.ndarray | None = None
    if not text_map:  # fast path: every kept cell is a number
        sub = rows if keep == list(range(width)) else [[r[j] for j in keep] for r in rows]
        try:
            out = np.array(sub, dtype=float)
        except ValueError:
            out = None
        if out is not None and num_map:
            used.update(k for k in num_map if np.any(out == k))
            out = _apply_number_map(out, num_map)
    if out is None:
        cols = [
            _convert_column([r[j] for r in rows], names[j], text_map, num_map, line_no, who, ds, span, used)
            for j in keep
        ]
        out = np.column_stack(cols)
    unused = [k for k in list(text_map) + list(num_map) if k not in used]
    for k in unused:
        notes.append(f"map key {_key_text(k)} matches no cell of {ds.describe()}")
    if ds.key is not None:
        out = out[:, 0]
    return out, line_no


def _key_text(k: Any) -> str:
    return f'"{k}"' if isinstance(k, str) else _fmt_num(k)


def _column_index(
    col: str, header: list[str] | None, width: int, who: str, ds: DataSpec, span: Span | None, what: str
) -> int:
    if header is not None and col in header:
        return header.index(col)
    if re.fullmatch(r"\d+", col) and int(col) < width:
        return int(col)
    if header is not None:
        hint = _did_you_mean(col, header, "columns")
    else:
        hint = f"{ds.describe()} has no header line; refer to its columns by 0-based index 0..{width - 1}"
    verb = "pick" if what == "pick" else "drop (except)"
    raise DataError(f"{who}cannot {verb} column {col!r}: {ds.describe()} has no such column", span, hint)


def _convert_column(
    cells: list[str],
    col: str,
    text_map: dict[str, float],
    num_map: dict[float, float],
    lines: np.ndarray,
    who: str,
    ds: DataSpec,
    span: Span | None,
    used: set[Any] | None = None,
) -> np.ndarray:
    used = set() if used is None else used
    s = np.char.strip(np.asarray(cells, dtype=str))
    out = np.full(len(s), np.nan)
    done = np.zeros(len(s), dtype=bool)
    for key, val in text_map.items():
        m = s == key
        if m.any():
            used.add(key)
        out[m] = val
        done |= m
    done |= np.isin(s, MISSING)
    rest = np.flatnonzero(~done)
    try:
        nums = s[rest].astype(float)
    except ValueError:
        bad = [i for i in rest if not _is_number(s[i])]
        values = sorted({str(s[i]) for i in bad})
        shown = ", ".join(repr(v) for v in values[:6]) + (", ..." if len(values) > 6 else "")
        i0 = bad[0]
        unused = [k for k in text_map if k not in used and not np.any(s == k)]
        if unused:  # a key that matches nothing next to text that no key matches: a misspelling
            fixed = dict(text_map)
            pairs = []
            for v in values:
                close = difflib.get_close_matches(v, unused, n=1, cutoff=0.0) if len(values) <= len(unused) else []
                k = (
                    close[0]
                    if close
                    else next((u for u in unused if u.lower() == v.lower()), unused[0] if len(unused) == 1 else None)
                )
                if k is not None and k in fixed:
                    fixed[v] = fixed.pop(k)
                    pairs.append((k, v))
            named = ", ".join(f'"{k}"' for k in unused)
            suggestion = "map {" + ", ".join(f'"{k}": {_fmt_num(v)}' for k, v in fixed.items()) + "}"
            hint = (
                f"the map key{'s' if len(unused) > 1 else ''} {named} match{'' if len(unused) > 1 else 'es'} no cell of "
                f"column {col!r}"
                + (f" (did you mean {', '.join(repr(v) for _, v in pairs)}?)" if pairs else "")
                + (f"; write {suggestion}" if pairs and len(fixed) <= 10 else "")
            )
        elif len(values) <= 10:
            taken = sorted(set(text_map.values()))
            if len(values) == 2 and not taken:
                codes = ["-1", "1"]
            elif taken == [1.0] and len(values) == 1:  # {"Yes": 1} and one more label: the other of -1/+1
                codes = ["-1"]
            elif taken == [-1.0] and len(values) == 1:
                codes = ["1"]
            else:
                start = int(max(taken)) + 1 if taken else 0
                codes = [str(start + j) for j in range(len(values))]
            suggestion = (
                "map {"
                + ", ".join(
                    [f'"{k}": {_fmt_num(v)}' for k, v in text_map.items()]
                    + [f'"{v}": {c}' for v, c in zip(values, codes)]
                )
                + "}"
            )
            hint = f'recode it with a clause such as {suggestion}, or drop it with except "{col}"'
        else:
            hint = f'drop it with except "{col}", or recode its values with map {{"text": number, ...}}'
        raise DataError(
            f"{who}column {col!r} of {ds.describe()} is not numeric: {len(bad)} cell(s) hold text ({shown}), "
            f"first on line {lines[i0]}",
            span,
            hint,
        ) from None
    orig = nums.copy()
    for k, v in num_map.items():
        m = orig == k
        if m.any():
            used.add(k)
        nums[m] = v
    out[rest] = nums
    return out


def _fit_clauses(
    ds: DataSpec, exclude: Sequence[str], mapping: Mapping[MapKey, float] | None, notes: list[str], name: str | None
) -> tuple[Sequence[str], Mapping[MapKey, float] | None]:
    """The model's ``except`` and ``map`` for a file that replaces the model's own (``--data``):
    kept where they fit the new file's format, dropped with a note where they do not (``except``
    names CSV columns; a text ``map`` recodes CSV cells, never the numbers of .npy/.npz/.mtx/libsvm
    files, whose numeric keys still apply)."""
    who = "rebound"
    if ds.fmt == "csv":
        return exclude, mapping
    if exclude:
        notes.append(
            f"{who} to {ds.describe()}: the model's except "
            + ", ".join(f'"{c}"' for c in exclude)
            + f" drops CSV columns and does not apply to a {ds.fmt} file"
        )
        exclude = ()
    if mapping:
        text = {k: v for k, v in mapping.items() if isinstance(k, str)}
        if text:
            shown = ", ".join(f'"{k}": {_fmt_num(v)}' for k, v in text.items())
            kept = {k: v for k, v in mapping.items() if not isinstance(k, str)}
            notes.append(
                f"{who} to {ds.describe()}: the model's map {{{shown}}} recodes text cells of a CSV "
                f"table and does not apply to the numbers of a {ds.fmt} file"
                + (" (its numeric keys still do)" if kept else "; its numbers are used as they are")
            )
            mapping = kept
    return exclude, mapping


# ---------------------------------------------------------------------------- libsvm


def read_libsvm(
    path: str | Path, *, name: str | None = None, span: Span | None = None, text: str | None = None
) -> tuple[np.ndarray, sp.csr_matrix]:
    """Read a libsvm/svmlight file: (labels, features as CSR with 1-based indices shifted to 0-based).

    Lines are ``label idx:val idx:val ...``; ``#`` starts a comment; ``qid:`` tokens are ignored.
    The number of columns is the largest index that occurs.
    """
    who = _who(name)
    where = text or str(path)
    labels: list[float] = []
    indptr = [0]
    indices: list[int] = []
    values: list[float] = []
    if True:
        for lineno, raw in enumerate(read_text_file(path).splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            try:
                labels.append(float(parts[0]))
            except ValueError:
                raise DataError(
                    f"{who}line {lineno} of {where}: the label {parts[0]!r} is not a number",
                    span,
                    "libsvm lines read: label index:value index:value ... (one label per line)",
                ) from None
            for tok in parts[1:]:
                if tok.startswith("qid:"):
                    continue
                idx, sep, val = tok.partition(":")
                try:
                    i = int(idx)
                    v = float(val)
                except ValueError:
                    i, v = -1, 0.0
                if not sep or i < 1:
                    raise DataError(
                        f"{who}line {lineno} of {where}: {tok!r} is not an index:value pair with a 1-based index",
                        span,
                        "libsvm lines read: label index:value index:value ... with indices starting at 1",
                    )
                indices.append(i - 1)
                values.append(v)
            indptr.append(len(indices))
    if not labels:
        raise DataError(f"{who}{where} holds no samples", span)
    ncols = max(indices) + 1 if indices else 0
    X = sp.csr_matrix(
        (np.asarray(values, dtype=float), np.asarray(indices, dtype=np.int64), np.asarray(indptr, dtype=np.int64)),
        shape=(len(labels), ncols),
    )
    X.sum_duplicates()
    return np.asarray(labels, dtype=float), X


# ---------------------------------------------------------------------------- validation


def _fmt_shape(shape: tuple[int, ...]) -> str:
    return "(" + ",".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _fmt_num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{float(v):g}"


def validate(
    value: Any,
    kind: str,
    *,
    name: str | None = None,
    origin: str = "the value",
    span: Span | None = None,
    lines: np.ndarray | None = None,
) -> Value:
    """Check ``value`` against ``kind`` and for NaN/Inf; returns it as float (vectors raveled).

    ``origin`` says where the value came from (``file "X.csv"``, ``data={'X': ...}``) for messages;
    ``lines`` (CSV) maps rows to line numbers of the file.
    """
    who = _who(name)
    if kind not in KINDS:
        raise DataError(f"{who}unknown kind {kind!r}", span, f"the kinds are {', '.join(KINDS)}")
    if is_dask_array(value):
        if kind == "matrix":
            if value.ndim != 2:
                raise DataError(
                    f"{who}declared as a matrix, but {origin} holds an array of shape {_fmt_shape(value.shape)}",
                    span,
                    "declare it with the kind that fits (vector, scalar), or give a 2-D table",
                )
            return value  # stays lazy: Data checks it for NaN/inf in one pass over its blocks
        value = np.asarray(value.compute())
    if sp.issparse(value):
        v: Value = sp.csr_matrix(value, dtype=float)
    else:
        try:
            v = np.asarray(value, dtype=float)
        except (TypeError, ValueError) as exc:
            raise DataError(f"{who}{origin} is not numeric: {exc}", span) from None
    shape = tuple(v.shape)
    if kind == "matrix":
        if len(shape) != 2:
            what = "a scalar" if not shape else f"an array of shape {_fmt_shape(shape)}"
            raise DataError(
                f"{who}declared as a matrix, but {origin} holds {what}",
                span,
                "declare it with the kind that fits (vector, scalar), or give a 2-D table",
            )
    elif kind in ("vector", "labels"):
        if len(shape) == 2 and 1 in shape:
            v = (v.toarray() if sp.issparse(v) else v).ravel()
        elif len(shape) != 1:
            what = "a scalar" if not shape else f"an array of shape {_fmt_shape(shape)}"
            raise DataError(
                f"{who}declared as {'a vector' if kind == 'vector' else 'labels (a vector)'}, but {origin} holds {what}",
                span,
                'pick one column with "file.csv:COLUMN" (or "file.npz:KEY"), or declare it as a matrix',
            )
    elif kind == "scalar":
        size = int(np.prod(shape)) if shape else 1
        if size != 1:
            raise DataError(
                f"{who}declared as a scalar, but {origin} holds an array of shape {_fmt_shape(shape)}", span
            )
        v = np.asarray(v.toarray() if sp.issparse(v) else v, dtype=float).reshape(())
    _check_finite(v, who, origin, span, lines)
    if kind == "labels":
        check_labels(np.asarray(v), name, origin, span)
    return v


def _check_finite(v: Value, who: str, origin: str, span: Span | None, lines: np.ndarray | None) -> None:
    data = v.data if sp.issparse(v) else np.asarray(v)
    bad = ~np.isfinite(data)
    if not bad.any():
        return
    n_nan = int(np.isnan(data).sum())
    n_inf = int(bad.sum()) - n_nan
    parts = []
    if n_nan:
        parts.append(f"{n_nan} NaN/missing value{'s' if n_nan != 1 else ''}")
    if n_inf:
        parts.append(f"{n_inf} infinite value{'s' if n_inf != 1 else ''}")
    if sp.issparse(v):
        coo = v.tocoo()
        k = int(np.flatnonzero(~np.isfinite(coo.data))[0])
        pos: tuple[int, ...] = (int(coo.row[k]), int(coo.col[k]))
    else:
        pos = tuple(int(i) for i in np.argwhere(bad)[0])
    where = f"first at index [{', '.join(str(i) for i in pos)}]" if pos else "the value itself"
    if lines is not None and pos:
        where += f" (line {int(lines[pos[0]])} of the file)"
    raise DataError(
        f"{who}{origin} contains {' and '.join(parts)}; {where}",
        span,
        "sparsemodel needs finite numbers: remove or impute the missing entries before solving",
    )


def check_labels(y: np.ndarray, name: str | None, origin: str, span: Span | None) -> None:
    """Refuse a label vector whose values are not all -1 or +1 (with a ``map`` suggestion)."""
    vals = np.unique(y)
    if np.all(np.isin(vals, (-1.0, 1.0))):
        return
    shown = ", ".join(_fmt_num(x) for x in vals[:8]) + (", ..." if len(vals) > 8 else "")
    if len(vals) == 2:
        hint = f"recode them in the data line: map {{{_fmt_num(vals[0])}: -1, {_fmt_num(vals[1])}: 1}}"
    elif len(vals) == 1:
        hint = "a label vector needs the values -1 and +1; check that the right file or column is used"
    else:
        hint = (
            f"labels are binary (-1/+1) but there are {len(vals)} distinct values; for several classes "
            "declare it as a vector and use onehot(...)"
        )
    raise DataError(
        f"{_who(name)}labels must be -1 or +1, but {origin} holds the values {{{shown}}}",
        span,
        hint,
    )


__all__ = [
    "KINDS",
    "FORMATS",
    "DataSpec",
    "parse_spec",
    "read_data",
    "load_spec",
    "read_csv",
    "read_libsvm",
    "read_chunked",
    "validate",
    "check_labels",
]
