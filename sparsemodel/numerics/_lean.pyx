# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled kernels of the lean path: ``auto``'s whole search on a small composite problem in one
call (a C extension built at install; imported only when a lean solve runs, never by
``import sparsemodel``).

The problem (arrays in a :class:`Problem`, never a problem object; :mod:`sparsemodel.lowering.lean`
builds it once per lowering and rebinds its data in place for new data of the same shape):

    f(x) = const + lin'x + sum_i wc_i phi((J x + b)_i) + sum_j rd_j x_j^2 / 2

over the flat vector x (D coordinates), with nnz(x_C) <= k on the constrained coordinates C and the
free coordinates F (an intercept) always optimized; phi one elementwise loss by its code (SQUARE,
LOGISTIC, EXP, LOG), wc the coefficient times the weights, rd a separable ridge's Hessian diagonal.
Or the row-wise softmax (SOFTMAX): the rows of J x + b come in samples of ``classes`` entries and
the loss is sum_i wc_i logsumexp((J x + b)_i) (multinomial regression, Z = X W + b), whose Hessian
J' blockdiag(wc_i (diag p_i - p_i p_i')) J is formed from the columns each class reads. k counts
units: single coordinates, or groups of one size (``members``: each unit's positions into C, at
most MAX_UNIT of them), kept and swapped whole; a group's size in the thresholding is its
Euclidean norm (sets/sparsity.top_k).

What runs is the algorithm of :mod:`sparsemodel.solvers.auto` and :mod:`sparsemodel.solvers.grahtp`
for this class of problems, step for step: the GraHTP start (paper 000, Algorithm 1, with its unit
step, backtracking and support-change line search), the screening start on quadratics, the swap
search ranked by the second-order model of :class:`sparsemodel.lowering.swaps.SwapModel` and checked
by exact restricted solves; the same supports visited and the same end points, without a Python
call per step. Restricted solves: a Cholesky factorization of the cached Gram block on a quadratic
objective (:class:`sparsemodel.lowering.active._GramQuadratic`), the damped Newton loop of
:func:`sparsemodel.numerics.newton.newton` otherwise (the same stopping test, Armijo constant,
polish and ``give_up``). Ties in a ranking go to the lower position.

