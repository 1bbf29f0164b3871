"""The compiled kernels of the lean path: ``auto``'s whole search on a small composite problem in one
call (numba, compiled on first use and cached on disk; this module is imported only when a lean
solve runs, never by ``import sparsemodel``).

The problem (arrays, never a problem object; :mod:`sparsemodel.lowering.lean` builds them once per
lowering and rebinds them in place for new data of the same shape):

    f(x) = const + lin'x + sum_i wc_i phi((J x + b)_i) + sum_j rd_j x_j^2 / 2

over the flat vector x (D coordinates), with nnz(x_C) <= k on the constrained coordinates C and
the free coordinates F (an intercept) always optimized; phi one elementwise loss by its code
(:data:`SQUARE`, :data:`LOGISTIC`, :data:`EXP`, :data:`LOG`), wc the coefficient times the weights,
rd a separable ridge's Hessian diagonal.

What runs is the algorithm of :mod:`sparsemodel.solvers.auto` and :mod:`sparsemodel.solvers.grahtp`
for this class of problems, step for step (the GraHTP start of paper 000, Algorithm 1 with its
unit step, backtracking and support-change line search; the screening start on quadratics; the
swap search ranked by the second-order model of :class:`sparsemodel.lowering.swaps.SwapModel` and
checked by exact restricted solves): the same supports visited and the same end points, without a
Python call per step. Restricted solves: a Cholesky factorization of the cached Gram block on a
quadratic objective, the damped Newton loop of :func:`sparsemodel.numerics.newton.newton` (the same
stopping test, Armijo constant, polish and ``give_up``) otherwise.

A kernel that meets a case it does not treat (a Hessian that is not numerically positive definite,
a Newton solve that does not converge, a start outside the loss's domain) returns ``FALLBACK``; the
caller then runs the general pipeline, which handles it (dependent columns, unbounded objectives).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

SQUARE, LOGISTIC, EXP, LOG = 0, 1, 2, 3
ATOM_CODES = {"square": SQUARE, "logistic": LOGISTIC, "exp": EXP, "log": LOG}

# statuses of a kernel run
CONVERGED, MAX_ITER, DIVERGED, FALLBACK = 0, 1, 2, 3

ROUNDING = 4 * np.finfo(float).eps  # the polish's allowance (numerics/newton._ROUNDING)
NEWTON_MAX_ITER = 100
SEARCH_TRIES = 3  # supports tried by one support-change line search (solvers/grahtp.SEARCH_TRIES)
MAX_MOVE = 1e6  # lowering/constants.MAX_MOVE
JITTER = 1e-10  # the swap model's relative jitter (lowering/swaps.SwapModel)

# counters returned in ``stats`` (int64 array)
ST_SOLVES, ST_NEWTON, ST_GRADS, ST_HT, ST_MODELS, ST_EXACT, ST_TRIES, ST_MULTI, ST_FULL = range(9)
N_STATS = 9


# ---------------------------------------------------------------------- the loss


@njit(cache=True)
def _losses(code, z, wc, d1, d2, order):
    """sum_i wc_i phi(z_i); with order >= 1 fills d1 = wc phi'(z), order 2 also d2 = wc phi''(z)."""
    total = 0.0
    for i in range(z.shape[0]):
        zi = z[i]
        if code == SQUARE:
            v, a, h = zi * zi, 2.0 * zi, 2.0
        elif code == LOGISTIC:
            e = math.exp(-abs(zi))
            v = max(zi, 0.0) + math.log1p(e)
            inv = 1.0 / (1.0 + e)
            a = inv if zi >= 0 else e * inv
            h = e * inv * inv
        elif code == EXP:
            v = math.exp(zi) if zi < 709.0 else math.inf
            a, h = v, v
        else:  # LOG (its loss is -log: a negative coefficient)
            if zi > 0:
                v, a, h = math.log(zi), 1.0 / zi, -1.0 / (zi * zi)
            else:
                v, a, h = -math.inf, math.nan, math.nan
        total += wc[i] * v
        if order >= 1:
            d1[i] = wc[i] * a
        if order >= 2:
            d2[i] = wc[i] * h
    return total


@njit(cache=True)
def _affine(J, b, u, cols):
    """z = J[:, cols] u + b."""
    n = J.shape[0]
    z = b.copy()
    for i in range(n):
        s = z[i]
        for a in range(cols.shape[0]):
            s += J[i, cols[a]] * u[a]
        z[i] = s
    return z


@njit(cache=True)
def _value(P, u, cols, d1, d2, order):
    """f at the point with x[cols] = u and every other coordinate 0 (with derivatives of the loss)."""
    J, b, wc, lin, rd, code, const = P[0], P[1], P[2], P[3], P[4], P[5], P[6]
    z = _affine(J, b, u, cols)
    f = const + _losses(code, z, wc, d1, d2, order)
    for a in range(cols.shape[0]):
        c = cols[a]
        f += lin[c] * u[a] + 0.5 * rd[c] * u[a] * u[a]
    return f


@njit(cache=True)
def _full_grad(P, u, cols, d1):
    """The gradient over every coordinate at x[cols] = u, from the loss derivatives d1 there."""
    J, lin, rd = P[0], P[3], P[4]
    g = np.dot(J.T, d1) + lin
    for a in range(cols.shape[0]):
        g[cols[a]] += rd[cols[a]] * u[a]
    return g


