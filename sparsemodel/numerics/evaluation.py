"""Values, gradients and Hessians of reduced composite problems: the arithmetic every Newton
step, line search and Hessian-vector product of :mod:`sparsemodel.numerics.newton` reads.

A reduced problem is a :class:`~sparsemodel.objective.terms.Reduced` design (each term's Jacobian
columns on the coordinates solved for, its offset, the linear part); :class:`_State` holds m such
problems at their current coefficients (affine values, loss derivatives) and evaluates trial
points. A separable quadratic term (a ridge) is folded into a diagonal.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from ..objective.terms import Reduced

CHUNK = 4_000_000  # entries per block when streaming products


FOLD_LIMIT = 1_000_000  # entries: a dense quadratic term larger than this is not checked for being a ridge


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
        f = U[:, :d] @ rd.lin + rd.const
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
            if not t.diagonal:  # row-wise and whole-vector losses apply their Hessian to the columns
                z = self.Z[t_i][idx]
                slots = self._class_columns(t_i) if t.rowwise and self.extra is None else None
                if slots is not None:  # (the softmax of Z = X W + b: blocks by pair of classes)
                    for a in range(m):
                        H[a] += t.coef * t.class_hessian(z[a], *slots)
                    continue
                for a, i in enumerate(idx):
                    Ja = J.toarray() if sp.issparse(J) else np.asarray(J)
                    if self.extra is not None:
                        Ja = np.hstack([Ja, self.extra[t_i][i][:, None]])
                    H[a] += t.coef * (Ja.T @ t.hessian_apply(z[a], Ja))
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

    def _class_columns(self, t_i: int) -> tuple[np.ndarray, np.ndarray] | None:
        """``Term.class_columns`` of row-wise term t_i's columns (dense or sparse; None for an
        operator or columns that read several classes), read once per state (its Newton steps)."""
        got = self.__dict__.setdefault("_slots", {})
        if t_i not in got:
            J = self.rd.Js[t_i]
            got[t_i] = None if is_operator(J) else self.rd.terms[t_i].class_columns(J)
        return got[t_i]

    def hvp(self, v: np.ndarray) -> np.ndarray:
        """Hessian of problem 0 times v (matrix free)."""
        rd = self.rd
        out = np.zeros(self.d)
        for t_i in self.act:
            t = rd.terms[t_i]
            J = rd.Js[t_i]
            Jv = _apply(J, v[None, :])[0]
            d2 = self.D[t_i][2]
            r = t.hessian_apply(self.Z[t_i][0], Jv, d2[0] if d2 is not None else None)
            out += t.coef * _apply_t(J, r[None, :])[0]
        if self.ridge is not None:
            out += self.ridge * v
        return out

    def trial(self, idx: np.ndarray, U: np.ndarray) -> tuple[np.ndarray, list[Any]]:
        """Values at trial coefficients U for problems idx (and what to keep if accepted)."""
        rd = self.rd
        f = U[:, : self.d] @ rd.lin + rd.const
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
    if not t.quadratic or not t.diagonal or is_operator(J) or np.any(offset):
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
