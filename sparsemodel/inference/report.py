"""What the inference reports share: a table of rows, JSON, CSV and a PNG plot, written through
:mod:`sparsemodel.outputs` (never over the model or its data, never over a file unasked)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from ..outputs import check_output, write_output
from ..util import jsonable
from ..workflows.figures import png_bytes
from ..workflows.report import report_html


class Report:
    """A report: ``rows()`` (one dict per unit), ``columns``, ``to_dict()``, ``figure()`` and
    ``table()`` are the subclass's; the files are written here."""

    columns: tuple[str, ...] = ()
    protected: list[Path]
    title = "report"

    def rows(self) -> list[dict[str, Any]]:  # pragma: no cover - every report defines it
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover - every report defines it
        raise NotImplementedError

    def figure(self) -> Any:  # pragma: no cover - every report defines it
        raise NotImplementedError

    def table(self, fmt: str = "simple") -> str:  # pragma: no cover - every report defines it
        raise NotImplementedError

    def __str__(self) -> str:
        return self.table()

    def to_json(self, path: str | Path, overwrite: bool = False) -> Path:
        text = json.dumps(jsonable(self.to_dict()), indent=2, allow_nan=False) + "\n"
        return write_output(path, text, self.protected, overwrite)

    def to_csv(self, path: str | Path, overwrite: bool = False) -> Path:
        buf = io.StringIO()
        cols = list(self.columns)
        w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
        w.writeheader()
        for r in self.rows():
            w.writerow(
                {c: ("" if r.get(c) is None else (repr(r[c]) if isinstance(r[c], float) else r[c])) for c in cols}
            )
        return write_output(path, buf.getvalue(), self.protected, overwrite)

    def plot(self, path: str | Path, overwrite: bool = False, metrics: Any = None) -> Path:
        """PNG of :meth:`figure` (``metrics`` is accepted for the CLI's one signature; the plot is fixed)."""
        check_output(path, self.protected, overwrite)
        return write_output(path, png_bytes(self.figure()), self.protected, overwrite)

    def _repr_html_(self) -> str:
        return report_html(self.rows(), self.columns, self.title, self.figure())


__all__ = ["Report"]
