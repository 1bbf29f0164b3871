"""Summaries of results: the text ``sparsemodel solve`` prints and the HTML a notebook shows.

Both read the same pieces of a :class:`~sparsemodel.solvers.result.Result`: the bound with its unit,
the selection in the words of its set's view (coordinates, groups, edges by name, or the rank and
the singular values of a rank bound), the certificate where it means something, and the
coefficient table. :class:`ResultText` is the part of ``Result`` that shows it (``summary()``,
the notebook's HTML): ``Result`` inherits it, so this module needs nothing of ``result.py``.
"""

from __future__ import annotations

import html
import math
from typing import Any

MAX_ROWS = 30  # coefficient rows printed before "... N more"


class ResultText:
    """How a :class:`~sparsemodel.solvers.result.Result` shows itself (``Result`` inherits this):
    the text of :func:`format_result` and the notebook's HTML, read from the Result's fields."""

    def summary(self, max_support: int = 30) -> str:
        """The text ``sparsemodel solve`` prints (at most ``max_support`` names per selection line)."""
        return format_result(self, max_support=max_support)

    def _repr_html_(self) -> str:
        return result_html(self)


def bound_line(r: ResultText) -> str:
    """``nnz(w[1:]) <= 10: k = 10 coordinates``."""
    if r.k is None:
        return "(no sparsity or rank bound)"
    if r.blocks:  # several bounds: each with its unit
        return "; ".join(f"{b['bound']}: {b['k_text']}" for b in r.blocks.values())
    return f"{r.bound}: {r.k_text}" if r.bound else r.k_text


def selection_lines(r: ResultText, max_items: int = 30) -> list[tuple[str, str]]:
    """What the solution selected, as (label, text) lines, in the words of its set's view
    (:mod:`sparsemodel.sets.views`): the rank and singular values of a rank bound, the edges of a
    symmetric matrix, the kept groups, the selected coordinates otherwise (by name); with several
    bounds, one line per part."""
    return r.view.lines(r, max_items)


def gap_line(r: ResultText) -> str:
    """``1.2e-05 (lower bound 12.7826 from the tight bound: perspective relaxation (...))``, or
    ``none: <why>``: what the lower bound says of the answer (docs/certify.md)."""
    if r.gap is None:
        return f"none: {r.bound_note}" if r.bound_note else "none"
    how = {"bnb": "bnb's proof", "fast": "the fast bound", "tight": "the tight bound"}.get(r.bound_how, r.bound_how)
    verdict = "  certified optimal" if r.gap <= 1e-6 else ""
    note = f": {r.bound_note}" if r.bound_note else ""
    if "maximum" in r.extra:  # maximize g is solved as minimize -g: the bound on -g caps the maximum
        return f"{r.gap:.3g}{verdict}  (upper bound {-r.lower_bound:.10g} on the maximum from {how}{note})"
    return f"{r.gap:.3g}{verdict}  (lower bound {r.lower_bound:.10g} from {how}{note})"


def certificate_line(r: ResultText) -> str | None:
    """Paper 001's Definition 4 in the set's terms, or None where it says nothing (no step, a
    solver that does not threshold, values that are not finite)."""
    c = r.certificate
    if not c or "verdict" not in c:
        return None
    nums = [v for v in c.values() if isinstance(v, float)]
    if not all(math.isfinite(v) for v in nums):
        return None
    g = c.get("gamma", float("nan"))
    detail = c.get("detail", "")  # the set says what its numbers are
    return f"{c['verdict']} for gamma = {g:.4g} ({detail}; {c.get('definition', '')})"


def coefficient_rows(r: ResultText, max_rows: int = MAX_ROWS) -> tuple[list[tuple[str, str]], int]:
    """(name, value) rows of the coefficient table (at most ``max_rows``) and how many were left
    out. A rank bound gives none: its matrix is dense (``Result.to_frame(all=True)``)."""
    if r.view.dense:
        return [], 0
    rows = r.coefficients()
    shown = [(row["name"], f"{row['value']:.6g}") for row in rows[:max_rows]]
    return shown, max(0, len(rows) - max_rows)


def objective_text(r: ResultText) -> str:
    """The objective as the user wrote it: a maximized model shows its maximum f (solved as
    minimize -f, whose value ``Result.objective`` holds)."""
    if "maximum" in r.extra:
        return f"{r.extra['maximum']:.10g} (maximum; Result.objective = -f = {r.objective:.10g})"
    return f"{r.objective:.10g}"