@njit(cache=True)
def value_and_grad(P, x):
    """f and its gradient at a flat point x (every coordinate)."""
    cols = np.flatnonzero(x)
    n = P[0].shape[0]
    d1 = np.empty(n)
    u = x[cols].copy()
    f = _value(P, u, cols, d1, d1, 1)
    return f, _full_grad(P, u, cols, d1)


# ---------------------------------------------------------------------- small dense algebra


@njit(cache=True)
def _cholesky(A, rel):
    """The lower Cholesky factor of A + rel |tr A| / m I (a copy), and whether it exists (every
    pivot positive)."""
    m = A.shape[0]
    L = A.copy()
    if m == 0:
        return L, True
    tr = 0.0
    for i in range(m):
        tr += A[i, i]
    jit = rel * abs(tr) / m
    for j in range(m):
        s = L[j, j] + jit
        for q in range(j):
            s -= L[j, q] * L[j, q]
        if not s > 0.0:
            return L, False
        d = math.sqrt(s)
        L[j, j] = d
        for i in range(j + 1, m):
            t = L[i, j]
            for q in range(j):
                t -= L[i, q] * L[j, q]
            L[i, j] = t / d
    for i in range(m):
        for j in range(i + 1, m):
            L[i, j] = 0.0
    return L, True


@njit(cache=True)
def _chol_solve(L, r):
    """Solve (L L') y = r."""
    m = L.shape[0]
    y = r.copy()
    for i in range(m):
        s = y[i]
        for q in range(i):
            s -= L[i, q] * y[q]
        y[i] = s / L[i, i]
    for i in range(m - 1, -1, -1):
        s = y[i]
        for q in range(i + 1, m):
            s -= L[q, i] * y[q]
        y[i] = s / L[i, i]
    return y


@njit(cache=True)
def _chol_inverse(L):
    """(L L')^-1."""
    m = L.shape[0]
    out = np.empty((m, m))
    e = np.zeros(m)
    for j in range(m):
        e[:] = 0.0
        e[j] = 1.0
        out[:, j] = _chol_solve(L, e)
    return 0.5 * (out + out.T)


# ---------------------------------------------------------------------- Hessians


@njit(cache=True)
def gram_columns(P, Q, have, cols):
    """Fill the rows ``cols`` of the constant Hessian Q (symmetric: row j = column j) of a quadratic
    objective that are not there yet (``have``), from the Jacobian: each one product with J, once."""
    J, wc, rd = P[0], P[2], P[4]
    miss = 0
    for a in range(cols.shape[0]):
        if not have[cols[a]]:
            miss += 1
    if miss == 0:
        return
    n = J.shape[0]
    idx = np.empty(miss, dtype=np.int64)
    q = 0
    for a in range(cols.shape[0]):
        c = cols[a]
        if not have[c]:
            idx[q] = c
            q += 1
            have[c] = True  # (a repeated column counted once)
    idx = np.unique(idx)
    M = np.empty((n, idx.shape[0]))
    for i in range(n):
        w2 = 2.0 * wc[i]
        for a in range(idx.shape[0]):
            M[i, a] = w2 * J[i, idx[a]]
    R = np.dot(J.T, M)  # (D, miss)
    for a in range(idx.shape[0]):
        c = idx[a]
        Q[c, :] = R[:, a]
        Q[c, c] += rd[c]


@njit(cache=True)
def _hessian_cols(P, d2, B):
    """J[:, B]' diag(d2) J (|B| x D): the rows B of the Hessian of the loss part (no ridge)."""
    J = P[0]
    n = J.shape[0]
    M = np.empty((n, B.shape[0]))
    for i in range(n):
        for a in range(B.shape[0]):
            M[i, a] = d2[i] * J[i, B[a]]
    return np.dot(M.T, J)


# ---------------------------------------------------------------------- restricted solves


