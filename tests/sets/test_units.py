"""The words of the units (sets/units.py): every unit a registered kind's set counts in has its row,
so that the reports print its bound without knowing the kind; the texts of each row."""

from __future__ import annotations

import sparsemodel as sm
from sparsemodel.sets.registry import KINDS
from sparsemodel.sets.units import UNITS, count_text, k_header, k_text, written_bound


def test_every_kind_counts_in_a_unit_with_its_words():
    """A set whose unit has no row would print ``k = 1 <plural>`` and ``k (<unit>)`` by accident:
    each thresholded set of every kind's example (each part of a product) names a known unit."""
    for name, kind in sorted(KINDS.items()):
        s = sm.Problem.of(kind.example()).lower().set
        if s is None or not s.thresholds:
            continue
        parts = getattr(s, "parts", [s])
        for p in parts:
            assert p.unit in UNITS, f"kind {name}: unit {p.unit!r} has no row in sets/units.UNITS"


def test_the_texts_of_each_unit():
    assert k_text(10, "coordinates") == "k = 10 coordinates" and k_text(1, "coordinates") == "k = 1 coordinate"
    assert k_text(5, "edges") == "k = 5 edges (10 entries)" and k_text(1, "edges") == "k = 1 edge (2 entries)"
    assert k_text(3, "groups") == "k = 3 groups" and k_text(1, "changes") == "k = 1 change"
    assert k_text(2, "rank") == "r = 2" and k_text(None, "rank") == "no bound" and k_text(4, "") == "k = 4"
    assert k_header("rank") == "r (rank)" and k_header("edges") == "k (edges)" and k_header("") == "k"
    assert count_text(2, "entries") == "2 entries" and count_text(1, "entries") == "1 entry"
    assert written_bound("k", "edges") == "2 * k" and written_bound("s", "coordinates") == "s"
