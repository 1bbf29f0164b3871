"""Certified answers (docs/certify.md): a lower bound on the best objective of a sparsity-constrained
composite problem, from the Fenchel dual of its perspective relaxation. docs/certify.md explains
how to read it; this docstring is the derivation the code follows.

**The problem.** The lowered objective is (objective/design.py)

    f(x) = const + lin'x + G(Ax + b) + sum_j (r_j / 2) x_j^2,        G(z) = sum_t g_t(z_t),

where the terms whose map is a separable ridge (``Design.separable_diagonal``: every entry reads
one coordinate, no data, no offset) make up the diagonal r >= 0, and every other term
g_t(z) = c_t sum_i w_ti phi_t(z_i) is a loss with a convex conjugate (the atom's, ``Term.conjugate``).
The constraint is nnz over units (coordinates, or groups) of the constrained coordinates C: at most
k units nonzero; F (every other coordinate) is free. A box lo <= x <= hi may bound any coordinate
(0 in the box on C, as the sparsity set requires).

**The relaxation.** With an indicator z_u in {0, 1} per unit (x_j = 0 unless z_u(j) = 1), write the
ridge of a constrained coordinate as the perspective (r_j / 2) x_j^2 / z_u and its box as
z_u lo_j <= x_j <= z_u hi_j; relax z to Z = {0 <= z <= 1, sum_u z_u <= k}. Every feasible x (z its
support's indicator) has the same objective in the relaxation, so the relaxation's minimum is at
most the true one.

**The dual bound.** Fenchel: G(Ax + b) = sup_theta theta'(Ax + b) - G*(theta). For any theta,
min over (x, z) of the relaxation >= min over (x, z) of [theta'b - G*(theta) + v'x + the ridge and
box parts], v = A'theta + lin (weak duality: min sup >= sup min; nothing else is assumed, so
every theta gives a valid bound). The inner minimum separates by coordinate. With
h_j(v) = min over y in [lo_j, hi_j] of (v y + r_j y^2 / 2) (<= 0 when the interval holds 0;
-v^2 / (2 r_j) without a box; min(v lo_j, v hi_j) for a box without ridge, the big-M form):

* a constrained coordinate contributes z_u h_j(v_j) (substitute x_j = z_u y), so a unit scores
  s_u = -sum_(j in u) h_j(v_j) >= 0 and the minimum over Z takes the k largest scores;
* a free coordinate contributes h_j(v_j): finite with a ridge or a finite box, and otherwise it
  demands v_j = 0 (an intercept: its dual constraint);

    lb(theta) = const + theta'b - G*(theta) + sum_(j in F) h_j(v_j) - (sum of the k largest s_u).

Without a ridge or a box on C (and without the shift below) s_u is infinite for almost every
theta: no finite bound exists, and the words say so instead of a number.

**The dual point.** theta = grad G(A x + b) at a point x (the solver's answer: one transposed
product, A'theta, the *fast* bound); then G*(theta) = theta'z - G(z) (Fenchel-Young's equality) and
lb is f(x) minus what the perspective costs: at a restricted minimizer the support's scores are
r_j x_j^2 / 2 and the others g_j^2 / (2 r_j) (g the gradient); lb = f(x) exactly when the support's
scores are the k largest. The free condition v_F = 0 (no ridge, no finite box) holds at the
answer only to the solver's tolerance; it is made exact (to rounding) by the linear correction
theta += H_loss A_F Delta with A_F' H_loss A_F Delta = -v_F (one Newton step of the free
coordinates, written in the dual), and G* is then the atom's conjugate at the corrected theta.

**Tighter (bound="tight").** The relaxation in z alone, Phi(z) = min_x f(x) + sum_j (r_j / 2)
(1 / z_u - 1) x_j^2 (boxes scaled by z_u), is convex, and its linearization at z is exactly
lb(theta(x(z))): the Frank-Wolfe gap. So a few Frank-Wolfe steps on z (each one restricted,
weighted-ridge solve on the units z touches, and one transposed product) raise the bound towards
the relaxation's optimum; the best lb seen is kept (every one is valid).

**The shift (least squares, OKRidge's trick).** For a least-squares objective the free
coordinates are eliminated exactly (a Schur complement), leaving c + x'Lx - 2h'x + sum r_j x_j^2/2
on C with L the Gram of the loss part. With mu <= lambda_min(L) (n > p makes it positive),
x'Lx = x'(L - mu I)x + mu ||x||^2: the quadratic part stays convex and the ridge grows to
r_j + 2 mu, so a bound exists without a ridge and is much tighter with a small one. Then G is the
quadratic itself (A = I): theta = v = 2(L - mu I)x - 2h and G*(v) = v'x - G(x). mu is taken a
relative 1e-6 under the computed eigenvalue, so rounding cannot make L - mu I indefinite. A box on
C stays (the scores are -h_j(v_j) with r_j + 2 mu); the free coordinates must be unbounded.

**Linear constraints** (``A_e x = b_e``, ``A_i x <= b_i``; ``lp.linear``). They stay in the
relaxation: it minimizes over x in the polyhedron as well, which is still a convex problem in
(x, z) (the box scaled by z is linear in (x, z)), and every feasible point still keeps its
objective. In the dual they get multipliers mu (free) and nu >= 0 (Lagrange): for any theta, mu and
nu >= 0, the relaxed minimum is at least the same minimum with mu'(A_e x - b_e) + nu'(A_i x - b_i)
added and the rows dropped, so

    v = A'theta + lin + A_e'mu + A_i'nu,    lb(theta, mu, nu) = lb(theta) with v, - mu'b_e - nu'b_i,

the same separable formula (weak duality again: every mu, nu >= 0 gives a valid bound). The
multipliers are the KKT multipliers of the relaxation at x (``Relaxation.multipliers``: least
squares on the stationarity of the coordinates strictly inside their scaled box over the equalities
and the active inequalities, nu then clipped at 0), so the bound equals the relaxation's value at
its minimizer. x(z) minimizes the relaxation at z with the rows kept (an active-set QP in the
shifted form, sequential QP otherwise), and a node none of whose points satisfies the rows (HiGHS's
verdict of infeasibility on the polyhedron with the units fixed out at zero) is closed with bound
+inf. The rows also bound single coordinates (``LinearSet.implied_bounds``: sum(w) == 1 with
w >= 0 gives w <= 1), a valid big-M box where the model wrote none (kept holding 0, so every score
stays >= 0). The shifted form below applies when the rows read no free coordinate (the free ones
are eliminated); its box may bound C.

**Nodes (solvers/bnb.py).** Units fixed in (z_u = 1) contribute their whole -s_u, units fixed out
nothing, and the undecided ones their k - |in| largest scores: the same formula, one theta.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from ..errors import ModelError, NoBoundError
from ..numerics.lstsq import lstsq, lstsq_normal
from ..numerics.newton import newton
from ..numerics.qp import Polyhedron, constrained_newton, dense_design, infeasible, solve_qp
from ..numerics.smooth import box_newton

if TYPE_CHECKING:
    from .lowered import LoweredProblem

BOUND_MODES = ("fast", "tight", "none")
QUAD_LIMIT = 6000  # coordinates: the shifted (least-squares) form keeps a dense Gram of C up to this size
FREE_TOL = 1e-8  # the free condition v_F = 0 after the correction, relative to the dual's scale
TIGHT_ITERS = 30  # Frank-Wolfe steps of bound="tight"
# x(z) only picks the dual point (any x gives a valid bound): a few warm-started Newton steps suffice
PHI_TOL = 1e-8
PHI_ITERS = 10
HESS_REFRESH = 4  # Frank-Wolfe steps of bnb's nodes reuse a Hessian this many times (Relaxation.newton_point)
HESS_FRESH_STEPS = 10  # ... except the first steps of a schedule (z moves by 2 / (t + 2)), which form their own
STALL_STEPS = 3  # decided Frank-Wolfe: the window of steps whose progress is extrapolated
LINE_ITERS = (
    10  # golden-section steps of the fast bound's search over t theta (t to ~1e-2: lb is concave, flat near its top)
)
# the same search where the conjugates and unit scores take a batch of t at once: a grid of
# SEGMENT_POINTS points on [0, 1], narrowed to its best point's neighbours, SEGMENT_ROUNDS times
# (t to (2 / 15) / 15 ~ 9e-3 as well, in two passes instead of thirteen evaluations); it pays while
# a pass costs its calls more than its arithmetic: up to SEGMENT_ENTRIES loss values in a pass
# (measured, logistic with an intercept: 0.42 / 0.45 / 0.54 of the golden section's time at
# n = 100 / 200 / 500, 1.09 at n = 5000)
SEGMENT_POINTS = 16
SEGMENT_ROUNDS = 2
SEGMENT_ENTRIES = 32768


def h_values(v: np.ndarray, r: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """min over y in [lo, hi] of v y + r y^2 / 2, per coordinate (-inf where unbounded below)."""
    out = np.empty(len(v))
    pos = r > 0
    if pos.any():
        y = np.clip(-v[pos] / r[pos], lo[pos], hi[pos])
        out[pos] = v[pos] * y + 0.5 * r[pos] * y * y
    if (~pos).any():
        vz, lz, hz = v[~pos], lo[~pos], hi[~pos]
        with np.errstate(invalid="ignore"):
            out[~pos] = np.where(vz > 0, vz * lz, np.where(vz < 0, vz * hz, 0.0))
    return out


def _free_step(H: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """The free coordinates' correction: the least-squares solution of H delta = rhs (H = A_E' H_loss
    A_E, positive semidefinite); one free coordinate (an intercept) by a division, what lstsq returns
    without its call."""
    if len(rhs) == 1 and H[0, 0] > 0:
        return rhs / H[0, 0]
    return np.linalg.lstsq(H, rhs, rcond=None)[0]


def _hold_free(v: np.ndarray, before: np.ndarray, E: np.ndarray) -> None:
    """After the free coordinates' correction: v_E (zero to rounding, relative to v and the dual
    point ``before`` it) set to exactly 0, or NoBoundError where the condition could not be met."""
    scale = 1.0 + float(np.max(np.abs(v), initial=0.0)) + float(np.max(np.abs(before), initial=0.0))
    if float(np.max(np.abs(v[E]), initial=0.0)) > FREE_TOL * scale:
        raise NoBoundError(
            "no lower bound: the free coordinates' dual condition could not be met (a free coordinate that "
            "no loss reads, with a linear term: the objective is unbounded along it)"
        )
    v[E] = 0.0


def top_sum(s: np.ndarray, m: int) -> float:
    """The sum of the m largest entries of s (0 for m <= 0)."""
    if m <= 0 or len(s) == 0:
        return 0.0
    if m >= len(s):
        return float(np.sum(s))
    part = np.partition(s, len(s) - m)[len(s) - m :]
    return float(np.sum(part))


@dataclass
class Anchor:
    """A dual point: ``base`` = const + theta'b - G*(theta) (+ nothing else), ``v`` = A'theta + lin
    on the relaxation's coordinates (every coordinate; C only in the shifted form), and the
    primal point it came from."""

    base: float
    v: np.ndarray
    x: np.ndarray
    thetas: list[np.ndarray] | None = None  # theta per loss term (None in the shifted form)
    rows_base: float = 0.0  # -(mu'b + nu'h): the linear constraints' multipliers' part of ``base``
    # the gradient of the loss terms (and the linear one) at x, before the free coordinates' correction:
    # what a Newton step of x(z) needs (Relaxation.newton_point); None in the shifted form
    grad: np.ndarray | None = None
    # each loss term's curvatures coef * phi''(A x + b) at x, when asked for (Relaxation.newton_point)
    curv: list[np.ndarray] | None = None
    # (the Hessian of f on some coordinates at this or an earlier point of the same Frank-Wolfe run, each
    # coordinate's position in it or -1, its age in steps): the next Newton step of x(z) uses it
    # (Relaxation.newton_point)
    hess: tuple[np.ndarray, np.ndarray, int] | None = None
    # the objective f(x) at the primal point (None where not computed): with the weights z that x was
    # found at, the relaxation's value there, an upper bound on its minimum (Relaxation.relaxed_value)
    primal: float | None = None
    # the loss terms' theta before the free coordinates' correction, where ``grad`` is left to be formed on
    # the columns a Newton step moves (Relaxation._dense_anchor)
    raw_thetas: list[np.ndarray] | None = None


@dataclass
class NodeBound:
    """The bound of a node at one dual point, with what screening and branching read."""

    value: float
    scores: np.ndarray  # per unit
    top: np.ndarray  # the undecided units counted (the k - |in| largest scores)
    anchor: Anchor
    const: float = -np.inf  # the part that does not depend on the node: base + the free coordinates' part

    def value_at(self, units: np.ndarray) -> float:
        """The bound at the same dual point for the one support ``units`` (those fixed in, every
        other unit out): const - their scores."""
        with np.errstate(invalid="ignore"):
            val = self.const - float(np.sum(self.scores[np.asarray(units, dtype=np.int64)]))
        return val if np.isfinite(val) else -np.inf


@dataclass
class BoundReport:
    """What a Result carries: the bound (None: none exists, ``note`` says why) and how it was got."""

    value: float | None
    how: str  # fast, tight, bnb, or "" when none
    note: str
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


class Relaxation:
    """The perspective relaxation of a lowered problem with an nnz constraint (the module
    docstring). Raises NoBoundError (words, not a number) when no finite bound exists.

    ``shift``: for least squares, eliminate the free coordinates and move the smallest eigenvalue
    of the Gram into the perspective part (the dense Gram of C is formed: n p^2 work).

    Its lowering ``lp`` is held by a weak reference, pointed at the caller's lowering each time
    :func:`relaxation` hands it out (the lowerings that share one cache are the same model): the
    cache is the lowering's, and a strong reference both ways made a cycle that kept each
    lowering's arrays alive until the garbage collector ran."""

    @property
    def lp(self) -> LoweredProblem:
        lp = self._lp()
        if lp is None:  # pragma: no cover - every holder reaches it through a live lowering
            raise RuntimeError("the lowering of this relaxation is gone")
        return lp

    @lp.setter
    def lp(self, lp: LoweredProblem) -> None:
        self._lp = weakref.ref(lp)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_lp"] = self._lp()  # (a lowering pickled with its cache: the reference made strong)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        lp = state.pop("_lp")
        self.__dict__.update(state)
        self.lp = lp

    def __init__(self, lp: LoweredProblem, shift: bool = False):
        self.lp = lp
        s = lp.set
        if s is None or not s.thresholds:
            raise NoBoundError("the problem has no nnz(...) <= k constraint: there is nothing to certify")
        self.units = s.bound_units()
        d = lp.design
        if d is None or lp.precision is not None or lp.eigbox is not None:
            raise NoBoundError(
                "no lower bound for this objective: the perspective relaxation needs a sum of convex losses of "
                "affine maps (least squares, logistic, Poisson, Huber, softmax, a convex func)"
            )
        self.design = d
        n = lp.n
        self.n = n
        self.C = self.units.coords
        self.F = self.units.free
        r = np.zeros(n)
        self.loss: list[int] = []
        for i in range(len(d.terms)):
            diag = d.separable_diagonal(i)
            if diag is not None:
                r += diag
            else:
                self.loss.append(i)
        if np.any(r < 0):
            raise NoBoundError("a ridge term has a negative coefficient: the objective is not convex, no bound")
        self.r = r
        self.lo = lp.box.lo.copy() if lp.box is not None else np.full(n, -np.inf)
        self.hi = lp.box.hi.copy() if lp.box is not None else np.full(n, np.inf)
        # linear constraints A x = b, G x <= h over the flat coordinates: kept by multipliers (the
        # module docstring), and the bounds they imply on single coordinates (w <= 1 on the simplex)
        self.rows: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        lin = lp.linear
        if lin is not None:
            Aeq = np.zeros((len(lin.b), n))
            Aeq[:, lin.cols] = lin.A
            Gin = np.zeros((len(lin.h), n))
            Gin[:, lin.cols] = lin.G
            self.rows = (Aeq, lin.b.copy(), Gin, lin.h.copy())
            self.lo, self.hi = lin.implied_bounds(self.lo, self.hi)
        self.quad: dict[str, Any] | None = None
        self.shift = 0.0
        self._steps: bool | None = None  # whether Newton steps may stand in for x(z) (steps_apply)
        self._Js: list[np.ndarray] | None = None  # the loss terms' dense Jacobians (newton_point)
        if shift and shift_pays(lp):
            self._quadratic()
        if self.quad is None:
            for i in self.loss:
                said = _no_conjugate(d.terms[i])
                if said is not None:
                    raise NoBoundError(f"no lower bound: {said}")
            self._check_finite(self.r[self.C], self.lo[self.C], self.hi[self.C])
            F = self.F
            unbounded = (self.r[F] == 0) & ~(np.isfinite(self.lo[F]) & np.isfinite(self.hi[F]))
            self.E = F[unbounded]  # free coordinates whose dual condition is v_j = 0
        else:
            self.E = np.empty(0, dtype=np.int64)
        C = self.C
        # the common case's closed forms (coordinate_scores, free_part): a ridge and no box on C, and
        # free coordinates that are all held at their dual condition
        self._ridge_scores = self.quad is None and bool(np.all(self.r[C] > 0)) and not self._boxed(C)
        self._free_held = self.quad is None and len(self.E) == len(self.F)

    # ------------------------------------------------------------------ set-up
    def _boxed(self, cols: np.ndarray) -> bool:
        return bool(np.isfinite(self.lo[cols]).any() or np.isfinite(self.hi[cols]).any())

    def _check_finite(self, r: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
        bad = (r <= 0) & ~(np.isfinite(lo) & np.isfinite(hi))
        if bad.any():
            s = self.lp.set
            raise NoBoundError(
                f"no finite lower bound for {s.bound_text()}: {int(bad.sum())} constrained coordinate(s) have "
                "neither a ridge nor a box, so the relaxation of the sparsity constraint is the unconstrained "
                "problem"
                + (
                    " (least squares with more samples than coordinates would get one from the Gram's smallest "
                    "eigenvalue: bound='tight' or solver bnb)"
                    if self.design.least_squares
                    else ""
                ),
                s.span,
                f"add a ridge (lam/2 * sum_squares({s.variable.name})) or bounds (-M <= {s.variable.name} <= M)",
            )

    def _quadratic(self) -> None:
        """The shifted least-squares form on C (the module docstring)."""
        d, C, F = self.design, self.C, self.F
        ne = d.normal_equations(np.arange(self.n))
        if ne is None:
            return
        G, h, c0 = ne  # f(u) = c0 + u'G u - 2 h'u, ridge inside G's diagonal (r / 2)
        if len(F):
            GFF = G[np.ix_(F, F)]
            GCF = G[np.ix_(C, F)]
            W = np.linalg.lstsq(GFF, np.column_stack([GCF.T, h[F]]), rcond=None)[0]
            S = G[np.ix_(C, C)] - GCF @ W[:, :-1]
            hC = h[C] - GCF @ W[:, -1]
            c = c0 - float(h[F] @ W[:, -1])
        else:
            S, hC, c = G[np.ix_(C, C)].copy(), h[C].copy(), c0
        S = 0.5 * (S + S.T)
        rC = self.r[C]
        L = S - np.diag(0.5 * rC)
        lam = float(sla.eigvalsh(L, subset_by_index=[0, 0], check_finite=False)[0]) if len(C) else 0.0
        scale = float(np.max(np.abs(np.diag(L)), initial=0.0))
        mu = lam * (1 - 1e-6) - 1e-12 * scale * len(C)
        mu = max(mu, 0.0)
        rq = rC + 2 * mu
        if np.any(rq <= 0):
            return  # no shift and no ridge: the plain form says why there is no bound
        self.shift = mu
        self.quad = {"S": S, "P": L - mu * np.eye(len(C)), "h": hC, "c": c, "r": rq, "lam_min": lam}
        if self.rows is not None:  # in C's coordinates (shift_pays: the rows read no free coordinate)
            self.rows = (self.rows[0][:, C], self.rows[1], self.rows[2][:, C], self.rows[3])
        # without rows or a box, x(z) is one linear solve and a support's optimum a closed form
        self.quad["direct"] = self.rows is None and not (np.isfinite(self.lo[C]).any() or np.isfinite(self.hi[C]).any())

    @property
    def shifted(self) -> bool:
        return self.quad is not None

    def describe(self) -> str:
        """Which bound this problem gets, in words (``sparsemodel check``, and every certified
        Result's note: made once per relaxation)."""
        said = self.__dict__.get("_described")
        if said is None:
            said = self._described = self._describe()
        return said

    def _describe(self) -> str:
        parts = []
        r = self.r[self.C]
        if r.any():
            parts.append(
                f"ridge {float(np.min(r)) / 2:.3g} .. {float(np.max(r)) / 2:.3g} on the constrained coordinates"
            )
        if np.isfinite(self.lo[self.C]).any() or np.isfinite(self.hi[self.C]).any():
            parts.append("the box (big-M)")
        if self.shifted and self.shift > 0:
            parts.append(f"the Gram's smallest eigenvalue {self.quad['lam_min']:.4g} moved into the perspective")
        if len(self.E):
            parts.append(f"{len(self.E)} free coordinate(s) held at their dual condition")
        if self.rows is not None:
            ne, ni = len(self.rows[1]), len(self.rows[3])
            parts.append(
                "the linear constraints kept by multipliers ("
                + " and ".join(
                    t
                    for t in (
                        f"{ne} equalit{'y' if ne == 1 else 'ies'}" if ne else "",
                        f"{ni} inequalit{'y' if ni == 1 else 'ies'}" if ni else "",
                    )
                    if t
                )
                + ")"
            )
        return "perspective relaxation (" + ", ".join(parts) + ")" if parts else "perspective relaxation"

    # ------------------------------------------------------------------ dual points
    def anchor(self, x: np.ndarray, z: np.ndarray | None = None, curv: bool = False) -> Anchor:
        """The dual point theta = grad G at x (a flat point; in the shifted form its C part), with
        the multipliers of the linear constraints at x (:meth:`multipliers`; z: the unit weights x
        minimizes the relaxation at, default its support's indicator). ``curv``: keep the loss
        terms' curvatures at x too (the next Newton step of :meth:`newton_point`)."""
        if self.quad is not None:
            q = self.quad
            xc = x[self.C] if len(x) == self.n else x
            Px = q["P"] @ xc
            v = 2.0 * (Px - q["h"])
            base = q["c"] - float(xc @ Px)
            rows_base = 0.0
            if self.rows is not None:
                v, rows_base = self.multipliers(xc, v, z)
            primal = q["c"] + float(xc @ Px) - 2.0 * float(q["h"] @ xc) + 0.5 * float(q["r"] @ (xc * xc))
            return Anchor(base + rows_base, v, xc, rows_base=rows_base, primal=primal)
        d = self.design
        if curv and self._Js is not None and len(self.E) and self.rows is None:
            return self._dense_anchor(x)
        v = d.lin.copy()
        zs, thetas, curvs, pre = [], [], [], []
        primal = float(d.const) + float(d.lin @ x) + 0.5 * float(self.r @ (x * x))  # (+ the losses, below)
        dense_J = self._Js if curv and self._Js is not None else None  # (the steps' dense columns: same products)
        for a_, i in enumerate(self.loss):
            t = d.terms[i]
            zt = dense_J[a_] @ x + t.map.b if dense_J is not None else t.map.value(x)
            der = t.derivs(zt, 2 if curv else 1)
            primal += t.coef * float(np.sum(der[0]))
            d1 = der[1]
            if curv:
                curvs.append(t.coef * np.asarray(der[2], dtype=float).reshape(-1))
            th = t.coef * np.asarray(d1, dtype=float).reshape(zt.shape)
            if dense_J is not None and len(self.E) and self.rows is None:
                # A'theta and the free columns' Hessian block A' diag(c) A_E in one pass over the columns
                HJ = curvs[-1][:, None] * dense_J[a_][:, self.E]
                T = dense_J[a_].T @ np.column_stack([th.reshape(-1), HJ])
                v += T[:, 0]
                pre.append((HJ, T[:, 1:]))
            else:
                v += dense_J[a_].T @ th if dense_J is not None else t.map.vjp(th)
            zs.append(zt)
            thetas.append(th)
        raw = v.copy()
        rows_base = 0.0
        if self.rows is not None:
            v, rows_base = self.multipliers(x, v, z)
        corrected = False
        if len(self.E) and np.any(v[self.E] != 0):
            v, thetas = self._correct_free(x, v, zs, thetas, pre if len(pre) == len(self.loss) else None)
            corrected = True
        base = float(d.const)
        for i, z, th in zip(self.loss, zs, thetas):
            t = d.terms[i]
            conj = np.asarray(t.conjugate(th.reshape(-1)), dtype=float)
            if not np.all(np.isfinite(conj)):
                if corrected:
                    raise NoBoundError(
                        "no lower bound at this point: the dual point left the domain of the loss's conjugate "
                        "when the free coordinates' condition was imposed"
                    )
                conj = np.where(np.isfinite(conj), conj, self._fenchel_young(t, z, th))
            base += float(th.reshape(-1) @ np.asarray(t.map.b, dtype=float).reshape(-1)) - float(np.sum(conj))
        return Anchor(base + rows_base, v, x, thetas, rows_base, grad=raw, curv=curvs if curv else None, primal=primal)

    def _dense_anchor(self, x: np.ndarray) -> Anchor:
        """:meth:`anchor` with ``curv`` on the steps' dense columns (:meth:`steps_apply`) and free
        coordinates held at their dual condition: the same dual point, with the correction of
        :meth:`_correct_free` solved first on the free columns alone (their gradient and Hessian
        block, J_E'theta and J_E' diag(c) J_E: |E| columns), so that A'theta over every column is
        one product, at the corrected theta. The forward product reads only the columns x uses. The
        gradient before the correction, which a Newton step of x(z) needs on the columns it moves,
        is left to :meth:`_raw_gradient` (the uncorrected theta is kept)."""
        d, E = self.design, self.E
        nz = np.flatnonzero(x)
        primal = float(d.const) + float(d.lin[nz] @ x[nz]) + 0.5 * float(self.r[nz] @ (x[nz] * x[nz]))
        vE = d.lin[E].astype(float)
        H = np.zeros((len(E), len(E)))
        parts = []
        for J, i in zip(self._Js, self.loss):
            t = d.terms[i]
            zt = (J[:, nz] @ x[nz] if 2 * len(nz) < J.shape[1] else J @ x) + t.map.b
            val, d1, d2 = t.derivs(zt, 2)
            primal += t.coef * float(np.sum(val))
            c = t.coef * np.asarray(d2, dtype=float).reshape(-1)
            th = t.coef * np.asarray(d1, dtype=float).reshape(-1)
            JE = J[:, E]
            HJ = c[:, None] * JE
            vE += JE.T @ th
            H += JE.T @ HJ
            parts.append((t, zt, th, c, HJ))
        delta = _free_step(H, -vE)
        v = d.lin.astype(float)
        thetas, raws, curvs = [], [], []
        base = float(d.const)
        for J, (t, zt, th, c, HJ) in zip(self._Js, parts):
            th2 = th + HJ @ delta
            v += J.T @ th2
            conj = np.asarray(t.conjugate(th2), dtype=float)
            if not np.all(np.isfinite(conj)):
                raise NoBoundError(
                    "no lower bound at this point: the dual point left the domain of the loss's conjugate "
                    "when the free coordinates' condition was imposed"
                )
            base += float(th2 @ np.asarray(t.map.b, dtype=float).reshape(-1)) - float(np.sum(conj))
            thetas.append(th2.reshape(zt.shape))
            raws.append(th)
            curvs.append(c)
        _hold_free(v, vE, E)
        return Anchor(base, v, x, thetas, curv=curvs, primal=primal, raw_thetas=raws)

    def _raw_gradient(self, a: Anchor, cols: np.ndarray, Jcs: list[np.ndarray] | None = None) -> np.ndarray:
        """The gradient of the loss terms and the linear one at the anchor's x on the columns
        ``cols``, before the free coordinates' correction (what a Newton step of x(z) needs);
        ``Jcs``: the dense columns ``cols`` of each loss term, when gathered already."""
        if a.grad is not None:
            return a.grad[cols]
        g = self.design.lin[cols].astype(float)
        for J, th in zip(Jcs if Jcs is not None else [J[:, cols] for J in self._Js], a.raw_thetas):
            g += th @ J
        return g

    def multipliers(self, x: np.ndarray, v: np.ndarray, z: np.ndarray | None) -> tuple[np.ndarray, float]:
        """v + A'mu + G'nu and -(mu'b + nu'h): the linear constraints' multipliers added to the dual
        point (``x`` and ``v`` in the relaxation's coordinates: every coordinate, C in the shifted
        form). Any mu and any nu >= 0 give a valid bound (weak duality); these are the KKT
        multipliers of the relaxation at x, which make the bound equal to its value when x is
        the relaxation's minimizer: least squares on the stationarity of the coordinates strictly
        inside their (scaled) box, v_j + r_j x_j / z_j + (A'mu + G'nu)_j = 0, over every equality and
        the inequalities active at x, the inequalities' multipliers then clipped at 0."""
        Aeq, beq, Gin, hin = self.rows
        shifted = self.quad is not None
        cols = self.C if shifted else np.arange(self.n)
        r = self.quad["r"] if shifted else self.r
        lo, hi = self.lo[cols], self.hi[cols]
        zc = np.ones(len(cols))
        units = self.units
        pos_c = np.arange(len(self.C)) if shifted else self.C
        if z is None:
            zu = self.support_weights(x)
        else:
            zu = np.asarray(z, dtype=float)
        zc[pos_c] = zu[units.unit_of]
        on = zc > 0
        scale = 1e-9 * (1.0 + float(np.max(np.abs(x), initial=0.0)))
        with np.errstate(divide="ignore", invalid="ignore"):
            grad = v + np.where(on, r * x / np.where(on, zc, 1.0), 0.0)
            inside = on & (x > zc * lo + scale) & (x < zc * hi - scale)
        slack = hin - Gin @ x
        active = slack <= 1e-8 * (1.0 + np.abs(hin) + np.abs(Gin) @ np.abs(x))
        R = np.vstack([Aeq, Gin[active]])
        if len(R) == 0 or not inside.any():
            return v, 0.0
        lam = np.linalg.lstsq(R[:, inside].T, -grad[inside], rcond=None)[0]
        mu = lam[: len(beq)]
        nu = np.zeros(len(hin))
        nu[active] = np.maximum(lam[len(beq) :], 0.0)
        if not (np.all(np.isfinite(mu)) and np.all(np.isfinite(nu))):
            return v, 0.0
        return v + Aeq.T @ mu + Gin.T @ nu, -float(mu @ beq) - float(nu @ hin)

    def scaled(self, a: Anchor, t: float) -> Anchor:
        """The dual point t theta (0 <= t <= 1) of the anchor ``a``: v = t A'theta + lin, and
        base = const + t theta'b - G*(t theta) from the atoms' conjugates. Valid only where the free
        coordinates' condition survives the scaling (no linear term on them; see :meth:`bound`)."""
        d = self.design
        base = float(d.const)
        for i, th in zip(self.loss, a.thetas or []):
            term = d.terms[i]
            conj = np.asarray(term.conjugate(t * th.reshape(-1)), dtype=float)
            base += t * float(th.reshape(-1) @ np.asarray(term.map.b, dtype=float).reshape(-1)) - float(np.sum(conj))
        base += t * a.rows_base  # (mu, nu scaled with theta: v's part A'mu + G'nu is scaled below)
        return Anchor(base, t * (a.v - d.lin) + d.lin, a.x, a.thetas, t * a.rows_base)

    @staticmethod
    def _fenchel_young(t: Any, z: np.ndarray, th: np.ndarray) -> np.ndarray:
        """g*(theta) = theta'z - g(z) per entry (per row) where theta = grad g(z): the conjugate's
        value at a gradient, used where the closed form rounds to infinity at its domain's edge."""
        vals = t.coef * np.asarray(t.derivs(z, 0)[0], dtype=float).reshape(-1)
        prod = (th * z).reshape(-1)
        if t.rowwise:
            prod = prod.reshape(len(vals), -1).sum(axis=1)
        return prod - vals

    def _correct_free(
        self,
        x: np.ndarray,
        v: np.ndarray,
        zs: list[np.ndarray],
        thetas: list[np.ndarray],
        pre: list[tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """theta += H_loss A_E Delta with A_E' H_loss A_E Delta = -v_E: the free coordinates'
        dual condition v_E = 0, exact to rounding (the module docstring). ``pre``: per loss term,
        H_loss A_E and A' H_loss A_E, computed already (:meth:`anchor` with the steps' dense
        columns: the same products, in the pass that gave A'theta)."""
        d, E = self.design, self.E
        if pre is not None:
            HJs = [hj for hj, _ in pre]
            HE = sum(he for _, he in pre)
            H = HE[E]
        else:
            H = np.zeros((len(E), len(E)))
            HJs = []
            for i, z in zip(self.loss, zs):
                t = d.terms[i]
                J = d.term_columns(i, E)
                J = J.toarray() if sp.issparse(J) else np.asarray(J, dtype=float)
                HJ = t.coef * np.asarray(t.hessian_apply(z.reshape(-1), J.reshape(-1, len(E))), dtype=float)
                HJ = HJ.reshape(-1, len(E))
                H += J.reshape(-1, len(E)).T @ HJ
                HJs.append(HJ)
        delta = _free_step(H, -v[E])
        new_v = v.copy()
        new_thetas = []
        for i, th, HJ in zip(self.loss, thetas, HJs):
            t = d.terms[i]
            dth = (HJ @ delta).reshape(th.shape)
            new_thetas.append(th + dth)
            if pre is None:
                new_v += t.map.vjp(dth)
        if pre is not None:
            new_v += HE @ delta
        _hold_free(new_v, v, E)
        return new_v, new_thetas

    # ------------------------------------------------------------------ bounds
    def coordinate_scores(self, v: np.ndarray) -> np.ndarray:
        """-h_j(v_j) on C (>= 0), in the order of C."""
        C = self.C
        if self.quad is not None:
            r = self.quad["r"]
            if self.quad["direct"]:
                return 0.5 * v * v / r
            return -h_values(v, r, self.lo[C], self.hi[C])
        if self._ridge_scores:  # h_j(v) = -v^2 / (2 r_j)
            vc = v[C]
            return 0.5 * vc * vc / self.r[C]
        return -h_values(v[C], self.r[C], self.lo[C], self.hi[C])

    def free_part(self, v: np.ndarray) -> float:
        if self.quad is not None or len(self.F) == 0:
            return 0.0
        F = self.F
        if self._free_held:  # (no ridge, no box: 0 at v_j = 0, else unbounded below)
            return 0.0 if not np.any(v[F]) else -np.inf
        return float(np.sum(h_values(v[F], self.r[F], self.lo[F], self.hi[F])))

    def node_bound(
        self, a: Anchor, fixed_in: np.ndarray | None = None, fixed_out: np.ndarray | None = None, k: int | None = None
    ) -> NodeBound:
        """lb at the dual point ``a`` for the node with units ``fixed_in`` (bool per unit) and
        ``fixed_out``; k: the budget (default the set's)."""
        k = self.units.budget if k is None else k
        S = self.units.unit_sums(self.coordinate_scores(a.v))
        nu = self.units.n_units
        fin = fixed_in if fixed_in is not None else np.zeros(nu, dtype=bool)
        fout = fixed_out if fixed_out is not None else np.zeros(nu, dtype=bool)
        und = np.flatnonzero(~fin & ~fout)
        m = k - int(fin.sum())
        with np.errstate(invalid="ignore"):
            const = a.base + self.free_part(a.v)
            val = const - float(np.sum(S[fin]))
            top = self.units.top(S, und, m, fin)  # the supports' best (the m largest, or the set's rule)
            val -= float(np.sum(np.maximum(S[top], 0.0)))  # (scores are >= 0 while the box holds 0)
        if not np.isfinite(val):
            val = -np.inf
        return NodeBound(val, S, top, a, const)

    def _batched_segment(self) -> bool:
        """Whether the fast bound scores its segment's grid in one pass (:meth:`segment_values`): the
        loss terms' conjugates are per entry or per row (a whole-vector loss's is one number of the
        whole vector), the set counts the m largest unit scores (per-group caps choose their own
        way, per node), and a pass is small enough to pay (SEGMENT_ENTRIES)."""
        d = self.design
        if not self.units.largest_top or any(d.terms[i].whole for i in self.loss):
            return False
        return sum(d.terms[i].map.size for i in self.loss) * SEGMENT_POINTS <= SEGMENT_ENTRIES

    def segment_values(self, a: Anchor, ts: np.ndarray) -> np.ndarray:
        """``node_bound(scaled(a, t)).value`` at the root (no unit fixed) for every t in ``ts``, in one
        pass over the conjugates and the unit scores (-inf where not finite); the terms and the set
        of :meth:`_batched_segment`."""
        d = self.design
        ts = np.asarray(ts, dtype=float)
        T = len(ts)
        with np.errstate(all="ignore"):
            base = np.full(T, float(d.const)) + ts * a.rows_base
            for i, th in zip(self.loss, a.thetas or []):
                term = d.terms[i]
                flat = th.reshape(-1)
                conj = np.asarray(term.conjugate(ts[:, None] * flat[None, :]), dtype=float)
                base += ts * float(flat @ np.asarray(term.map.b, dtype=float).reshape(-1)) - conj.reshape(T, -1).sum(
                    axis=1
                )
            V = ts[:, None] * (a.v - d.lin)[None, :] + d.lin[None, :]
            scores = self._score_rows(V)
            units = self.units
            S = units.unit_sums(scores)
            val = base + self._free_rows(V)
            nu, m = units.n_units, units.budget
            if m >= nu:
                val -= np.maximum(S, 0.0).sum(axis=1)
            elif m > 0:
                val -= np.maximum(np.partition(S, nu - m, axis=1)[:, nu - m :], 0.0).sum(axis=1)
        return np.where(np.isfinite(val), val, -np.inf)

    def _score_rows(self, V: np.ndarray) -> np.ndarray:
        """:meth:`coordinate_scores` of every row of V (a batch of dual points v, every coordinate)."""
        C = self.C
        VC = V[:, C]
        if self._ridge_scores:
            return 0.5 * VC * VC / self.r[C]
        T = len(V)
        h = h_values(VC.ravel(), np.tile(self.r[C], T), np.tile(self.lo[C], T), np.tile(self.hi[C], T))
        return -h.reshape(T, len(C))

    def _free_rows(self, V: np.ndarray) -> np.ndarray:
        """:meth:`free_part` of every row of V."""
        F, T = self.F, len(V)
        if len(F) == 0:
            return np.zeros(T)
        if self._free_held:
            return np.where(np.any(V[:, F] != 0, axis=1), -np.inf, 0.0)
        h = h_values(V[:, F].ravel(), np.tile(self.r[F], T), np.tile(self.lo[F], T), np.tile(self.hi[F], T))
        return h.reshape(T, len(F)).sum(axis=1)

    def bound(self, x: np.ndarray) -> float:
        """The fast bound at the point x: the dual point theta = grad G at x, and the best of the
        points t theta on the segment to 0 (lb is concave in theta, so a search over t in [0, 1]
        finds the segment's best; t = 0 gives the loss's infimum, t = 1 the gradient's point). With
        a small ridge the gradient's point pays the perspective's full price for every unit;
        shrinking theta trades the loss's conjugate against it. Each t costs the conjugates and the
        unit scores, no pass over the data. The search: where those take a batch of t
        (:meth:`_batched_segment`), a grid narrowed to its best point's neighbours (SEGMENT_POINTS,
        SEGMENT_ROUNDS: two passes, t to 9e-3); otherwise (a whole-vector loss, per-group caps, many
        loss values) a golden section, one t at a time (LINE_ITERS, t to 1e-2). The lean class's
        problems (lowering/lean.py: one elementwise loss, a ridge on C, no box, at most one free
        coordinate) take the same steps in one compiled call (:meth:`_compiled_bound`)."""
        got = self._compiled_bound(x)
        if got is not None:
            return got
        a = self.anchor(x)
        best = self.node_bound(a).value
        d = self.design
        if self.quad is not None or a.thetas is None or (len(self.E) and np.any(d.lin[self.E] != 0)):
            return best  # the shifted form, or free coordinates whose condition needs t = 1

        if self._batched_segment():  # every t of a grid in one pass (segment_values)
            lo, hi = 0.0, 1.0
            for _ in range(SEGMENT_ROUNDS):
                ts = np.linspace(lo, hi, SEGMENT_POINTS)
                f = self.segment_values(a, ts)
                j = int(np.argmax(f))
                best = max(best, float(f[j]))
                step = (hi - lo) / (SEGMENT_POINTS - 1)  # (lb concave: its top lies within a step of the grid's best)
                lo, hi = max(0.0, ts[j] - step), min(1.0, ts[j] + step)
            return best

        def value(t: float) -> float:
            with np.errstate(all="ignore"):
                v = self.node_bound(self.scaled(a, t)).value
            return v if np.isfinite(v) else -np.inf

        lo, hi = 0.0, 1.0
        g = (np.sqrt(5.0) - 1.0) / 2.0
        t1, t2 = hi - g * (hi - lo), lo + g * (hi - lo)
        f1, f2 = value(t1), value(t2)
        best = max(best, f1, f2, value(0.0))
        for _ in range(LINE_ITERS):
            if f1 >= f2:
                hi, t2, f2 = t2, t1, f1
                t1 = hi - g * (hi - lo)
                f1 = value(t1)
            else:
                lo, t1, f1 = t1, t2, f2
                t2 = lo + g * (hi - lo)
                f2 = value(t2)
            best = max(best, f1, f2)
        return best

    def _compiled_bound(self, x: np.ndarray) -> float | None:
        """:meth:`bound` by the compiled kernel (numerics/_lean.fast_bound: the same dual point, the
        same correction of the free coordinate, the same search over t), or None outside its class
        or where it leaves the case to the steps above (which then say why there is no bound, or
        take Fenchel-Young's values). Its class: the plain form without rows, an elementwise loss
        of the lean path's (lowering/lean.lean_data), a ridge on every constrained coordinate and no
        box (the closed-form scores), every free coordinate unridged and held (at most one), the
        sets whose supports are every choice of k units."""
        args = self.__dict__.get("_lean_args")
        if args is None:
            args = self._lean_args = self._lean_class()
        if args is False or len(x) != self.n:
            return None
        from .lean import kernels, lean_data

        data = lean_data(self.lp)
        if data is None or data.P.classes != 1:
            return None
        C, unit_of, sigma, batched = args
        ok, val = kernels().fast_bound(
            data.P,
            x,
            self.r,
            C,
            unit_of,
            self.units.n_units,
            self.units.budget,
            self.E,
            sigma,
            batched,
            SEGMENT_POINTS,
            SEGMENT_ROUNDS,
            LINE_ITERS,
            FREE_TOL,
        )
        return float(val) if ok else None

    def _lean_class(self) -> tuple[np.ndarray, np.ndarray, int, bool] | bool:
        """The compiled bound's fixed arguments (C, the unit of each, the conjugate's sign, whether
        the segment is searched on a grid), or False outside its class."""
        if self.quad is not None or self.rows is not None or not self._ridge_scores or not self._free_held:
            return False
        if len(self.loss) != 1 or len(self.E) > 1 or not self.units.largest_top:
            return False
        t = self.design.terms[self.loss[0]]
        if t.whole or t.rowwise or not t.diagonal:
            return False
        C = np.ascontiguousarray(self.C, dtype=np.intp)
        unit_of = np.ascontiguousarray(self.units.unit_of, dtype=np.intp)
        return C, unit_of, int(t.phi.convex_sign), self._batched_segment()

    # ------------------------------------------------------------------ Frank-Wolfe on z
    def phi_point(self, z: np.ndarray, x0: np.ndarray | None = None, fixed_in: np.ndarray | None = None) -> np.ndarray:
        """x(z): the minimizer of the relaxation at the unit weights z (0 < z <= 1 on the units it
        touches; z = 0 holds a unit at zero). A flat x (C part only in the shifted form)."""
        units = self.units
        on = np.flatnonzero(z > 0)
        pos = units.positions(on)
        zc = z[units.unit_of[pos]]
        if self.quad is not None:
            q = self.quad
            xc = np.zeros(len(self.C))
            if len(pos) and q["direct"]:
                M = q["P"][np.ix_(pos, pos)] + np.diag(0.5 * q["r"][pos] / zc)
                xc[pos] = lstsq_normal(M, q["h"][pos])
            elif len(pos) or self.rows is not None:  # the rows and the box (scaled by z) kept: a QP
                M = 2.0 * q["P"][np.ix_(pos, pos)] + np.diag(q["r"][pos] / zc)
                P = self._polyhedron(pos, self.C[pos], zc)
                x0c = x0[self.C][pos] if x0 is not None and len(x0) == self.n else None
                res = solve_qp(M, -2.0 * q["h"][pos], P, x0=x0c)
                if res.x is None:
                    return None
                xc[pos] = res.x
            return xc
        d, lp = self.design, self.lp
        cols_c = self.C[pos]
        cols = np.concatenate([cols_c, self.F])
        order = np.argsort(cols)
        cols = cols[order]
        extra = np.concatenate([self.r[cols_c] * (1.0 / zc - 1.0), np.zeros(len(self.F))])[order]
        lo = np.concatenate([self.lo[cols_c] * zc, self.lo[self.F]])[order]
        hi = np.concatenate([self.hi[cols_c] * zc, self.hi[self.F]])[order]
        ridge = extra if extra.any() else None
        rd = d.reduced(cols)
        u0 = x0[cols] if x0 is not None else np.zeros(len(cols))
        if self.rows is not None and dense_design(rd):  # the rows kept: SQP (any x(z) gives a valid bound)
            Aeq, beq, Gin, hin = self.rows
            res = constrained_newton(rd, u0, Polyhedron(len(cols), Aeq[:, cols], beq, Gin[:, cols], hin, lo, hi), ridge)
            if res.u is None:
                return None
            x = np.zeros(self.n)
            x[cols] = res.u
            return x
        if np.isfinite(lo).any() or np.isfinite(hi).any():
            u = box_newton(rd, np.clip(u0, lo, hi), lo, hi, ridge=ridge, tol=PHI_TOL).u
        elif d.least_squares:
            u = lstsq(rd, ridge)
        else:
            if x0 is not None and not np.isfinite(d.value(x0)):
                u0 = lp.inside_domain(x0)[cols]
            u = newton(rd, u0[None, :], ridge=ridge, tol=PHI_TOL, max_iter=PHI_ITERS).U[0]
        x = np.zeros(self.n)
        x[cols] = u
        return x

    def _polyhedron(self, pos: np.ndarray, cols: np.ndarray, zc: np.ndarray) -> Polyhedron:
        """The shifted form's feasible set of x(z) on the positions ``pos`` of C: the rows there (every
        other coordinate at zero) and the box scaled by z."""
        lo, hi = self.lo[cols] * zc, self.hi[cols] * zc
        if self.rows is None:
            return Polyhedron(len(pos), lo=lo, hi=hi)
        Aeq, beq, Gin, hin = self.rows
        return Polyhedron(len(pos), Aeq[:, pos], beq, Gin[:, pos], hin, lo, hi)

    def node_weights(
        self, z: np.ndarray, fixed_in: np.ndarray, fixed_out: np.ndarray, k: int | None = None
    ) -> np.ndarray:
        """z made feasible for a node: 0 on the units fixed out, 1 on those fixed in, the undecided
        ones scaled down to the budget left."""
        k = self.units.budget if k is None else k
        z = np.array(z, dtype=float)
        z[fixed_out] = 0.0
        z[fixed_in] = 1.0
        und = ~fixed_in & ~fixed_out
        m = k - int(fixed_in.sum())
        tot = float(z[und].sum())
        if m <= 0:
            z[und] = 0.0
        elif tot > m:
            z[und] *= m / tot
        return z

    def support_weights(self, x: np.ndarray) -> np.ndarray:
        """The indicator of the units a point uses (a vertex of Z when it uses at most k)."""
        xc = x[self.C] if len(x) == self.n else x
        return (self.units.unit_sums(np.abs(xc)) > 0).astype(float)

    def frank_wolfe(
        self,
        x: np.ndarray | None = None,
        iters: int = TIGHT_ITERS,
        fixed_in: np.ndarray | None = None,
        fixed_out: np.ndarray | None = None,
        k: int | None = None,
        z: np.ndarray | None = None,
        target: float | None = None,
        warm: int = 0,
        seed: Anchor | None = None,
        inner: str = "exact",
        decided: bool = False,
    ) -> tuple[NodeBound, np.ndarray]:
        """The best bound over ``iters`` Frank-Wolfe steps on z, from the point x (the minimizer
        on its support: the answer of a solver) or from the weights ``z`` (a parent node's), and the
        weights of that best bound. Stops early once the bound reaches ``target`` (a node pruned).
        ``warm``: steps already taken towards this z (a parent's), so that the step sizes
        2 / (t + 2) continue from there instead of leaving a good start. ``seed``: a dual point
        already known (a parent's), tried first at no cost: a node it prunes needs no solve.

        ``inner``: how each step's x(z) is found. ``exact`` minimizes the relaxation at z (damped
        Newton to PHI_TOL); ``step`` (bnb's nodes) takes one Newton step from the previous step's
        point with a stored Hessian (:meth:`newton_point`), starting from the seed's point: every
        x gives a valid bound (weak duality), and a point one step from the last one lags x(z) by
        a second-order error, so the bounds are nearly the same at a fraction of the cost. Where
        the step does not apply (:meth:`steps_apply`) ``exact`` is used.

        ``decided`` (with a ``target``; not the textbook scheme, which takes its ``iters`` steps):
        stop as soon as the steps cannot change whether the node is pruned: its bound reaches the
        target (as without it), or the relaxation's value at one of the visited points
        (:meth:`relaxed_value`, an upper bound on the relaxation's minimum) lies below the target, so
        that no dual point, however many steps found it, could reach it; and stop when the best
        bound's progress over the last STALL_STEPS steps, extrapolated linearly over the steps left,
        falls short of the target (a heuristic on the cost: Frank-Wolfe's progress slows down, so
        the extrapolation is optimistic). The bound returned is the best dual value either way."""
        k = self.units.budget if k is None else k
        nu = self.units.n_units
        fin = fixed_in if fixed_in is not None else np.zeros(nu, dtype=bool)
        fout = fixed_out if fixed_out is not None else np.zeros(nu, dtype=bool)
        seeded = self.node_bound(seed, fin, fout, k) if seed is not None else None
        if seeded is not None and target is not None and seeded.value >= target:
            return seeded, z if z is not None else self.support_weights(x)
        if z is None:
            z = self.support_weights(x)
        z = self.node_weights(z, fin, fout, k)
        za = z
        stepping = inner == "step" and self.steps_apply()
        hess = None
        if stepping and seed is not None and seed.curv is not None:
            x, hess = self.newton_point(seed, z, fresh=True)
        elif x is None or not np.array_equal(z, self.support_weights(x)):
            x = self.phi_point(z, x if x is not None and len(x) == self.n else None)
        if x is None:  # linear constraints that no point on z's units satisfies: every unit not fixed out
            za = (~fout).astype(float)
            x = self.phi_point(za)
            if x is None:
                if self.rows is not None and self._empty(fout):  # no feasible point in the node at all
                    return NodeBound(np.inf, np.zeros(nu), np.empty(0, dtype=np.int64), seed or self._nowhere()), z
                return (seeded or NodeBound(-np.inf, np.zeros(nu), np.empty(0, dtype=np.int64), self._nowhere())), z
        x, a = self._step_anchor(x, za, stepping, seed.x if seed is not None else None)
        cur = self.node_bound(a, fin, fout, k)
        cur.anchor.hess = hess
        best, zbest = cur, z  # the best of the steps (its z is where a child starts)
        xk = x
        decide = decided and target is not None and np.isfinite(target)
        upper = self.relaxed_value(cur.anchor, za) if decide else np.inf
        trail = [best.value]  # the best bound after each step (decided: the recent progress)
        for t in range(1 + warm, iters + 1 + warm):
            if decide and len(trail) > STALL_STEPS:
                rate = (trail[-1] - trail[-1 - STALL_STEPS]) / STALL_STEPS
                if trail[-1] + rate * (iters + warm + 1 - t) < target:
                    break  # at the recent rate the steps left would not reach the target
            if target is not None and max(best.value, seeded.value if seeded is not None else -np.inf) >= target:
                break
            if decide and upper < target:
                break  # the relaxation's minimum is below the target: the node stays open whatever the steps
            vertex = np.zeros(nu)
            vertex[fin] = 1.0
            vertex[cur.top] = 1.0
            if np.all(np.abs(vertex - z) <= 1e-8 + 1e-5 * np.abs(z)):  # (np.allclose's test)
                break  # z is the vertex the linearization picks: the relaxation's minimum (to FW's accuracy)
            gamma = 2.0 / (t + 2.0)
            z = (1 - gamma) * z + gamma * vertex
            hess = None
            if stepping and cur.anchor.curv is not None and np.isfinite(cur.value):
                # z moves by gamma: the early steps of a schedule (large gamma) get a Hessian at their point
                xk, hess = self.newton_point(cur.anchor, z, fresh=t < HESS_FRESH_STEPS)
            else:
                xk = self.phi_point(z, xk if len(xk) == self.n else None)
            if xk is None:  # (the box scaled by z left the rows no point)
                break
            xk, a = self._step_anchor(xk, z, stepping, cur.anchor.x)
            cur = self.node_bound(a, fin, fout, k)
            cur.anchor.hess = hess
            if cur.value > best.value:
                best, zbest = cur, z
            if decide:
                upper = min(upper, self.relaxed_value(cur.anchor, z))
                trail.append(best.value)
        if seeded is not None and seeded.value > best.value:
            best = seeded
        return best, zbest

    def relaxed_value(self, a: Anchor, z: np.ndarray) -> float:
        """The relaxation's objective at (the anchor's x, the weights z): f(x) + sum_(j in C)
        (r_j / 2)(1 / z_u - 1) x_j^2, with x_j = 0 wherever z_u = 0 (the shifted form: its quadratic
        with the ridge r + 2 mu in the perspective). Any such pair is a point of the relaxation, so
        this is an upper bound on its minimum over the node (every z Frank-Wolfe visits is feasible
        for the node); +inf where it is not known: no objective at x, or a box or linear constraints
        (x would have to be checked against them)."""
        if a.primal is None or not np.isfinite(a.primal) or self.rows is not None:
            return np.inf
        C = self.C
        if self.quad is not None:
            if not self.quad["direct"]:
                return np.inf
            xc, r = a.x, self.quad["r"]
        else:
            if np.isfinite(self.lo).any() or np.isfinite(self.hi).any():
                return np.inf
            xc, r = a.x[C], self.r[C]
        zc = np.asarray(z, dtype=float)[self.units.unit_of]
        on = zc > 0
        if np.any(xc[~on] != 0):
            return np.inf
        r_on, x_on, z_on = r[on], xc[on], zc[on]
        return float(a.primal + 0.5 * np.sum(r_on * (1.0 / z_on - 1.0) * x_on * x_on))

    def _step_anchor(
        self, x: np.ndarray, z: np.ndarray, stepping: bool, prev: np.ndarray | None
    ) -> tuple[np.ndarray, Anchor]:
        """The anchor of a Frank-Wolfe step's point. A Newton point (``stepping``) far from x(z) can
        put the dual point, once the free coordinates' condition is imposed, outside the loss
        conjugate's domain (a logistic theta outside [0, 1]); the step then takes x(z) itself
        (:meth:`phi_point`, from ``prev``), where that condition holds already."""
        try:
            return x, self.anchor(x, z, curv=stepping)
        except NoBoundError:
            if not stepping:
                raise
        x = self.phi_point(z, prev if prev is not None and len(prev) == self.n else None)
        return x, self.anchor(x, z, curv=True)

    def steps_apply(self) -> bool:
        """Whether :meth:`newton_point` applies: the plain form of losses whose Hessian is
        J' diag(c) J with J kept dense (not least squares, whose x(z) is one linear solve already),
        and no box or linear constraint (they would need a constrained step)."""
        if self._steps is None:
            d = self.design
            ok = (
                self.quad is None
                and self.rows is None
                and not d.least_squares
                and not np.isfinite(self.lo).any()
                and not np.isfinite(self.hi).any()
                and all(d.terms[i].diagonal for i in self.loss)
            )
            Js = [d.full_columns(i) for i in self.loss] if ok else []
            self._steps = ok and all(isinstance(J, np.ndarray) for J in Js)
            self._Js = Js if self._steps else None
        return self._steps

    def newton_point(self, a: Anchor, z: np.ndarray, fresh: bool = False) -> tuple[np.ndarray, tuple]:
        """An approximation of x(z) (:meth:`phi_point`): one Newton step of the relaxation at the
        weights z, min_x f(x) + sum_j (r_j / 2)(1 / z_u - 1) x_j^2, from the anchor's point, with the
        gradient the anchor computed there and the Hessian of f kept from a step at most
        HESS_REFRESH steps earlier (formed from the anchor's curvatures on the coordinates z
        touches when older, missing, ``fresh``, or without a coordinate z now touches): no pass
        over the data besides that product. Units with z = 0 are held at zero. Any point gives a
        valid bound, so no line search guards the step (the caller keeps the best bound);
        Frank-Wolfe's steps on z shrink as 2 / (t + 2), so each x(z) is one step from the last and
        the points follow x(z). Returns the point and the Hessian (with its age) for the next step;
        falls back to :meth:`phi_point` where the step is not finite."""
        units = self.units
        on = np.flatnonzero(z > 0)
        pos = units.positions(on)
        zc = z[units.unit_of[pos]]
        cc = self.C[pos]
        cols = np.concatenate([cc, self.F])
        extra = np.concatenate([self.r[cc] * (1.0 / zc - 1.0), np.zeros(len(self.F))])
        at = a.hess[1][cols] if a.hess is not None else None
        Jcs = None  # the columns z touches, gathered once for the Hessian and the gradient
        if fresh or at is None or a.hess[2] >= HESS_REFRESH or (at < 0).any():
            # formed on the coordinates z touches (they grow only when a unit enters a vertex)
            H = np.diag(self.r[cols].astype(float))
            Jcs = [J[:, cols] for J in self._Js]
            for Jc, c in zip(Jcs, a.curv):
                B = Jc * np.sqrt(np.maximum(c, 0.0))[:, None]
                H += B.T @ B
            where = np.full(self.n, -1, dtype=np.int64)
            where[cols] = np.arange(len(cols))
            hess = (H, where, 0)
            M = H + np.diag(extra)
        else:
            hess = (a.hess[0], a.hess[1], a.hess[2] + 1)
            M = a.hess[0][np.ix_(at, at)] + np.diag(extra)
        g = self._raw_gradient(a, cols, Jcs) + (self.r[cols] + extra) * a.x[cols]
        try:
            fac = sla.cho_factor(M, check_finite=False)
            step = sla.cho_solve(fac, g, check_finite=False)
        except (np.linalg.LinAlgError, ValueError):
            step = None
        if step is None or not np.all(np.isfinite(step)):
            return self.phi_point(z, a.x), hess
        x = np.zeros(self.n)
        x[cols] = a.x[cols] - step
        return x, hess

    def _empty(self, fout: np.ndarray) -> bool:
        """Whether the linear constraints and the box have no point with the units ``fout`` at zero
        (a node of bnb with no feasible point; HiGHS's verdict of infeasibility, not a tolerance)."""
        keep = np.setdiff1d(np.arange(self.n), self.C[self.units.positions(np.flatnonzero(fout))])
        Aeq, beq, Gin, hin = self.rows
        if self.quad is not None:  # (rows in C's coordinates; the free ones are eliminated)
            keep = np.flatnonzero(~np.isin(np.arange(len(self.C)), self.units.positions(np.flatnonzero(fout))))
            lo, hi = self.lo[self.C][keep], self.hi[self.C][keep]
        else:
            lo, hi = self.lo[keep], self.hi[keep]
        return infeasible(Polyhedron(len(keep), Aeq[:, keep], beq, Gin[:, keep], hin, lo, hi))

    def _nowhere(self) -> Anchor:
        """A dual point that proves nothing (the bound -inf): where no x(z) was found."""
        size = len(self.C) if self.quad is not None else self.n
        return Anchor(-np.inf, np.zeros(size), np.zeros(size))


def _no_conjugate(t: Any) -> str | None:
    """Why the loss of the term ``t`` has no conjugate (its words), or None: the conjugate tried at
    0 (``Term.conjugate``). Its scale's sign (the coefficient and weights: a concave term) is read
    every time; the atom's own answer reads only the atom, its parameters and the form (an entry's
    or a row's loss, the row's length), so it is kept per atom and form (``Atom.loss_key``): every
    new lowering asked it again, a third of a refused relaxation's cost (least squares without a
    ridge: no finite bound), 5 % of an estimator's fit at 100 x 20. A whole-vector loss, whose
    conjugate is not tried at a zero scale, is tried every time."""
    try:
        t.check_convex_scale()  # (NoConjugate for a term that is not convex in its argument)
    except ModelError as exc:
        return exc.message
    key = None
    if not t.whole:
        try:
            key = (t.phi.loss_key(), bool(t.rowwise), tuple(t.map.shape[1:]) if t.rowwise else ())
            hash(key)
        except TypeError:  # (a parameter that is not hashable: tried every time)
            key = None
    if key is not None and key in _CONJUGATE_SAID:
        return _CONJUGATE_SAID[key]
    try:
        t.conjugate(np.zeros(t.map.size))
        said = None
    except ModelError as exc:
        said = exc.message
    if key is not None:
        if len(_CONJUGATE_SAID) >= 256:
            _CONJUGATE_SAID.clear()
        _CONJUGATE_SAID[key] = said
    return said


_CONJUGATE_SAID: dict[Any, str | None] = {}  # (atom, form) -> why it has no conjugate, or None


def relaxation(lp: LoweredProblem, shift: bool = False) -> Relaxation:
    """The problem's relaxation, built once per lowered problem and kind (cached on ``lp``'s
    shared cache; NoBoundError is cached too)."""
    key = (id(lp.set.constraint) if lp.set is not None else None, id(lp.box), bool(shift))
    cache = lp.bound_cache
    if key not in cache:
        try:
            cache[key] = Relaxation(lp, shift=shift)
        except NoBoundError as exc:
            exc.stated = lp.set.bound_text() if lp.set is not None else ""  # (the bound its words name)
            # kept without its traceback: its frames hold lp, whose cache holds it, and that cycle
            # kept every lowering's arrays alive until the garbage collector ran (a loop of fits
            # then allocates fresh memory every time: 2.5 times slower at 500 x 1000)
            cache[key] = exc.with_traceback(None)
    got = cache[key]
    if isinstance(got, NoBoundError):  # the same reason at every budget, its words naming this one's bound
        raise _refusal_at(got, lp.set.bound_text() if lp.set is not None else "")
    if lp.set is not None and got.units.budget != lp.set.budget:
        return _rebudget(got, lp)
    got.lp = lp  # (the caller's lowering, alive while it uses the relaxation)
    return got


def _refusal_at(got: NoBoundError, text: str) -> NoBoundError:
    """The cached refusal ``got`` again, its words naming the bound ``text``: made here, so that the
    frame that raises it holds no reference to it (an exception a local of a frame in its own
    traceback is a cycle, which keeps that frame's lowering alive until the garbage collector runs)."""
    said = got.message.replace(got.stated, text) if got.stated and text != got.stated else got.message
    again = NoBoundError(said, got.span, got.hint)
    again.stated = text
    return again


def carry_relaxations(old: LoweredProblem, new: LoweredProblem) -> None:
    """Rebinding (lowering/rebind.py): the plain relaxation of ``old`` serves ``new``, the same model
    with other numbers in its data terms, when the separable terms (the ridges, whose diagonal
    decides a finite bound) are unchanged: a refusal of the plain form reads only them, the sets and
    the losses' kinds (no nnz constraint, no conjugate, a constrained coordinate with neither a ridge
    nor a box), and so does the relaxation itself, but for its design (the new one; the dense
    columns of its Newton steps are read again). The shifted least-squares form reads the Gram's
    eigenvalues: never carried."""
    plain = {k: v for k, v in old.bound_cache.items() if not k[2] and (isinstance(v, NoBoundError) or v.quad is None)}
    d0, d1 = old.design, new.design
    if not plain or d0 is None or d1 is None or len(d0.terms) != len(d1.terms):
        return
    for i in range(len(d0.terms)):
        a, b = d0.separable_diagonal(i), d1.separable_diagonal(i)
        if (a is None) != (b is None) or (a is not None and not np.array_equal(a, b)):
            return
    for key, v in plain.items():
        if isinstance(v, Relaxation):
            moved = object.__new__(Relaxation)
            moved.__dict__.update(v.__dict__)
            moved.design, moved.lp, moved._steps, moved._Js = d1, new, None, None
            v = moved
        new.bound_cache[key] = v


def _rebudget(rel: Relaxation, lp: LoweredProblem) -> Relaxation:
    out = object.__new__(Relaxation)
    out.__dict__.update(rel.__dict__)
    out.units = lp.set.bound_units()
    out.lp = lp
    return out


def shift_pays(lp: LoweredProblem) -> bool:
    """Whether the shifted least-squares form applies (least squares, a Gram of C that fits, and the
    free coordinates eliminable: no bound on them and no linear constraint that reads them; a box
    and linear constraints on C stay in the relaxation): the tight bound and bnb use it."""
    d = lp.design
    if d is None or not d.least_squares or lp.n > QUAD_LIMIT or lp.set is None or not lp.set.thresholds:
        return False
    try:
        F = lp.set.bound_units().free
    except NoBoundError:
        return False
    if lp.box is not None and (np.isfinite(lp.box.lo[F]).any() or np.isfinite(lp.box.hi[F]).any()):
        return False
    return lp.linear is None or not lp.linear.touches(F)


def lower_bound(lp: LoweredProblem, x: np.ndarray, mode: str = "fast") -> BoundReport:
    """The lower bound at the answer x: ``fast`` (one dual point, theta from the gradient at x),
    ``tight`` (Frank-Wolfe steps on the relaxation; least squares also with the eigenvalue shift),
    ``none``. Never raises: where no bound exists the report says why."""
    import time

    t0 = time.perf_counter()
    if mode == "none":
        return BoundReport(None, "", "not computed (bound='none')")
    try:
        best: float | None = None
        notes = []
        rels = []
        cached_shift = (id(lp.set.constraint) if lp.set is not None else None, id(lp.box), True) in lp.bound_cache
        if mode == "tight" or cached_shift:
            if shift_pays(lp):
                try:
                    rels.append(relaxation(lp, shift=True))
                except NoBoundError:
                    pass
        try:
            rels.append(relaxation(lp, shift=False))
        except NoBoundError:
            if not rels:
                raise
        for rel in rels:
            if mode == "tight":  # Frank-Wolfe's steps, and never below the fast bound's segment search
                nb, _ = rel.frank_wolfe(x)
                val = max(nb.value, rel.bound(x))
            else:
                val = rel.bound(x)
            if np.isfinite(val) and (best is None or val > best):
                best = val
                notes = [rel.describe()]
        if best is None:
            return BoundReport(None, "", "no finite bound at this point", time.perf_counter() - t0)
        return BoundReport(best, mode, "; ".join(notes), time.perf_counter() - t0)
    except NoBoundError as exc:
        return BoundReport(None, "", exc.message, time.perf_counter() - t0)


def bound_plan(lp: LoweredProblem) -> str:
    """The line ``sparsemodel check`` prints: which bound the model gets, or why none."""
    try:
        rel = relaxation(lp, shift=False)
        text = rel.describe()
        if shift_pays(lp):
            text += "; tight and bnb also move the Gram's smallest eigenvalue into it (least squares)"
        return text
    except NoBoundError as exc:
        try:
            size = len(lp.set.bound_units().coords)
        except NoBoundError:
            return "none: " + exc.message
        if shift_pays(lp) and (lp.n_samples or 0) > size:
            return (
                "tight and bnb only: the perspective relaxation with the Gram's smallest eigenvalue (least squares "
                f"with more samples than coordinates); the fast bound has none ({exc.message})"
            )
        return "none: " + exc.message


__all__ = [
    "BOUND_MODES",
    "Anchor",
    "BoundReport",
    "NodeBound",
    "Relaxation",
    "bound_plan",
    "h_values",
    "lower_bound",
    "relaxation",
    "shift_pays",
    "top_sum",
]
