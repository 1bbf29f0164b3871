"""THE damped-Newton loop (paper-independent numerics; the restricted solves of every solver).

* :func:`newton` -- exact Hessians of a reduced composite design, Armijo backtracking, batched over
  m independent problems that share the design's columns (each may have one extra column, for
  insertion scoring, or coordinates held at zero, for removal scoring), with an optional l1
  penalty (then each step is a proximal-Newton step: coordinate descent on the quadratic model,
  Lee, Sun & Saunders 2014) and an optional box. One smooth problem runs :func:`_newton_one`
  (scalars instead of index bookkeeping); a large one takes conjugate-gradient steps on
  Hessian-vector products (Newton-CG); a single solve forms a Hessian only when the curvatures
  moved too much since the last one (:func:`_stale_direction`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.linalg.lapack import dpotrf, dpotrs

from ..objective.terms import Reduced
from .evaluation import _apply, _apply_t, _State, is_operator
from .proximal import cd_quadratic_l1, kkt_residual

MATRIX_FREE_DIM = 1500  # a single Newton problem larger than this takes CG steps (no Hessian formed)
# The Newton steps' relative jitter: jit = JITTER |tr H| / D on the diagonal before the Cholesky
# factorization. Above the rounding of a singular direction's pivot (about 1e-16 |tr H| / D times a
# few): on a model that is not identifiable (softmax regression with a free coefficient per class:
# one number added to a row of W leaves the loss unchanged) a step along the Hessian's null space is
# (rounding in g) / jit, about 1e-4 of the step here against 1e-2 at 1e-14, where it decided which of
# the equal minimizers a solve ended at -- and with it the next thresholding's ranking, so two
# implementations of one search (the compiled kernels, numerics/_lean.JITTER, and this pipeline)
# parted on the same data. Small enough that an identifiable Hessian up to a condition number near
# 1e12 converges as fast as without.
JITTER = 1e-12


@dataclass
class NewtonResult:
    values: np.ndarray  # (m,) smooth objective (with ridge) at the returned coefficients
    U: np.ndarray  # (m, D)
    iterations: int
    converged: np.ndarray  # (m,) bool
    d1: list[np.ndarray] | None = None  # m = 1: each term's loss derivative at the returned coefficients
    hessian: tuple[np.ndarray, Any] | None = None  # m = 1: the last Hessian formed (ridge out) and its curvatures


@dataclass(frozen=True)
class NewtonOptions:
    """What the loop is asked besides the design and the starts (the keywords of :func:`newton`): a
    ridge, an l1 penalty and the box it keeps, coordinates held at their start, the stopping rules
    (``tol`` on the Newton decrement, ``kkt_tol`` on the l1 subgradient, ``max_iter``, ``give_up``)
    and an earlier solve's Hessian to start from."""

    ridge: np.ndarray | None = None
    l1: np.ndarray | None = None
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    fixed: np.ndarray | None = None
    tol: float = 1e-12
    kkt_tol: float | None = None
    max_iter: int = 100
    give_up: float | None = None
    hint: tuple[np.ndarray, np.ndarray, Any] | None = None


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
    opts = NewtonOptions(ridge, l1, lower, upper, fixed, tol, kkt_tol, max_iter, give_up, hint)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # steps outside the domain give inf
        U0 = np.atleast_2d(np.asarray(U0, dtype=float))
        if U0.shape[0] == 1 and extra is None and fixed is None and l1 is None and lower is None and upper is None:
            return _newton_one(rd, U0, opts)
        return _Batch(rd, U0, extra, extra_lin, opts).run()


_ONE = np.zeros(1, dtype=np.int64)  # the index of the one problem of a single solve


_ROUNDING = 4 * np.finfo(float).eps

# The rounding allowed the values of a line search's chord (:func:`backtrack`): relative to the
# magnitudes read, about 5e5 units in the last place (the chord's extrapolation adds at most three
# values' rounding), so a trial is skipped only when it fails by far more than its arithmetic.
CHORD_ROUNDING = 1e-8


def _convex(rd: Reduced, ridge: np.ndarray | None) -> bool:
    """The objective of ``rd`` with a separable ``ridge`` is convex (:attr:`Reduced.convex`, ridges >= 0)."""
    return rd.convex and (ridge is None or bool(np.all(ridge >= 0)))


