"""The swap model: the second-order model of every one-unit swap at a restricted minimizer, what
``auto`` ranks its swaps by (exact on least squares; see :class:`SwapModel`).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp
from scipy.linalg.lapack import dpotrf, dpotri, dpotrs

from .active import gram_pays

if TYPE_CHECKING:
    from .lowered import LoweredProblem


class SwapModel:
    """The second-order model of one-unit swaps at a restricted minimizer.

    At x = argmin { f : supp_C within the units ``units_in`` } (free coordinates F optimized) with
    gradient g, write B for the selected and free coordinates, H the Hessian of f at x,
    A = H_BB^-1 and, for a candidate unit I, sigma_I = H_II - H_IB A H_BI (the Schur complement).
    The model q(d) = g'd + d'Hd/2 of f(x + d) predicts

    * ``gain[I]`` = g_I' sigma_I^-1 g_I / 2: the decrease of f when unit I enters (the others refit);
    * ``removal[J]`` = x_J' (A_JJ)^-1 x_J / 2: the increase when unit J leaves;
    * ``delta[J, I]``: the change when J leaves and I enters at once, the minimum of q over the
      support B ∪ I with d_J = -x_J: -gain[I] + e' K_JJ^-1 e / 2 with K = H_{B∪I}^-1 (bordered
      inverse: K_JJ = A_JJ + (A H_BI)_J sigma_I^-1 (A H_BI)_J') and e = x_J + (A H_BI)_J sigma_I^-1 g_I.

    On least squares the model is f itself, so every value is exact (the closed forms of insertion
    and removal above, and the exact value of each swap); on other losses it is the Newton model,
    exact to second order. Units are coordinates, or groups of one size: ``members`` (units x size)
    holds the positions into C of each unit's coordinates. ``delta`` is computed for the candidates
    of largest gain: since delta[J, I] >= -gain[I], the candidates left out cannot beat the best
    swap found (on quadratic objectives the set is widened until they cannot; elsewhere up to four
    times ``candidates``). :meth:`warm` gives the model's minimizer on
    a new support, the warm start of its exact restricted solve.
    """

    def __init__(
        self,
        lp: LoweredProblem,
        x: np.ndarray,
        g: np.ndarray,
        units_in: np.ndarray,
        members: np.ndarray,
        candidates: int = 64,
        pool: int | None = None,
        jitter: float = 1e-10,
    ):
        d = lp.design
        sps = lp.sparsity
        C, F = sps.coords, sps.free
        members = np.asarray(members, dtype=np.int64).reshape(len(members), -1)
        nunits, m = members.shape
        units_in = np.asarray(units_in, dtype=np.int64)
        inside = np.zeros(nunits, dtype=bool)
        inside[units_in] = True
        units_out = np.flatnonzero(~inside)
        if pool is not None and len(units_out) > pool:
            units_out = np.sort(units_out[_screen(lp, x, g, C[members[units_out]], m)[:pool]])
        B = np.concatenate([C[members[units_in].ravel()], F]).astype(np.int64)  # unit by unit, then F
        Icols = C[members[units_out].ravel()]
        nb, ni, nI, nJ = len(B), len(Icols), len(units_out), len(units_in)
        HBB = np.zeros((nb, nb))
        HBI = np.zeros((nb, ni))
        HII = np.zeros((nI, m, m))  # the diagonal blocks of the candidate units
        Hc = (
            lp.hessian_columns(B)
            if m == 1 and gram_pays(lp, nb + len(Icols)) and not any(v.symmetric for v in lp.layout.variables)
            else None
        )
        if Hc is not None:  # a constant Hessian: its columns for B are cached, the diagonal comes from the squares
            HBB, HBI = Hc[B], Hc[Icols].T
            HII[:, 0, 0] = lp.hessian_diagonal()[Icols]
        for ti, t in enumerate(d.terms if Hc is None else ()):
            ridge = d.separable_diagonal(ti)
            if ridge is not None:  # a separable ridge: diagonal, no coupling between coordinates
                HBB[np.arange(nb), np.arange(nb)] += ridge[B]
                HII[:, np.arange(m), np.arange(m)] += ridge[Icols].reshape(nI, m)
                continue
            z = t.map.value(x)
            stored = lp.stored_columns(ti)
            if stored is not None and t.diagonal and not sp.issparse(stored[0]) and 4 * len(Icols) > lp.n:
                # most columns are candidates: products with the whole stored Jacobian (contiguous,
                # no gather of the candidates' columns), the diagonal from its stored squares
                J, sq = stored
                w2 = t.coef * t.derivs(z, 2)[2]
                LB = J[:, B] * w2[:, None]
                HBB += J[:, B].T @ LB
                HBI += (LB.T @ J)[:, Icols]
                HII[:, np.arange(m), np.arange(m)] += (sq.T @ w2)[Icols].reshape(nI, m)
                if m > 1:  # the off-diagonal entries within each candidate unit
                    J3 = J[:, Icols].reshape(J.shape[0], nI, m)
                    L3 = J3 * w2[:, None, None]
                    for a_ in range(m):
                        for b_ in range(a_ + 1, m):
                            HII[:, a_, b_] += np.einsum("ru,ru->u", J3[:, :, a_], L3[:, :, b_])
                            HII[:, b_, a_] = HII[:, a_, b_]
                continue
            JB = stored[0][:, B] if stored is not None else d.term_columns(ti, B)
            slots = None  # a row-wise loss whose every stored column reads one class: blocks from the values
            if t.rowwise and not t.diagonal and stored is not None:
                slots = _one_slot_of(lp, ti, stored)
            JI = None  # the candidates' columns: not gathered where the blocks come from the values (Khan: 5%)
            if slots is None:
                JI = stored[0][:, Icols] if stored is not None else d.term_columns(ti, Icols)
            if t.diagonal:  # H_t = J' diag(c w phi'') J, sparse columns kept sparse (a ridge's identity)
                w2 = t.coef * t.derivs(z, 2)[2]
                if sp.issparse(JB) or sp.issparse(JI):
                    JB, JI = sp.csc_matrix(JB), sp.csc_matrix(JI)
                    LI = sp.diags(w2) @ JI
                    HBB += (JB.T @ (sp.diags(w2) @ JB)).toarray()
                    HBI += (JB.T @ LI).toarray()
                    if m == 1:
                        HII[:, 0, 0] += np.asarray(JI.multiply(LI).sum(axis=0)).ravel()
                    else:
                        G = (JI.T @ LI).tocsr()
                        r_ = np.arange(ni).reshape(nI, m)
                        ra = np.broadcast_to(r_[:, :, None], (nI, m, m)).ravel()
                        rb = np.broadcast_to(r_[:, None, :], (nI, m, m)).ravel()
                        HII += np.asarray(G[ra, rb]).reshape(nI, m, m)
                    continue
                JB, JI = np.asarray(JB, dtype=float), np.asarray(JI, dtype=float)
                LB = JB * w2[:, None]
                HBB += JB.T @ LB
                HBI += LB.T @ JI
                LI = JI * w2[:, None]
            else:  # the row-wise softmax, a whole-vector loss: its Hessian applied to the columns
                JB = JB.toarray() if sp.issparse(JB) else np.asarray(JB, dtype=float)
                LB = t.coef * t.hessian_apply(z, JB)
                HBB += JB.T @ LB
                if t.rowwise and stored is None:
                    slots = _one_slot(JI, t.map.shape[1])
                if slots is not None:  # every column reads one class (Z = X W + b): blocks from the values
                    V, cls = slots
                    if stored is not None:
                        V, cls = V[:, Icols], cls[Icols]
                    mc = t.map.shape[1]
                    Lam = t.coef * t.row_hessians(z)  # (n, mc, mc): each row's loss Hessian
                    for c_ in range(mc):
                        on = np.flatnonzero(cls == c_)
                        if len(on):
                            HBI[:, on] += LB[c_::mc].T @ V[:, on]
                    V3, cls3 = V.reshape(V.shape[0], nI, m), cls.reshape(nI, m)
                    for a_ in range(m):
                        for b_ in range(a_, m):
                            lam_ab = Lam[:, cls3[:, a_], cls3[:, b_]]  # (n, nI)
                            HII[:, a_, b_] += np.einsum("iu,iu->u", V3[:, :, a_] * lam_ab, V3[:, :, b_])
                            if b_ != a_:
                                HII[:, b_, a_] = HII[:, a_, b_]
                    continue
                JI = JI.toarray() if sp.issparse(JI) else np.asarray(JI, dtype=float)
                HBI += LB.T @ JI
                LI = t.coef * t.hessian_apply(z, JI)
            if m == 1:
                HII[:, 0, 0] += np.einsum("ru,ru->u", JI, LI)
            else:
                J3, L3 = JI.reshape(JI.shape[0], nI, m), LI.reshape(LI.shape[0], nI, m)
                for a_ in range(m):
                    for b_ in range(a_, m):
                        HII[:, a_, b_] += np.einsum("ru,ru->u", J3[:, :, a_], L3[:, :, b_])
                        if b_ != a_:
                            HII[:, b_, a_] = HII[:, a_, b_]
        HBB = 0.5 * (HBB + HBB.T)
        lam = jitter * max(float(np.trace(HBB)) / max(nb, 1), 1e-300)
        A = _inverse_pd(HBB, lam)
        AB = A @ HBI  # (nb, ni)
        xJ = x[B[: nJ * m]].reshape(nJ, m)
        gI = g[Icols].reshape(nI, m)
        if m == 1:  # single coordinates: every quantity is a vector, every pair one formula
            s1 = HII[:, 0, 0] - np.einsum("ri,ri->i", HBI, AB)
            s1 += jitter * np.maximum(np.abs(HII[:, 0, 0]), 1e-300)
            with np.errstate(divide="ignore", invalid="ignore"):
                v1 = gI[:, 0] / s1
            sigma, v = s1[:, None, None], v1[:, None]
            AJJ = np.diagonal(A)[:nJ].reshape(nJ, 1, 1)
            with np.errstate(divide="ignore", invalid="ignore"):
                removal = 0.5 * xJ[:, 0] ** 2 / AJJ[:, 0, 0]
        else:
            # H_IB A H_BI per candidate unit as one batched product (nI, m, nb) @ (nI, nb, m)
            sigma = HII - np.matmul(HBI.reshape(nb, nI, m).transpose(1, 2, 0), AB.reshape(nb, nI, m).transpose(1, 0, 2))
            sigma = 0.5 * (sigma + np.swapaxes(sigma, 1, 2))
            sigma += (jitter * np.maximum(np.einsum("uaa->u", np.abs(HII)) / m, 1e-300))[:, None, None] * np.eye(m)
            v = _batched_solve(sigma, gI)  # sigma_I^-1 g_I
            idx = np.arange(nJ * m).reshape(nJ, m)
            AJJ = A[idx[:, :, None], idx[:, None, :]]  # (nJ, m, m)
            removal = 0.5 * np.einsum("ja,ja->j", xJ, _batched_solve(AJJ, xJ)) if nJ else np.zeros(0)
        gain = 0.5 * np.einsum("ua,ua->u", gI, v)
        gain = np.where(np.isfinite(gain), np.maximum(gain, 0.0), 0.0)
        self.units_in, self.units_out, self.m = units_in, units_out, m
        self.gain, self.removal = gain, removal
        self.x, self.g, self.B, self.Icols = x, g, B, Icols
        self.HBB, self.HBI, self.HII = HBB, HBI, HII
        self._rank_in = np.full(nunits, -1, dtype=np.int64)
        self._rank_in[units_in] = np.arange(nJ)
        self._rank_out = np.full(nunits, -1, dtype=np.int64)
        self._rank_out[units_out] = np.arange(nI)
        self._parts = (AB, sigma, v, xJ, AJJ, nJ, m)
        self._widening = (candidates, d.quadratic)
        self._cand_delta: tuple[np.ndarray, np.ndarray] | None = None  # on first use (a fill reads gains only)

    @property
    def cand(self) -> np.ndarray:
        """The candidates of the pair values: indices into units_out, by decreasing gain."""
        return self._pair_values()[0]

    @property
    def delta(self) -> np.ndarray:
        """The pair values delta[J, I] of the candidates, (units in, len(cand))."""
        return self._pair_values()[1]

    def _pair_values(self) -> tuple[np.ndarray, np.ndarray]:
        if self._cand_delta is not None:
            return self._cand_delta
        candidates, quadratic = self._widening
        gain, nJ, nI = self.gain, len(self.units_in), len(self.units_out)
        order = np.argsort(-gain, kind="stable")
        take = min(nI, max(candidates, 1))
        # widen only where the model is f (a quadratic objective): elsewhere its best is a guess anyway
        widest = nI if quadratic else min(nI, 4 * take)
        # the pairs of every candidate up to the widest set at once (one vectorized pass instead of
        # a pass per widening), the set then chosen by the widening rule
        every = self._pairs(order[:widest]) if nJ else None
        while nJ:  # pair values for the candidates of largest gain, widened until none left out can win
            cols = order[:take]
            delta = every[:, :take] if every is not None else self._pairs(cols)
            best = float(delta.min()) if delta.size else 0.0
            if take >= widest or -gain[order[take]] >= best:
                break
            take = min(widest, 2 * take)
        if not nJ:
            cols, delta = order[:take], np.zeros((0, take))
        self._cand_delta = (cols, delta)
        return self._cand_delta

    def _pairs(self, cols: np.ndarray) -> np.ndarray:
        AB, sigma, v, xJ, AJJ, nJ, m = self._parts
        nb = AB.shape[0]
        if nJ == 0 or len(cols) == 0:
            return np.zeros((nJ, len(cols)))
        nc = len(cols)
        if m == 1:
            ABc1 = AB[:nJ, cols]  # (J, I)
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                K = AJJ[:, 0, 0][:, None] + ABc1**2 / sigma[cols, 0, 0][None, :]
                e = xJ[:, 0][:, None] + ABc1 * v[cols, 0][None, :]  # x_J + (A H_BI)_J sigma_I^-1 g_I
                delta = -self.gain[cols][None, :] + 0.5 * e * e / K
        else:
            ABc = AB.reshape(nb, -1, m)[: nJ * m, cols, :].reshape(nJ, m, nc, m).transpose(0, 2, 1, 3)  # (J, I, a, b)
            dJ = np.einsum("jiab,ib->jia", ABc, v[cols])  # (A H_BI)_J sigma_I^-1 g_I
            # sigma_I^-1 once per candidate, then products (not a solve per pair)
            Sinv = _batched_solve(sigma[cols], np.broadcast_to(np.eye(m), (nc, m, m)))
            K = AJJ[:, None] + np.matmul(np.matmul(ABc, Sinv[None]), np.swapaxes(ABc, 2, 3))
            e = xJ[:, None, :] + dJ
            q = _batched_solve(K.reshape(-1, m, m), e.reshape(-1, m)).reshape(nJ, nc, m)
            delta = -self.gain[cols][None, :] + 0.5 * np.einsum("jia,jia->ji", e, q)
        return np.where(np.isfinite(delta), delta, np.inf)

    def swaps(self, limit: int | None = None) -> list[tuple[int, int, float]]:
        """The ``limit`` best swaps (unit out, unit in, predicted change of f), best first."""
        D = self.delta.ravel()
        if limit is not None and limit < D.size:
            top = np.argpartition(D, limit - 1)[:limit]
            flat = top[np.argsort(D[top], kind="stable")]
        else:
            flat = np.argsort(D, kind="stable")
        nc = self.delta.shape[1]
        j, c = np.divmod(flat, nc)
        return list(zip(self.units_in[j].tolist(), self.units_out[self.cand[c]].tolist(), D[flat].tolist()))

    def warm(self, pairs: list[tuple[int, int]]) -> np.ndarray:
        """The minimizer of the model over the support with the units ``J`` of ``pairs`` removed and
        the units ``I`` added (x_J = 0; the Hessian between two entering units taken as zero): a
        warm start for the exact restricted solve, exact on least squares for one swap."""
        m = self.m
        out_rows = np.concatenate([np.arange(self._rank_in[J] * m, (self._rank_in[J] + 1) * m) for J, _ in pairs])
        in_cols = np.concatenate([np.arange(self._rank_out[I] * m, (self._rank_out[I] + 1) * m) for _, I in pairs])
        keep_mask = np.ones(len(self.B), dtype=bool)  # (a mask, not np.setdiff1d: 36 us against 4)
        keep_mask[out_rows] = False
        keep = np.flatnonzero(keep_mask)
        nk, ne = len(keep), len(in_cols)
        H = np.zeros((nk + ne, nk + ne))
        H[:nk, :nk] = self.HBB[np.ix_(keep, keep)]
        H[:nk, nk:] = self.HBI[np.ix_(keep, in_cols)]
        H[nk:, :nk] = H[:nk, nk:].T
        for a, (_, I) in enumerate(pairs):
            H[nk + a * m : nk + (a + 1) * m, nk + a * m : nk + (a + 1) * m] = self.HII[self._rank_out[I]]
        xL = self.x[self.B[out_rows]]
        rhs = np.concatenate([self.g[self.B[keep]], self.g[self.Icols[in_cols]]])
        rhs -= np.concatenate([self.HBB[np.ix_(keep, out_rows)] @ xL, self.HBI[np.ix_(out_rows, in_cols)].T @ xL])
        lam = 1e-10 * max(float(np.trace(H)) / max(len(H), 1), 1e-300)
        # LAPACK called directly (what scipy's cho_factor / cho_solve run, without their ~17 us of checks)
        c, info = dpotrf(H + lam * np.eye(len(H)), lower=False, clean=False)
        if info == 0:
            y, info = dpotrs(c, rhs, lower=False)
        step = -y if info == 0 else -np.linalg.lstsq(H, rhs, rcond=None)[0]
        w = self.x.copy()
        w[self.B[out_rows]] = 0.0
        w[self.B[keep]] += step[:nk]
        w[self.Icols[in_cols]] = step[nk:]
        return w


_SLOTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # design -> {term: _one_slot of its columns}


def _one_slot_of(lp: LoweredProblem, ti: int, stored: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`_one_slot` of term ti's whole stored Jacobian, computed once per design."""
    per = _SLOTS.setdefault(lp.design, {})
    if ti not in per:
        per[ti] = _one_slot(stored[0], lp.design.terms[ti].map.shape[1])
    return per[ti]


