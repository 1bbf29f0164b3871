"""The Cox proportional-hazards loss: ``cox(z, time, event, weights=None, ties="efron")``, the
negative log partial likelihood of the linear predictor z = X w (Cox 1972, "Regression models and
life-tables", JRSS B 34(2)), with Efron's handling of tied event times (Efron 1977, "The efficiency
of Cox's likelihood function for censored data", JASA 72(359)) -- the default of R's ``coxph``
and of lifelines -- or Breslow's (Breslow 1974, "Covariance analysis of censored survival data",
Biometrics 30(1); ``ties="breslow"``, statsmodels' ``PHReg`` default), and case weights.

The distinct event times t_k split the events into tie groups D_k (d_k events, of total weight
W_k); the risk set R_k = {j : time_j >= t_k} holds everyone still at risk (a time censored at
t_k included). With w_j the case weights (1 without weights), S_k = sum_{j in R_k} w_j exp(z_j),
T_k = sum_{j in D_k} w_j exp(z_j) and the mean event weight wbar_k = W_k / d_k,

    cox(z) = sum_k wbar_k sum_{l=0}^{d_k - 1} log(S_k - a_kl T_k) - sum_{i : event_i = 1} w_i z_i

with a_kl = l / d_k (Efron: the l-th death of the group removes, on average, l/d_k of the group's
weight from the risk set) or a_kl = 0 (Breslow: wbar_k sum_l log S_k = W_k log S_k). These are the
weighted likelihoods of R's ``coxph`` and of lifelines' ``CoxPHFitter(weights_col=...)``
(``_get_efron_values_single``); Breslow's equals the unweighted likelihood of the data with row j
repeated w_j times (integer weights), Efron's does not (R's documentation of ``coxph``: "the
weighted fit is arguably the correct one").

Convexity. Each term log(S_k - a_kl T_k) = log sum_j c_klj w_j exp(z_j) with c_klj = 1 on R_k \\ D_k
and 1 - a_kl > 0 on D_k is a log-sum-exp of z shifted by the constants log(c w): convex, with the
Hessian diag(p) - p p' of its softmax weights p. The whole loss is a nonnegative combination of
them minus a linear term, so it is convex for either tie rule and any nonnegative weights.

It is one number of the whole vector z (the risk sets couple the samples), a whole-vector loss
(:class:`~.base.WholeLoss`). Every quantity costs O(n) (O(n q) for q directions) after one sort of
the times, done once per atom, and no n x n risk-set matrix is formed: with the samples in
decreasing time, S_k is a cumulative sum ending at the group's last sample, T_k a sum over the
group, and the sums over the groups whose risk set holds a sample are cumulative sums in the other
direction. Everything that can span many orders of magnitude runs in log space
(``logaddexp.accumulate``; a signed sum as the difference of the log-sums of its positive and
negative parts), so a predictor far apart across samples -- near-separable data, where a fit drives
the coefficients large -- neither overflows nor loses the small risk sets to underflow.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import DataError, ModelError, ShapeError, Span
from ..dcp import CONVEX, NONMONOTONE, NONNEG
from ..expr import dense, fmt_shape
from .base import WholeLoss

TIES = ("efron", "breslow")
SPREAD = 600.0  # a range of log S below which one shifted cumulative sum loses nothing (e^-600 ~ 1e-261)


def _rev_logcumsum(a: np.ndarray, axis: int = -1) -> np.ndarray:
    """log sum_{r >= q} exp(a_r) along ``axis``."""
    flip = np.flip(a, axis=axis)
    return np.flip(np.logaddexp.accumulate(flip, axis=axis), axis=axis)


def _signed_log(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log a+, log a-) with a = a+ - a-, a+- >= 0 (-inf where a part is zero)."""
    with np.errstate(divide="ignore"):
        return np.log(np.maximum(a, 0.0)), np.log(np.maximum(-a, 0.0))


