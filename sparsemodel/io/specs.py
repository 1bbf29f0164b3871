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
and, when known, the place in the model file."""

from __future__ import annotations

import csv
import re
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import DataError, Span
from .chunked import read_chunked
from .common import CHUNKED_FORMATS, FORMATS, KINDS, DataSpec, MapKey, Value, _apply_number_map, _who
from .text import _did_you_mean, _fit_clauses, read_csv, read_libsvm
from .validation import validate


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