def _one_slot(J: Any, m: int) -> tuple[np.ndarray, np.ndarray] | None:
    """For a row-wise term's columns J (rows ordered (sample, class)): when every column is nonzero
    in one class slot only -- the columns of W in Z = X W + b -- its values per sample (n x q) and
    the slot of each column; else None."""
    n = J.shape[0] // m
    V = np.zeros((n, J.shape[1]))
    norms = np.zeros((m, J.shape[1]))
    Jr = J.tocsr() if sp.issparse(J) else np.asarray(J)
    for c in range(m):
        Jc = Jr[c::m]
        Jc = Jc.toarray() if sp.issparse(Jc) else np.asarray(Jc, dtype=float)
        norms[c] = np.einsum("ij,ij->j", Jc, Jc)
        V += Jc
    cls = np.argmax(norms, axis=0)
    if np.any(norms.sum(axis=0) - norms[cls, np.arange(J.shape[1])] > 0):
        return None
    return V, cls


def _screen(lp: LoweredProblem, x: np.ndarray, g: np.ndarray, cols: np.ndarray, m: int) -> np.ndarray:
    """Candidate units (rows of ``cols``, their flat coordinates) by decreasing screening score: the
    gain of adding the unit alone with the Hessian's diagonal, g_i^2 / H_ii (ABESS's forward
    sacrifice), for single coordinates of an elementwise loss; else ||g_I||^2."""
    gI = g[cols]
    if m == 1:
        diag = lp.hessian_diagonal(None if lp.design.quadratic else x)
        if diag is not None:
            with np.errstate(divide="ignore", invalid="ignore"):
                score = gI[:, 0] ** 2 / diag[cols[:, 0]]
            return np.argsort(-np.where(np.isfinite(score), score, 0.0), kind="stable")
    return np.argsort(-np.einsum("ua,ua->u", gI, gI), kind="stable")


