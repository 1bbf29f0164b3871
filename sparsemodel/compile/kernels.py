"""Numerical kernels. They take the data they need (a :class:`~sparsemodel.compile.design.Reduced`
design, a Hessian-vector product, a truncation), never the lowered problem.

* :func:`newton` -- THE damped-Newton loop: exact Hessians of a reduced composite design, Armijo
  backtracking, batched over m independent problems that share the design's columns (each may
  have one extra column, for insertion scoring, or coordinates held at zero, for removal scoring),
  with an optional l1 penalty (then each step is a proximal-Newton step: coordinate descent on the
  quadratic model, Lee, Sun & Saunders 2014). It serves the restricted solves, candidate scoring,
  FoBa's single-coordinate line searches and the l1 path. For a large single problem it forms no
  Hessian and takes its steps by conjugate gradients on Hessian-vector products (Newton-CG). A
  single (restricted) solve forms a Hessian only when the curvatures moved too much since the last
  one: otherwise the Newton system is solved by conjugate gradients preconditioned with the last
  Cholesky factor, to a certified accuracy (:func:`_stale_direction`).
* :func:`lstsq` -- least squares by Cholesky/QR of the stacked weighted columns (LSQR when they
  are sparse and many).
* :func:`lbfgs` -- L-BFGS-B for any smooth function (objectives without a composite form).
* :func:`power_method` -- the truncated power method (Yuan & Zhang 2013) for restricted
  smoothness constants: the largest Rayleigh quotient of a Hessian (bound) over the vectors a
  truncation keeps (k coordinates, rank r, ...).
* :func:`fista` -- accelerated proximal gradient with restarts (the nuclear-norm path, with
  :func:`svt` as the proximal map).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.linalg.lapack import dposv, dpotrf, dpotri, dpotrs
from scipy.sparse.linalg import LinearOperator

from .design import Reduced

CHUNK = 4_000_000  # entries per block when streaming products
MATRIX_FREE_DIM = 1500  # a single Newton problem larger than this takes CG steps (no Hessian formed)
FOLD_LIMIT = 1_000_000  # entries: a dense quadratic term larger than this is not checked for being a ridge


# ====================================================================== evaluation


def is_operator(J: Any) -> bool:
    """J is matrix free (a scipy LinearOperator: products only, no entries)."""
    return isinstance(J, LinearOperator)


def _apply(J: Any, U: np.ndarray) -> np.ndarray:
    """(m, d) coefficients -> (m, size) affine values J u for each problem."""
    if sp.issparse(J) or is_operator(J):
        return np.asarray(J @ U.T).reshape(J.shape[0], -1).T
    return U @ J.T


def _apply_t(J: Any, D: np.ndarray) -> np.ndarray:
    """(m, size) cotangents -> (m, d): J' D for each problem."""
    if sp.issparse(J) or is_operator(J):
        return np.asarray(J.T @ D.T).reshape(J.shape[1], -1).T
    return D @ J


def evaluate(
    rd: Reduced, u: np.ndarray, order: int = 2, ridge: np.ndarray | None = None
) -> tuple[float, np.ndarray, Any]:
    """f, gradient and (order 2) dense Hessian of the reduced design at u (one problem)."""
    res = _State(rd, u[None, :], None, ridge)
    f, g = res.fg(np.arange(1))
    H = res.hessians(np.arange(1))[0] if order >= 2 else None
    return float(f[0]), g[0], H


class _State:
    """Affine values and loss derivatives of m problems at their current coefficients.

    A separable quadratic term without offset, c * sum_i w_i (a_i u_(j_i))^2 (a ridge such as
    ``lam * sum_squares(w)``: each row of its columns has at most one nonzero), is folded into the
    diagonal ``ridge`` (r_j = 2 c sum_{i: j_i = j} w_i a_i^2) instead of being evaluated as a term:
    the same function, without a product, a loss evaluation and a Hessian block per step."""

    def __init__(
        self,
        rd: Reduced,
        U: np.ndarray,
        extra: list[np.ndarray] | None,
        ridge: np.ndarray | None,
        extra_lin: np.ndarray | None = None,
    ):
        self.rd = rd
        self.U = U.copy()
        self.d = rd.d
        self.extra = extra  # per term (m, size_t): the extra column of each problem
        self.extra_lin = extra_lin  # (m,): the linear terms' coefficient of each extra column
        self.dense = [not (sp.issparse(J) or is_operator(J)) for J in rd.Js]
        self.act = []  # the terms evaluated as terms (the others are folded into the ridge)
        for t_i, t in enumerate(rd.terms):
            fold = None
            if extra is None:
                known = rd.folds[t_i] if rd.folds is not None else None
                if known is None:  # not decided by the design: from the columns
                    fold = _separable_ridge(t, rd.Js[t_i], rd.offsets[t_i])
                elif known is not False and not np.any(rd.offsets[t_i]):
                    fold = known
            if fold is None:
                self.act.append(t_i)
                continue
            ridge = fold if ridge is None else ridge + fold
        self.ridge = ridge
        self.Z: list[Any] = [None] * len(rd.terms)
        self.D: list[Any] = [None] * len(rd.terms)
        for t_i in self.act:
            self.Z[t_i] = self._z(t_i, self.U)
            self.D[t_i] = rd.terms[t_i].derivs(self.Z[t_i], 2)

    def _z(self, t_i: int, U: np.ndarray) -> np.ndarray:
        J = self.rd.Js[t_i]
        z = (U[:, : self.d] @ J.T if self.dense[t_i] else _apply(J, U[:, : self.d])) + self.rd.offsets[t_i]
        if self.extra is not None:
            z = z + self.extra[t_i] * U[:, self.d : self.d + 1]
        return z

    def d1(self, a: int) -> list[np.ndarray]:
        """Each term's loss derivative (weights in) at problem a's coefficients, folded terms too."""
        out = []
        for t_i, t in enumerate(self.rd.terms):
            if self.D[t_i] is not None:
                out.append(self.D[t_i][1][a])
            else:
                out.append(t.derivs(self._z(t_i, self.U[a : a + 1])[0], 1)[1])
        return out

    def fg(self, idx: Any) -> tuple[np.ndarray, np.ndarray]:
        """Values and gradients of problems ``idx`` (an index array, or a slice for all)."""
        rd = self.rd
        U = self.U[idx]
        m = U.shape[0]
        D = U.shape[1]
        d = self.d
        f = np.full(m, rd.const) + U[:, :d] @ rd.lin
        g = np.zeros((m, D))
        g[:, :d] += rd.lin
        for t_i in self.act:
            t = rd.terms[t_i]
            v, d1, _ = self.D[t_i]
            if not isinstance(idx, slice):
                v, d1 = v[idx], d1[idx]
            f += t.coef * v.sum(axis=1)
            J = rd.Js[t_i]
            g[:, :d] += t.coef * (d1 @ J if self.dense[t_i] else _apply_t(J, d1))
            if self.extra is not None:
                g[:, d] += t.coef * np.einsum("ij,ij->i", self.extra[t_i][idx], d1)
        if self.extra_lin is not None:
            f += U[:, d] * self.extra_lin[idx]
            g[:, d] += self.extra_lin[idx]
        if self.ridge is not None:
            f += 0.5 * (U * U) @ self.ridge
            g += U * self.ridge
        return f, g

    def hessians(self, idx: np.ndarray) -> np.ndarray:
        """Dense Hessians (len(idx), D, D)."""
        rd = self.rd
        m = len(idx)
        D = self.U.shape[1]
        d = self.d
        H = np.zeros((m, D, D))
        many = m > 4
        for t_i in self.act:
            t = rd.terms[t_i]
            J = rd.Js[t_i]
            d2 = self.D[t_i][2]
            d2 = d2[idx] if d2 is not None else None
            if t.rowwise:
                z = self.Z[t_i][idx]
                for a, i in enumerate(idx):
                    Ja = J.toarray() if sp.issparse(J) else np.asarray(J)
                    if self.extra is not None:
                        Ja = np.hstack([Ja, self.extra[t_i][i][:, None]])
                    H[a] += t.coef * _rowwise_hessian(t, z[a], Ja)
                continue
            if many and not sp.issparse(J):
                H[:, :d, :d] += t.coef * _pair_hessians(J, d2)
            else:
                for a in range(m):
                    if sp.issparse(J):
                        H[a, :d, :d] += t.coef * (J.T @ J.multiply(d2[a][:, None])).toarray()
                    elif (
                        d2[a].min() >= 0
                    ):  # B'B with B = J sqrt(phi''): numpy runs syrk on a product with its transpose
                        Bm = J * np.sqrt(d2[a])[:, None]
                        H[a, :d, :d] += t.coef * (Bm.T @ Bm)
                    else:
                        H[a, :d, :d] += t.coef * (J.T @ (J * d2[a][:, None]))
            if self.extra is not None:
                E = self.extra[t_i][idx]
                DE = d2 * E
                H[:, :d, d] += t.coef * _apply_t(J, DE)
                H[:, d, d] += t.coef * np.einsum("ij,ij->i", DE, E)
        if self.extra is not None:
            H[:, d, :d] = H[:, :d, d]
        if self.ridge is not None:
            H[:, np.arange(D), np.arange(D)] += self.ridge
        return H

    def hvp(self, v: np.ndarray) -> np.ndarray:
        """Hessian of problem 0 times v (matrix free)."""
        rd = self.rd
        out = np.zeros(self.d)
        for t_i in self.act:
            t = rd.terms[t_i]
            J = rd.Js[t_i]
            Jv = _apply(J, v[None, :])[0]
            d2 = self.D[t_i][2]
            r = t.curv_apply(self.Z[t_i][0], d2[0] if d2 is not None else None, Jv)
            out += t.coef * _apply_t(J, r[None, :])[0]
        if self.ridge is not None:
            out += self.ridge * v
        return out

    def trial(self, idx: np.ndarray, U: np.ndarray) -> tuple[np.ndarray, list[Any]]:
        """Values at trial coefficients U for problems idx (and what to keep if accepted)."""
        rd = self.rd
        f = np.full(len(idx), rd.const) + U[:, : self.d] @ rd.lin
        keep = []
        for t_i in self.act:
            t = rd.terms[t_i]
            J = rd.Js[t_i]
            z = (U[:, : self.d] @ J.T if self.dense[t_i] else _apply(J, U[:, : self.d])) + rd.offsets[t_i]
            if self.extra is not None:
                z = z + self.extra[t_i][idx] * U[:, self.d : self.d + 1]
            dv = t.derivs(z, 2)
            f += t.coef * dv[0].sum(axis=1)
            keep.append((z, dv))
        if self.extra_lin is not None:
            f += U[:, self.d] * self.extra_lin[idx]
        if self.ridge is not None:
            f += 0.5 * (U * U) @ self.ridge
        return f, keep

    def accept(self, idx: np.ndarray, U: np.ndarray, keep: list[Any], ok: np.ndarray | None = None) -> None:
        """Move problems idx (those where ``ok``, a mask over the trial's rows, when given) to the
        trial coefficients U and keep their values and derivatives from :meth:`trial`."""
        if ok is not None and not ok.all():
            idx, U = idx[ok], U[ok]
            keep = [(z[ok], tuple(a[ok] if a is not None else None for a in dv)) for z, dv in keep]
        if len(idx) == self.U.shape[0]:  # every problem (idx is 0..m-1 in order): take the new arrays
            self.U = np.array(U, dtype=float)
            for t_i, (z, dv) in zip(self.act, keep):
                self.Z[t_i] = z
                self.D[t_i] = dv
            return
        self.U[idx] = U
        for t_i, (z, dv) in zip(self.act, keep):
            self.Z[t_i][idx] = z
            for arr, new in zip(self.D[t_i], dv):
                if arr is not None:
                    arr[idx] = new


