"""Text formats: delimited tables (CSV, TSV, whitespace; the delimiter and a header line detected,
columns chosen by name or index, text cells recoded by ``map``, missing cells as NaN) and
libsvm / svmlight files."""

from __future__ import annotations

import csv
import difflib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import DataError, Span
from ..util import did_you_mean, fmt_number
from .common import MISSING, DataSpec, MapKey, _apply_number_map, _who


def _did_you_mean(word: str, options: Iterable[str], what: str) -> str:
    opts = list(options)
    listing = ", ".join(opts[:30]) + (", ..." if len(opts) > 30 else "")
    return did_you_mean(word, opts) + f"the {what} are: {listing}"


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
    where = ds.describe()
    keep = _kept_columns(header, width, exclude, ds.key, who, where, span, notes, rebound)
    line_no = np.asarray(lines)
    if header is not None and ds.key is None:
        info["names"] = (None, tuple(header[j] for j in keep))
    text_map, num_map = _split_map(mapping, info)
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
            _convert_column(
                [r[j] for r in rows],
                names[j],
                text_map,
                num_map,
                lambda i: f"line {line_no[i]}",
                who,
                where,
                span,
                used,
            )
            for j in keep
        ]
        out = np.column_stack(cols)
    _unused_keys(text_map, num_map, used, where, notes)
    if ds.key is not None:
        out = out[:, 0]
    return out, line_no


def read_frame(
    frame: Any,
    *,
    key: str | None = None,
    exclude: Sequence[str] = (),
    mapping: Mapping[MapKey, float] | None = None,
    name: str | None = None,
    span: Span | None = None,
    info: dict[str, Any] | None = None,
) -> np.ndarray:
    """A pandas DataFrame (or Series) given for a data line (``data={"X": df}`` in Python), read
    as the line reads its CSV table: the line's ``except`` drops columns by name (a name the frame
    does not have is noted and skipped, as for a rebound file), its column pick (``"d.csv:target"``)
    takes that column when the frame has it, and its ``map`` recodes text cells and numbers.
    ``info`` receives the kept columns' names, the text of each mapped number and the notes, as
    :func:`read_csv` fills it. Rows are taken in order (the frame's index is not read)."""
    who = _who(name)
    info = {} if info is None else info
    notes: list[str] = info.setdefault("notes", [])
    series = getattr(frame, "ndim", 2) == 1
    where = f"the {'Series' if series else 'DataFrame'} given for {name}" if name else "the DataFrame"
    table = frame.to_frame() if series else frame
    header = [str(c).strip() for c in table.columns]
    width = len(header)
    if width == 0:
        raise DataError(f"{who}{where} has no columns", span)
    if series or (key is not None and key not in header and width == 1):
        if key is not None and not series:
            notes.append(f"the model picks column {key!r} of its file; {where} has one column, {header[0]!r}, taken")
        exclude, key = (), None  # one column: what the pick would give
    keep = _kept_columns(header, width, exclude, key, who, where, span, notes, True)
    if key is None and not series:
        info["names"] = (None, tuple(header[j] for j in keep))
    text_map, num_map = _split_map(mapping, info)
    used: set[Any] = set()
    cols = []
    for j in keep:
        col = table.iloc[:, j]
        if col.dtype.kind in "biuf":  # numbers (bool as 0/1): the numeric keys of map apply
            v = col.to_numpy(dtype=float, na_value=np.nan)
            used.update(k for k in num_map if np.any(v == k))
            cols.append(_apply_number_map(v, num_map) if num_map else v)
            continue
        cells = ["" if c is None or (isinstance(c, float) and c != c) else str(c) for c in col.astype(object)]
        cols.append(_convert_column(cells, header[j], text_map, num_map, lambda i: f"row {i}", who, where, span, used))
    _unused_keys(text_map, num_map, used, where, notes)
    out = np.column_stack(cols) if cols else np.zeros((len(table), 0))
    return out[:, 0] if key is not None or series else out


