"""What every report of the workflows shares (compare, path, select, a study): the cells a run's row
says of its answer, the support cells, the CSV and JSON writers and the notebook's HTML.

A report (:class:`Report`) has ``columns``, ``table_rows()`` (one dict per line, keyed by the
columns), ``to_dict()`` (what its JSON holds) and ``protected`` (the problem's inputs, never
written over); :meth:`Report.to_csv` and :meth:`Report.to_json` write them, refusing an input or an
existing file without ``overwrite=True`` (:func:`sparsemodel.outputs.write_output`). The plots are
:mod:`sparsemodel.workflows.figures`'."""

from __future__ import annotations

import csv
import io
import json
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..outputs import check_output, write_output
from ..util import jsonable
from .figures import png_bytes
from .metrics import bound_cells

if TYPE_CHECKING:
    from ..solvers.result import Result

ERROR = "error"  # the status of a run that raised a ModelError (its message in the row)
# what every run's row says of its answer, in this order (compare, path and a study's rows)
RUN_COLUMNS = ("objective", "lower_bound", "gap", "nnz", "df", "status")
SUPPORT_COLUMNS = ("support", "support_names")  # the selection by position and by name


def run_cells(res: Result | None, df: int | None = None) -> dict[str, Any]:
    """The cells of ``RUN_COLUMNS`` for a run's result (None cells and status ``error`` for a failed
    run); ``df``: its degrees of freedom when known."""
    return {
        "objective": float(res.objective) if res is not None else None,
        **bound_cells(res),
        "nnz": int(len(res.support)) if res is not None else None,
        "df": df,
        "status": res.status if res is not None else ERROR,
    }


def support_cells(res: Result | None) -> dict[str, str | None]:
    """The support of a result as two CSV cells: positions (``3 17 42``, or ``(0,1) (2,3)`` for a
    matrix) and names (``MOSTYPE; MAUT1``). Empty for a rank bound (the matrix is dense; its rank
    and singular values are in the JSON); None for a failed run."""
    if res is None:
        return {"support": None, "support_names": None}
    if res.view.dense:
        return {"support": "", "support_names": ""}
    return _cells(res.support_positions, res.support_names)


def point_support_cells(lp: Any, x: np.ndarray) -> dict[str, str]:
    """The support cells of a flat point that no solver of ours returned (an outside method's
    answer), its coordinates named as a result's are (:func:`~sparsemodel.solvers.result.coordinate_label`)."""
    s = lp.set
    if s is None or s.view.dense:
        return {"support": "", "support_names": ""}
    from ..solvers.result import coordinate_label, problem_names

    var = lp.primary
    support = s.nonzeros(x)
    names = problem_names(lp.problem).get(var.name)
    shape = var.shape
    pos = [tuple(int(v) for v in np.unravel_index(int(i), shape)) if shape else () for i in support]
    return _cells(pos, [coordinate_label(names, var.name, shape, int(i)) for i in support])


def _cells(positions: list[tuple[int, ...]], names: list[str]) -> dict[str, str]:
    text = " ".join(str(p[0]) if len(p) == 1 else "(" + ",".join(map(str, p)) + ")" for p in positions)
    return {"support": text, "support_names": "; ".join(names)}


def csv_text(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """The rows as CSV: a header of ``columns``, an empty cell for None, floats by ``repr`` (every
    digit, so that a file reads back the same number)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(
            {c: ("" if r.get(c) is None else (repr(r[c]) if isinstance(r[c], float) else r[c])) for c in columns}
        )
    return buf.getvalue()


def json_text(data: dict[str, Any], indent: int | None = 2) -> str:
    """The report's dictionary as JSON, through :func:`~sparsemodel.util.jsonable` (NumPy values to
    Python ones, a non-finite float to its text; NaN is never written as a bare token)."""
    return json.dumps(jsonable(data), indent=indent, allow_nan=False) + "\n"


class Report(ABC):
    """The writers of a report: its ``columns``, ``table_rows()`` and ``to_dict()`` as CSV and JSON,
    its ``figure()`` as PNG, none of them over the problem's inputs (``protected``). The studies'
    reports (compare, path, select, experiment) and the inference layer's (knockoffs, stability)
    derive from it."""

    protected: Any  # the problem's input files (a set or a list of paths)
    columns: Any  # the column names, in order

    @abstractmethod
    def table_rows(self) -> list[dict[str, Any]]:
        """One dict per row, keyed by ``columns``."""

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """Everything the report holds, for JSON."""

    @abstractmethod
    def figure(self, metrics: Any = None) -> Any:
        """The report's matplotlib figure (``metrics``: what to plot, where a report offers a choice)."""

    def to_csv(self, path: str | Path, overwrite: bool = False) -> Path:
        """One line per row of the report, the columns in order (empty cells for None)."""
        return write_output(path, csv_text(self.table_rows(), list(self.columns)), self.protected, overwrite)

    def to_json(self, path: str | Path, overwrite: bool = False, indent: int | None = 2) -> Path:
        """The report's :meth:`to_dict`."""
        return write_output(path, json_text(self.to_dict(), indent), self.protected, overwrite)

    def plot(self, path: str | Path, overwrite: bool = False, metrics: Any = None) -> Path:
        """PNG of :meth:`figure` (``metrics``: one panel per metric, ``"test_loss,f1"``)."""
        check_output(path, self.protected, overwrite)
        return write_output(path, png_bytes(self.figure(metrics)), self.protected, overwrite)


def report_html(rows: list[dict[str, Any]], columns: Any, caption: str, fig: Any = None, extra: str = "") -> str:
    """What a notebook shows for a report: its rows as an HTML table and its plot inline (PNG)."""
    import base64

    from ..solvers.report import html_table

    def cell(v: Any) -> Any:
        if v is None:
            return ""
        return f"{v:.6g}" if isinstance(v, float) else v

    cols = [c for c in columns if c != "message"] + ["message"]
    body = [[cell(r.get(c)) for c in cols] for r in rows]
    out = [extra, html_table(cols, body, caption)]
    if fig is not None:
        png = base64.b64encode(png_bytes(fig)).decode("ascii")
        out.append(f'<img alt="{caption}" src="data:image/png;base64,{png}"/>')
    return "<div>" + "".join(out) + "</div>"


__all__ = [
    "ERROR",
    "RUN_COLUMNS",
    "SUPPORT_COLUMNS",
    "Report",
    "csv_text",
    "json_text",
    "point_support_cells",
    "report_html",
    "run_cells",
    "support_cells",
]