class _RiskSets:
    """The sort of the times and the tie groups. Positions q = 0..n-1 run in decreasing time;
    ``first[q]`` starts q's tie group (the groups whose risk set holds q start at or after it) and
    ``starts`` every group. The *event groups* are the tie groups with events of positive total
    weight, k = 0..K-1, from position ``g_start[k]`` to ``g_end[k]`` (the risk set R_k is positions
    0..g_end[k]); their terms (k, l), l < d_k, one per event, are listed group by group (``a`` the
    Efron fraction a_kl, ``term_starts`` where each group's terms begin)."""

    def __init__(self, time: np.ndarray, event: np.ndarray, weights: np.ndarray, ties: str):
        n = len(time)
        self.n = n
        self.order = np.argsort(-time, kind="stable")
        ts = time[self.order]
        ev = event[self.order] > 0
        ws = weights[self.order]
        new = np.ones(n, dtype=bool)
        new[1:] = ts[1:] != ts[:-1]
        starts = np.flatnonzero(new)
        ends = np.append(starts[1:], n) - 1
        gid = np.cumsum(new) - 1
        self.starts = starts
        self.first = starts[gid]
        d = np.add.reduceat(ev.astype(float), starts) if n else np.zeros(0)
        W = np.add.reduceat(np.where(ev, ws, 0.0), starts) if n else np.zeros(0)
        keep = (d > 0) & (W > 0)
        self.keep = keep
        self.g_start, self.g_end = starts[keep], ends[keep]
        self.d = d[keep].astype(np.int64)
        self.wbar = W[keep] / d[keep]
        K = len(self.d)
        self.K = K
        self.term_starts = np.concatenate([[0], np.cumsum(self.d)[:-1]]).astype(np.int64) if K else np.zeros(0, int)
        l_idx = np.arange(int(self.d.sum())) - np.repeat(self.term_starts, self.d)
        self.a = l_idx / np.repeat(self.d, self.d) if ties == "efron" else np.zeros(len(l_idx))
        self.term_group = np.repeat(np.arange(K), self.d)
        # the event group of each position (-1: none), and the events that enter a kept group
        gpos = np.full(n, -1, dtype=np.int64)
        gpos[self.g_start] = np.arange(K)
        span = np.zeros(n + 1, dtype=np.int64)
        np.add.at(span, self.g_start, 1)
        np.add.at(span, self.g_end + 1, -1)
        inside = np.cumsum(span[:n]) > 0
        self.gpos = np.where(inside, np.maximum.accumulate(np.where(gpos >= 0, gpos, -1)), -1)
        self.tied = ev & (self.gpos >= 0)  # an event of an event group: its own group's Efron correction
        self.tied_at = np.flatnonzero(self.tied)  # their positions, and their groups
        self.tied_group = self.gpos[self.tied_at]
        self.inside = np.arange(n) <= (self.g_end[-1] if K else -1)  # in some risk set
        self.wdelta = np.where(ev, ws, 0.0)  # w_j event_j
        with np.errstate(divide="ignore"):
            self.logw = np.log(ws)  # -inf for a zero weight: the sample is in no sum
        self.inverse = np.empty(n, dtype=np.int64)
        self.inverse[self.order] = np.arange(n)
        self.n_events = int(ev.sum())
        self.weighted_events = float(self.wdelta.sum())

    def group_reduce(self, a: np.ndarray) -> np.ndarray:
        """Sums of a (..., terms) over each event group's terms: (..., K)."""
        return np.add.reduceat(a, self.term_starts, axis=-1)

    def tie_reduce(self, a: np.ndarray) -> np.ndarray:
        """Sums of a (..., n) over each event group's samples: (..., K)."""
        return np.compress(self.keep, np.add.reduceat(a, self.starts, axis=-1), axis=-1)

    def risk_means(self, zeta: np.ndarray, logS: np.ndarray, U: np.ndarray) -> np.ndarray:
        """M_k = sum_{m in R_k} e^{zeta_m - log S_k} u_m (..., K) for U (..., n), zeta (n,) and
        log S_k (K,): one cumulative sum shifted by the largest log S_k when the log S_k span less
        than SPREAD (no term that matters underflows), else the difference of the log-sums of the
        two signs of u (``logaddexp.accumulate``)."""
        E = self.g_end[-1] + 1  # later positions are in no risk set
        if logS[-1] - logS[0] < SPREAD:
            c = logS[-1]
            P = np.cumsum(np.exp(zeta[:E] - c) * U[..., :E], axis=-1)[..., self.g_end]
            return P * np.exp(c - logS)
        up, um = _signed_log(U[..., :E])
        lp = np.logaddexp.accumulate(zeta[:E] + up, axis=-1)[..., self.g_end] - logS
        lm = np.logaddexp.accumulate(zeta[:E] + um, axis=-1)[..., self.g_end] - logS
        return np.exp(lp) - np.exp(lm)

    def over_groups(self, vals: np.ndarray, logS: np.ndarray, zeta: np.ndarray) -> np.ndarray:
        """e^{zeta_j} sum over the event groups k whose risk set holds j of vals_k / S_k, for
        vals (..., K) (any sign), log S_k (..., K) and zeta (..., n): the per-group values placed at
        the groups' first positions and summed from the earliest time down, read at each
        position's tie group. Shifted once by the smallest log S_k when the log S_k span less than
        SPREAD (every e^{zeta_j - shift} of a position at risk is then at most e^SPREAD), else in
        log space by sign. Positions in no risk set (times before every event) get 0."""
        inside = self.inside
        if float((logS[..., -1] - logS[..., 0]).max()) < SPREAD:
            d = logS[..., :1]
            full = np.zeros(vals.shape[:-1] + (self.n,))
            full[..., self.g_start] = vals * np.exp(d - logS)
            rev = np.cumsum(full[..., ::-1], axis=-1)[..., ::-1][..., self.first]
            with np.errstate(over="ignore", invalid="ignore"):  # outside: discarded below
                return np.where(inside, np.exp(zeta - d) * rev, 0.0)
        out: Any = 0.0
        for sign, part in ((1.0, np.maximum(vals, 0.0)), (-1.0, np.maximum(-vals, 0.0))):
            if not part.any():
                continue
            with np.errstate(divide="ignore"):
                logs = np.log(part) - logS
            with np.errstate(over="ignore", invalid="ignore"):
                out = out + sign * np.where(inside, np.exp(zeta + self.at_risk(logs)), 0.0)
        return out * np.ones_like(zeta) if np.ndim(out) < np.ndim(zeta) else out

    def at_risk(self, per_group: np.ndarray) -> np.ndarray:
        """log sum over the event groups whose risk set holds each position of exp(per_group)
        (..., K) -> (..., n), in log space."""
        full = np.full(per_group.shape[:-1] + (self.n,), -np.inf)
        full[..., self.g_start] = per_group
        return _rev_logcumsum(full)[..., self.first]


