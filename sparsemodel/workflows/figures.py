"""One plot for every report: a panel per metric, a line per solver against the swept value (k,
or a parameter of the study such as n), with standard-error bars when the points are means over
replications. ``compare``, ``path``, ``select`` and ``experiment`` draw through it."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .metrics import METRICS

LABELS = {
    "objective": ("objective", "f(x)"),
    "lower_bound": ("lower bound", "a lower bound on the best f"),
    "gap": ("optimality gap", "(f - lower bound) / max(|f|, 1)"),
    "time_s": ("time", "seconds"),
    "test_loss": ("held-out loss", "mean loss per held-out sample"),
    "accuracy": ("held-out accuracy", "share of rows classified right"),
    "auc": ("held-out AUC", "area under the ROC curve"),
    "brier": ("held-out Brier score", "mean squared error of the probabilities"),
    "df": ("degrees of freedom", "df"),
    "nnz": ("nonzeros", "nnz"),
    "k": ("chosen k", "k"),
    "error": ("estimation error", "||x - x_true||"),
    "lower_s": ("lowering", "seconds"),
}


def label(metric: str) -> tuple[str, str]:
    """(panel title, y label) of a metric."""
    if metric in LABELS:
        return LABELS[metric]
    if metric in METRICS:
        return metric.replace("_", " "), metric
    return metric, metric


def new_figure(panels: int, width: float = 5.5, height: float = 4.2) -> tuple[Any, list[Any]]:
    """A matplotlib Figure on the Agg canvas (pyplot's global backend untouched) with ``panels`` axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * panels, height))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, panels)
    return fig, list(np.atleast_1d(axes))


def png_bytes(fig: Any) -> bytes:
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return buf.getvalue()


# series: {line label: {metric: (xs, means, standard errors or None)}}
Series = dict[str, dict[str, tuple[list[Any], list[float], list[float] | None]]]


def metric_figure(
    series: Series,
    metrics: Sequence[str],
    xlabel: str,
    title: str,
    categorical: bool = False,
    mark: tuple[Any, str] | None = None,
    xticks: list[str] | None = None,
) -> Any:
    """A matplotlib Figure (Agg canvas; pyplot untouched): one panel per metric, one line (or, for
    ``categorical`` x such as the solvers themselves, one point) per series, error bars where
    given. Failed points are NaN (gaps, never bridged). A panel's y axis is logarithmic when its
    values are positive and span more than a decade (a time, an objective over k); ``mark`` =
    (x, text) draws a vertical line (the chosen k); ``xticks`` labels the points 0, 1, ... (several
    bounds by name, one tick per point)."""
    fig, axes = new_figure(len(metrics), width=5.5 if len(metrics) > 1 else 6.5)
    for ax, m in zip(axes, metrics):
        values: list[float] = []
        for j, (name, per) in enumerate(series.items()):
            if m not in per:
                continue
            xs, ys, es = per[m]
            ys = [math.nan if y is None else float(y) for y in ys]
            if not any(math.isfinite(y) for y in ys):
                continue
            values += [y for y in ys if math.isfinite(y)]
            errs = None if es is None else [0.0 if (e is None or not math.isfinite(e)) else float(e) for e in es]
            if categorical:
                xs = [j]
            # errorbar for every line (bars or not): one kind of artist keeps the legend in series order
            has = errs is not None and any(e > 0 for e in errs)
            ax.errorbar(
                xs, ys, yerr=errs if has else None, marker="o", capsize=3, label=name, ls="" if categorical else "-"
            )
        if values and min(values) > 0 and max(values) / min(values) > 10:
            ax.set_yscale("log")
        t, yl = label(m)
        ax.set_title(t)
        ax.set_ylabel(yl)
        if categorical:
            ax.set_xticks(range(len(series)))
            ax.set_xticklabels(list(series), rotation=30, ha="right")
        else:
            ax.set_xlabel(xlabel)
            if xticks is not None:
                ax.set_xticks(range(len(xticks)), xticks, rotation=30, fontsize="small")
        if mark is not None and not categorical:
            ax.axvline(mark[0], color="tab:red", alpha=0.5, ls="--", label=mark[1])
        ax.grid(True, alpha=0.3)
        if ax.lines or ax.collections:
            ax.legend(fontsize="small")
    fig.suptitle(title)
    return fig


__all__ = ["LABELS", "label", "metric_figure", "new_figure", "png_bytes"]
