"""Step-size constants and curvature: restricted smoothness by the truncated power method, the mean
Hessian diagonal (HTP's unit step), Hessian columns and diagonals of the composite part (cached
when constant), each with the set's truncation. Functions of the data
(:class:`~sparsemodel.lowering.data.LoweredData`); solvers call them as methods of
:class:`~sparsemodel.lowering.lowered.LoweredProblem`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from ..numerics.smooth import power_method
from .data import LoweredData

MAX_MOVE = 1e6  # a step 1/M from safe_curvature moves x by at most this many times max(1, ||x||)
WHOLE_COLUMNS_LIMIT = 4_000_000  # entries of J[:, C] a whole-vector loss's exact mean curvature may form
HESSIAN_CACHE_LIMIT = 50_000_000  # entries of cached columns of a constant Hessian (400 MB)


def hessian_operator(lp: LoweredData, x: np.ndarray | None = None):
    return lp.oracle.hessian_operator(x)


def truncation(lp: LoweredData, s: int | None) -> Any:
    """The truncation of the power method: what a budget-s point of the set may use."""
    if lp.set is None:
        return lambda v: v
    return lp.set.truncation(s)


def power_budget(lp: LoweredData, units: int) -> int | None:
    """The truncation budget of :meth:`smoothness` for ``units`` selectable units of the set."""
    return lp.set.power_units(units) if lp.set is not None else None


def restricted_smoothness(lp: LoweredData, units: int, starts: int = 3, x: np.ndarray | None = None) -> float:
    """L for ``units`` units of the set: the best of ``starts`` seeded runs of the truncated
    power method (each from two starting vectors). The method can stop at a local maximum of
    its nonconvex Rayleigh quotient; three seeds matched the exact value on small tests."""
    b = power_budget(lp, units)
    return max(float(smoothness(lp, b, x=x, seed=i)) for i in range(starts))


def smoothness(
    lp: LoweredData, s: int | None = None, x: np.ndarray | None = None, iters: int = 100, seed: int = 0
) -> float:
    """Estimate of the restricted smoothness constant M_s: the largest eigenvalue of the
    Hessian (bound) over the directions a budget-s point uses (s coordinates of C, or rank s),
    free coordinates always allowed, by the truncated power method (Yuan & Zhang 2013) from
    two starting points."""
    if lp.precision is not None and lp.eigbox is not None and lp.eigbox.alpha > 0:
        # on the box, -logdet is alpha^-2-smooth (paper 000, Section 5.3): the theory's constant
        return lp.precision.scale / lp.eigbox.alpha**2
    hv = hessian_operator(lp, x)
    rng = np.random.default_rng(seed)
    starts = [np.ones(lp.n), rng.standard_normal(lp.n)]
    return power_method(hv, truncation(lp, s), starts, iters=iters)


def safe_curvature(lp: LoweredData, estimate: float, x: np.ndarray, g: np.ndarray | None = None) -> float:
    """A positive, finite curvature M for a step 1/M at x (gradient g: the solver's, else one
    computed here and not counted, like the estimate's Hessian products) from an estimate of it
    (:meth:`mean_curvature`, :meth:`smoothness`): |estimate|, and at least
    ||g|| / (MAX_MOVE max(1, ||x||)), so that the gradient step moves x by at most MAX_MOVE
    times its size.

    An estimate is a number computed in floating point, not a verdict on the loss: on a convex
    loss a negative one is rounding around a curvature of ~0 (a near-separable fit, where the
    loss is flat to working precision; a Cox grid search met -3.6e-07), and zero, tiny or not
    finite leaves no step; on a nonconvex custom loss a negative one is the curvature's sign,
    and its magnitude is what a step needs (the Lipschitz constant of the gradient). The floor
    is the safe bound where the estimate says nothing: the solvers' backtracking then halves
    the step until f decreases (about 20 halvings at most from the cap to a step that moves x by
    its own size). 1 at a stationary point with no estimate: any step stays put."""
    if g is None:
        g = lp.oracle.peek_grad(x)
    gn = float(np.linalg.norm(g))
    floor = gn / (MAX_MOVE * max(1.0, float(np.linalg.norm(x)))) if np.isfinite(gn) else 0.0
    M = abs(float(estimate)) if np.isfinite(estimate) else 0.0
    M = max(M, floor)
    return M if M > 0 and np.isfinite(M) else 1.0


def mean_curvature(lp: LoweredData, probes: int = 8, x: np.ndarray | None = None, seed: int = 0) -> float:
    """Average magnitude of the Hessian's diagonal at x (default: the zero point) over the
    constrained coordinates: exact from the design's stored columns (any elementwise loss,
    built-in or ``func``, and the row-wise softmax), else Hutchinson's trace estimator with
    Rademacher probes of the Hessian at x. 1 / this is the unit step of HTP for normalized
    columns (Foucart 2011).

    For a convex loss this is the mean diagonal. For a nonconvex one (a ``custom_loss``) it
    is a magnitude, never a signed sum whose terms cancel: elementwise terms add |c phi''|
    (J' diag(|c phi''|) J bounds the Hessian from above and below), whole-vector terms the
    |diagonal entries|, Hutchinson's probes |z'Hz|. It may still come out 0 where the loss is
    flat; :meth:`safe_curvature` turns it into a step.

    No global curvature bound enters: the design knows one only for built-in atoms, so using it
    would give one function spelled two ways (``logistic(-z)`` and ``func phi(z) = log(1 +
    exp(-z))``) two different steps.

    A set of several parts (a product: ``curvature_parts``) gets the sum of the parts' means:
    the joint step's curvature is at most the sum of the blocks' (see ``ProductSet``)."""
    parts = lp.set.curvature_parts() if lp.set is not None else [np.arange(lp.n)]
    x = lp.zeros() if x is None else x
    if lp.precision is not None:
        return precision_curvature(lp, x)
    total = 0.0
    for C in parts:
        exact = mean_curvature_exact(lp, C, x)
        if exact is not None:
            total += exact
            continue
        hv = lp.oracle.hessian_operator(x, bound=False)
        rng = np.random.default_rng(seed)
        acc = 0.0
        for _ in range(probes):
            z = np.zeros(lp.n)
            z[C] = rng.choice((-1.0, 1.0), size=len(C))
            acc += abs(float(z @ hv(z)))
        total += acc / (probes * len(C))
    return total


def precision_curvature(lp: LoweredData, x: np.ndarray) -> float:
    """The mean over off-diagonal pairs (i, j) of the curvature of c (-logdet O) along the
    symmetric unit direction (e_i e_j' + e_j e_i') / sqrt 2: c (Sigma_ii Sigma_jj + Sigma_ij^2),
    Sigma = O^{-1} (the Hessian is Sigma (x) Sigma). inf outside the domain."""
    pf = lp.precision
    O = x[lp.layout.coords(pf.var)].reshape(pf.p, pf.p)
    try:
        L = np.linalg.cholesky((O + O.T) / 2)
    except np.linalg.LinAlgError:
        return np.inf
    Li = sla.solve_triangular(L, np.eye(pf.p), lower=True)
    Sig = Li.T @ Li
    d = np.diag(Sig)
    p = pf.p
    if p < 2:
        return pf.scale * float(d[0] ** 2)
    total = (d.sum() ** 2 - (d * d).sum()) + (float(np.sum(Sig * Sig)) - (d * d).sum())
    return pf.scale * total / (p * (p - 1))


def mean_curvature_exact(lp: LoweredData, C: np.ndarray, x: np.ndarray) -> float | None:
    """mean_j |diag(H(x))_j| over C from the design's columns, in O(rows) per call: for an
    elementwise term sum_r |c w_r phi''(z_r)| R_r with R_r = sum_{j in C} J[r, j]^2 (computed once);
    for a whole-vector term sum_j |(J_C' H J_C)_jj|; for the row-wise softmax c sum_i tr(H_i G_i) with H_i the row's loss Hessian (the atom's)
    and G_i the Gram matrix of the rows (i, .) of J[:, C] (computed once; a streamed pass over
    the columns when the Jacobian is not kept). None when a row-wise term's Jacobian is not kept."""
    d = lp.design
    if d is None:
        return None
    key = C.tobytes()
    total = 0.0
    for i, t in enumerate(d.terms):
        ck = (i, key)
        if t.whole:  # tr(J_C' H J_C), the loss Hessian applied to the columns: O(rows |C|)
            stored = stored_columns(lp, i)
            if stored is None and t.map.size * len(C) > WHOLE_COLUMNS_LIMIT:
                return None  # too many columns to form: Hutchinson's estimator instead
            JC = stored[0][:, C] if stored is not None else d.term_columns(i, C)
            JC = JC.toarray() if sp.issparse(JC) else np.asarray(JC, dtype=float)
            z = t.map.value(x)
            total += abs(t.coef) * float(np.abs(np.sum(JC * t.hessian_apply(z, JC), axis=0)).sum())
            continue
        if ck not in lp._rowsq_cache:
            stored = stored_columns(lp, i)
            if stored is None and t.rowwise:
                return None
            R = G = None
            if stored is None:  # the Jacobian is not kept: its columns streamed once
                R = d.row_square_sums(i, C)
            elif not t.rowwise:
                R = np.asarray(stored[1][:, C].sum(axis=1)).ravel()
            else:
                m = t.map.shape[1]
                JC = stored[0][:, C]
                JC = JC.toarray() if sp.issparse(JC) else np.asarray(JC)
                J3 = JC.reshape(-1, m, JC.shape[1])
                G = np.einsum("iaj,ibj->iab", J3, J3)
            lp._rowsq_cache[ck] = (R, G)
        R, G = lp._rowsq_cache[ck]
        z = t.map.value(x)
        if t.rowwise:  # sum_i tr(H_i G_i), H_i the row's loss Hessian (weights in)
            m = t.map.shape[1]
            HG = t.hessian_apply(z, G.reshape(-1, m)).reshape(G.shape)
            total += abs(t.coef * float(np.einsum("iaa->", HG)))
        else:
            total += float(np.abs(t.coef * t.derivs(z, 2)[2]) @ R)
    return total / len(C)


def stored_columns(lp: LoweredData, i: int) -> tuple[Any, Any] | None:
    """(J, J * J): term i's whole Jacobian (``Design.full_columns``) and its entrywise square,
    computed once; None when the Jacobian is too large to keep. The squares give diagonals of
    Hessians (sum_r phi''_r J[r, j]^2) at the cost of one matrix-vector product."""
    if i not in lp._sq_cache:
        J = lp.design.full_columns(i)
        lp._sq_cache[i] = None if J is None else (J, J.multiply(J).tocsc() if sp.issparse(J) else J * J)
    return lp._sq_cache[i]


def hessian_columns(lp: LoweredData, cols: np.ndarray) -> np.ndarray | None:
    """H[:, cols] for an objective whose Hessian is constant (quadratic composite designs: least
    squares, ridge terms), each column computed once (from the stored Jacobian, or by one
    transposed product with the data when it is not kept) and cached; None otherwise, or when
    the cache would pass ``HESSIAN_CACHE_LIMIT`` entries. A search that visits many supports
    (the swap search of ``auto``) then pays O(n_coords) per Hessian entry it reads instead of
    O(n_samples)."""
    d = lp.design
    if d is None or not d.quadratic:
        return None
    cols = np.asarray(cols, dtype=np.int64)
    cache = lp._hcol_cache
    if "pos" not in cache:  # coordinate -> column of the store, and the store (n x capacity)
        cache["pos"] = np.full(lp.n, -1, dtype=np.int64)
        cache["H"] = np.zeros((lp.n, 16))
        cache["used"] = 0
    pos = cache["pos"]
    missing = np.unique(cols[pos[cols] < 0])
    if missing.size:
        used, H = cache["used"], cache["H"]
        if (used + missing.size) * lp.n > HESSIAN_CACHE_LIMIT:
            return None
        acc = d.hessian_columns(missing)
        if acc is None:
            return None
        if used + missing.size > H.shape[1]:
            cap = min(max(2 * H.shape[1], used + missing.size), max(HESSIAN_CACHE_LIMIT // lp.n, 1))
            grown = np.zeros((lp.n, cap))
            grown[:, :used] = H[:, :used]
            cache["H"] = H = grown
        H[:, used : used + missing.size] = acc
        pos[missing] = used + np.arange(missing.size)
        cache["used"] = used + missing.size
    return cache["H"][:, pos[cols]]


def quadratic_origin(lp: LoweredData) -> tuple[float, np.ndarray]:
    """f(0) and the gradient at 0 of the composite part, computed once (with the constant
    Hessian columns they give f and its gradient anywhere for a quadratic objective)."""
    if "origin" not in lp._hcol_cache:
        z = lp.zeros()
        lp._hcol_cache["origin"] = (lp.oracle.peek(z), lp.design.value_and_grad(z)[1])
    return lp._hcol_cache["origin"]


def hessian_diagonal(lp: LoweredData, x: np.ndarray | None = None) -> np.ndarray | None:
    """diag(H(x)) of the composite part over all coordinates (x None: the constant Hessian of a
    quadratic design, computed once): from the stored squares of the Jacobians, else one
    streamed pass over the columns. None without a design or for a row-wise (softmax) term."""
    d = lp.design
    if d is None:
        return None
    if d.quadratic:
        if "diag" not in lp._hcol_cache:
            lp._hcol_cache["diag"] = d.hessian_diagonal(None, stored_squares(lp))
        return lp._hcol_cache["diag"]
    return d.hessian_diagonal(lp.zeros() if x is None else x, stored_squares(lp))


def stored_squares(lp: LoweredData) -> list[Any]:
    """Each term's stored J * J, or None where the Jacobian is not kept."""
    out = []
    for i in range(len(lp.design.terms)):
        st = stored_columns(lp, i)
        out.append(st[1] if st is not None else None)
    return out
