"""Convex relaxations built with cvxpy from the model: a penalty in place of the structural bound.

* ``l1`` -- the LASSO relaxation of ``nnz(x_C) <= k``:  min f(x) + lambda ||x_C||_1  (paper 003,
  eq. (1)); free coordinates are not penalized. A box (``w >= 0``) stays a constraint.
* ``nuclear`` -- the relaxation of ``rank(W) <= r``:  min f(x) + lambda ||W||_*  (the nuclear norm,
  the sum of singular values; Fazel 2002, Recht, Fazel & Parrilo 2010).
* ``tv`` -- the total-variation relaxation of ``nnz(diff(w)) <= k``: min f(x) + lambda sum_i
  |w_i - w_(i-1)| (Rudin, Osher & Fatemi 1992; the fused LASSO's fusion penalty, Tibshirani et al.
  2005);
* ``glasso`` -- the graphical LASSO (Friedman, Hastie & Tibshirani 2008) of
  ``nnz(offdiag(O)) <= 2k``: min f(O) + lambda sum_{i != j} |O_ij| over symmetric O (the diagonal
  not penalized, as scikit-learn's GraphicalLasso); an eigenvalue box, when given to it, stays as
  the semidefinite constraints alpha I <= O <= beta I.

* ``dspca`` -- DSPCA, the semidefinite relaxation of sparse PCA (d'Aspremont, El Ghaoui, Jordan &
  Lanckriet 2007, "A direct formulation for sparse PCA using semidefinite programming", SIAM
  Review 49(3)): max tr(S Z) - lambda 1'|Z|1 subject to tr(Z) = 1, Z positive semidefinite, of
  maximize w'Sw subject to norm(w) <= 1, nnz(w) <= k (:class:`DSPCARelaxation`; its answer is
  Z's leading eigenvector).

Each is built and compiled once with lambda as a ``cvxpy.Parameter`` (DPP), so a search over
lambda re-solves without recompiling. Solvers reach cvxpy only through this module.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ModelError, SolverError
from ..objective.evaluator import Layout
from ..sets.base import ConstraintSet
from ..sets.side import Box, EigBox
from .cvxpy_lower import box_constraints, lower_expr, solve_cvxpy

RELAXATIONS = ("l1", "nuclear", "glasso", "tv", "dspca")


def cvxpy_solver(solver: str) -> str | None:
    """cvxpy's name for the solver option (None: cvxpy chooses), refused when not installed."""
    import cvxpy as cp

    if solver != "auto" and solver.upper() not in cp.installed_solvers():
        raise SolverError(
            f"cvxpy solver {solver!r} is not installed",
            hint=f"installed cvxpy solvers: {', '.join(cp.installed_solvers())}, or 'auto'",
        )
    return None if solver == "auto" else solver.upper()


def solve_at(relax: Any, lam: float, var: Any, what: str) -> None:
    """One solve of a relaxation's parameterised cvxpy problem at lambda (``relax.lam``,
    ``relax.problem``, ``relax.solver``, counted in ``relax.solves``); a failure, or no value for
    ``var``, is a SolverError naming lambda."""
    relax.lam.value = lam
    relax.solves += 1
    try:
        solve_cvxpy(relax.problem, relax.solver)
    except ModelError as exc:
        raise SolverError(f"{what} at lambda = {lam:.6g} could not be solved: {exc.message}") from None
    if var.value is None:
        raise SolverError(f"{what} at lambda = {lam:.6g} returned no solution")


