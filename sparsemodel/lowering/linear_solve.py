"""Restricted solves under linear constraints (``A @ w == b``, ``A @ w <= b``, with the box): min f
over the coordinates of a support with the constraints kept, by

* ``lstsq`` / ``newton`` (a composite objective with stored columns): sequential quadratic
  programming (:func:`sparsemodel.numerics.qp.constrained_newton`): each step the QP of the exact
  Newton model under the constraints by the active-set method, the KKT system of the working set
  (one KKT solve per step when there are only equalities); on least squares the first step is the
  answer;
* ``lbfgs`` (no composite form, or matrix-free columns): scipy's SLSQP on value and gradient;
* ``cvxpy``: the reference, the same problem with the constraints in cvxpy.

A support on which the constraints cannot hold gives f = +inf (not converged), so that a search
rejects it; the sets never hand such a support to a solver (sets/linear.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..numerics.qp import constrained_newton, dense_design, slsqp

if TYPE_CHECKING:
    from .lowered import LoweredProblem

SQP_DIM_LIMIT = 1500  # a restricted problem larger than this (or matrix free) goes to SLSQP


class LinearSolves:
    """The restricted solves and the start of a lowered problem with linear constraints."""

    def _linear_minimize(
        self: LoweredProblem,
        cols: np.ndarray,
        x0: np.ndarray | None,
        r: np.ndarray | None,
        method: str,
        tol: float,
    ) -> tuple[np.ndarray, float | None, int, bool, float]:
        """(x, f or None, iterations, converged, the ridge's part of f) of min f on ``cols``
        under the linear constraints and the box (every other coordinate at zero)."""
        P = self.linear.polyhedron(cols, self.box)
        u0 = x0[cols] if x0 is not None else None
        x = np.zeros(self.n)
        if method == "cvxpy":
            from .cvxpy_lower import restricted_cvxpy

            u, its = restricted_cvxpy(self.objective, self.layout, cols, r, bounds=(P.lo, P.hi), linear=P)
            self.oracle.charge(ifo=self.n_samples * its)
            x[cols] = np.clip(u, P.lo, P.hi)
            return x, None, its, True, _ridge_part(r, x[cols])
        if method in ("lstsq", "newton") and self.design is not None:
            rd = self.design.reduced(cols)
            if len(cols) <= SQP_DIM_LIMIT and dense_design(rd):
                res = constrained_newton(rd, u0, P, ridge=r, tol=tol)
                self.oracle.charge(grads=res.iterations + 1, ifo=self.n_samples * (res.iterations + 1))
                if res.u is None:
                    return x, np.inf, res.iterations, False, 0.0
                x[cols] = res.u
                return x, res.f, res.iterations, res.converged, _ridge_part(r, res.u)
        ev, calls = self.ev, [0]

        def fun(u: np.ndarray) -> tuple[float, np.ndarray]:
            calls[0] += 1
            y = np.zeros(self.n)
            y[cols] = u
            f, g = ev.value_and_grad(y, coords=cols)
            gu = g[cols]
            if r is not None:
                f += 0.5 * float(np.sum(r * u * u))
                gu = gu + r * u
            return (f, gu) if np.isfinite(f) else (np.inf, np.zeros_like(u))

        res = slsqp(fun, u0, P, tol=tol)
        self.oracle.charge(grads=calls[0], ifo=self.n_samples * calls[0])
        if res.u is None:
            return x, np.inf, res.iterations, False, 0.0
        x[cols] = res.u
        return x, None, res.iterations, res.converged, _ridge_part(r, res.u)

    def feasible_start(self: LoweredProblem, x: np.ndarray) -> np.ndarray:
        """A start the constraint set admits: x itself, or (under ``sum(w) == 1``, which excludes
        the zero start) the set's start from the gradient and the Hessian's diagonal at x
        (``start_point``: the minimizer of the diagonal Newton model under the constraints, made
        k-sparse), with the step 1 / mean diag of the Hessian where the diagonal is not known."""
        s = self.set
        if s is None or s.admits(x):
            return x
        _, g = self.value_and_grad(x)
        try:
            M = float(self.mean_curvature(x=x))
        except Exception:  # noqa: BLE001 - any failure of the estimate: the unit step
            M = 1.0
        step = 1.0 / M if np.isfinite(M) and M > 0 else 1.0
        try:
            h = self.hessian_diagonal(x)
        except Exception:  # noqa: BLE001 - the diagonal is an aid to the start: without it, the step
            h = None
        self.oracle.thresholded()
        return s.start_point(x, g, step, h)


def _ridge_part(r: Any, u: np.ndarray) -> float:
    return 0.5 * float(np.sum(r * u * u)) if r is not None else 0.0