def _kept_columns(
    header: list[str] | None,
    width: int,
    exclude: Sequence[str],
    key: str | None,
    who: str,
    where: str,
    span: Span | None,
    notes: list[str],
    rebound: bool,
) -> list[int]:
    """The columns a data line keeps of a table: all but its ``except`` columns, or the one it picks
    (``"d.csv:target"``). Data given in place of the line's file (``rebound``) skips, with a note,
    an ``except`` column it does not have."""
    keep = list(range(width))
    for col in exclude:
        if rebound and not (header is not None and col in header) and not re.fullmatch(r"\d+", col):
            notes.append(f'the model\'s except "{col}" does not apply: {where} has no column {col!r}')
            continue
        j = _column_index(col, header, width, who, where, span, "except")
        if j in keep:
            keep.remove(j)
    if key is not None:
        j = _column_index(key, header, width, who, where, span, "pick")
        if j not in keep:
            raise DataError(f"{who}column {key!r} of {where} is both picked and excluded", span)
        keep = [j]
    if not keep:
        raise DataError(f"{who}'except' drops every column of {where}", span)
    return keep


def _split_map(
    mapping: Mapping[MapKey, float] | None, info: dict[str, Any]
) -> tuple[dict[str, float], dict[float, float]]:
    """A ``map`` clause as (text keys, numeric keys); ``info["label_text"]`` gets the text each
    number came from when the text keys map to distinct numbers."""
    mapping = dict(mapping or {})
    text_map = {k: float(v) for k, v in mapping.items() if isinstance(k, str)}
    num_map = {float(k): float(v) for k, v in mapping.items() if not isinstance(k, str)}
    if text_map and len(set(text_map.values())) == len(text_map):
        info["label_text"] = {v: k for k, v in text_map.items()}
    return text_map, num_map


def _unused_keys(
    text_map: dict[str, float], num_map: dict[float, float], used: set[Any], where: str, notes: list[str]
) -> None:
    for k in list(text_map) + list(num_map):
        if k not in used:
            notes.append(f"map key {_key_text(k)} matches no cell of {where}")


def _key_text(k: Any) -> str:
    return f'"{k}"' if isinstance(k, str) else fmt_number(k)


def _column_index(
    col: str, header: list[str] | None, width: int, who: str, where: str, span: Span | None, what: str
) -> int:
    if header is not None and col in header:
        return header.index(col)
    if re.fullmatch(r"\d+", col) and int(col) < width:
        return int(col)
    if header is not None:
        hint = _did_you_mean(col, header, "columns")
    else:
        hint = f"{where} has no header line; refer to its columns by 0-based index 0..{width - 1}"
    verb = "pick" if what == "pick" else "drop (except)"
    raise DataError(f"{who}cannot {verb} column {col!r}: {where} has no such column", span, hint)


def _convert_column(
    cells: list[str],
    col: str,
    text_map: dict[str, float],
    num_map: dict[float, float],
    locate: Callable[[int], str],
    who: str,
    where: str,
    span: Span | None,
    used: set[Any] | None = None,
) -> np.ndarray:
    """One column's cells (text) as numbers: the text keys of ``map`` first, missing words as NaN,
    then the numbers with the numeric keys applied; ``locate(i)`` says where cell i is (``line
    5``, ``row 4``) in the error that names the first cell that is text no key recodes."""
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
            suggestion = "map {" + ", ".join(f'"{k}": {fmt_number(v)}' for k, v in fixed.items()) + "}"
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
                    [f'"{k}": {fmt_number(v)}' for k, v in text_map.items()]
                    + [f'"{v}": {c}' for v, c in zip(values, codes)]
                )
                + "}"
            )
            hint = f'recode it with a clause such as {suggestion}, or drop it with except "{col}"'
        else:
            hint = f'drop it with except "{col}", or recode its values with map {{"text": number, ...}}'
        raise DataError(
            f"{who}column {col!r} of {where} is not numeric: {len(bad)} cell(s) hold text ({shown}), "
            f"first on {locate(i0)}",
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
            shown = ", ".join(f'"{k}": {fmt_number(v)}' for k, v in text.items())
            kept = {k: v for k, v in mapping.items() if not isinstance(k, str)}
            notes.append(
                f"{who} to {ds.describe()}: the model's map {{{shown}}} recodes text cells of a CSV "
                f"table and does not apply to the numbers of a {ds.fmt} file"
                + (" (its numeric keys still do)" if kept else "; its numbers are used as they are")
            )
            mapping = kept
    return exclude, mapping


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