@njit(cache=True)
def restricted(P, Q, have, cols, u0, tol, give_up, domain):
    """min f over the coordinates ``cols`` (every other coordinate 0), from u0 (Newton's start).

    Returns (u, f, d1 at u, ok, converged, Newton iterations). ``ok`` False: a case for the
    general path (a Hessian not numerically positive definite, no point of finite f found from
    u0 and the ``domain`` trials of the free coordinates, a solve that does not converge without
    ``give_up``, a point running away). ``give_up`` (NaN: none): stop once the Newton model says f
    cannot get below it (numerics/newton.newton's rule)."""
    J, quad, F = P[0], P[7], P[9]
    n = J.shape[0]
    nb = cols.shape[0]
    d1 = np.empty(n)
    d2 = np.empty(n)
    if quad:
        if nb == 0:
            u = np.zeros(0)
            return u, _value(P, u, cols, d1, d2, 1), d1, True, True, 1
        gram_columns(P, Q, have, cols)
        H = np.empty((nb, nb))
        g0 = P[10]
        r = np.empty(nb)
        for a in range(nb):
            r[a] = -g0[cols[a]]
            for c in range(nb):
                H[a, c] = Q[cols[a], cols[c]]
        L, okc = _cholesky(H, 0.0)
        if not okc:
            return u0, math.inf, d1, False, False, 1
        dmin, dmax = math.inf, 0.0
        for a in range(nb):
            dmin = min(dmin, L[a, a] * L[a, a])
            dmax = max(dmax, L[a, a] * L[a, a])
        if dmin <= 1e-7 * dmax:  # lowering/active._GramQuadratic: not numerically positive definite
            return u0, math.inf, d1, False, False, 1
        u = _chol_solve(L, r)
        f = _value(P, u, cols, d1, d2, 1)
        return u, f, d1, True, True, 1
    # the damped Newton loop of numerics/newton._newton_one
    u = u0.copy()
    f = _value(P, u, cols, d1, d2, 2)
    if not np.isfinite(f):  # outside the loss's domain: the free coordinates moved (lowering/guards)
        found = False
        for t_ in range(domain.shape[0]):
            for a in range(nb):
                for c in range(F.shape[0]):
                    if cols[a] == F[c]:
                        u[a] = domain[t_]
            f = _value(P, u, cols, d1, d2, 2)
            if np.isfinite(f):
                found = True
                break
        if not found:
            return u0, math.inf, d1, False, False, 0
    JB = np.empty((n, nb))
    for i in range(n):
        for a in range(nb):
            JB[i, a] = J[i, cols[a]]
    rd, lin = P[4], P[3]
    conv = False
    its = 0
    scale = 1.0 + math.sqrt(np.sum(u0 * u0))
    for _ in range(NEWTON_MAX_ITER):
        its += 1
        if nb == 0:
            conv = True
            break
        g = np.dot(JB.T, d1)
        for a in range(nb):
            g[a] += lin[cols[a]] + rd[cols[a]] * u[a]
        M = np.empty((n, nb))
        for i in range(n):
            for a in range(nb):
                M[i, a] = d2[i] * JB[i, a]
        H = np.dot(M.T, JB)
        for a in range(nb):
            H[a, a] += rd[cols[a]]
        L, okc = _cholesky(H, 1e-14)
        if not okc:
            return u, f, d1, False, False, its
        step = -_chol_solve(L, g)
        dec = -np.dot(g, step)
        if not dec >= 0.0:
            return u, f, d1, False, False, its
        if dec <= 2.0 * tol * (1.0 + abs(f)):
            conv = True
            ut = u + step
            e1 = np.empty(n)
            e2 = np.empty(n)
            ft = _value(P, ut, cols, e1, e2, 2)
            if np.isfinite(ft) and ft <= f + ROUNDING * (1.0 + abs(f)):
                u, f, d1, d2 = ut, ft, e1, e2
            break
        if not math.isnan(give_up) and f - 2.0 * dec > give_up:
            break
        t = 1.0
        moved = False
        for _ls in range(50):
            ut = u + t * step
            e1 = np.empty(n)
            e2 = np.empty(n)
            ft = _value(P, ut, cols, e1, e2, 2)
            if ft <= f - 0.25 * t * dec:
                u, f, d1, d2 = ut, ft, e1, e2
                moved = True
                break
            t *= 0.5
        if not moved:
            conv = True
            break
    if math.sqrt(np.sum(u * u)) > 1e12 * scale:
        return u, f, d1, False, conv, its
    if not conv and math.isnan(give_up):  # lowering/restricted: the general path checks for a runaway
        return u, f, d1, False, conv, its
    return u, f, d1, True, conv, its


@njit(cache=True)
def _union(F, C, sel):
    """The sorted flat coordinates C[sel] together with F."""
    out = np.empty(F.shape[0] + sel.shape[0], dtype=np.int64)
    for a in range(F.shape[0]):
        out[a] = F[a]
    for a in range(sel.shape[0]):
        out[F.shape[0] + a] = C[sel[a]]
    return np.sort(out)


@njit(cache=True)
def _solve_on(P, Q, have, sel, x0, give_up, domain, stats):
    """The restricted minimizer over C[sel] and F from x0 (a flat point): (x, f, g, ok)."""
    C, F = P[8], P[9]
    D = P[0].shape[1]
    cols = _union(F, C, sel)
    u0 = np.empty(cols.shape[0])
    for a in range(cols.shape[0]):
        u0[a] = x0[cols[a]]
    u, f, d1, ok, conv, its = restricted(P, Q, have, cols, u0, 1e-12, give_up, domain)
    stats[ST_SOLVES] += 1
    stats[ST_NEWTON] += its
    x = np.zeros(D)
    for a in range(cols.shape[0]):
        x[cols[a]] = u[a]
    if not ok:
        return x, f, np.zeros(D), False
    stats[ST_GRADS] += 1
    return x, f, _full_grad(P, u, cols, d1), True


# ---------------------------------------------------------------------- thresholding


@njit(cache=True)
def _top_k(zc, k):
    """Positions of the k entries of largest magnitude, sorted (ties: the lower position)."""
    m = zc.shape[0]
    if k >= m:
        return np.arange(m)
    order = np.argsort(-np.abs(zc), kind="mergesort")
    return np.sort(order[:k])


@njit(cache=True)
def _project(C, z, k):
    """Hard thresholding on C (free coordinates untouched): (projected z, selected positions)."""
    zc = np.empty(C.shape[0])
    for a in range(C.shape[0]):
        zc[a] = z[C[a]]
    sel = _top_k(zc, k)
    out = z.copy()
    keep = np.zeros(C.shape[0], dtype=np.bool_)
    for a in range(sel.shape[0]):
        keep[sel[a]] = True
    for a in range(C.shape[0]):
        if not keep[a]:
            out[C[a]] = 0.0
    return out, sel


@njit(cache=True)
def _same(a, b):
    if a.shape[0] != b.shape[0]:
        return False
    for i in range(a.shape[0]):
        if a[i] != b[i]:
            return False
    return True