def _separable_ridge(t: Any, J: Any, offset: np.ndarray) -> np.ndarray | None:
    """For a square-loss term whose columns have at most one nonzero per row and whose offset is
    zero, the diagonal r with  c sum_i w_i (J u)_i^2 = 1/2 sum_j r_j u_j^2  (r_j = 2 c sum_i w_i
    J_ij^2); None for any other term."""
    if not t.quadratic or t.rowwise or is_operator(J) or np.any(offset):
        return None
    if sp.issparse(J):
        Jc = sp.csr_matrix(J)
        Jc.eliminate_zeros()
        if len(Jc.indptr) > 1 and np.diff(Jc.indptr).max(initial=0) > 1:
            return None
        Jsq = np.asarray(Jc.multiply(Jc).T @ (t.weights if t.weights is not None else np.ones(J.shape[0]))).ravel()
    else:
        J = np.asarray(J, dtype=float)
        if J.shape[0] * J.shape[1] > 4 * FOLD_LIMIT or np.count_nonzero(J, axis=1).max(initial=0) > 1:
            return None
        w = t.weights if t.weights is not None else np.ones(J.shape[0])
        Jsq = w @ (J * J)
    return 2.0 * t.coef * Jsq


def _pair_hessians(J: np.ndarray, d2: np.ndarray) -> np.ndarray:
    """J' diag(d2_a) J for every row a of d2 at once: products of every pair of columns (upper
    triangle) computed once, then one matrix product (streamed by blocks of samples if large)."""
    n, d = J.shape
    m = d2.shape[0]
    iu = np.triu_indices(d)
    P = len(iu[0])
    Hup = np.zeros((m, P))
    step = max(1, CHUNK // max(P, 1))
    for lo in range(0, n, step):
        Jb = J[lo : lo + step]
        Hup += d2[:, lo : lo + step] @ (Jb[:, iu[0]] * Jb[:, iu[1]])
    H = np.zeros((m, d, d))
    H[:, iu[0], iu[1]] = Hup
    H[:, iu[1], iu[0]] = Hup
    return H


def _rowwise_hessian(t: Any, z: np.ndarray, J: np.ndarray) -> np.ndarray:
    """sum_i w_i J_i' (diag(p_i) - p_i p_i') J_i for the softmax loss; J rows ordered (i, j)."""
    mcol = t.map.shape[1]
    P = t.probs(z).reshape(-1, mcol)
    w = t.weights if t.weights is not None else np.ones(P.shape[0])
    J3 = J.reshape(P.shape[0], mcol, -1)
    Wp = (P * w[:, None]).reshape(-1)
    H = J.T @ (J * Wp[:, None])
    Q = np.einsum("ij,ijd->id", P, J3)
    return H - Q.T @ (Q * w[:, None])


# ====================================================================== Newton


@dataclass
class NewtonResult:
    values: np.ndarray  # (m,) smooth objective (with ridge) at the returned coefficients
    U: np.ndarray  # (m, D)
    iterations: int
    converged: np.ndarray  # (m,) bool
    d1: list[np.ndarray] | None = None  # m = 1: each term's loss derivative at the returned coefficients
    hessian: tuple[np.ndarray, Any] | None = None  # m = 1: the last Hessian formed (ridge out) and its curvatures


def newton(
    rd: Reduced,
    U0: np.ndarray,
    *,
    extra: list[np.ndarray] | None = None,
    extra_lin: np.ndarray | None = None,
    fixed: np.ndarray | None = None,
    ridge: np.ndarray | None = None,
    l1: np.ndarray | None = None,
    tol: float = 1e-12,
    kkt_tol: float | None = None,
    max_iter: int = 100,
    give_up: float | None = None,
    lower: np.ndarray | None = None,
    upper: np.ndarray | None = None,
    hint: tuple[np.ndarray, np.ndarray, Any] | None = None,
) -> NewtonResult:
    """Minimize m problems  f(u) [+ ridge/2 ||u||^2] [+ sum l1_j |u_j|]  over u = U[a].

    With ``l1``, ``lower`` / ``upper`` (D,) keep every coordinate in a box (the starts must be in
    it): each model step is then coordinate descent with clipping, and the line search moves
    between two points of the box (for boxes without l1, see :func:`box_newton`).

    ``U0`` (m, D): warm starts, D = d (+1 with ``extra``, the extra column of each problem per
    term, (m, size_t), and ``extra_lin`` (m,) the linear terms' coefficient of each extra column).
    The step that meets the stopping test is still taken when it does not increase f
    (:func:`_polish`) when m = 1 (a restricted solve, whose coefficients are used; batched scoring
    needs only values), so the returned coefficients are accurate to rounding. ``fixed`` (m, d) bool:
    coordinates held at their start (removal scoring
    holds them at 0). A problem stops when its Newton decrement is below ``2 tol (1 + |f|)`` (or,
    with ``l1``, when the minimum-norm subgradient is below ``kkt_tol``), or when the line search
    finds no decrease (at the optimum numerically). ``give_up`` (smooth problems): a problem is
    abandoned (not converged) once its Newton model says it cannot get below this value,
    f - 2 * decrement > give_up -- for searches that only want minima below a threshold. A single
    smooth problem (m = 1, dense Hessian, at least ``STALE_MIN_DIM`` coordinates, none held fixed)
    reuses its last Cholesky factor while the loss curvatures
    stay within a factor 2 of the factorized ones, with certified bounds on the decrement and on
    the step's error (:func:`_stale_direction`): the same stopping test and iteration counts, about
    40% fewer Hessians on warm-started solves. ``hint`` (such a problem): the last Hessian of a
    previous solve on other columns, to start from (:func:`_factor_from_hint`).
    """
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # steps outside the domain give inf
        U0 = np.atleast_2d(np.asarray(U0, dtype=float))
        if U0.shape[0] == 1 and extra is None and fixed is None and l1 is None and lower is None and upper is None:
            return _newton_one(rd, U0, ridge, tol, max_iter, give_up, hint)
        return _newton(rd, U0, extra, fixed, ridge, l1, tol, kkt_tol, max_iter, give_up, extra_lin, lower, upper, hint)


_ONE = np.zeros(1, dtype=np.int64)  # the index of the one problem of a single solve
_ROUNDING = 4 * np.finfo(float).eps


def _newton_one(
    rd: Reduced,
    U0: np.ndarray,
    ridge: np.ndarray | None,
    tol: float,
    max_iter: int,
    give_up: float | None,
    hint: tuple[np.ndarray, np.ndarray, Any] | None,
) -> NewtonResult:
    """The damped-Newton loop of one smooth problem (a restricted solve; see :func:`newton`): the
    iteration of :func:`_newton` with scalars in place of its per-problem index arrays, since most
    calls are small single solves whose cost is bookkeeping. Steps from a Cholesky factorization of
    the Hessian, from the last factorization while it is certified (:func:`_stale_direction`), or
    by conjugate gradients for large or matrix-free problems (:func:`_cg_direction`); Armijo
    backtracking; the step that meets the stopping test is taken too when it does not increase f
    (:func:`_polish`), so the coefficients are accurate to rounding."""
    st = _State(rd, U0, None, ridge)
    D = st.U.shape[1]
    matrix_free = D > MATRIX_FREE_DIM or any(map(is_operator, rd.Js))
    reuse = not matrix_free and D >= STALE_MIN_DIM
    quad_finish = rd.quadratic and not matrix_free
    factor = last = None
    if reuse and hint is not None:
        made = _factor_from_hint(st, hint)
        if made is not None:
            factor, last = made
    f, conv, iters = np.inf, False, 0
    for _ in range(max_iter):
        iters += 1
        fa, ga = st.fg(slice(None))
        f, g = float(fa[0]), ga[0]
        if not np.isfinite(f):
            break
        if D == 0:
            conv = True
            break
        bound = 2 * tol * (1.0 + abs(f))
        lazy = _stale_direction(st, factor, g, f, bound) if factor is not None else None
        if matrix_free:
            step, dec = _cg_direction(st, g)
        elif lazy is not None:  # a certified step from an earlier factorization: no new Hessian
            step, dec = lazy
        else:
            factor = None
            H = st.hessians(_ONE)
            out = _cholesky_step(H[0], g)
            if out is not None:
                step, dec, c = out
                if reuse:
                    factor = (c, _curvatures(st))
                    last = (H[0] - np.diag(st.ridge) if st.ridge is not None else H[0], factor[1])
            else:
                steps_, decs = _newton_direction(H, g[None, :], cholesky_tried=True)
                step, dec = steps_[0], float(decs[0])
        if dec <= bound:
            conv = True
            ut = st.U[0] + step  # polish: the last step too, when it does not increase f
            ft, keep = st.trial(_ONE, ut[None, :])
            if np.isfinite(ft[0]) and ft[0] <= f + _ROUNDING * (1.0 + abs(f)):
                st.accept(_ONE, ut[None, :], keep)
                f = float(ft[0])
            break
        if give_up is not None and f - 2.0 * dec > give_up:  # cannot end below give_up: abandoned
            break
        t, moved = 1.0, False
        for _ls in range(50):
            ut = st.U[0] + t * step
            ft, keep = st.trial(_ONE, ut[None, :])
            if ft[0] <= f - 0.25 * t * dec:
                st.accept(_ONE, ut[None, :], keep)
                f, moved = float(ft[0]), True
                break
            t *= 0.5
        if not moved:  # no decrease along the direction: at the optimum up to rounding
            conv = True
            break
        if quad_finish and t == 1.0:  # one full Newton step solves a quadratic exactly
            conv = True
            break
    return NewtonResult(np.array([f]), st.U, iters, np.array([conv]), st.d1(0), last)


def _newton(
    rd: Reduced,
    U0: np.ndarray,
    extra: list[np.ndarray] | None,
    fixed: np.ndarray | None,
    ridge: np.ndarray | None,
    l1: np.ndarray | None,
    tol: float,
    kkt_tol: float | None,
    max_iter: int,
    give_up: float | None = None,
    extra_lin: np.ndarray | None = None,
    lower: np.ndarray | None = None,
    upper: np.ndarray | None = None,
    hint: tuple[np.ndarray, np.ndarray, Any] | None = None,
) -> NewtonResult:
    U0 = np.atleast_2d(np.asarray(U0, dtype=float))
    m, D = U0.shape
    st = _State(rd, U0, extra, ridge, extra_lin)
    done = np.zeros(m, dtype=bool)
    conv = np.zeros(m, dtype=bool)
    vals = np.full(m, np.inf)
    iters = 0
    pen = np.zeros(D) if l1 is None else np.asarray(l1, dtype=float)
    factor = None  # single problem: (Cholesky factor of the last Hessian, the curvatures it was formed from)
    prev_dec = np.full(m, np.inf)  # each problem's last Newton decrement
    everyone = np.arange(m)
    matrix_free = m == 1 and l1 is None and fixed is None and (D > MATRIX_FREE_DIM or any(map(is_operator, rd.Js)))
    single = m == 1 and l1 is None and not matrix_free  # a restricted solve (polished below)
    reuse = single and fixed is None and D >= STALE_MIN_DIM  # Hessians worth avoiding (see _stale_direction)
    quad_finish = rd.quadratic and l1 is None and fixed is None and not matrix_free
    last = None  # (the last Hessian formed without its ridge, the curvatures it was formed from)
    if reuse and hint is not None:
        made = _factor_from_hint(st, hint)
        if made is not None:
            factor, last = made
    for _ in range(max_iter):
        iters += 1
        idx = np.flatnonzero(~done) if done.any() else everyone
        if len(idx) == 0:
            break
        f, g = st.fg(idx if len(idx) < m else slice(None))
        if fixed is not None:
            g[fixed[idx]] = 0.0
        vals[idx] = f
        bad = ~np.isfinite(f)
        done[idx[bad]] = True
        if D == 0:
            done[idx] = True
            conv[idx] = True
            break
        lazy = (
            _stale_direction(st, factor, g[0], float(f[0]), 2 * tol * (1.0 + abs(float(f[0]))))
            if single and factor is not None and not bad[0]
            else None
        )
        if matrix_free:
            step, dec = _cg_direction(st, g[0])
            step, dec = step[None, :], np.array([dec])
        elif lazy is not None:  # a certified step from an earlier factorization: no new Hessian
            step, dec = lazy[0][None, :], np.array([lazy[1]])  # the caller's test: dec <= bound stops
        else:
            factor = None
            H = st.hessians(idx)
            if fixed is not None:
                ii, qq = np.nonzero(fixed[idx])
                H[ii, qq, :] = 0.0
                H[ii, :, qq] = 0.0
                H[ii, qq, qq] = 1.0
            if l1 is not None:
                step = np.empty_like(g)
                dec = np.empty(len(idx))
                for a in range(len(idx)):
                    u = st.U[idx[a]]
                    z = cd_quadratic_l1(u, g[a], H[a], pen, lo=lower, hi=upper)
                    step[a] = z - u
                    dec[a] = -float(g[a] @ step[a] + pen @ (np.abs(z) - np.abs(u)))
            elif single:
                step, dec, c = _single_direction(H, g)
                if c is not None and reuse:
                    factor = (c, _curvatures(st))
                    last = (H[0] - np.diag(st.ridge) if st.ridge is not None else H[0], factor[1])
            else:
                step, dec = _newton_direction(H, g)
        if l1 is not None:
            stop = np.array(
                [
                    kkt_residual(st.U[i], g[a], pen, lower, upper) <= (kkt_tol if kkt_tol is not None else 0.0)
                    for a, i in enumerate(idx)
                ]
            )
            stop |= dec <= tol * tol * (1.0 + np.abs(f))
        else:
            stop = dec <= 2 * tol * (1.0 + np.abs(f))
        stop |= bad
        done[idx[stop]] = True
        conv[idx[stop & ~bad]] = True
        if single and stop[0] and not bad[0]:  # one solve whose coefficients are used (not scoring)
            _polish(st, idx[stop & ~bad], step[stop & ~bad], f[stop & ~bad], vals)
        if give_up is not None and l1 is None:
            hopeless = ~stop & (f - 2.0 * dec > give_up)
            done[idx[hopeless]] = True
            stop |= hopeless
        go = np.flatnonzero(~stop)
        if len(go) == 0:
            break
        rows = idx[go]
        Ug = st.U[rows]
        obj = f[go] + (np.abs(Ug) @ pen if l1 is not None else 0.0)
        steps = np.ones(len(go))
        pending = np.arange(len(go))
        accepted_full = np.zeros(len(go), dtype=bool)
        for _ls in range(50):
            r = rows[pending]
            Ut = Ug[pending] + steps[pending, None] * step[go[pending]]
            fs, keep = st.trial(r, Ut)
            ft = fs + np.abs(Ut) @ pen if l1 is not None else fs
            ok = ft <= obj[pending] - 0.25 * steps[pending] * dec[go[pending]]
            if ok.any():
                acc = pending[ok]
                Ua = None
                if l1 is not None:  # keep the exact zeros of the model minimizer after a full step
                    full = steps[pending] == 1.0
                    Z = Ug[pending] + step[go[pending]]
                    Ua = np.where(full[:, None] & (Z == 0.0), 0.0, Ut)
                st.accept(r, Ut if Ua is None else Ua, keep, ok)
                vals[r[ok]] = fs[ok]
                accepted_full[acc] = steps[acc] == 1.0
            pending = pending[~ok]
            if len(pending) == 0:
                break
            steps[pending] *= 0.5
        # no decrease along the direction: at the optimum up to rounding
        done[rows[pending]] = True
        conv[rows[pending]] = True
        if quad_finish:
            # one full Newton step solves a quadratic exactly
            fin = rows[accepted_full]
            done[fin] = True
            conv[fin] = True
        elif l1 is None and not matrix_free and m > 1:
            # batched scoring (values only; a single solve's coefficients are used, so it confirms and
            # polishes): a full step after which the next decrement, predicted at the last rate as dec * (dec / dec_prev)
            # (an overestimate when convergence is quadratic), is under the stopping test: skip the Hessian
            # that would only confirm it
            dg, bound = dec[go], 2 * tol * (1.0 + np.abs(f[go]))
            quad = accepted_full & np.isfinite(prev_dec[rows]) & (dg * dg <= bound * prev_dec[rows])
            done[rows[quad]] = True
            conv[rows[quad]] = True
        prev_dec[rows] = dec[go]
    d1 = st.d1(0) if m == 1 else None
    return NewtonResult(vals, st.U, iters, conv, d1, last)


def _polish(st: _State, rows: np.ndarray, step: np.ndarray, f: np.ndarray, vals: np.ndarray) -> None:
    """The Newton step that met the stopping test is taken too when it does not increase f (beyond
    rounding): at
    quadratic convergence it brings a decrement of 2 tol (1 + |f|) down to rounding, so that
    coefficients, not only values, are accurate (x to ~1e-12 instead of ~sqrt(tol)). One trial
    evaluation per problem."""
    if len(rows) == 0:
        return
    Ut = st.U[rows] + step
    ft, keep = st.trial(rows, Ut)
    ok = np.isfinite(ft) & (ft <= f + 4 * np.finfo(float).eps * (1.0 + np.abs(f)))  # f is flat here: rounding
    if ok.any():
        st.accept(rows, Ut, keep, ok)
        vals[rows[ok]] = ft[ok]


def _factor_from_hint(st: _State, hint: tuple[np.ndarray, np.ndarray, Any]) -> Any:
    """A Cholesky factor for the first step of a solve from the last Hessian of a previous solve on
    other columns (a support one swap away): ``hint = (pos, G, ref)`` with G = sum_t J_t' diag(c0_t)
    J_t on the previous columns (ridge out), c0 its curvatures ``ref``, and ``pos[k]`` the previous
    position of column k (-1 for a new column). The columns kept reuse G's entries; a new one costs
    one product with the data, J' diag(c0) J_k; the ridge is this solve's. H0 is then exactly the
    Hessian at the curvatures c0, so :func:`_stale_direction` certifies the first step from it as
    from any earlier factorization. None when the hint does not fit (other terms, sparse columns,
    H0 not positive definite); else (the factor, (G, ref) for the next solve)."""
    pos, G0, ref = hint
    d = st.d
    if ref is None or st.extra is not None or len(pos) != d or d == 0:
        return None
    terms = st.rd.terms
    if [t_i for t_i in st.act if not terms[t_i].quadratic] != [t_i for t_i, _ in ref] or any(
        terms[t_i].quadratic for t_i in st.act
    ):
        return None
    if not all(st.dense[t_i] for t_i, _ in ref):
        return None
    kept = np.flatnonzero(pos >= 0)
    new = np.flatnonzero(pos < 0)
    G = np.empty((d, d))
    G[np.ix_(kept, kept)] = G0[np.ix_(pos[kept], pos[kept])]
    if new.size:
        B = np.zeros((d, new.size))
        for t_i, c0 in ref:
            J = st.rd.Js[t_i]
            B += J.T @ (c0[:, None] * J[:, new])
        G[:, new] = B
        G[new, :] = B.T
    c = _cholesky(G + np.diag(st.ridge) if st.ridge is not None else G)
    if c is None:
        return None
    return (c, ref), (G, ref)


def _cholesky(H0: np.ndarray) -> np.ndarray | None:
    """The upper Cholesky factor of H0 (D, D) with a relative jitter of 1e-14 on the diagonal
    (LAPACK called directly: small D is common; H0 is not modified), or None when H0 is not
    numerically positive definite."""
    D = H0.shape[0]
    H0 = H0.copy()
    H0.flat[:: D + 1] += 1e-14 * abs(np.trace(H0)) / D
    c, info = dpotrf(H0, lower=False, clean=True, overwrite_a=True)
    return c if info == 0 else None


def _cholesky_step(H0: np.ndarray, g0: np.ndarray) -> tuple[np.ndarray, float, np.ndarray] | None:
    """The Newton step of one problem from the Cholesky factor of its Hessian H0 (:func:`_cholesky`):
    the step, its decrement and the factor, or None when H0 is not numerically positive definite."""
    c = _cholesky(H0)
    if c is None:
        return None
    x, info = dpotrs(c, g0)
    step = -x
    dec = -float(g0 @ step)
    return (step, dec, c) if info == 0 and dec >= 0 else None


def _single_direction(H: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The Newton step of one problem (H (1, D, D), g (1, D)) and the Cholesky factor it used
    (None when H was not numerically positive definite and a fallback gave the step)."""
    out = _cholesky_step(H[0], g[0])
    if out is not None:
        return out[0][None, :], np.array([out[1]]), out[2]
    step, dec = _newton_direction(H, g, cholesky_tried=True)
    return step, dec, None


def _curvatures(st: _State) -> list[tuple[int, np.ndarray]] | None:
    """The curvatures c_t = coef_t * phi_t'' of problem 0 that its Hessian depends on, one copy per
    non-quadratic term; None when some term's Hessian is not of the form J' diag(c) J with c >= 0
    (a row-wise loss, negative curvature, an extra column), where :func:`_stale_direction` cannot
    bound the change."""
    if st.extra is not None:
        return None
    out = []
    for t_i, t in enumerate(st.rd.terms):
        if t.quadratic:
            continue  # constant curvature
        d2 = st.D[t_i][2]
        if t.rowwise or d2 is None:
            return None
        c = t.coef * d2[0]
        if not c.min() >= 0:
            return None
        out.append((t_i, c))
    return out


STALE_CG = 4  # conjugate-gradient iterations a stale factorization may take before a fresh Hessian is formed
STALE_RATIO = 2.0  # ... when every curvature is within this factor of the factorized one's
STALE_MIN_DIM = 12  # ... and has at least this many coordinates (below, a Hessian costs less than the CG products)


def _stale_direction(
    st: _State,
    factor: tuple[np.ndarray, list[tuple[int, np.ndarray]] | None],
    g: np.ndarray,
    f: float,
    bound: float,
) -> tuple[np.ndarray, float] | None:
    """The Newton step of a restricted solve from an earlier iteration's Cholesky factor, without
    forming the Hessian, when its accuracy is certified; None otherwise (then the Hessian is formed
    as usual). Returns (step, decrement): a decrement at most ``bound`` is the certified bound on
    the true one (the solve stops), a larger one is the step's own.

    The Hessian is H = H0 + E with H0 the factorized one and E = sum_t J_t' diag(c_t - c0_t) J_t
    (the curvatures c_t = coef_t phi_t'' >= 0 moved; quadratic terms and the ridge do not). If
    every curvature moved by a factor within [lo, hi] (lo <= 1 <= hi), then lo H0 <= H <= hi H0.
    The step solves H s = -g by conjugate gradients preconditioned with H0 (each iteration: two
    products with the columns J and two triangular solves), from s0 = -H0^-1 g, with the exact
    residual r = -g - H s. With e = ||r||_{H0^-1} / sqrt(lo) >= ||r||_{H^-1}:

    * the Newton decrement d = g'H^-1 g satisfies sqrt(d) <= (e + sqrt(e^2 + 4 d_s)) / 2 with
      d_s = -g's; the solve stops only when this bound meets the stopping test ``bound`` (the same
      test as with a fresh Hessian) and the step's own error, at most e in the Hessian norm, is
      below d_s (the error an exact final Newton step leaves is of that order), so the polished
      coefficients are as accurate;
    * otherwise the step is taken when its relative residual ||r||_{H0^-1} / ||g||_{H0^-1} is at
      most eta = min(0.1, sqrt(d0 / (1 + |f|))) (d0 = g'H0^-1 g): an inexact Newton step whose
      forcing term shrinks with the gradient keeps Newton's quadratic convergence (Dembo,
      Eisenstat & Steihaug 1982), and the Armijo search uses -g's, its exact slope.

    It is tried when every curvature is within a factor 2 of H0's (then the preconditioned system
    has condition number at most 4 and a few iterations suffice)."""
    c, ref = factor
    if ref is None:
        return None
    s0, info = dpotrs(c, g)
    s0 = -s0
    dec0 = -float(g @ s0)
    if info != 0 or not dec0 >= 0:
        return None
    lo = hi = 1.0
    dc = []
    for t_i, c0 in ref:
        c1 = st.rd.terms[t_i].coef * st.D[t_i][2][0]
        with np.errstate(divide="ignore", invalid="ignore"):
            q = c1 / c0
        qlo, qhi = float(q.min()), float(q.max())
        if not (np.isfinite(qlo) and np.isfinite(qhi)):  # zero curvatures: 0/0 is no change, c/0 unbounded
            q = np.divide(c1, c0, out=np.where(c1 == c0, 1.0, np.inf), where=c0 > 0)
            qlo, qhi = float(q.min()), float(q.max())
        lo, hi = min(lo, qlo), max(hi, qhi)
        dc.append((t_i, c1 - c0))
    if not (lo >= 1.0 / STALE_RATIO and hi <= STALE_RATIO):
        return None
    tiny = 4 * np.finfo(float).eps * np.sqrt(dec0)
    eta = min(0.1, np.sqrt(dec0 / (1.0 + abs(f))))

    def E_times(v: np.ndarray) -> np.ndarray:
        out = np.zeros_like(v)
        for t_i, d in dc:
            J = st.rd.Js[t_i]
            if st.dense[t_i]:
                out += (d * (J @ v)) @ J
            else:
                out += _apply_t(J, (d * _apply(J, v[None, :])[0])[None, :])[0]
        return out

    s = s0
    r = -E_times(s0)  # -g - H s0 = -g - H0 s0 - E s0 = -E s0
    z = dpotrs(c, r)[0]
    rz = float(r @ z)
    p = z
    for it in range(STALE_CG + 1):
        e = np.sqrt(max(rz, 0.0) / lo)
        dec = -float(g @ s)
        if dec >= 0:
            a = 0.5 * (e + np.sqrt(e * e + 4.0 * dec))
            if a * a <= bound and e <= max(dec, tiny):
                return s, a * a
            if a * a > bound and rz <= eta * eta * dec0 and dec > bound:
                return s, dec
        if it == STALE_CG or rz <= 0:
            return None
        Hp = c.T @ (c @ p) + E_times(p)  # H0 = c'c (upper factor)
        pHp = float(p @ Hp)
        if not pHp > 0:
            return None
        alpha = rz / pHp
        s = s + alpha * p
        r = r - alpha * Hp
        z = dpotrs(c, r)[0]
        rz_new = float(r @ z)
        p = z + (rz_new / rz) * p
        rz = rz_new
    return None


def _newton_direction(H: np.ndarray, g: np.ndarray, cholesky_tried: bool = False) -> tuple[np.ndarray, np.ndarray]:
    m, D, _ = H.shape
    if m == 1 and not cholesky_tried:  # the restricted solves: one Cholesky factorization
        out = _cholesky_step(H[0], g[0])
        if out is not None:
            return out[0][None, :], np.array([out[1]])
    trace = np.einsum("mii->m", H)
    Hj = H + (1e-14 * np.abs(trace) / D)[:, None, None] * np.eye(D)
    try:
        step = -np.linalg.solve(Hj, g[:, :, None])[:, :, 0]
    except np.linalg.LinAlgError:
        step = np.empty_like(g)
        for a in range(m):
            step[a] = -np.linalg.lstsq(Hj[a], g[a], rcond=None)[0]
    dec = -np.einsum("ij,ij->i", g, step)
    neg = ~(dec >= 0)
    if neg.any():  # numerically singular Hessian: fall back to the gradient
        step[neg] = -g[neg]
        dec[neg] = np.einsum("ij,ij->i", g[neg], g[neg])
    return step, dec


def _cg_direction(st: _State, g: np.ndarray, max_iter: int = 250) -> tuple[np.ndarray, float]:
    """Newton-CG: an approximate solution of H s = -g by conjugate gradients (truncated when the
    residual is small relative to |g|, or at negative curvature)."""
    s = np.zeros_like(g)
    r = -g.copy()
    p = r.copy()
    rr = float(r @ r)
    gn = np.sqrt(rr)
    tol = min(0.5, np.sqrt(gn)) * gn * 1e-3
    for _ in range(max_iter):
        Hp = st.hvp(p)
        pHp = float(p @ Hp)
        if pHp <= 1e-300:
            if not s.any():
                s = -g.copy()
            break
        a = rr / pHp
        s += a * p
        r -= a * Hp
        rr_new = float(r @ r)
        if np.sqrt(rr_new) <= tol:
            break
        p = r + (rr_new / rr) * p
        rr = rr_new
    dec = -float(g @ s)
    if not dec > 0:
        s, dec = -g.copy(), float(g @ g)
    return s, dec


# ====================================================================== least squares


def lstsq(rd: Reduced, ridge: np.ndarray | None = None) -> np.ndarray:
    """Minimize sum_t c_t ||w_t^(1/2) (J_t u + z0_t)||^2 (+ ridge/2 ||u||^2) over u."""
    blocks, rhs = [], []
    anysparse = any(sp.issparse(J) for J in rd.Js)
    for t, J, z0 in zip(rd.terms, rd.Js, rd.offsets):
        s = np.sqrt(t.coef) * (np.sqrt(t.weights) if t.weights is not None else 1.0)
        if sp.issparse(J):
            blocks.append(sp.diags(np.broadcast_to(s, (J.shape[0],))) @ J)
        else:
            blocks.append(J * (s[:, None] if np.ndim(s) else s))
        rhs.append(-(s * z0))
    if ridge is not None:
        Rd = np.sqrt(0.5 * ridge)
        blocks.append(sp.diags(Rd) if anysparse else np.diag(Rd))
        rhs.append(np.zeros(len(ridge)))
    r = np.concatenate(rhs) if len(rhs) > 1 else rhs[0]
    if any(map(is_operator, rd.Js)):
        return _lsqr_operator(rd, ridge, r)
    if anysparse and rd.d > MATRIX_FREE_DIM:
        from scipy.sparse.linalg import lsqr

        M = sp.vstack([sp.csr_matrix(B) for B in blocks]).tocsr()
        return lsqr(M, r, atol=1e-14, btol=1e-14, iter_lim=20 * rd.d)[0]
    if anysparse:
        blocks = [B.toarray() if sp.issparse(B) else B for B in blocks]
    M = np.vstack(blocks) if len(blocks) > 1 else blocks[0]
    return lstsq_dense(M, r)


def _lsqr_operator(rd: Reduced, ridge: np.ndarray | None, r: np.ndarray) -> np.ndarray:
    """Least squares with matrix-free columns: conjugate gradients on the normal equations (CGLS
    through LSQR) of the stacked weighted operator."""
    from scipy.sparse.linalg import lsqr

    scales = [
        np.broadcast_to(np.sqrt(t.coef) * (np.sqrt(t.weights) if t.weights is not None else 1.0), (J.shape[0],))
        for t, J in zip(rd.terms, rd.Js)
    ]
    sizes = [J.shape[0] for J in rd.Js]
    Rd = np.sqrt(0.5 * ridge) if ridge is not None else None
    total = sum(sizes) + (rd.d if Rd is not None else 0)

    def mv(u: np.ndarray) -> np.ndarray:
        parts = [s * (J @ u) for s, J in zip(scales, rd.Js)]
        if Rd is not None:
            parts.append(Rd * u)
        return np.concatenate(parts)

    def rmv(y: np.ndarray) -> np.ndarray:
        out = np.zeros(rd.d)
        o = 0
        for s, J, n in zip(scales, rd.Js, sizes):
            out += J.T @ (s * y[o : o + n])
            o += n
        if Rd is not None:
            out += Rd * y[o:]
        return out

    M = LinearOperator((total, rd.d), matvec=mv, rmatvec=rmv, dtype=float)
    return lsqr(M, r, atol=1e-14, btol=1e-14, iter_lim=20 * rd.d)[0]


def lstsq_normal(G: np.ndarray, H: np.ndarray) -> np.ndarray:
    """Solve the normal equations G C = H (G symmetric positive semidefinite): Cholesky, or the
    minimum-norm least-squares solution when G is singular."""
    try:
        c = sla.cho_factor(G, check_finite=False)
        d = np.abs(np.diag(c[0]))
        if d.min() > 1e-7 * d.max():
            return sla.cho_solve(c, H, check_finite=False)
    except (np.linalg.LinAlgError, ValueError):
        pass
    return np.linalg.lstsq(G, H, rcond=None)[0]


def lstsq_dense(M: np.ndarray, r: np.ndarray) -> np.ndarray:
    """argmin ||M u - r||: Cholesky of M'M when well conditioned (cond(M) < ~1e5, so the normal
    equations lose no accuracy that matters at 1e-10), else QR without forming Q, else the
    minimum-norm SVD solution (rank-deficient M, e.g. more columns than rows)."""
    m = M.shape[1]
    if m == 0:
        return np.zeros(0)
    if M.shape[0] >= m:
        G = M.T @ M
        try:
            L = np.linalg.cholesky(G)
            d = np.diag(L)
            if d.min() > 1e-5 * d.max():
                return sla.cho_solve((L, True), M.T @ r, check_finite=False)
        except np.linalg.LinAlgError:
            pass
        qtr, R = sla.qr_multiply(M, r, mode="right")
        d = np.abs(np.diag(R))
        if d.min() > 1e-10 * max(d.max(), 1e-300):
            return sla.solve_triangular(R, qtr, check_finite=False)
    u, *_ = np.linalg.lstsq(M, r, rcond=None)
    return u


# ====================================================================== l1 model steps


def cd_quadratic_l1(
    u: np.ndarray,
    g: np.ndarray,
    H: np.ndarray,
    pen: np.ndarray,
    tol: float = 1e-13,
    max_sweeps: int = 5000,
    lo: np.ndarray | None = None,
    hi: np.ndarray | None = None,
) -> np.ndarray:
    """argmin_z g'(z-u) + 1/2 (z-u)'H(z-u) + sum_j pen_j |z_j| [lo <= z <= hi] by cyclic
    coordinate descent.

    Each coordinate step is exact: z_j <- S(z_j - (g_j + [H(z-u)]_j) / H_jj, pen_j / H_jj), with S
    the soft-thresholding operator, then clipped to [lo_j, hi_j] (the one-dimensional problem is
    convex, so clipping its unconstrained minimizer gives the constrained one). Stops when a sweep
    moves no coordinate by more than tol * (1 + max |z|)."""
    if lo is not None or hi is not None:
        lo = np.full(len(u), -np.inf) if lo is None else lo
        hi = np.full(len(u), np.inf) if hi is None else hi
    z = u.copy()
    r = np.zeros_like(u)  # H (z - u)
    diag = np.diag(H).copy()
    active = np.flatnonzero(diag > 0)
    for _ in range(max_sweeps):
        biggest = 0.0
        for j in active:
            a = diag[j]
            c = z[j] - (g[j] + r[j]) / a
            t = pen[j] / a
            new = c - t if c > t else (c + t if c < -t else 0.0)
            if lo is not None:
                new = min(max(new, lo[j]), hi[j])
            dz = new - z[j]
            if dz != 0.0:
                z[j] = new
                r += dz * H[:, j]
                biggest = max(biggest, abs(dz))
        if biggest <= tol * (1.0 + float(np.abs(z).max(initial=0.0))):
            break
    return z


def kkt_residual(
    u: np.ndarray, g: np.ndarray, pen: np.ndarray, lo: np.ndarray | None = None, hi: np.ndarray | None = None
) -> float:
    """Largest entry of the minimum-norm element of g + pen * d|u| (+ the normal cone of the box
    [lo, hi] at u, when given): zero exactly at a minimizer of g'x + sum pen_j |x_j| over the box."""
    on = u != 0
    a = np.where(on, g + pen * np.sign(u), g - pen)  # the subdifferential interval [a, b] per coordinate
    b = np.where(on, a, g + pen)
    if lo is not None:
        a = np.where(u <= lo, -np.inf, a)  # at the lower bound the normal cone adds (-inf, 0]
    if hi is not None:
        b = np.where(u >= hi, np.inf, b)
    r = np.where(a > 0, a, np.where(b < 0, -b, 0.0))
    return float(r.max(initial=0.0))


