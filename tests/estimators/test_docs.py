"""The worked examples of docs/estimators.md run as they stand: every ```python block of the page,
each in a fresh namespace (the blocks assert what the page states about their output)."""

from __future__ import annotations

import re
import textwrap
import warnings
from pathlib import Path

import pytest

pytest.importorskip("sklearn")

PAGE = Path(__file__).resolve().parents[2] / "docs" / "estimators.md"


def blocks() -> list[tuple[str, str]]:
    """(the section heading, the code) of every python block, in order."""
    out, heading = [], ""
    for m in re.finditer(r"^## ([^\n]+)$|^( *)```python\n(.*?)^ *```", PAGE.read_text(), re.M | re.S):
        if m.group(1):
            heading = m.group(1)
        else:
            out.append((heading, textwrap.dedent(m.group(3))))
    return out


def test_every_estimator_has_a_worked_example():
    text = PAGE.read_text()
    from sparsemodel.sklearn import __all__ as names

    code = "\n".join(c for _, c in blocks())
    estimators = [n for n in names if n.startswith(("Sparse", "Robust")) and n != "SparseEstimator"]
    assert estimators and all(f"{n}(" in code for n in estimators), [n for n in estimators if f"{n}(" not in code]
    assert "docs/estimators.md" in (PAGE.parents[1] / "README.md").read_text() and text


@pytest.mark.parametrize("heading,code", blocks(), ids=[f"{i}-{h}" for i, (h, _) in enumerate(blocks())])
def test_the_block_runs(heading, code):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(code, f"{PAGE.name} ({heading})", "exec"), {"__name__": "docs_estimators"})