@njit(cache=True)
def _support(C, x):
    """Positions into C where x is nonzero."""
    out = np.empty(C.shape[0], dtype=np.int64)
    q = 0
    for a in range(C.shape[0]):
        if x[C[a]] != 0.0:
            out[q] = a
            q += 1
    return out[:q].copy()


@njit(cache=True)
def _norm(v):
    return math.sqrt(np.dot(v, v))


@njit(cache=True)
def _step_size(P, x, g):
    """GraHTP's unit step 1 / M at x: M the mean |Hessian diagonal| over C (lowering/constants:
    mean_curvature), made safe (safe_curvature: at least ||g|| / (MAX_MOVE max(1, ||x||)))."""
    J, b, wc, rd, code, C = P[0], P[1], P[2], P[4], P[5], P[8]
    n = J.shape[0]
    cols = np.flatnonzero(x)
    u = x[cols].copy()
    z = _affine(J, b, u, cols)
    d1 = np.empty(n)
    d2 = np.empty(n)
    _losses(code, z, wc, d1, d2, 2)
    R = P[11]  # sum over C of J[r, j]^2 per row
    tot = 0.0
    for i in range(n):
        tot += abs(d2[i]) * R[i]
    for a in range(C.shape[0]):
        tot += abs(rd[C[a]])
    est = tot / C.shape[0]
    gn = _norm(g)
    floor = gn / (MAX_MOVE * max(1.0, _norm(x))) if np.isfinite(gn) else 0.0
    M = abs(est) if np.isfinite(est) else 0.0
    M = max(M, floor)
    if M > 0 and np.isfinite(M):
        return 1.0 / M
    return 1.0


# ---------------------------------------------------------------------- GraHTP (paper 000, Algorithm 1)


@njit(cache=True)
def grahtp(P, Q, have, k, x0, domain, max_iter, tol, stats, flog):
    """GraHTP as solvers/grahtp.GraHTP runs it with its defaults (eta 'local', 'htp' on a quadratic;
    backtracking; the support-change line search): (x, f, g, status, iterations, eta, logged
    objectives count). ``flog`` receives the objectives it logs."""
    C = P[8]
    quad = P[7]
    nlog = 0
    st_prev = _support(C, x0)
    x, f, g, ok = _solve_on(P, Q, have, st_prev, x0, math.nan, domain, stats)
    if not ok:
        return x, f, g, FALLBACK, 0, 1.0, nlog
    f0 = f
    if not np.isfinite(f):
        return x, f, g, DIVERGED, 0, 1.0, nlog
    eta = _step_size(P, x, g)
    flog[nlog] = f
    nlog += 1
    status = MAX_ITER
    it = 0
    grow = 0
    retry = False
    while it < max_iter:
        it += 1
        if not retry and not quad and it > 1:
            eta = _step_size(P, x, g)
        retry = False
        warm, st = _project(C, x - eta * g, k)
        stats[ST_HT] += 1
        same = _same(st, st_prev)
        if same:
            xn, fn, gn = x, f, g
        else:
            xn, fn, gn, ok = _solve_on(P, Q, have, st, warm, math.nan, domain, stats)
            if not ok:
                return x, f, g, FALLBACK, it, eta, nlog
        increased = (not np.isfinite(fn)) or fn > f + 1e-12 * max(1.0, abs(f))
        if increased:
            eta /= 2.0
            if eta < 1e-14 * (1.0 / max(np.max(np.abs(g)), 1e-300)):
                status = CONVERGED
                flog[nlog] = f
                nlog += 1
                break
            it -= 1
            retry = True
            continue
        grow = grow + 1 if fn > f + 1e-12 * max(1.0, abs(f)) else 0
        if same:  # the support-change line search
            tried = np.empty((SEARCH_TRIES + 1, k), dtype=np.int64)
            ntried = 1
            tried[0, : st_prev.shape[0]] = st_prev
            sizes = np.empty(SEARCH_TRIES + 1, dtype=np.int64)
            sizes[0] = st_prev.shape[0]
            e = eta
            found = False
            for _ in range(60):
                e *= 2.0
                warm, st2 = _project(C, x - e * g, k)
                stats[ST_HT] += 1
                seen = False
                for q in range(ntried):
                    if _same(st2, tried[q, : sizes[q]]):
                        seen = True
                        break
                if seen:
                    continue
                tried[ntried, : st2.shape[0]] = st2
                sizes[ntried] = st2.shape[0]
                ntried += 1
                bar = f - 1e-12 * max(1.0, abs(f))
                xs, fs, gs, ok = _solve_on(P, Q, have, st2, warm, bar, domain, stats)
                if not ok:
                    return x, f, g, FALLBACK, it, eta, nlog
                if np.isfinite(fs) and fs < bar:
                    xn, fn, gn, st = xs, fs, gs, st2
                    found = True
                    break
                if ntried > SEARCH_TRIES:
                    break
            if not found:
                status = CONVERGED
                flog[nlog] = f
                nlog += 1
                break
            same = False
        dx = _norm(xn - x)
        nx = _norm(x)
        x, f, g, st_prev = xn, fn, gn, st
        if nlog < flog.shape[0]:
            flog[nlog] = f
            nlog += 1
        if grow >= 10 and f > f0:
            status = DIVERGED
            break
        if dx <= tol * max(nx, 1e-300) or (nx == 0 and dx == 0):
            status = CONVERGED
            break
    return x, f, g, status, it, eta, nlog


# ---------------------------------------------------------------------- the swap model