# ====================================================================== L-BFGS


def lbfgs(
    fun: Callable[[np.ndarray], tuple[float, np.ndarray]],
    u0: np.ndarray,
    tol: float = 1e-12,
    max_iter: int = 2000,
    bounds: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, int, bool, float]:
    """L-BFGS-B on a smooth function (value and gradient), optionally within ``bounds`` = (lo, hi)
    (infinite entries: unbounded); returns (u, iterations, success, f)."""
    from scipy.optimize import Bounds
    from scipy.optimize import minimize as sp_minimize

    b = None
    if bounds is not None:
        b = Bounds(bounds[0], bounds[1])
        u0 = np.clip(u0, bounds[0], bounds[1])
    res = sp_minimize(
        fun,
        u0,
        jac=True,
        method="L-BFGS-B",
        bounds=b,
        options={"maxiter": max_iter, "ftol": tol, "gtol": 1e-10, "maxcor": 30},
    )
    x = res.x if bounds is None else np.clip(res.x, bounds[0], bounds[1])
    return x, int(res.nit), bool(res.success), float(res.fun)


# ====================================================================== box constraints


@dataclass
class BoxResult:
    u: np.ndarray
    f: float
    iterations: int
    converged: bool


def box_newton(
    rd: Reduced,
    u0: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    ridge: np.ndarray | None = None,
    tol: float = 1e-12,
    max_iter: int = 200,
) -> BoxResult:
    """min f(u) [+ ridge/2 ||u||^2] over lo <= u <= hi for a reduced composite design: the
    projected Newton method of Bertsekas (1982, "Projected Newton methods for optimization
    problems with simple constraints", SIAM J. Control Optim. 20(2)).

    Each iteration splits the coordinates into the binding set B (within eps of a bound, with the
    gradient pushing outward; eps = min(1e-8 (1 + |u|_inf), |u - clip(u - g)|)) and the rest F; the
    direction is Newton's on F (the exact Hessian block H_FF) and a diagonally scaled gradient on B;
    the step is an Armijo search along the projection arc u(a) = clip(u + a d) with Bertsekas's
    sufficient decrease a g_F'd_F + g_B'(u_B - u_B(a)). It stops when the Newton decrement on F is
    below 2 tol (1 + |f|) with every binding coordinate at its bound (|u - clip(u - g)| <= tol), or when the arc
    search finds no decrease (the optimum up to rounding). On a quadratic it ends once the active
    set is identified (one full Newton step on F). Large or matrix-free designs use L-BFGS-B with
    bounds instead (:func:`lbfgs`)."""
    d = rd.d
    u = np.clip(np.asarray(u0, dtype=float), lo, hi)
    if d == 0:
        return BoxResult(u, evaluate(rd, u, 0, ridge)[0], 0, True)
    if d > MATRIX_FREE_DIM or any(map(is_operator, rd.Js)):

        def fun(v: np.ndarray) -> tuple[float, np.ndarray]:
            f, g, _ = evaluate(rd, v, 1, ridge)
            return (f, g) if np.isfinite(f) else (np.inf, np.zeros_like(v))

        v, its, ok, f = lbfgs(fun, u, tol=tol, bounds=(lo, hi))
        return BoxResult(v, f, its, ok)
    f, g, H = evaluate(rd, u, 2, ridge)
    its, converged = 0, False
    while its < max_iter and np.isfinite(f):
        its += 1
        pg = u - np.clip(u - g, lo, hi)
        eps = min(1e-8 * (1.0 + float(np.max(np.abs(u)))), float(np.linalg.norm(pg)))
        B = ((u <= lo + eps) & (g > 0)) | ((u >= hi - eps) & (g < 0))
        F = ~B
        step = np.zeros(d)
        if F.any():
            step[F] = _newton_direction(H[np.ix_(F, F)][None], g[F][None])[0][0]
        if B.any():
            step[B] = -g[B] / np.maximum(np.diag(H)[B], 1e-300)
        dec = -float(g[F] @ step[F])
        if dec <= 2 * tol * (1.0 + abs(f)) and float(np.max(np.abs(pg[B]), initial=0.0)) <= tol * (1.0 + eps):
            converged = True
            un = np.clip(u + step, lo, hi)  # the last step too when it does not increase f (as newton)
            fn = evaluate(rd, un, 0, ridge)[0]
            if np.isfinite(fn) and fn <= f + 4 * np.finfo(float).eps * (1.0 + abs(f)):
                u, f = un, fn
            break
        a, accepted = 1.0, False
        for _ in range(60):
            un = np.clip(u + a * step, lo, hi)
            fn = evaluate(rd, un, 0, ridge)[0]
            pred = a * dec + float(g[B] @ (u[B] - un[B]))
            if np.isfinite(fn) and fn <= f - 1e-4 * pred:
                accepted = True
                break
            a *= 0.5
        if not accepted or np.array_equal(un, u):
            converged = True  # no decrease along the arc: the optimum up to rounding
            break
        u = un
        f, g, H = evaluate(rd, u, 2, ridge)
    return BoxResult(u, float(f), its, converged)