A run that meets a case it does not treat (a Hessian that is not numerically positive definite, a
Newton solve that does not converge, a start outside the loss's domain) returns FALLBACK; the
caller then runs the general pipeline, which handles it (dependent columns, unbounded objectives).
"""

import numpy as np

from libc.math cimport INFINITY, NAN, exp, fabs, isfinite, isnan, log, log1p, sqrt
from cpython.pythread cimport PyThread_get_thread_ident
from libc.stdlib cimport free, malloc
from scipy.linalg.cython_blas cimport dgemm, dgemv, dtrsm
from scipy.linalg.cython_lapack cimport dgesv, dpotrf, dpotri, dpotrs, dsyev


cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #include <math.h>
    /* The logistic loss's terms for the restricted Newton solves of ARHT (lean_move, losses): written
       without branches or calls so that the compiler vectorizes the loop; with GCC on x86-64 Linux also
       an AVX2 (with FMA from GCC 12 on) clone and from GCC 12 on an AVX-512 one, chosen at load time (target_clones). exp(x), x = -|z| <= 0: round(x / ln 2) = k by the
       shifter 1.5 * 2^52, r = x - k ln 2 in two parts (Cody-Waite, fdlibm's e_exp.c), e^r by its Taylor
       polynomial of degree 13 (|r| <= ln 2 / 2: the remainder is below 2^-57), times 2^k from its bits;
       0 below -708.7 (where e^x < 2^-1022.5, a subnormal). log1p(e), e in [0, 1]: fdlibm's s_log1p.c (u = 1 + e rounded, its
       rounding error corrected; above sqrt 2 halved; 2 atanh(s) = log1p(f), s = f / (2 + f), by its
       degree-14 polynomial in s). Both within about one ulp (the tests compare them with exp, log1p). */
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && __GNUC__ >= 12
    /* (x86-64-v3: AVX2 with FMA, which GCC contracts a * b + c into: a fifth less time than AVX2 alone;
       x86-64-v4: AVX-512, the same operations eight lanes wide, the same bits: 38 -> 27 us a pass at
       n = 5,822 on an AVX-512 machine) */
    #define LEAN_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
    #elif defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
    #define LEAN_CLONES __attribute__((target_clones("avx2", "default")))
    #else
    #define LEAN_CLONES
    #endif
    /* (C99's restrict under every compiler's spelling: MSVC's C takes only __restrict) */
    #if defined(_MSC_VER)
    #define LEAN_RESTRICT __restrict
    #elif defined(__GNUC__)
    #define LEAN_RESTRICT __restrict__
    #else
    #define LEAN_RESTRICT
    #endif
    static inline double lean_asdouble(uint64_t i) { double d; memcpy(&d, &i, 8); return d; }
    static inline uint64_t lean_asuint64(double d) { uint64_t i; memcpy(&i, &d, 8); return i; }
    /* a where the mask m is all ones, else b (a select by bits: no branch, so the loop vectorizes) */
    static inline double lean_sel(uint64_t m, double a, double b) {
        return lean_asdouble((lean_asuint64(a) & m) | (lean_asuint64(b) & ~m));
    }
    LEAN_CLONES
    static void lean_logistic_terms(const double *LEAN_RESTRICT z, const double *LEAN_RESTRICT wc,
                                    double *LEAN_RESTRICT vw, double *LEAN_RESTRICT d1,
                                    double *LEAN_RESTRICT d2, Py_ssize_t n) {
        const double shift = 6755399441055744.0, invln2 = 1.44269504088896338700e+00;
        const double ln2hi = 6.93147180369123816490e-01, ln2lo = 1.90821492927058770002e-10;
        const double Lp1 = 6.666666666666735130e-01, Lp2 = 3.999999999940941908e-01,
                     Lp3 = 2.857142874366239149e-01, Lp4 = 2.222219843214978396e-01,
                     Lp5 = 1.818357216161805012e-01, Lp6 = 1.531383769920937332e-01,
                     Lp7 = 1.479819860511658591e-01;
        for (Py_ssize_t i = 0; i < n; i++) {
            double zi = z[i], x = -fabs(zi);
            double kd = x * invln2 + shift;
            uint64_t ki = lean_asuint64(kd);
            kd -= shift;
            double hi = x - kd * ln2hi, lo = kd * ln2lo, r = hi - lo;
            double p = 1.0 / 6227020800.0;
            p = p * r + 1.0 / 479001600.0;
            p = p * r + 1.0 / 39916800.0;
            p = p * r + 1.0 / 3628800.0;
            p = p * r + 1.0 / 362880.0;
            p = p * r + 1.0 / 40320.0;
            p = p * r + 1.0 / 5040.0;
            p = p * r + 1.0 / 720.0;
            p = p * r + 1.0 / 120.0;
            p = p * r + 1.0 / 24.0;
            p = p * r + 1.0 / 6.0;
            p = p * r + 0.5;
            p = p * r + 1.0;
            p = p * r + 1.0;
            /* (a NaN z fails both comparisons below and stays NaN, as exp and log1p keep it) */
            double e = lean_sel(-(uint64_t)(x < -708.7), 0.0, p * lean_asdouble((ki + 1023) << 52));
            double u = 1.0 + e, inv = 1.0 / u;
            uint64_t big = -(uint64_t)(u >= 1.41421356237309504880);
            double f = lean_sel(big, u * 0.5 - 1.0, e);
            double c = lean_sel(big, (e - (u - 1.0)) * inv, 0.0), k = lean_sel(big, 1.0, 0.0);
            double hfsq = 0.5 * f * f, s = f / (2.0 + f), w = s * s;
            double R = w * (Lp1 + w * (Lp2 + w * (Lp3 + w * (Lp4 + w * (Lp5 + w * (Lp6 + w * Lp7))))));
            double l1p = k * ln2hi - ((hfsq - (s * (hfsq + R) + (k * ln2lo + c))) - f);
            uint64_t pos = -(uint64_t)(zi >= 0.0);
            vw[i] = wc[i] * lean_sel(pos, zi + l1p, l1p);
            d1[i] = wc[i] * lean_sel(pos, inv, e * inv);
            d2[i] = wc[i] * (e * inv * inv);
        }
    }
    """
    void lean_logistic_terms(const double *z, const double *wc, double *vw, double *d1, double *d2,
                             Py_ssize_t n) noexcept nogil

SQUARE, LOGISTIC, EXP, LOG, SOFTMAX = 0, 1, 2, 3, 4
ATOM_CODES = {"square": SQUARE, "logistic": LOGISTIC, "exp": EXP, "log": LOG, "logsumexp": SOFTMAX}

# statuses of a run
CONVERGED, MAX_ITER, DIVERGED, FALLBACK = 0, 1, 2, 3
# starts
START_GRAHTP, START_SCREEN, START_INIT = 0, 1, 2
# counters of ``stats`` (one row per start)
ST_SOLVES, ST_NEWTON, ST_GRADS, ST_HT, ST_MODELS, ST_EXACT, ST_TRIES, ST_MULTI, ST_FULL, ST_UNITS = range(10)
N_STATS = 10

cdef double ROUNDING = 4 * 2.220446049250313e-16  # the polish's allowance (numerics/newton._ROUNDING)
cdef int NEWTON_MAX_ITER = 100
cdef double DBL_EPS = 2.220446049250313e-16  # (np.finfo(float).eps: lstsq's cut)
cdef int SEARCH_TRIES = 3  # supports tried by one support-change line search (solvers/grahtp.SEARCH_TRIES)
cdef double MAX_MOVE = 1e6  # lowering/constants.MAX_MOVE
cdef double JITTER = 1e-10  # the swap model's relative jitter (lowering/swaps.SwapModel)
cdef double NEWTON_JITTER = 1e-12  # the Newton steps' relative jitter (numerics/newton.JITTER)
cdef double CHORD_ROUNDING = 1e-8  # a line search chord's allowance for rounding (numerics/newton.CHORD_ROUNDING)
cdef int TRIED_CAP = 64
cdef int SOFTMAX_CODE = 4  # (SOFTMAX, for the C comparisons)
cdef enum:
    MAXU = 16  # the largest unit (group) size the kernels take: their small solves use fixed buffers of
    MAXU2 = MAXU * MAXU  # entries (rows of MAXU), on the stack
MAX_UNIT = MAXU  # (read by lowering/lean.MAX_UNIT's test)
cdef Py_ssize_t SCRATCH_ENTRIES = 64  # scratch objects the thread's shared pool keeps at most (_scratch)
cdef Py_ssize_t SCRATCH_BYTES = 1 << 25  # and their arrays' bytes (32 MB), the oldest dropped first
cdef Py_ssize_t GRAM_GEMV = 4  # Hessian rows filled one product each up to this many at once (_gram_rows)
cdef Py_ssize_t LAPACK_DIM = 16  # factorizations above this size go to LAPACK, below it plain loops


cdef class Problem:
    """The arrays of one lowering (see the module docstring). ``Q`` (D x D) holds the rows of a
    quadratic objective's constant Hessian filled so far (``have``), ``g0`` its gradient at 0 and
    ``diag`` its diagonal; ``R`` the row sums of J[:, C]^2; ``Jsq`` = J * J (non-quadratic elementwise
    losses, :func:`_hess_diag_at`; no rows for the softmax, which never reads it);
    ``domain`` the values tried for the free coordinates when a start lies outside the loss's
    domain (lowering/guards.DOMAIN_TRIALS)."""

    cdef public double[:, ::1] J, Jsq, Q
    cdef public double[::1] b, wc, lin, rd, g0, R, diag, domain
    cdef public Py_ssize_t[::1] C, F
    cdef public Py_ssize_t[:, ::1] members
    cdef public unsigned char[::1] have
    cdef public int code
    cdef public double const
    cdef public bint quad
    cdef public Py_ssize_t n, D, classes, m
    cdef double[::1] z, d1, d2, e1, e2, w  # scratch of length n
    cdef double[::1] mag, ubuf  # scratch of length |C|, D
    cdef Py_ssize_t[::1] selbuf, nzbuf, colbuf, posbuf  # scratch of length |C|, D, D, |C|
    cdef object ws  # the restricted solve's Workspace of the last size (others: the shared pool, _scratch)
    cdef object mb, mb2  # the swap model's buffers (ModelBuffers): the last shape's and the one before
    cdef object ccall  # the columns of J by class (ClassCols; False: not class by class), made on first use
    # the call's scratch arena (_dnew, _inew): the short-lived arrays of one kernel call, handed out by
    # slicing, never kept past the call (the arrays a call returns are copied out)
    cdef double[::1] darena
    cdef Py_ssize_t[::1] iarena
    cdef Py_ssize_t doff, ioff, dmiss, imiss

    def forget(self):
        """Forget what was derived from J (its columns by class): after a rebinding wrote new data."""
        self.ccall = None

    def __init__(self, J, b, wc, lin, rd, int code, double const, bint quad, C, F, g0, R, diag, Jsq, Q, have, domain,
                 members=None):
        self.J, self.b, self.wc, self.lin, self.rd = J, b, wc, lin, rd
        self.code, self.const, self.quad = code, const, quad
        self.C, self.F, self.g0, self.R, self.diag, self.Jsq, self.Q, self.have = C, F, g0, R, diag, Jsq, Q, have
        self.domain = domain
        self.n, self.D = J.shape[0], J.shape[1]
        self.classes = self.n // wc.shape[0]  # the softmax's classes per sample (1: an elementwise loss)
        if members is None:  # single coordinates
            members = np.arange(len(C), dtype=np.intp)[:, None]
        self.members = np.ascontiguousarray(members, dtype=np.intp)
        self.m = self.members.shape[1]
        self.z, self.d1, self.d2 = np.empty(self.n), np.empty(self.n), np.empty(self.n)
        self.e1, self.e2, self.w = np.empty(self.n), np.empty(self.n), np.empty(self.n)
        self.mag, self.ubuf = np.empty(len(C)), np.empty(self.D)
        self.selbuf, self.nzbuf = np.empty(len(C), dtype=np.intp), np.empty(self.D, dtype=np.intp)
        self.colbuf, self.posbuf = np.empty(self.D, dtype=np.intp), np.empty(len(C), dtype=np.intp)
        self.darena, self.iarena = np.empty(ARENA_START + 8 * self.D), np.empty(ARENA_START + 8 * len(C), dtype=np.intp)
        self.doff = self.ioff = self.dmiss = self.imiss = 0


cdef Py_ssize_t ARENA_START = 4096  # entries of each arena beside 8 per coordinate
cdef Py_ssize_t ARENA_CAP = 1 << 21  # the largest arena (entries): a call that needs more makes arrays


cdef void _arena_reset(Problem P):
    """Start a call's arena, grown (doubled past what the last call lacked, up to ARENA_CAP) after a
    call that outran it."""
    cdef Py_ssize_t size
    if P.dmiss:
        size = min(2 * (P.darena.shape[0] + P.dmiss), ARENA_CAP)
        if size > P.darena.shape[0]:
            P.darena = np.empty(size)
        P.dmiss = 0
    if P.imiss:
        size = min(2 * (P.iarena.shape[0] + P.imiss), ARENA_CAP)
        if size > P.iarena.shape[0]:
            P.iarena = np.empty(size, dtype=np.intp)
        P.imiss = 0
    P.doff = 0
    P.ioff = 0


cdef inline double[::1] _dnew(Problem P, Py_ssize_t n):
    """n doubles of the call's arena (uninitialized), or a new array when it is used up. Slicing the
    arena makes no object: a kernel call made about ninety NumPy arrays for its short-lived
    scratch, most of its time on small problems."""
    cdef Py_ssize_t o = P.doff
    if o + n <= P.darena.shape[0]:
        P.doff = o + n
        return P.darena[o : o + n]
    P.dmiss += n
    return np.empty(n)


cdef inline Py_ssize_t[::1] _inew(Problem P, Py_ssize_t n):
    """n intp of the call's arena (as :func:`_dnew`)."""
    cdef Py_ssize_t o = P.ioff
    if o + n <= P.iarena.shape[0]:
        P.ioff = o + n
        return P.iarena[o : o + n]
    P.imiss += n
    return np.empty(n, dtype=np.intp)


# ---------------------------------------------------------------------- sorting


cdef struct Pair:
    double v
    Py_ssize_t i


cdef Py_ssize_t[::1] _top(double[::1] v, Py_ssize_t m, bint largest, Problem P=None):
    """The positions of the m largest entries of v (smallest with largest=False), best first; ties:
    the lower position first (a stable sort's order). In P's arena when given."""
    cdef Py_ssize_t n = v.shape[0], a
    if m > n:
        m = n
    if m < 0:
        m = 0
    cdef Py_ssize_t[::1] o = _inew(P, m) if P is not None else np.empty(m, dtype=np.intp)
    if n == 0 or m <= 0:
        return o
    cdef Pair* buf
    cdef Py_ssize_t q, filled = 0
    cdef double x
    for a in range(n):
        if isnan(v[a]):  # (no total order: NumPy's stable sort of the keys, NaN last)
            key = np.asarray(v, dtype=float)
            return (-key if largest else key).argsort(kind="stable")[:m].astype(np.intp, copy=False)
    if (m <= 160 and n > 4 * m) or n <= 64:  # a few of many, or few: insertion into the m best so far
        buf = <Pair*> malloc((m + 1) * sizeof(Pair))
        for a in range(n):
            x = v[a] if largest else -v[a]
            if filled == m and not (x > buf[m - 1].v):  # (ties keep the lower position, already in)
                continue
            q = filled if filled < m else m - 1
            while q > 0 and x > buf[q - 1].v:
                buf[q] = buf[q - 1]
                q -= 1
            buf[q].v = x
            buf[q].i = a
            if filled < m:
                filled += 1
        for a in range(m):
            o[a] = buf[a].i
        free(buf)
        return o
    # many: the first m in the order (key, position) -- key -v or v, ties to the lower position, as
    # above -- chosen by partitioning and then sorted, m log m comparisons inline (glibc's qsort,
    # calling a comparison function per pair, took a quarter of the kernel's time on a thousand
    # candidates; NumPy's stable sort of all n keys about a tenth at Section 6.1's screens)
    buf = <Pair*> malloc(n * sizeof(Pair))
    for a in range(n):
        buf[a].v = -v[a] if largest else v[a]
        buf[a].i = a
    if m < n:
        _first(buf, n, m)
    _sort_pairs(buf, 0, m - 1)
    for a in range(m):
        o[a] = buf[a].i
    free(buf)
    return o


def top_positions(v, Py_ssize_t m, bint largest=True):
    """:func:`_top` from Python (the tests: the m largest, or smallest, entries' positions, best
    first, ties to the lower position: a stable sort's first m)."""
    return np.asarray(_top(np.ascontiguousarray(v, dtype=float), m, largest))


cdef inline bint _before(Pair a, Pair b) noexcept nogil:
    """a comes before b in the order (key, position): ascending keys, ties to the lower position."""
    return a.v < b.v or (a.v == b.v and a.i < b.i)


cdef inline void _swap_pairs(Pair* p, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    cdef Pair t = p[a]
    p[a] = p[b]
    p[b] = t


cdef Py_ssize_t _split(Pair* p, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    """Partition p[lo..hi] around the median of its first, middle and last entries: the pivot's
    final place, everything before it coming before it in the order, everything after after it."""
    cdef Py_ssize_t mid = lo + (hi - lo) // 2, s = lo, a
    if _before(p[mid], p[lo]):
        _swap_pairs(p, mid, lo)
    if _before(p[hi], p[lo]):
        _swap_pairs(p, hi, lo)
    if _before(p[mid], p[hi]):
        _swap_pairs(p, mid, hi)
    cdef Pair piv = p[hi]
    for a in range(lo, hi):
        if _before(p[a], piv):
            _swap_pairs(p, a, s)
            s += 1
    _swap_pairs(p, s, hi)
    return s


cdef void _first(Pair* p, Py_ssize_t n, Py_ssize_t m) noexcept nogil:
    """Rearrange p[0..n-1] so that p[0..m-1] are its first m entries in the order (in any order)."""
    cdef Py_ssize_t lo = 0, hi = n - 1, q
    while lo < hi:
        q = _split(p, lo, hi)
        if q == m - 1:
            return
        if q < m - 1:
            lo = q + 1
        else:
            hi = q - 1


cdef void _sort_pairs(Pair* p, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    """Sort p[lo..hi] in the order (the keys with their positions are distinct: any sort gives the
    stable sort's order)."""
    cdef Py_ssize_t q, a, b
    cdef Pair t
    while hi - lo >= 16:
        q = _split(p, lo, hi)
        if q - lo < hi - q:  # (the smaller side first: a shallow stack)
            _sort_pairs(p, lo, q - 1)
            lo = q + 1
        else:
            _sort_pairs(p, q + 1, hi)
            hi = q - 1
    for a in range(lo + 1, hi + 1):
        t = p[a]
        b = a
        while b > lo and _before(t, p[b - 1]):
            p[b] = p[b - 1]
            b -= 1
        p[b] = t


cdef Py_ssize_t[::1] _icopy(Problem P, Py_ssize_t[::1] a):
    """A copy of ``a`` in the call's arena."""
    cdef Py_ssize_t[::1] out = _inew(P, a.shape[0])
    cdef Py_ssize_t i
    for i in range(a.shape[0]):
        out[i] = a[i]
    return out


cdef double[::1] _dcopy(Problem P, double[::1] a):
    """A copy of ``a`` in the call's arena."""
    cdef double[::1] out = _dnew(P, a.shape[0])
    cdef Py_ssize_t i
    for i in range(a.shape[0]):
        out[i] = a[i]
    return out


cdef object _out(double[::1] a):
    """A new NumPy array holding ``a``: what a call returns (never a view of its arena)."""
    arr = np.empty(a.shape[0])
    cdef double[::1] o = arr
    cdef Py_ssize_t i
    for i in range(a.shape[0]):
        o[i] = a[i]
    return arr


cdef void _sort_in_place(Py_ssize_t[::1] a):
    if a.shape[0] > 64:
        np.asarray(a).sort()
    else:
        _sort_positions(a)  # (short: no NumPy call)


# ---------------------------------------------------------------------- the loss


cdef double EXP_ZERO = -746.0  # exp(x) is exactly 0 below about -745.13 (the smallest subnormal's log)


cdef inline double _exp_below(double x) noexcept nogil:
    """exp(x) for x <= 0, the same number: 0 below EXP_ZERO without calling exp, whose underflow path
    (errno and the floating-point flags) costs tens of times a plain exponential. A softmax or
    logistic loss on separable data reads exponentials of -1000 and below in most rows: that path was
    40 % of a multinomial solve's time there (200 x 50, k = 5: 14.4 -> 8.5 ms; 500 x 100, k = 10:
    53 -> 36 ms). (Zero below -708 as well, where exp is subnormal, gained nothing more.)"""
    return 0.0 if x < EXP_ZERO else exp(x)


cdef double _softmax_losses(Problem P, double[::1] z, double[::1] d1, double[::1] d2, int order) noexcept nogil:
    """sum_i wc_i logsumexp(z_i) over the samples i (rows of ``classes`` entries); with order >= 1
    fills d1 = wc_i p_i (p_i the softmax of the row: the gradient), order 2 also d2 = p_i (the row's
    Hessian diag(p_i) - p_i p_i' is applied by :func:`_weigh`)."""
    cdef Py_ssize_t K = P.classes, i, c, r
    cdef double total = 0.0, zmax, s
    for i in range(P.wc.shape[0]):
        r = i * K
        zmax = z[r]
        for c in range(1, K):
            zmax = max(zmax, z[r + c])
        s = 0.0
        if order >= 1:  # (the exponentials kept in d1; exp(0) = 1 at the largest entry)
            for c in range(K):
                d1[r + c] = _exp_below(z[r + c] - zmax) if z[r + c] != zmax else 1.0
                s += d1[r + c]
            for c in range(K):
                d1[r + c] = d1[r + c] / s
                if order >= 2:
                    d2[r + c] = d1[r + c]
                d1[r + c] *= P.wc[i]
        else:
            for c in range(K):
                s += _exp_below(z[r + c] - zmax) if z[r + c] != zmax else 1.0
        total += P.wc[i] * (log(s) + zmax)
    return total


cdef void _weigh(Problem P, double[::1] d2, double[:, ::1] JB, double[:, ::1] M) noexcept nogil:
    """M with M' J = the loss part of the Hessian's rows for the columns JB of J (d2 from
    :func:`_losses` at the point): d2 * JB for an elementwise loss; for the softmax, row by row,
    wc_i (diag(p_i) - p_i p_i') JB_i (reductions.softmax_hessian_apply)."""
    cdef Py_ssize_t K = P.classes, i, c, r, a, q = JB.shape[1]
    cdef double pc
    cdef double* t
    if P.code != SOFTMAX_CODE:
        for r in range(JB.shape[0]):
            for a in range(q):
                M[r, a] = d2[r] * JB[r, a]
        return
    if q == 0:
        return
    t = <double*> malloc(q * sizeof(double))
    for i in range(P.wc.shape[0]):  # (rows in the inner loops: contiguous)
        r = i * K
        for a in range(q):
            t[a] = 0.0
        for c in range(K):
            pc = d2[r + c]
            for a in range(q):
                t[a] += pc * JB[r + c, a]
        for c in range(K):
            pc = d2[r + c]
            for a in range(q):
                M[r + c, a] = P.wc[i] * (pc * JB[r + c, a] - pc * t[a])
    free(t)


cdef double _losses(Problem P, double[::1] z, double[::1] d1, double[::1] d2, int order) noexcept nogil:
    """sum_i wc_i phi(z_i); with order >= 1 fills d1 = wc phi'(z), order 2 also d2 = wc phi''(z)
    (the softmax: :func:`_softmax_losses`)."""
    cdef double total = 0.0, zi, v, a, h, e, inv, u1
    cdef Py_ssize_t i
    cdef int code = P.code
    if code == SOFTMAX_CODE:
        return _softmax_losses(P, z, d1, d2, order)
    for i in range(z.shape[0]):
        zi = z[i]
        if code == 0:
            v = zi * zi
            a = 2.0 * zi
            h = 2.0
        elif code == 1:
            e = _exp_below(-fabs(zi))
            u1 = 1.0 + e
            # log1p(e) by one log (glibc's log1p costs about three exps): where z >= 0, v = z + log(1 + e)
            # >= log 2 and the rounding of 1 + e is within an ulp of v; else log(u1) e / (u1 - 1), exact
            # to a few ulps of log1p(e) (Goldberg 1991, Theorem 4)
            if zi >= 0:
                v = zi + log(u1)
            else:
                v = e if u1 == 1.0 else log(u1) * (e / (u1 - 1.0))
            inv = 1.0 / u1
            a = inv if zi >= 0 else e * inv
            h = e * inv * inv
        elif code == 2:
            v = exp(zi)
            a = v
            h = v
        else:  # log (its loss is -log: a negative coefficient)
            if zi > 0:
                v = log(zi)
                a = 1.0 / zi
                h = -1.0 / (zi * zi)
            else:
                v = -INFINITY
                a = NAN
                h = NAN
        total += P.wc[i] * v
        if order >= 1:
            d1[i] = P.wc[i] * a
        if order >= 2:
            d2[i] = P.wc[i] * h
    return total


cdef double _loss_pass(Problem P, double[::1] z, double[::1] d1, double[::1] d2, double[::1] vw) noexcept nogil:
    """``_losses(P, z, d1, d2, 2)``; the logistic loss's terms by ``lean_logistic_terms`` (vectorized;
    ``vw`` scratch of len(z)), summed in four interleaved partial sums (added pairwise at the end: four
    independent chains of additions instead of one)."""
    cdef Py_ssize_t n = z.shape[0]
    if P.code != 1 or n == 0 or vw.shape[0] < n:
        return _losses(P, z, d1, d2, 2)
    lean_logistic_terms(&z[0], &P.wc[0], &vw[0], &d1[0], &d2[0], n)
    return _sum4(vw, n)


cdef inline double _sum4(double[::1] vw, Py_ssize_t n) noexcept nogil:
    """vw[0] + ... + vw[n - 1] in four interleaved partial sums added pairwise at the end (the loss
    passes' order: four independent chains of additions instead of one)."""
    cdef Py_ssize_t i = 0
    cdef double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0
    while i + 4 <= n:
        a0 += vw[i]
        a1 += vw[i + 1]
        a2 += vw[i + 2]
        a3 += vw[i + 3]
        i += 4
    while i < n:
        a0 += vw[i]
        i += 1
    return (a0 + a1) + (a2 + a3)


cdef void _affine(Problem P, double[::1] u, Py_ssize_t[::1] cols, double[::1] z) noexcept nogil:
    """z = J[:, cols] u + b."""
    cdef Py_ssize_t i, a, nc = cols.shape[0]
    cdef double s
    for i in range(P.n):
        s = P.b[i]
        for a in range(nc):
            s += P.J[i, cols[a]] * u[a]
        z[i] = s


cdef void _affine_cols(Problem P, double[:, ::1] JB, double[::1] u, double[::1] z) noexcept nogil:
    """z = JB u + b for the gathered columns JB = J[:, cols] (one BLAS product)."""
    cdef int nb = <int> JB.shape[1], n = <int> JB.shape[0], one = 1
    cdef double alpha = 1.0, beta = 1.0
    cdef Py_ssize_t i
    for i in range(n):
        z[i] = P.b[i]
    if nb == 0 or n == 0:
        return
    dgemv(b"T", &nb, &n, &alpha, &JB[0, 0], &nb, &u[0], &one, &beta, &z[0], &one)


cdef double _value(Problem P, double[::1] u, Py_ssize_t[::1] cols, double[::1] d1, double[::1] d2, int order) noexcept nogil:
    """f at the point with x[cols] = u and every other coordinate 0 (the loss's derivatives in d1, d2)."""
    _affine(P, u, cols, P.z)
    return _value_z(P, u, cols, d1, d2, order)


cdef double _value_z(Problem P, double[::1] u, Py_ssize_t[::1] cols, double[::1] d1, double[::1] d2, int order) noexcept nogil:
    """:func:`_value` with P.z = J x + b already computed."""
    cdef Py_ssize_t a, c
    cdef double f = P.const + _losses(P, P.z, d1, d2, order)
    for a in range(cols.shape[0]):
        c = cols[a]
        f += P.lin[c] * u[a] + 0.5 * P.rd[c] * u[a] * u[a]
    return f


cdef void _jt(Problem P, double[::1] d, double[::1] out) noexcept nogil:
    """out = J' d (one BLAS product: J in C order is J' in Fortran order)."""
    cdef int m = <int> P.D, n = <int> P.n, one = 1, lda = <int> P.D
    cdef double alpha = 1.0, beta = 0.0
    if n == 0:
        out[:] = 0.0
        return
    dgemv(b"N", &m, &n, &alpha, &P.J[0, 0], &lda, &d[0], &one, &beta, &out[0], &one)


cdef void _class_jt(Problem P, ClassCols cc, double[::1] d, double[::1] out) noexcept nogil:
    """out = J[:, cols]' d for the columns by class ``cc`` (the whole J's, :func:`_all_class_cols`, or
    a restricted solve's, :func:`_class_cols`; out in their order, ``cc.pos``): class c's columns
    read only the entries d[i K + c] (one BLAS product per class, with a stride of K)."""
    cdef Py_ssize_t K = P.classes, c, q
    cdef int m, n = <int> cc.V.shape[0], ldv = <int> cc.V.shape[1], inc = <int> K, one = 1
    cdef double alpha = 1.0, beta = 0.0
    cdef double[::1] t = cc.grad  # (kept with the columns by class: no array per gradient)
    if n == 0:
        out[:] = 0.0
        return
    for c in range(K):
        m = <int> (cc.start[c + 1] - cc.start[c])
        if m > 0:
            # t[class c] (m) = V_c' d_c: V in C order (n x D) is V' in Fortran order (D x n, ld D)
            dgemv(b"N", &m, &n, &alpha, &cc.V[0, cc.start[c]], &ldv, &d[c], &inc, &beta, &t[cc.start[c]], &one)
    for q in range(cc.pos.shape[0]):
        out[cc.pos[q]] = t[q]


cdef void _class_affine(Problem P, ClassCols cc, double[::1] u, double[::1] z) noexcept nogil:
    """z = J[:, cols] u + b for a restricted solve's columns by class ``cc`` (u in their order,
    ``cc.pos``): the rows of class c, z[i K + c], read only that class's columns (one BLAS product per
    class into every K-th entry), not the zeros the gathered J[:, cols] holds in the other classes'
    rows (K - 1 of every K entries)."""
    cdef Py_ssize_t K = P.classes, nb = cc.pos.shape[0], c, q, i
    cdef int m, n = <int> cc.V.shape[0], ldv = <int> cc.V.shape[1], inc = <int> K, one = 1
    cdef double alpha = 1.0, beta = 1.0
    for i in range(P.n):
        z[i] = P.b[i]
    if n == 0:
        return
    for q in range(nb):
        cc.grad[q] = u[cc.pos[q]]  # (u in V's order; the scratch _class_jt fills otherwise)
    for c in range(K):
        m = <int> (cc.start[c + 1] - cc.start[c])
        if m > 0:
            # z_c (n, stride K) += V_c u_c: V_c in C order (n x m, ld ldv) is V_c' in Fortran order
            dgemv(b"T", &m, &n, &alpha, &cc.V[0, cc.start[c]], &ldv, &cc.grad[cc.start[c]], &one, &beta, &z[c], &inc)


cdef inline void _trial_z(Problem P, ClassCols cc, double[:, ::1] JB, double[::1] u) noexcept nogil:
    """P.z = J[:, cols] u + b for a restricted solve: by class (cc not None) or from JB = J[:, cols]."""
    if cc is not None:
        _class_affine(P, cc, u, P.z)
    else:
        _affine_cols(P, JB, u, P.z)


cdef double[::1] _full_grad(Problem P, double[::1] u, Py_ssize_t[::1] cols, double[::1] d1):
    """The gradient over every coordinate at x[cols] = u, from the loss derivatives d1 there."""
    cdef double[::1] gv = _dnew(P, P.D)
    cdef Py_ssize_t a
    cdef ClassCols cc = _all_class_cols(P)
    if cc is not None:  # the softmax: each class's columns against that class's rows (a K-th of J' d)
        _class_jt(P, cc, d1, gv)
    else:
        _jt(P, d1, gv)
    for a in range(P.D):
        gv[a] += P.lin[a]
    for a in range(cols.shape[0]):
        gv[cols[a]] += P.rd[cols[a]] * u[a]
    return gv


cdef double[::1] _quad_grad(Problem P, double[::1] u, Py_ssize_t[::1] cols):
    """The gradient of a quadratic objective over every coordinate at x[cols] = u (every other
    coordinate 0), from the Hessian rows of ``cols`` (filled by the restricted solve): g0 + Q[cols]' u,
    |cols| D operations instead of the n D of J' d (the rows are the Hessian's columns: Q is symmetric)."""
    cdef double[::1] gv = _dcopy(P, P.g0)
    cdef Py_ssize_t a, j, c
    cdef double ua
    for a in range(cols.shape[0]):
        c = cols[a]
        ua = u[a]
        if ua == 0.0:
            continue
        for j in range(P.D):
            gv[j] += ua * P.Q[c, j]
    return gv


def value_and_grad(Problem P, x):
    """f and its gradient at a flat point x (every coordinate): the lean start's test that zero is
    inside the loss's domain (lowering/lean.lean_start), and the tests."""
    _arena_reset(P)
    cols = np.flatnonzero(x).astype(np.intp)
    u = np.ascontiguousarray(np.asarray(x, dtype=float)[cols])
    cdef double f = _value(P, u, cols, P.d1, P.d2, 1)
    return f, _out(_full_grad(P, u, cols, P.d1))


def swap_model(Problem P, x, g, units, Py_ssize_t pool, Py_ssize_t candidates):
    """The swap model the search builds at a restricted minimizer x with gradient g and selected
    ``units`` (lowering/swaps.SwapModel's quantities, for the tests): a dict of ``units_out`` (the
    modelled candidates), ``gain``, ``removal``, ``cand`` (indices into units_out) and ``delta``
    (selected x cand); None where the model cannot be formed (a singular H_BB whose
    eigendecomposition fails: its pseudo-inverse stands in otherwise)."""
    _arena_reset(P)
    cdef Model md = _swap_model(P, np.array(x, dtype=float), np.array(g, dtype=float),
                                np.array(units, dtype=np.intp), pool, candidates)
    if not md.ok:
        return None
    return {
        "units_out": np.array(md.units_out),
        "gain": np.array(md.gain)[: md.units_out.shape[0]],
        "removal": np.array(md.removal)[: md.units.shape[0]],
        "cand": np.array(md.cand),
        "delta": np.array(md.delta).reshape(md.units.shape[0], md.cand.shape[0]),
    }


def free_fit(Problem P, x):
    """The minimizer over the free coordinates alone (every constrained coordinate at 0), from the
    flat point x (inside the loss's domain): (x, f, ok), the answer at a budget of 0
    (solvers/base.zero_budget); ok False: a case for the general restricted solve."""
    _arena_reset(P)
    cdef long[::1] st = np.zeros(N_STATS, dtype=np.int64)
    cdef double[::1] x0 = np.array(x, dtype=float)
    cdef Sol sol_
    sol_ = _solve_on(P, np.empty(0, dtype=np.intp), x0, NAN, st)
    xs, f, g, ok = sol_.x, sol_.f, sol_.g, sol_.ok
    return _out(xs), f, bool(ok)


# ---------------------------------------------------------------------- small dense algebra


cdef bint _cholesky(double[:, ::1] A, double[:, ::1] L, double rel) noexcept nogil:
    """L (lower) with L L' = A + rel |tr A| / m I; False when some pivot is not positive."""
    cdef Py_ssize_t m = A.shape[0], i, j, q
    cdef double tr = 0.0, jit, s, d, t
    if m == 0:
        return True
    for i in range(m):
        tr += A[i, i]
    jit = rel * fabs(tr) / m
    for j in range(m):
        s = A[j, j] + jit
        for q in range(j):
            s -= L[j, q] * L[j, q]
        if not s > 0.0:
            return False
        d = sqrt(s)
        L[j, j] = d
        for i in range(j + 1, m):
            t = A[i, j]
            for q in range(j):
                t -= L[i, q] * L[j, q]
            L[i, j] = t / d
        for i in range(j):
            L[i, j] = 0.0
    return True


cdef void _chol_solve(double[:, ::1] L, double[::1] r, double[::1] y) noexcept nogil:
    """(L L') y = r."""
    cdef Py_ssize_t m = L.shape[0], i, q
    cdef double s
    for i in range(m):
        s = r[i]
        for q in range(i):
            s -= L[i, q] * y[q]
        y[i] = s / L[i, i]
    for i in range(m - 1, -1, -1):
        s = y[i]
        for q in range(i + 1, m):
            s -= L[q, i] * y[q]
        y[i] = s / L[i, i]


cdef bint _factor(double[:, ::1] A, double[:, ::1] L, double rel) noexcept nogil:
    """A Cholesky factor of A + rel |tr A| / m I in L, for :func:`_fsolve` and :func:`_finverse`:
    plain loops (lower) up to LAPACK_DIM, LAPACK's potrf above it (the upper factor of the Fortran
    view: the same triangle read in C order). False when A is not positive definite."""
    cdef Py_ssize_t m = A.shape[0], i
    cdef int n = <int> m, info = 0
    cdef double tr = 0.0, jit
    if m <= LAPACK_DIM:
        return _cholesky(A, L, rel)
    L[:, :] = A
    for i in range(m):
        tr += A[i, i]
    jit = rel * fabs(tr) / m
    for i in range(m):
        L[i, i] += jit
    dpotrf(b"U", &n, &L[0, 0], &n, &info)
    return info == 0


cdef void _fsolve(double[:, ::1] L, double[::1] r, double[::1] y) noexcept nogil:
    """(A) y = r from the factor of :func:`_factor`."""
    cdef Py_ssize_t m = L.shape[0]
    cdef int n = <int> m, one = 1, info = 0
    if m <= LAPACK_DIM:
        _chol_solve(L, r, y)
        return
    y[:] = r
    dpotrs(b"U", &n, &one, &L[0, 0], &n, &y[0], &n, &info)


cdef void _finverse(double[:, ::1] L, double[:, ::1] A) noexcept nogil:
    """A = the inverse of the factored matrix (symmetric, both triangles), from :func:`_factor`."""
    cdef Py_ssize_t m = L.shape[0], a, c
    cdef int n = <int> m, info = 0
    cdef double s
    if m <= LAPACK_DIM:
        for a in range(m):
            for c in range(m):
                A[a, c] = 0.0
            A[a, a] = 1.0
        for a in range(m):  # column a of the inverse, in place (A symmetric: its rows are its columns)
            _chol_solve_row(L, A, a)
    else:
        A[:, :] = L
        dpotri(b"U", &n, &A[0, 0], &n, &info)
        # LAPACK filled the upper triangle of the Fortran view: the lower triangle in C order
        for a in range(m):
            for c in range(a + 1, m):
                A[a, c] = A[c, a]
        return
    for a in range(m):
        for c in range(a + 1, m):
            s = 0.5 * (A[a, c] + A[c, a])
            A[a, c] = s
            A[c, a] = s


cdef void _chol_solve_row(double[:, ::1] L, double[:, ::1] A, Py_ssize_t row) noexcept nogil:
    """Row ``row`` of A, holding a right-hand side, replaced by the solution of (L L') y = it."""
    cdef Py_ssize_t m = L.shape[0], i, q
    cdef double s
    for i in range(m):
        s = A[row, i]
        for q in range(i):
            s -= L[i, q] * A[row, q]
        A[row, i] = s / L[i, i]
    for i in range(m - 1, -1, -1):
        s = A[row, i]
        for q in range(i + 1, m):
            s -= L[q, i] * A[row, q]
        A[row, i] = s / L[i, i]


cdef void _matmul(double[:, ::1] A, double[:, ::1] B, double[:, ::1] out) noexcept nogil:
    """out = A B (C order; BLAS: out' = B' A' in Fortran order)."""
    cdef int m = <int> A.shape[0], k = <int> A.shape[1], n = <int> B.shape[1]
    cdef double alpha = 1.0, beta = 0.0
    if m == 0 or n == 0:
        return
    if k == 0:
        out[:, :] = 0.0
        return
    dgemm(b"N", b"N", &n, &m, &k, &alpha, &B[0, 0], &n, &A[0, 0], &k, &beta, &out[0, 0], &n)


cdef void _atb(double[:, ::1] A, double[:, ::1] B, double[:, ::1] out) noexcept nogil:
    """out = A' B for A (r x m), B (r x n), C order."""
    cdef int m = <int> A.shape[1], r = <int> A.shape[0], n = <int> B.shape[1]
    cdef double alpha = 1.0, beta = 0.0
    if m == 0 or n == 0:
        return
    if r == 0:
        out[:, :] = 0.0
        return
    # out' (n x m, Fortran) = B' (n x r) A (r x m): B in C order is B' in Fortran (n x r, ld n)
    dgemm(b"N", b"T", &n, &m, &r, &alpha, &B[0, 0], &n, &A[0, 0], &m, &beta, &out[0, 0], &n)


# ---------------------------------------------------------------------- Hessians


cdef void _gram_rows(Problem P, Py_ssize_t[::1] cols):
    """Fill the rows ``cols`` of the constant Hessian Q (symmetric: row j = column j) of a quadratic
    objective that are not there yet, from the Jacobian: one product with J for all of them."""
    cdef Py_ssize_t a, i, c, miss = 0
    for a in range(cols.shape[0]):
        if not P.have[cols[a]]:
            miss += 1
    if miss == 0:
        return
    idx_ = np.empty(miss, dtype=np.intp)
    cdef Py_ssize_t[::1] idx = idx_
    cdef Py_ssize_t q = 0
    for a in range(cols.shape[0]):
        c = cols[a]
        if not P.have[c]:
            P.have[c] = 1
            idx[q] = c
            q += 1
    cdef double[:, ::1] M = np.empty((P.n, q))
    cdef double w2
    for i in range(P.n):
        w2 = 2.0 * P.wc[i]
        for a in range(q):
            M[i, a] = w2 * P.J[i, idx[a]]
    cdef double[:, ::1] R
    cdef int dm = <int> P.D, dn = <int> P.n, lda = <int> P.D, inc = <int> q, one = 1
    cdef double alpha = 1.0, beta = 0.0
    if q <= GRAM_GEMV or P.n == 0:  # a few rows: J' m_a each (a product with all of them would first copy J)
        for a in range(q):
            c = idx[a]
            if P.n == 0:
                P.Q[c, :] = 0.0
            else:
                dgemv(b"N", &dm, &dn, &alpha, &P.J[0, 0], &lda, &M[0, a], &inc, &beta, &P.Q[c, 0], &one)
            P.Q[c, c] += P.rd[c]
        return
    R = np.empty((q, P.D))
    _atb(M, P.J, R)  # M' J: row a = column idx[a] of the Hessian
    for a in range(q):
        c = idx[a]
        P.Q[c, :] = R[a, :]
        P.Q[c, c] += P.rd[c]


cdef class ClassCols:
    """Columns of J each nonzero in one class only (the softmax's Z = X W + b), grouped by class:
    ``V`` (samples x columns, ordered class by class) their values, ``pos`` each one's column in
    the gathered block, ``start`` where each class's columns begin in V, ``slot`` each column's
    class (-1: a zero column, counted in class 0), ``inv`` its place in V; ``Hp`` a product's
    scratch."""

    cdef double[:, ::1] V, Hp, VT
    cdef double[::1] grad  # (scratch in V's order: _class_jt's products, _class_affine's coefficients)
    cdef Py_ssize_t[::1] pos, start, slot, inv


cdef ClassCols _class_arrays(Py_ssize_t nb, Py_ssize_t ns, Py_ssize_t K, Py_ssize_t hp_rows, Py_ssize_t hp_cols):
    cdef ClassCols cc = ClassCols()
    cc.pos = np.empty(nb, dtype=np.intp)
    cc.inv = np.empty(nb, dtype=np.intp)
    cc.slot = np.empty(nb, dtype=np.intp)
    cc.start = np.empty(K + 1, dtype=np.intp)
    cc.V = np.empty((ns, nb))
    cc.Hp = np.empty((hp_rows, hp_cols))
    cc.grad = np.empty(nb)
    return cc


cdef ClassCols _all_class_cols(Problem P):
    """The columns of the whole J by class (:class:`ClassCols`), found once per data (a column of
    X W + b is nonzero in its class's rows only: the pattern read from the values) and kept on the
    Problem; None for an elementwise loss or when some column is nonzero in several classes."""
    cdef Py_ssize_t K = P.classes, ns = P.wc.shape[0], D = P.D, i, a, c, q
    cdef ClassCols cc
    if P.ccall is None:
        P.ccall = False
        if K > 1 and D > 0:
            cc = _class_arrays(D, ns, K, 0, 0)
            for a in range(D):
                cc.slot[a] = -1
            for i in range(ns):
                for c in range(K):
                    for a in range(D):
                        if P.J[i * K + c, a] != 0.0:
                            if cc.slot[a] == -1:
                                cc.slot[a] = c
                            elif cc.slot[a] != c:
                                return None
            _order_by_class(cc, K)
            for q in range(D):
                a = cc.pos[q]
                c = cc.slot[a] if cc.slot[a] >= 0 else 0
                for i in range(ns):
                    cc.V[i, q] = P.J[i * K + c, a]
            cc.VT = np.ascontiguousarray(np.asarray(cc.V).T)  # (a column's values in a row: _class_blocks)
            P.ccall = cc
    return P.ccall if P.ccall is not False else None


cdef void _order_by_class(ClassCols cc, Py_ssize_t K) noexcept nogil:
    """pos, inv and start from slot: the columns class by class (a zero column in class 0)."""
    cdef Py_ssize_t nb = cc.slot.shape[0], q = 0, a, c
    for c in range(K):
        cc.start[c] = q
        for a in range(nb):
            if cc.slot[a] == c or (c == 0 and cc.slot[a] == -1):
                cc.pos[q] = a
                cc.inv[a] = q
                q += 1
    cc.start[K] = q


cdef ClassCols _class_cols(Problem P, Py_ssize_t[::1] cols, ClassCols into):
    """The columns ``cols`` of J by class, filled into ``into`` (:class:`ClassCols` for len(cols)
    columns) from :func:`_all_class_cols`; None when J is not class by class."""
    cdef ClassCols full = _all_class_cols(P)
    if full is None or into is None:
        return None
    cdef ClassCols cc = into
    cdef Py_ssize_t nb = cols.shape[0], ns = cc.V.shape[0], a, q, i
    for a in range(nb):
        cc.slot[a] = full.slot[cols[a]]
    _order_by_class(cc, P.classes)
    for q in range(nb):
        a = full.inv[cols[cc.pos[q]]]
        for i in range(ns):
            cc.V[i, q] = full.V[i, a]
    return cc


cdef void _class_hessian(Problem P, double[::1] d2, ClassCols cc, double[:, ::1] W, double[:, ::1] H) noexcept nogil:
    """The loss part of the Hessian over a restricted solve's columns (H in their order) from the
    columns by class: the block of classes c <= c2 is V_c' diag(s) V_c2 with s_i = wc_i p_ic
    (delta(c, c2) - p_ic2) (the row's Hessian diag(p) - p p' between the two classes;
    reductions.softmax_hessian_apply). Per class c, the weighted copies of every V_c2, c2 >= c (in W,
    samples x columns), and one product for the whole row of blocks (K products, not K (K + 1) / 2:
    ten classes' 55 small products cost their calls more than their arithmetic); the blocks below
    the diagonal by symmetry."""
    cdef Py_ssize_t K = P.classes, ns = cc.V.shape[0], nb = cc.pos.shape[0], i, c, c2, q, q2, r
    cdef int n = <int> ns, ma, tail, ldw = <int> W.shape[1], ldv = <int> cc.V.shape[1], ldh = <int> cc.Hp.shape[1]
    cdef double alpha = 1.0, beta = 0.0, s, pc
    for c in range(K):
        ma = <int> (cc.start[c + 1] - cc.start[c])
        if ma == 0:
            continue
        tail = <int> (cc.start[K] - cc.start[c])
        if n == 0:
            for q in range(cc.start[c], cc.start[c + 1]):
                for q2 in range(cc.start[c], cc.start[K]):
                    cc.Hp[q, q2] = 0.0
            continue
        for i in range(ns):
            r = i * K
            pc = P.wc[i] * d2[r + c]
            for c2 in range(c, K):
                s = pc * ((1.0 if c == c2 else 0.0) - d2[r + c2])
                for q in range(cc.start[c2], cc.start[c2 + 1]):
                    W[i, q] = s * cc.V[i, q]
        # Hp[block c, blocks c..] (ma x tail) = V_c' W_tail; in Fortran order its transpose W_tail' V_c
        dgemm(b"N", b"T", &tail, &ma, &n, &alpha, &W[0, cc.start[c]], &ldw, &cc.V[0, cc.start[c]], &ldv, &beta,
              &cc.Hp[cc.start[c], cc.start[c]], &ldh)
    for c2 in range(K):
        for c in range(c2 + 1):
            for q in range(cc.start[c], cc.start[c + 1]):
                for q2 in range(cc.start[c2], cc.start[c2 + 1]):
                    H[cc.pos[q], cc.pos[q2]] = cc.Hp[q, q2]
                    H[cc.pos[q2], cc.pos[q]] = cc.Hp[q, q2]


cdef void _class_atb(ClassCols cc, double[:, ::1] M, double[:, ::1] Hp) noexcept nogil:
    """Hp = JB' M with JB's columns in V's (class) order (row ``cc.inv[j]`` for JB's column j), from
    the columns by class: the rows of class c of M against the values of that class's columns, one
    product per class (a third of the work of the full product for three classes, skipping the
    zeros)."""
    cdef Py_ssize_t K = cc.start.shape[0] - 1, nb = M.shape[1], c, a, b
    cdef int n = <int> cc.V.shape[0], m, ldm = <int> (K * nb), ldv = <int> cc.V.shape[1], nbi = <int> nb
    cdef double alpha = 1.0, beta = 0.0
    for c in range(K):
        m = <int> (cc.start[c + 1] - cc.start[c])
        if m == 0:
            continue
        if n == 0:
            for a in range(cc.start[c], cc.start[c + 1]):
                for b in range(nb):
                    Hp[a, b] = 0.0
            continue
        # Hp[rows of class c] (m x nb) = V_c' (m x n) M_c (n x nb); in Fortran order the transpose:
        # Hp_c' (nb x m) = M_c' (nb x n, ld K nb) V_c (n x m, as V_c' of ld ldv, transposed)
        dgemm(b"N", b"T", &nbi, &m, &n, &alpha, &M[c, 0], &ldm, &cc.V[0, cc.start[c]], &ldv, &beta,
              &Hp[cc.start[c], 0], &nbi)


# ---------------------------------------------------------------------- restricted solves


cdef class Workspace:
    """A restricted solve's scratch for supports of ``nb`` coordinates, kept on the Problem and made
    again when nb changes (most solves of a search have the same size: no allocation per solve)."""

    cdef Py_ssize_t nb
    cdef double[:, ::1] JB, M, H, L
    cdef double[::1] g, step, ut, u0, us  # (u0: the solve's coefficients, _solve_on's; the others _restricted's)
    cdef ClassCols cc


cdef dict _POOL = {}  # (thread, kind, shape...) -> (scratch object, its bytes), oldest first (_scratch)
cdef Py_ssize_t _pool_bytes = 0


cdef object _scratch(tuple key):
    """The scratch object of ``key`` from the shared pool (moved to the newest end), or None. The pool
    holds the Workspaces and ModelBuffers of recent shapes for every Problem of one thread: a
    path's bounds, a cross-validation's folds and a study's repetitions ask for the same shapes
    (a support of nb coordinates, a model of nb x ni blocks: sizes of p and k, and of n where a
    block reads the samples), so their arrays are made once rather than at every bound of every
    fold (about a third of a fold path's kernel time at 80 x 20 went into making them). A scratch
    object is filled before it is read, by whichever solve or model takes it next; the key holds
    the thread, so a Problem solved on another thread never shares one."""
    got = _POOL.pop(key, None)
    if got is None:
        return None
    _POOL[key] = got
    return (<tuple> got)[0]


cdef void _keep(tuple key, object obj, Py_ssize_t nbytes):
    """Keep ``obj`` (``nbytes`` of arrays) in the pool, the oldest dropped beyond SCRATCH_ENTRIES
    objects or SCRATCH_BYTES bytes (the newest always kept)."""
    global _pool_bytes
    old = _POOL.pop(key, None)
    if old is not None:
        _pool_bytes -= (<tuple> old)[1]
    _POOL[key] = (obj, nbytes)
    _pool_bytes += nbytes
    while len(_POOL) > 1 and (len(_POOL) > SCRATCH_ENTRIES or _pool_bytes > SCRATCH_BYTES):
        first = next(iter(_POOL))
        _pool_bytes -= (<tuple> _POOL.pop(first))[1]


def scratch_pool(clear: bool = False) -> tuple:
    """(objects, bytes) in the shared scratch pool, emptied first when ``clear`` (for the tests)."""
    global _pool_bytes
    if clear:
        _POOL.clear()
        _pool_bytes = 0
    return len(_POOL), _pool_bytes


def scratch_limits(Py_ssize_t entries=-1, Py_ssize_t nbytes=-1) -> tuple:
    """The pool's limits (objects, bytes), set first where given (for the tests); returns the old ones."""
    global SCRATCH_ENTRIES, SCRATCH_BYTES
    old = (SCRATCH_ENTRIES, SCRATCH_BYTES)
    if entries >= 1:
        SCRATCH_ENTRIES = entries
    if nbytes >= 0:
        SCRATCH_BYTES = nbytes
    return old


cdef Workspace _workspace(Problem P, Py_ssize_t nb):
    """The scratch of supports of nb coordinates: the last size's on the Problem, else the shared
    pool's of this shape (:func:`_scratch`), else made (two n x nb blocks for a non-quadratic loss,
    nb x nb and nb-vectors) and kept there."""
    cdef Workspace ws = P.ws
    if ws is not None and ws.nb == nb:
        return ws
    cdef Py_ssize_t cl = P.classes if P.classes > 1 and nb > 0 else 0
    cdef tuple key = (PyThread_get_thread_ident(), 0, nb, 0 if P.quad else P.n, cl, P.wc.shape[0] if cl else 0)
    got = _scratch(key)
    if got is not None:
        P.ws = got
        return <Workspace> got
    ws = Workspace()
    ws.nb = nb
    if not P.quad:  # (a quadratic's solve is one factorization of Gram rows: no columns gathered)
        ws.JB, ws.M = np.empty((P.n, nb)), np.empty((P.n, nb))
    ws.H, ws.L = np.empty((nb, nb)), np.empty((nb, nb))
    ws.g, ws.step, ws.ut, ws.u0, ws.us = np.empty(nb), np.empty(nb), np.empty(nb), np.empty(nb), np.empty(nb)
    ws.cc = None
    if cl:
        ws.cc = _class_arrays(nb, P.wc.shape[0], P.classes, nb, nb)
    _keep(key, ws, 8 * ((0 if P.quad else 2 * P.n * nb) + 2 * nb * nb + 5 * nb))
    P.ws = ws
    return ws


cdef (double, bint, bint, int) _restricted(Problem P, Py_ssize_t[::1] cols, double[::1] u, double tol, double give_up,
                                            double[::1] d1):
    """min f over the coordinates ``cols`` (every other coordinate 0), from u (overwritten with the
    minimizer; d1 receives the loss derivatives there). Returns (f, ok, converged, iterations);
    ``ok`` False: a case for the general path (a Hessian not numerically positive definite, no
    point of finite f from u and the domain trials of the free coordinates, a solve that does not
    converge without ``give_up`` (NaN: none), a point running away)."""
    cdef Py_ssize_t nb = cols.shape[0], a, c, i, t_
    cdef double f, ft, dmin, dmax, dec, t, scale, t_next, t_prev, f_prev
    cdef bint conv = False, moved, found
    cdef int its = 0, tries, convex = -1
    cdef double[:, ::1] H, L, M, JB
    cdef double[::1] r, g, step, ut, tmp
    cdef int nbi = <int> nb, ni = <int> P.n, one_i = 1
    cdef double one_d = 1.0
    cdef Workspace ws_q
    if P.quad:
        if nb == 0:
            return _value(P, u, cols, d1, P.d2, 1), True, True, 1
        _gram_rows(P, cols)
        ws_q = _workspace(P, nb)  # (the scratch of this size: no allocation per solve)
        H, L, r = ws_q.H, ws_q.L, ws_q.g
        for a in range(nb):
            r[a] = -P.g0[cols[a]]
            for c in range(nb):
                H[a, c] = P.Q[cols[a], cols[c]]
        if not _factor(H, L, 0.0):
            return INFINITY, False, False, 1
        dmin, dmax = INFINITY, 0.0
        for a in range(nb):
            dmin = min(dmin, L[a, a] * L[a, a])
            dmax = max(dmax, L[a, a] * L[a, a])
        if dmin <= 1e-7 * dmax:  # lowering/active._GramQuadratic: not numerically positive definite
            return INFINITY, False, False, 1
        _fsolve(L, r, u)
        return _value(P, u, cols, d1, P.d2, 1), True, True, 1
    # the damped Newton loop of numerics/newton._newton_one
    cdef double[::1] d2 = P.w
    scale = 0.0
    for a in range(nb):
        scale += u[a] * u[a]
    scale = 1.0 + sqrt(scale)
    f = _value(P, u, cols, d1, d2, 2)
    if not isfinite(f):  # outside the loss's domain: the free coordinates moved (lowering/guards)
        found = False
        for t_ in range(P.domain.shape[0]):
            for a in range(nb):
                for c in range(P.F.shape[0]):
                    if cols[a] == P.F[c]:
                        u[a] = P.domain[t_]
            f = _value(P, u, cols, d1, d2, 2)
            if isfinite(f):
                found = True
                break
        if not found:
            return INFINITY, False, False, 0
    cdef Workspace ws = _workspace(P, nb)
    JB, M, H, L, g, step, ut = ws.JB, ws.M, ws.H, ws.L, ws.g, ws.step, ws.ut
    ws.us[:] = u  # (the start: a solve that stops short is checked for a runaway from it)
    # the softmax's columns by class (its products skip the other classes' rows), else J[:, cols]
    cdef ClassCols cc = _class_cols(P, cols, ws.cc)
    if cc is None:
        for i in range(P.n):
            for a in range(nb):
                JB[i, a] = P.J[i, cols[a]]
    for _ in range(NEWTON_MAX_ITER):
        its += 1
        if nb == 0:
            conv = True
            break
        if cc is not None:
            _class_jt(P, cc, d1, g)
            for a in range(nb):
                g[a] += P.lin[cols[a]] + P.rd[cols[a]] * u[a]
        else:
            for a in range(nb):
                g[a] = P.lin[cols[a]] + P.rd[cols[a]] * u[a]
            if P.n > 0:  # g += JB' d1 (JB in C order is JB' in Fortran order)
                dgemv(b"N", &nbi, &ni, &one_d, &JB[0, 0], &nbi, &d1[0], &one_i, &one_d, &g[0], &one_i)
        if cc is not None:
            _class_hessian(P, d2, cc, M, H)
        else:
            _weigh(P, d2, JB, M)
            _atb(M, JB, H)
        for a in range(nb):
            H[a, a] += P.rd[cols[a]]
        dec = -1.0
        if _factor(H, L, NEWTON_JITTER):
            _fsolve(L, g, step)
            dec = 0.0
            for a in range(nb):
                step[a] = -step[a]
                dec -= g[a] * step[a]
        if not dec >= 0.0:  # not numerically positive definite (separable data: the curvature vanishes)
            dec = _singular_step(H, L, g, step)
            if isnan(dec):
                return f, False, False, its
        if dec <= 2.0 * tol * (1.0 + fabs(f)):
            conv = True
            for a in range(nb):
                ut[a] = u[a] + step[a]
            _trial_z(P, cc, JB, ut)
            ft = _value_z(P, ut, cols, P.e1, P.e2, 2)
            if isfinite(ft) and ft <= f + ROUNDING * (1.0 + fabs(f)):
                u[:] = ut
                d1[:] = P.e1
                d2[:] = P.e2
                f = ft
            break
        if not isnan(give_up) and f - 2.0 * dec > give_up:
            break
        t = 1.0
        moved = False
        tries = 0
        t_prev = f_prev = NAN
        while tries < 50:  # (numerics/newton._newton_one's backtracking)
            for a in range(nb):
                ut[a] = u[a] + t * step[a]
            _trial_z(P, cc, JB, ut)
            ft = _value_z(P, ut, cols, P.e1, P.e2, 2)
            if ft <= f - 0.25 * t * dec:
                if ft < f:  # (t dec / 4 below f's rounding passes the test without a decrease: no step)
                    u[:] = ut
                    d1[:] = P.e1
                    d2[:] = P.e2
                    f = ft
                    moved = True
                break
            t_next = _backtrack(t, ft, t_prev, f_prev, f, dec, &tries)
            if isfinite(ft):
                if convex < 0:
                    convex = _convex(P)
                if convex:  # (a chord's end: on a convex objective only)
                    t_prev, f_prev = t, ft
            t = t_next
        if not moved:
            conv = True
            break
    dmax = 0.0
    for a in range(nb):
        dmax += u[a] * u[a]
    if sqrt(dmax) > 1e12 * scale:
        return f, False, conv, its
    # a solve that stops short (its Newton steps used up: a loss that only tends to its infimum, the
    # softmax or the logistic loss on separable data) keeps its point, as lowering/restricted keeps
    # it, unless f falls without bound along the way it came (guards.runs_away, on the solve's
    # coordinates): then the general path says the problem is unbounded
    if not conv and isnan(give_up) and _runs_away(P, cols, u, ws.us, ws.ut, f):
        return f, False, conv, its
    return f, True, conv, its


cdef inline double _backtrack(double t, double ft, double t_prev, double f_prev, double f, double dec,
                              int* tries) noexcept nogil:
    """numerics/newton.backtrack (the same arithmetic): the next trial step of the Armijo backtracking
    after the trial at t failed with value ft, halved past the steps that the chord through
    (t, ft) and (t_prev, f_prev) -- the last trial before with a finite value, on a convex objective
    (NaN: none) -- proves would fail; ``tries``: the steps of the sequence used (50 at most)."""
    cdef double nxt = 0.5 * t, m, den, r_min
    tries[0] += 1
    if not (isfinite(ft) and isfinite(f_prev)):
        return nxt
    m = (f_prev - ft) / (t_prev - t)
    den = m + 0.25 * dec
    if not den > 0.0:
        return nxt
    r_min = (f - ft + m * t + CHORD_ROUNDING * (1.0 + fabs(f) + fabs(ft) + fabs(f_prev))) / den
    while tries[0] < 50 and nxt > r_min:
        nxt = 0.5 * nxt
        tries[0] += 1
    return nxt


cdef bint _nonnegative(double[::1] r) noexcept nogil:
    """Every entry of r is >= 0 (a ridge's diagonal: what convexity asks of it)."""
    cdef Py_ssize_t i
    for i in range(r.shape[0]):
        if not r[i] >= 0.0:
            return False
    return True


cdef bint _convex(Problem P) noexcept nogil:
    """The objective is convex (numerics/newton._convex): every sigma wc_i >= 0 (sigma = -1 for the
    concave log, whose loss -log takes a negative coefficient, else +1) and every ridge >= 0."""
    cdef double sigma = -1.0 if P.code == 3 else 1.0
    cdef Py_ssize_t i
    for i in range(P.wc.shape[0]):
        if not sigma * P.wc[i] >= 0.0:
            return False
    return _nonnegative(P.rd)


cdef double _singular_step(double[:, ::1] H, double[:, ::1] W, double[::1] g, double[::1] step):
    """numerics/newton._newton_direction after its Cholesky step failed: the step solving
    (H + JITTER |tr H| / m I) s = -g by LU with partial pivoting (LAPACK gesv, what np.linalg.solve
    runs; least squares by the pseudo-inverse where that matrix is singular, lstsq's), or -g where
    that step is not a descent direction; its decrement -g's (NaN: syev failed). W: scratch of H's shape."""
    cdef Py_ssize_t m = H.shape[0], a, b
    cdef int n = <int> m, one = 1, info = 0
    cdef double tr = 0.0, jit, dec = 0.0
    if m == 0:
        return 0.0
    for a in range(m):
        tr += H[a, a]
    jit = NEWTON_JITTER * fabs(tr) / m
    W[:, :] = H
    for a in range(m):
        W[a, a] += jit
        step[a] = g[a]
    cdef int[::1] ipiv = np.empty(m, dtype=np.intc)
    cdef double[:, ::1] Hp
    cdef double t
    dgesv(&n, &one, &W[0, 0], &n, &ipiv[0], &step[0], &n, &info)  # (H symmetric: its Fortran view)
    if info != 0:  # singular: the least-squares step (np.linalg.lstsq's cut, m eps)
        for a in range(m):
            W[a, a] = H[a, a] + jit
            for b in range(m):
                if b != a:
                    W[a, b] = 0.5 * (H[a, b] + H[b, a])
        Hp = np.empty((m, m))
        if not _pinv_sym(W, Hp, m * DBL_EPS):
            return NAN
        for a in range(m):
            t = 0.0
            for b in range(m):
                t += Hp[a, b] * g[b]
            step[a] = t
    for a in range(m):
        step[a] = -step[a]
        dec -= g[a] * step[a]
    if not dec >= 0.0:  # numerically singular: the gradient step
        dec = 0.0
        for a in range(m):
            step[a] = -g[a]
            dec += g[a] * g[a]
    return dec


cdef bint _runs_away(Problem P, Py_ssize_t[::1] cols, double[::1] u, double[::1] start, double[::1] ut,
                     double f0) noexcept nogil:
    """lowering/guards.runs_away on the coordinates ``cols``: f at t = 1e4 and 1e8 along d = u - start
    (in units of max(1, |u|) / |d|) falls ever further below f0 = f(u), by more than any scale of the
    problem. Evaluates into the Problem's scratch (P.z, P.e1, P.e2), not its derivatives at u."""
    cdef Py_ssize_t a, nb = cols.shape[0]
    cdef double nd = 0.0, nu = 0.0, unit, f1, f2, big
    for a in range(nb):
        nd += (u[a] - start[a]) * (u[a] - start[a])
        nu += u[a] * u[a]
    nd = sqrt(nd)
    if not nd > 0.0:
        return False
    unit = max(1.0, sqrt(nu)) / nd
    for a in range(nb):
        ut[a] = u[a] + 1e4 * unit * (u[a] - start[a])
    f1 = _value(P, ut, cols, P.e1, P.e2, 0)
    for a in range(nb):
        ut[a] = u[a] + 1e8 * unit * (u[a] - start[a])
    f2 = _value(P, ut, cols, P.e1, P.e2, 0)
    if not (isfinite(f0) and isfinite(f1)):
        return False
    big = 1e3 * (1.0 + fabs(f0))
    return f1 < f0 - big and (f2 == -INFINITY or (isfinite(f2) and f2 < f1 - big))


cdef Py_ssize_t[::1] _union(Problem P, Py_ssize_t[::1] sel):
    """The sorted flat coordinates C[sel] together with F, in the Problem's scratch ``colbuf`` (valid
    until the next call: _solve_on, its only caller, reads it within one solve)."""
    cdef Py_ssize_t nf = P.F.shape[0], a
    cdef Py_ssize_t[::1] out = P.colbuf[: nf + sel.shape[0]]
    for a in range(nf):
        out[a] = P.F[a]
    for a in range(sel.shape[0]):
        out[nf + a] = P.C[sel[a]]
    if out.shape[0] > 64:
        np.asarray(out).sort()
    else:
        _sort_positions(out)
    return out


cdef class Sol:
    """A restricted solve's or a search step's answer, handed between the kernels without a tuple
    (a tuple boxes each array into a memoryview object and the caller unboxes it again: a tenth of a
    small search's time): the point x, its objective f and gradient g, the units of a step, whether
    it improved (``better``: a check's, a step's acceptance) and whether it could be decided (``ok``)."""

    cdef double[::1] x, g
    cdef Py_ssize_t[::1] units
    cdef double f
    cdef bint better, ok


cdef inline Sol _sol(double[::1] x, double f, double[::1] g, bint better, bint ok):
    cdef Sol r = Sol.__new__(Sol)
    r.x, r.f, r.g, r.better, r.ok = x, f, g, better, ok
    return r


cdef Sol _solve_on(Problem P, Py_ssize_t[::1] sel, double[::1] x0, double give_up, long[::1] stats,
                   double wanted=NAN):
    """The restricted minimizer over C[sel] and F from the flat point x0: (x, f, g, ok); with
    ``wanted`` (the caller's acceptance bar) the point and its gradient only when f < wanted, and
    only when ok (else x0 in their places: a rejected or failed support's are never read)."""
    cdef Py_ssize_t[::1] cols = _union(P, sel)
    cdef Py_ssize_t a, nb = cols.shape[0]
    cdef double[::1] u = _workspace(P, nb).u0  # (read back into x below: not kept)
    for a in range(nb):
        u[a] = x0[cols[a]]
    cdef double f
    cdef bint ok, conv
    cdef int its
    f, ok, conv, its = _restricted(P, cols, u, 1e-12, give_up, P.d1)
    stats[0] += 1  # ST_SOLVES
    stats[1] += its  # ST_NEWTON
    if not ok or (not isnan(wanted) and not f < wanted):
        return _sol(x0, f, x0, False, ok)  # (a failed or a rejected support: no caller reads its point)
    cdef double[::1] x = _dnew(P, P.D)
    x[:] = 0.0
    for a in range(nb):
        x[cols[a]] = u[a]
    stats[2] += 1  # ST_GRADS
    if P.quad:
        return _sol(x, f, _quad_grad(P, u, cols), False, True)
    return _sol(x, f, _full_grad(P, u, cols, P.d1), False, True)


# ---------------------------------------------------------------------- thresholding


cdef Py_ssize_t _select(Problem P, double[::1] x, double e, double[::1] g, Py_ssize_t k):
    """The positions into C of the k largest |x - e g| on C, sorted, in P.selbuf[:k] (no array
    made: most projections of the support-change line search repeat a support already tried)."""
    cdef Py_ssize_t m = P.C.shape[0], a, q, filled = 0, c, t
    cdef double v
    cdef Py_ssize_t[::1] sel = P.selbuf
    cdef double[::1] mag = P.mag
    if P.m > 1:
        return _select_groups(P, x, e, g, k)
    if k >= m:
        for a in range(m):
            sel[a] = a
        return m
    for a in range(m):
        c = P.C[a]
        mag[a] = fabs(x[c] - e * g[c])
    if k <= 64 and m > 4 * k:  # insertion into the k best so far (ties: the lower position)
        for a in range(m):
            v = mag[a]
            if filled == k and not (v > mag[sel[k - 1]]):
                continue
            q = filled if filled < k else k - 1
            while q > 0 and v > mag[sel[q - 1]]:
                sel[q] = sel[q - 1]
                q -= 1
            sel[q] = a
            if filled < k:
                filled += 1
    else:
        order = _top(mag, k, True, P)
        for a in range(k):
            sel[a] = order[a]
    for a in range(1, k):  # ascending positions
        t = sel[a]
        q = a
        while q > 0 and sel[q - 1] > t:
            sel[q] = sel[q - 1]
            q -= 1
        sel[q] = t
    return k


cdef Py_ssize_t _select_groups(Problem P, double[::1] x, double e, double[::1] g, Py_ssize_t k):
    """:func:`_select` on groups: the members of the k groups of largest ||x - e g|| (sets/sparsity.top_k;
    ties: the lower group), as sorted positions into C in P.selbuf."""
    cdef Py_ssize_t nu = P.members.shape[0], m = P.m, u, a, c, q = 0
    cdef double v, t
    cdef double[::1] mag = P.mag[:nu]
    cdef Py_ssize_t[::1] order
    for u in range(nu):
        v = 0.0
        for a in range(m):
            c = P.C[P.members[u, a]]
            t = x[c] - e * g[c]
            v += t * t
        mag[u] = v
    order = _top(mag, k, True, P) if k < nu else np.arange(nu, dtype=np.intp)
    for u in range(order.shape[0]):
        for a in range(m):
            P.selbuf[q] = P.members[order[u], a]
            q += 1
    if q > 64:
        np.asarray(P.selbuf)[:q].sort()
    else:
        _sort_positions(P.selbuf[:q])
    return q


cdef void _sort_positions(Py_ssize_t[::1] sel) noexcept nogil:
    """Insertion sort in place (short arrays)."""
    cdef Py_ssize_t a, q, t
    for a in range(1, sel.shape[0]):
        t = sel[a]
        q = a
        while q > 0 and sel[q - 1] > t:
            sel[q] = sel[q - 1]
            q -= 1
        sel[q] = t


cdef Py_ssize_t[::1] _positions(Problem P, Py_ssize_t[::1] units):
    """The sorted positions into C of the units' members (solvers/auto._positions), in the Problem's
    scratch ``posbuf`` for groups (valid until the next call: every caller hands them to _solve_on)."""
    if P.m == 1:
        return units
    cdef Py_ssize_t u, a, q = 0
    cdef Py_ssize_t[::1] out = P.posbuf[: units.shape[0] * P.m]  # (read by _solve_on's _union at once)
    for u in range(units.shape[0]):
        for a in range(P.m):
            out[q] = P.members[units[u], a]
            q += 1
    if out.shape[0] > 64:
        np.asarray(out).sort()
    else:
        _sort_positions(out)
    return out


cdef Py_ssize_t[::1] _units_at(Problem P, double[::1] x):
    """The units with a nonzero coordinate at x, sorted (solvers/auto._units_of)."""
    if P.m == 1:
        return _support(P, x)
    cdef Py_ssize_t nu = P.members.shape[0], u, a, q = 0
    cdef Py_ssize_t[::1] out = _inew(P, nu)
    for u in range(nu):
        for a in range(P.m):
            if x[P.C[P.members[u, a]]] != 0.0:
                out[q] = u
                q += 1
                break
    return out[:q]


cdef bint _same_sel(Problem P, Py_ssize_t ns, Py_ssize_t[::1] b) noexcept nogil:
    cdef Py_ssize_t i
    if ns != b.shape[0]:
        return False
    for i in range(ns):
        if P.selbuf[i] != b[i]:
            return False
    return True


cdef double[::1] _thresholded(Problem P, double[::1] x, double e, double[::1] g, Py_ssize_t[::1] sel):
    """x - e g with the coordinates of C outside ``sel`` (sorted positions) set to zero."""
    cdef double[::1] out = _dnew(P, x.shape[0])
    cdef Py_ssize_t a, q = 0
    for a in range(x.shape[0]):
        out[a] = x[a] - e * g[a]
    for a in range(P.C.shape[0]):
        if q < sel.shape[0] and sel[q] == a:
            q += 1
        else:
            out[P.C[a]] = 0.0
    return out


cdef bint _same(Py_ssize_t[::1] a, Py_ssize_t[::1] b) noexcept nogil:
    cdef Py_ssize_t i
    if a.shape[0] != b.shape[0]:
        return False
    for i in range(a.shape[0]):
        if a[i] != b[i]:
            return False
    return True


cdef Py_ssize_t[::1] _support(Problem P, double[::1] x):
    """Positions into C where x is nonzero."""
    cdef Py_ssize_t a, q = 0
    cdef Py_ssize_t[::1] out = _inew(P, P.C.shape[0])
    for a in range(P.C.shape[0]):
        if x[P.C[a]] != 0.0:
            out[q] = a
            q += 1
    return out[:q]


cdef double _norm(double[::1] v) noexcept nogil:
    cdef double s = 0.0
    cdef Py_ssize_t a
    for a in range(v.shape[0]):
        s += v[a] * v[a]
    return sqrt(s)


cdef double _dist(double[::1] u, double[::1] v) noexcept nogil:
    cdef double s = 0.0
    cdef Py_ssize_t a
    for a in range(u.shape[0]):
        s += (u[a] - v[a]) * (u[a] - v[a])
    return sqrt(s)


cdef double[::1] _loss_curvature(Problem P, double[::1] x) noexcept:
    """wc phi'' at x (in P.w)."""
    cdef Py_ssize_t a, q = 0
    for a in range(P.D):
        if x[a] != 0.0:
            P.nzbuf[q] = a
            P.ubuf[q] = x[a]
            q += 1
    _affine(P, P.ubuf[:q], P.nzbuf[:q], P.z)
    _losses(P, P.z, P.e1, P.w, 2)
    return P.w


cdef double _step_size(Problem P, double[::1] x, double[::1] g):
    """GraHTP's unit step 1 / M at x: M the mean |Hessian diagonal| over C (lowering/constants:
    mean_curvature), made safe (safe_curvature: at least ||g|| / (MAX_MOVE max(1, ||x||)))."""
    cdef double[::1] d2 = _loss_curvature(P, x)
    cdef double tot = 0.0, est, gn, floor_, M, t
    cdef Py_ssize_t i, a, c, K = P.classes
    if P.code == SOFTMAX_CODE:  # sum_i wc_i tr(H_i G_i), G_i the Gram block of sample i's rows of J[:, C] (in R)
        for i in range(P.wc.shape[0]):
            t = 0.0
            for a in range(K):
                t += d2[i * K + a] * P.R[(i * K + a) * K + a]
                for c in range(K):
                    t -= d2[i * K + a] * d2[i * K + c] * P.R[(i * K + a) * K + c]
            tot += P.wc[i] * t
        tot = fabs(tot)
    else:
        for i in range(P.n):
            tot += fabs(d2[i]) * P.R[i]
    for a in range(P.C.shape[0]):
        tot += fabs(P.rd[P.C[a]])
    est = tot / P.C.shape[0]
    gn = _norm(g)
    floor_ = gn / (MAX_MOVE * max(1.0, _norm(x))) if isfinite(gn) else 0.0
    M = fabs(est) if isfinite(est) else 0.0
    M = max(M, floor_)
    if M > 0 and isfinite(M):
        return 1.0 / M
    return 1.0


# ---------------------------------------------------------------------- GraHTP (paper 000, Algorithm 1)


cdef tuple _grahtp(Problem P, Py_ssize_t k, double[::1] x0, int max_iter, double tol, long[::1] stats):
    """GraHTP as solvers/grahtp.GraHTP runs it with its defaults (eta 'local', 'htp' on a quadratic;
    backtracking; the support-change line search): (x, f, g, status, iterations)."""
    cdef Py_ssize_t[::1] st_prev = _support(P, x0), st, st2
    cdef double[::1] x, g, xn, gn, warm, xs, gs
    cdef double f, fn, fs, f0, eta, e, bar, dx, nx, gmax
    cdef bint ok, same, increased, found, retry = False, seen
    cdef int status = MAX_ITER, it = 0, grow = 0, q, ntried, _r
    cdef Py_ssize_t ns
    cdef Sol sol_
    sol_ = _solve_on(P, st_prev, x0, NAN, stats)
    x, f, g, ok = sol_.x, sol_.f, sol_.g, sol_.ok
    if not ok:
        return x, f, g, FALLBACK, 0
    f0 = f
    if not isfinite(f):
        return x, f, g, DIVERGED, 0
    eta = _step_size(P, x, g)
    tried = [None] * (SEARCH_TRIES + 1)
    while it < max_iter:
        it += 1
        if not retry and not P.quad and it > 1:
            eta = _step_size(P, x, g)
        retry = False
        ns = _select(P, x, eta, g, k)
        stats[3] += 1  # ST_HT
        same = _same_sel(P, ns, st_prev)
        if same:
            xn, fn, gn = x, f, g
        else:
            st = _icopy(P, P.selbuf[:ns])
            warm = _thresholded(P, x, eta, g, st)
            sol_ = _solve_on(P, st, warm, NAN, stats)
            xn, fn, gn, ok = sol_.x, sol_.f, sol_.g, sol_.ok
            if not ok:
                return x, f, g, FALLBACK, it
        increased = (not isfinite(fn)) or fn > f + 1e-12 * max(1.0, fabs(f))
        if increased:
            eta /= 2.0
            gmax = 0.0
            for q in range(g.shape[0]):
                gmax = max(gmax, fabs(g[q]))
            if eta < 1e-14 * (1.0 / max(gmax, 1e-300)):
                status = CONVERGED
                break
            it -= 1
            retry = True
            continue
        grow = grow + 1 if fn > f + 1e-12 * max(1.0, fabs(f)) else 0
        if same:  # the support-change line search
            tried[0] = st_prev
            ntried = 1
            e = eta
            found = False
            for _r in range(60):
                e *= 2.0
                ns = _select(P, x, e, g, k)
                stats[3] += 1
                seen = False
                for q in range(ntried):
                    if _same_sel(P, ns, tried[q]):
                        seen = True
                        break
                if seen:
                    continue
                st2 = _icopy(P, P.selbuf[:ns])
                warm = _thresholded(P, x, e, g, st2)
                tried[ntried] = st2
                ntried += 1
                bar = f - 1e-12 * max(1.0, fabs(f))
                sol_ = _solve_on(P, st2, warm, bar, stats, bar)
                xs, fs, gs, ok = sol_.x, sol_.f, sol_.g, sol_.ok
                if not ok:
                    return x, f, g, FALLBACK, it
                if isfinite(fs) and fs < bar:
                    xn, fn, gn, st = xs, fs, gs, st2
                    found = True
                    break
                if ntried > SEARCH_TRIES:
                    break
            if not found:
                status = CONVERGED
                break
        dx = _dist(xn, x)
        nx = _norm(x)
        x, f, g, st_prev = xn, fn, gn, st
        if grow >= 10 and f > f0:
            status = DIVERGED
            break
        if dx <= tol * max(nx, 1e-300) or (nx == 0 and dx == 0):
            status = CONVERGED
            break
    return x, f, g, status, it


# ---------------------------------------------------------------------- the swap model


cdef class Model:
    """The second-order model of every one-unit swap at a restricted minimizer
    (lowering/swaps.SwapModel without linear constraints; units of ``P.m`` coordinates). Rows and
    columns of the blocks go unit by unit, member by member: ``HII`` and ``sigma`` hold each
    candidate's m x m block in the rows u m .. u m + m - 1."""

    cdef Py_ssize_t[::1] units, units_out, cand, B, Icols
    cdef double[::1] gain, removal, v1
    cdef double[:, ::1] A, AB, HBB, HBI, HII, sigma
    cdef double[::1] delta  # each selected unit's change with each candidate (units x cand, flat)
    cdef bint ok
    # the Cholesky route (groups, a non-quadratic loss): Y = L^-1 H_BI by its rows (Yr[yrow[t]] is
    # column t of Y), and A H_BI = L^-T Y formed only for the candidates the pair values read
    cdef bint lazy, hbi_lazy  # (hbi_lazy: H_BI's columns formed on demand, :func:`_hbi_units`)
    cdef double[:, ::1] L, Yr, Mw
    cdef Py_ssize_t[::1] yrow, abdone, hbidone
    cdef ClassCols ccJ
    cdef Problem P  # (whose arena holds the model's short-lived arrays)


cdef double[::1] _hess_diag_at(Problem P, double[::1] x):
    """diag of the Hessian of the loss part at x over every coordinate, with the ridge (an
    elementwise loss)."""
    cdef double[::1] d2 = _loss_curvature(P, x)
    cdef double[::1] out = _dnew(P, P.D)
    cdef int m = <int> P.D, n = <int> P.n, one = 1, lda = <int> P.D
    cdef double alpha = 1.0, beta = 0.0
    cdef Py_ssize_t a
    dgemv(b"N", &m, &n, &alpha, &P.Jsq[0, 0], &lda, &d2[0], &one, &beta, &out[0], &one)
    for a in range(P.D):
        out[a] += P.rd[a]
    return out


cdef double[:, ::1] _columns(Problem P, Py_ssize_t[::1] cols):
    """J[:, cols]."""
    cdef double[:, ::1] out = np.empty((P.n, cols.shape[0]))
    cdef Py_ssize_t i, a
    for i in range(P.n):
        for a in range(cols.shape[0]):
            out[i, a] = P.J[i, cols[a]]
    return out


cdef void _class_blocks(Problem P, double[::1] d2, ClassCols cc, Py_ssize_t[::1] Icols,
                        double[:, ::1] HII) noexcept nogil:
    """The candidates' diagonal blocks of the softmax's Hessian (with the ridge) from the columns by
    class (the whole J's, :func:`_all_class_cols`, whose values are also kept a column to a row in
    VT): H_ab = sum_i V_ia V_ib lam_i(s_a, s_b), lam_i(c, c2) = wc_i p_ic (delta(c, c2) - p_ic2) (the
    row's loss Hessian, formed once per sample for every pair of classes, kept a pair to a row), each
    entry one pass over contiguous rows, its terms summed in sample order."""
    cdef Py_ssize_t K = P.classes, m = HII.shape[1], ni = Icols.shape[0], ns = cc.V.shape[0]
    cdef Py_ssize_t c, c2, a, b, u, i, r, qa, qb, pr
    cdef double wp, acc
    cdef double* lam = <double*> malloc(max(K * K * ns, 1) * sizeof(double))
    if lam == NULL:
        return
    for i in range(ns):
        r = i * K
        for c in range(K):
            wp = P.wc[i] * d2[r + c]
            for c2 in range(K):
                lam[(c * K + c2) * ns + i] = wp * ((1.0 if c == c2 else 0.0) - d2[r + c2])
    for c in range(ni):
        a = c % m
        u = c - a
        qa = cc.inv[Icols[c]]
        for b in range(m):
            qb = cc.inv[Icols[u + b]]
            pr = ((cc.slot[Icols[c]] if cc.slot[Icols[c]] >= 0 else 0) * K
                  + (cc.slot[Icols[u + b]] if cc.slot[Icols[u + b]] >= 0 else 0)) * ns
            acc = 0.0
            for i in range(ns):
                acc += cc.VT[qa, i] * cc.VT[qb, i] * lam[pr + i]
            HII[c, b] = acc
        HII[c, a] += P.rd[Icols[c]]
    free(lam)


cdef bint _pinv_sym(double[:, ::1] H, double[:, ::1] A, double rcond):
    """A = the pseudo-inverse of the symmetric H, singular values up to ``rcond`` of the largest
    dropped, from its eigenvectors (LAPACK syev): np.linalg.pinv's (rcond 1e-15) where the swap
    model's H_BB with its jitter is not positive definite (lowering/swaps._inverse_pd), lstsq's
    (rcond m eps) where a Newton system is singular. False when syev fails."""
    cdef Py_ssize_t m = H.shape[0], a, b, j
    cdef int n = <int> m, lwork = -1, info = 0
    cdef double q, top = 0.0, s
    if m == 0:
        return True
    cdef double[:, ::1] V = np.array(H)
    cdef double[::1] w = np.empty(m)
    dsyev(b"V", b"U", &n, &V[0, 0], &n, &w[0], &q, &lwork, &info)
    lwork = <int> q
    cdef double[::1] work = np.empty(max(lwork, 1))
    dsyev(b"V", b"U", &n, &V[0, 0], &n, &w[0], &work[0], &lwork, &info)
    if info != 0:
        return False
    for j in range(m):
        top = max(top, fabs(w[j]))
    for j in range(m):  # (row j of V in C order: the j-th eigenvector)
        w[j] = 1.0 / w[j] if fabs(w[j]) > rcond * top else 0.0
    for a in range(m):
        for b in range(m):
            s = 0.0
            for j in range(m):
                s += V[j, a] * w[j] * V[j, b]
            A[a, b] = s
    return True


cdef bint _small_eliminate(Py_ssize_t m, double* W, Py_ssize_t* piv) noexcept nogil:
    """The elimination of :func:`_small_factor` on the m x m block already in W (rows of MAXU), in place."""
    cdef Py_ssize_t i, j, c, p
    cdef double t, best
    for c in range(m):
        p = c
        best = fabs(W[c * MAXU + c])
        for i in range(c + 1, m):
            if fabs(W[i * MAXU + c]) > best:
                best = fabs(W[i * MAXU + c])
                p = i
        piv[c] = p
        if best == 0.0:
            return False
        if p != c:  # (the rows' entries from column c on: the multipliers stay where they were made)
            for j in range(c, m):
                t = W[c * MAXU + j]
                W[c * MAXU + j] = W[p * MAXU + j]
                W[p * MAXU + j] = t
        for i in range(c + 1, m):
            t = W[i * MAXU + c] / W[c * MAXU + c]
            W[i * MAXU + c] = t
            for j in range(c + 1, m):
                W[i * MAXU + j] -= t * W[c * MAXU + j]
    return True


cdef bint _small_factor(double[:, ::1] M, Py_ssize_t r0, Py_ssize_t m, double* W, Py_ssize_t* piv) noexcept nogil:
    """M[r0:r0+m, :m] by Gaussian elimination with partial pivoting (m at most MAXU) into W (MAXU x MAXU: U on
    and above the diagonal, below it each step's multipliers in the rows they were made for: a later
    swap moves only the entries from its column on) and piv (the row swapped in at each step), so
    that :func:`_small_lu_solve` replays the elimination on a right-hand side; False when a pivot is
    zero."""
    cdef Py_ssize_t i, j
    for i in range(m):
        for j in range(m):
            W[i * MAXU + j] = M[r0 + i, j]
    return _small_eliminate(m, W, piv)


cdef bint _small_factor_p(double* M, Py_ssize_t m, double* W, Py_ssize_t* piv) noexcept nogil:
    """:func:`_small_factor` of the m x m block held in M with rows of MAXU (the same steps)."""
    cdef Py_ssize_t i, j
    for i in range(m):
        for j in range(m):
            W[i * MAXU + j] = M[i * MAXU + j]
    return _small_eliminate(m, W, piv)


cdef void _small_lu_solve(double* W, Py_ssize_t* piv, Py_ssize_t m, double* rhs, double* out) noexcept nogil:
    """out = M^-1 rhs from :func:`_small_factor`'s W and piv: the row swaps and the multipliers applied
    to rhs in elimination order, then back substitution (the arithmetic of eliminating with rhs as an
    extra column, so the same numbers as solving each right-hand side from scratch)."""
    cdef double b[MAXU]
    cdef Py_ssize_t i, j, c
    cdef double t
    for i in range(m):
        b[i] = rhs[i]
    for c in range(m):
        if piv[c] != c:
            t = b[c]
            b[c] = b[piv[c]]
            b[piv[c]] = t
        for i in range(c + 1, m):
            b[i] -= W[i * MAXU + c] * b[c]
    for i in range(m - 1, -1, -1):
        t = b[i]
        for j in range(i + 1, m):
            t -= W[i * MAXU + j] * out[j]
        out[i] = t / W[i * MAXU + i]


cdef bint _small_solve(double[:, ::1] M, Py_ssize_t r0, Py_ssize_t m, double* rhs, double* out) noexcept nogil:
    """out = M[r0:r0+m, :m]^-1 rhs by Gaussian elimination with partial pivoting (LAPACK gesv's
    steps, what np.linalg.solve runs; m at most MAXU); False when a pivot is zero."""
    cdef double W[MAXU2]
    cdef Py_ssize_t piv[MAXU]
    if not _small_factor(M, r0, m, W, piv):
        return False
    _small_lu_solve(W, piv, m, rhs, out)
    return True


cdef class ModelBuffers:
    """A swap model's arrays for one shape (nb support rows, ni candidate columns, nI candidates,
    nJ support units), kept on the Problem: the models of a search are built one after another and
    each dies before the next (the search, auto_run's fill), so their arrays need not be made again."""

    cdef Py_ssize_t nb, ni, nI, nJ, m
    cdef Py_ssize_t[::1] B, Icols, cols
    cdef double[:, ::1] HBB, HBI, HII, Mj, L, A, AB, sigma
    cdef double[:, ::1] Hr  # (the softmax's full model: J' M, a row per column of J; made when first needed)
    cdef object cc  # (the softmax's short path: the columns of B and the pool by class; made when first needed)
    cdef double[::1] v1, gain, removal
    cdef double[:, ::1] Z, Yr  # (the Cholesky route: W J_B L^-T, and Y's rows; made when first needed)
    cdef Py_ssize_t[::1] yrow, abdone, hbidone


cdef ModelBuffers _model_buffers(Problem P, Py_ssize_t nb, Py_ssize_t ni, Py_ssize_t nI, Py_ssize_t nJ):
    """A swap model's arrays of this shape: the Problem's last two shapes', else the shared pool's
    (:func:`_scratch`; the key holds what the arrays made on first need read too: n, D, the
    classes), else made and kept there."""
    cdef Py_ssize_t m = P.m
    cdef ModelBuffers mb = P.mb
    if mb is not None and mb.nb == nb and mb.ni == ni and mb.nI == nI and mb.nJ == nJ and mb.m == m:
        return mb
    mb = P.mb2  # two shapes kept: the pool's model and the full one of a search step alternate
    if mb is not None and mb.nb == nb and mb.ni == ni and mb.nI == nI and mb.nJ == nJ and mb.m == m:
        P.mb2, P.mb = P.mb, mb
        return mb
    cdef tuple key = (PyThread_get_thread_ident(), 1, nb, ni, nI, nJ, m, P.n, P.D, P.classes, P.wc.shape[0])
    got = _scratch(key)
    if got is not None:
        P.mb2, P.mb = P.mb, got
        return <ModelBuffers> got
    mb = ModelBuffers()
    mb.nb, mb.ni, mb.nI, mb.nJ, mb.m = nb, ni, nI, nJ, m
    mb.B, mb.Icols, mb.cols = np.empty(nb, dtype=np.intp), np.empty(ni, dtype=np.intp), np.empty(nb + ni, dtype=np.intp)
    mb.Hr, mb.cc = None, None
    mb.HBB, mb.HBI, mb.HII = np.empty((nb, nb)), np.empty((nb, ni)), np.empty((ni, m))
    mb.Mj, mb.L, mb.A, mb.AB = np.empty((nb, nb)), np.empty((nb, nb)), np.empty((nb, nb)), np.empty((nb, ni))
    mb.sigma = np.empty((ni, m))
    mb.v1, mb.gain, mb.removal = np.empty(ni), np.empty(nI), np.empty(nJ)
    mb.Z, mb.Yr = None, None
    mb.yrow, mb.abdone, mb.hbidone = np.empty(ni, dtype=np.intp), np.empty(nI, dtype=np.intp), np.empty(nI, dtype=np.intp)
    # (the bytes counted with what the Cholesky route and the softmax make on first need: Z, Yr, Hr)
    _keep(key, mb, 8 * (4 * nb * nb + 2 * nb * ni + 2 * ni * m + 3 * ni + 2 * nb + 3 * nI + nJ
                        + (0 if P.quad and P.classes == 1 else (P.n + 2 * P.D) * nb)))
    P.mb2, P.mb = P.mb, mb
    return mb


cdef void _rows_to_blocks(Problem P, double[:, ::1] Hrows, Py_ssize_t[::1] rows, Py_ssize_t[::1] B,
                          double[:, ::1] HBB, double[:, ::1] HBI):
    """H_BB (with the ridge) and H_BI from the Hessian's rows for B's and the candidates' columns
    (``Hrows``: nb entries a row; ``rows``: the row of each of those columns, B's first; None: in
    that order): a transpose done 32 columns at a time, so that the rows read stay in cache while
    every entry of them is written."""
    cdef Py_ssize_t nb = B.shape[0], nt = B.shape[0] + HBI.shape[1], t0, t1, t, a, r
    cdef bint given = rows is not None
    for t0 in range(0, nt, 32):
        t1 = min(t0 + 32, nt)
        for a in range(nb):
            for t in range(t0, t1):
                r = rows[t] if given else t
                if t < nb:
                    HBB[a, t] = Hrows[r, a]
                else:
                    HBI[a, t - nb] = Hrows[r, a]
    for a in range(nb):
        HBB[a, a] += P.rd[B[a]]


cdef Model _swap_model(Problem P, double[::1] x, double[::1] g, Py_ssize_t[::1] units, Py_ssize_t pool,
                       Py_ssize_t candidates):
    cdef Model md = Model()
    md.P = P
    cdef Py_ssize_t nunits = P.members.shape[0], nJ = units.shape[0], nf = P.F.shape[0], m = P.m
    cdef Py_ssize_t nb = nJ * m + nf, a, b, c, u, i, nI, ni, take, widest, need
    cdef double s, gn, tr, lam, best
    cdef double[::1] diag, score, d2, full
    cdef double[:, ::1] JX, MX
    cdef Py_ssize_t[::1] order
    cdef ClassCols ccJ = None, ccS
    cdef bint few = False
    cdef Py_ssize_t[::1] cols
    cdef Py_ssize_t[::1] units_out = _inew(P, nunits), inside = _inew(P, nunits)
    inside[:] = 0
    for a in range(nJ):
        inside[units[a]] = 1
    b = 0
    for a in range(nunits):
        if not inside[a]:
            units_out[b] = a
            b += 1
    units_out = units_out[:b]
    cdef Py_ssize_t[::1] B
    pool = max(pool // m, 1)  # (the pool counts coordinates: units of m coordinates, pool // m of them)
    if units_out.shape[0] > pool:  # the screen (swaps._screen)
        score = _dnew(P, units_out.shape[0])
        if m == 1 and P.code != SOFTMAX_CODE:  # g_i^2 / H_ii (ABESS's forward sacrifice)
            diag = P.diag if P.quad else _hess_diag_at(P, x)
            for a in range(units_out.shape[0]):
                c = P.C[units_out[a]]
                s = g[c] * g[c] / diag[c]
                score[a] = s if isfinite(s) else 0.0
        else:  # ||g_I||^2 (no Hessian diagonal at hand: groups, the softmax)
            for a in range(units_out.shape[0]):
                s = 0.0
                for b in range(m):
                    c = P.C[P.members[units_out[a], b]]
                    s += g[c] * g[c]
                score[a] = s
        order = _top(score, pool, True, P)
        for a in range(order.shape[0]):  # the screened units (order is the arena's: overwritten in place)
            order[a] = units_out[order[a]]
        units_out = order
        _sort_in_place(units_out)
    nI = units_out.shape[0]
    ni = nI * m
    cdef ModelBuffers mb = _model_buffers(P, nb, ni, nI, nJ)
    B = mb.B
    for a in range(nJ):
        for b in range(m):
            B[a * m + b] = P.C[P.members[units[a], b]]
    for a in range(nf):
        B[nJ * m + a] = P.F[a]
    cdef Py_ssize_t[::1] Icols = mb.Icols
    for a in range(nI):
        for b in range(m):
            Icols[a * m + b] = P.C[P.members[units_out[a], b]]
    cdef double[:, ::1] HBB = mb.HBB, HBI = mb.HBI, Hrows, Mw
    cdef double[:, ::1] HII = mb.HII
    HII[:, :] = 0.0
    if P.quad:
        _gram_rows(P, B)
        for a in range(nb):
            for c in range(nb):
                HBB[a, c] = P.Q[B[a], B[c]]
            for c in range(ni):
                HBI[a, c] = P.Q[B[a], Icols[c]]
        if m == 1:
            for c in range(nI):
                HII[c, 0] = P.diag[Icols[c]]
        else:
            _gram_rows(P, Icols)
            for c in range(ni):
                for b in range(m):
                    HII[c, b] = P.Q[Icols[c], Icols[(c // m) * m + b]]
    else:
        d2 = _loss_curvature(P, x)
        JX = _columns(P, B)
        Mw = np.empty((P.n, nb))
        _weigh(P, d2, JX, Mw)
        ccJ = _all_class_cols(P)  # (the softmax's columns by class: a third of the products)
        # the Hessian's rows are read only on B and the modelled candidates: when those are at most
        # half of J's columns (a screened pool), only their rows are formed, from the gathered columns
        # (Khan's 4-class softmax, 9,232 columns and a pool of 1,024: an eighth of the product)
        few = 2 * (nb + ni) <= P.D
        cols = mb.cols
        cols[:nb] = B
        cols[nb:] = Icols
        if m > 1 and not few:  # (the Cholesky route: H_BB alone now, H_BI's columns as the warm starts read them)
            _hbb_rows(P, Mw, JX, ccJ, B, HBB)
        elif few and ccJ is not None:
            if mb.cc is None:
                mb.cc = _class_arrays(nb + ni, P.wc.shape[0], P.classes, nb + ni, nb)
            ccS = _class_cols(P, cols, mb.cc)
            _class_atb(ccS, Mw, ccS.Hp)  # (a row per column of cols, in ccS's class order)
            _rows_to_blocks(P, ccS.Hp, ccS.inv, B, HBB, HBI)
        elif few:
            Hrows = np.empty((nb, nb + ni))
            _atb(Mw, _columns(P, cols), Hrows)
            for a in range(nb):
                for c in range(nb):
                    HBB[a, c] = Hrows[a, c]
                HBB[a, a] += P.rd[B[a]]
                for c in range(ni):
                    HBI[a, c] = Hrows[a, nb + c]
        elif ccJ is not None:
            if mb.Hr is None:
                mb.Hr = np.empty((P.D, nb))
            Hrows = mb.Hr  # (J' Mw, a row per column of J in ccJ's class order)
            _class_atb(ccJ, Mw, Hrows)
            for a in range(nb + ni):
                cols[a] = ccJ.inv[cols[a]]
            _rows_to_blocks(P, Hrows, cols, B, HBB, HBI)
        else:
            Hrows = np.empty((nb, P.D))
            _atb(Mw, P.J, Hrows)
            for a in range(nb):
                for c in range(nb):
                    HBB[a, c] = Hrows[a, B[c]]
                HBB[a, a] += P.rd[B[a]]
                for c in range(ni):
                    HBI[a, c] = Hrows[a, Icols[c]]
        if ccJ is not None:  # each candidate's block: sum_i V_ia V_ib wc_i p_ia (delta - p_ib), a, b its classes
            _class_blocks(P, d2, ccJ, Icols, HII)
        elif m == 1 and P.code != SOFTMAX_CODE:
            full = _hess_diag_at(P, x)
            for c in range(nI):
                HII[c, 0] = full[Icols[c]]
        else:  # each candidate's block from its columns
            JX = _columns(P, Icols)
            MX = np.empty((P.n, ni))
            _weigh(P, d2, JX, MX)
            for i in range(P.n):
                for c in range(ni):
                    u = (c // m) * m
                    for b in range(m):
                        HII[c, b] += MX[i, c] * JX[i, u + b]
            for c in range(ni):
                HII[c, c % m] += P.rd[Icols[c]]
    tr = 0.0
    for a in range(nb):
        for c in range(a + 1, nb):
            s = 0.5 * (HBB[a, c] + HBB[c, a])
            HBB[a, c] = s
            HBB[c, a] = s
        tr += HBB[a, a]
    lam = JITTER * max(tr / max(nb, 1), 1e-300)
    cdef double[:, ::1] Mj = mb.Mj, L = mb.L, A = mb.A
    Mj[:, :] = HBB
    for a in range(nb):
        Mj[a, a] += lam
    md.units, md.units_out, md.B, md.Icols, md.HBB, md.HBI, md.HII = units, units_out, B, Icols, HBB, HBI, HII
    md.L, md.AB, md.lazy, md.hbi_lazy = L, mb.AB, False, False
    if m > 1 and not P.quad and not few:  # H_BI's columns on demand (_hbb_rows formed H_BB only)
        md.hbi_lazy, md.Mw, md.ccJ, md.hbidone = True, Mw, ccJ, mb.hbidone
        md.hbidone[:] = 0
    cdef bint chol = _factor(Mj, L, 0.0)
    cdef Py_ssize_t[::1] every_unit
    if md.hbi_lazy and not (chol and ni > 0 and nb > 0):  # (the route of A H_BI: every column)
        every_unit = _inew(P, nI)
        for a in range(nI):
            every_unit[a] = a
        _hbi_units(md, every_unit)
    if chol:
        _finverse(L, A)
    elif not _pinv_sym(HBB, A, 1e-15):  # (swaps._inverse_pd: the pseudo-inverse of a singular H_BB)
        md.ok = False
        return md
    cdef double[:, ::1] AB = mb.AB
    # the Cholesky route where the model reads most of J's columns (a confirming model of every unit):
    # there A H_BI for every candidate cost most of the model; on a screened pool it stays cheaper
    md.lazy = chol and m > 1 and not P.quad and not few and ni > 0 and nb > 0
    if md.lazy:  # Y = L^-1 H_BI = (W J_B L^-T)' J_I by its rows, H_IB A H_BI = Y_I' Y_I
        _chol_rows(P, md, mb, Mw, ccJ, few)
    else:
        _matmul(A, HBI, AB)
    cdef double[:, ::1] sigma = mb.sigma
    cdef double[::1] v1 = mb.v1, gain = mb.gain, removal = mb.removal
    if m == 1:
        for c in range(nI):
            sigma[c, 0] = HII[c, 0]
        for a in range(nb):  # (row by row: contiguous reads, the same sums in the same order)
            for c in range(nI):
                sigma[c, 0] -= HBI[a, c] * AB[a, c]
        for c in range(nI):
            s = sigma[c, 0] + JITTER * max(fabs(HII[c, 0]), 1e-300)
            sigma[c, 0] = s
            v1[c] = g[Icols[c]] / s
            gn = 0.5 * g[Icols[c]] * v1[c]
            gain[c] = max(gn, 0.0) if isfinite(gn) else 0.0
        for a in range(nJ):
            removal[a] = 0.5 * x[B[a]] * x[B[a]] / A[a, a]
    else:
        _group_singles(md, x, g, A, AB, sigma, v1, gain, removal, nJ)
    md.AB = AB
    take = min(nI, max(candidates, 1))
    widest = nI if P.quad else min(nI, 4 * take)
    md.gain, md.removal, md.sigma, md.v1, md.A = gain, removal, sigma, v1, A
    # the candidates in order of gain and their pairs, as far as the widening reads them: the first
    # take + 1 (when the model's best is among them, no full sort or pair table is made), else all
    need = min(widest, take + 1)
    order = _top(gain, need, True, P)
    _ab_units(md, order)
    cdef double[:, ::1] every = _pairs(md, x, nJ, m, order)
    while nJ > 0:
        best = INFINITY if take > 0 else 0.0
        for a in range(nJ):
            for c in range(take):
                best = min(best, every[a, c])
        if take >= widest or -gain[order[take]] >= best:
            break
        take = min(widest, 2 * take)
        if take + 1 > order.shape[0] and order.shape[0] < widest:  # widened past the first: all at once
            order = _top(gain, widest, True, P)
            _ab_units(md, order)
            every = _pairs(md, x, nJ, m, order)
    md.cand = order[:take]  # (the arena's, as every array of the model: read within the call)
    md.delta = _dnew(P, nJ * take)  # (flat: a row of take per selected unit)
    for a in range(nJ):
        for c in range(take):
            md.delta[a * take + c] = every[a, c]
    md.ok = True
    return md


cdef void _chol_rows(Problem P, Model md, ModelBuffers mb, double[:, ::1] Mw, ClassCols ccJ, bint few):
    """The Cholesky route of a group model on a non-quadratic loss (H_BB = L L' factored): Z = W J_B L^-T
    (one triangular solve of the n rows of J), the rows of Y = L^-1 H_BI = Z' J_I for the candidates'
    columns by the same products that formed H_BI (by class on the softmax), and each candidate's
    Schur complement sigma_I = H_II - Y_I' Y_I from them (each entry summed in the order of B).
    A H_BI = L^-T Y is left to :func:`_ab_units`, for the candidates the pair values read."""
    cdef Py_ssize_t nb = md.B.shape[0], ni = md.Icols.shape[0], m = P.m, nI = ni // m, u, a, b, r, t
    cdef int tn = <int> nb, nk = <int> P.n
    cdef double one_ = 1.0, s
    cdef double* ya
    cdef double* yb
    cdef ClassCols ccS
    if mb.Z is None:
        mb.Z = np.empty((P.n, nb))
    cdef double[:, ::1] Z = mb.Z
    Z[:, :] = Mw
    if P.n > 0:  # (Fortran view: Z' = L^-1 Mw', L' the upper triangle of L's C-order lower one)
        dtrsm(b"L", b"U", b"T", b"N", &tn, &nk, &one_, &md.L[0, 0], &tn, &Z[0, 0], &tn)
    cdef Py_ssize_t[::1] yrow = mb.yrow
    if ccJ is not None and not few:  # every column of J by class: a row per column in ccJ's order
        if mb.Yr is None:
            mb.Yr = np.empty((P.D, nb))
        _class_atb(ccJ, Z, mb.Yr)
        for t in range(ni):
            yrow[t] = ccJ.inv[md.Icols[t]]
    elif ccJ is not None:  # the pool's columns by class (a row per column, in ccS's order)
        if mb.cc is None:
            mb.cc = _class_arrays(ni, P.wc.shape[0], P.classes, ni, nb)
        ccS = _class_cols(P, md.Icols, mb.cc)
        mb.Yr = ccS.Hp
        _class_atb(ccS, Z, mb.Yr)
        for t in range(ni):
            yrow[t] = ccS.inv[t]
    elif few:  # the pool's columns gathered
        mb.Yr = np.empty((ni, nb))
        _atb(_columns(P, md.Icols), Z, mb.Yr)
        for t in range(ni):
            yrow[t] = t
    else:
        mb.Yr = np.empty((P.D, nb))
        _atb(P.J, Z, mb.Yr)
        for t in range(ni):
            yrow[t] = md.Icols[t]
    cdef double[:, ::1] Yr = mb.Yr
    cdef double[:, ::1] sigma = mb.sigma, HII = md.HII
    for u in range(nI):
        for a in range(m):
            ya = &Yr[yrow[u * m + a], 0]
            for b in range(a, m):
                yb = &Yr[yrow[u * m + b], 0]
                s = HII[u * m + a, b]
                for r in range(nb):
                    s -= ya[r] * yb[r]
                sigma[u * m + a, b] = s
                sigma[u * m + b, a] = s
    md.Yr, md.yrow, md.abdone = Yr, yrow, mb.abdone
    md.abdone[:] = 0


cdef void _hbb_rows(Problem P, double[:, ::1] Mw, double[:, ::1] JX, ClassCols ccJ, Py_ssize_t[::1] B,
                    double[:, ::1] HBB):
    """H_BB (with the ridge) = J_B' W J_B from the weighted columns Mw = W J_B, by class where J is
    (the products of :func:`_class_atb` on B's columns alone)."""
    cdef Py_ssize_t nb = B.shape[0], a, t
    cdef ClassCols cc
    cdef double[:, ::1] R
    if nb == 0:
        return
    if ccJ is not None:
        cc = _class_cols(P, B, _class_arrays(nb, P.wc.shape[0], P.classes, nb, nb))
        _class_atb(cc, Mw, cc.Hp)
        for a in range(nb):
            for t in range(nb):
                HBB[a, t] = cc.Hp[cc.inv[t], a]
    else:
        R = np.empty((nb, nb))
        _atb(Mw, JX, R)
        HBB[:, :] = R
    for a in range(nb):
        HBB[a, a] += P.rd[B[a]]


cdef Py_ssize_t[::1] _pending(Py_ssize_t[::1] us, Py_ssize_t[::1] done):
    """The units of ``us`` whose lazy columns are not formed yet (``done[u]`` 0), in order, now
    marked formed: the bookkeeping of :func:`_hbi_units` and :func:`_ab_units`."""
    cdef Py_ssize_t q, u, cnt = 0
    for q in range(us.shape[0]):
        if not done[us[q]]:
            cnt += 1
    cdef Py_ssize_t[::1] which = np.empty(cnt, dtype=np.intp)
    cnt = 0
    for q in range(us.shape[0]):
        u = us[q]
        if not done[u]:
            done[u] = 1
            which[cnt] = u
            cnt += 1
    return which[:cnt]  # (a unit listed twice is formed once)


cdef void _hbi_units(Model md, Py_ssize_t[::1] us):
    """The columns of H_BI = J_B' W J_I of the candidates ``us`` (indices into units_out) not formed
    yet (a model whose H_BI is formed on demand: the warm starts read those of the entering units), by
    the products that formed H_BB (by class where J is)."""
    if not md.hbi_lazy:
        return
    cdef Problem P = md.P
    cdef Py_ssize_t m = md.HII.shape[1], nb = md.B.shape[0], u, j, a, cnt, t
    if nb == 0:
        return
    cdef Py_ssize_t[::1] which = _pending(us, md.hbidone)
    cnt = which.shape[0]
    if cnt == 0:
        return
    cdef Py_ssize_t[::1] cols = np.empty(cnt * m, dtype=np.intp)
    for t in range(cnt):
        for j in range(m):
            cols[t * m + j] = md.Icols[which[t] * m + j]
    cdef ClassCols cc
    cdef double[:, ::1] R
    if md.ccJ is not None:
        cc = _class_cols(P, cols, _class_arrays(cnt * m, P.wc.shape[0], P.classes, cnt * m, nb))
        _class_atb(cc, md.Mw, cc.Hp)
        for t in range(cnt):
            u = which[t]
            for j in range(m):
                for a in range(nb):
                    md.HBI[a, u * m + j] = cc.Hp[cc.inv[t * m + j], a]
    else:
        R = np.empty((nb, cnt * m))
        _atb(md.Mw, _columns(P, cols), R)
        for t in range(cnt):
            u = which[t]
            for j in range(m):
                for a in range(nb):
                    md.HBI[a, u * m + j] = R[a, t * m + j]


cdef void _ab_units(Model md, Py_ssize_t[::1] cols):
    """The columns of A H_BI = L^-T Y of the candidates ``cols`` (indices into units_out) not formed
    yet (the Cholesky route: :func:`_chol_rows`), one triangular solve for all of them."""
    if not md.lazy:
        return
    cdef Py_ssize_t m = md.HII.shape[1], nb = md.B.shape[0], u, j, r, cnt, t
    cdef double* src
    cdef Py_ssize_t[::1] which = _pending(cols, md.abdone)
    cnt = which.shape[0]
    if cnt == 0:
        return
    cdef double[:, ::1] G = np.empty((cnt * m, nb))
    for t in range(cnt):
        u = which[t]
        for j in range(m):
            src = &md.Yr[md.yrow[u * m + j], 0]
            for r in range(nb):
                G[t * m + j, r] = src[r]
    cdef int tn = <int> nb, nc = <int> (cnt * m)
    cdef double one_ = 1.0
    dtrsm(b"L", b"U", b"N", b"N", &tn, &nc, &one_, &md.L[0, 0], &tn, &G[0, 0], &tn)  # (L' X = Y_c)
    for t in range(cnt):
        u = which[t]
        for j in range(m):
            for r in range(nb):
                md.AB[r, u * m + j] = G[t * m + j, r]


cdef void _group_singles(Model md, double[::1] x, double[::1] g, double[:, ::1] A, double[:, ::1] AB,
                         double[:, ::1] sigma, double[::1] v1, double[::1] gain,
                         double[::1] removal, Py_ssize_t nJ):
    """The single-swap pieces of units of m > 1 coordinates (SwapModel._single_swaps): each
    candidate's Schur complement sigma_I = H_II - H_IB A H_BI (symmetrized, with the jitter),
    v_I = sigma_I^-1 g_I and gain 0.5 g_I' v_I; each selected unit's removal 0.5 x_J' (A_JJ)^-1 x_J.
    (sigma_I^-1 itself is formed by :func:`_pairs`, for the candidates it scores only.)"""
    cdef Py_ssize_t m = md.HII.shape[1], nI = md.units_out.shape[0], nb = md.B.shape[0], u, a, b, r
    cdef double s, t, gn
    cdef bint ok
    cdef double[MAXU] e_, y_
    cdef double[MAXU2] LU
    cdef Py_ssize_t[MAXU] piv
    cdef double[:, ::1] HII = md.HII, HBI = md.HBI
    cdef Py_ssize_t c, ni = nI * m
    cdef double h
    cdef double* hr
    cdef double* abr
    cdef double* sg = &sigma[0, 0] if ni > 0 else NULL  # (sigma: ni rows of m, contiguous)
    if md.lazy:  # (sigma holds H_II - Y_I' Y_I already: _chol_rows)
        pass
    else:
        for c in range(ni):
            for b in range(m):
                sigma[c, b] = HII[c, b]
        for r in range(nb):  # (row by row of H_BI and A H_BI: contiguous reads, the same sums in the same order)
            hr = &HBI[r, 0]
            abr = &AB[r, 0]
            for u in range(nI):
                for a in range(m):
                    h = hr[u * m + a]
                    for b in range(m):
                        sg[(u * m + a) * m + b] -= h * abr[u * m + b]
    for u in range(nI):
        t = 0.0
        for a in range(m):
            t += fabs(HII[u * m + a, a])
        t = JITTER * max(t / m, 1e-300)
        for a in range(m):
            for b in range(a + 1, m):
                s = 0.5 * (sigma[u * m + a, b] + sigma[u * m + b, a])
                sigma[u * m + a, b] = s
                sigma[u * m + b, a] = s
            sigma[u * m + a, a] += t
        for a in range(m):
            e_[a] = g[md.Icols[u * m + a]]
        ok = _small_factor(sigma, u * m, m, LU, piv)
        if ok:
            _small_lu_solve(LU, piv, m, e_, y_)
        gn = 0.0
        for a in range(m):
            v1[u * m + a] = y_[a] if ok else NAN
            gn += e_[a] * v1[u * m + a]
        gn *= 0.5
        gain[u] = max(gn, 0.0) if isfinite(gn) else 0.0
    cdef double[:, ::1] AJJ = np.empty((m, m))
    for u in range(nJ):
        for a in range(m):
            for b in range(m):
                AJJ[a, b] = A[u * m + a, u * m + b]
            e_[a] = x[md.B[u * m + a]]
        ok = _small_solve(AJJ, 0, m, e_, y_)
        s = 0.0
        for a in range(m):
            s += e_[a] * y_[a]
        removal[u] = 0.5 * s if ok else NAN


cdef double[:, ::1] _pairs(Model md, double[::1] x, Py_ssize_t nJ, Py_ssize_t m, Py_ssize_t[::1] cols):
    """delta[J, I]: the model's change of f when J leaves and I enters (SwapModel._pairs): with
    K = A_JJ + (A H_BI)_JI sigma_I^-1 (A H_BI)_JI' and e = x_J + (A H_BI)_JI sigma_I^-1 g_I,
    -gain[I] + e' K^-1 e / 2."""
    cdef Py_ssize_t nc = cols.shape[0], a, q, c, i, j, r
    cdef double[:, ::1] out = np.empty((nJ, nc)), AB = md.AB, A = md.A
    cdef double xa, K, e, d, t
    cdef double[MAXU] e_, y_
    cdef Py_ssize_t b_
    if m == 1:
        for a in range(nJ):
            xa = x[md.B[a]]
            for q in range(nc):
                c = cols[q]
                K = A[a, a] + AB[a, c] * AB[a, c] / md.sigma[c, 0]
                e = xa + AB[a, c] * md.v1[c]
                d = -md.gain[c] + 0.5 * e * e / K
                out[a, q] = d if isfinite(d) else INFINITY
        return out
    # (groups: each pair's m x m blocks in C arrays, AB's and A's rows read through pointers: the
    # same sums in the same order as through memoryviews, a third of the instructions)
    cdef double Kb[MAXU2]
    cdef double T[MAXU2]
    cdef double Sq[MAXU2]  # (a candidate's sigma_I^-1, from the factorization of its block: only candidates')
    cdef double W_[MAXU2]
    cdef double[MAXU2] LU
    cdef Py_ssize_t[MAXU] piv
    cdef Py_ssize_t[MAXU] piv2
    cdef bint ok
    cdef double* abr
    cdef double* abj
    cdef double* ar
    cdef double* v1 = &md.v1[0]
    for q in range(nc):
        c = cols[q] * m
        ok = _small_factor(md.sigma, c, m, LU, piv)
        for b_ in range(m):  # column b_ of sigma_I^-1 (symmetric: stored as row b_)
            for i in range(m):
                e_[i] = 1.0 if i == b_ else 0.0
            if ok:
                _small_lu_solve(LU, piv, m, e_, y_)
            for i in range(m):
                Sq[i * MAXU + b_] = y_[i] if ok else NAN
        for a in range(nJ):
            r = a * m
            for i in range(m):  # T = (A H_BI)_JI sigma_I^-1, e = x_J + (A H_BI)_JI v_I
                abr = &AB[r + i, c]
                t = x[md.B[r + i]]
                for j in range(m):
                    t += abr[j] * v1[c + j]
                e_[i] = t
                for j in range(m):
                    t = 0.0
                    for b_ in range(m):
                        t += abr[b_] * Sq[b_ * MAXU + j]
                    T[i * MAXU + j] = t
            for i in range(m):
                ar = &A[r + i, r]
                for j in range(m):
                    abj = &AB[r + j, c]
                    t = ar[j]
                    for b_ in range(m):
                        t += T[i * MAXU + b_] * abj[b_]
                    Kb[i * MAXU + j] = t
            if _small_factor_p(Kb, m, W_, piv2):
                _small_lu_solve(W_, piv2, m, e_, y_)
                d = 0.0
                for i in range(m):
                    d += e_[i] * y_[i]
                d = -md.gain[cols[q]] + 0.5 * d
            else:
                d = INFINITY
            out[a, q] = d if isfinite(d) else INFINITY
    return out


cdef tuple _ranked(Model md, Py_ssize_t limit):
    """The ``limit`` best swaps (unit out, unit in, predicted change), best first (SwapModel.swaps)."""
    cdef Py_ssize_t nc = md.cand.shape[0], r, m
    cdef double[::1] flat = md.delta
    cdef Problem P = md.P
    cdef Py_ssize_t[::1] order = _top(flat, limit, False, P)
    m = order.shape[0]
    cdef Py_ssize_t[::1] outs = _inew(P, m), ins = _inew(P, m)
    cdef double[::1] vals = _dnew(P, m)
    for r in range(m):
        outs[r] = md.units[order[r] // nc]
        ins[r] = md.units_out[md.cand[order[r] % nc]]
        vals[r] = flat[order[r]]
    return outs, ins, vals


cdef tuple _disjoint(Problem P, Py_ssize_t[::1] outs, Py_ssize_t[::1] ins, double[::1] vals, Py_ssize_t limit,
                     bint any_sign):
    """The best swaps with predicted decrease (any change with ``any_sign``), no unit twice, at most
    ``limit`` (solvers/auto._disjoint)."""
    cdef Py_ssize_t[::1] po = _inew(P, max(limit, 1)), pi = _inew(P, max(limit, 1))
    cdef Py_ssize_t q = 0, r, s
    cdef bint used
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
    return po[:q], pi[:q]


cdef Py_ssize_t[::1] _swapped(Problem P, Py_ssize_t[::1] units, Py_ssize_t[::1] po, Py_ssize_t[::1] pi,
                              Py_ssize_t c):
    """The units with the first c pairs exchanged (sorted), in the call's arena."""
    cdef Py_ssize_t[::1] out = _icopy(P, units)
    cdef Py_ssize_t s, a
    for s in range(c):
        for a in range(out.shape[0]):
            if out[a] == po[s]:
                out[a] = pi[s]
                break
    _sort_in_place(out)
    return out


cdef double[::1] _warm(Problem P, Model md, double[::1] x, double[::1] g, Py_ssize_t[::1] po, Py_ssize_t[::1] pi,
                       Py_ssize_t c):
    """The model's minimizer on the support with the units po[:c] removed and pi[:c] added (the
    Hessian between two entering units taken as zero), as a flat point: the warm start of the exact
    solve (SwapModel.warm)."""
    cdef Py_ssize_t nb = md.B.shape[0], nJ = md.units.shape[0], um = P.m, s, a, q, nk, m, ne, j0, i0
    ne = c * um
    cdef Py_ssize_t[::1] out_rows = _inew(P, ne), in_cols = _inew(P, ne)
    for s in range(c):
        for a in range(nJ):
            if md.units[a] == po[s]:
                for q in range(um):
                    out_rows[s * um + q] = a * um + q
        for a in range(md.units_out.shape[0]):
            if md.units_out[a] == pi[s]:
                for q in range(um):
                    in_cols[s * um + q] = a * um + q
    cdef Py_ssize_t[::1] ent
    if md.hbi_lazy:  # (the entering units' columns of H_BI)
        ent = _inew(P, c)
        for s in range(c):
            ent[s] = in_cols[s * um] // um
        _hbi_units(md, ent)
    cdef Py_ssize_t[::1] keep = _inew(P, nb)
    nk = 0
    for a in range(nb):  # the rows of B that stay
        j0 = 0
        for s in range(ne):
            if out_rows[s] == a:
                j0 = 1
                break
        if not j0:
            keep[nk] = a
            nk += 1
    keep = keep[:nk]
    m = nk + ne
    cdef Workspace ws = _workspace(P, m)  # (the exact solve that follows takes the same size's scratch after this)
    cdef double[:, ::1] H = ws.H, L = ws.L
    cdef double[::1] rhs = ws.g, step = ws.step
    cdef double t, tr = 0.0, lam
    H[:, :] = 0.0
    for a in range(nk):
        for q in range(nk):
            H[a, q] = md.HBB[keep[a], keep[q]]
        for s in range(ne):
            H[a, nk + s] = md.HBI[keep[a], in_cols[s]]
            H[nk + s, a] = H[a, nk + s]
    for s in range(ne):  # each entering unit's diagonal block
        i0 = (s // um) * um
        for q in range(um):
            H[nk + s, nk + i0 + q] = md.HII[in_cols[s], q]
    for a in range(nk):
        t = g[md.B[keep[a]]]
        for s in range(ne):
            t -= md.HBB[keep[a], out_rows[s]] * x[md.B[out_rows[s]]]
        rhs[a] = t
    for s in range(ne):
        t = g[md.Icols[in_cols[s]]]
        for q in range(ne):
            t -= md.HBI[out_rows[q], in_cols[s]] * x[md.B[out_rows[q]]]
        rhs[nk + s] = t
    for a in range(m):
        tr += H[a, a]
    lam = 1e-10 * max(tr / max(m, 1), 1e-300)
    for a in range(m):
        H[a, a] += lam
    cdef int n_ = <int> m, one_ = 1, info_ = 0
    cdef int[::1] ipiv_
    if _factor(H, L, 0.0):
        _fsolve(L, rhs, step)
        for a in range(m):
            step[a] = -step[a]
    else:
        # indefinite (several entering units, their cross blocks zero): LU with partial pivoting
        # (gesv, np.linalg.solve's) of the same jittered matrix, a fifth of an SVD's cost; least
        # squares only where that is singular
        L[:, :] = H
        for a in range(m):
            step[a] = rhs[a]
        ipiv_ = np.empty(m, dtype=np.intc)
        dgesv(&n_, &one_, &L[0, 0], &n_, &ipiv_[0], &step[0], &n_, &info_)  # (H symmetric: its Fortran view)
        if info_ == 0:
            for a in range(m):
                step[a] = -step[a]
        else:
            step = -np.linalg.lstsq(np.asarray(H), np.asarray(rhs), rcond=None)[0]
    cdef double[::1] w = _dcopy(P, x)
    for s in range(ne):
        w[md.B[out_rows[s]]] = 0.0
    for a in range(nk):
        w[md.B[keep[a]]] += step[a]
    for s in range(ne):
        w[md.Icols[in_cols[s]]] = step[nk + s]
    return w


# ---------------------------------------------------------------------- auto's search


cdef Sol _check(Problem P, Model md, double[::1] x, double[::1] g, Py_ssize_t[::1] new, Py_ssize_t[::1] po,
                Py_ssize_t[::1] pi, Py_ssize_t c, double bar, long[::1] stats, list rejected):
    """The exact restricted solve of the support ``new`` (from the model's minimizer on a
    non-quadratic objective): (x, f, g, improved, ok); a support already rejected at this f is not
    solved again, one that fails is added to ``rejected``."""
    for r in rejected:
        if _same(new, r):
            return _sol(x, INFINITY, g, False, True)
    cdef double[::1] x0, xn, gn
    cdef double fn
    cdef bint ok
    cdef Sol sol_
    if P.quad:
        x0 = x  # a direct solve: the start is not used
    else:
        x0 = _warm(P, md, x, g, po, pi, c)
    sol_ = _solve_on(P, _positions(P, new), x0, bar, stats, bar)
    xn, fn, gn, ok = sol_.x, sol_.f, sol_.g, sol_.ok
    stats[5] += 1  # ST_EXACT
    if not ok:
        return _sol(xn, fn, gn, False, False)
    if isfinite(fn) and fn < bar:
        return _sol(xn, fn, gn, True, True)
    rejected.append(new)
    return _sol(xn, fn, gn, False, True)


cdef bint _seen(list tried, Py_ssize_t[::1] new):
    for t in tried:
        if _same(new, t):
            return True
    return False


cdef Sol _stepped(double[::1] x, double f, double[::1] g, Py_ssize_t[::1] units, bint accepted, bint ok):
    cdef Sol r = _sol(x, f, g, accepted, ok)
    r.units = units
    return r


cdef Sol _step(Problem P, Model md, double[::1] x, double f, double[::1] g, Py_ssize_t exchange,
               Py_ssize_t tries, double min_dec, long[::1] stats, list rejected):
    """One step of the search (solvers/auto.Auto._step without linear constraints): the best
    disjoint swaps together, halved until a set lowers f; the next ``tries`` single swaps; then
    several swaps at once regardless of their single predictions (the best disjoint pairs, then
    ABESS's smallest removals for the largest gains). Returns (x, f, g, units, accepted, ok)."""
    cdef Py_ssize_t[::1] outs, ins, po, pi, new, po1, pi1, ro, gi, spo, spi, bpo, bpi
    cdef double[::1] vals
    cdef double thr, bar
    cdef Py_ssize_t c, r, extra = 0, nk, m, s, q
    cdef Sol ch
    outs, ins, vals = _ranked(md, 4 * exchange + tries + 16)
    if P.quad:  # the model is f: a swap it rates >= 0 cannot lower f
        thr = -min_dec * max(1.0, fabs(f))
        q = 0
        for r in range(vals.shape[0]):
            if vals[r] < thr:
                outs[q], ins[q], vals[q] = outs[r], ins[r], vals[r]
                q += 1
        outs, ins, vals = outs[:q], ins[:q], vals[:q]
    bar = f - min_dec * max(1.0, fabs(f))
    po, pi = _disjoint(P, outs, ins, vals, exchange, False)
    tried = []
    c = po.shape[0]
    while c >= 1:
        new = _swapped(P, md.units, po, pi, c)
        tried.append(new)
        ch = _check(P, md, x, g, new, po, pi, c, bar, stats, rejected)
        if not ch.ok:
            return _stepped(x, f, g, md.units, False, False)
        if ch.better:
            return _stepped(ch.x, ch.f, ch.g, new, True, True)
        c //= 2
    for r in range(outs.shape[0]):
        if extra >= tries:
            break
        po1 = outs[r : r + 1]  # (views: _swapped and _check only read them)
        pi1 = ins[r : r + 1]
        new = _swapped(P, md.units, po1, pi1, 1)
        if _seen(tried, new):
            continue
        tried.append(new)
        extra += 1
        ch = _check(P, md, x, g, new, po1, pi1, 1, bar, stats, rejected)
        if not ch.ok:
            return _stepped(x, f, g, md.units, False, False)
        if ch.better:
            stats[6] += 1  # ST_TRIES
            return _stepped(ch.x, ch.f, ch.g, new, True, True)
    # several at once: the joint model's best disjoint pairs, then ABESS's sacrifices
    o2, i2, v2 = _ranked(md, 4 * exchange + 16)
    jpo, jpi = _disjoint(P, o2, i2, v2, exchange, True)
    nk = md.units.shape[0]
    ro = _top(md.removal, min(exchange, nk), False, P)
    gi = _top(md.gain, min(ro.shape[0], md.units_out.shape[0]), True, P)
    m = min(ro.shape[0], gi.shape[0])
    spo = _inew(P, m)
    spi = _inew(P, m)
    for s in range(m):
        spo[s] = md.units[ro[s]]
        spi[s] = md.units_out[gi[s]]
    for which in range(2):
        bpo = jpo if which == 0 else spo
        bpi = jpi if which == 0 else spi
        c = bpo.shape[0]
        while c >= 2:
            new = _swapped(P, md.units, bpo, bpi, c)
            if not _seen(tried, new):
                tried.append(new)
                ch = _check(P, md, x, g, new, bpo, bpi, c, bar, stats, rejected)
                if not ch.ok:
                    return _stepped(x, f, g, md.units, False, False)
                if ch.better:
                    stats[7] += 1  # ST_MULTI
                    return _stepped(ch.x, ch.f, ch.g, new, True, True)
            c //= 2
    return _stepped(x, f, g, md.units, False, True)


cdef tuple _search(Problem P, double[::1] x, double f, double[::1] g, Py_ssize_t[::1] units, double[::1] opts,
                   long[::1] stats, list flog):
    """The swap search of solvers/auto.Auto._search_from from the restricted minimizer x on the
    units ``units``: (x, f, units, status, steps, ok). ``opts``: exchange, tries, candidates, pool,
    max_iter, min_decrease."""
    cdef Py_ssize_t exchange = <Py_ssize_t> opts[0], tries = <Py_ssize_t> opts[1], candidates = <Py_ssize_t> opts[2]
    cdef Py_ssize_t pool = <Py_ssize_t> opts[3], max_iter = <Py_ssize_t> opts[4]
    cdef double min_dec = opts[5]
    cdef Py_ssize_t nunits = P.members.shape[0], pl
    cdef int status = MAX_ITER, steps = 0, pass_
    cdef bint accepted, ok
    cdef Model md
    cdef Sol st_
    while steps < max_iter:
        rejected = []
        accepted = False
        for pass_ in range(2):
            pl = pool if pass_ == 0 else nunits * P.m  # (the pool counts coordinates: every unit)
            md = _swap_model(P, x, g, units, pl, candidates)
            stats[4] += 1  # ST_MODELS
            if pass_ == 1:
                stats[8] += 1  # ST_FULL
            if not md.ok:
                return x, f, units, FALLBACK, steps, False
            stats[9] += md.units_out.shape[0]  # ST_UNITS: the units outside the support that the model read
            st_ = _step(P, md, x, f, g, exchange, tries, min_dec, stats, rejected)
            accepted, ok = st_.better, st_.ok
            if not ok:
                return x, f, units, FALLBACK, steps, False
            if accepted or md.units_out.shape[0] + units.shape[0] >= nunits:
                break
        if not accepted:
            status = CONVERGED
            break
        x, f, g, units = st_.x, st_.f, st_.g, st_.units
        steps += 1
        flog.append(f)
    return x, f, units, status, steps, True


def auto_run(Problem P, Py_ssize_t k, starts, x_inside, x_init, opts, stats, runs):
    """``auto`` from each start in ``starts`` (START_GRAHTP: GraHTP from ``x_inside``; START_SCREEN:
    the free coordinates fitted at ``x_inside``, then the k units of largest model gain;
    START_INIT: the point ``x_init``, already cut to k units), each followed by the swap search;
    the lowest end point kept (the first of equal ones).

    ``opts``: exchange, tries, candidates, pool, max_iter, min_decrease, GraHTP's max_iter and tol.
    ``stats`` (starts x N_STATS, int64) and ``runs`` (starts x 5: start objective, objective,
    swaps, iterations, status; NaN objectives for a start that failed) are filled per start.
    Returns (x, f, status, iterations, best start index or -1, the objectives the search logged:
    each start's, then every accepted swap); status FALLBACK when some step met a case for the
    general path."""
    cdef double[::1] o = _auto_opts(k, opts)
    flog = []
    _arena_reset(P)
    return _auto(P, k, starts, np.ascontiguousarray(x_inside, dtype=float), np.ascontiguousarray(x_init, dtype=float),
                 o, stats, runs, flog)


def path_run(Problem P, ks, x_init, opts, double run_away_sq, double[:, ::1] X):
    """A warm-started path of ``auto``: at each bound ``ks[j]`` in turn the run of :func:`auto_run`
    from START_INIT at the previous bound's answer (``x_init`` at the first), exactly as that many
    calls of auto_run would compute it (its arena reset per bound, the same steps), written to row j
    of ``X`` (len(ks) x D). Stops before the first bound whose run the general path must take
    (FALLBACK), whose objective is not finite or whose answer has x'x > ``run_away_sq`` (the
    run-away test of solvers/base.Solver._solve); returns the number of rows written. A fold's path
    of cross-validation in one call (solvers/lean.lean_path), where Python's cost per bound would
    exceed the arithmetic on small problems."""
    cdef long[::1] kv = np.ascontiguousarray(ks, dtype=np.int64)
    cdef Py_ssize_t j, a, done = 0
    cdef double xx
    cdef double[::1] o, xi = np.ascontiguousarray(x_init, dtype=float), row
    if X.shape[0] < kv.shape[0] or X.shape[1] != P.D or xi.shape[0] != P.D:
        raise ValueError(f"path_run: X must be at least {kv.shape[0]} x {P.D} and x_init of length {P.D}")
    stats = np.zeros((1, N_STATS), dtype=np.int64)
    runs = np.empty((1, 5))
    starts = [START_INIT]
    for j in range(kv.shape[0]):
        o = _auto_opts(kv[j], opts)
        _arena_reset(P)
        x, f, status, its, best, flog = _auto(P, kv[j], starts, xi, xi, o, stats, runs, [])
        if status == FALLBACK or not isfinite(f):
            break
        row = x
        xx = 0.0
        for a in range(P.D):
            xx += row[a] * row[a]
        if xx > run_away_sq:
            break
        X[j, :] = row
        xi = X[j]
        done += 1
    return done


cdef double[::1] _auto_opts(Py_ssize_t k, opts):
    cdef double[::1] o = np.ascontiguousarray(opts, dtype=float)
    if k < 1 or o[0] < 1 or o[2] < 1 or o[3] < 1:  # (solve answers k = 0 itself; the options' lower bounds)
        raise ValueError(f"auto_run takes k >= 1 and exchange, candidates, pool >= 1; got k={k}, opts={list(o)}")
    return o


cdef tuple _auto(Problem P, Py_ssize_t k, starts, double[::1] xin, double[::1] xi, double[::1] o, long[:, ::1] sv,
                 double[:, ::1] rv, list flog):
    """auto_run's body in the call's arena (reset by the caller)."""
    cdef Py_ssize_t pool = <Py_ssize_t> o[3], candidates = <Py_ssize_t> o[2], s
    cdef int g_max_iter = <int> o[6]
    cdef double g_tol = o[7], f, bf = INFINITY
    cdef int status, its, best = -1, bstatus = MAX_ITER, bits = 0, steps, how
    cdef bint ok
    cdef double[::1] x, g, bx = _dnew(P, P.D)
    bx[:] = 0.0
    cdef Py_ssize_t[::1] units, add, grown
    cdef Py_ssize_t a
    cdef Model md
    cdef Sol sol_
    for s in range(len(starts)):
        rv[s, 0] = NAN
        rv[s, 1] = NAN
        how = starts[s]
        if how == START_GRAHTP:
            x, f, g, status, its = _grahtp(P, k, xin, g_max_iter, g_tol, sv[s])
            if status == FALLBACK:
                return _out(bx), bf, FALLBACK, 0, -1, flog
            if status == DIVERGED or not isfinite(f):
                continue
        elif how == START_SCREEN:
            sol_ = _solve_on(P, np.empty(0, dtype=np.intp), xin, NAN, sv[s])
            x, f, g, ok = sol_.x, sol_.f, sol_.g, sol_.ok
            if not ok:
                return _out(bx), bf, FALLBACK, 0, -1, flog
            its = 1
        else:
            x = _dcopy(P, xi)
            its = 1
        units = _units_at(P, x)
        sol_ = _solve_on(P, _positions(P, units), x, NAN, sv[s])
        x, f, g, ok = sol_.x, sol_.f, sol_.g, sol_.ok
        if not ok:
            return _out(bx), bf, FALLBACK, 0, -1, flog
        if not isfinite(f):
            continue
        if units.shape[0] < k:  # the start used less than the budget: the units of largest gain added
            md = _swap_model(P, x, g, units, pool, candidates)
            if not md.ok:
                return _out(bx), bf, FALLBACK, 0, -1, flog
            add = _top(md.gain, k - units.shape[0], True, P)
            grown = _inew(P, units.shape[0] + add.shape[0])
            for a in range(units.shape[0]):
                grown[a] = units[a]
            for a in range(add.shape[0]):
                grown[units.shape[0] + a] = md.units_out[add[a]]
            _sort_in_place(grown)
            units = grown
            sol_ = _solve_on(P, _positions(P, units), x, NAN, sv[s])
            x, f, g, ok = sol_.x, sol_.f, sol_.g, sol_.ok
            if not ok:
                return _out(bx), bf, FALLBACK, 0, -1, flog
        rv[s, 0] = f
        flog.append(f)
        x, f, units, status, steps, ok = _search(P, x, f, g, units, o, sv[s], flog)
        if not ok:
            return _out(bx), bf, FALLBACK, 0, -1, flog
        rv[s, 1] = f
        rv[s, 2] = steps
        rv[s, 3] = its + steps
        rv[s, 4] = status
        if best < 0 or f < bf:
            best, bx, bf, bstatus, bits = s, x, f, status, its + steps
    if best < 0:
        return _out(bx), bf, FALLBACK, 0, -1, flog
    return _out(bx), bf, bstatus, bits, best, flog


# ---------------------------------------------------------------------- ARHT's restricted Newton solves

cdef extern from *:
    """
    /* ARHT's Hessians (the Newton loop's _renew): G += X diag(w) X' on the lower triangle (C order) of the
       nb x nb matrix G, X the nb rows of n samples (row stride ld). Tiles of 2 x 4 entries of G, each
       summed over the samples in four lanes (GCC's and Clang's vector types; plain loops elsewhere),
       the lanes added at the end; blocks of 256 samples, so a block of
       the rows stays in cache while every tile reads it. A tile at the edge reads its last row or
       column again (clamped) and stores only the entries that exist; entries above the diagonal that
       a tile across it computes are left to the caller's mirror. */
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
    #define LEAN_GRAM_CLONES __attribute__((target_clones("fma", "default")))
    #else
    #define LEAN_GRAM_CLONES
    #endif
    #if defined(__GNUC__) || defined(__clang__)
    typedef double lean_v4 __attribute__((vector_size(32)));
    /* (macros, not functions: a vector returned by a function outside the clones changes the ABI) */
    #define LEAN_LOAD4(v, p) memcpy(&(v), (p), sizeof(v))
    #define LEAN_LANES(v) (((v)[0] + (v)[1]) + ((v)[2] + (v)[3]))
    #endif
    /* a product kept apart from the sum it enters (no contraction into an FMA): an empty asm that
       takes and gives the value in a floating-point register (x86 and AArch64 name one "x") */
    #if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__) || defined(__aarch64__))
    #define LEAN_ROUNDED(p) __asm__("" : "+x"(p))
    #else
    #define LEAN_ROUNDED(p) ((void)0)
    #endif
    /* row i of X (leading dimension ld), the last of its nb rows standing in past the end (a tile at the edge) */
    #define LEAN_ROW(X, i, nb, ld) ((X) + ((i) < (nb) ? (i) : (nb) - 1) * (ld))
    LEAN_GRAM_CLONES
    static void lean_gram24(const double *LEAN_RESTRICT X, Py_ssize_t ld, const double *LEAN_RESTRICT w,
                            Py_ssize_t nb, Py_ssize_t n, double *LEAN_RESTRICT G) {
        const Py_ssize_t QB = 256;
        for (Py_ssize_t q0 = 0; q0 < n; q0 += QB) {
            Py_ssize_t q1 = q0 + QB < n ? q0 + QB : n, qv = q0 + ((q1 - q0) & ~(Py_ssize_t)3);
            for (Py_ssize_t i0 = 0; i0 < nb; i0 += 2) {
                const double *x0 = X + i0 * ld, *x1 = LEAN_ROW(X, i0 + 1, nb, ld);
                for (Py_ssize_t j0 = 0; j0 <= i0 + 1 && j0 < nb; j0 += 4) {
                    const double *y0 = X + j0 * ld, *y1 = LEAN_ROW(X, j0 + 1, nb, ld);
                    const double *y2 = LEAN_ROW(X, j0 + 2, nb, ld);
                    const double *y3 = LEAN_ROW(X, j0 + 3, nb, ld);
                    double acc[2][4];
    #if defined(__GNUC__) || defined(__clang__)
                    lean_v4 s00 = {0.0, 0.0, 0.0, 0.0}, s01 = s00, s02 = s00, s03 = s00;
                    lean_v4 s10 = s00, s11 = s00, s12 = s00, s13 = s00;
                    for (Py_ssize_t q = q0; q < qv; q += 4) {
                        lean_v4 wq, a0, a1, b;
                        LEAN_LOAD4(wq, w + q);
                        LEAN_LOAD4(a0, x0 + q);
                        LEAN_LOAD4(a1, x1 + q);
                        a0 *= wq;
                        a1 *= wq;
                        LEAN_LOAD4(b, y0 + q);
                        s00 += a0 * b; s10 += a1 * b;
                        LEAN_LOAD4(b, y1 + q);
                        s01 += a0 * b; s11 += a1 * b;
                        LEAN_LOAD4(b, y2 + q);
                        s02 += a0 * b; s12 += a1 * b;
                        LEAN_LOAD4(b, y3 + q);
                        s03 += a0 * b; s13 += a1 * b;
                    }
                    acc[0][0] = LEAN_LANES(s00); acc[0][1] = LEAN_LANES(s01);
                    acc[0][2] = LEAN_LANES(s02); acc[0][3] = LEAN_LANES(s03);
                    acc[1][0] = LEAN_LANES(s10); acc[1][1] = LEAN_LANES(s11);
                    acc[1][2] = LEAN_LANES(s12); acc[1][3] = LEAN_LANES(s13);
    #else
                    double lane[2][4][4] = {{{0.0}}};
                    for (Py_ssize_t q = q0; q < qv; q += 4)
                        for (int k = 0; k < 4; k++) {
                            double a0 = w[q + k] * x0[q + k], a1 = w[q + k] * x1[q + k];
                            lane[0][0][k] += a0 * y0[q + k]; lane[1][0][k] += a1 * y0[q + k];
                            lane[0][1][k] += a0 * y1[q + k]; lane[1][1][k] += a1 * y1[q + k];
                            lane[0][2][k] += a0 * y2[q + k]; lane[1][2][k] += a1 * y2[q + k];
                            lane[0][3][k] += a0 * y3[q + k]; lane[1][3][k] += a1 * y3[q + k];
                        }
                    for (int a = 0; a < 2; a++)
                        for (int c = 0; c < 4; c++)
                            acc[a][c] = (lane[a][c][0] + lane[a][c][1]) + (lane[a][c][2] + lane[a][c][3]);
    #endif
                    for (Py_ssize_t q = qv; q < q1; q++) {
                        double a0 = w[q] * x0[q], a1 = w[q] * x1[q];
                        acc[0][0] += a0 * y0[q]; acc[1][0] += a1 * y0[q];
                        acc[0][1] += a0 * y1[q]; acc[1][1] += a1 * y1[q];
                        acc[0][2] += a0 * y2[q]; acc[1][2] += a1 * y2[q];
                        acc[0][3] += a0 * y3[q]; acc[1][3] += a1 * y3[q];
                    }
                    for (int a = 0; a < 2 && i0 + a < nb; a++)
                        for (int c = 0; c < 4 && j0 + c < nb; c++)
                            G[(i0 + a) * nb + j0 + c] += acc[a][c];
                }
            }
        }
    }
    /* The same sums in 4 x 4 tiles (lean_gram4), for AVX-512 machines (x86-64-v4: 32 vector registers
       hold the 16 tiles' sums; AVX2's 16 would spill them, so the clones above keep 2 x 4): each row is
       loaded once per four entries instead of two, a formation at 31 x 5,822 about a third less time.
       Every entry is the same sum in the same order as lean_gram24's FMA clone (lanes over the samples
       of a block, the lanes added pairwise, the block added to G), with only the entries on or below
       the diagonal stored; lean_gram takes it where the CPU has AVX-512 (F, VL, BW, DQ, CD). */
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && __GNUC__ >= 12
    #define LEAN_GRAM4 1
    __attribute__((target("arch=x86-64-v4")))
    static void lean_gram4(const double *LEAN_RESTRICT X, Py_ssize_t ld, const double *LEAN_RESTRICT w,
                           Py_ssize_t nb, Py_ssize_t n, double *LEAN_RESTRICT G) {
        const Py_ssize_t QB = 256;
        for (Py_ssize_t q0 = 0; q0 < n; q0 += QB) {
            Py_ssize_t q1 = q0 + QB < n ? q0 + QB : n, qv = q0 + ((q1 - q0) & ~(Py_ssize_t)3);
            for (Py_ssize_t i0 = 0; i0 < nb; i0 += 4) {
                const double *x0 = X + i0 * ld, *x1 = LEAN_ROW(X, i0 + 1, nb, ld);
                const double *x2 = LEAN_ROW(X, i0 + 2, nb, ld);
                const double *x3 = LEAN_ROW(X, i0 + 3, nb, ld);
                for (Py_ssize_t j0 = 0; j0 <= i0; j0 += 4) {
                    const double *y0 = X + j0 * ld, *y1 = LEAN_ROW(X, j0 + 1, nb, ld);
                    const double *y2 = LEAN_ROW(X, j0 + 2, nb, ld);
                    const double *y3 = LEAN_ROW(X, j0 + 3, nb, ld);
                    double acc[4][4];
                    lean_v4 s[4][4];
                    for (int a = 0; a < 4; a++)
                        for (int c = 0; c < 4; c++)
                            s[a][c] = (lean_v4){0.0, 0.0, 0.0, 0.0};
                    for (Py_ssize_t q = q0; q < qv; q += 4) {
                        lean_v4 wq, a0, a1, a2, a3, b;
                        LEAN_LOAD4(wq, w + q);
                        LEAN_LOAD4(a0, x0 + q); LEAN_LOAD4(a1, x1 + q);
                        LEAN_LOAD4(a2, x2 + q); LEAN_LOAD4(a3, x3 + q);
                        a0 *= wq; a1 *= wq; a2 *= wq; a3 *= wq;
                        LEAN_LOAD4(b, y0 + q);
                        s[0][0] += a0 * b; s[1][0] += a1 * b; s[2][0] += a2 * b; s[3][0] += a3 * b;
                        LEAN_LOAD4(b, y1 + q);
                        s[0][1] += a0 * b; s[1][1] += a1 * b; s[2][1] += a2 * b; s[3][1] += a3 * b;
                        LEAN_LOAD4(b, y2 + q);
                        s[0][2] += a0 * b; s[1][2] += a1 * b; s[2][2] += a2 * b; s[3][2] += a3 * b;
                        LEAN_LOAD4(b, y3 + q);
                        s[0][3] += a0 * b; s[1][3] += a1 * b; s[2][3] += a2 * b; s[3][3] += a3 * b;
                    }
                    for (int a = 0; a < 4; a++)
                        for (int c = 0; c < 4; c++)
                            acc[a][c] = LEAN_LANES(s[a][c]);
                    /* the last 1 to 3 samples as lean_gram's compiled tail adds them (GCC: a pair's products
                       rounded before the addition, an odd last one fused), so that both give the same bits */
                    const double *xs[4] = {x0, x1, x2, x3}, *ys[4] = {y0, y1, y2, y3};
                    for (Py_ssize_t q = qv; q < q1; q++) {
                        int fused = q - qv >= ((q1 - qv) & ~(Py_ssize_t)1);
                        for (int a = 0; a < 4; a++) {
                            double aq = w[q] * xs[a][q];
                            for (int c = 0; c < 4; c++) {
                                if (fused) {
                                    acc[a][c] = __builtin_fma(aq, ys[c][q], acc[a][c]);
                                } else {
                                    double p = aq * ys[c][q];
                                    __asm__("" : "+x"(p));  /* (no contraction into an FMA) */
                                    acc[a][c] += p;
                                }
                            }
                        }
                    }
                    for (int a = 0; a < 4 && i0 + a < nb; a++)
                        for (int c = 0; c < 4 && j0 + c <= i0 + a; c++)
                            G[(i0 + a) * nb + j0 + c] += acc[a][c];
                }
            }
        }
    }
    #endif

    static void lean_gram(const double *X, Py_ssize_t ld, const double *w, Py_ssize_t nb, Py_ssize_t n, double *G) {
    #ifdef LEAN_GRAM4
        static int v4 = -1;
        if (v4 < 0) {
            __builtin_cpu_init();
            v4 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")
                 && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")
                 && __builtin_cpu_supports("avx512cd");
        }
        if (v4) {
            lean_gram4(X, ld, w, nb, n, G);
            return;
        }
    #endif
        lean_gram24(X, ld, w, nb, n, G);
    }
    /* lean_gram with a given kernel: 1 lean_gram24, 2 lean_gram4 (0 where this build or CPU lacks it); for the tests */
    static int lean_gram_with(int kernel, const double *X, Py_ssize_t ld, const double *w, Py_ssize_t nb, Py_ssize_t n,
                              double *G) {
        if (kernel == 1) {
            lean_gram24(X, ld, w, nb, n, G);
            return 1;
        }
    #ifdef LEAN_GRAM4
        if (kernel == 2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")
            && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")
            && __builtin_cpu_supports("avx512cd")) {
            lean_gram4(X, ld, w, nb, n, G);
            return 2;
        }
    #endif
        return 0;
    }
    /* The range [lo, hi] of the curvature ratios a[i] / b[i] (the Newton loop's certification of its stored
       Hessian) and whether one is NaN: the quotients by four-lane vector divisions (about 10 -> 6 us at
       n = 5,822 against the scalar loop's one division at a time), lo and hi by selects by bit masks
       (exact and order-free: the same lo and hi as the scalar loop's). */
    #if defined(__GNUC__) || defined(__clang__)
    typedef long long lean_m4 __attribute__((vector_size(32)));
    #endif
    LEAN_GRAM_CLONES
    static int lean_ratio_range(const double *LEAN_RESTRICT a, const double *LEAN_RESTRICT b, Py_ssize_t n,
                                double *lo_out, double *hi_out) {
        double lo = INFINITY, hi = -INFINITY;
        int nan = 0;
        Py_ssize_t i = 0;
    #if defined(__GNUC__) || defined(__clang__)
        Py_ssize_t nv = n & ~(Py_ssize_t)3;
        if (nv > 0) {
            lean_v4 vlo = {INFINITY, INFINITY, INFINITY, INFINITY}, vhi = -vlo;
            lean_m4 vnan = {0, 0, 0, 0};
            for (; i < nv; i += 4) {
                lean_v4 x, y, q;
                LEAN_LOAD4(x, a + i);
                LEAN_LOAD4(y, b + i);
                q = x / y;
                lean_m4 lt = q < vlo, gt = q > vhi;
                vnan |= q != q;
                vlo = (lean_v4)(((lean_m4)q & lt) | ((lean_m4)vlo & ~lt));
                vhi = (lean_v4)(((lean_m4)q & gt) | ((lean_m4)vhi & ~gt));
            }
            for (int l = 0; l < 4; l++) {
                lo = vlo[l] < lo ? vlo[l] : lo;
                hi = vhi[l] > hi ? vhi[l] : hi;
                nan |= vnan[l] != 0;
            }
        }
    #endif
        for (; i < n; i++) {
            double q = a[i] / b[i];
            nan |= q != q;
            lo = q < lo ? q : lo;
            hi = q > hi ? q : hi;
        }
        *lo_out = lo;
        *hi_out = hi;
        return nan;
    }
    /* out[r k + j] = X_r' V_j for the rows r = rows[0..nr) of X (rows NULL: 0..nr; row stride ld) and the
       k <= 4 vectors V_j (stride vld) of n entries: each row read once for all k (the products of a
       row block with a few right-hand sides, BLAS's gemm with a thin right side packs the whole block
       first). Every sum is its row's own: four lanes over the samples in steps of four (as lean_gram),
       the lanes added ((0 + 1) + (2 + 3)), then the last n mod 4 samples one at a time, so a row's bits
       do not depend on the rows read beside it. Rows go in blocks of 8 (k = 1), 4 (k = 2) or 2 (k = 3,
       4) -- 8 independent sums each way: a sum is a chain of dependent FMAs, and two rows' chains (the
       blocks of two of before) left the FMA units waiting on their latency (about 34-51 -> 20-23 us for one
       vector and 31 x 5,822 rows). A missing row of the last block is the last one read again, not
       stored. */
    LEAN_GRAM_CLONES
    static void lean_dots(const double *LEAN_RESTRICT X, Py_ssize_t ld, const Py_ssize_t *rows, Py_ssize_t nr,
                          const double *LEAN_RESTRICT V, Py_ssize_t vld, Py_ssize_t k, Py_ssize_t n,
                          double *LEAN_RESTRICT out) {
        Py_ssize_t nv = n & ~(Py_ssize_t)3;
        const double *v[4];
        for (int c = 0; c < 4; c++)
            v[c] = V + (c < k ? c : k - 1) * vld;
        const Py_ssize_t rb = k == 1 ? 8 : k == 2 ? 4 : 2;
        const int kk = k < 4 ? (int)k : 4;
        for (Py_ssize_t r0 = 0; r0 < nr; r0 += rb) {
            const double *x[8];
            double acc[8][4];
            for (int a = 0; a < 8; a++) {
                Py_ssize_t i = r0 + a < nr ? r0 + a : nr - 1;
                x[a] = X + (rows ? rows[i] : i) * ld;
            }
    #if defined(__GNUC__) || defined(__clang__)
            if (k == 1) {
                lean_v4 s[8];
                for (int a = 0; a < 8; a++)
                    s[a] = (lean_v4){0.0, 0.0, 0.0, 0.0};
                for (Py_ssize_t q = 0; q < nv; q += 4) {
                    lean_v4 b, xa;
                    LEAN_LOAD4(b, v[0] + q);
                    for (int a = 0; a < 8; a++) {
                        LEAN_LOAD4(xa, x[a] + q);
                        s[a] += xa * b;
                    }
                }
                for (int a = 0; a < 8; a++)
                    acc[a][0] = LEAN_LANES(s[a]);
            } else if (k == 2) {
                lean_v4 s[4][2];
                for (int a = 0; a < 4; a++)
                    s[a][0] = s[a][1] = (lean_v4){0.0, 0.0, 0.0, 0.0};
                for (Py_ssize_t q = 0; q < nv; q += 4) {
                    lean_v4 b0, b1, xa;
                    LEAN_LOAD4(b0, v[0] + q);
                    LEAN_LOAD4(b1, v[1] + q);
                    for (int a = 0; a < 4; a++) {
                        LEAN_LOAD4(xa, x[a] + q);
                        s[a][0] += xa * b0;
                        s[a][1] += xa * b1;
                    }
                }
                for (int a = 0; a < 4; a++) {
                    acc[a][0] = LEAN_LANES(s[a][0]);
                    acc[a][1] = LEAN_LANES(s[a][1]);
                }
            } else {
                lean_v4 s[2][4];
                for (int a = 0; a < 2; a++)
                    for (int c = 0; c < 4; c++)
                        s[a][c] = (lean_v4){0.0, 0.0, 0.0, 0.0};
                for (Py_ssize_t q = 0; q < nv; q += 4) {
                    lean_v4 a0, a1, b;
                    LEAN_LOAD4(a0, x[0] + q);
                    LEAN_LOAD4(a1, x[1] + q);
                    for (int c = 0; c < 4; c++) {
                        LEAN_LOAD4(b, v[c] + q);
                        s[0][c] += a0 * b;
                        s[1][c] += a1 * b;
                    }
                }
                for (int a = 0; a < 2; a++)
                    for (int c = 0; c < 4; c++)
                        acc[a][c] = LEAN_LANES(s[a][c]);
            }
    #else
            for (Py_ssize_t a = 0; a < rb; a++)
                for (int c = 0; c < kk; c++) {
                    double lane[4] = {0.0, 0.0, 0.0, 0.0};
                    for (Py_ssize_t q = 0; q < nv; q += 4)
                        for (int t = 0; t < 4; t++)
                            lane[t] += x[a][q + t] * v[c][q + t];
                    acc[a][c] = (lane[0] + lane[1]) + (lane[2] + lane[3]);
                }
    #endif
            for (Py_ssize_t q = nv; q < n; q++)  /* (each product rounded before it is added, not an FMA: */
                for (Py_ssize_t a = 0; a < rb; a++)  /* the tail of the two-row blocks compiled so) */
                    for (int c = 0; c < kk; c++) {
                        double p = x[a][q] * v[c][q];
                        LEAN_ROUNDED(p);
                        acc[a][c] += p;
                    }
            for (Py_ssize_t a = 0; a < rb && r0 + a < nr; a++)
                for (int c = 0; c < kk; c++)
                    out[(r0 + a) * k + c] = acc[a][c];
        }
    }
    /* out[r] = X_r' v for the rows r = rows[0..nr) of the float32 rows X (row stride ld) and the double
       vector v of n entries: each entry converted to double and multiplied and summed in double
       (a float32 entry times a double, four rows at a time, two four-lane sums each), so the only
       error beyond the double sum's is X's own rounding to float32 (line 15's screen,
       lean_grad_argmax: half the bytes of the double rows to read). */
    LEAN_GRAM_CLONES
    static void lean_dots32(const float *LEAN_RESTRICT X, Py_ssize_t ld, const Py_ssize_t *rows, Py_ssize_t nr,
                            const double *LEAN_RESTRICT v, Py_ssize_t n, double *LEAN_RESTRICT out) {
        Py_ssize_t nv = n & ~(Py_ssize_t)7;
        for (Py_ssize_t r0 = 0; r0 < nr; r0 += 4) {
            const float *x[4];
            double acc[4];
            for (int a = 0; a < 4; a++)
                x[a] = X + rows[r0 + a < nr ? r0 + a : nr - 1] * ld;
    #if defined(__GNUC__) || defined(__clang__)
            lean_v4 s[4][2];
            for (int a = 0; a < 4; a++)
                s[a][0] = s[a][1] = (lean_v4){0.0, 0.0, 0.0, 0.0};
            for (Py_ssize_t q = 0; q < nv; q += 8) {
                lean_v4 b0, b1;
                LEAN_LOAD4(b0, v + q);
                LEAN_LOAD4(b1, v + q + 4);
                for (int a = 0; a < 4; a++) {  /* (an initializer, not __builtin_convertvector: GCC 12 splits that) */
                    const float *p = x[a] + q;
                    lean_v4 f0 = {p[0], p[1], p[2], p[3]}, f1 = {p[4], p[5], p[6], p[7]};
                    s[a][0] += f0 * b0;
                    s[a][1] += f1 * b1;
                }
            }
            for (int a = 0; a < 4; a++)
                acc[a] = LEAN_LANES(s[a][0]) + LEAN_LANES(s[a][1]);
    #else
            for (int a = 0; a < 4; a++) {
                acc[a] = 0.0;
                for (Py_ssize_t q = 0; q < nv; q++)
                    acc[a] += (double)x[a][q] * v[q];
            }
    #endif
            for (Py_ssize_t q = nv; q < n; q++)
                for (int a = 0; a < 4; a++)
                    acc[a] += (double)x[a][q] * v[q];
            for (int a = 0; a < 4 && r0 + a < nr; a++)
                out[r0 + a] = acc[a];
        }
    }
    /* ARHT's Newton trial point in one pass over the rows by blocks of samples (``_trial``): for each
       block of LEAN_TRIAL_QB samples, dz = X' step on it (rows four at a time), zt = z + dz, the logistic
       loss's terms there (lean_logistic_terms: vw = wc phi, e1 = wc phi', e2 = wc phi''), and gl += X e1
       on it (eight rows at a time, four-lane sums as lean_dots) while the block's rows are still in L1:
       the rows are read from L2 once a trial point instead of twice (BLAS's dgemv N, then T). Sums in
       another order than BLAS's, so the trial point differs from theirs in the last bits. */
    #define LEAN_TRIAL_QB 128
    LEAN_GRAM_CLONES
    static void lean_trial(const double *LEAN_RESTRICT X, Py_ssize_t ld, Py_ssize_t nb, Py_ssize_t n,
                           const double *LEAN_RESTRICT step, const double *LEAN_RESTRICT z,
                           const double *LEAN_RESTRICT wc, double *LEAN_RESTRICT dz, double *LEAN_RESTRICT zt,
                           double *LEAN_RESTRICT vw, double *LEAN_RESTRICT e1, double *LEAN_RESTRICT e2,
                           double *LEAN_RESTRICT gl) {
        for (Py_ssize_t c = 0; c < nb; c++)
            gl[c] = 0.0;
        for (Py_ssize_t q0 = 0; q0 < n; q0 += LEAN_TRIAL_QB) {
            Py_ssize_t q1 = q0 + LEAN_TRIAL_QB < n ? q0 + LEAN_TRIAL_QB : n, m = q1 - q0;
            double *LEAN_RESTRICT d = dz + q0;
            Py_ssize_t c = 0;
            if (nb >= 4) {
                const double *x0 = X + q0, *x1 = x0 + ld, *x2 = x1 + ld, *x3 = x2 + ld;
                double s0 = step[0], s1 = step[1], s2 = step[2], s3 = step[3];
                for (Py_ssize_t q = 0; q < m; q++)
                    d[q] = (s0 * x0[q] + s1 * x1[q]) + (s2 * x2[q] + s3 * x3[q]);
                c = 4;
            } else {
                for (Py_ssize_t q = 0; q < m; q++)
                    d[q] = 0.0;
            }
            for (; c + 4 <= nb; c += 4) {
                const double *x0 = X + c * ld + q0, *x1 = x0 + ld, *x2 = x1 + ld, *x3 = x2 + ld;
                double s0 = step[c], s1 = step[c + 1], s2 = step[c + 2], s3 = step[c + 3];
                for (Py_ssize_t q = 0; q < m; q++)
                    d[q] += (s0 * x0[q] + s1 * x1[q]) + (s2 * x2[q] + s3 * x3[q]);
            }
            for (; c < nb; c++) {
                const double *x0 = X + c * ld + q0;
                double s0 = step[c];
                for (Py_ssize_t q = 0; q < m; q++)
                    d[q] += s0 * x0[q];
            }
            for (Py_ssize_t q = 0; q < m; q++)
                zt[q0 + q] = z[q0 + q] + d[q];
            lean_logistic_terms(zt + q0, wc + q0, vw + q0, e1 + q0, e2 + q0, m);
            const double *e = e1 + q0;
            Py_ssize_t mv = m & ~(Py_ssize_t)3;
            for (Py_ssize_t r0 = 0; r0 < nb; r0 += 8) {
                const double *x[8];
                double acc[8];
                for (int a = 0; a < 8; a++)
                    x[a] = X + (r0 + a < nb ? r0 + a : nb - 1) * ld + q0;
    #if defined(__GNUC__) || defined(__clang__)
                lean_v4 s[8];
                for (int a = 0; a < 8; a++)
                    s[a] = (lean_v4){0.0, 0.0, 0.0, 0.0};
                for (Py_ssize_t q = 0; q < mv; q += 4) {
                    lean_v4 b, xa;
                    LEAN_LOAD4(b, e + q);
                    for (int a = 0; a < 8; a++) {
                        LEAN_LOAD4(xa, x[a] + q);
                        s[a] += xa * b;
                    }
                }
                for (int a = 0; a < 8; a++)
                    acc[a] = LEAN_LANES(s[a]);
    #else
                for (int a = 0; a < 8; a++) {
                    acc[a] = 0.0;
                    for (Py_ssize_t q = 0; q < mv; q++)
                        acc[a] += x[a][q] * e[q];
                }
    #endif
                for (Py_ssize_t q = mv; q < m; q++)
                    for (int a = 0; a < 8; a++)
                        acc[a] += x[a][q] * e[q];
                for (int a = 0; a < 8 && r0 + a < nb; a++)
                    gl[r0 + a] += acc[a];
            }
        }
    }
    """
    void lean_gram(const double *X, Py_ssize_t ld, const double *w, Py_ssize_t nb, Py_ssize_t n, double *G) noexcept nogil
    int lean_ratio_range(const double *a, const double *b, Py_ssize_t n, double *lo, double *hi) noexcept nogil
    int lean_gram_with(int kernel, const double *X, Py_ssize_t ld, const double *w, Py_ssize_t nb, Py_ssize_t n,
                       double *G) noexcept nogil
    void lean_dots(const double *X, Py_ssize_t ld, const Py_ssize_t *rows, Py_ssize_t nr, const double *V,
                   Py_ssize_t vld, Py_ssize_t k, Py_ssize_t n, double *out) noexcept nogil
    void lean_dots32(const float *X, Py_ssize_t ld, const Py_ssize_t *rows, Py_ssize_t nr, const double *v,
                     Py_ssize_t n, double *out) noexcept nogil
    void lean_trial(const double *X, Py_ssize_t ld, Py_ssize_t nb, Py_ssize_t n, const double *step, const double *z,
                    const double *wc, double *dz, double *zt, double *vw, double *e1, double *e2,
                    double *gl) noexcept nogil


cdef inline double _chord_steps(double dec, double prev, double target) noexcept nogil:
    """The chord steps still needed to bring the decrement from ``dec`` to ``target`` at the rate of
    the last one (dec / prev) (lowering/active._chord_steps)."""
    cdef double r = dec / prev if prev > 0 else 1.0
    if not (0.0 < r < 1.0 and target > 0.0) or dec <= target:
        return 0.0
    return log(target / dec) / log(r)


cdef inline double _objective_at(Problem P, double loss, double[::1] lin, double[::1] r, double[::1] u) noexcept nogil:
    """ARHT's restricted objective at the coefficients u of its gathered columns: the constant, the
    loss's value there, the linear term and the ridge r / 2 u^2 (the Newton loop's polish and line search)."""
    cdef double f = P.const + loss
    cdef Py_ssize_t i
    for i in range(u.shape[0]):
        f += lin[i] * u[i] + 0.5 * r[i] * u[i] * u[i]
    return f


cdef void _mirror(double[:, ::1] G) noexcept nogil:
    """The upper triangle (C order) from the lower one, which :func:`lean_gram` writes."""
    cdef Py_ssize_t nb = G.shape[0], i, j
    for i in range(nb):
        for j in range(i + 1, nb):
            G[i, j] = G[j, i]


cdef tuple _renew(double[:, ::1] JTB, object G, object c0, double[::1] d2, bint full, double moved_rel, double part):
    """The Hessian of the loss part at (about) the curvatures d2, its curvatures, and whether they
    are d2 exactly: from the Hessian G at c0 on the same columns, G + J_B' diag(d2 - c0) J_B over the
    samples whose curvature moved by more than ``moved_rel`` relative (exactly the Hessian at c0 with
    those entries replaced by d2's, so the certification of ``_lean_newton`` holds), when they
    are at most the share ``part`` of them (and not ``full``); else J_B' diag(d2) J_B formed anew
    (both by ``lean_gram``). New arrays (G may be a stored Hessian)."""
    cdef Py_ssize_t nb = JTB.shape[0], n = d2.shape[0], i, c, m = 0
    cdef double[::1] cv, c1v, wv
    cdef double[:, ::1] Hv, Xv
    cdef Py_ssize_t[::1] iv
    cdef double diff
    if not full and G is not None and c0.shape[0] == n:
        cv = c0
        iv = np.empty(n, dtype=np.intp)
        wv = np.empty(n)
        for i in range(n):
            diff = d2[i] - cv[i]
            if fabs(diff) > moved_rel * max(d2[i], cv[i]):
                iv[m] = i
                wv[m] = diff
                m += 1
        if m <= part * n:
            H = np.array(G, dtype=float, order="C")
            c1 = np.array(c0, dtype=float)
            Hv, c1v = H, c1
            if m > 0:
                Xv = np.empty((nb, m))  # (the rows of the samples that moved, gathered)
                for c in range(nb):
                    for i in range(m):
                        Xv[c, i] = JTB[c, iv[i]]
                for i in range(m):
                    c1v[iv[i]] = d2[iv[i]]
                lean_gram(&Xv[0, 0], m, &wv[0], nb, m, &Hv[0, 0])
                _mirror(Hv)
            return H, c1, False
    H = np.zeros((nb, nb))
    Hv = H
    if n > 0 and nb > 0:
        lean_gram(&JTB[0, 0], n, &d2[0], nb, n, &Hv[0, 0])
    _mirror(Hv)
    return H, np.array(d2), True


def lean_hessian(double[:, ::1] JTB, G, c0, double[::1] d2, bint full, double moved_rel, double part):
    """The Newton loop's Hessian renewal (``_renew``) for the tests: (G', c', formed anew)."""
    return _renew(JTB, G, c0, d2, full, moved_rel, part)


def lean_ratios(double[::1] a, double[::1] b):
    """(lo, hi, any NaN) of the ratios a / b (``lean_ratio_range``, the Newton loop's scan), for the tests."""
    cdef double lo = INFINITY, hi = -INFINITY
    cdef int nan
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"lean_ratios: a and b need the same length; got {a.shape[0]} and {b.shape[0]}")
    if a.shape[0] == 0:
        return lo, hi, False
    nan = lean_ratio_range(&a[0], &b[0], a.shape[0], &lo, &hi)
    return lo, hi, nan != 0


def lean_gram_kernel(int kernel, double[:, ::1] X, double[::1] w, G):
    """G += X diag(w) X' on G's lower triangle by one of ``lean_gram``'s kernels (for the tests):
    ``kernel`` 1 the 2 x 4 tiles (any CPU), 2 the 4 x 4 tiles of AVX-512 machines. Returns the kernel
    that ran, 0 where this build or CPU lacks it (G unchanged)."""
    cdef double[:, ::1] Gv = G
    cdef Py_ssize_t nb = X.shape[0], n = X.shape[1]
    if Gv.shape[0] != nb or Gv.shape[1] != nb or w.shape[0] != n:
        raise ValueError(f"lean_gram_kernel: X is {nb} x {n}, so w needs {n} entries and G {nb} x {nb}")
    if nb == 0 or n == 0:
        return kernel if kernel in (1, 2) else 0
    return lean_gram_with(kernel, &X[0, 0], n, &w[0], nb, n, &Gv[0, 0])


cdef bint _trial_fused = True  # the logistic trial point by ``lean_trial`` (False: BLAS's two products; for the tests)


def lean_trial_fused(bint on) -> bool:
    """Whether the Newton loop's trial points go through ``lean_trial`` (True, the default) or BLAS's
    two products around the loss pass (False), for the tests and the A/B timings; returns the old setting."""
    global _trial_fused
    old = _trial_fused
    _trial_fused = on
    return old


def lean_trial_point(Problem P, double[:, ::1] JTB, double[::1] z, double[::1] step):
    """(loss, dz, zt, e1, e2, gl) of ``_trial`` at the block JTB, z and step (for the tests)."""
    cdef Py_ssize_t n = JTB.shape[1], nb = JTB.shape[0]
    if z.shape[0] != n or step.shape[0] != nb or P.wc.shape[0] != n:
        raise ValueError(f"lean_trial_point: JTB is {nb} x {n}, so z and P's weights need {n} entries and step {nb}")
    dz, zt, e1, e2, vw, gl = (np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty(nb))
    f = _trial(P, JTB, z, step, dz, zt, e1, e2, vw, gl)
    return f, dz, zt, e1, e2, gl


cdef double _trial(Problem P, double[:, ::1] JTB, double[::1] z, double[::1] step, double[::1] dz, double[::1] zt,
                   double[::1] e1, double[::1] e2, double[::1] vw, double[::1] gl) noexcept nogil:
    """The full Newton step's trial point: dz = J_B step, zt = z + dz, the loss terms there (e1 =
    wc phi', e2 = wc phi''; their sum returned) and gl = J_B' e1, the loss part of the gradient
    there (the next iteration's, when the step is accepted, as it nearly always is). The logistic
    loss's in one pass by blocks of samples (``lean_trial``; ``_trial_fused``), others by BLAS's two
    products around the loss pass."""
    cdef Py_ssize_t n = JTB.shape[1], i
    cdef int inb = <int> JTB.shape[0], inn = <int> n, one = 1
    cdef double alpha = 1.0, beta = 0.0, total
    if _trial_fused and P.code == 1 and n > 0 and inb > 0 and vw.shape[0] >= n:
        lean_trial(&JTB[0, 0], n, inb, n, &step[0], &z[0], &P.wc[0], &dz[0], &zt[0], &vw[0], &e1[0], &e2[0], &gl[0])
        return _sum4(vw, n)  # (summed as _loss_pass sums them)
    dgemv(b"N", &inn, &inb, &alpha, &JTB[0, 0], &inn, &step[0], &one, &beta, &dz[0], &one)
    for i in range(n):
        zt[i] = z[i] + dz[i]
    total = _loss_pass(P, zt, e1, e2, vw)
    dgemv(b"T", &inn, &inb, &alpha, &JTB[0, 0], &inn, &e1[0], &one, &beta, &gl[0], &one)
    return total


cdef object _start_hessian(double[:, ::1] JTB, object Gsrc, Py_ssize_t[::1] srccols, Py_ssize_t[::1] cols,
                           double[::1] c0, double[::1] d1, double[::1] gl):
    """The Hessian of the loss part on ``cols`` (in their order, that of the rows JTB) at the stored
    curvatures c0, from Gsrc on ``srccols`` at c0: the entries of the columns both hold copied, a new
    column J_B' (c0 J_i). With d1 (not None) also gl = J_B' d1, in the same pass over the rows (one
    product with the new columns' right-hand sides)."""
    cdef Py_ssize_t nb = JTB.shape[0], n = JTB.shape[1], ns = srccols.shape[0], a, c, q, m, k = 0, kk
    cdef int inb = <int> nb, inn = <int> n, one = 1
    cdef double alpha = 1.0, beta = 0.0
    cdef double[:, ::1] Gs = Gsrc, Gv, Mv, Ov
    cdef Py_ssize_t[::1] at = np.empty(nb, dtype=np.intp), new = np.empty(nb, dtype=np.intp)
    for a in range(nb):
        at[a] = -1
        for c in range(ns):
            if srccols[c] == cols[a]:
                at[a] = c
                break
        if at[a] < 0:
            new[k] = a
            k += 1
    G = np.empty((nb, nb))
    Gv = G
    for a in range(nb):
        if at[a] >= 0:
            for c in range(nb):
                if at[c] >= 0:
                    Gv[a, c] = Gs[at[a], at[c]]
    kk = k + (d1 is not None)
    if kk == 0:
        return G
    if k == 0:  # (the gradient alone: the loop's own product)
        dgemv(b"T", &inn, &inb, &alpha, &JTB[0, 0], &inn, &d1[0], &one, &beta, &gl[0], &one)
        return G
    M, O = np.empty((kk, n)), np.empty((nb, 4))
    Mv, Ov = M, O
    for q in range(k):
        for c in range(n):
            Mv[q, c] = c0[c] * JTB[new[q], c]
    if d1 is not None:
        Mv[k, :] = d1
    a = 0
    while a < kk:  # J_B' M[a:a+m]', four right-hand sides at a time (each row read once: ``lean_dots``)
        m = min(4, kk - a)
        lean_dots(&JTB[0, 0], n, NULL, nb, &Mv[a, 0], n, m, n, &Ov[0, 0])
        for q in range(m):
            if a + q < k:  # a new column of G
                for c in range(nb):
                    Gv[c, new[a + q]] = (&Ov[0, 0])[c * m + q]
            else:  # the gradient's loss part
                for c in range(nb):
                    gl[c] = (&Ov[0, 0])[c * m + q]
        a += m
    for q in range(k):
        for c in range(nb):
            Gv[new[q], c] = Gv[c, new[q]]
    return G


def lean_start_hessian(double[:, ::1] JTB, Gsrc, Py_ssize_t[::1] srccols, Py_ssize_t[::1] cols, double[::1] c0):
    """The Hessian the Newton loop starts from (``_start_hessian``), for the tests."""
    return _start_hessian(JTB, Gsrc, srccols, cols, c0, None, None)


cdef tuple _lean_newton(Problem P, double[:, ::1] JTB, double[::1] lin, double[::1] r, double[::1] u, double[::1] z,
                        double[::1] d1, double[::1] d2, double fl, object Gsrc, object srccols, Py_ssize_t[::1] cols,
                        object c0, double tol, object decide, bint accurate, double stale, double rate, double chord,
                        double local, double safety, double moved_rel, double part):
    """The loop of :class:`sparsemodel.lowering.active._LeanNewton` (its docstring has the method): damped
    Newton on the gathered rows JTB = J'[cols] (nb x n) from the point u, its z = J_B u + b and the
    loss part fl there with its derivatives d1, d2 (fl NaN: not known, d1 and d2 computed here; z,
    d1 and d2 are overwritten with the end point's). The loss part's Hessian starts from Gsrc on
    ``srccols`` at the curvatures c0 (``_start_hessian``, its new columns in the pass that gives the
    first gradient; Gsrc None: none), is certified by the curvature ratio and renewed here
    (``_renew``: an update on the samples whose curvature moved by more than ``moved_rel``, at most
    the share ``part`` of them, else formed anew); ``decide(f, lower)`` the caller's test (None:
    none). A full step's trial point comes with the gradient there (``_trial``); a point's gradient
    serves every pass of the loop at it (a renewed Hessian needs none). Returns (state, iterations, f, fl, lower, G, c0): state 0 converged, 1 stopped by
    ``decide``, 2 no answer on this path (a value not finite at the start, a Hessian not positive
    definite at the point, a negative decrement), 3 the iteration limit."""
    cdef Py_ssize_t nb = JTB.shape[0], n = JTB.shape[1], i, j, it
    cdef int inb = <int> nb, inn = <int> n, one = 1, tries, convex = -1
    cdef double t_next, t_prev, f_prev
    cdef double alpha = 1.0, beta = 0.0, beta1 = 1.0, lo, hi, qv, dec, bound, prev_dec = INFINITY, t = 1.0
    cdef double ft = 0.0, ft_l = 0.0, f, lower, s
    cdef bint fresh = Gsrc is None, need = Gsrc is None, full = Gsrc is None, have_c = False, far, moved, nan
    cdef bint have_g = False  # gl holds J_B' d1 at the current point
    cdef int state = 3, its = 0
    cdef double[::1] dz = np.empty(n), zt = np.empty(n), e1 = np.empty(n), e2 = np.empty(n), vw = np.empty(n), c0v
    cdef double[::1] g = np.empty(nb), step = np.empty(nb), ut = np.empty(nb), gl = np.empty(nb), gt = np.empty(nb)
    if isnan(fl):
        fl = _loss_pass(P, z, d1, d2, vw)
    f = _objective_at(P, fl, lin, r, u)
    lower = f
    if nb == 0 or n == 0 or not isfinite(f):
        return 2, 0, f, fl, f, None, c0
    G = None
    if not fresh:
        G = _start_hessian(JTB, Gsrc, srccols, cols, c0, d1, gl)
        have_g = True
    H, L = np.empty((nb, nb)), np.empty((nb, nb))
    cdef double[:, ::1] Hv = H, Lv = L, Gv
    cdef double[::1] z0 = z, d10 = d1, d20 = d2, sw  # (an accepted point swaps its arrays in: no copies)
    cdef bint swapped = False
    if not fresh:
        Gv, c0v = G, c0
    for it in range(NEWTON_MAX_ITER):
        its += 1
        if need:
            G, c0, fresh = _renew(JTB, G, c0, d2, full, moved_rel, part)
            Gv, c0v = G, c0
            need = full = False
            prev_dec = INFINITY
            have_c = False
        lo = 1.0
        hi = 1.0
        far = False
        if not fresh:
            nan = lean_ratio_range(&d2[0], &c0v[0], n, &lo, &hi) != 0  # (the ratios d2 / c0: their range)
            if nan:
                lo, hi = NAN, NAN
            far = not (lo >= 1.0 / stale and hi <= stale)
            if far and (decide is None or not lo > 0.0):
                need = True
                continue
            lo = min(lo, 1.0)
        # g = J_B' d1 + lin + r u  (JTB in C order is J_B in Fortran order)
        if not have_g:
            dgemv(b"T", &inn, &inb, &alpha, &JTB[0, 0], &inn, &d1[0], &one, &beta, &gl[0], &one)
            have_g = True
        for i in range(nb):
            g[i] = gl[i] + lin[i] + r[i] * u[i]
        if not have_c:  # factorize G + diag(r) once per Hessian (the chord steps reuse it)
            for i in range(nb):
                for j in range(nb):
                    Hv[i, j] = Gv[i, j]
                Hv[i, i] += r[i]
            if not _factor(Hv, Lv, NEWTON_JITTER):  # (numerics/newton.JITTER, as auto's steps)
                if fresh:
                    state = 2
                    break
                need = full = True
                continue
            have_c = True
        _fsolve(Lv, g, step)
        dec = 0.0
        for i in range(nb):
            step[i] = -step[i]
            dec -= g[i] * step[i]
        if not dec >= 0:
            state = 2
            break
        bound = 2.0 * tol * (1.0 + fabs(f))
        if dec / lo <= bound:
            if accurate and not fresh:  # the last step from the true Hessian: x to rounding
                need = full = True
                continue
            state = 0
            lower = f
            if not accurate:  # a point within the decrement's accuracy (an iterate of a search)
                break
            for i in range(nb):
                ut[i] = u[i] + step[i]
            for i in range(n):
                zt[i] = P.b[i]
            dgemv(b"N", &inn, &inb, &alpha, &JTB[0, 0], &inn, &ut[0], &one, &beta1, &zt[0], &one)
            ft_l = _loss_pass(P, zt, e1, e2, vw)
            ft = _objective_at(P, ft_l, lin, r, ut)
            if isfinite(ft) and ft <= f + ROUNDING * (1.0 + fabs(f)):
                u[:] = ut
                sw = z; z = zt; zt = sw
                sw = d1; d1 = e1; e1 = sw
                sw = d2; d2 = e2; e2 = sw
                swapped = not swapped
                f, fl = ft, ft_l
            lower = f
            break
        if decide is not None and dec / lo <= local * (1.0 + fabs(f)):
            lower = f - safety * dec / (2.0 * lo)
            if decide(f, lower):
                state = 1
                break
        if not fresh and (far or dec > rate * prev_dec or _chord_steps(dec, prev_dec, lo * bound) > chord):
            need = True  # slow progress on the stored Hessian: one at this point
            continue
        # the full step (its gradient too), then halvings along dz
        t = 1.0
        moved = False
        tries = 0
        t_prev = f_prev = NAN
        while tries < 50:  # (the backtracking of _restricted, numerics/newton.backtrack)
            for i in range(nb):
                ut[i] = u[i] + t * step[i]
            if tries == 0:
                ft_l = _trial(P, JTB, z, step, dz, zt, e1, e2, vw, gt)
            else:
                for i in range(n):
                    zt[i] = z[i] + t * dz[i]
                ft_l = _loss_pass(P, zt, e1, e2, vw)
            ft = _objective_at(P, ft_l, lin, r, ut)
            if ft <= f - 0.25 * t * dec:
                if ft < f:  # (t dec / 4 below f's rounding passes the test without a decrease: no step)
                    u[:] = ut
                    sw = z; z = zt; zt = sw
                    sw = d1; d1 = e1; e1 = sw
                    sw = d2; d2 = e2; e2 = sw
                    swapped = not swapped
                    f, fl = ft, ft_l
                    moved = True
                    have_g = tries == 0  # (the full step's trial gave the gradient at the new point)
                    if have_g:
                        sw = gl; gl = gt; gt = sw
                break
            t_next = _backtrack(t, ft, t_prev, f_prev, f, dec, &tries)
            if isfinite(ft):
                if convex < 0:
                    convex = _convex(P) and _nonnegative(r)
                if convex:  # (a chord's end: on a convex objective only)
                    t_prev, f_prev = t, ft
            t = t_next
        if not moved:
            state = 0
            lower = f
            break
        if t < 1.0 and not fresh:
            need = True
        prev_dec = dec
        fresh = False  # the next point differs from the curvatures G was formed at
    if swapped:  # the end point's arrays into the caller's
        z0[:] = z
        d10[:] = d1
        d20[:] = d2
    return state, its, f, fl, lower, G, c0


def lean_rows(double[:, ::1] JT, double[:, ::1] work, Py_ssize_t[::1] wcols, Py_ssize_t[::1] cols,
              Py_ssize_t swaps):
    """:func:`_rows_swap` (for lowering/active._LeanNewton.rows)."""
    return _rows_swap(JT, work, wcols, cols, swaps)


cdef Py_ssize_t _rows_swap(double[:, ::1] JT, double[:, ::1] work, Py_ssize_t[::1] wcols, Py_ssize_t[::1] cols,
                           Py_ssize_t swaps):
    """An active set's working block (lowering/active._LeanNewton.rows): the rows JT[wcols] in its
    slot order, moved to the sorted support ``cols`` of the same size in place, the entering columns
    (in increasing order) written over the slots of the leaving ones (in slot order). Returns the
    number of slots written, or -1 when more than ``swaps`` would be (nothing written: the caller
    gathers a new block)."""
    cdef Py_ssize_t nb = cols.shape[0], n = JT.shape[1], a, c, lo, hi, mid, k = 0, q
    cdef Py_ssize_t[::1] out = np.empty(nb, dtype=np.intp), inn = np.empty(nb, dtype=np.intp)
    cdef bint found
    for a in range(nb):  # the slots whose column left (cols sorted: a binary search)
        lo, hi = 0, nb
        while lo < hi:
            mid = (lo + hi) // 2
            if cols[mid] < wcols[a]:
                lo = mid + 1
            else:
                hi = mid
        if lo >= nb or cols[lo] != wcols[a]:
            if k >= swaps:
                return -1
            out[k] = a
            k += 1
    if k == 0:
        return 0
    q = 0
    for c in range(nb):  # the entering columns, in increasing order
        found = False
        for a in range(nb):
            if wcols[a] == cols[c]:
                found = True
                break
        if not found:
            inn[q] = cols[c]
            q += 1
    for a in range(k):
        wcols[out[a]] = inn[a]
        work[out[a], :] = JT[inn[a], :n]
    return k


cdef Py_ssize_t _start_z(double[:, ::1] JT, double[::1] b, list points, double[::1] x, double[:, ::1] JTB,
                         double[::1] u, double[::1] z, Py_ssize_t update):
    """The linear predictor z = J x + b at the point x (over every coordinate; u its entries on the
    rows JTB) into z, from the stored points (lowering/active.LeanRows.points, newest last): the
    position of one equal to x (z not written: its arrays serve), -1 when z is a stored point's z
    moved by the at most ``update`` coordinates where they differ (z_e + sum dx_c J_c), -2 when it is
    formed (J_B u + b)."""
    cdef Py_ssize_t D = x.shape[0], n = z.shape[0], p, c, i, k
    cdef Py_ssize_t on[8]
    cdef int inb = <int> JTB.shape[0], inn = <int> n, one = 1
    cdef double alpha = 1.0, beta1 = 1.0, t
    cdef double[::1] xe, ze
    if update > 8:
        update = 8
    for p in range(len(points) - 1, -1, -1):
        xe = points[p][0]
        k = 0
        for c in range(D):
            if x[c] != xe[c]:
                if k >= update:
                    k = update + 1
                    break
                on[k] = c
                k += 1
        if k == 0:
            return p
        if k <= update:
            ze = points[p][1]
            for i in range(n):
                t = 0.0
                for c in range(k):
                    t += (x[on[c]] - xe[on[c]]) * JT[on[c], i]
                z[i] = ze[i] + t
            return -1
    z[:] = b
    if inb > 0:
        dgemv(b"N", &inn, &inb, &alpha, &JTB[0, 0], &inn, &u[0], &one, &beta1, &z[0], &one)
    return -2


def lean_hessian_source(eng, bytes key):
    """The Hessian a solve of the engine ``eng`` (lowering/active._LeanNewton) on the support whose
    sorted columns' bytes are ``key`` starts from, its columns and curvatures c0: the last one it
    formed on these columns (kept by their bytes), else its last one (``_start_hessian`` moves it to
    the support); (None, None, c0): none."""
    same = eng.hessians_on.get(key)
    if same is not None:
        return same[0], same[2], same[1]
    if eng.G is None:
        return None, None, eng.c0
    return eng.G, eng.Gcols, eng.c0


def lean_move(eng, sh, Py_ssize_t[::1] F, Py_ssize_t[::1] C, Py_ssize_t[::1] sel, double rho, Py_ssize_t[::1] R,
              double[::1] x0, decide, bint accurate, double tol, tuple consts, Py_ssize_t swaps, Py_ssize_t update,
              Py_ssize_t npoints, Py_ssize_t nhessians):
    """One solve of :meth:`sparsemodel.lowering.active._LeanNewton.move` (its docstring has the method)
    on the engine ``eng`` and the shared state ``sh`` (a LeanRows): the support F ∪ C[sel] sorted, the
    working block moved to it (``_rows_swap``, at most ``swaps`` rows written, else gathered anew),
    the ridge r = rd + rho on C[R], the start x0 on the support, its linear predictor from the stored
    points (``_start_z``; the ``npoints`` newest kept, ``update`` coordinates moved at most), the
    Hessian kept on these columns (``nhessians`` kept) or the engine's last one moved to them,
    the Newton loop (``_lean_newton``) with the constants ``consts`` (stale, rate, chord, local, safety,
    moved, part), and the bookkeeping (the oracle's counts, the Hessian and point kept). Returns (x, f), or
    None where this path gives no answer."""
    cdef Py_ssize_t nf = F.shape[0], ns = sel.shape[0], nb = nf + ns, a, c, t, at, D, n
    cdef double[:, ::1] JT = sh.JT
    cdef double[::1] rd = sh.rd, linall = sh.lin, rv, linv, uv, xv, mark, zv, d1v, d2v
    cdef double[:, ::1] JTBv
    cdef Py_ssize_t[::1] cs, colsv
    cdef double uu = 0.0, scale
    if nb == 0:
        return None
    D, n = JT.shape[0], JT.shape[1]
    cs_arr = np.empty(nb, dtype=np.intp)
    cs = cs_arr
    for a in range(nf):
        cs[a] = F[a]
    for a in range(ns):
        cs[nf + a] = C[sel[a]]
    for a in range(1, nb):  # (insertion sort: F and C[sel] are each sorted, so this is a merge's work)
        t = cs[a]
        c = a - 1
        while c >= 0 and cs[c] > t:
            cs[c + 1] = cs[c]
            c -= 1
        cs[c + 1] = t
    key = cs_arr.tobytes()  # (the support's, for the Hessians kept by their columns)
    work, wcols = eng.work, eng.wcols
    cols = None
    if work is not None and wcols.shape[0] == nb:
        w = wcols.copy()  # (the slot order a Hessian was stored with stays as it was)
        if _rows_swap(JT, work, w, cs, swaps) >= 0:
            cols, JTB = w, work
    if cols is None:  # (gathered into this engine's block of that size: no fresh pages per gather)
        JTB = eng.blocks.get(nb)
        if JTB is None:
            JTB = eng.blocks[nb] = np.empty((nb, n))
        JTBv = JTB  # (row by row: np.take into ``out`` with its default mode='raise' gathers into a fresh
        for a in range(nb):  # temporary first, 1.4 MB of page faults a gather)
            JTBv[a, :] = JT[cs[a], :]
        cols = cs_arr
    eng.work, eng.wcols = JTB, cols
    colsv = cols
    r, lin, u, x = np.empty(nb), np.empty(nb), np.empty(nb), np.zeros(D)
    rv, linv, uv, xv = r, lin, u, x
    if rho > 0 and R.shape[0] > 0:
        mark = np.zeros(D)
        for a in range(R.shape[0]):
            mark[C[R[a]]] = rho
        for a in range(nb):
            rv[a] = rd[colsv[a]] + mark[colsv[a]]
    else:
        for a in range(nb):
            rv[a] = rd[colsv[a]]
    for a in range(nb):
        c = colsv[a]
        linv[a] = linall[c]
        uv[a] = x0[c]
        xv[c] = uv[a]
        uu += uv[a] * uv[a]
    scale = 1.0 + sqrt(uu)
    points = sh.points
    z = np.empty(n)
    at = _start_z(JT, sh.b, points, xv, JTB, uv, z, update)
    if at >= 0:  # (a stored point: its arrays copied, the loop overwrites its own)
        pt = points[at]
        z, fl, d1, d2 = pt[1].copy(), pt[2], pt[3].copy(), pt[4].copy()
    else:  # (the loop's first pass computes them)
        fl, d1, d2 = NAN, np.empty(n), np.empty(n)
    Gsrc, srccols, c0 = lean_hessian_source(eng, key)
    zv, d1v, d2v, JTBv = z, d1, d2, JTB
    state, its, f, fl, lower, G, c0 = _lean_newton(sh.P, JTBv, linv, rv, uv, zv, d1v, d2v, fl, Gsrc, srccols, colsv, c0,
                                                   tol, decide, accurate, consts[0], consts[1], consts[2], consts[3],
                                                   consts[4], consts[5], consts[6])
    lp = eng.lp
    lp.oracle.charge(solves=1, grads=its, ifo=lp.n_samples * its)
    uu = 0.0
    for a in range(nb):
        uu += uv[a] * uv[a]
    if state > 1 or sqrt(uu) > 1e4 * scale:
        return None
    if G is not None:  # (kept by its columns: a re-solve there starts from it)
        eng.G, eng.Gcols, eng.c0 = G, cols, c0
        hessians = eng.hessians_on
        hessians.pop(key, None)
        if len(hessians) >= nhessians:
            hessians.pop(next(iter(hessians)))
        hessians[key] = (G, c0, cols)
    eng.cols, eng.u, eng.d1 = cols, u, d1
    x = np.zeros(D)
    xv = x
    for a in range(nb):
        xv[colsv[a]] = uv[a]
    if len(points) >= npoints:
        points.pop(0)
    points.append((x, z, fl, d1, d2))
    eng.exact, eng.lower = state == 0, lower
    return x.copy(), f


def lean_grad(double[:, ::1] JT, double[::1] d1, double[::1] lin, Py_ssize_t[::1] at, double[::1] out):
    """out[c] = J_c' d1 + lin_c for the coordinates c in ``at`` (the gradient of f off the support:
    there the ridge's term is 0), each row of JT read once (``lean_dots``)."""
    cdef Py_ssize_t q, c, nr = at.shape[0], n = JT.shape[1]
    cdef double[::1] dots = np.empty(nr)
    if nr == 0:
        return
    lean_dots(&JT[0, 0], n, &at[0], nr, &d1[0], n, 1, n, &dots[0])
    for q in range(nr):
        c = at[q]
        out[c] = dots[q] + lin[c]


def lean_rows32(double[:, ::1] JT):
    """The float32 copy of the rows JT (D x n) that line 15's screen reads (``lean_grad_argmax``) and,
    for each row c, beta_c with |t_c - s_c| <= beta_c ||v||_2 for every vector v: t_c the screen's
    J32_c' v (float32 entries, double products and sums) and s_c ``lean_dots``' J_c' v in double. By
    Cauchy-Schwarz, |J32_c' v - J_c' v| <= ||J32_c - J_c||_2 ||v||_2 (the rounding to float32, exact
    in double), and each computed sum of n products is within gamma_(n+8) sum |x_i v_i| <=
    gamma_(n+8) ||x||_2 ||v||_2 of its own (any order of summation, with or without FMA): beta_c =
    ||J32_c - J_c|| + gamma_(n+8) (||J32_c|| + ||J_c||), inflated by 1e-6 relative for the rounding of
    these norms themselves. An entry outside float32's range gives beta_c = inf (the screen then
    decides nothing)."""
    cdef Py_ssize_t D = JT.shape[0], n = JT.shape[1], c, i
    cdef double e, a, se, sa, sj, u = 1.1102230246251565e-16, gam
    J32 = np.empty((D, n), dtype=np.float32)
    beta = np.empty(D)
    cdef float[:, ::1] Jv = J32
    cdef double[::1] bv = beta
    gam = (n + 8) * u / (1.0 - (n + 8) * u)
    for c in range(D):
        se = sa = sj = 0.0
        for i in range(n):
            Jv[c, i] = <float> JT[c, i]
            a = <double> Jv[c, i]
            e = JT[c, i] - a  # (exact: a is JT's nearest float32)
            se += e * e
            sa += a * a
            sj += JT[c, i] * JT[c, i]
        bv[c] = (sqrt(se) + gam * (sqrt(sa) + sqrt(sj))) * (1.0 + 1e-6)
        if not isfinite(bv[c]):
            bv[c] = INFINITY
    return J32, beta


def lean_grad_argmax(double[:, ::1] JT, float[:, ::1] J32, double[::1] beta, double[::1] d1, double[::1] lin,
                     Py_ssize_t[::1] at):
    """The position q in ``at`` (flat coordinates off the support) of the largest |g_c|, g_c = J_c' d1 +
    lin_c the gradient of f there, the first on ties: exactly np.argmax(np.abs(g[at])) with g from
    ``lean_grad`` (line 15 of ARHT's Algorithm 5), from half the bytes. Every g_c is screened from the
    float32 rows J32 (``lean_rows32``): t_c = J32_c' d1 + lin_c is within delta_c = beta_c ||d1|| (1 +
    1e-9) + 4 u |t_c| + 1e-300 of g_c as ``lean_grad`` computes it (the last two terms: the rounding
    of adding lin_c, and underflow), so only the coordinates whose bracket [|t_c| - delta_c, |t_c| +
    delta_c] reaches the largest lower end can hold the maximum; those rows are computed again in
    double by ``lean_dots`` (the same bits as ``lean_grad``'s: each row's sum is its own) and the
    first largest |g_c| among them is the answer. Returns -1 (the caller computes every g_c in double)
    where a value is not finite (a NaN is np.argmax's answer then)."""
    cdef Py_ssize_t nr = at.shape[0], n = JT.shape[1], q, m = 0, best = -1
    cdef double nd1 = 0.0, L = -INFINITY, t, dl, top = -INFINITY, u = 1.1102230246251565e-16
    if nr == 0 or n == 0:
        return -1
    cdef double[::1] est = np.empty(nr), delta = np.empty(nr), dots = np.empty(nr)
    cdef Py_ssize_t[::1] cand = np.empty(nr, dtype=np.intp), pos = np.empty(nr, dtype=np.intp)
    for q in range(n):
        nd1 += d1[q] * d1[q]
    nd1 = sqrt(nd1) * (1.0 + 1e-9)
    lean_dots32(&J32[0, 0], n, &at[0], nr, &d1[0], n, &est[0])
    for q in range(nr):
        t = fabs(est[q] + lin[at[q]])
        dl = beta[at[q]] * nd1 + 4.0 * u * t + 1e-300
        if not (isfinite(t) and isfinite(dl)):
            return -1
        est[q], delta[q] = t, dl
        if t - dl > L:
            L = t - dl
    for q in range(nr):
        if est[q] + delta[q] >= L:
            cand[m], pos[m] = at[q], q
            m += 1
    lean_dots(&JT[0, 0], n, &cand[0], m, &d1[0], n, 1, n, &dots[0])
    for q in range(m):
        t = fabs(dots[q] + lin[cand[q]])
        if isnan(t):
            return -1
        if t > top:
            top, best = t, pos[q]
    return best


def losses(Problem P, double[::1] z, double[::1] d1, double[::1] d2):
    """sum_i wc_i phi(z_i) at the linear predictor z, with d1 = wc phi'(z) and d2 = wc phi''(z)
    written in place: one pass over the samples (the start of the Newton loop, ``_lean_newton``)."""
    if z.shape[0] != P.n or d1.shape[0] != P.n or d2.shape[0] != P.n:
        raise ValueError(f"losses: z, d1 and d2 need {P.n} entries; got {z.shape[0]}, {d1.shape[0]}, {d2.shape[0]}")
    cdef double total
    cdef double[::1] vw = np.empty(z.shape[0])
    with nogil:
        total = _loss_pass(P, z, d1, d2, vw)
    return total


# ---------------------------------------------------------------------- the fast lower bound


cdef inline double _xlogx(double s) noexcept nogil:
    """s log s with 0 log 0 = 0 (model/atoms/elementwise._xlogx)."""
    return s * log(s) if s > 0 else 0.0


cdef inline double _conj(int code, double a, double s) noexcept nogil:
    """One entry of the data term's conjugate (objective/terms.Term.conjugate): a (sigma phi)*(s / a)
    for a = sigma wc_i > 0, the atom's closed form on its domain (model/atoms/elementwise, each
    atom's ``conjugate_interval``) and +inf outside it; for a = 0, 0 at s = 0 and +inf elsewhere."""
    cdef double u
    if not a > 0:
        return 0.0 if s == 0 else INFINITY
    u = s / a
    if code == 0:  # square: s^2 / 4 on the reals
        if u > -INFINITY and u < INFINITY:
            return a * (0.25 * u * u)
    elif code == 1:  # logistic: s log s + (1 - s) log(1 - s) on [0, 1]
        if u >= 0.0 and u <= 1.0:
            return a * (_xlogx(u) + _xlogx(1.0 - u))
    elif code == 2:  # exp: s log s - s on [0, inf)
        if u >= 0.0 and u < INFINITY:
            return a * (_xlogx(u) - u)
    else:  # log, whose loss is -log z: -1 - log(-s) on (-inf, 0)
        if u > -INFINITY and u < 0.0:
            return a * (-1.0 - log(-u))
    return INFINITY


cdef double _top_sum(double* S, Py_ssize_t nu, Py_ssize_t m, Pair* buf) noexcept nogil:
    """The sum of max(S_u, 0) over the m largest S_u (every unit for m >= nu, none for m <= 0): the
    relaxation's inner maximum over the supports (lowering/bound.Relaxation.node_bound, the sets
    whose supports are every choice of m units); NaN when some S_u is NaN."""
    cdef Py_ssize_t u
    cdef double total = 0.0
    if m <= 0 or nu == 0:
        return 0.0
    for u in range(nu):
        if isnan(S[u]):
            return NAN
    if m >= nu:
        for u in range(nu):
            if S[u] > 0:
                total += S[u]
        return total
    for u in range(nu):
        buf[u].v = -S[u]
        buf[u].i = u
    _first(buf, nu, m)
    for u in range(m):
        if buf[u].v < 0:
            total -= buf[u].v
    return total


cdef class _BoundArgs:
    """What one fast bound reads besides the kernel's Problem: the relaxation's ridge r, its
    constrained coordinates C with their units (unit_of, nu, the budget m), the free coordinates F
    (each held at its dual condition v_j = 0), the data term's conjugate (code, sigma) and scratch."""

    cdef double[::1] r, theta, dtheta, v, V
    cdef Py_ssize_t[::1] C, unit_of, F
    cdef Py_ssize_t nu, m
    cdef int code
    cdef double sigma
    cdef double* S
    cdef Pair* buf

    def __dealloc__(self):
        free(self.S)
        free(self.buf)


cdef double _value_at(Problem P, _BoundArgs A, double[::1] V, double base) noexcept nogil:
    """lb at the dual point whose v is V and whose loss part is ``base`` (const + theta'b - G*(theta)):
    base, the free coordinates' part (0 where V_F = 0, else -inf: held at their condition), less the
    m largest unit scores sum_(j in u) V_j^2 / (2 r_j) (Relaxation.node_bound at the root); -inf
    where not finite."""
    cdef Py_ssize_t p, j
    cdef double val
    for p in range(A.nu):
        A.S[p] = 0.0
    for p in range(A.C.shape[0]):
        j = A.C[p]
        A.S[A.unit_of[p]] += 0.5 * V[j] * V[j] / A.r[j]
    val = base
    for p in range(A.F.shape[0]):
        if V[A.F[p]] != 0:
            val = -INFINITY
            break
    val -= _top_sum(A.S, A.nu, A.m, A.buf)
    return val if isfinite(val) else -INFINITY


cdef double _scaled_value(Problem P, _BoundArgs A, double t, double thb) noexcept nogil:
    """lb at t theta (Relaxation.scaled, segment_values): base = const + t theta'b - G*(t theta),
    v = t (A'theta + lin - lin) + lin."""
    cdef Py_ssize_t i, j
    cdef double conj = 0.0
    for i in range(P.n):
        conj += _conj(A.code, A.sigma * P.wc[i], t * A.theta[i])
    for j in range(P.D):
        A.V[j] = t * (A.v[j] - P.lin[j]) + P.lin[j]
    return _value_at(P, A, A.V, P.const + (t * thb - conj))


def fast_bound(Problem P, x, r, C, unit_of, Py_ssize_t nu, Py_ssize_t m, F, int sigma, bint batched,
               int points, int rounds, int line_iters, double free_tol):
    """The fast lower bound at the answer x (lowering/bound.Relaxation.bound, the module docstring
    there): the dual point theta = grad G(Jx + b), the free coordinates' condition made exact by
    one Newton step in the dual (Relaxation._correct_free, one free coordinate), lb at theta, and
    the best lb along the segment t theta, t in [0, 1]: a grid of ``points`` narrowed ``rounds``
    times when ``batched`` (Relaxation.segment_values), else a golden section of ``line_iters``
    steps. For an elementwise loss with a ridge on every constrained coordinate, no box and the
    free coordinates unridged (Relaxation's ``_ridge_scores`` and ``_free_held``). Returns (ok,
    lb); ok False where the Python path must decide (more than one free coordinate, a correction
    that fails or leaves the conjugate's domain, a conjugate not finite at theta: it then says why
    or takes Fenchel-Young's values)."""
    cdef double[::1] xv = np.ascontiguousarray(x, dtype=float)
    cdef _BoundArgs A = _BoundArgs()
    cdef Py_ssize_t n = P.n, D = P.D, i, j, q, nF
    cdef double conj = 0.0, thb = 0.0, H = 0.0, delta, scale, top, before, best, lo, hi, step, g, t1, t2, f1, f2, val
    cdef Py_ssize_t jbest
    cdef double[::1] ts
    if P.code == SOFTMAX_CODE or xv.shape[0] != D:
        return False, NAN
    A.r, A.C = np.ascontiguousarray(r, dtype=float), np.ascontiguousarray(C, dtype=np.intp)
    A.unit_of, A.F = np.ascontiguousarray(unit_of, dtype=np.intp), np.ascontiguousarray(F, dtype=np.intp)
    A.nu, A.m, A.code, A.sigma = nu, m, P.code, <double> sigma
    nF = A.F.shape[0]
    if nF > 1:
        return False, NAN
    A.theta, A.dtheta = np.empty(n), np.empty(n)
    A.v, A.V = np.empty(D), np.empty(D)
    A.S = <double*> malloc(max(nu, 1) * sizeof(double))
    A.buf = <Pair*> malloc(max(nu, 1) * sizeof(Pair))
    cols = np.flatnonzero(xv).astype(np.intp)
    cdef double[::1] u = np.ascontiguousarray(np.asarray(xv)[cols])
    _value(P, u, cols, P.d1, P.d2, 2 if nF else 1)  # z = Jx + b; d1 = wc phi'(z), d2 = wc phi''(z)
    for i in range(n):
        A.theta[i] = P.d1[i]
    _jt(P, A.theta, A.v)
    for j in range(D):
        A.v[j] += P.lin[j]
    if nF and A.v[A.F[0]] != 0:  # theta += diag(d2) J_F delta with J_F' diag(d2) J_F delta = -v_F
        q = A.F[0]
        for i in range(n):
            H += P.J[i, q] * (P.d2[i] * P.J[i, q])
        if not H > 0:
            return False, NAN
        delta = -A.v[q] / H
        for i in range(n):
            A.dtheta[i] = P.d2[i] * P.J[i, q] * delta
            A.theta[i] += A.dtheta[i]
        _jt(P, A.dtheta, A.V)
        scale, before = 0.0, 0.0
        for j in range(D):
            before = max(before, fabs(A.v[j]))
            A.v[j] += A.V[j]
            scale = max(scale, fabs(A.v[j]))
        if fabs(A.v[q]) > free_tol * (1.0 + scale + before):  # (lowering/bound._hold_free)
            return False, NAN
        A.v[q] = 0.0
    for i in range(n):
        conj += _conj(A.code, A.sigma * P.wc[i], A.theta[i])
        thb += A.theta[i] * P.b[i]
    if not isfinite(conj):
        return False, NAN
    best = _value_at(P, A, A.v, P.const + (thb - conj))
    if nF and P.lin[A.F[0]] != 0:  # the free condition needs t = 1
        return True, best
    if batched:
        ts = np.empty(points)
        lo, hi = 0.0, 1.0
        for q in range(rounds):
            step = (hi - lo) / (points - 1)
            for i in range(points):  # np.linspace(lo, hi, points)
                ts[i] = i * step + lo if step != 0 else (i / <double> (points - 1)) * (hi - lo) + lo
            ts[points - 1] = hi
            jbest, top = 0, -INFINITY
            for i in range(points):  # (np.argmax: the first of the largest)
                val = _scaled_value(P, A, ts[i], thb)
                if i == 0 or val > top:
                    jbest, top = i, val
            best = max(best, top)
            lo, hi = max(0.0, ts[jbest] - step), min(1.0, ts[jbest] + step)
        return True, best
    g = (sqrt(5.0) - 1.0) / 2.0
    lo, hi = 0.0, 1.0
    t1, t2 = hi - g * (hi - lo), lo + g * (hi - lo)
    f1, f2 = _scaled_value(P, A, t1, thb), _scaled_value(P, A, t2, thb)
    best = max(best, max(f1, max(f2, _scaled_value(P, A, 0.0, thb))))
    for q in range(line_iters):
        if f1 >= f2:
            hi, t2, f2 = t2, t1, f1
            t1 = hi - g * (hi - lo)
            f1 = _scaled_value(P, A, t1, thb)
        else:
            lo, t1, f1 = t1, t2, f2
            t2 = lo + g * (hi - lo)
            f2 = _scaled_value(P, A, t2, thb)
        best = max(best, max(f1, f2))
    return True, best