@njit(cache=True)
def _hess_diag(P, x, at_x):
    """diag of the Hessian over every coordinate: the constant one (a quadratic), or at x."""
    J, b, wc, rd, code = P[0], P[1], P[2], P[4], P[5]
    if not at_x:
        return P[12]
    n = J.shape[0]
    cols = np.flatnonzero(x)
    u = x[cols].copy()
    z = _affine(J, b, u, cols)
    d1 = np.empty(n)
    d2 = np.empty(n)
    _losses(code, z, wc, d1, d2, 2)
    return np.dot(P[13].T, d2) + rd


@njit(cache=True)
def swap_model(P, Q, have, x, g, units, pool, candidates):
    """The second-order model of every one-coordinate swap at the restricted minimizer x on the
    selected positions ``units`` (lowering/swaps.SwapModel for single coordinates, no linear
    constraints). Returns (units_out, gain, removal, cand (indices into units_out, by decreasing
    gain), delta (len(units) x len(cand)), A, AB, s1, v1, HBB, HBI, HII, B) -- the last ones what
    :func:`_warm` reads."""
    J, b, wc, rd, code, quad, C, F = P[0], P[1], P[2], P[4], P[5], P[7], P[8], P[9]
    n = J.shape[0]
    nunits = C.shape[0]
    nJ = units.shape[0]
    inside = np.zeros(nunits, dtype=np.bool_)
    for a in range(nJ):
        inside[units[a]] = True
    units_out = np.flatnonzero(~inside)
    nb = nJ + F.shape[0]
    B = np.empty(nb, dtype=np.int64)
    for a in range(nJ):
        B[a] = C[units[a]]
    for a in range(F.shape[0]):
        B[nJ + a] = F[a]
    if units_out.shape[0] > pool:  # the screen: g_i^2 / H_ii (ABESS's forward sacrifice)
        diag = _hess_diag(P, x, not quad)
        score = np.empty(units_out.shape[0])
        for a in range(units_out.shape[0]):
            c = C[units_out[a]]
            s = g[c] * g[c] / diag[c]
            score[a] = s if np.isfinite(s) else 0.0
        order = np.argsort(-score, kind="mergesort")
        units_out = np.sort(units_out[order[:pool]])
    nI = units_out.shape[0]
    Icols = np.empty(nI, dtype=np.int64)
    for a in range(nI):
        Icols[a] = C[units_out[a]]
    if quad:
        gram_columns(P, Q, have, B)
        HBB = np.empty((nb, nb))
        HBI = np.empty((nb, nI))
        for a in range(nb):
            for c in range(nb):
                HBB[a, c] = Q[B[a], B[c]]
            for c in range(nI):
                HBI[a, c] = Q[B[a], Icols[c]]
        diag = P[12]
        HII = np.empty(nI)
        for c in range(nI):
            HII[c] = diag[Icols[c]]
    else:
        cols = np.flatnonzero(x)
        u = x[cols].copy()
        z = _affine(J, b, u, cols)
        d1 = np.empty(n)
        d2 = np.empty(n)
        _losses(code, z, wc, d1, d2, 2)
        Hrows = _hessian_cols(P, d2, B)  # (nb, D)
        HBB = np.empty((nb, nb))
        HBI = np.empty((nb, nI))
        for a in range(nb):
            for c in range(nb):
                HBB[a, c] = Hrows[a, B[c]]
            HBB[a, a] += rd[B[a]]
            for c in range(nI):
                HBI[a, c] = Hrows[a, Icols[c]]
        full = np.dot(P[13].T, d2)
        HII = np.empty(nI)
        for c in range(nI):
            HII[c] = full[Icols[c]] + rd[Icols[c]]
    HBB = 0.5 * (HBB + HBB.T)
    tr = 0.0
    for a in range(nb):
        tr += HBB[a, a]
    lam = JITTER * max(tr / max(nb, 1), 1e-300)
    M = HBB.copy()
    for a in range(nb):
        M[a, a] += lam
    L, okc = _cholesky(M, 0.0)
    if not okc:
        A = np.zeros((0, 0))
        return (units_out, np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros((0, 0)), A,
                np.zeros((0, 0)), np.zeros(0), np.zeros(0), HBB, HBI, HII, B, False)
    A = _chol_inverse(L)
    AB = np.dot(A, HBI)
    s1 = np.empty(nI)
    v1 = np.empty(nI)
    gain = np.empty(nI)
    for c in range(nI):
        s = HII[c]
        for a in range(nb):
            s -= HBI[a, c] * AB[a, c]
        s += JITTER * max(abs(HII[c]), 1e-300)
        s1[c] = s
        v1[c] = g[Icols[c]] / s
        gn = 0.5 * g[Icols[c]] * v1[c]
        gain[c] = max(gn, 0.0) if np.isfinite(gn) else 0.0
    removal = np.empty(nJ)
    for a in range(nJ):
        removal[a] = 0.5 * x[B[a]] ** 2 / A[a, a]
    order = np.argsort(-gain, kind="mergesort")
    take = min(nI, max(candidates, 1))
    widest = nI if quad else min(nI, 4 * take)
    every = _pairs(AB, A, s1, v1, x, B, gain, nJ, order[:widest])
    while nJ > 0:
        best = np.inf
        for a in range(nJ):
            for c in range(take):
                best = min(best, every[a, c])
        if nJ == 0 or take == 0:
            best = 0.0
        if take >= widest or -gain[order[take]] >= best:
            break
        take = min(widest, 2 * take)
    cand = order[:take].copy()
    delta = every[:, :take].copy()
    return units_out, gain, removal, cand, delta, A, AB, s1, v1, HBB, HBI, HII, B, True


