"""A progress bar for long solves: iterations, objective and passes over chunked data (tqdm).

``Problem.solve(..., progress=True)`` (the CLI's default; ``--quiet`` turns it off) attaches a
:class:`SolveProgress` to the lowered problem; every solver's ``History.log`` (once per iteration)
updates it. The bar appears only on a terminal and only after half a second, so short solves and
redirected output (tests, pipes) print nothing.
"""

from __future__ import annotations

import sys
from typing import Any


def data_passes() -> int:
    """Passes made over chunked (dask) data in this process so far (0 without dask data)."""
    mod = sys.modules.get("sparsemodel.compile.chunked")
    return int(mod.TOTAL_PASSES[0]) if mod is not None else 0


class SolveProgress:
    """The bar of one solve: ``name  it/total  f=...  passes=...``."""

    def __init__(self, name: str, total: int | None = None, enabled: bool = True):
        from tqdm.auto import tqdm

        self.bar = tqdm(
            total=total,
            desc=name,
            unit="it",
            disable=None if enabled else True,
            delay=0.5,
            leave=False,
            file=sys.stderr,
        )
        self.p0 = data_passes()

    def __call__(self, iteration: int, f: float) -> None:
        if self.bar.disable:
            return
        if self.bar.total is not None and iteration > self.bar.total:
            self.bar.total = iteration
        self.bar.update(iteration - self.bar.n)
        post: dict[str, Any] = {"f": f"{f:.6g}"}
        passes = data_passes() - self.p0
        if passes:
            post["passes"] = passes
        self.bar.set_postfix(post, refresh=False)

    def close(self) -> None:
        self.bar.close()


__all__ = ["SolveProgress", "data_passes"]
