"""What the inference reports add to a study's report (:class:`sparsemodel.workflows.report.Report`:
CSV, JSON and PNG, never over the model or its data, never over a file unasked): a text table,
``str()`` as that table, and a notebook's view."""

from __future__ import annotations

from abc import abstractmethod
from pathlib import Path
from typing import Any

from ..workflows.report import Report as StudyReport
from ..workflows.report import report_html


class Report(StudyReport):
    """A knockoff or stability report: ``rows()`` (one dict per unit), ``columns``, ``to_dict()``,
    ``figure()`` and ``table()`` are the subclass's."""

    columns: tuple[str, ...] = ()
    protected: list[Path]
    title = "report"

    @abstractmethod
    def rows(self) -> list[dict[str, Any]]:
        """One dict per unit."""

    @abstractmethod
    def table(self, fmt: str = "simple") -> str:
        """The report as a text table (tabulate's ``fmt``)."""

    def table_rows(self) -> list[dict[str, Any]]:
        return self.rows()

    def __str__(self) -> str:
        return self.table()

    def _repr_html_(self) -> str:
        return report_html(self.rows(), self.columns, self.title, self.figure())


__all__ = ["Report"]
