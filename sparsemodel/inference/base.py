"""What the inference layer shares: its error, and the one loop over independent replicates
(knockoff draws, stability selection's half-samples) -- serial, or on joblib (or dask) workers with
the same answer seed for seed, through the workflows' runner."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from ..errors import ModelError
from ..workflows.runner import check_jobs as run_check_jobs
from ..workflows.runner import run_tasks


class InferenceError(ModelError):
    kind = "inference error"


def check_jobs(n_jobs: Any) -> int:
    """``n_jobs``: 1 (serial, the default), a number of workers, or -1 (one per core)."""
    return run_check_jobs(n_jobs, InferenceError)


def replicates(fn: Callable[..., Any], jobs: Sequence[tuple[Any, ...]], n_jobs: int = 1) -> list[Any]:
    """``[fn(*args) for args in jobs]``, serially (``n_jobs=1``) or on workers: the workflows' one
    parallel map (:func:`sparsemodel.workflows.runner.run_tasks`). Each replicate is a function of
    its arguments alone (its seed or its rows), so the answer does not depend on where or in which
    order the replicates ran."""
    return run_tasks(partial(_star, fn), list(jobs), check_jobs(n_jobs))


def _star(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    return fn(*args)


def seeds(seed: int | None, count: int) -> list[int]:
    """``count`` independent integer seeds from one (each replicate's generator is seeded with
    its own, so a replicate gives the same draw wherever it runs)."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
        raise InferenceError(f"seed={seed!r} must be an integer (or None)")
    ss = np.random.SeedSequence(seed)
    return [int(c.generate_state(1, dtype=np.uint32)[0]) for c in ss.spawn(count)]


def check_level(name: str, value: Any, low: float = 0.0, high: float = 1.0) -> float:
    """A level in (low, high), e.g. the target FDR q or a selection threshold."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not low < float(value) < high:
        raise InferenceError(f"{name}={value!r} must be a number between {low:g} and {high:g} (exclusive)")
    return float(value)


__all__ = ["InferenceError", "check_jobs", "check_level", "replicates", "seeds"]