def format_result(r: ResultText, max_support: int = 30) -> str:
    lines = [
        f"solver      {r.solver}",
        f"status      {r.status}" + (f"  ({r.message})" if r.message else ""),
        f"objective   {objective_text(r)}",
        f"gap         {gap_line(r)}",
        f"variable    {r.variable}  shape {tuple(r.shape)}",
        f"bound       {bound_line(r)}",
    ]
    if r.k is not None:
        lines += [f"{label:<11} {text}" for label, text in selection_lines(r, max_support)]
    lines += [f"iterations  {r.iterations}", f"time        {r.time_s:.4g} s"]
    cert = certificate_line(r)
    if cert is not None:
        lines.append(f"certificate {cert}")
    rows, more = coefficient_rows(r)
    if rows:
        width = max(len(n) for n, _ in rows)
        lines.append("coefficients")
        lines += [f"  {n:<{width}}  {v:>12}" for n, v in rows]
        if more:
            lines.append(f"  ... {more} more (all of them: --json, --csv FILE or Result.to_frame())")
    elif r.view.dense:
        shape = " x ".join(map(str, r.shape))
        lines.append(
            f"coefficients {r.variable} is a dense {shape} matrix of rank {r.extra.get('rank')} (--json or Result.to_frame(all=True))"
        )
    lines += component_lines(r)
    lines += near_optimal_lines(r)
    details = [
        (k, v)
        for k, v in r.extra.items()
        if isinstance(v, (int, float, str)) and k not in ("rank", "maximum", "bound_s", "top_gap", "top_proved")
    ]
    if details:
        lines.append(
            "details     " + ", ".join(f"{k} {v:.6g}" if isinstance(v, float) else f"{k} {v}" for k, v in details)
        )
    return "\n".join(lines)


def near_optimal_lines(r: ResultText, shown: int = 10) -> list[str]:
    """bnb's m best supports (``-o top=m``): each with its objective, and each unit's share among
    them (a unit in the best support and in none of the next is a firmer finding than one that
    swaps in and out)."""
    tops = r.extra.get("top_supports")
    if not tops:
        return []
    proved = "proved: no other support is better than the last" if r.extra.get("top_proved") else "not proved"
    lines = [f"top         {len(tops)} best supports ({proved}; gap {r.extra.get('top_gap', float('nan')):.3g})"]
    for j, e in enumerate(tops[:shown]):
        names = ", ".join(e.get("names", map(str, e["units"])))
        lines.append(f"  #{j + 1:<3} {e['objective']:.10g}  {names}")
    if len(tops) > shown:
        lines.append(f"  ... {len(tops) - shown} more (--json)")
    shares = sorted(r.extra.get("top_shares", {}).items(), key=lambda kv: (-kv[1], kv[0]))
    lines.append(
        "shares      " + ", ".join(f"{n} {s:.2g}" for n, s in shares[:20]) + (" ..." if len(shares) > 20 else "")
    )
    return lines


def component_lines(r: ResultText) -> list[str]:
    """Sparse PCA with several components: each one's variance w'Sw, its adjusted variance (Zou,
    Hastie & Tibshirani 2006) and support, and the share of the total variance they explain."""
    comps = r.extra.get("components")
    if not comps:
        return []
    own, adj = r.extra["component_variance"], r.extra["adjusted_variance"]
    lines = [
        f"components  {len(comps)}: adjusted variance {r.extra['adjusted_total']:.6g} "
        f"({100 * r.extra['variance_share']:.2f}% of the total {r.extra['total_variance']:.6g})"
    ]
    for j, w in enumerate(comps):
        nz = [i for i, v in enumerate(w) if v != 0]
        shown = ", ".join(map(str, nz[:12])) + (", ..." if len(nz) > 12 else "")
        lines.append(f"  #{j + 1}  variance {own[j]:.6g}  adjusted {adj[j]:.6g}  nonzero at [{shown}]")
    return lines


# ---------------------------------------------------------------------- HTML (notebooks)


def html_table(headers: list[str], rows: list[list[Any]], caption: str | None = None) -> str:
    """A plain HTML table (escaped), as notebooks render DataFrames."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def result_html(r: ResultText) -> str:
    info = [
        ["solver", r.solver],
        ["status", r.status + (f" ({r.message})" if r.message else "")],
        ["objective", objective_text(r)],
        ["gap", gap_line(r)],
        ["variable", f"{r.variable}, shape {tuple(r.shape)}"],
        ["bound", bound_line(r)],
    ]
    if r.k is not None:
        info += [[label, text] for label, text in selection_lines(r)]
    comps = component_lines(r)
    if comps:
        info.append(["components", "; ".join(line.strip() for line in comps)])
    info += [["iterations", r.iterations], ["time", f"{r.time_s:.4g} s"]]
    cert = certificate_line(r)
    if cert is not None:
        info.append(["certificate", cert])
    parts = [html_table(["", ""], info, "sparsemodel result")]
    rows, more = coefficient_rows(r, max_rows=200)
    if rows:
        parts.append(html_table(["name", "value"], [list(x) for x in rows], "coefficients"))
        if more:
            parts.append(f"<p>... {more} more: Result.to_frame()</p>")
    return "<div>" + "".join(parts) + "</div>"
