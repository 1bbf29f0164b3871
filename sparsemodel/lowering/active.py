r"""Exact candidate scoring and supports that change one coordinate at a time.

Greedy sparsity solvers (OMP, OMPR, Exhaustive Local Search, forward selection, FoBa, ARHT) move
from a support to a neighbouring one: one coordinate enters, one leaves. This module gives them
two lowering-level primitives that never touch cvxpy or the expression tree:

* :func:`insertion_values` ``(lp, sel, x, candidates)`` -- for each candidate position i (into C)
  the exact value ``min { f(z) : supp_C(z) within sel ∪ {i} }``;
* :func:`removal_values` ``(lp, sel, x)`` -- for each j in ``sel`` the exact value
  ``min { f(z) : supp_C(z) within sel \ {j} }``.

Free coordinates F (intercepts, other variables) are optimized in every one of these minimizations
and are never candidates. ``sel`` holds sorted positions into C; ``x`` (a full flat vector, or None)
is only a warm start. Both functions are stable API (used by ELS, forward selection and FoBa).

How the values are computed:

* **least squares** (every term ``c * sum(w * square(J x + b))``): closed form on the stacked,
  weighted design M (``f = const + ||M x - r||^2``). With A the selected columns, G = A'A (Cholesky
  factor R) and e the residual at the restricted minimizer, inserting column a lowers f by
  ``(a'e)^2 / (||a||^2 - ||R^-T A'a||^2)`` (the squared correlation with the residual over the
  squared norm of the part of a orthogonal to the current columns); removing column q raises it by
  ``u_q^2 / (G^-1)_qq``. All candidates at once: one product M'e, and the projections
  ``W = R^-T A' M_C`` which :class:`ActiveSet` keeps up to date by rank-one row updates when a
  column enters and Givens rotations when one leaves;
* **other composite losses** (logistic, Huber, ...): Newton's method with the exact Hessian, warm
  started from the current solution (the candidate's coordinate at 0), run for all candidates at
  once by the batched kernel :func:`sparsemodel.numerics.newton.newton`, to the same tolerance as
  the restricted solves;
* **general smooth objectives**: one warm-started restricted solve (L-BFGS) per candidate.

:class:`ActiveSet` is the stateful form the solvers use: ``solve(sel, x0, ridge)`` moves to a new
support; on least squares it updates a Cholesky factorization of the selected columns instead of
refactorizing (a column entering costs O(n s), one leaving O(s^2) plus O(n s) to shift the stored
columns), on other objectives it warm-starts the lowered problem's restricted solve, or (``lean``,
ARHT's) runs Newton on the gathered rows with the Hessian kept across solves (:class:`_LeanNewton`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.linalg.lapack import dpotrf, dpotrs

from ..numerics.newton import newton
from .lean import lean_data

if TYPE_CHECKING:
    from .lowered import LoweredProblem

_DEPENDENT = 1e-10  # a column whose part orthogonal to the others has relative squared norm below this is dependent


_CHUNK = 4_000_000  # entries per block when streaming design columns


def insertion_values(
    lp: LoweredProblem,
    sel: np.ndarray,
    x: np.ndarray | None = None,
    candidates: np.ndarray | None = None,
    tol: float = 1e-12,
) -> np.ndarray:
    """``v[c] = min { f(z) : supp_C(z) within sel ∪ {candidates[c]} }`` for each candidate.

    ``sel``: sorted positions into C (the current support); ``x``: a warm start (full flat vector),
    ideally the minimizer over ``sel``; ``candidates``: positions into C (default: all positions
    not in ``sel``; a candidate already in ``sel`` gets the value of ``sel`` itself). Free
    coordinates are optimized in every minimization. Exact in closed form for least squares, to
    the Newton tolerance ``tol`` for composite losses, to L-BFGS tolerance otherwise.
    """
    act = ActiveSet(lp, tol=tol)
    act.solve(_positions(sel), x0=x)
    return act.insertion_values(candidates)


def removal_values(lp: LoweredProblem, sel: np.ndarray, x: np.ndarray | None = None, tol: float = 1e-12) -> np.ndarray:
    """``v[j] = min { f(z) : supp_C(z) within sel \\ {sel[j]} }`` for j = 0 .. len(sel) - 1.

    Same conventions as :func:`insertion_values` (free coordinates always optimized, ``x`` a warm
    start, exact in closed form for least squares, Newton for composite losses).
    """
    act = ActiveSet(lp, tol=tol)
    act.solve(_positions(sel), x0=x)
    return act.removal_values()


def _positions(sel: Any) -> np.ndarray:
    a = np.asarray(sel if sel is not None else [], dtype=np.int64).ravel()
    if a.size < 2 or (a[1:] > a[:-1]).all():  # already sorted and distinct (the usual case)
        return a.copy()  # (a new array, as np.unique gives: the active set keeps it)
    return np.unique(a)


class ActiveSet:
    """The restricted minimizer over C[sel] ∪ F, following a support that changes a little at a time.

    ``solve(sel, x0=None, ridge=None)`` moves to the support ``sel`` (sorted positions into C) and
    returns ``(x, value)``, the minimizer of f (plus ``rho/2 ||x_{C[R]}||^2`` when
    ``ridge=(rho, R)``, ARHT's g_R) and its value. ``insertion_values(candidates)`` and
    ``removal_values()`` score one-coordinate changes of the current support exactly (see the module
    docstring); they need ``ridge=None`` except on least squares.

    ``method``: the restricted-solve method of :meth:`LoweredProblem.restricted_minimize`; with
    ``auto`` or ``lstsq`` on a least-squares objective the incremental factorization is used.

    ``lean=True`` (or a :class:`LeanRows` to share with another active set on the same problem), with
    Newton solves on a logistic or Poisson loss of stored columns: :class:`_LeanNewton` solves them
    (iterates to the decrement test; ``solve(..., accurate=True)`` polishes the point to rounding;
    ``solve(..., decide=test)`` may stop once ``test(f, lower)`` holds, then ``exact`` is False and
    ``lower`` an estimated lower end for the minimum). Scoring still works from its points.
    """

    def __init__(
        self,
        lp: LoweredProblem,
        method: str = "auto",
        tol: float = 1e-12,
        gram: bool = False,
        lean: bool | LeanRows = False,
    ):
        self.lp = lp
        self.method = lp.restricted_method(method)
        self.tol = tol
        sps = lp.sparsity
        self.C = sps.coords if sps is not None else np.arange(lp.n)
        self.F = sps.free if sps is not None else np.empty(0, dtype=np.int64)
        # the incremental factorization and the batched scoring ignore bounds and linear constraints:
        # with either, every value is an exact restricted solve that keeps them instead
        self.bounded = lp.box is not None or lp.linear is not None
        quad = self.method == "lstsq" and lp.design is not None and not self.bounded
        # gram=True (a search that moves and reads gradients, never scores): solves from the cached
        # columns of the constant Hessian, no pass over the data
        self.gram = _GramQuadratic(lp) if gram and quad and gram_pays(lp, len(self.F) + lp.set.k + 256) else None
        self.ls = _LeastSquares(lp, self.C) if quad and self.gram is None else None
        # lean (a search that moves and reads gradients, never scores): Newton on the gathered rows of
        # the stored Jacobian with the Hessian kept across solves (_LeanNewton); a LeanRows to share
        rows = None
        if lean is not False and self.method == "newton" and not self.bounded:
            rows = lean if isinstance(lean, LeanRows) else lean_rows(lp)
        self.lean = _LeanNewton(lp, rows, tol) if rows is not None else None
        self.exact, self.lower = True, float("nan")  # the last solve ran to tol; a lower end for its minimum
        self.lean_fresh = False  # the last solve was the lean one (its gradient comes from it)
        self.sel = np.empty(0, dtype=np.int64)
        self.ridge: tuple[float, np.ndarray] | None = None
        self.x = lp.zeros()
        self.f = float("nan")
        self.solves = 0
        self._result: Any = None  # the last restricted solve (its loss derivatives give grad())

    @property
    def direct(self) -> bool:
        """Solves are direct factorizations (a quadratic objective): a warm start is not used."""
        return self.gram is not None or self.ls is not None

    # ------------------------------------------------------------------ moving
    def solve(
        self,
        sel: np.ndarray,
        x0: np.ndarray | None = None,
        ridge: tuple[float, np.ndarray] | None = None,
        give_up: float | None = None,
        decide: Callable[[float, float], bool] | None = None,
        accurate: bool = False,
    ) -> tuple[np.ndarray, float]:
        sel = _positions(sel)
        if ridge is not None and (ridge[0] <= 0 or len(ridge[1]) == 0):
            ridge = None
        self.solves += 1
        self.lean_fresh = False
        if self.lean is not None and give_up is None:
            moved = self.lean.move(self.F, self.C, sel, ridge, self.x if x0 is None else x0, decide, accurate)
            if moved is not None:
                self.x, self.f = moved
                self._result = None
                self.sel, self.ridge, self.lean_fresh = sel, ridge, True
                self.exact, self.lower = self.lean.exact, self.lean.lower
                return self.x, self.f
        moved = self.gram.move(self.F, self.C, sel, ridge) if self.gram is not None else None
        if moved is not None:
            self.lp.oracle.charge(solves=1)
            self.x, self.f = moved
            self._result = None
        elif self.ls is not None:
            self.lp.oracle.charge(solves=1)
            rid = np.zeros(len(self.C))
            if ridge is not None:
                rid[np.asarray(ridge[1], dtype=np.int64)] = 0.5 * ridge[0]
            self.x, self.f = self.ls.move(self.F, self.C, sel, rid)
        else:
            warm = self.x if x0 is None else x0
            hint = self._result.hessian if self._result is not None else None  # the last solve's Hessian
            r = self.lp.restricted_minimize(
                sel, x0=warm, ridge=ridge, method=self.method, tol=self.tol, give_up=give_up, hint=hint
            )
            self.x, self.f = r.x, float(r.f)
            self._result = r
        self.sel, self.ridge = sel, ridge
        self.exact, self.lower = True, self.f
        return self.x, self.f

    def grad(self, at: np.ndarray | None = None) -> np.ndarray:
        """The gradient of f (without the ridge) at the current point. On least squares it comes
        from the stored residual, -2 M'e (one pass over the data, no forward evaluation). ``at``
        (flat coordinates off the current support, optional): only those entries are needed; the
        lean solves then compute only them (0 elsewhere), the other paths the whole gradient."""
        if self.ls is not None:
            return -2.0 * self.ls.rmatvec(self.ls.e)
        if self.gram is not None and self.gram.fresh:
            return self.gram.grad()
        if self.lean_fresh:
            self.lp.oracle.charge(grads=1, ifo=self.lp.n_samples)
            return self.lean.grad(at)
        if self._result is not None:
            return self._result.grad_at(self.lp)
        return self.lp.value_and_grad(self.x)[1]

    def grad_argmax(self, at: np.ndarray) -> int:
        """The position in ``at`` (flat coordinates off the current support, not empty) of the largest
        |grad_c f| at the current point, the first on ties: np.argmax(np.abs(self.grad(at)[at])), from a
        float32 screen of the rows on the lean solves (:meth:`_LeanNewton.grad_argmax`)."""
        if self.lean_fresh:
            self.lp.oracle.charge(grads=1, ifo=self.lp.n_samples)
            return self.lean.grad_argmax(at)
        return int(np.argmax(np.abs(self.grad(at)[at])))

    # ------------------------------------------------------------------ scoring
    def insertion_values(self, candidates: np.ndarray | None = None) -> np.ndarray:
        """Exact value of the best point on sel ∪ {i} for each candidate i (positions into C)."""
        if candidates is None:
            mask = np.ones(len(self.C), dtype=bool)
            mask[self.sel] = False
            candidates = np.flatnonzero(mask)
        cand = np.asarray(candidates, dtype=np.int64)
        out = np.full(len(cand), self.f)
        fresh = ~np.isin(cand, self.sel)
        cand_new = cand[fresh]
        if len(cand_new) == 0:
            return out
        if self.ls is not None:
            out[fresh] = self.ls.insertion_values(self.C, cand_new, self.f)
            return out
        self._require_no_ridge("insertion_values")
        if self.lp.design is not None and self.method == "newton" and not self.bounded:
            base = self._base_cols()
            U0 = np.zeros((len(cand_new), len(base) + 1))
            U0[:, : len(base)] = self.x[base]
            extra = self._term_columns(self.C[cand_new])
            out[fresh] = self._newton(base, U0, extra, None, extra_lin=self.lp.design.lin[self.C[cand_new]])
            return out
        vals = []
        for i in cand_new:
            r = self.lp.restricted_minimize(np.union1d(self.sel, [i]), x0=self.x, method=self.method, tol=self.tol)
            vals.append(r.f)
        out[fresh] = vals
        return out

    def removal_values(self) -> np.ndarray:
        """Exact value of the best point on sel \\ {j} for each j in sel (in the order of sel)."""
        if len(self.sel) == 0:
            return np.empty(0)
        if self.ls is not None:
            return self.ls.removal_values(self.C[self.sel], self.f)
        self._require_no_ridge("removal_values")
        if self.lp.design is not None and self.method == "newton" and not self.bounded:
            base = self._base_cols()
            m = len(self.sel)
            U0 = np.tile(self.x[base], (m, 1))
            fixed = np.zeros((m, len(base)), dtype=bool)
            pos = np.searchsorted(base, self.C[self.sel])
            fixed[np.arange(m), pos] = True
            U0[fixed] = 0.0
            return self._newton(base, U0, None, fixed)
        vals = []
        for j in range(len(self.sel)):
            r = self.lp.restricted_minimize(np.delete(self.sel, j), x0=self.x, method=self.method, tol=self.tol)
            vals.append(r.f)
        return np.asarray(vals)

    # ------------------------------------------------------------------ helpers
    def _base_cols(self) -> np.ndarray:
        return np.union1d(self.C[self.sel], self.F)

    def _term_columns(self, cols: np.ndarray) -> list[np.ndarray]:
        """Each term's columns ``cols`` as (len(cols), size_t) rows: the extra column of each
        insertion problem."""
        d = self.lp.design
        out = []
        for i in range(len(d.terms)):
            J = d.term_columns(i, cols)
            J = J.toarray() if sp.issparse(J) else np.asarray(J, dtype=float)
            out.append(np.ascontiguousarray(J.T))
        return out

    def _newton(
        self,
        base: np.ndarray,
        U0: np.ndarray,
        extra: list[np.ndarray] | None,
        fixed: np.ndarray | None,
        extra_lin: np.ndarray | None = None,
    ) -> np.ndarray:
        """Exact values of m restricted problems sharing the base columns (the batched kernel)."""
        rd = self.lp.design.reduced(np.asarray(base, dtype=np.int64), dense_cols=True)
        res = newton(rd, U0, extra=extra, extra_lin=extra_lin, fixed=fixed, tol=self.tol, max_iter=60)
        m = U0.shape[0]
        self.lp.oracle.charge(solves=m, grads=res.iterations, ifo=self.lp.n_samples * res.iterations)
        return res.values

    def _require_no_ridge(self, what: str) -> None:
        if self.ridge is not None:
            raise ValueError(f"ActiveSet.{what} scores f itself; call solve(sel) without ridge first")


GRAM_RATIO = 4  # cached Hessian columns pay when the coordinates are at most this many times those read per step


def gram_pays(lp: LoweredProblem, read: int) -> bool:
    """Whole cached columns of a constant Hessian (one pass over the data each, then O(n_coords) per
    entry) are cheaper than products with the data for the ``read`` coordinates a search step reads
    (O(n_samples * read) per step) when the coordinates are not many more than those: a search
    visits each column many times. With many coordinates (p = 5000 and up) a column costs a whole
    pass and the step's products with the data win."""
    return lp.n <= GRAM_RATIO * max(read, 1)


class _GramQuadratic:
    """Restricted minimizers of a quadratic objective f(x) = f0 + g0'x + x'Hx/2 from cached columns
    of its constant Hessian (``lp.hessian_columns``: each column one transposed product with the
    data, once): on a support B (free coordinates included) u = -H_BB^-1 g0_B by a Cholesky
    factorization of H_BB (O(|B|^3)), the gradient g0 + H[:, B] u (O(n |B|)), no pass over the data.
    The value is the quadratic form at u (stationary there, so the solve's error enters to second
    order), or the exact objective when the fit is so close that the form would cancel. ``move``
    returns None where this does not apply (the Hessian columns are over the cache's limit, H_BB is
    not numerically positive definite); the caller then solves from the data."""

    def __init__(self, lp: LoweredProblem):
        self.lp = lp
        self.f0, self.g0 = lp.quadratic_origin()
        self.fresh = False
        self.B = np.empty(0, dtype=np.int64)
        self.u = np.zeros(0)
        self.Hc: np.ndarray | None = None

    def move(
        self, F: np.ndarray, C: np.ndarray, sel: np.ndarray, ridge: tuple[float, np.ndarray] | None
    ) -> tuple[np.ndarray, float] | None:
        self.fresh = False
        B = np.concatenate([F, C[sel]]).astype(np.int64)
        x = self.lp.zeros()
        if B.size == 0:
            self.B, self.u, self.Hc, self.fresh = B, np.zeros(0), np.zeros((self.lp.n, 0)), True
            return x, self.f0
        Hc = self.lp.hessian_columns(B)
        if Hc is None:
            return None
        H = Hc[B]
        rid = None
        if ridge is not None:  # rho/2 ||x_{C[R]}||^2 on the selected coordinates of R
            rc = np.zeros(len(C))
            rc[np.asarray(ridge[1], dtype=np.int64)] = ridge[0]
            rid = np.concatenate([np.zeros(len(F)), rc[sel]])
            H = H + np.diag(rid)
        c, info = dpotrf(H, lower=False, clean=True, overwrite_a=False)
        d = np.abs(np.diag(c)) if info == 0 else None
        if d is None or d.min() <= 1e-7 * d.max():  # not numerically positive definite: from the data
            return None
        gB = self.g0[B]
        u, info = dpotrs(c, -gB)
        if info != 0:
            return None
        f = self.f0 + float(gB @ u) + 0.5 * float(u @ (H @ u))
        x[B] = u
        if f < 1e-4 * abs(self.f0):  # a near-exact fit: the form cancels, take the objective itself
            f = self.lp.oracle.peek(x) + (0.5 * float(rid @ (u * u)) if rid is not None else 0.0)
        self.B, self.u, self.Hc, self.fresh = B, u, Hc, True
        return x, f

    def grad(self) -> np.ndarray:
        """The gradient of f (without a ridge) at the last point moved to."""
        return self.g0 + self.Hc @ self.u


class _LeastSquares:
    """f(x) = const + ||M x - r||^2 on the stacked weighted design M = [sqrt(c_t w_t) J_t]_t,
    r = -[sqrt(c_t w_t) b_t]_t, with a Cholesky factor of the selected columns kept up to date.

    Factor order: the selected flat columns ``cols[:s]`` (free ones first, then constrained ones in
    the order they entered). ``A[:, :s]`` holds the columns, ``R[:s, :s]`` the upper Cholesky
    factor of ``A'A + diag(rid)``, ``Atr`` the vector A'r. Columns numerically in the span of the
    others are kept aside in ``parked`` (their coefficient is 0; the minimum is the same) and
    re-tried whenever a column leaves. ``W`` (rows :s) = R^-T A' M_C, kept only once scoring is
    asked for.
    """

    def __init__(self, lp: LoweredProblem, C: np.ndarray):
        design = lp.design
        self.lp = lp
        self.design = design
        self.sizes = [int(t.map.size) for t in design.terms]
        self.r = design.ls_rhs()
        self.const = design.const
        self.nrows = int(sum(self.sizes))
        cap = 8
        self.A = np.zeros((self.nrows, cap), order="F")
        self.R = np.zeros((cap, cap))
        self.rid = np.zeros(cap)
        self.Atr = np.zeros(cap)
        self.cols = np.zeros(cap, dtype=np.int64)
        self.s = 0
        self.parked: dict[int, float] = {}  # flat column -> its ridge
        self.W: np.ndarray | None = None
        self.normsq: np.ndarray | None = None
        self.Cidx: np.ndarray | None = None  # flat column -> position into C (or -1)
        self.C = C
        self.rid_C = np.zeros(len(self.C))
        self.e = self.r.copy()
        self.u = np.zeros(0)

    # ---- design access
    def stacked(self, cols: np.ndarray) -> np.ndarray:
        """Columns ``cols`` (flat coordinates) of M as a new dense (nrows, len(cols)) array."""
        return self.design.stacked(cols)

    def rmatvec(self, v: np.ndarray) -> np.ndarray:
        """M' v as a flat vector of length lp.n (one pass over the data, like a gradient)."""
        self.lp.oracle.charge(grads=1, ifo=self.lp.n_samples)
        return self.design.ls_rmatvec(v)

    # ---- factor updates
    def _grow(self) -> None:
        cap = self.A.shape[1] * 2
        A = np.zeros((self.nrows, cap), order="F")
        A[:, : self.s] = self.A[:, : self.s]
        R = np.zeros((cap, cap))
        R[: self.s, : self.s] = self.R[: self.s, : self.s]
        self.A, self.R = A, R
        self.rid = np.resize(self.rid, cap)
        self.Atr = np.resize(self.Atr, cap)
        self.cols = np.resize(self.cols, cap)
        if self.W is not None:
            W = np.zeros((cap, self.W.shape[1]))
            W[: self.s] = self.W[: self.s]
            self.W = W

    def _add(self, c: int, a: np.ndarray, rho: float) -> bool:
        s = self.s
        aa = float(a @ a) + rho
        if s:
            w = sla.solve_triangular(self.R[:s, :s], self.A[:, :s].T @ a, trans="T", check_finite=False)
            d2 = aa - float(w @ w)
        else:
            w, d2 = np.zeros(0), aa
        if not aa > 0 or d2 <= _DEPENDENT * aa:
            return False
        if s == self.A.shape[1]:
            self._grow()
        self.A[:, s] = a
        self.R[:s, s] = w
        self.R[s, :s] = 0.0
        self.R[s, s] = np.sqrt(d2)
        self.rid[s] = rho
        self.Atr[s] = float(a @ self.r)
        self.cols[s] = c
        if self.W is not None:
            ma = self.rmatvec(a)[self.C]
            if rho and self.Cidx[c] >= 0:
                ma[self.Cidx[c]] += rho
            self.W[s] = (ma - w @ self.W[:s]) / self.R[s, s]
        self.s = s + 1
        return True

    def _remove(self, q: int) -> None:
        s = self.s
        R = self.R
        R[:s, q : s - 1] = R[:s, q + 1 : s]
        W = self.W
        for l in range(q, s - 1):  # Givens rotations: R[:, :s-1] is upper Hessenberg from column q
            a, b = R[l, l], R[l + 1, l]
            h = np.hypot(a, b)
            if h == 0:
                continue
            c, sn = a / h, b / h
            rl, rl1 = R[l, l : s - 1].copy(), R[l + 1, l : s - 1]
            R[l, l : s - 1] = c * rl + sn * rl1
            R[l + 1, l : s - 1] = -sn * rl + c * rl1
            R[l + 1, l] = 0.0
            if W is not None:
                wl, wl1 = W[l].copy(), W[l + 1]
                W[l] = c * wl + sn * wl1
                W[l + 1] = -sn * wl + c * wl1
        R[s - 1, : s - 1] = 0.0
        R[:s, s - 1] = 0.0
        self.A[:, q : s - 1] = self.A[:, q + 1 : s]
        for v in (self.rid, self.Atr, self.cols):
            v[q : s - 1] = v[q + 1 : s]
        self.s = s - 1

    def _refactor(self, leave: list[int]) -> bool:
        """Drop the columns ``leave`` and refactor the rest from scratch (one Gram matrix and one
        Cholesky, O(n s^2) in BLAS): cheaper than a Python loop of Givens rotations per column when
        no scoring projections W are kept. False (nothing changed) when the Gram is not positive
        definite enough; the caller then uses the rotations."""
        keep = np.setdiff1d(np.arange(self.s), leave)
        A = self.A[:, keep]
        G = A.T @ A
        G[np.diag_indices_from(G)] += self.rid[keep]
        try:
            L = np.linalg.cholesky(G)
        except np.linalg.LinAlgError:
            return False
        d = np.diag(L)
        if len(d) and d.min() <= np.sqrt(_DEPENDENT) * d.max():
            return False
        s = len(keep)
        self.A[:, :s] = A
        for v in (self.rid, self.Atr, self.cols):
            v[:s] = v[keep]
        self.R[:s, :s] = L.T
        self.R[s : self.s, :] = 0.0
        self.R[:, s : self.s] = 0.0
        self.s = s
        return True

    def move(self, F: np.ndarray, C: np.ndarray, sel: np.ndarray, rid_C: np.ndarray) -> tuple[np.ndarray, float]:
        """Go to the support F ∪ C[sel] with ridge ``rid_C`` (per position into C) and solve."""
        self.C = C
        self.rid_C = rid_C
        if self.Cidx is None:
            self.Cidx = np.full(self.lp.n, -1, dtype=np.int64)
            self.Cidx[C] = np.arange(len(C))
        want = np.concatenate([F, C[sel]]).astype(np.int64)
        want_rid = np.concatenate([np.zeros(len(F)), rid_C[sel]])
        target = dict(zip(want.tolist(), want_rid.tolist()))
        # leave: columns not wanted any more, or whose ridge changed
        leave = [
            q for q in range(self.s) if int(self.cols[q]) not in target or target[int(self.cols[q])] != self.rid[q]
        ]
        removed = bool(leave)
        if leave and not (self.W is None and self._refactor(leave)):
            for q in reversed(leave):  # Givens rotations (they keep the scoring projections W up to date)
                self._remove(q)
        for c in list(self.parked):
            if c not in target:
                del self.parked[c]
        have = set(self.cols[: self.s].tolist())
        new = [c for c in want.tolist() if c not in have and (removed or c not in self.parked)]
        if new:
            M = self.stacked(np.asarray(new, dtype=np.int64))
            for c, a in zip(new, M.T):
                if self._add(c, np.ascontiguousarray(a), target[c]):
                    self.parked.pop(c, None)
                else:
                    self.parked[c] = target[c]
        return self._solve()

    def _solve(self) -> tuple[np.ndarray, float]:
        s = self.s
        x = self.lp.zeros()
        if s == 0:
            self.u = np.zeros(0)
            self.e = self.r.copy()
            return x, self.const + float(self.e @ self.e)
        R = self.R[:s, :s]
        A = self.A[:, :s]
        u = sla.cho_solve((R, False), self.Atr[:s], check_finite=False)
        e = self.r - A @ u
        d = np.abs(np.diag(R))
        if (
            d.min() < 1e-3 * d.max()
        ):  # ill conditioned: one step of iterative refinement (corrected semi-normal equations)
            u = u + sla.cho_solve((R, False), A.T @ e - self.rid[:s] * u, check_finite=False)
            e = self.r - A @ u
        self.u, self.e = u, e
        x[self.cols[:s]] = u
        return x, self.const + float(e @ e) + float(self.rid[:s] @ (u * u))

    # ---- scoring
    def _ensure_W(self) -> None:
        if self.W is not None:
            return
        nC = len(self.C)
        s = self.s
        self.W = np.zeros((self.A.shape[1], nC))
        self.normsq = np.zeros(nC)
        step = max(1, _CHUNK // max(self.nrows, 1))
        for lo in range(0, nC, step):
            blk = self.C[lo : lo + step]
            Mb = self.stacked(blk)
            self.normsq[lo : lo + step] = np.einsum("ij,ij->j", Mb, Mb)
            if s:
                AtM = self.A[:, :s].T @ Mb
                # ridge: the Gram of the selected columns carries rid on its diagonal, A'M_C must too
                pos = self.Cidx[self.cols[:s]]
                for q in np.flatnonzero(self.rid[:s] > 0):
                    j = pos[q] - lo
                    if 0 <= j < len(blk):
                        AtM[q, j] += self.rid[q]
                self.W[:s, lo : lo + step] = sla.solve_triangular(self.R[:s, :s], AtM, trans="T", check_finite=False)

    def insertion_values(self, C: np.ndarray, cand: np.ndarray, f: float) -> np.ndarray:
        self.C = C
        self._ensure_W()
        s = self.s
        if len(cand) * 20 < len(C):
            ae = self.stacked(C[cand]).T @ self.e
        else:
            ae = self.rmatvec(self.e)[C[cand]]
        proj = np.einsum("ij,ij->j", self.W[:s, cand], self.W[:s, cand]) if s else np.zeros(len(cand))
        nrm = self.normsq[cand] + self.rid_C[cand]
        denom = nrm - proj
        ok = denom > _DEPENDENT * np.maximum(nrm, 1e-300)
        out = np.full(len(cand), f)
        out[ok] = f - ae[ok] ** 2 / denom[ok]
        return out

    def removal_values(self, flat_sel: np.ndarray, f: float) -> np.ndarray:
        s = self.s
        out = np.full(len(flat_sel), f)
        if s == 0:
            return out
        where = {int(c): q for q, c in enumerate(self.cols[:s])}
        if self.parked:  # a parked column may take over from the one removed: solve each case
            P = np.fromiter(self.parked, dtype=np.int64)
            MP, rP = self.stacked(P), np.fromiter(self.parked.values(), dtype=float)
            for k, c in enumerate(flat_sel.tolist()):
                q = where.get(c)
                if q is not None:
                    keep = np.delete(np.arange(s), q)
                    out[k] = self._direct(np.hstack([self.A[:, keep], MP]), np.concatenate([self.rid[keep], rP]))
            return out
        Rinv = sla.solve_triangular(self.R[:s, :s], np.eye(s), check_finite=False)
        ginv = np.einsum("ij,ij->i", Rinv, Rinv)
        for k, c in enumerate(flat_sel.tolist()):
            q = where.get(c)
            if q is not None:
                out[k] = f + self.u[q] ** 2 / ginv[q]
        return out

    def _direct(self, M: np.ndarray, rid: np.ndarray) -> float:
        """min ||M u - r||^2 + sum rid u^2 + const by a least-squares solve (rank-deficient safe)."""
        aug = np.vstack([M, np.diag(np.sqrt(rid))])
        rhs = np.concatenate([self.r, np.zeros(len(rid))])
        u, *_ = np.linalg.lstsq(aug, rhs, rcond=None)
        res = rhs - aug @ u
        return self.const + float(res @ res)


LEAN_LOSSES = ("logistic", "exp")  # the losses of the lean class finite on the whole line (the ones these solves take)
LEAN_STALE = 2.0  # a stored Hessian serves while every curvature is within this factor of the one it was formed at
LEAN_RATE = 0.1  # ... and each step cuts the decrement by at least this factor (else a fresh Hessian is formed)
LEAN_HESSIANS = 4  # Hessians kept by their columns (a re-solve on a support starts from the last one there)
LEAN_CHORD = 3.0  # ... or more than this many further steps at its rate would be needed
LEAN_MOVED = 0.1  # a Hessian is updated on the samples whose curvature moved by more than this, relative
LEAN_PART = 0.5  # ... when they are at most this share of the samples (else it is formed from scratch)
LEAN_SWAPS = 2  # a support this many columns away from an active set's working block replaces its rows in place
LEAN_POINTS = 6  # points evaluated kept (a solve starting at one reuses its loss part, near one its z)
LEAN_UPDATE = 3  # ... z moved from a stored point that differs in at most this many coordinates
LEAN_SCREEN = True  # line 15's argmax screened on float32 rows, the candidates rechecked in double (the same answer)
LEAN_SCREEN_AFTER = 48  # ... from this many argmaxes of a run on (the float32 copy costs about 40 of them)
DECIDE_LOCAL = (
    1e-3  # a solve's value bracket serves a caller's test once the decrement is this small relative to 1 + |f|
)
DECIDE_SAFETY = 4.0  # ... and its lower end is f minus this many times the quadratic model's decrease dec / 2
# (the compiled loop's constants, in the order _lean.lean_move passes them to its Newton loop)
_CONSTS = (LEAN_STALE, LEAN_RATE, LEAN_CHORD, DECIDE_LOCAL, DECIDE_SAFETY, LEAN_MOVED, LEAN_PART)
_NONE = np.empty(0, dtype=np.intp)


class LeanRows:
    """What the lean solves of one problem share: its arrays (:mod:`.lean`), the rows J' and the last
    points evaluated. Two active sets on the same problem (ARHT's f- and g_R-minimizers, which visit
    the same supports) pass one of these to share them."""

    def __init__(self, P: Any, phi: Any):
        from ..numerics import _lean  # (lean_rows made sure it is built)

        self.phi, self.P, self.kernel = phi, P, _lean
        self.JT = np.ascontiguousarray(np.asarray(P.J).T)  # (D, n): the rows of one support gather contiguously
        self.b, self.wc = np.asarray(P.b), np.asarray(P.wc)
        self.lin, self.rd = np.asarray(P.lin), np.asarray(P.rd)
        self.const = float(P.const)
        # the last points evaluated, (x over every coordinate, z = J x + b, sum wc phi(z), wc phi'(z),
        # wc phi''(z)): the loss part does not depend on the ridge, so the f- and g_R-solves share them
        self.points: list[tuple[np.ndarray, np.ndarray, float, np.ndarray, np.ndarray]] = []
        # line 15's screen (_LeanNewton.grad_argmax): the rows in float32 and their error bounds, made once
        # LEAN_SCREEN_AFTER argmaxes have been asked for
        self.J32: np.ndarray | None = None
        self.beta: np.ndarray | None = None
        self.argmaxes = 0


def lean_rows(lp: LoweredProblem) -> LeanRows | None:
    """The shared state of the lean solves of ``lp`` (None outside their class: see
    :class:`_LeanNewton`)."""
    try:  # the arrays come with the compiled kernels' Problem: without the build, the general path (quietly)
        from ..numerics import _lean
    except ImportError:
        return None
    if not hasattr(_lean, "lean_move"):  # a build older than its loop (sources updated, not rebuilt): the same
        return None
    data = lean_data(lp)
    if data is None or data.quadratic or data.phi is None or data.phi.name not in LEAN_LOSSES:
        return None
    return LeanRows(data.P, data.phi)


class _LeanNewton:
    """Restricted minimizers of a composite objective of the lean class (:mod:`.lean`: one elementwise
    loss phi of J x + b, linear terms, a separable ridge) whose loss is finite on the whole line
    (logistic, exp), for a support that changes one coordinate at a time (ARHT's f- and
    g_R-minimizers): the damped Newton loop of :func:`sparsemodel.numerics.newton.newton` (the same
    stopping test on the Newton decrement and Armijo constant) on the gathered rows J'[cols], with
    the Hessian of the loss part kept across solves. Each solve is one compiled call
    (:func:`sparsemodel.numerics._lean.lean_move`; its loop ``_lean_newton``: one pass over the
    samples per loss evaluation, the gradient at a full step's trial point computed with it, no
    Python per step), which also forms, updates and moves the Hessians (``_renew``,
    ``_start_hessian``); the engine's state (its block, Hessians and points) stays on this object.
    A solve starting at a point evaluated before (LEAN_POINTS kept, shared by the active sets on the
    same rows: the loss part does not depend on the ridge) reuses its loss part; one starting a swap
    away moves its linear predictor z by the coordinates that changed.

    The rows J'[cols] are this engine's working block, in its own slot order: a support a swap
    away writes the entering column's row over the leaving one's (:meth:`rows`), so a swap copies
    one row, not the support's; a Hessian moved to it keeps that order.

    That Hessian, G = J_B' diag(c) J_B at the curvatures c = wc phi'', is formed only when needed;
    the next solve (one swap away) starts from this engine's last one on the same columns, else its
    last one moved to the new columns (:meth:`start_hessian`), so G is exactly the Hessian at the
    stored curvatures c0. Its steps (a chord method) are certified as in
    :func:`sparsemodel.numerics.newton._stale_direction`: when every curvature lies within [lo, hi]
    times c0, the true Hessian lies within [min(lo, 1), max(hi, 1)] times the one factorized (the
    ridges do not move), so the true decrement is at most the computed one over min(lo, 1), and the
    solve stops on that bound. A Hessian at the current point is formed (the kernel's ``_renew``: an
    update on the samples whose curvature moved, or from scratch) when the curvatures left [1/2, 2] times
    c0, a step cut the decrement by less than a factor 10, more than LEAN_CHORD further steps would
    be needed at its rate, or a step needed backtracking.

    A solve stops at the test, the point within the decrement's accuracy (a search's iterate);
    ``accurate=True`` (a point returned to the user) takes the last step from the true Hessian at
    the point when the test is met, as the general loop's polish, so the point is accurate to
    rounding. ``decide(f, lower)`` (optional): the caller's test, given the value reached and a
    lower end for the minimum; once the decrement is small (DECIDE_LOCAL) and the test returns True
    the solve stops there (``exact`` False), with ``lower`` = f - DECIDE_SAFETY * dec / (2 lo) (the
    quadratic model's decrease, times a safety factor: an estimate, not a proven bound). ``move``
    returns None where this path does not apply (a value that is not finite, a Hessian not
    numerically positive definite, no convergence, a point running away); the caller then uses the
    general path."""

    def __init__(self, lp: LoweredProblem, rows: LeanRows, tol: float):
        self.lp, self.sh, self.tol = lp, rows, tol
        self.cols = np.empty(0, dtype=np.int64)
        self.u = np.zeros(0)
        self.d1 = np.zeros(0)
        self.exact = True
        self.lower = np.nan
        self.hessians_on: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}  # columns -> (last Hessian there, c0)
        self.G: np.ndarray | None = None  # the loss part's Hessian on Gcols at the curvatures c0
        self.Gcols = np.empty(0, dtype=np.int64)
        # this engine's working block: the rows J'[wcols] in its own (slot) order, a swap writing the entering
        # column's row over the leaving one's (no gathered copy of the whole support)
        self.work: np.ndarray | None = None
        self.wcols = np.empty(0, dtype=np.int64)
        self.blocks: dict[int, np.ndarray] = {}  # a gathered block's buffer by its number of rows
        self.c0 = np.zeros(0)

    def start_hessian(self, cols: np.ndarray, JTB: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The Hessian of the loss part on ``cols`` (in their order, that of the rows JTB) a solve there
        starts from, at its curvatures c0, and c0 (None: none stored; the kernel's
        ``lean_hessian_source``)."""
        Gsrc, srccols, c0 = self.sh.kernel.lean_hessian_source(self, np.sort(cols).tobytes())
        if Gsrc is None:
            return None
        return self.sh.kernel.lean_start_hessian(JTB, Gsrc, srccols, cols, c0), c0

    def rows(self, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The support ``cols`` (sorted) in this engine's slot order and its rows J'[cols] in that
        order: the working block with the rows of at most LEAN_SWAPS entering columns written over
        those of the leaving ones, else a gathered copy (a support of another size, or farther)."""
        w = self.wcols
        if self.work is not None and len(w) == len(cols):
            w = w.copy()  # (the slot order a Hessian was stored with stays as it was)
            if self.sh.kernel.lean_rows(self.sh.JT, self.work, w, cols, LEAN_SWAPS) >= 0:
                self.wcols = w
                return w, self.work
        self.work = self.sh.JT[cols]
        self.wcols = cols.copy()
        return self.wcols, self.work

    def move(
        self,
        F: np.ndarray,
        C: np.ndarray,
        sel: np.ndarray,
        ridge: tuple[float, np.ndarray] | None,
        x0: np.ndarray,
        decide: Callable[[float, float], bool] | None = None,
        accurate: bool = False,
    ) -> tuple[np.ndarray, float] | None:
        """The restricted minimizer on F ∪ C[sel] (with the ridge rho on C[R], ``ridge=(rho, R)``)
        from x0, and its value; None where this path gives no answer. One compiled call
        (``_lean.lean_move``: the working block, the start, the Hessian kept or moved, the loop, the
        bookkeeping)."""
        rho, R = (0.0, _NONE) if ridge is None else (float(ridge[0]), np.asarray(ridge[1], dtype=np.intp))
        return self.sh.kernel.lean_move(
            self, self.sh, F, C, sel, rho, R, x0, decide, accurate, self.tol, _CONSTS,
            LEAN_SWAPS, LEAN_UPDATE, LEAN_POINTS, LEAN_HESSIANS,
        )  # fmt: skip

    def grad_argmax(self, at: np.ndarray) -> int:
        """The position in ``at`` (flat coordinates off the support, not empty) of the largest |grad_c f|
        at the last point moved to, the first on ties: exactly np.argmax(np.abs(self.grad(at)[at])).
        With LEAN_SCREEN the gradient is screened on a float32 copy of the rows and the candidates
        whose rigorous error bracket reaches the maximum are computed again in double
        (``_lean.lean_grad_argmax``: half the bytes read; the same bits decide)."""
        sh = self.sh
        at = np.asarray(at, dtype=np.intp)
        if LEAN_SCREEN:
            sh.argmaxes += 1
            if sh.J32 is None and sh.argmaxes >= LEAN_SCREEN_AFTER:
                sh.J32, sh.beta = sh.kernel.lean_rows32(sh.JT)
            if sh.J32 is not None:
                q = sh.kernel.lean_grad_argmax(sh.JT, sh.J32, sh.beta, self.d1, sh.lin, at)
                if q >= 0:
                    return q
        return int(np.argmax(np.abs(self.grad(at)[at])))

    def grad(self, at: np.ndarray | None = None) -> np.ndarray:
        """The gradient of f (without the ridge) at the last point moved to; with ``at`` (flat
        coordinates off the support) only there (0 elsewhere), one product per row."""
        sh = self.sh
        if at is not None:
            g = np.zeros(len(sh.lin))
            sh.kernel.lean_grad(sh.JT, self.d1, sh.lin, np.asarray(at, dtype=np.intp), g)
            return g
        g = sh.JT @ self.d1 + sh.lin
        g[self.cols] += sh.rd[self.cols] * self.u
        return g