@njit(cache=True)
def _pairs(AB, A, s1, v1, x, B, gain, nJ, cols):
    """delta[J, I]: the model's change of f when J leaves and I enters (SwapModel._pairs)."""
    nc = cols.shape[0]
    out = np.empty((nJ, nc))
    for a in range(nJ):
        xa = x[B[a]]
        for q in range(nc):
            c = cols[q]
            K = A[a, a] + AB[a, c] ** 2 / s1[c]
            e = xa + AB[a, c] * v1[c]
            d = -gain[c] + 0.5 * e * e / K
            out[a, q] = d if np.isfinite(d) else np.inf
    return out


@njit(cache=True)
def _ranked(delta, units, units_out, cand, limit):
    """The ``limit`` best swaps (unit out, unit in, predicted change), best first (SwapModel.swaps)."""
    nJ, nc = delta.shape
    flat = delta.ravel()
    order = np.argsort(flat, kind="mergesort")
    m = min(limit, flat.shape[0])
    outs = np.empty(m, dtype=np.int64)
    ins = np.empty(m, dtype=np.int64)
    vals = np.empty(m)
    for r in range(m):
        j, c = order[r] // nc, order[r] % nc
        outs[r] = units[j]
        ins[r] = units_out[cand[c]]
        vals[r] = flat[order[r]]
    return outs, ins, vals


@njit(cache=True)
def _disjoint(outs, ins, vals, limit, any_sign):
    """The best swaps with predicted decrease (any change with ``any_sign``), no unit twice, at most
    ``limit`` (solvers/auto._disjoint)."""
    po = np.empty(limit, dtype=np.int64)
    pi = np.empty(limit, dtype=np.int64)
    q = 0
    for r in range(outs.shape[0]):
        if q >= limit or not (vals[r] < 0 or any_sign):
            break
        used = False
        for s in range(q):
            if po[s] == outs[r] or pi[s] == ins[r]:
                used = True
                break
        if used:
            continue
        po[q] = outs[r]
        pi[q] = ins[r]
        q += 1
    if q == 0 and outs.shape[0] > 0:
        po[0] = outs[0]
        pi[0] = ins[0]
        q = 1
    return po[:q].copy(), pi[:q].copy()


@njit(cache=True)
def _swapped(units, po, pi, c):
    """The units with the first c pairs exchanged (sorted)."""
    out = units.copy()
    for s in range(c):
        for a in range(out.shape[0]):
            if out[a] == po[s]:
                out[a] = pi[s]
                break
    return np.sort(out)


@njit(cache=True)
def _warm(C, x, g, units, units_out, HBB, HBI, HII, B, po, pi, c):
    """The model's minimizer on the support with the units po[:c] removed and pi[:c] added (the
    Hessian between two entering units taken as zero): the warm start of the exact solve
    (SwapModel.warm)."""
    nb = B.shape[0]
    nJ = units.shape[0]
    out_rows = np.empty(c, dtype=np.int64)
    in_cols = np.empty(c, dtype=np.int64)
    for s in range(c):
        for a in range(nJ):
            if units[a] == po[s]:
                out_rows[s] = a
        for a in range(units_out.shape[0]):
            if units_out[a] == pi[s]:
                in_cols[s] = a
    keep_mask = np.ones(nb, dtype=np.bool_)
    for s in range(c):
        keep_mask[out_rows[s]] = False
    keep = np.flatnonzero(keep_mask)
    nk = keep.shape[0]
    m = nk + c
    H = np.zeros((m, m))
    for a in range(nk):
        for q in range(nk):
            H[a, q] = HBB[keep[a], keep[q]]
        for s in range(c):
            H[a, nk + s] = HBI[keep[a], in_cols[s]]
            H[nk + s, a] = H[a, nk + s]
    for s in range(c):
        H[nk + s, nk + s] = HII[in_cols[s]]
    rhs = np.empty(m)
    for a in range(nk):
        t = g[B[keep[a]]]
        for s in range(c):
            t -= HBB[keep[a], out_rows[s]] * x[B[out_rows[s]]]
        rhs[a] = t
    for s in range(c):
        t = g[C[units_out[in_cols[s]]]]
        for q in range(c):
            t -= HBI[out_rows[q], in_cols[s]] * x[B[out_rows[q]]]
        rhs[nk + s] = t
    tr = 0.0
    for a in range(m):
        tr += H[a, a]
    lam = 1e-10 * max(tr / max(m, 1), 1e-300)
    for a in range(m):
        H[a, a] += lam
    L, okc = _cholesky(H, 0.0)
    if okc:
        step = -_chol_solve(L, rhs)
    else:
        step = -np.linalg.lstsq(H, rhs)[0]
    return out_rows, keep, in_cols, step


# ---------------------------------------------------------------------- auto's search