def backtrack(t: float, ft: float, t_prev: float, f_prev: float, f: float, dec: float, tries: int) -> tuple[float, int]:
    """The next trial step of the Armijo backtracking (steps 1, 1/2, 1/4, ..., the first with
    f(u + t s) <= f - t dec / 4, at most 50 trials) after the trial at ``t`` failed with value ``ft``;
    ``t_prev``, ``f_prev``: the last trial before it with a finite value (t_prev > t; NaN: none);
    ``tries``: the steps of the sequence used so far. Returns (next step, steps used).

    The step halves, and halves again past steps convexity proves would fail: along the direction
    phi(t) = f(u + t s) is convex, so below t it lies above the chord through (t, ft) and
    (t_prev, f_prev): phi(r) >= ft + m (r - t), m = (f_prev - ft) / (t_prev - t), and a step r fails
    the test when ft + m (r - t) > f - r dec / 4 (with an allowance for rounding,
    :data:`CHORD_ROUNDING`), i.e. r > r_min = (f - ft + m t + allowance) / (m + dec / 4) where
    m + dec / 4 > 0. A step the chord rules out is one the halving would have tried and rejected,
    so the step accepted is the same one: the search needs fewer trials, not other answers. (A
    Newton step far too long, the curvature of a nearly separable logistic or softmax loss nearly
    zero along it, would otherwise be halved tens of times, each halving a pass over the samples.)"""
    nxt, tries = 0.5 * t, tries + 1
    if not (np.isfinite(ft) and np.isfinite(f_prev)):
        return nxt, tries
    m = (f_prev - ft) / (t_prev - t)
    den = m + 0.25 * dec
    if not den > 0.0:
        return nxt, tries
    r_min = (f - ft + m * t + CHORD_ROUNDING * (1.0 + abs(f) + abs(ft) + abs(f_prev))) / den
    while tries < 50 and nxt > r_min:
        nxt, tries = 0.5 * nxt, tries + 1
    return nxt, tries


def _newton_one(rd: Reduced, U0: np.ndarray, opts: NewtonOptions) -> NewtonResult:
    """The damped-Newton loop of one smooth problem (a restricted solve; see :func:`newton`): the
    iteration of :class:`_Batch` with scalars in place of its per-problem index arrays, since most
    calls are small single solves whose cost is bookkeeping. Steps from a Cholesky factorization of
    the Hessian, from the last factorization while it is certified (:func:`_stale_direction`), or
    by conjugate gradients for large or matrix-free problems (:func:`_cg_direction`); Armijo
    backtracking; the step that meets the stopping test is taken too when it does not increase f
    (:func:`_polish`), so the coefficients are accurate to rounding."""
    tol, max_iter, give_up, hint = opts.tol, opts.max_iter, opts.give_up, opts.hint
    st = _State(rd, U0, None, opts.ridge)
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
    convex = None  # (whether the line search may read chords: asked at its first failed trial)
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
        t, moved, tries, t_prev, f_prev = 1.0, False, 0, np.nan, np.nan
        while tries < 50:
            ut = st.U[0] + t * step
            ft, keep = st.trial(_ONE, ut[None, :])
            if ft[0] <= f - 0.25 * t * dec:
                if ft[0] < f:  # (t dec / 4 below f's rounding passes the test without a decrease: no step)
                    st.accept(_ONE, ut[None, :], keep)
                    f, moved = float(ft[0]), True
                break
            fv = float(ft[0])
            nxt, tries = backtrack(t, fv, t_prev, f_prev, f, dec, tries)
            if np.isfinite(fv):
                if convex is None:
                    convex = _convex(rd, st.ridge)
                if convex:  # (a chord's end: on a convex objective only)
                    t_prev, f_prev = t, fv
            t = nxt
        if not moved:  # no decrease along the direction: at the optimum up to rounding
            conv = True
            break
        if quad_finish and t == 1.0:  # one full Newton step solves a quadratic exactly
            conv = True
            break
    return NewtonResult(np.array([f]), st.U, iters, np.array([conv]), st.d1(0), last)