# ====================================================================== power method


def power_method(
    hv: Callable[[np.ndarray], np.ndarray],
    truncate: Callable[[np.ndarray], np.ndarray],
    starts: list[np.ndarray],
    iters: int = 100,
    rtol: float = 1e-9,
) -> float:
    """Truncated power method: max over starts of the Rayleigh quotient v'Hv reached by
    v <- truncate(H v) / ||.|| (truncate keeps the structure: k coordinates, rank r, ...)."""

    def unit(v: np.ndarray) -> np.ndarray:
        v = truncate(v)
        nv = np.linalg.norm(v)
        return v / nv if nv > 0 else v

    best = 0.0
    for v in starts:
        v = unit(v)
        lam = 0.0
        for _ in range(iters):
            w = hv(v)
            lam_new = float(v @ w)
            v_new = unit(w)
            if not np.any(v_new):
                break
            if abs(lam_new - lam) <= rtol * max(abs(lam_new), 1e-300):
                lam = lam_new
                break
            lam, v = lam_new, v_new
        best = max(best, lam)
    return best


# ====================================================================== proximal gradient


@dataclass
class ProxResult:
    x: np.ndarray
    f: float  # smooth part at x
    iterations: int
    converged: bool


def fista(
    value_and_grad: Callable[[np.ndarray], tuple[float, np.ndarray]],
    prox: Callable[[np.ndarray, float], np.ndarray],
    penalty: Callable[[np.ndarray], float],
    x0: np.ndarray,
    L: float,
    tol: float = 1e-10,
    max_iter: int = 20000,
) -> ProxResult:
    """min f(x) + h(x) by accelerated proximal gradient (Beck & Teboulle 2009, FISTA) with the
    adaptive restart of O'Donoghue & Candes (2015) and backtracking on L: ``prox(z, t)`` is the
    proximal map of t*h, ``penalty(x)`` = h(x). Stops when the prox-gradient step moves x by at
    most ``tol * (1 + ||x||)`` (the gradient mapping, the first-order optimality measure)."""
    x = x0.copy()
    y = x.copy()
    t = 1.0
    fx, _ = value_and_grad(x)
    Fx = fx + penalty(x)
    its = 0
    stalled = 0  # iterations in a row without a decrease above rounding
    for its in range(1, max_iter + 1):
        fy, gy = value_and_grad(y)
        while True:
            xn = prox(y - gy / L, 1.0 / L)
            d = xn - y
            fn, _ = value_and_grad(xn)
            if fn <= fy + float(gy @ d) + 0.5 * L * float(d @ d) * (1 + 1e-12) + 1e-15 * abs(fy):
                break
            L *= 2.0
        Fn = fn + penalty(xn)
        step = float(np.linalg.norm(xn - x))
        stalled = stalled + 1 if Fn >= Fx - 1e-15 * abs(Fx) else 0
        if stalled >= 10:  # no progress left at machine precision
            return ProxResult(x, fx, its, True)
        if Fn > Fx:  # restart: the momentum overshot
            t, y = 1.0, x.copy()
            if float(np.linalg.norm(d)) <= tol * (1.0 + float(np.linalg.norm(x))):
                return ProxResult(x, fx, its, True)
            continue
        tn = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        y = xn + ((t - 1.0) / tn) * (xn - x)
        x, fx, Fx, t = xn, fn, Fn, tn
        if step <= tol * (1.0 + float(np.linalg.norm(x))):
            return ProxResult(x, fx, its, True)
    return ProxResult(x, fx, its, False)


