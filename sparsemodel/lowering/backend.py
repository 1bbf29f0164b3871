"""What a restricted-solve back-end is asked and returns, and the pieces the coordinate back-ends share.

A back-end is a function ``solve(lp, sub, req) -> Solved`` of the lowered problem's data
(:class:`~sparsemodel.lowering.data.LoweredData`), the subspace to minimize over (what the set's
``subspace(state)`` gave) and the caller's :class:`Request`; :data:`sparsemodel.lowering.restricted.BACKENDS`
is the one table that reaches them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ..numerics.smooth import lbfgs
from .data import LoweredData
from .guards import inside_domain


@dataclass(slots=True)
class Request:
    """What the caller of ``restricted_minimize`` asked: the start, a ridge rho/2 ||x_{C[R]}||^2
    (``(rho, R)``, R positions into the set's coordinates), the method (already checked), the
    tolerance, the value below which a Newton solve may give up, and an earlier Newton solve's
    Hessian (``hint``)."""

    x0: np.ndarray | None
    ridge: tuple[float, np.ndarray] | None
    method: str
    tol: float
    give_up: float | None
    hint: Any


class Solved(NamedTuple):
    """A back-end's answer: x (the full flat vector), f (None when the back-end did not compute
    it), the iterations, whether it converged, the method that ran, the ridge's part of f, and for
    a Newton solve each design term's loss derivative at x and (columns, last Hessian,
    curvatures), the next solve's ``hint``."""

    x: np.ndarray
    f: float | None
    iterations: int
    converged: bool
    method: str
    ridge_part: float = 0.0
    d1: list[np.ndarray] | None = None
    hessian: Any = None


def ridge_vector(lp: LoweredData, ridge: tuple[float, np.ndarray] | None, cols: np.ndarray) -> np.ndarray | None:
    """The ridge's weight on each of ``cols`` (rho on the coordinates C[R] of the set, 0 elsewhere),
    or None when it weighs none of them."""
    if ridge is None or not ridge[0] > 0:
        return None
    rho, R = ridge
    rmask = np.zeros(lp.n)
    rmask[lp.set.coords[np.asarray(R, dtype=np.int64)]] = rho
    r = rmask[cols]
    return r if r.any() else None


def ridge_part(r: np.ndarray | None, u: np.ndarray) -> float:
    """rho/2 ||u||^2 on the ridge's coordinates (0 without a ridge)."""
    return 0.5 * float(np.sum(r * u * u)) if r is not None else 0.0


def coordinate_objective(
    lp: LoweredData, cols: np.ndarray, r: np.ndarray | None, base: np.ndarray | None = None
) -> tuple[Any, list[int]]:
    """u -> (f, gradient) of f on the coordinates ``cols`` (plus the ridge r), every other coordinate
    at ``base`` (zero by default); (inf, 0) outside the loss's domain. Returns the function and its
    call counter (what the caller charges to the oracle)."""
    x = np.zeros(lp.n)
    x0 = base if base is not None else x.copy()
    ev = lp.ev
    calls = [0]

    def fun(u: np.ndarray) -> tuple[float, np.ndarray]:
        calls[0] += 1
        x[:] = x0
        x[cols] = u
        f, g = ev.value_and_grad(x, coords=cols)
        gu = g[cols]
        if r is not None:
            f += 0.5 * float(np.sum(r * u * u))
            gu = gu + r * u
        if not np.isfinite(f):
            return np.inf, np.zeros_like(u)
        return f, gu

    return fun, calls


def coordinate_lbfgs(
    lp: LoweredData,
    cols: np.ndarray,
    u0: np.ndarray,
    r: np.ndarray | None,
    tol: float,
    bounds: tuple[np.ndarray, np.ndarray] | None = None,
    base: np.ndarray | None = None,
) -> tuple[np.ndarray, int, bool, float]:
    """L-BFGS(-B) on the coordinates ``cols`` of f (plus the ridge r), every other coordinate at
    ``base`` (zero by default); a start outside the loss's domain is moved inside it first.
    (u, iterations, converged, f)."""
    fun, calls = coordinate_objective(lp, cols, r, base)
    if not np.isfinite(fun(u0)[0]):  # the start lies outside the loss's domain
        xs = base.copy() if base is not None else np.zeros(lp.n)
        xs[cols] = u0
        u0 = inside_domain(lp, xs)[cols]
    u, its, ok, f = lbfgs(fun, u0, tol=tol, bounds=bounds)
    lp.oracle.charge(grads=calls[0], ifo=lp.n_samples * calls[0])
    return u, its, ok, f


def subspace_lbfgs(lp: LoweredData, sub: Any, u0: np.ndarray, tol: float, value_and_grad: Any) -> Solved:
    """L-BFGS on u -> f(embed(u)) with the gradient restrict(grad f): the solve over any subspace
    given by ``embed`` and ``restrict`` when the objective has no composite form to reduce."""
    calls = [0]

    def fun(u: np.ndarray) -> tuple[float, np.ndarray]:
        calls[0] += 1
        f, g = value_and_grad(sub.embed(u))
        if not np.isfinite(f):
            return np.inf, np.zeros_like(u)
        return f, sub.restrict(g)

    u, its, ok, f = lbfgs(fun, u0, tol=tol)
    lp.oracle.charge(grads=calls[0], ifo=lp.n_samples * calls[0])
    return Solved(sub.embed(u), f, its, ok, "lbfgs")
