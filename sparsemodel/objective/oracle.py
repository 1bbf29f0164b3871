"""The oracle: the objective's value, gradient and Hessian-vector products, and the counters.

One :class:`Oracle` per run (``fresh()`` gives a copy with zeroed counters that shares every
cache), so that two solvers on one lowered problem never share or reset each other's counts.
The counters follow paper 002, Definition 1:

* ``ifo`` -- incremental first-order oracle calls: samples whose (value, gradient) were computed.
  A full gradient of a finite sum over n samples counts n, a mini-batch gradient of s rows counts
  s, and the work of restricted solves counts n per Newton or L-BFGS iteration they report.
* ``ht`` -- hard thresholdings (calls of the projection onto the constraint set).
* ``grad_evals``, ``func_evals``, ``hvp_evals``, ``restricted_solves``.

Objective values computed only for logging (``peek``) are not counted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from .design import Design
from .evaluator import Evaluator, Layout


@dataclass
class Counters:
    func_evals: int = 0
    grad_evals: int = 0
    hvp_evals: int = 0
    ifo: int = 0
    ht: int = 0
    restricted_solves: int = 0
    eig_decomps: int = 0  # eigen-decompositions (the ADMM of precision-matrix restricted solves)
    newton_steps: int = 0  # barrier Newton steps of precision-matrix restricted solves under an active box

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)  # (the fields, in order: charge keeps them ints)


COUNTER_NAMES = tuple(f.name for f in fields(Counters))  # (read once: fields() costs more than the dict)


class Oracle:
    """Value, gradient and Hessian-vector products of the objective of a lowered problem."""

    def __init__(self, evaluator: Evaluator, design: Design | None, layout: Layout):
        self.ev = evaluator
        self.design = design
        self.layout = layout
        self.n = layout.n
        self.n_samples = design.n_samples if design is not None and design.n_samples else 1
        self.counters = Counters()

    def fresh(self) -> Oracle:
        o = Oracle.__new__(Oracle)
        o.__dict__.update(self.__dict__)
        o.counters = Counters()
        return o

    # ------------------------------------------------------------------ counting
    def charge(
        self,
        *,
        ifo: int = 0,
        grads: int = 0,
        funcs: int = 0,
        solves: int = 0,
        hvps: int = 0,
        eigs: int = 0,
        newton: int = 0,
    ) -> None:
        c = self.counters
        c.eig_decomps += int(eigs)
        c.newton_steps += int(newton)
        c.ifo += int(ifo)
        c.grad_evals += int(grads)
        c.func_evals += int(funcs)
        c.restricted_solves += int(solves)
        c.hvp_evals += int(hvps)

    def thresholded(self, times: int = 1) -> None:
        self.counters.ht += int(times)

    @property
    def ifo(self) -> int:
        return self.counters.ifo

    @property
    def ht(self) -> int:
        return self.counters.ht

    # ------------------------------------------------------------------ evaluation
    def _value(self, x: np.ndarray) -> float:
        return float(self.design.value(x)) if self.design is not None else float(self.ev.value(x))

    def f(self, x: np.ndarray) -> float:
        self.charge(funcs=1, ifo=self.n_samples)
        return self._value(x)

    def peek(self, x: np.ndarray) -> float:
        """The objective at x without counting it (for logging and reports)."""
        return self._value(x)

    def peek_grad(self, x: np.ndarray) -> np.ndarray:
        """The gradient at x without counting it: the scale of a step-size safeguard, estimated
        once per run like the curvature itself (whose Hessian products are not counted either)."""
        if self.design is not None:
            return self.design.value_and_grad(x)[1]
        return self.ev.value_and_grad(x)[1]

    def value_and_grad(self, x: np.ndarray, coords: np.ndarray | None = None) -> tuple[float, np.ndarray]:
        self.charge(grads=1, ifo=self.n_samples)
        if self.design is not None:
            return self.design.value_and_grad(x, coords=coords)
        return self.ev.value_and_grad(x, coords=coords)

    def grad(self, x: np.ndarray) -> np.ndarray:
        return self.value_and_grad(x)[1]

    def grad_batch(self, x: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Mini-batch gradient estimate from the sample rows ``rows`` (counts len(rows) IFO)."""
        self.charge(grads=1, ifo=len(rows))
        return self.design.grad_batch(x, rows)

    def hvp(self, x: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Hessian at x times v (exact for composite objectives, else by differences of gradients)."""
        self.charge(hvps=1, ifo=self.n_samples)
        if self.design is not None:
            return self.design.hvp(x, v)
        return self._fd_hvp(x)(v)

    def hessian_operator(self, x: np.ndarray | None = None, bound: bool = True) -> Callable[[np.ndarray], np.ndarray]:
        """v -> H v with H an upper bound of the Hessian over the whole domain when one is known
        (composite objectives whose phi'' is bounded) and ``bound`` is true, else the Hessian at x."""
        x = np.zeros(self.n) if x is None else x
        d = self.design
        if d is not None:
            use = bound and d.curvature_bound() is not None
            return lambda v: d.hvp(x, v, bound=use)
        return self._fd_hvp(x)

    def _fd_hvp(self, x: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        g0 = self.ev.value_and_grad(x)[1]
        scale = max(1.0, float(np.linalg.norm(x)))

        def hv(v: np.ndarray) -> np.ndarray:
            nv = float(np.linalg.norm(v))
            if nv == 0:
                return np.zeros(self.n)
            eps = 1e-6 * scale / nv
            g1 = self.ev.value_and_grad(x + eps * v)[1]
            if not np.all(np.isfinite(g1)):
                g1 = 2 * g0 - self.ev.value_and_grad(x - eps * v)[1]
            return (g1 - g0) / eps

        return hv

    def stats(self) -> dict[str, Any]:
        return self.counters.as_dict()


__all__ = ["Counters", "Oracle"]