def svt(M: np.ndarray, tau: float) -> np.ndarray:
    """Singular value thresholding: the proximal map of tau * ||M||_* (Cai, Candes & Shen 2010)."""
    U, s, Vt = np.linalg.svd(M, full_matrices=False)
    s = np.maximum(s - tau, 0.0)
    keep = s > 0
    return (U[:, keep] * s[keep]) @ Vt[keep]


# ====================================================================== ADMM for the log-determinant


@dataclass
class ADMMResult:
    Theta: np.ndarray  # the prox-side iterate: exactly sparse (support projection or soft thresholding)
    Omega: np.ndarray  # the box-side iterate: eigenvalues in [alpha, beta]
    Gamma: np.ndarray  # the multiplier (a warm start for the next solve)
    iterations: int  # eigen-decompositions
    converged: bool
    rho: float


def admm_logdet(
    S: np.ndarray,
    prox: Callable[[np.ndarray, float], np.ndarray],
    alpha: float = 0.0,
    beta: float = np.inf,
    rho: float = 1.0,
    Theta0: np.ndarray | None = None,
    Gamma0: np.ndarray | None = None,
    tol: float = 1e-10,
    max_iter: int = 5000,
    adaptive: bool = True,
) -> ADMMResult:
    """min -logdet(O) + <S, O> + h(Theta) s.t. O = Theta, alpha I <= O <= beta I, by the ADMM of
    paper 000, Appendix D.2 (splitting (31)):

    * (32) O = argmin_{alpha I <= O <= beta I} 1/2 ||O - M||_F^2 - (1/rho) logdet O with
      M = Theta - (S - Gamma)/rho: eigen-decompose M = V diag(lambda) V' and clip
      (lambda + sqrt(lambda^2 + 4/rho))/2 to [alpha, beta] (the paper's closed form);
    * (33) Theta = prox_{h/rho}(O - Gamma/rho): ``prox(Z, 1/rho)``; the support projection [.]_F of
      subproblem (13) (h the indicator of supp <= F), or soft thresholding of the off-diagonal for
      the graphical LASSO (h = lambda ||O^-||_1);
    * Gamma = Gamma - rho (O - Theta).

    Stops when the primal residual ||O - Theta||_F and the dual residual rho ||Theta - Theta_prev||_F
    are both at most tol * (1 + ||O||_F). ``adaptive`` balances the two residuals by rescaling rho
    (Boyd et al. 2011, Section 3.4.1: by 2 when one exceeds ten times the other; the multiplier is
    unaffected in this scaling); ``adaptive=False`` keeps the paper's fixed rho. Warm starts: the
    previous Theta and Gamma."""
    p = S.shape[0]
    Theta = np.eye(p) * max(alpha, 1.0) if Theta0 is None else Theta0.copy()
    Gamma = np.zeros((p, p)) if Gamma0 is None else Gamma0.copy()
    Omega = Theta
    converged = False
    it = 0
    while it < max_iter:
        it += 1
        M = Theta - (S - Gamma) / rho
        lam, V = np.linalg.eigh((M + M.T) / 2)
        lt = np.clip((lam + np.sqrt(lam * lam + 4.0 / rho)) / 2.0, alpha, beta)
        Omega = (V * lt) @ V.T
        Theta_prev = Theta
        Theta = prox(Omega - Gamma / rho, 1.0 / rho)
        Gamma = Gamma - rho * (Omega - Theta)
        r = float(np.linalg.norm(Omega - Theta))
        d = rho * float(np.linalg.norm(Theta - Theta_prev))
        scale = 1.0 + float(np.linalg.norm(Omega))
        if r <= tol * scale and d <= tol * scale:
            converged = True
            break
        if adaptive:
            if r > 10 * d:
                rho *= 2.0
            elif d > 10 * r:
                rho /= 2.0
    return ADMMResult(Theta, Omega, Gamma, it, converged, rho)