def _inverse_pd(H: np.ndarray, lam: float) -> np.ndarray:
    """(H + lam I)^-1 of a symmetric positive semidefinite H by its Cholesky factor (LAPACK
    potrf/potri); the pseudo-inverse of H when that fails."""
    nb = H.shape[0]
    if nb == 0:
        return np.zeros((0, 0))
    M = H + lam * np.eye(nb)
    c, info = dpotrf(M, lower=False, clean=True, overwrite_a=True)
    if info == 0:
        inv, info = dpotri(c, lower=False, overwrite_c=True)
        if info == 0:  # the upper triangle; the lower one is zero (clean=True): mirror it
            return inv + inv.T - np.diag(np.diagonal(inv))
    return np.linalg.pinv(H)


def _batched_solve(M: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Solve M[i] y[i] = b[i] for a stack of small symmetric matrices M (N, m, m) and right-hand
    sides b (N, m) or (N, m, r); least squares (pseudo-inverse) for singular ones."""
    vec = b.ndim == M.ndim - 1
    B = b[..., None] if vec else b
    if M.shape[-1] == 1:
        with np.errstate(divide="ignore", invalid="ignore"):
            Y = B / M
    else:
        try:
            Y = np.linalg.solve(M, B)
        except np.linalg.LinAlgError:
            Y = np.linalg.pinv(M) @ B
    return Y[..., 0] if vec else Y