@njit(cache=True)
def _check(P, Q, have, x, g, units, new, units_out, HBB, HBI, HII, B, po, pi, c, bar, domain, stats, rej, nrej):
    """The exact restricted solve of the support ``new`` (from the model's minimizer on a
    non-quadratic objective): (x, f, g, improved, ok, nrej); a support already rejected at this f
    is not solved again, one that fails is added to ``rej``."""
    k = new.shape[0]
    for q in range(nrej):
        if _same(new, rej[q, :k]):
            return x, math.inf, g, False, True, nrej
    C, F, quad = P[8], P[9], P[7]
    D = x.shape[0]
    if quad:
        x0 = np.zeros(D)
    else:
        out_rows, keep, in_cols, step = _warm(C, x, g, units, units_out, HBB, HBI, HII, B, po, pi, c)
        x0 = x.copy()
        for s in range(c):
            x0[B[out_rows[s]]] = 0.0
        for a in range(keep.shape[0]):
            x0[B[keep[a]]] += step[a]
        for s in range(c):
            x0[C[units_out[in_cols[s]]]] = step[keep.shape[0] + s]
    xn, fn, gn, ok = _solve_on(P, Q, have, new, x0, bar, domain, stats)
    stats[ST_EXACT] += 1
    if not ok:
        return xn, fn, gn, False, False, nrej
    if np.isfinite(fn) and fn < bar:
        return xn, fn, gn, True, True, nrej
    if nrej < rej.shape[0]:
        rej[nrej, :k] = new
        nrej += 1
    return xn, fn, gn, False, True, nrej


@njit(cache=True)
def search(P, Q, have, k, x, f, g, units, opts, domain, stats, flog, nlog):
    """The swap search of solvers/auto.Auto._search_from from the restricted minimizer x on the
    units ``units``: (x, f, units, status, steps, ok, nlog). ``opts``: exchange, tries, candidates,
    pool, max_iter (ints) and min_decrease (float), as float64."""
    exchange, tries, candidates = int(opts[0]), int(opts[1]), int(opts[2])
    pool, max_iter, min_dec = int(opts[3]), int(opts[4]), opts[5]
    quad = P[7]
    nunits = P[8].shape[0]
    status = MAX_ITER
    steps = 0
    while steps < max_iter:
        rej = np.empty((64, k), dtype=np.int64)
        nrej = 0
        accepted = False
        ok = True
        full_pass = False
        for pass_ in range(2):
            pl = pool if pass_ == 0 else nunits
            (units_out, gain, removal, cand, delta, A, AB, s1, v1, HBB, HBI, HII, B, okm) = swap_model(
                P, Q, have, x, g, units, pl, candidates
            )
            stats[ST_MODELS] += 1
            if pass_ == 1:
                stats[ST_FULL] += 1
            if not okm:
                return x, f, units, FALLBACK, steps, False, nlog
            xn, fn, gn, un, accepted, ok, nrej = _step(
                P, Q, have, x, f, g, units, units_out, gain, removal, cand, delta, HBB, HBI, HII, B,
                exchange, tries, min_dec, quad, domain, stats, rej, nrej
            )
            if not ok:
                return x, f, units, FALLBACK, steps, False, nlog
            if accepted or units_out.shape[0] + units.shape[0] >= nunits:
                break
            full_pass = True
        if not accepted:
            status = CONVERGED
            break
        x, f, g, units = xn, fn, gn, un
        steps += 1
        if nlog < flog.shape[0]:
            flog[nlog] = f
            nlog += 1
    return x, f, units, status, steps, True, nlog


@njit(cache=True)
def _step(P, Q, have, x, f, g, units, units_out, gain, removal, cand, delta, HBB, HBI, HII, B, exchange, tries,
          min_dec, quad, domain, stats, rej, nrej):
    """One step of the search (solvers/auto.Auto._step without linear constraints): the best
    disjoint swaps together, halved until a set lowers f; the next ``tries`` single swaps; then
    several swaps at once regardless of their single predictions (the best disjoint pairs, then
    ABESS's smallest removals for the largest gains). Returns (x, f, g, units, accepted, ok, nrej)."""
    outs, ins, vals = _ranked(delta, units, units_out, cand, 4 * exchange + tries + 16)
    if quad:  # the model is f: a swap it rates >= 0 cannot lower f
        thr = -min_dec * max(1.0, abs(f))
        keep = vals < thr
        outs, ins, vals = outs[keep], ins[keep], vals[keep]
    bar = f - min_dec * max(1.0, abs(f))
    po, pi = _disjoint(outs, ins, vals, exchange, False)
    k = units.shape[0]
    tried = np.empty((64, k), dtype=np.int64)
    ntried = 0
    c = po.shape[0]
    while c >= 1:
        new = _swapped(units, po, pi, c)
        if ntried < 64:
            tried[ntried] = new
            ntried += 1
        xn, fn, gn, better, ok, nrej = _check(
            P, Q, have, x, g, units, new, units_out, HBB, HBI, HII, B, po, pi, c, bar, domain, stats, rej, nrej
        )
        if not ok:
            return x, f, g, units, False, False, nrej
        if better:
            return xn, fn, gn, new, True, True, nrej
        c //= 2
    extra = 0
    for r in range(outs.shape[0]):
        if extra >= tries:
            break
        po1 = outs[r : r + 1].copy()
        pi1 = ins[r : r + 1].copy()
        new = _swapped(units, po1, pi1, 1)
        seen = False
        for q in range(ntried):
            if _same(new, tried[q]):
                seen = True
                break
        if seen:
            continue
        if ntried < 64:
            tried[ntried] = new
            ntried += 1
        extra += 1
        xn, fn, gn, better, ok, nrej = _check(
            P, Q, have, x, g, units, new, units_out, HBB, HBI, HII, B, po1, pi1, 1, bar, domain, stats, rej, nrej
        )
        if not ok:
            return x, f, g, units, False, False, nrej
        if better:
            stats[ST_TRIES] += 1
            return xn, fn, gn, new, True, True, nrej
    # several at once: the joint model's best disjoint pairs, then ABESS's sacrifices
    o2, i2, v2 = _ranked(delta, units, units_out, cand, 4 * exchange + 16)
    jpo, jpi = _disjoint(o2, i2, v2, exchange, True)
    nout = min(exchange, k)
    ro = np.argsort(removal, kind="mergesort")[:nout]
    gi = np.argsort(-gain, kind="mergesort")[: min(nout, units_out.shape[0])]
    m = min(ro.shape[0], gi.shape[0])
    spo = np.empty(m, dtype=np.int64)
    spi = np.empty(m, dtype=np.int64)
    for s in range(m):
        spo[s] = units[ro[s]]
        spi[s] = units_out[gi[s]]
    for which in range(2):
        bpo = jpo if which == 0 else spo
        bpi = jpi if which == 0 else spi
        c = bpo.shape[0]
        while c >= 2:
            new = _swapped(units, bpo, bpi, c)
            seen = False
            for q in range(ntried):
                if _same(new, tried[q]):
                    seen = True
                    break
            if not seen:
                if ntried < 64:
                    tried[ntried] = new
                    ntried += 1
                xn, fn, gn, better, ok, nrej = _check(
                    P, Q, have, x, g, units, new, units_out, HBB, HBI, HII, B, bpo, bpi, c, bar, domain, stats, rej,
                    nrej
                )
                if not ok:
                    return x, f, g, units, False, False, nrej
                if better:
                    stats[ST_MULTI] += 1
                    return xn, fn, gn, new, True, True, nrej
            c //= 2
    return x, f, g, units, False, True, nrej