@dataclass
class CovselResult:
    Theta: np.ndarray  # exactly sparse on the support, symmetric
    W: np.ndarray  # the estimated covariance Theta^{-1} (equal to S on the support)
    sweeps: int
    converged: bool  # False also when a neighbourhood block of W was not positive definite


def covsel(
    S: np.ndarray, mask: np.ndarray, tol: float = 1e-8, max_sweeps: int = 100, W0: np.ndarray | None = None
) -> CovselResult:
    """The Gaussian maximum likelihood with a known graph, min -logdet(O) + <S, O> s.t. supp(O) in
    ``mask`` (diagonal included): subproblem (13) of paper 000 without its eigenvalue box, by the
    modified regression algorithm of Hastie, Tibshirani & Friedman (2009), Algorithm 17.1
    (Dempster's covariance selection; the dual: max logdet W s.t. W = S on the support).

    Start W = S, or the warm start ``W0`` (a previous solution's W, on another support) with the
    entries of this support set to S's, when that matrix is positive definite; sweep over the columns j: with N the neighbours of j, solve W_NN b = S_Nj (a
    Cholesky of a |N| x |N| block), set W_j = W_{:,N} b (mirrored) and W_jj = S_jj. Stops when a
    sweep moves no coefficient b by more than ``tol`` (the entries of W off every neighbourhood
    may converge much more slowly and do not enter Theta); then Theta_jj = 1 / (S_jj - W_Nj'b)
    and Theta_Nj = -b Theta_jj. A sweep costs sum_j (|N_j|^3 / 3 + p |N_j|) flops and no
    eigen-decomposition. Every block W_NN must be positive definite (it is when S is, or when
    each neighbourhood is smaller than the sample behind S); otherwise ``converged`` is False."""
    p = S.shape[0]
    eye = np.eye(p, dtype=bool)
    W = np.array(S, dtype=float, copy=True)
    if W0 is not None and W0.shape == S.shape:
        start = np.where(mask | eye, S, W0)
        if np.all(np.isfinite(start)) and dpotrf(start, lower=1)[1] == 0:  # positive definite
            W = start
    d = np.diag(S).copy()
    nbrs = [np.flatnonzero(mask[j] & ~eye[j]) for j in range(p)]
    B: list[np.ndarray] = [np.zeros(0)] * p
    rhs = [np.ascontiguousarray(S[nb, j]) for j, nb in enumerate(nbrs)]
    scale = tol  # on the regression coefficients b = -Theta_Nj / Theta_jj (scale-free)
    converged = False
    sweeps = 0
    prev = None
    while sweeps < max_sweeps:
        sweeps += 1
        for j in range(p):
            nb = nbrs[j]
            if nb.size == 0:
                continue
            rows = W.take(nb, 0)
            _, b, info = dposv(rows.take(nb, 1), rhs[j])
            if info != 0:
                return CovselResult(np.diag(1.0 / d), W, sweeps, False)
            B[j] = b
            new = b @ rows
            new[j] = d[j]
            W[:, j] = new
            W[j, :] = new
        if not np.all(np.isfinite(W)):
            return CovselResult(np.diag(1.0 / d), W, sweeps, False)
        coef = np.concatenate(B)
        if prev is not None and (coef.size == 0 or float(np.max(np.abs(coef - prev))) <= scale):
            converged = True
            break
        prev = coef
    Theta = np.zeros((p, p))
    for j in range(p):
        nb = nbrs[j]
        t = 1.0 / (d[j] - float(W[nb, j] @ B[j])) if nb.size else 1.0 / d[j]
        Theta[j, j] = t
        Theta[nb, j] = -B[j] * t
    return CovselResult((Theta + Theta.T) / 2, W, sweeps, converged and bool(np.all(np.diag(Theta) > 0)))