class _Batch:
    """The damped-Newton loop of m problems at once (see :func:`newton`): the problems still running
    are the index ``idx`` of each iteration; each gets a direction (a Cholesky or eigen step, a
    proximal step with ``l1``, CG when matrix free, a certified step from the last factorization of
    a single solve), the stopping test, and a backtracking line search."""

    def __init__(self, rd: Reduced, U0: np.ndarray, extra: Any, extra_lin: Any, opts: NewtonOptions):
        U0 = np.atleast_2d(np.asarray(U0, dtype=float))
        m, D = U0.shape
        l1, fixed = opts.l1, opts.fixed
        self.opts, self.m, self.D = opts, m, D
        self.st = st = _State(rd, U0, extra, opts.ridge, extra_lin)
        self.done = np.zeros(m, dtype=bool)
        self.conv = np.zeros(m, dtype=bool)
        self.vals = np.full(m, np.inf)
        self.iters = 0
        self.pen = np.zeros(D) if l1 is None else np.asarray(l1, dtype=float)
        self.factor: Any = (
            None  # single problem: (Cholesky factor of the last Hessian, the curvatures it was formed from)
        )
        self.prev_dec = np.full(m, np.inf)  # each problem's last Newton decrement
        self.matrix_free = (
            m == 1 and l1 is None and fixed is None and (D > MATRIX_FREE_DIM or any(map(is_operator, rd.Js)))
        )
        self.single = m == 1 and l1 is None and not self.matrix_free  # a restricted solve (polished below)
        self.reuse = (
            self.single and fixed is None and D >= STALE_MIN_DIM
        )  # Hessians worth avoiding (see _stale_direction)
        self.quad_finish = rd.quadratic and l1 is None and fixed is None and not self.matrix_free
        self.last: Any = None  # (the last Hessian formed without its ridge, the curvatures it was formed from)
        if self.reuse and opts.hint is not None:
            made = _factor_from_hint(st, opts.hint)
            if made is not None:
                self.factor, self.last = made

    def run(self) -> NewtonResult:
        st, m, fixed = self.st, self.m, self.opts.fixed
        everyone = np.arange(m)
        for _ in range(self.opts.max_iter):
            self.iters += 1
            idx = np.flatnonzero(~self.done) if self.done.any() else everyone
            if len(idx) == 0:
                break
            f, g = st.fg(idx if len(idx) < m else slice(None))
            if fixed is not None:
                g[fixed[idx]] = 0.0
            self.vals[idx] = f
            bad = ~np.isfinite(f)
            self.done[idx[bad]] = True
            if self.D == 0:
                self.done[idx] = True
                self.conv[idx] = True
                break
            step, dec = self._direction(idx, f, g, bad)
            stop = self._stopped(idx, f, g, dec, bad, step)
            go = np.flatnonzero(~stop)
            if len(go) == 0:
                break
            self._line_search(idx, go, f, step, dec)
        d1 = st.d1(0) if m == 1 else None
        return NewtonResult(self.vals, st.U, self.iters, self.conv, d1, self.last)

    def _direction(
        self, idx: np.ndarray, f: np.ndarray, g: np.ndarray, bad: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each running problem's step and Newton decrement."""
        st, o = self.st, self.opts
        lazy = (
            _stale_direction(st, self.factor, g[0], float(f[0]), 2 * o.tol * (1.0 + abs(float(f[0]))))
            if self.single and self.factor is not None and not bad[0]
            else None
        )
        if self.matrix_free:
            step, dec = _cg_direction(st, g[0])
            return step[None, :], np.array([dec])
        if lazy is not None:  # a certified step from an earlier factorization: no new Hessian
            return lazy[0][None, :], np.array([lazy[1]])  # the caller's test: dec <= bound stops
        self.factor = None
        H = st.hessians(idx)
        if o.fixed is not None:
            ii, qq = np.nonzero(o.fixed[idx])
            H[ii, qq, :] = 0.0
            H[ii, :, qq] = 0.0
            H[ii, qq, qq] = 1.0
        if o.l1 is not None:
            step = np.empty_like(g)
            dec = np.empty(len(idx))
            for a in range(len(idx)):
                u = st.U[idx[a]]
                z = cd_quadratic_l1(u, g[a], H[a], self.pen, lo=o.lower, hi=o.upper)
                step[a] = z - u
                dec[a] = -float(g[a] @ step[a] + self.pen @ (np.abs(z) - np.abs(u)))
            return step, dec
        if self.single:
            step, dec, c = _single_direction(H, g)
            if c is not None and self.reuse:
                self.factor = (c, _curvatures(st))
                self.last = (H[0] - np.diag(st.ridge) if st.ridge is not None else H[0], self.factor[1])
            return step, dec
        return _newton_direction(H, g)

    def _stopped(
        self, idx: np.ndarray, f: np.ndarray, g: np.ndarray, dec: np.ndarray, bad: np.ndarray, step: np.ndarray
    ) -> np.ndarray:
        """The stopping test of each running problem (the decrement, or the l1 subgradient; a value
        that is not finite; give_up), marking those that stop; a single solve that stops is polished."""
        o, st = self.opts, self.st
        if o.l1 is not None:
            stop = np.array(
                [
                    kkt_residual(st.U[i], g[a], self.pen, o.lower, o.upper)
                    <= (o.kkt_tol if o.kkt_tol is not None else 0.0)
                    for a, i in enumerate(idx)
                ]
            )
            stop |= dec <= o.tol * o.tol * (1.0 + np.abs(f))
        else:
            stop = dec <= 2 * o.tol * (1.0 + np.abs(f))
        stop |= bad
        self.done[idx[stop]] = True
        self.conv[idx[stop & ~bad]] = True
        if self.single and stop[0] and not bad[0]:  # one solve whose coefficients are used (not scoring)
            _polish(st, idx[stop & ~bad], step[stop & ~bad], f[stop & ~bad], self.vals)
        if o.give_up is not None and o.l1 is None:
            hopeless = ~stop & (f - 2.0 * dec > o.give_up)
            self.done[idx[hopeless]] = True
            stop |= hopeless
        return stop

    def _line_search(self, idx: np.ndarray, go: np.ndarray, f: np.ndarray, step: np.ndarray, dec: np.ndarray) -> None:
        """Armijo backtracking for the problems ``idx[go]`` still running, then the finishes that need
        no more Hessians (a full step on a quadratic; batched scoring whose next decrement is
        predicted under the test)."""
        st, l1, pen, done, conv = self.st, self.opts.l1, self.pen, self.done, self.conv
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
                self.vals[r[ok]] = fs[ok]
                accepted_full[acc] = steps[acc] == 1.0
            pending = pending[~ok]
            if len(pending) == 0:
                break
            steps[pending] *= 0.5
        # no decrease along the direction: at the optimum up to rounding
        done[rows[pending]] = True
        conv[rows[pending]] = True
        if self.quad_finish:
            # one full Newton step solves a quadratic exactly
            fin = rows[accepted_full]
            done[fin] = True
            conv[fin] = True
        elif l1 is None and not self.matrix_free and self.m > 1:
            # batched scoring (values only; a single solve's coefficients are used, so it confirms and
            # polishes): a full step after which the next decrement, predicted at the last rate as dec * (dec / dec_prev)
            # (an overestimate when convergence is quadratic), is under the stopping test: skip the Hessian
            # that would only confirm it
            dg, bound = dec[go], 2 * self.opts.tol * (1.0 + np.abs(f[go]))
            quad = accepted_full & np.isfinite(self.prev_dec[rows]) & (dg * dg <= bound * self.prev_dec[rows])
            done[rows[quad]] = True
            conv[rows[quad]] = True
        self.prev_dec[rows] = dec[go]


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
    """The upper Cholesky factor of H0 (D, D) with the relative jitter JITTER on the diagonal
    (LAPACK called directly: small D is common; H0 is not modified), or None when H0 is not
    numerically positive definite."""
    D = H0.shape[0]
    H0 = H0.copy()
    H0.reshape(-1)[:: D + 1] += JITTER * abs(H0.trace()) / D  # the diagonal as a view (.flat costs ~1 us more)
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
        if not t.diagonal or d2 is None:
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
    Hj = H + (JITTER * np.abs(trace) / D)[:, None, None] * np.eye(D)
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
