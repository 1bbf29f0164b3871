"""How a result shows what its set selected: each set's ``view`` (a :class:`View`), which
``finish`` puts on the :class:`~sparsemodel.solvers.result.Result`, so that the summaries, the
coefficient table, the JSON and the CSV cells read the set's facts and never ask which kind made
the result.

A view says

* ``lines(r, max_items)``: the selection lines of ``Result.summary()`` (label, text): the selected
  coordinates by name, the kept groups, the edges of a symmetric matrix, the rank and singular
  values of a rank bound; ``block_text`` the same for one part of several bounds;
* ``dense``: the bounded variable is a dense matrix (a rank bound), so no coefficient rows and no
  support cells are listed for it;
* ``free_first``: nonzero coordinates outside the support (an intercept w[0] of ``nnz(w[1:])``)
  lead the coefficient table;
* ``hidden()``: the variables the coefficient table leaves out (the dense parts of several bounds).

Views hold no data of a run (a result reads its own fields), so one view serves every result of
its set.
"""

from __future__ import annotations

from typing import Any


def fmt_list(items: list[str], max_items: int) -> str:
    """``a, b, c``, or the first and last ones with the count when there are more than ``max_items``."""
    if len(items) <= max_items:
        return ", ".join(items)
    head = ", ".join(items[: max_items - 3])
    return f"{head}, ..., {', '.join(items[-2:])} ({len(items)} in all)"


class View:
    """The selected coordinates by name (the default: a set that selects coordinates, or none)."""

    label = "selected"  # the word of a part's line among several bounds
    dense = False
    free_first = False

    def __init__(self, free_first: bool = False):
        self.free_first = free_first

    def lines(self, r: Any, max_items: int) -> list[tuple[str, str]]:
        names = r.support_names
        return [
            ("selected", f"{len(names)}: {fmt_list(names, max_items)}" if names else "0 (only the free coordinates)")
        ]

    def block_text(self, r: Any, b: dict[str, Any], max_items: int) -> str:
        """One part of several bounds (``b``: its entry of ``Result.blocks``)."""
        names = [r.label(int(i), b["variable"]) for i in b["support"]]
        if not names:
            return f"none ({b['k_text']})"
        return f"{len(names)} {self.label} ({b['k_text']}): {fmt_list(names, max_items)}"

    def hidden(self) -> set[str]:
        return set()


class GroupView(View):
    """Group sparsity: the kept groups by name, then the coordinates they hold."""

    def lines(self, r: Any, max_items: int) -> list[tuple[str, str]]:
        names = r.support_names
        return [
            ("groups", f"{len(r.groups)} kept: {fmt_list(r.groups, max_items)}"),
            ("selected", f"{len(names)} coordinates: {fmt_list(names, max_items)}"),
        ]


class EdgeView(View):
    """The off-diagonal of a symmetric matrix in pairs: each edge once, by the name of its upper entry."""

    def lines(self, r: Any, max_items: int) -> list[tuple[str, str]]:
        if not r.symmetric:
            return super().lines(r, max_items)
        edges = [n for n, p in zip(r.support_names, r.support_positions) if len(p) == 2 and p[0] < p[1]]
        return [("edges", f"{len(edges)} (k = {r.k}): {fmt_list(edges, max_items)}" if edges else "none")]


class ChangeView(View):
    """Fused sparsity: the positions where the value changes."""

    label = "changepoints"


class RankView(View):
    """A rank bound: the rank and the singular values; the matrix is dense (no coefficient rows)."""

    dense = True

    def lines(self, r: Any, max_items: int) -> list[tuple[str, str]]:
        sv = [float(v) for v in r.extra.get("singular_values", [])]
        rank = r.extra.get("rank", len([v for v in sv if v > 0]))
        shown = ", ".join(f"{v:.6g}" for v in sv[: min(rank, max_items)])
        return [("rank", f"{rank} of at most {r.k}; singular values {shown or '(none)'}")]

    def block_text(self, r: Any, b: dict[str, Any], max_items: int) -> str:
        sv = [float(v) for v in b.get("singular_values", [])]
        shown = ", ".join(f"{v:.6g}" for v in sv[: min(b.get("rank", 0), max_items)])
        return f"rank {b.get('rank')} of at most {b['k']}; singular values {shown or '(none)'}"


class ProductView(View):
    """Several bounded variables: one line per part, each shown by its own set's view."""

    def __init__(self, parts: dict[str, View], variables: dict[str, str]):
        super().__init__()
        self.parts = parts  # by part name (the keys of Result.blocks)
        self.variables = variables  # part name -> its variable's name

    def lines(self, r: Any, max_items: int) -> list[tuple[str, str]]:
        return [(name, self.parts[name].block_text(r, b, max_items)) for name, b in r.blocks.items()]

    def hidden(self) -> set[str]:
        return {self.variables[n] for n, v in self.parts.items() if v.dense}
