"""abess's estimator-test data (tests/data/README.md) and its assertion helpers, restated: abess's
``python/pytest/utilities.py`` compares supports (``assert_fit``: the rows with a nonzero entry are
the same) and values (``assert_value``: ``pytest.approx`` with rel and abs 0.01 unless given)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

DATA = Path(__file__).resolve().parent.parent / "data"


def load(name: str) -> dict[str, np.ndarray]:
    with np.load(DATA / f"abess_{name}.npz") as d:
        return {k: d[k] for k in d.files}


def rows(coef: np.ndarray) -> list[int]:
    """The positions with a nonzero entry (rows of a matrix), as abess's assert_fit reads them."""
    return np.unique(np.nonzero(np.asarray(coef))[0]).tolist()


def same_support(a: np.ndarray, b: np.ndarray) -> None:
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(b))
    assert rows(a) == rows(b)


def close(a: np.ndarray, b: np.ndarray, rel: float = 1e-2, abs: float = 1e-2) -> None:
    a, b = np.ravel(a), np.ravel(b)
    assert a.shape == b.shape
    assert a == pytest.approx(b, rel=rel, abs=abs)
