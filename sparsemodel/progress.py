"""Progress bars (tqdm): one helper for every long run, the same rule everywhere.

``progress`` (``Problem.solve/compare/path/select(progress=...)``; the CLI's ``--progress`` and
``--quiet``) is

* ``None`` (the default): a bar only where someone watches it: on a terminal (standard error is a
  TTY) or in a Jupyter notebook; never in a pipe, a log file, a test or a batch job;
* ``True``: always (``--progress``: also when standard error is redirected);
* ``False``: never (``--quiet``).

In a notebook the bar is tqdm's notebook widget (``tqdm.notebook``, with ipywidgets installed;
plain text on standard error otherwise). :class:`SolveProgress` is the bar of one solve: every
solver's ``History.log`` (once per iteration) updates it; it appears only after half a second, so
short solves print nothing.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any


def data_passes() -> int:
    """Passes made over chunked (dask) data in this process so far (0 without dask data)."""
    mod = sys.modules.get("sparsemodel.objective.chunked")
    return int(mod.TOTAL_PASSES[0]) if mod is not None else 0


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (an IPython shell that sends its output to a
    notebook front end)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # pragma: no cover - an IPython without a shell
        return False
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def _on_terminal() -> bool:
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):
        return False


def wanted(progress: bool | None) -> bool:
    """Whether a bar is shown: ``progress`` True or False, or None for a terminal or a notebook."""
    if progress is None:
        return in_notebook() or _on_terminal()
    return bool(progress)


def progress_bar(
    iterable: Any = None,
    total: int | None = None,
    desc: str = "",
    unit: str = "it",
    progress: bool | None = None,
    delay: float = 0.0,
    leave: bool = True,
) -> Any:
    """A tqdm bar over ``iterable`` (or updated by hand up to ``total``), disabled when
    :func:`wanted` says no: the notebook widget in Jupyter, text on standard error elsewhere."""
    show = wanted(progress)
    if show and in_notebook() and importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.notebook import tqdm as bar_class

        return bar_class(iterable, total=total, desc=desc, unit=unit, delay=delay, leave=leave)
    from tqdm.std import tqdm as text_bar

    return text_bar(
        iterable, total=total, desc=desc, unit=unit, delay=delay, leave=leave, file=sys.stderr, disable=not show
    )


class SolveProgress:
    """The bar of one solve: ``name  it/total  f=...  passes=...``."""

    def __init__(self, name: str, total: int | None = None, enabled: bool | None = None):
        self.bar = progress_bar(None, total=total, desc=name, unit="it", progress=enabled, delay=0.5, leave=False)
        self.p0 = data_passes()

    def __call__(self, iteration: int, f: float, **extra: float) -> None:
        """One iteration's line; a certifying run (bnb) also passes ``bound`` and ``gap``."""
        if self.bar.disable:
            return
        if self.bar.total is not None and iteration > self.bar.total:
            self.bar.total = iteration
        self.bar.update(iteration - self.bar.n)
        post: dict[str, Any] = {"f": f"{f:.6g}"}
        for key in ("bound", "gap"):
            if key in extra:
                post[key] = f"{extra[key]:.4g}"
        passes = data_passes() - self.p0
        if passes:
            post["passes"] = passes
        self.bar.set_postfix(post, refresh=False)

    def close(self) -> None:
        self.bar.close()


__all__ = ["SolveProgress", "data_passes", "in_notebook", "progress_bar", "wanted"]
