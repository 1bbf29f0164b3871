"""The knockoff filter and stability selection as methods of a study: ``sm.experiment(problem,
["grahtp", Knockoffs(fdr=0.1), Stability()], data=draw, reps=50)`` and ``sparsemodel compare MODEL
--solvers grahtp,knockoffs,stability --truth w=w.npy``. Each replication runs the method on its
training model (its own seed), the row's point is the model refitted on the selected units, and a
truth gives the row's ``fdr`` and ``power`` (:mod:`sparsemodel.workflows.metrics`): their means
over replications are the FDR and the power of the papers' tables."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ModelError
from ..lowering.lowered import LoweredProblem
from ..model.problem import Model
from ..workflows.experiment import Selector
from .base import InferenceError


@dataclass
class Knockoffs(Selector):
    """The knockoff filter at ``fdr`` (keywords: those of :meth:`sparsemodel.problem.Problem.knockoffs`)."""

    name: str = "knockoffs"
    fdr: float = 0.1
    options: dict[str, Any] = field(default_factory=dict)

    def select(self, problem: Model, lp: LoweredProblem, seed: int) -> tuple[np.ndarray, dict[str, Any]]:
        from .knockoffs import knockoffs

        res = knockoffs(problem, fdr=self.fdr, seed=seed, **self.options)
        units = _set_units(lp, res.unit_rows[res.selected], res.shape)
        return units, {"message": f"{len(units)} selected at FDR {self.fdr:g}"}


@dataclass
class Stability(Selector):
    """Stability selection at ``threshold`` (keywords: those of :meth:`sparsemodel.problem.Problem.stability`)."""

    name: str = "stability"
    threshold: float = 0.6
    options: dict[str, Any] = field(default_factory=dict)

    def select(self, problem: Model, lp: LoweredProblem, seed: int) -> tuple[np.ndarray, dict[str, Any]]:
        from .stability import stability

        res = stability(problem, threshold=self.threshold, seed=seed, **self.options)
        return res.selected, {"message": f"{len(res.selected)} selected, E[V] <= {res.bound:.3g}"}


def _set_units(lp: LoweredProblem, rows: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The units of ``lp``'s set holding the given rows of the constrained variable (a vector's
    coordinates, a matrix's rows)."""
    s = lp.set
    c = s.constraint
    width = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    local = np.asarray(c.coords)
    hit = np.isin(local // width, np.asarray(rows, dtype=np.int64))
    if s.unit_of is None:
        return np.flatnonzero(hit)
    return np.unique(s.unit_of[hit])


METHODS: dict[str, type[Selector]] = {"knockoffs": Knockoffs, "stability": Stability}
LEVEL = {"knockoffs": "fdr", "stability": "threshold"}


def method(name: str, options: dict[str, Any] | None = None, seed: int | None = 0) -> Selector:
    """The selector named ``name`` (``knockoffs``, ``stability``) with its options (``fdr`` /
    ``threshold`` among them), as the command line's ``compare --solvers ...,knockoffs -o
    knockoffs:fdr=0.2`` builds it."""
    if name not in METHODS:
        raise InferenceError(f"{name!r} is not an inference method", hint=f"methods: {', '.join(METHODS)}")
    opts = dict(options or {})
    level = LEVEL[name]
    kw: dict[str, Any] = {"seed": seed}
    if level in opts:
        kw[level] = opts.pop(level)
    try:
        return METHODS[name](options=opts, **kw)
    except (TypeError, ModelError) as exc:  # pragma: no cover - the dataclass takes these keywords
        raise InferenceError(f"{name}: {exc}") from None


__all__ = ["LEVEL", "METHODS", "Knockoffs", "Stability", "method"]
