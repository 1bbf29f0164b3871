"""One thread count for every contender of a benchmark (ours, scikit-learn, abess, ...).

threadpoolctl limits only the thread pools that are loaded when the limit is entered; a library
imported later (scikit-learn's OpenMP runtime, abess's) would run with its default count, and the
benchmark would compare one thread against several. So :func:`pinned` imports the competitors'
compiled parts first, then limits every pool. (JAX, under skscope, has its own thread pool, which
threadpoolctl does not see; its time is reported as a user sees it.)
"""

from __future__ import annotations

import importlib
from typing import Any

from threadpoolctl import threadpool_limits

COMPETITORS = ("sklearn.linear_model", "sklearn.covariance", "abess")


def pinned(threads: int | None = 1) -> Any:
    """``with pinned(1): ...`` -- every BLAS/OpenMP pool of this process (competitors included) at
    ``threads`` (None: the libraries' defaults, nothing limited)."""
    for name in COMPETITORS:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    return threadpool_limits(limits=threads)


__all__ = ["pinned"]
