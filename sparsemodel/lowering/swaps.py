"""The swap model: the second-order model of every one-unit swap at a restricted minimizer, what
``auto`` ranks its swaps by (exact on least squares; see :class:`SwapModel`).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.linalg.lapack import dpotrf, dpotri, dpotrs

from .active import gram_pays

if TYPE_CHECKING:
    from .lowered import LoweredProblem


DOUBLE_LIMIT = 200_000  # (pairs out) x (pairs in) a double-swap table holds at most


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
    times ``candidates``). ``pool`` (coordinates) screens the unselected units to the pool // m of
    largest g_i^2 / H_ii (ABESS's forward sacrifice; ||g_I||^2 for groups) before the model is formed; None: every unit.
    :meth:`warm` gives the model's minimizer on a new support, the warm start of its exact restricted
    solve.
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
        sps = lp.sparsity
        C, F = sps.coords, sps.free
        members = np.asarray(members, dtype=np.int64).reshape(len(members), -1)
        nunits, m = members.shape
        units_in = np.asarray(units_in, dtype=np.int64)
        inside = np.zeros(nunits, dtype=bool)
        inside[units_in] = True
        units_out = np.flatnonzero(~inside)
        B = np.concatenate([C[members[units_in].ravel()], F]).astype(np.int64)  # unit by unit, then F
        # linear constraints: their working set at x, and the gradient a coordinate entering sees
        rows = WorkingRows(lp, x, g, B) if lp.linear is not None and m == 1 else None
        pool = max(pool // m, 1) if pool is not None else None  # (coordinates: units of m coordinates)
        if pool is not None and len(units_out) > pool:
            seen = rows.entering(g) if rows is not None else g
            units_out = np.sort(units_out[_screen(lp, x, seen, C[members[units_out]], m)[:pool]])
        Icols = C[members[units_out].ravel()]
        HBB, HBI, HII = hessian_blocks(lp, x, B, Icols, m)
        self._lp, self.rows, self.exact = lp, rows, model_exact(lp)
        self.units_in, self.units_out, self.m = units_in, units_out, m
        self.x, self.g, self.B, self.Icols = x, g, B, Icols
        self.HBB, self.HBI, self.HII = 0.5 * (HBB + HBB.T), HBI, HII
        self._rank_in = np.full(nunits, -1, dtype=np.int64)
        self._rank_in[units_in] = np.arange(len(units_in))
        self._rank_out = np.full(nunits, -1, dtype=np.int64)
        self._rank_out[units_out] = np.arange(len(units_out))
        self._floor_parts: Any = None
        self._single_swaps(jitter)
        self._choose_candidates(candidates, widen=lp.design.quadratic)

    def _single_swaps(self, jitter: float) -> None:
        """The bordered inverse's pieces: A = H_BB^-1 (the KKT matrix of the working rows in its place
        under linear constraints), A H_BI, each candidate's Schur complement sigma_I and sigma_I^-1 g_I,
        and from them ``gain`` (insertion), ``removal`` and ``gain2`` (the gain without the entering
        coordinate's bound); ``jitter`` keeps the inverses finite on a singular Hessian."""
        HBB, HBI, HII, rows, x, g = self.HBB, self.HBI, self.HII, self.rows, self.x, self.g
        B, Icols, m = self.B, self.Icols, self.m
        nb, nI, nJ = len(B), len(self.units_out), len(self.units_in)
        lam = jitter * max(float(np.trace(HBB)) / max(nb, 1), 1e-300)
        Y = None  # groups on a non-quadratic loss: Y = L^-1 H_BI through the Cholesky factor of H_BB
        if rows is None:
            A, L = _inverse_pd(HBB, lam, factor=True)
            HBIa = HBI
            # (the kernel's: where the model reads most of the columns, 2 (nb + ni) > n)
            if m > 1 and L is not None and not self._lp.design.quadratic and 2 * (nb + len(Icols)) > self._lp.n:
                Y = schur_rows(L, HBI)
        else:  # the KKT matrix of the working rows in place of H_BB; the rows join the candidates' columns
            A = _inverse_kkt(HBB + lam * np.eye(nb), rows.R[:, B])
            HBIa = np.vstack([HBI, rows.R[:, Icols]])
        AB = A @ HBIa if Y is None else sla.solve_triangular(L, Y, lower=True, trans="T")  # (nb [+ rows], ni)
        xJ = x[B[: nJ * m]].reshape(nJ, m)
        gI = (g if rows is None else rows.ghat)[Icols].reshape(nI, m)
        if m == 1:  # single coordinates: every quantity is a vector, every pair one formula
            s1 = HII[:, 0, 0] - np.einsum("ri,ri->i", HBIa, AB)
            s1 += jitter * np.maximum(np.abs(HII[:, 0, 0]), 1e-300)
            with np.errstate(divide="ignore", invalid="ignore"):
                v1 = gI[:, 0] / s1
            sigma, v = s1[:, None, None], v1[:, None]
            AJJ = np.diagonal(A)[:nJ].reshape(nJ, 1, 1)
            with np.errstate(divide="ignore", invalid="ignore"):
                removal = 0.5 * xJ[:, 0] ** 2 / AJJ[:, 0, 0]
            if rows is not None:  # a coordinate held by the rows cannot leave alone; one at its bound leaves freely
                held = AJJ[:, 0, 0] <= 1e-10 * max(float(np.max(np.abs(np.diagonal(A)[:nb]), initial=0.0)), 1e-300)
                removal = np.where(held, np.inf, removal)
                removal = np.where(xJ[:, 0] == 0, 0.0, removal)
        else:
            # H_IB A H_BI per candidate unit as one batched product (nI, m, nb) @ (nI, nb, m): the kernel's
            # Y_I' Y_I where it has the Cholesky factor (numerics/_lean._chol_rows), else H_IB (A H_BI)
            left, right = (HBI, AB) if Y is None else (Y, Y)
            sigma = HII - np.matmul(
                left.reshape(nb, nI, m).transpose(1, 2, 0), right.reshape(nb, nI, m).transpose(1, 0, 2)
            )
            sigma = 0.5 * (sigma + np.swapaxes(sigma, 1, 2))
            sigma += (jitter * np.maximum(np.einsum("uaa->u", np.abs(HII)) / m, 1e-300))[:, None, None] * np.eye(m)
            v = _batched_solve(sigma, gI)  # sigma_I^-1 g_I
            idx = np.arange(nJ * m).reshape(nJ, m)
            AJJ = A[idx[:, :, None], idx[:, None, :]]  # (nJ, m, m)
            removal = 0.5 * np.einsum("ja,ja->j", xJ, _batched_solve(AJJ, xJ)) if nJ else np.zeros(0)
        gain = 0.5 * np.einsum("ua,ua->u", gI, v)
        gain = np.where(np.isfinite(gain), np.maximum(gain, 0.0), 0.0)
        # the gain of the model without the entering coordinate's bound (the pair formula's, and the
        # bound delta[J, I] >= -gain2[I] that widening relies on), and the gain its bound allows
        gain2 = gain
        if rows is not None:
            self._side, self._blocked = rows.sides(Icols), rows.blocked(Icols)
            step_sign = -np.sign(gI[:, 0])
            allowed = (self._side == 0) | (self._side == step_sign)
            gain = np.where(allowed & ~self._blocked, gain2, 0.0)
            self._pinned = xJ[:, 0] == 0
        self.gain, self.removal, self.gain2 = gain, removal, gain2
        self._parts = (AB, sigma, v, xJ, AJJ, nJ, m)
        self._kkt = (A, HBIa, gI)  # what the double swaps read

    def _choose_candidates(self, candidates: int, widen: bool) -> None:
        """``delta`` for the ``candidates`` unselected units of largest gain, widened (``widen``: where
        the model is f, a quadratic objective; elsewhere up to four times as many) until none left out
        can beat the best swap found."""
        nI, nJ, gain2 = len(self.units_out), len(self.units_in), self.gain2
        order = np.argsort(-gain2, kind="stable")
        take = min(nI, max(candidates, 1))
        # widen only where the model is f (a quadratic objective): elsewhere its best is a guess anyway
        widest = nI if widen else min(nI, 4 * take)
        # the pairs of every candidate up to the widest set at once (one vectorized pass instead of
        # a pass per widening), the set then chosen by the widening rule
        every = self._pairs(order[:widest]) if nJ else None
        while nJ:  # pair values for the candidates of largest gain, widened until none left out can win
            cols = order[:take]
            delta = every[:, :take] if every is not None else self._pairs(cols)
            best = float(delta.min()) if delta.size else 0.0
            if take >= widest or -gain2[order[take]] >= best:
                break
            take = min(widest, 2 * take)
        if not nJ:
            cols, delta = order[:take], np.zeros((0, take))
        self.cand = cols  # indices into units_out, by decreasing gain
        self.delta = delta  # (nJ, len(cand))

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
                delta = -self.gain2[cols][None, :] + 0.5 * e * e / K
                if self.rows is not None:
                    # I's value in the pair's minimizer, d_I = -v_I + (A H_BI)_J e / (sigma_I K_JJ): where
                    # its bound forbids that sign, I stays at zero and the swap is J's removal alone
                    dI = -v[cols, 0][None, :] + ABc1 * e / (sigma[cols, 0, 0][None, :] * K)
                    side = self._side[cols][None, :]
                    wrong = ((side > 0) & (dI < 0)) | ((side < 0) & (dI > 0))
                    delta = np.where(wrong, self.removal[:, None], delta)
                    # a coordinate at its bound leaves at no cost: the swap is I's insertion
                    delta = np.where(self._pinned[:, None], -self.gain[cols][None, :], delta)
                    delta = np.where(self._blocked[cols][None, :], np.inf, delta)
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

    def every_swap(self) -> list[tuple[int, int, float]]:
        """Every swap of a selected unit against a modelled unselected one (unit out, unit in,
        predicted change of f), best first: the pairs of the candidates left out of ``delta`` too."""
        rest = np.setdiff1d(np.arange(len(self.units_out)), self.cand)
        D = np.hstack([self.delta, self._pairs(rest)]) if len(rest) else self.delta
        cand = np.concatenate([self.cand, rest])
        flat = np.argsort(D.ravel(), kind="stable")
        j, c = np.divmod(flat, D.shape[1])
        return list(zip(self.units_in[j].tolist(), self.units_out[cand[c]].tolist(), D.ravel()[flat].tolist()))

    def double_swaps(
        self, entering: int = 40, below: float = np.inf, limit: int | None = None
    ) -> list[tuple[tuple[int, int], tuple[int, int], float]]:
        """Every exchange of two selected units (J1, J2) for two of the ``entering`` unselected units
        of largest gain (I1, I2; fewer when the table would pass DOUBLE_LIMIT combinations), with the model's change of f, best first: the minimum of the model
        over the support with both removed and both added (the bordered inverse with a 2 x 2 Schur
        complement: gain -g_I' Sigma^-1 g_I / 2 with Sigma = H_II - H_IB A H_BI, plus
        e' M_JJ^-1 e / 2 with M_JJ = A_JJ + (A H_BI)_J Sigma^-1 (A H_BI)_J' and
        e = x_J + (A H_BI)_J Sigma^-1 g_I, the single swap's formula with 2 x 2 blocks). Exact on a
        quadratic objective whose constraints are equalities; coordinates only, and only where the
        Hessian between candidates is at hand (a constant Hessian): otherwise none. An exchange that
        moves an entering coordinate against its bound, or removes one held by the rows, is left out,
        and so is one whose model change is not below ``below``; at most ``limit`` are returned."""
        lp, m = self._lp, self.m
        AB, sigma, v, xJ, AJJ, nJ, _ = self._parts
        if m != 1 or nJ < 2 or len(self.units_out) < 2:
            return []
        # at most DOUBLE_LIMIT combinations: fewer entering candidates when many units are selected
        pairs_out = nJ * (nJ - 1) // 2
        entering = max(2, min(entering, int(np.sqrt(2.0 * DOUBLE_LIMIT / pairs_out)) + 1))
        order = np.argsort(-self.gain2, kind="stable")[:entering]
        cols = self.Icols[order]
        Hc = lp.hessian_columns(cols)
        if Hc is None:
            return []
        A, HBIa, gI = self._kkt
        Q = HBIa[:, order].T @ AB[:, order]
        S = Hc[cols] - Q  # Sigma over the entering candidates
        S = 0.5 * (S + S.T)
        S[np.diag_indices_from(S)] = sigma[order, 0, 0]  # (with the single model's jitter)
        a_, b_ = np.triu_indices(len(order), 1)
        j1, j2 = np.triu_indices(nJ, 1)
        s11, s12, s22 = S[a_, a_], S[a_, b_], S[b_, b_]
        det = s11 * s22 - s12 * s12
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            i11, i12, i22 = s22 / det, -s12 / det, s11 / det  # Sigma^-1 per pair of entering units
            ga, gb = gI[order[a_], 0], gI[order[b_], 0]
            va, vb = i11 * ga + i12 * gb, i12 * ga + i22 * gb  # Sigma^-1 g_I
            gain = 0.5 * (ga * va + gb * vb)
            # (J pairs) x (I pairs): P = (A H_BI)_J, a 2 x 2 block per combination
            p11 = AB[j1][:, order[a_]]
            p12 = AB[j1][:, order[b_]]
            p21 = AB[j2][:, order[a_]]
            p22 = AB[j2][:, order[b_]]
            # P Sigma^-1
            q11, q12 = p11 * i11 + p12 * i12, p11 * i12 + p12 * i22
            q21, q22 = p21 * i11 + p22 * i12, p21 * i12 + p22 * i22
            m11 = A[j1, j1][:, None] + q11 * p11 + q12 * p12
            m12 = A[j1, j2][:, None] + q11 * p21 + q12 * p22
            m22 = A[j2, j2][:, None] + q21 * p21 + q22 * p22
            e1 = xJ[j1, 0][:, None] + p11 * va + p12 * vb
            e2 = xJ[j2, 0][:, None] + p21 * va + p22 * vb
            mdet = m11 * m22 - m12 * m12
            y1, y2 = (m22 * e1 - m12 * e2) / mdet, (m11 * e2 - m12 * e1) / mdet  # M_JJ^-1 e
            delta = -gain[None, :] + 0.5 * (e1 * y1 + e2 * y2)
            ok = np.isfinite(delta) & (mdet > 1e-12 * np.abs(m11 * m22)) & (det > 0)[None, :]
            if self.rows is not None:
                # the entering values d_I = -Sigma^-1 g_I + Sigma^-1 P' M_JJ^-1 e, against their bounds
                dA = -va[None, :] + i11 * (p11 * y1 + p21 * y2) + i12 * (p12 * y1 + p22 * y2)
                dB = -vb[None, :] + i12 * (p11 * y1 + p21 * y2) + i22 * (p12 * y1 + p22 * y2)
                side = self._side[order]
                for d_, s_ in ((dA, side[a_]), (dB, side[b_])):
                    ok &= ~(((s_ > 0)[None, :] & (d_ < 0)) | ((s_ < 0)[None, :] & (d_ > 0)))
                blocked = self._blocked[order]
                ok &= ~(blocked[a_] | blocked[b_])[None, :]
                ok &= ~(self._pinned[j1] | self._pinned[j2])[:, None]
        delta = np.where(ok & (delta < below), delta, np.inf).ravel()
        flat = np.flatnonzero(np.isfinite(delta))
        if limit is not None and len(flat) > limit:
            flat = flat[np.argpartition(delta[flat], limit - 1)[:limit]]
        flat = flat[np.argsort(delta[flat], kind="stable")]
        jj, ii = np.divmod(flat, len(a_))
        U_in, U_out = self.units_in, self.units_out
        return [
            ((int(U_in[j1[p]]), int(U_in[j2[p]])), (int(U_out[order[a_[q]]]), int(U_out[order[b_[q]]])), float(d))
            for p, q, d in zip(jj, ii, delta[flat])
        ]

    def floor(self, outs: list[int], ins: list[int]) -> float:
        """A lower bound on the change of f when the selected units ``outs`` leave and the unselected
        ``ins`` enter, on a quadratic objective under linear constraints: the minimum of f (its
        expansion at x is exact) over the new support under the linear equalities alone, the
        inequalities and the box dropped (a relaxation of the restricted problem, so never above its
        value). One KKT solve of the support's size; -inf where that relaxation is singular, and
        where f is not quadratic (no bound: nothing to skip on)."""
        lp = self._lp
        if not (lp.design is not None and lp.design.quadratic and self.m == 1 and lp.linear is not None):
            return -np.inf
        if self._floor_parts is None:  # the Hessian over B and the candidates, and the equalities: once
            cols = np.concatenate([self.B, self.Icols])
            Hc = lp.hessian_columns(cols)
            lin = lp.linear
            A = np.zeros((len(lin.b), lp.n))
            A[:, lin.cols] = lin.A
            self._floor_parts = (Hc[cols] if Hc is not None else None, A[:, cols], lin.b)
        H_all, A_all, _ = self._floor_parts
        if H_all is None:
            return -np.inf
        nb = len(self.B)
        gone = self._rank_in[np.asarray(outs, dtype=np.int64)]  # local positions (B first, then the candidates)
        new = nb + self._rank_out[np.asarray(ins, dtype=np.int64)]
        keep = np.ones(nb, dtype=bool)
        keep[gone] = False
        T = np.concatenate([np.flatnonzero(keep), new])
        nT, m = len(T), A_all.shape[0]
        xg = self.x[self.B[gone]]
        gT = self.g[np.concatenate([self.B, self.Icols])[T]]
        gG = self.g[self.B[gone]]
        HTT, HTG, HGG = H_all[np.ix_(T, T)], H_all[np.ix_(T, gone)], H_all[np.ix_(gone, gone)]
        # d over T (d_gone = -x_gone): min (g_T - H_T,gone x_gone)'d + 1/2 d'H_TT d  s.t.  A_T d = A_gone x_gone
        K = np.zeros((nT + m, nT + m))
        K[:nT, :nT] = HTT
        K[:nT, nT:] = A_all[:, T].T
        K[nT:, :nT] = A_all[:, T]
        rhs = np.concatenate([HTG @ xg - gT, A_all[:, gone] @ xg])
        try:
            sol = np.linalg.solve(K, rhs)
        except np.linalg.LinAlgError:  # a direction of no curvature, or rows the support cannot meet
            return -np.inf
        d = sol[:nT]
        if not np.all(np.isfinite(d)):
            return -np.inf
        return float(gT @ d - gG @ xg + 0.5 * (d @ HTT @ d - 2.0 * d @ HTG @ xg + xg @ HGG @ xg))

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
        if self.rows is not None:  # the working rows kept: R_new d_new = R_J x_J (x_J leaves)
            cols = np.concatenate([self.B[keep], self.Icols[in_cols]])
            R = self.rows.R_all
            Rn = R[:, cols]
            K = np.block([[H + lam * np.eye(len(H)), Rn.T], [Rn, np.zeros((len(R), len(R)))]])
            sol = np.linalg.lstsq(K, np.concatenate([-rhs, R[:, self.B[out_rows]] @ xL]), rcond=None)[0]
            step = sol[: len(H)]
        else:
            # LAPACK called directly (what scipy's cho_factor / cho_solve run, without their ~17 us of checks)
            Hj = H + lam * np.eye(len(H))
            c, info = dpotrf(Hj, lower=False, clean=False)
            if info == 0:
                y, info = dpotrs(c, rhs, lower=False)
            if info == 0:
                step = -y
            else:  # indefinite (several entering units, their cross blocks zero): LU, as the kernel
                try:
                    step = -np.linalg.solve(Hj, rhs)
                except np.linalg.LinAlgError:
                    step = -np.linalg.lstsq(Hj, rhs, rcond=None)[0]
        w = self.x.copy()
        w[self.B[out_rows]] = 0.0
        w[self.B[keep]] += step[:nk]
        w[self.Icols[in_cols]] = step[nk:]
        return w


def hessian_blocks(
    lp: LoweredProblem, x: np.ndarray, B: np.ndarray, Icols: np.ndarray, m: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Hessian of f at x in the blocks the swap model reads: H_BB, H_BI (B the selected and free
    coordinates, I the candidates' coordinates) and the m x m diagonal block of each candidate unit:
    from the cached columns of a constant Hessian, else summed term by term (:func:`_add_term`)."""
    nb, ni = len(B), len(Icols)
    nI = ni // m
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
        return HBB, HBI, HII
    for ti in range(len(lp.design.terms)):
        _add_term(lp, ti, x, B, Icols, m, HBB, HBI, HII)
    return HBB, HBI, HII


def _add_term(
    lp: LoweredProblem,
    ti: int,
    x: np.ndarray,
    B: np.ndarray,
    Icols: np.ndarray,
    m: int,
    HBB: np.ndarray,
    HBI: np.ndarray,
    HII: np.ndarray,
) -> None:
    """Add design term ti's Hessian at x to the blocks: a separable ridge on the diagonal; an
    elementwise loss J' diag(c w phi'') J (from the whole stored Jacobian when most columns are
    candidates); the row-wise softmax or a whole-vector loss by its Hessian applied to the columns
    (a row-wise term whose every column reads one class from the values: :func:`_add_class_blocks`)."""
    d = lp.design
    t = d.terms[ti]
    nb, ni = len(B), len(Icols)
    nI = HII.shape[0]
    ridge = d.separable_diagonal(ti)
    if ridge is not None:  # a separable ridge: diagonal, no coupling between coordinates
        HBB[np.arange(nb), np.arange(nb)] += ridge[B]
        HII[:, np.arange(m), np.arange(m)] += ridge[Icols].reshape(nI, m)
        return
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
        return
    JB = stored[0][:, B] if stored is not None else d.term_columns(ti, B)
    slots = None  # a row-wise loss whose every column reads one class: blocks from the values
    if t.rowwise and not t.diagonal:
        # (the stored columns' values once per design; else the map's blocks give the candidates'
        # values, the data's columns, without their samples x classes rows)
        if stored is not None:
            slots = _one_slot_of(lp, ti, stored)
        elif hasattr(t.map, "class_values"):  # (an expression map has no blocks: its columns are read)
            slots = t.map.class_values(Icols)
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
            return
        JB, JI = np.asarray(JB, dtype=float), np.asarray(JI, dtype=float)
        LB = JB * w2[:, None]
        HBB += JB.T @ LB
        HBI += LB.T @ JI
        LI = JI * w2[:, None]
    else:  # the row-wise softmax, a whole-vector loss: its Hessian applied to the columns
        JB = JB.toarray() if sp.issparse(JB) else np.asarray(JB, dtype=float)
        LB = t.coef * t.hessian_apply(z, JB)
        HBB += JB.T @ LB
        if t.rowwise and slots is None and stored is None:  # (the map's blocks of another kind)
            slots = t.class_columns(JI)
        if slots is not None:  # every column reads one class (Z = X W + b): blocks from the values
            V, cls = slots
            if stored is not None:
                V, cls = V[:, Icols], cls[Icols]
            _add_class_blocks(t, z, LB, V, cls, m, HBI, HII)
            return
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


def _add_class_blocks(
    t: Any, z: np.ndarray, LB: np.ndarray, V: np.ndarray, cls: np.ndarray, m: int, HBI: np.ndarray, HII: np.ndarray
) -> None:
    """H_BI and the candidates' blocks of a row-wise term whose every candidate column reads one
    class (Z = X W + b: column j of class c holds V[:, j] in slot c of each row), from the values and
    each row's loss Hessian, without forming the columns."""
    nI = HII.shape[0]
    mc = t.map.shape[1]
    Lam = t.coef * t.row_hessians(z)  # (n, mc, mc): each row's loss Hessian
    for c_ in range(mc):
        on = np.flatnonzero(cls == c_)
        if len(on):
            HBI[:, on] += LB[c_::mc].T @ V[:, on]
    V3, cls3 = V.reshape(V.shape[0], nI, m), cls.reshape(nI, m)
    same = bool(np.all(cls3 == cls3[:1])) if nI else False  # (row groups: member a of every unit in one class)
    for a_ in range(m):
        for b_ in range(a_, m):
            if same:  # one class pair for every unit: its curvatures once, not gathered per unit
                lam = Lam[:, cls3[0, a_], cls3[0, b_]]
                HII[:, a_, b_] += lam @ (V3[:, :, a_] * V3[:, :, b_])
            else:
                lam_ab = Lam[:, cls3[:, a_], cls3[:, b_]]  # (n, nI)
                HII[:, a_, b_] += np.einsum("iu,iu->u", V3[:, :, a_] * lam_ab, V3[:, :, b_])
            if b_ != a_:
                HII[:, b_, a_] = HII[:, a_, b_]


def model_exact(lp: LoweredProblem) -> bool:
    """Whether the swap model is f itself: a quadratic objective whose only constraints besides the
    sparsity are linear equalities (no inequality rows and no bounds, which the model keeps only
    where they hold with equality at x)."""
    if lp.design is None or not lp.design.quadratic or lp.box is not None:
        return False
    return lp.linear is None or len(lp.linear.h) == 0


class WorkingRows:
    """The linear constraints (``lp.linear``) as the swap model keeps them at a restricted minimizer
    x on the coordinates B (the selected and the free ones): the working set of every equality, the
    inequalities that hold with equality at x, and the coordinates of B at a bound of the box
    (*pinned*: they stay there). With the multipliers lambda of the restricted problem,
    g_B + R_B' lambda = 0 (least squares: they exist at a KKT point), the reduced gradient
    ghat = g + R' lambda is what a coordinate entering sees (under ``sum(w) == s``, g_j + lambda:
    the gradient relative to the support's common slope). ``R`` holds rows independent on B, whose
    KKT matrix [[H_BB, R_B'], [R_B, 0]] replaces H_BB in the model (the bordered inverse then
    gives every insertion, removal and swap of the equality-constrained quadratic model exactly);
    a row dependent on B's rows but not on a candidate's column forbids that coordinate from
    entering alone (``blocked``). Inactive inequalities are left out: the model is local, and every
    candidate it ranks is checked by an exact restricted solve that keeps them all."""

    def __init__(self, lp: LoweredProblem, x: np.ndarray, g: np.ndarray, B: np.ndarray):
        lin, n = lp.linear, lp.n
        self.lo = lp.box.lo if lp.box is not None else np.full(n, -np.inf)
        self.hi = lp.box.hi if lp.box is not None else np.full(n, np.inf)
        Aeq = np.zeros((len(lin.b), n))
        Aeq[:, lin.cols] = lin.A
        G = np.zeros((len(lin.h), n))
        G[:, lin.cols] = lin.G
        slack = lin.h - G @ x
        active = slack <= 1e-9 * (1.0 + np.abs(lin.h) + np.abs(G) @ np.abs(x))
        scale = 1e-12 * (1.0 + float(np.max(np.abs(x), initial=0.0)))
        xb, lo, hi = x[B], self.lo[B], self.hi[B]
        pinned = B[(np.isfinite(lo) & (xb <= lo + scale)) | (np.isfinite(hi) & (xb >= hi - scale))]
        P = np.zeros((len(pinned), n))
        P[np.arange(len(pinned)), pinned] = 1.0
        R = np.vstack([Aeq, G[active], P])
        RB = R[:, B]
        lam = np.linalg.lstsq(RB.T, -g[B], rcond=None)[0] if len(R) else np.zeros(0)
        self.ghat = g + R.T @ lam
        self.R_all = R
        # rows independent on B (pivoted QR of R_B'), and what the others leave over on the other columns
        if len(R) and len(B):
            _, T, piv = sla.qr(RB.T, mode="economic", pivoting=True)
            d = np.abs(np.diag(T))
            rank = int(np.sum(d > 1e-10 * max(float(d[0]) if len(d) else 0.0, 1e-300)))
        else:
            piv, rank = np.arange(len(R)), 0
        ind, dep = np.sort(piv[:rank]), piv[rank:]
        self.R = R[ind]
        self.dep = np.zeros((0, n))
        if len(dep):
            W = np.linalg.lstsq(RB[ind].T, RB[dep].T, rcond=None)[0] if rank else np.zeros((0, len(dep)))
            self.dep = R[dep] - W.T @ R[ind]  # zero on B

    def sides(self, cols: np.ndarray) -> np.ndarray:
        """The sign a coordinate at zero may take: +1 (its box is [0, hi]), -1 ([lo, 0]), 0 (either)."""
        lo, hi = self.lo[cols], self.hi[cols]
        return np.where((lo >= 0) & (hi > 0), 1, np.where((hi <= 0) & (lo < 0), -1, 0))

    def blocked(self, cols: np.ndarray) -> np.ndarray:
        """Coordinates that cannot enter alone: a box [0, 0], or a row dependent on B that reads them."""
        out = (self.lo[cols] >= 0) & (self.hi[cols] <= 0)
        if len(self.dep):
            out |= np.max(np.abs(self.dep[:, cols]), axis=0) > 1e-9 * (1.0 + np.max(np.abs(self.dep), axis=1)).max()
        return out

    def entering(self, g: np.ndarray) -> np.ndarray:
        """The reduced gradient with the entries a coordinate's bound makes useless set to zero (a
        coordinate held at w >= 0 with ghat_j > 0 gains nothing): what the screen ranks."""
        side = self.sides(np.arange(len(g)))
        out = self.ghat.copy()
        out[((side > 0) & (out > 0)) | ((side < 0) & (out < 0))] = 0.0
        return out


_SLOTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # design -> {term: Term.class_columns of its columns}


def _one_slot_of(lp: LoweredProblem, ti: int, stored: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """``Term.class_columns`` of term ti's whole stored Jacobian, computed once per design."""
    per = _SLOTS.setdefault(lp.design, {})
    if ti not in per:
        per[ti] = lp.design.terms[ti].class_columns(stored[0])
    return per[ti]


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


def _inverse_pd(H: np.ndarray, lam: float, factor: bool = False) -> Any:
    """(H + lam I)^-1 of a symmetric positive semidefinite H by its Cholesky factor (LAPACK
    potrf/potri); the pseudo-inverse of H when that fails. ``factor``: (the inverse, the lower
    factor L with L L' = H + lam I, or None where the pseudo-inverse stands in)."""
    nb = H.shape[0]
    if nb == 0:
        return (np.zeros((0, 0)), None) if factor else np.zeros((0, 0))
    M = H + lam * np.eye(nb)
    c, info = dpotrf(M, lower=False, clean=True, overwrite_a=True)
    if info == 0:
        U = c.copy() if factor else None
        inv, info = dpotri(c, lower=False, overwrite_c=True)
        if info == 0:
            out = np.triu(inv) + np.triu(inv, 1).T
            return (out, U.T) if factor else out
    return (np.linalg.pinv(H), None) if factor else np.linalg.pinv(H)


def schur_rows(L: np.ndarray, HBI: np.ndarray) -> np.ndarray:
    """Y = L^-1 H_BI for the lower Cholesky factor L of H_BB (with its jitter): H_IB H_BB^-1 H_BI =
    Y' Y and H_BB^-1 H_BI = L^-T Y, the swap model's Schur complements and bordered inverse without
    H_BB^-1 applied to every candidate (the kernel forms Y's rows as (W J_B L^-T)' J_I)."""
    return sla.solve_triangular(L, HBI, lower=True)


def _inverse_kkt(H: np.ndarray, R: np.ndarray) -> np.ndarray:
    """The inverse of the KKT matrix [[H, R'], [R, 0]] (H positive definite on the null space of
    R, whose rows are independent); the pseudo-inverse when it is singular."""
    nb, r = H.shape[0], R.shape[0]
    K = np.zeros((nb + r, nb + r))
    K[:nb, :nb] = H
    K[:nb, nb:] = R.T
    K[nb:, :nb] = R
    try:
        out = np.linalg.inv(K)
        if np.all(np.isfinite(out)):
            return out
    except np.linalg.LinAlgError:
        pass
    return np.linalg.pinv(K)


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
