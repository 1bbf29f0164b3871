"""Small helpers shared across layers."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

MAX_RANGE = 100_000  # values in one START:STOP:STEP range


def shallow_copy(obj: Any) -> Any:
    """A shallow copy of a plain object (``copy.copy`` without its protocol's dispatch: a lowering
    copied for every run, a rebinding's lowering and model sharing what they do not replace)."""
    out = object.__new__(type(obj))
    out.__dict__.update(obj.__dict__)
    return out


def closest(word: str, options: Any, cutoff: float = 0.6) -> str | None:
    """The option nearest to a misspelled word (the same word in another case first), or None:
    every "did you mean" of the package asks this one function."""
    import difflib

    opts = [str(o) for o in options]
    same = [o for o in opts if o.lower() == word.lower()]
    if same:
        return same[0]
    close = difflib.get_close_matches(word, opts, n=1, cutoff=cutoff)
    return close[0] if close else None


def did_you_mean(word: str, options: Any, cutoff: float = 0.6) -> str:
    """``"did you mean 'x'? "`` for the option nearest to word, or ``""``."""
    c = closest(word, options, cutoff)
    return f"did you mean '{c}'? " if c is not None else ""


def as_slice(idx: np.ndarray) -> slice | np.ndarray:
    """``idx`` as a slice when it is a run of consecutive integers (a view instead of a gather:
    ``A[:, idx]`` of a variable ``w[a:b]``'s coordinates), else ``idx`` itself."""
    if len(idx) and int(idx[-1]) - int(idx[0]) == len(idx) - 1 and np.all(np.diff(idx) == 1):
        return slice(int(idx[0]), int(idx[-1]) + 1)
    return idx


def progression(idx: np.ndarray) -> slice | np.ndarray:
    """``idx`` as a slice with a step when it is an increasing arithmetic progression (the
    coordinates of one column of a C-ordered matrix variable, ``W[:, c]``: a strided view instead
    of a gather and scatter), else ``idx`` itself."""
    if len(idx) > 1:
        first, step = int(idx[0]), int(idx[1]) - int(idx[0])
        if step > 0 and int(idx[-1]) == first + step * (len(idx) - 1) and np.all(np.diff(idx) == step):
            return slice(first, int(idx[-1]) + 1, step)
    return idx


def fmt_number(v: Any) -> str:
    """A number as a person writes it: an integral value without a decimal point (``3``, not
    ``3.0``), any other with up to 12 significant digits (``1e-05``, ``0.25``)."""
    x = float(v)
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else f"{x:.12g}"


def is_dask_array(A: Any) -> bool:
    """Whether ``A`` is a dask array (checked without importing dask, an optional extra)."""
    return type(A).__module__.split(".")[0] == "dask" and hasattr(A, "chunks") and hasattr(A, "dask")


def frame_names(value: Any) -> tuple[Any, tuple[tuple[str, ...] | None, ...] | None]:
    """A pandas DataFrame or Series as (a float array, its axis names); anything else unchanged
    (names None). pandas is never imported here: a frame is recognized by its type's module."""
    mod = type(value).__module__.split(".")[0]
    if mod != "pandas":
        return value, None
    if hasattr(value, "columns") and getattr(value, "ndim", 0) == 2:
        arr = value.to_numpy(dtype=float)
        return arr, (None, tuple(str(c) for c in value.columns))
    if getattr(value, "ndim", 0) == 1 and hasattr(value, "to_numpy"):
        return value.to_numpy(dtype=float), None
    return value, None


def expand_range(start: float, stop: float, step: float = 1) -> list[float]:
    """START:STOP:STEP with STOP included (``5:50:5`` is 5, 10, ..., 50); integers stay integers.
    Raises ValueError for an empty range or a step that is not positive."""
    if not all(math.isfinite(v) for v in (start, stop, step)):
        raise ValueError(f"{start}:{stop}:{step} has a value that is not a finite number")
    if not step > 0 or stop < start:
        raise ValueError(f"{start}:{stop}:{step} is empty or invalid")
    count = int(math.floor((stop - start) / step * (1 + 1e-12))) + 1
    if count > MAX_RANGE:
        raise ValueError(f"{start}:{stop}:{step} has {count} values (at most {MAX_RANGE})")
    vals = [start + i * step for i in range(count)]
    if all(float(v).is_integer() for v in (start, stop, step)):
        return [int(v) for v in vals]
    return vals


def parse_values(text: str) -> list[float]:
    """``20``, ``5:50:5`` (STOP included) or ``1,2,5`` as numbers (integers where they are)."""
    if ":" in text:
        parts = [float(p) for p in text.split(":")]
        if len(parts) not in (2, 3):
            raise ValueError(text)
        return expand_range(*parts)
    vals = [float(p) for p in text.split(",")]
    return [int(v) if v.is_integer() else v for v in vals]


def parse_named_values(text: str) -> dict[str, list[float]]:
    """``S=10,L=2`` or ``S=10:50:10,L=1,2`` (several bounds by name, each a value, a list or a
    START:STOP[:STEP] range with STOP included) as {name: values}; a value without a name continues
    the list of the name before it. Raises ValueError for text of another form."""
    out: dict[str, list[float]] = {}
    name = None
    for item in (t.strip() for t in text.split(",")):
        if "=" in item:
            name, item = (t.strip() for t in item.split("=", 1))
            if not name or name in out:
                raise ValueError(text)
            out[name] = []
        if name is None or not item:
            raise ValueError(text)
        out[name] += parse_values(item)
    return out


def jsonable(v: Any) -> Any:
    """A JSON-safe copy: containers recursively, NumPy scalars and arrays to Python values,
    non-finite floats to strings ("inf", "nan"), anything else unknown to its str()."""
    if isinstance(v, Mapping):  # dicts, and the bounds of a product of sets
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return jsonable(v.tolist())
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return f if math.isfinite(f) else str(f)
    if v is None or isinstance(v, (int, str)):
        return v
    return str(v)


class Clock:
    """Wall-clock timer for solver histories; time spent in ``paused()`` (logging the objective
    for the history) is not counted."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.off = 0.0

    def __call__(self) -> float:
        return time.perf_counter() - self.t0 - self.off

    def paused(self) -> Any:
        clock = self

        class _Pause:
            def __enter__(self) -> None:
                self.t = time.perf_counter()

            def __exit__(self, *exc: Any) -> None:
                clock.off += time.perf_counter() - self.t

        return _Pause()
