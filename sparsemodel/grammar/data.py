"""The value of a ``data`` statement: read from its file (the spec after ``from``, relative to
the model file), or from what the caller rebound (``data=`` in Python, ``--data`` on the CLI: a
path, an array, a DataFrame or an :class:`~sparsemodel.model.expr.Data` with names), with the
statement's ``except`` and ``map`` clauses, validated for its kind, its column names kept."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from .. import io as smio
from ..errors import DataError, DataWarning, Span
from ..model.expr import Data

_UNSET: Any = object()  # no value rebound for this name


def bind_data(
    name: str,
    kind: str,
    path_spec: tuple[str, Span | None] | None,
    base_dir: Path,
    exclude: list[str],
    mapping: dict[Any, float],
    span: Span | None,
    given: Any = _UNSET,
) -> Data:
    """The :class:`Data` of ``data NAME : KIND from "SPEC"`` (``path_spec``: the spec and its
    span, None when the statement has no file), or of the value ``given`` in its place."""
    path: Path | None = None
    info: dict[str, Any] = {}
    if given is not _UNSET:
        if isinstance(given, (str, Path)):
            ds = smio.parse_spec(given, Path.cwd(), name, span)
            value, lines = smio.load_spec(
                ds, kind, exclude=exclude, mapping=mapping, name=name, span=span, info=info, rebound=True
            )
            value = smio.validate(
                value,
                kind,
                name=name,
                origin=f"file {ds.describe()} (rebound with data= or --data)",
                span=span,
                lines=lines,
            )
            path = ds.path
        else:
            if isinstance(given, Data):  # sm.Data(X, names=...): the values and their names
                info["names"], given = given.axis_names, given.value
            origin = f"the value rebound with data={{'{name}': ...}}"
            if type(given).__module__.split(".")[0] == "pandas" and getattr(given, "ndim", 0) in (1, 2):
                # a DataFrame or Series goes through the line's column pick, except and map, as its file would
                origin = f"the {type(given).__name__} rebound with data={{'{name}': ...}}"
                given = smio.read_frame(
                    given,
                    key=_line_key(path_spec, base_dir, name),
                    exclude=exclude,
                    mapping=mapping,
                    name=name,
                    span=span,
                    info=info,
                )
            value = smio.validate(given, kind, name=name, origin=origin, span=span)
    elif path_spec is None:
        raise DataError(
            f"data {name} has no file and no value was given for it",
            span,
            f'write data {name} : {kind} from "FILE", or pass data={{"{name}": ...}} (--data {name}=FILE)',
        )
    else:
        text, pspan = path_spec
        ds = smio.parse_spec(text, base_dir, name, pspan)
        value, lines = smio.load_spec(ds, kind, exclude=exclude, mapping=mapping, name=name, span=pspan, info=info)
        value = smio.validate(value, kind, name=name, origin=f"file {ds.describe()}", span=pspan, lines=lines)
        path = ds.path
    for note in info.get("notes", []):
        where = f"{span.location()}: " if span is not None else ""
        warnings.warn(f"{where}data {name}: {note}", DataWarning, stacklevel=2)
    d = Data(value, name=name, span=span, kind=kind, names=info.get("names"))
    d.path = str(path.resolve()) if path is not None else None
    d.label_text = info.get("label_text")
    return d


def _line_key(path_spec: tuple[str, Span | None] | None, base_dir: Path, name: str) -> str | None:
    """The column a data line picks of its table (``"d.csv:target"``), or None."""
    if path_spec is None:
        return None
    try:
        ds = smio.parse_spec(path_spec[0], base_dir, name, path_spec[1])
    except DataError:  # the line's own file is not read when a value replaces it
        return None
    return ds.key if ds.fmt == "csv" else None
