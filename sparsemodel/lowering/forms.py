"""The recognised forms of a problem that some solvers need beyond the set protocol, each reached
by one function that answers None where the problem does not have it:

* :func:`edges` -- a sparse precision matrix: the Gaussian log-likelihood c (-logdet(O) + <S, O>)
  with the off-diagonal of O bounded in pairs (paper 000, Section 5.3): the data of the graphical
  LASSO, the eigenvalue box, and the single-edge moves of the greedy baselines
  (:class:`PrecisionEdges`);
* :func:`sparse_pca` -- sparse PCA (:mod:`sparsemodel.model.forms`): S, the coordinates of w and
  the radius (:class:`~sparsemodel.lowering.spca_solve.SparsePCAData`);
* :func:`point_facts` -- what a result says of a precision matrix beyond its set's report (its
  spectrum, its graph, the eigenvalue box, the counts of eigendecompositions and Newton steps);
* :func:`divergence_advice` -- the hint of a diverged run for this objective.

A solver that needs a form names it in its ``unfit`` (so that the capability test lists it only
where the form is there) and then reads only the members of what these functions return: which
form a problem has is known here and in the back-ends, never in the solvers or the workflows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..objective.precision import edge_gains

if TYPE_CHECKING:
    from .lowered import LoweredProblem
    from .spca_solve import SparsePCAData


class PrecisionEdges:
    """A precision matrix O whose off-diagonal is bounded in pairs: what the graphical LASSO and
    the greedy baselines of paper 000, Section 6.3 (forward selection, FoBa, ``auto``'s starts) read.

    The form: ``S`` (p x p), ``p``, ``scale`` (the objective is scale (-logdet(O) + <S, O>)), ``W``
    (O's flat coordinates), ``box`` (the eigenvalue box's (alpha, beta), or None), ``value(O)``.
    The edges: the units of the sparsity set (a pair O[i,j], O[j,i] each), ``n_units`` of them;
    ``positions(units)`` gives the positions into C of both entries (the state a restricted solve
    takes), ``units_of(x)`` the edges of a point, and the single-edge moves score candidates:
    ``add_values`` (exact line search on one edge, :func:`~sparsemodel.objective.precision.edge_gains`)
    and ``zero_values`` (one edge set to zero), each charged to the run's counters."""

    def __init__(self, lp: LoweredProblem):
        sps, pf = lp.sparsity, lp.precision
        self.lp, self.sps, self.form = lp, sps, pf
        self.S, self.p, self.scale = pf.S, pf.p, pf.scale
        self.W = lp.layout.coords(pf.var)
        eb = lp.eigbox
        self.box: tuple[float, float] | None = (eb.alpha, eb.beta) if eb is not None else None
        local = sps.coords - self.W[0]
        i, j = np.divmod(local, pf.p)
        first = np.zeros(sps.n_units, dtype=np.int64)
        up = i < j
        first[sps.unit_of[up]] = np.flatnonzero(up)
        self.i, self.j = i[first], j[first]  # the upper-triangle entry of each unit
        self.n_units = sps.n_units

    def value(self, O: np.ndarray) -> float:
        """-logdet(O) + <S, O>, times the scale (inf outside the positive definite cone)."""
        return self.form.value(O)

    def matrix(self, x: np.ndarray) -> np.ndarray:
        return x[self.W].reshape(self.p, self.p)

    def point(self, O: np.ndarray) -> np.ndarray:
        """The flat point whose matrix is O symmetrized (every other coordinate zero)."""
        x = self.lp.zeros()
        x[self.W] = ((O + O.T) / 2).ravel()
        return x

    def positions(self, units: np.ndarray) -> np.ndarray:
        return np.flatnonzero(np.isin(self.sps.unit_of, units))

    def units_of(self, x: np.ndarray) -> np.ndarray:
        O = self.matrix(x)
        return np.flatnonzero(O[self.i, self.j] != 0)

    def add_values(self, x: np.ndarray, f: float, units: np.ndarray) -> np.ndarray:
        """f after the best single move O_ij = O_ji = O_ij + t for each unit (exact line search
        with the other entries fixed, :func:`edge_gains`)."""
        O = self.matrix(x)
        Sigma = np.linalg.inv((O + O.T) / 2)
        gain, _ = edge_gains(self.S, Sigma, O, (self.i[units], self.j[units]))
        self.lp.oracle.charge(funcs=1)
        return f + self.scale * gain

    def zero_values(self, x: np.ndarray, units: np.ndarray) -> np.ndarray:
        """f with the edge of each unit set to zero (the others fixed): Zhang's backward score."""
        O = self.matrix(x)
        out = np.empty(len(units))
        for n, u in enumerate(units):
            Z = O.copy()
            Z[self.i[u], self.j[u]] = Z[self.j[u], self.i[u]] = 0.0
            out[n] = self.form.value(Z)
        self.lp.oracle.charge(funcs=len(units))
        return out


def edges(lp: LoweredProblem) -> PrecisionEdges | None:
    """The sparse precision-matrix form of ``lp`` (the Gaussian log-likelihood with its off-diagonal
    bounded in pairs), or None."""
    sps = lp.sparsity
    if lp.precision is None or sps is None or not sps.pairs:
        return None
    return PrecisionEdges(lp)


def unpaired(lp: LoweredProblem) -> bool:
    """Whether the problem bounds symmetric pairs without the precision-matrix objective (what the
    solvers that move whole edges refuse: their edge moves are those of that objective)."""
    sps = lp.sparsity
    return sps is not None and bool(sps.pairs) and lp.precision is None


def sparse_pca(lp: LoweredProblem) -> SparsePCAData | None:
    """The sparse PCA form of ``lp`` (maximize w'Sw on the ball with nnz(w) <= k), or None."""
    return lp.spca


def point_facts(lp: LoweredProblem, x: np.ndarray) -> dict[str, Any]:
    """What a result says of a precision matrix (the variable of the eigenvalue box, else of the
    log-likelihood) beyond its set's report: the edges of its upper triangle, its extreme
    eigenvalues, whether it is symmetric, the eigenvalue box and whether x lies in it, and the
    eigendecompositions and Newton steps the run counted. Nothing for other problems."""
    if lp.eigbox is None and lp.precision is None:
        return {}
    O = lp.layout.get(x, lp.eigbox.variable if lp.eigbox is not None else lp.precision.var)
    lam = np.linalg.eigvalsh((O + O.T) / 2)
    iu = np.triu_indices(O.shape[0], 1)
    out: dict[str, Any] = {
        "edges": int(len(np.flatnonzero(O[iu] != 0))),
        "eig_min": float(lam[0]),
        "eig_max": float(lam[-1]),
        "symmetric": bool(np.array_equal(O, O.T)),
    }
    if lp.eigbox is not None:
        out["eig_box"] = [lp.eigbox.alpha, lp.eigbox.beta]
        out["in_box"] = bool(lp.eigbox.contains(x))
    if lp.oracle.counters.eig_decomps:
        out["eig_decomps"] = lp.oracle.counters.eig_decomps
    if lp.oracle.counters.newton_steps:
        out["newton_steps"] = lp.oracle.counters.newton_steps
    return out


def divergence_advice(lp: LoweredProblem) -> str | None:
    """The advice of a diverged gradient method beyond a smaller step: None for the default
    (backtracking, or rescaling the data); rescaling is no advice for a precision matrix."""
    if lp.precision is not None:
        return "or leave eta='auto' with backtracking=true"
    return None
