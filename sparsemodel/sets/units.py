"""The words of the units a bound counts, and the texts every report prints a bound with.

A set names its unit (``ConstraintSet.unit``: ``coordinates``, ``groups``, ``edges``, ``rank``,
``changes``); ``Result.unit``, the tables of compare, path, select and the studies carry that word.
What each word means in a text (its singular, the letter of its bound, the entries a unit holds)
is one row of :data:`UNITS`, so that no report branches on the word itself: a new kind whose unit
is a new word adds its row here (:func:`register_unit`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Unit:
    """What a unit word means in a text: ``singular`` (``1 edge``), the ``letter`` of its bound
    (``k``; ``r`` for a rank), ``entries`` of the variable per unit (2: an edge is the pair O[i,j],
    O[j,i], so ``k = 5 edges (10 entries)``) and whether the bound counts units (``counted``; a
    rank is no count of things: ``r = 2``)."""

    singular: str
    letter: str = "k"
    entries: int = 1
    counted: bool = True


UNITS: dict[str, Unit] = {}


def register_unit(word: str, singular: str, letter: str = "k", entries: int = 1, counted: bool = True) -> None:
    """The words of a unit (see :class:`Unit`)."""
    UNITS[word] = Unit(singular, letter, entries, counted)


register_unit("coordinates", "coordinate")
register_unit("groups", "group")
register_unit("edges", "edge", entries=2)
register_unit("entries", "entry")
register_unit("changes", "change")
register_unit("rank", "rank", letter="r", counted=False)


def count_text(n: int, unit: str) -> str:
    """``3 coordinates``, ``1 edge``."""
    u = UNITS.get(unit)
    return f"{n} {u.singular if u is not None and n == 1 else unit}"


def k_text(k: Any, unit: str) -> str:
    """The bound with its unit, as every report prints it: ``k = 10 coordinates``, ``k = 3
    groups``, ``k = 5 edges (10 entries)`` (an edge of a symmetric matrix is the pair O[i,j],
    O[j,i]), ``r = 2`` (a rank bound)."""
    if k is None:
        return "no bound"
    if isinstance(k, Mapping):  # several bounds (a product of sets): each with its own unit
        units = getattr(k, "units", {})
        return "; ".join(f"{name}: {k_text(v, units.get(name, ''))}" for name, v in k.items())
    u = UNITS.get(unit)
    if u is not None and not u.counted:
        return f"{u.letter} = {k}"
    if u is not None and u.entries > 1:
        return f"k = {count_text(k, unit)} ({count_text(u.entries * k, 'entries')})"
    return f"k = {count_text(k, unit)}" if unit else f"k = {k}"


def k_header(unit: str) -> str:
    """The column of the bound in a table: ``k (coordinates)``, ``k (edges)``, ``r (rank)``."""
    u = UNITS.get(unit)
    return f"{u.letter if u is not None else 'k'} ({unit})" if unit else "k"


def bound_letter(unit: str) -> str:
    """The letter of a bound in this unit: ``k``, or ``r`` for a rank."""
    u = UNITS.get(unit)
    return u.letter if u is not None else "k"


def written_bound(name: str, unit: str) -> str:
    """The bound written with the param ``name`` so that the param is the bound in this unit:
    ``2 * k`` for edges (the written bound counts entries, two per edge), else ``k``."""
    u = UNITS.get(unit)
    return f"{u.entries} * {name}" if u is not None and u.entries > 1 else name