START_GRAHTP, START_SCREEN, START_INIT = 0, 1, 2


@njit(cache=True)
def auto_run(P, Q, have, k, starts, x_inside, x_init, opts, domain, stats, flog, runs):
    """``auto`` from each start in ``starts`` (:data:`START_GRAHTP`: GraHTP from ``x_inside``;
    :data:`START_SCREEN`: the free coordinates fitted at ``x_inside``, then the k units of largest
    model gain; :data:`START_INIT`: the point ``x_init``, already cut to k units), each followed
    by the swap search; the lowest end point kept (the first of equal ones).

    ``opts``: exchange, tries, candidates, pool, max_iter, min_decrease, GraHTP's max_iter and tol.
    ``stats`` (starts x N_STATS) and ``runs`` (starts x 5: start objective, objective, swaps,
    iterations, status; NaN objectives for a start that failed) are filled per start; ``flog`` gets
    the objectives the search logs (each start's, then every accepted swap). Returns (x, f, status,
    iterations, best start index or -1, number logged); status :data:`FALLBACK` when some step met
    a case for the general path."""
    C = P[8]
    D = P[0].shape[1]
    pool, candidates = int(opts[3]), int(opts[2])
    g_max_iter, g_tol = int(opts[6]), opts[7]
    best = -1
    bx = np.zeros(D)
    bf = math.inf
    bstatus = MAX_ITER
    bits = 0
    nlog = 0
    scratch = np.empty(2 * g_max_iter + 8)
    for s in range(starts.shape[0]):
        st = stats[s]
        runs[s, 0] = math.nan
        runs[s, 1] = math.nan
        how = starts[s]
        if how == START_GRAHTP:
            x, f, g, status, its, eta, _n = grahtp(P, Q, have, k, x_inside, domain, g_max_iter, g_tol, st, scratch)
            if status == FALLBACK:
                return bx, bf, FALLBACK, 0, -1, nlog
            if status == DIVERGED or not np.isfinite(f):
                continue
        elif how == START_SCREEN:
            x, f, g, ok = _solve_on(P, Q, have, np.empty(0, dtype=np.int64), x_inside, math.nan, domain, st)
            if not ok:
                return bx, bf, FALLBACK, 0, -1, nlog
            its = 1
        else:
            x = x_init.copy()
            its = 1
        units = _support(C, x)
        x, f, g, ok = _solve_on(P, Q, have, units, x, math.nan, domain, st)
        if not ok:
            return bx, bf, FALLBACK, 0, -1, nlog
        if not np.isfinite(f):
            continue
        if units.shape[0] < k:  # the start used less than the budget: the units of largest gain added
            out = swap_model(P, Q, have, x, g, units, pool, candidates)
            if not out[13]:
                return bx, bf, FALLBACK, 0, -1, nlog
            units_out, gain = out[0], out[1]
            add = units_out[np.argsort(-gain, kind="mergesort")[: k - units.shape[0]]]
            units = np.sort(np.concatenate((units, add)))
            x, f, g, ok = _solve_on(P, Q, have, units, x, math.nan, domain, st)
            if not ok:
                return bx, bf, FALLBACK, 0, -1, nlog
        runs[s, 0] = f
        if nlog < flog.shape[0]:
            flog[nlog] = f
            nlog += 1
        x, f, units, status, steps, ok, nlog = search(P, Q, have, k, x, f, g, units, opts, domain, st, flog, nlog)
        if not ok:
            return bx, bf, FALLBACK, 0, -1, nlog
        runs[s, 1] = f
        runs[s, 2] = steps
        runs[s, 3] = its + steps
        runs[s, 4] = status
        if best < 0 or f < bf:
            best, bx, bf, bstatus, bits = s, x, f, status, its + steps
    if best < 0:
        return bx, bf, FALLBACK, 0, -1, nlog
    return bx, bf, bstatus, bits, best, nlog
