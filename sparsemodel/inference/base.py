"""What the inference layer shares: its error, and the one loop over independent replicates
(knockoff draws, stability selection's half-samples) -- serial, or on joblib workers with the same
answer seed for seed."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import ModelError


class InferenceError(ModelError):
    kind = "inference error"


def check_jobs(n_jobs: Any) -> int:
    """``n_jobs``: 1 (serial, the default), a number of workers, or -1 (one per core)."""
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral) or n_jobs == 0 or n_jobs < -1:
        raise InferenceError(
            f"n_jobs={n_jobs!r} is not a number of workers",
            hint="give 1 (serial), a number of workers, or -1 (all cores)",
        )
    return int(n_jobs)


def replicates(fn: Callable[..., Any], jobs: Sequence[tuple[Any, ...]], n_jobs: int = 1) -> list[Any]:
    """``[fn(*args) for args in jobs]``, serially (``n_jobs=1``) or on joblib's workers. Each
    replicate is a function of its arguments alone (its seed or its rows), so the answer does not
    depend on where or in which order the replicates ran."""
    n_jobs = check_jobs(n_jobs)
    if n_jobs == 1 or len(jobs) <= 1:
        return [fn(*args) for args in jobs]
    try:
        from joblib import Parallel, delayed
    except ImportError:  # pragma: no cover - joblib is a dependency
        raise InferenceError("n_jobs needs joblib", hint="pip install joblib, or give n_jobs=1") from None
    return list(Parallel(n_jobs=n_jobs)(delayed(fn)(*args) for args in jobs))


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