class cox(WholeLoss):
    """The Cox negative log partial likelihood of the linear predictor ``z`` (a vector, one entry
    per sample) with survival or censoring ``time`` and the ``event`` indicator (1: the event was
    observed at ``time``; 0: censored) given as data, optional case ``weights`` (data, >= 0), and
    ``ties`` = "efron" (the default) or "breslow" (module docstring)."""

    name = "cox"
    curvature_kind = CONVEX
    observations_unit = "events"
    keyword_words = {"ties": TIES}  # what a model file writes in quotes (a bare word is told so)

    def __init__(
        self,
        z: Any,
        time: Any,
        event: Any,
        weights: Any = None,
        ties: str = "efron",
        span: Span | None = None,
    ):
        args = (z, time, event) if weights is None else (z, time, event, weights)
        super().__init__(*args, span=span)
        if not isinstance(ties, str) or ties not in TIES:
            raise ModelError(
                f"cox's ties must be one of {', '.join(repr(t) for t in TIES)}; got {ties!r}",
                span,
                'ties = "efron" (the default of R\'s coxph and lifelines) or ties = "breslow" (statsmodels\' PHReg)',
            )
        self.ties = ties
        zt = self.args[0]
        if zt.ndim != 1:
            raise ShapeError(
                f"cox's linear predictor must be a vector (one entry per sample); {zt} has shape {fmt_shape(zt.shape)}",
                span,
                "write cox(X @ w, time, event) with X the samples in rows",
            )
        for what, e in zip(("time", "event", "weights"), self.args[1:]):
            if not e.is_constant():
                raise DataError(f"cox's {what} must be data; {e} depends on a variable", span)
            if e.shape != zt.shape:
                raise ShapeError(
                    f"cox's {what} {e} has shape {fmt_shape(e.shape)}, the linear predictor {zt} {fmt_shape(zt.shape)}",
                    span,
                    "one time, one event indicator (and one weight) per sample (row of X)",
                )
        self._risk: _RiskSets | None = None
        self._check_data()

    @property
    def params(self) -> dict[str, Any]:
        return {"ties": self.ties}

    def _render(self) -> str:
        z, time, event = self.args[:3]
        inner = f"{z}, {time}, {event}"
        if len(self.args) > 3:
            inner += f", weights = {self.args[3]}"
        if self.ties != "efron":
            inner += f', ties = "{self.ties}"'
        return f"{self.name}({inner})"

    def _data(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        time = np.ravel(dense(self.args[1].constant_value())).astype(float)
        event = np.ravel(dense(self.args[2].constant_value())).astype(float)
        if len(self.args) > 3:
            weights = np.ravel(dense(self.args[3].constant_value())).astype(float)
        else:
            weights = np.ones(len(time))
        return time, event, weights

    def _check_data(self) -> None:
        time, event, weights = self._data()
        if not np.all(np.isfinite(time)):
            raise DataError(f"cox's time {self.args[1]} has values that are not finite numbers", self.span)
        bad = ~np.isin(event, (0.0, 1.0))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DataError(
                f"cox's event indicator {self.args[2]} must be 0 or 1; entry {i} is {event[i]:g}",
                self.span,
                "1 where the event was observed, 0 where the time is censored",
            )
        bad = ~(np.isfinite(weights) & (weights >= 0))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DataError(
                f"cox's weights {self.args[3]} must be finite and nonnegative; entry {i} is {weights[i]:g}",
                self.span,
                "case weights: a weight of 2 counts a subject twice, 0 leaves it out",
            )

    @property
    def risk(self) -> _RiskSets:
        if self._risk is None:
            self._risk = _RiskSets(*self._data(), self.ties)
        return self._risk

    def monotonicity(self, i: int) -> str:
        return NONMONOTONE

    def _sign_of(self) -> str:
        return NONNEG

    # The sup over z of the largest eigenvalue of the Hessian sum_i (diag(p_i) - p_i p_i') is
    # (number of events) / 2: each softmax Hessian is at most 1/2, and all approach it together
    # only when the weight of every risk set sits on the two latest times. Near any fit the
    # curvature is far smaller (at z = 0 about sum_i 1/|R_i|), and a step 1 / (events/2 ||X||^2)
    # left IHT 10 % above the optimum after 5000 iterations on abess's test problem, where the
    # curvature at the start converged in 2647 without one step halving. So the atom states no
    # global bound (None): the solvers measure the curvature at their point and backtrack.
    curvature_sup = None

    @property
    def events(self) -> int:
        """The number of observed events (the terms of the partial likelihood)."""
        return self.risk.n_events

    @property
    def observations(self) -> float:
        """The sample size of the information criteria: the number of events (their total weight
        with case weights), not of subjects -- the partial likelihood has one factor per event, and
        BIC's log n penalty with n the events is Volinsky and Raftery's (2000, "Bayesian
        information criterion for censored survival models", Biometrics 56(1)) choice, the one
        that matches the unit information prior."""
        return self.risk.weighted_events

    def no_conjugate_reason(self) -> str:
        return (
            "the Cox partial likelihood is a sum of log-sum-exps over nested risk sets; its convex conjugate is "
            "the infimal convolution of their entropies, which has no closed form"
        )

    # ------------------------------------------------------------------ numerics
    def _groups(self, zeta: np.ndarray) -> dict[str, np.ndarray]:
        """For zeta = z + log w in time order (..., n): per event group k the log risk-set sum
        log S_k and the Efron ratios rho_kl = S_k / (S_k - a_kl T_k) (in [1, d_k]) of its terms."""
        rs = self.risk
        logS = np.logaddexp.accumulate(zeta, axis=-1)[..., rs.g_end]
        tied = np.where(rs.tied, zeta, -np.inf)
        logT = np.logaddexp.reduceat(tied, rs.starts, axis=-1)[..., rs.keep]
        tau = np.exp(logT - logS)  # T_k / S_k in [0, 1]
        rho = 1.0 / (1.0 - rs.a * tau[..., rs.term_group])
        return {"logS": logS, "rho": rho}

    def _sorted(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rs = self.risk
        zs = np.asarray(z, dtype=float)[..., rs.order]
        return zs, zs + rs.logw

    def derivs(self, z: np.ndarray, order: int = 1) -> tuple[Any, Any, None]:
        """(the loss, its gradient, None) of z (..., n) (leading batch axes allowed)."""
        rs = self.risk
        zs, zeta = self._sorted(z)
        if rs.K == 0:  # no event of positive weight: the likelihood is 1
            v = np.zeros(zs.shape[:-1])
            return (v if v.ndim else 0.0), (None if order < 1 else np.zeros_like(zs)), None
        G = self._groups(zeta)
        logS, rho = G["logS"], G["rho"]
        wbar = rs.wbar
        at, grp = rs.tied_at, rs.tied_group
        # sum over the events of w_i (log S_k(i) - z_i) (each >= 0: no cancellation between large
        # sums when z is large), less Efron's wbar_k sum_l log rho_kl (W_k = wbar_k d_k)
        per_event = rs.wdelta[at] * (logS[..., grp] - zs[..., at])
        v = np.sum(per_event, axis=-1) - np.sum(wbar * rs.group_reduce(np.log(rho)), axis=-1)
        if order < 1:
            return v, None, None
        alpha = wbar * rs.group_reduce(rho)  # sum_l wbar rho_kl
        gs = rs.over_groups(alpha, logS, zeta) - rs.wdelta
        if self.ties == "efron":  # the tied events' own group: sum_l wbar a_kl rho_kl e^{zeta_j} / S_k
            alpha_a = wbar * rs.group_reduce(rs.a * rho)
            gs[..., at] -= np.exp(zeta[..., at] - logS[..., grp]) * alpha_a[..., grp]
        return v, gs[..., rs.inverse], None

    def hessian_apply(self, z: np.ndarray, U: np.ndarray) -> np.ndarray:
        """H(z) U, U (n,) or (n, q), in O(n q) (module docstring). Term (k, l) has the Hessian
        wbar_k (diag(p) - p p') with p_j = c_klj rho_kl e^{zeta_j} / S_k, so with M_k the mean of u
        over R_k and N_k its sum over D_k, both under the weights e^{zeta_j} / S_k,

            (H u)_j = sum_{k : j in R_k} e^{zeta_j} / S_k (u_j alpha_k - beta_k)
                      - [j in D_k] e^{zeta_j} / S_k (u_j alpha'_k - beta'_k)

        alpha_k = wbar sum_l rho, beta_k = wbar sum_l rho^2 (M_k - a N_k), and the primed sums
        with one more factor a_kl (zero for Breslow's ties). The q directions are a leading axis."""
        rs = self.risk
        U = np.asarray(U, dtype=float)
        cols = U.ndim == 2
        if rs.K == 0:
            return np.zeros_like(U)
        zs, zeta = self._sorted(z)
        Us = U[rs.order].T if cols else U[rs.order][None, :]  # (q, n)
        G = self._groups(zeta)
        logS, rho = G["logS"], G["rho"]
        a, wbar = rs.a, rs.wbar
        M = rs.risk_means(zeta, logS, Us)
        own = np.maximum(rs.gpos, 0)
        share = np.zeros(rs.n)  # e^{zeta_j} / S_k(j) on the tied events
        share[rs.tied_at] = np.exp(zeta[rs.tied_at] - logS[rs.tied_group])
        N = rs.tie_reduce(share * Us)
        r2 = rho * rho
        s2, s2a, s2aa = rs.group_reduce(r2), rs.group_reduce(a * r2), rs.group_reduce(a * a * r2)
        alpha = wbar * rs.group_reduce(rho)
        alpha_a = wbar * rs.group_reduce(a * rho)
        beta = wbar * (s2 * M - s2a * N)
        beta_a = wbar * (s2a * M - s2aa * N)
        out = Us * rs.over_groups(alpha, logS, zeta) - rs.over_groups(beta, logS, zeta)
        out -= share * (Us * alpha_a[own] - beta_a[..., own])
        out = out[..., rs.inverse]
        return out.T if cols else out[0]