@dataclass
class BarrierResult:
    Theta: np.ndarray  # exactly sparse on the support, eigenvalues strictly inside (alpha, beta)
    iterations: int  # Newton steps (each: an m x m Cholesky and three p x p ones, no eigen-decomposition)
    converged: bool
    gap: float  # the barrier's bound on f(Theta) - min (13): mu * (number of logdet barriers) * p


def _pd_inverse(M: np.ndarray) -> tuple[float, np.ndarray] | None:
    """(logdet M, M^{-1}) by Cholesky, or None when M is not positive definite."""
    c, info = dpotrf(M, lower=1, clean=1)
    if info != 0:
        return None
    d = np.diag(c)
    if not np.all(d > 0):
        return None
    inv, info = dpotri(c, lower=1)
    if info != 0:
        return None
    inv = np.tril(inv) + np.tril(inv, -1).T
    return 2.0 * float(np.log(d).sum()), inv


def logdet_box_newton(
    S: np.ndarray,
    mask: np.ndarray,
    alpha: float = 0.0,
    beta: float = np.inf,
    Theta0: np.ndarray | None = None,
    tol: float = 1e-12,
    max_iter: int = 500,
    mu0: float = 1e-3,
    shrink: float = 10.0,
) -> BarrierResult:
    """Subproblem (13) of paper 000, min -logdet(O) + <S, O> s.t. supp(O) in ``mask`` and
    alpha I <= O <= beta I, by a primal barrier method with exact Newton steps on the m free
    entries of O (the diagonal and the upper triangle of the support): for mu decreasing by 10,
    minimize

        -logdet(O) + <S, O> - mu logdet(O - alpha I) - mu logdet(beta I - O)

    by damped Newton (Armijo backtracking that keeps both barriers finite). The gradient of the
    entry theta_ij (a pair (i, j), (j, i), or a diagonal entry) is w_ij G_ij with G = S - O^{-1} -
    mu (O - alpha I)^{-1} + mu (beta I - O)^{-1} (w = 2 off the diagonal, 1 on it), and the
    Hessian of -logdet at the entries (a, b) is the entry of A (x) A: (w_a w_b / 2)
    (A_{j_a i_b} A_{i_a j_b} + A_{j_a j_b} A_{i_a i_b}) with A = O^{-1}, and the same for each
    barrier with its own inverse. A bound (alpha <= 0, beta = inf) that is absent has no barrier.

    The answer is within mu * (p per barrier) of the minimum of (13) (the barrier's duality gap),
    and the iteration stops when that bound is below ``tol`` * (1 + |f|). Each Newton step costs
    one Cholesky factorization of an m x m matrix and three of p x p ones; no eigen-decomposition,
    so the cost does not depend on how ill-conditioned the box makes the problem (the ADMM of
    Appendix D.2, a first-order method, needs thousands of eigen-decompositions when the box
    binds on data whose covariance has condition number 1e5). ``Theta0``: a start (any matrix on
    the support, pulled into the box's interior toward a multiple of the identity)."""
    p = S.shape[0]
    eye = np.eye(p)
    I, J = np.nonzero(np.triu(mask | np.eye(p, dtype=bool)))
    w = np.where(I == J, 1.0, 2.0)
    ww = 0.5 * np.outer(w, w)
    lower, upper = alpha > 0, np.isfinite(beta)
    nu = p * (int(lower) + int(upper))  # the barriers' parameter: the gap at mu is at most mu * nu
    # a strictly feasible start: O = t Theta0 + (1 - t) c I with the largest t in [0, 1] that keeps
    # the eigenvalues a little inside [alpha, beta]
    c = np.sqrt(alpha * beta) if lower and upper else (2.0 * alpha if lower else (beta / 2.0 if upper else 1.0))
    if not lower and not upper:
        c = 1.0 / max(float(np.mean(np.diag(S))), 1e-300)
    lo_t = alpha + 1e-3 * (c - alpha) if lower else 0.0
    hi_t = beta - 1e-3 * (beta - c) if upper else np.inf
    O = c * eye
    if Theta0 is not None and np.all(np.isfinite(Theta0)):
        T = np.where(mask | np.eye(p, dtype=bool), (Theta0 + Theta0.T) / 2, 0.0)
        lam = np.linalg.eigvalsh(T)
        t = 1.0
        if lam[0] < lo_t:
            t = min(t, (c - lo_t) / (c - lam[0]))
        if lam[-1] > hi_t:
            t = min(t, (hi_t - c) / (lam[-1] - c))
        if lam[0] <= 0 and not lower:
            t = min(t, 0.5 * c / (c - lam[0]))
        O = t * T + (1.0 - t) * c * eye

    def parts(M: np.ndarray, mu: float) -> tuple[float, list[tuple[float, np.ndarray]]] | None:
        """phi_mu(M) and the (weight, inverse) of each logdet term, or None outside the domain."""
        one = _pd_inverse(M)
        if one is None:
            return None
        val = -one[0] + float(np.sum(S * M))
        invs = [(1.0, one[1])]
        if lower:
            two = _pd_inverse(M - alpha * eye)
            if two is None:
                return None
            val -= mu * two[0]
            invs.append((mu, two[1]))
        if upper:
            three = _pd_inverse(beta * eye - M)
            if three is None:
                return None
            val -= mu * three[0]
            invs.append((-mu, three[1]))  # d/dM of -mu logdet(beta I - M) is +mu (beta I - M)^{-1}
        return val, invs

    f0 = parts(O, 0.0)
    scale = 1.0 + (abs(f0[0]) if f0 is not None else 1.0)
    mu = mu0 * scale / max(nu, 1)
    mu_final = tol * scale / max(nu, 1)
    if nu == 0:
        mu = mu_final = 0.0
    it = 0
    converged = False
    cur = parts(O, mu)
    if cur is None:
        return BarrierResult(O, 0, False, np.inf)
    while it < max_iter:
        val, invs = cur
        G = S.copy()
        H = np.zeros((len(I), len(I)))
        for weight, A in invs:
            G -= weight * A
            H += abs(weight) * (A[np.ix_(J, I)] * A[np.ix_(I, J)] + A[np.ix_(J, J)] * A[np.ix_(I, I)])
        H *= ww
        g = w * G[I, J]
        try:
            cf = sla.cho_factor(H, lower=True, check_finite=False)
            d = -sla.cho_solve(cf, g, check_finite=False)
        except (np.linalg.LinAlgError, ValueError):
            d = -np.linalg.lstsq(H, g, rcond=None)[0]
        dec = float(-g @ d)  # the Newton decrement squared of phi_mu
        # phi_mu / mu = f / mu + barriers is self-concordant (f is, and 1 / mu >= 1), so its own decrement,
        # dec / mu, says how far from the centre of this mu the point is; rounding limits dec to ~1e-13 |phi|
        final = mu <= mu_final
        floor = 1e-13 * (1.0 + abs(val))
        if not np.isfinite(dec) or dec <= max(0.1 * mu, floor):
            if final:
                converged = bool(np.isfinite(dec))
                break
            mu = max(mu / shrink, mu_final)
            cur = parts(O, mu)
            if cur is None:
                break
            continue
        it += 1
        D = np.zeros((p, p))
        D[I, J] = d
        D[J, I] = d
        step = 1.0
        while step > 1e-12:
            trial = parts(O + step * D, mu)
            if trial is not None and trial[0] <= val - 0.25 * step * dec:
                break
            step /= 2.0
        else:  # no decrease along the Newton direction: rounding has the last word
            converged = final and dec <= max(mu, 1e3 * floor)
            break
        stalled = val - trial[0] <= 1e-15 * (1.0 + abs(val))  # a step that rounding cannot tell from none
        O = O + step * D
        cur = trial
        if stalled:
            converged = final and dec <= max(mu, 1e3 * floor)
            if not final:
                mu = max(mu / shrink, mu_final)
                cur = parts(O, mu)
                if cur is not None:
                    continue
            break
    return BarrierResult((O + O.T) / 2, it, converged, mu * nu)


