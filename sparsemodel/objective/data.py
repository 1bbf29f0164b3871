"""The one constructor of the data interface: :func:`as_operator` gives a data matrix held in memory
(NumPy, scipy.sparse) a :class:`~sparsemodel.objective.operators.DataOperator`, and one held in row
blocks (a dask array, or an operator that already is one) a
:class:`~sparsemodel.objective.chunked.DaskOperator`, importing dask only then."""

from __future__ import annotations

from typing import Any

from ..util import is_dask_array
from .operators import DataOperator


def as_operator(A: Any) -> DataOperator:
    """The data interface for ``A``: in memory, or chunked by rows (same interface)."""
    if is_dask_array(A) or getattr(A, "chunked", False):
        from .chunked import DaskOperator

        return DaskOperator(A)
    return DataOperator(A)