class Relaxation:
    """min f(x) + lambda * penalty(x) in cvxpy; ``solve(lam)`` returns the flat x."""

    def __init__(
        self,
        objective: Any,
        layout: Layout,
        cset: ConstraintSet,
        kind: str,
        solver: str = "auto",
        box: Box | None = None,
        eigbox: EigBox | None = None,
    ):
        import cvxpy as cp

        self.cp = cp
        self.solver = cvxpy_solver(solver)
        self.kind = kind
        self.u = cp.Variable(layout.n)
        self.lam = cp.Parameter(nonneg=True)
        what = {"l1": "LASSO", "nuclear": "nuclear-norm", "glasso": "graphical LASSO", "tv": "total-variation"}[kind]
        try:
            loss = lower_expr(objective, layout, self.u, np.arange(layout.n))
            if kind == "l1":
                if not cset.coordinate:
                    raise SolverError("the l1 relaxation needs an nnz(...) <= k constraint")
                pen = cp.norm1(self.u[cset.coords])
            elif kind == "nuclear":
                if cset.relaxation != "nuclear":
                    raise SolverError("the nuclear-norm relaxation needs a rank(W) <= r constraint")
                W = cp.reshape(self.u[cset.W], cset.shape, order="C")
                pen = cp.normNuc(W)
            elif kind == "glasso":
                if cset.relaxation != "glasso":
                    raise SolverError("the graphical LASSO needs nnz(offdiag(O)) <= 2 * k on a symmetric O")
                pen = cp.norm1(self.u[cset.coords])  # both (i, j) and (j, i): sum over i != j
            elif kind == "tv":
                if cset.relaxation != "tv":
                    raise SolverError("the total-variation relaxation needs nnz(diff(w)) <= k")
                pen = cp.norm1(cp.diff(self.u[cset.coords]))
            else:  # pragma: no cover - guarded by RELAXATIONS
                raise SolverError(f"unknown relaxation {kind!r}")
            cons = box_constraints(self.u, (box.lo, box.hi)) if box is not None else []
            if kind == "glasso":
                W = cp.reshape(self.u[cset.layout.coords(cset.variable)], (cset.variable.shape), order="C")
                cons.append(W == W.T)
                if eigbox is not None:
                    eye = np.eye(cset.variable.shape[0])
                    if eigbox.alpha > 0:
                        cons.append(W >> eigbox.alpha * eye)
                    if np.isfinite(eigbox.beta):
                        cons.append(W << eigbox.beta * eye)
            self.problem = cp.Problem(cp.Minimize(loss + self.lam * pen), cons)
        except (cp.error.DCPError, ValueError, TypeError, NotImplementedError) as exc:
            raise SolverError(
                f"the objective cannot be expressed in cvxpy for the {what} relaxation ({exc})",
                hint=f"the {what} relaxation needs a DCP-representable convex loss; use an l0 solver (grahtp, iht)",
            ) from None
        except ModelError as exc:
            raise SolverError(f"the {what} relaxation cannot be built: {exc.message}", exc.span, exc.hint) from None
        if not self.problem.is_dcp():
            raise SolverError(
                f"the {what} relaxation of this objective is not DCP in cvxpy",
                hint=f"the {what} relaxation needs a DCP-representable convex loss; use an l0 solver (grahtp, iht)",
            )
        self.solves = 0
        self.box = box

    def solve(self, lam: float) -> np.ndarray:
        solve_at(self, lam, self.u, "the relaxation")
        x = np.asarray(self.u.value, dtype=float).ravel().copy()
        return self.box.clip(x) if self.box is not None else x  # interior points may sit 1e-9 outside


class DSPCARelaxation:
    """DSPCA (see the module docstring) on the sparse PCA form's S (p x p); ``solve(lam)`` returns
    the flat x holding the leading eigenvector of the optimal Z (scaled to the ball's radius) on the
    coordinates of w. Variables whose variance S_ii is below lambda are zero in every optimal Z
    (d'Aspremont et al. 2007, Section 3.3), so lambda_max = max_i S_ii."""

    def __init__(self, spca: Any, n: int, solver: str = "auto"):
        import cvxpy as cp

        self.solver = cvxpy_solver(solver)
        self.spca, self.n = spca, n
        p = spca.S.shape[0]
        self.Z = cp.Variable((p, p), symmetric=True)
        self.lam = cp.Parameter(nonneg=True)
        objective = cp.trace(spca.S @ self.Z) - self.lam * cp.sum(cp.abs(self.Z))
        self.problem = cp.Problem(cp.Maximize(objective), [cp.trace(self.Z) == 1, self.Z >> 0])
        self.solves = 0
        self.last_Z: np.ndarray | None = None

    def solve(self, lam: float) -> np.ndarray:
        solve_at(self, lam, self.Z, "DSPCA")
        Z = np.asarray(self.Z.value, dtype=float)
        self.last_Z = (Z + Z.T) / 2
        _, V = np.linalg.eigh(self.last_Z)
        v = V[:, -1]
        v = -v if v[int(np.argmax(np.abs(v)))] < 0 else v
        return self.spca.embed(self.spca.radius * v, self.n)


__all__ = ["RELAXATIONS", "DSPCARelaxation", "Relaxation"]