def shift_into_box(O: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    """O + c I with the smallest |c| that puts the eigenvalues of O into [alpha, beta] (c = 0 when
    they are; the support is unchanged when the diagonal is in it). An ADMM solution's sparse
    iterate is within its primal residual of the box; this makes it exactly feasible."""
    lam = np.linalg.eigvalsh(O)
    c = 0.0
    if lam[0] < alpha:
        c = alpha - lam[0]
    elif lam[-1] > beta:
        c = beta - lam[-1]
    if c == 0.0:
        return O
    out = O.copy()
    out[np.diag_indices_from(out)] += c
    return out


def support_prox(mask: np.ndarray) -> Callable[[np.ndarray, float], np.ndarray]:
    """[Z]_F: keep the entries in the support ``mask`` (symmetric, diagonal included), zero the rest."""
    return lambda Z, t: np.where(mask, (Z + Z.T) / 2, 0.0)


def soft_offdiag_prox(lam: float | np.ndarray) -> Callable[[np.ndarray, float], np.ndarray]:
    """Soft thresholding of the off-diagonal entries by t * lam (the diagonal is not penalized)."""

    def prox(Z: np.ndarray, t: float) -> np.ndarray:
        Z = (Z + Z.T) / 2
        out = np.sign(Z) * np.maximum(np.abs(Z) - t * lam, 0.0)
        np.fill_diagonal(out, np.diag(Z))
        return out

    return prox


__all__ = [
    "BoxResult",
    "NewtonResult",
    "box_newton",
    "cd_quadratic_l1",
    "evaluate",
    "kkt_residual",
    "lbfgs",
    "lstsq",
    "lstsq_dense",
    "lstsq_normal",
    "newton",
    "power_method",
    "fista",
    "svt",
    "admm_logdet",
    "covsel",
    "logdet_box_newton",
    "shift_into_box",
    "support_prox",
    "soft_offdiag_prox",
]
