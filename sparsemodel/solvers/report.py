"""Terminal summaries of results."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .base import Result


def _fmt_support(support: np.ndarray, max_items: int) -> str:
    s = [int(i) for i in support]
    if len(s) <= max_items:
        return "[" + ", ".join(map(str, s)) + "]"
    head = ", ".join(map(str, s[: max_items - 3]))
    return f"[{head}, ..., {', '.join(map(str, s[-2:]))}]"


def format_result(r: Result, max_support: int = 30) -> str:
    lines = [
        f"solver      {r.solver}",
        f"status      {r.status}" + (f"  ({r.message})" if r.message else ""),
        f"objective   {r.objective:.10g}",
        f"variable    {r.variable}  shape {tuple(r.shape)}" + (f"  k = {r.k}" if r.k is not None else ""),
        f"nonzeros    {len(r.support)}  support {_fmt_support(r.support, max_support)}",
        f"iterations  {r.iterations}",
        f"time        {r.time_s:.4g} s",
    ]
    c = r.certificate
    if c and "min_gain_kept" in c:  # the box form of Definition 4
        lines.append(
            f"certificate {c.get('verdict')} for gamma = {c.get('gamma', float('nan')):.4g} "
            f"(|projected grad| on support {c.get('projected_grad_on_support_inf', float('nan')):.2e}, "
            f"min gain kept {c.get('min_gain_kept', float('nan')):.4g} vs max gain off "
            f"{c.get('max_gain_off_support', float('nan')):.4g}; {c.get('definition', '')})"
        )
    elif c:
        lines.append(
            f"certificate {c.get('verdict')} for gamma = {c.get('gamma', float('nan')):.4g} "
            f"(|grad| on support {c.get('grad_on_support_inf', float('nan')):.2e}, "
            f"min |x| top-k {c.get('min_abs_top_s', float('nan')):.4g} vs gamma*max|grad| off "
            f"{c.get('gamma', 0) * c.get('max_abs_grad_off_support', 0):.4g}; {c.get('definition', '')})"
        )
    for k, v in r.extra.items():
        if isinstance(v, (int, float, str)):
            lines.append(f"{k:<11} {v:.10g}" if isinstance(v, float) else f"{k:<11} {v}")
    return "\n".join(lines)
