"""The design: a composite objective's data behind one interface.

A composite objective (see :mod:`sparsemodel.objective.structure`) is

    f(x) = const + lin'x + sum_t c_t sum_i w_ti phi_t((A_t x + b_t)_i)

with phi_t an elementwise loss (square, logistic, huber, exp, a user func ...) or a row-wise one
(``logsumexp(Z, axis=1)``, the softmax loss: one value per row of an (n, m) affine map). Linear
terms are folded into ``lin`` and ``const``. :class:`Design` holds the terms and offers:

* value, gradient (all coordinates or a subset) and exact Hessian-vector products;
* its columns (:class:`~sparsemodel.objective.columns.DesignColumns`): ``reduced(cols)``, the terms
  restricted to a set of coordinates, ``A_t[:, cols]`` (the columns "J B" of a coordinate subspace
  B), the input of every restricted-solve and scoring kernel; Hessian columns and diagonals; the
  least-squares forms; ``low_rank(...)`` for the low-rank subspaces {U C} of
  :class:`~sparsemodel.sets.lowrank.LowRank`;
* the finite-sum view: ``n_samples`` (the common leading dimension of the terms that read data,
  one sample per row) and ``grad_batch(x, rows)``, an unbiased gradient estimate from the rows
  ``rows`` only, at a cost proportional to their stored entries; terms without a sample axis (the
  separable regularizer, e.g. ``lam/2 * sum_squares(w)``) are kept apart and evaluated exactly.

Each affine map is kept in a canonical form when it has one (:class:`~sparsemodel.objective.affine.AffineMap`): a sum of blocks
``scale * (D @ x[view])`` or ``scale * x[view]`` (broadcast) plus an offset, where ``D`` is a
:class:`~sparsemodel.objective.operators.DataOperator` holding the user's data without copying it. Any
other affine expression (transposes, reductions inside the loss, ...) falls back to
:class:`~sparsemodel.objective.affine.ExprMap`, which evaluates the expression tree (correct, but a row subset then costs a full
pass)."""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from .affine import AffineMap, Block, ExprMap, NotCanonical, affine_map
from .columns import DesignColumns
from .evaluator import Layout
from .operators import DataOperator
from .structure import Composite
from .terms import Term

if TYPE_CHECKING:
    from ..model.samples import Binding


def _same_loss(a: Any, b: Any) -> bool:
    """The same loss of a term (or both linear): the same atom, or one of its class and parameters."""
    return a is b or (a is not None and b is not None and a.loss_key() == b.loss_key())


def _same(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and np.array_equal(a, b))


def linear_part(pieces: list[tuple[float, Any, Any]], layout: Layout, const: float) -> tuple[np.ndarray, float]:
    """The gradient and constant of the linear terms c * sum(w * (A x + b)) of a composite form,
    ``pieces`` their (c, w or None, map) in order, added to the form's own constant ``const``: what
    a design keeps as ``lin`` and ``const`` (and lowering/lean.on_rows makes on a subset of the
    rows, from the same loop)."""
    lin = np.zeros(layout.n)
    for coef, w, m in pieces:
        w = w if w is not None else np.ones(m.size)
        lin += coef * m.vjp(np.broadcast_to(w, (m.size,)).reshape(m.shape) if m.shape else w)
        const += coef * float(np.sum(w * m.b))
    return layout.symmetrize_grad(lin), const


class Design(DesignColumns):
    """The composite objective of a lowered problem (see the module docstring)."""

    def __init__(self, comp: Composite, layout: Layout, maps: list[Any] | None = None):
        self.layout = layout
        self.n = layout.n
        self.const = comp.const
        # the form's own constant, before the linear terms' offsets (lowering/lean.on_rows reads it)
        self.tree_const = comp.const
        self.terms: list[Term] = []
        # the form's terms and their maps, as made (a rebinding reads them: :meth:`rebound`)
        self.raw = comp.terms
        memo: dict[int, Any] = {}  # (a subexpression two terms read linearized once)
        self.maps = maps if maps is not None else [affine_map(rt.affine, layout, memo) for rt in comp.terms]
        pieces = [(rt.coef, rt.weights, m) for rt, m in zip(comp.terms, self.maps) if rt.phi is None]
        self.lin, self.const = linear_part(pieces, layout, comp.const)
        for rt, m in zip(comp.terms, self.maps):
            if rt.phi is not None:
                self.terms.append(Term(rt.coef, rt.phi, m, rt.weights, rt.rowwise, rt.whole))
        self._cache: OrderedDict[bytes, list[Any]] = OrderedDict()
        self._full: dict[int, Any] = {}
        self._few: dict[int, int] = {}  # term -> requests of a few columns served before keeping its Jacobian
        self._separable: dict[int, np.ndarray | None] = {}
        # the sample axis: the largest leading dimension among the terms that read data; the terms
        # with it are the finite sum, every other term (the separable regularizer, a quad_form, a
        # small side term) is evaluated exactly in every mini-batch, which keeps it unbiased
        rows = [t.n_rows for t in self.terms if t.map.reads_data() and t.map.shape]
        n_s = max(rows, default=None)
        self.sample_terms = [
            i
            for i, t in enumerate(self.terms)
            if n_s is not None and t.map.shape and t.n_rows == n_s and t.map.reads_data()
        ]
        self.n_samples: int | None = n_s if n_s is not None and n_s > 1 else None
        self._merge_small_terms()
        self._chunked = self.chunked

    def rebound(self, comp: Composite, binding: Binding) -> Design | None:
        """The design of the same objective with a rebinding's data (lowering/rebind.py): ``comp``
        its composite form read again with the new values (``decompose(..., binding.value)``), each
        term's map the old one where its expression reads nothing that changed, else made again
        from its blocks' recipes (:meth:`AffineMap.rebound`), else linearized again from the
        expression with the new data; the rest as a fresh design makes it. None when the form is
        not the old one term by term, or a loss reads new data beside its affine argument (then the
        model is lowered again)."""
        if len(comp.terms) != len(self.raw):
            return None
        maps = []
        for rt, old, m in zip(comp.terms, self.raw, self.maps):
            if rt.rowwise != old.rowwise or rt.whole != old.whole or not _same_loss(rt.phi, old.phi):
                return None
            if rt.phi is not None and any(a.is_constant() and binding.reads(a) for a in rt.phi.args):
                return None  # (a loss whose other arguments are the new data: cox's times)
            if rt.affine is old.affine and not binding.reads(rt.affine):
                maps.append(m)
                continue
            same = rt.affine is old.affine and isinstance(m, (AffineMap, ExprMap)) and m.expr is rt.affine
            got = m.rebound(binding) if same else None
            maps.append(got if got is not None else affine_map(binding.tree(rt.affine), self.layout))
        out = Design(comp, self.layout, maps)
        for i, (a, b) in enumerate(zip(self.terms, out.terms)):  # a ridge's diagonal, where the ridge did not change
            if i in self._separable and a.map is b.map and a.coef == b.coef and _same(a.weights, b.weights):
                out._separable[i] = self._separable[i]
        return out

    MERGE_SIZE = 64  # terms with at most this many entries may be merged

    def _merge_small_terms(self) -> None:
        """Many small terms with the same loss (a model written by a program: one term per
        feature, per group, per weight) become one term over a sparse operator, so that an
        evaluation is one sparse product instead of a Python loop over terms."""
        groups: dict[tuple, list[int]] = {}
        for i, t in enumerate(self.terms):
            if (
                i in self.sample_terms
                or not t.diagonal
                or t.coef <= 0
                or t.map.size > self.MERGE_SIZE
                or not getattr(t.map, "canonical", False)
            ):
                continue
            key = t.phi.loss_key()  # the same function: the same atom class and parameters
            groups.setdefault(key, []).append(i)
        merged: list[Term] = []
        drop: set[int] = set()
        for idx in groups.values():
            if len(idx) < 8:
                continue
            rows, bs, ws = [], [], []
            for i in idx:
                t = self.terms[i]
                cols = (
                    np.unique(np.concatenate([blk.coords for blk in t.map.blocks]))
                    if t.map.blocks
                    else np.zeros(0, int)
                )
                J = sp.csr_matrix(t.map.columns(cols)) if len(cols) else sp.csr_matrix((t.map.size, 0))
                J = sp.csr_matrix((J.data, cols[J.indices], J.indptr), shape=(t.map.size, self.n))
                rows.append(J)
                bs.append(t.map.b)
                w = t.weights if t.weights is not None else np.ones(t.map.size)
                ws.append(t.coef * w)
            J = sp.vstack(rows).tocsc()
            size = J.shape[0]
            m = AffineMap(
                [Block(np.arange(self.n), (self.n,), DataOperator(J), (size,))], np.concatenate(bs), (size,), self.n
            )
            merged.append(Term(1.0, self.terms[idx[0]].phi, m, np.concatenate(ws)))
            drop |= set(idx)
        if merged:
            keep = [t for i, t in enumerate(self.terms) if i not in drop]
            sample = [self.terms[i] for i in self.sample_terms]
            self.terms = keep + merged
            self.sample_terms = [self.terms.index(t) for t in sample]

    def curved_coordinates(self) -> np.ndarray:
        """A mask of the coordinates some (nonlinear) term reads: the others carry only the linear
        part ``lin``, so f is linear along them."""
        touched = np.zeros(self.n, dtype=bool)
        for t in self.terms:
            for blk in getattr(t.map, "blocks", None) or []:
                if blk.op is None or blk.right is not None or blk.scalar_out:
                    touched[blk.coords] = True
                elif len(blk.vshape) == 1:
                    touched[blk.coords[blk.op.col_sq_norms() > 0]] = True
                else:
                    rows_used = blk.op.col_sq_norms() > 0
                    touched[blk.coords.reshape(blk.vshape)[rows_used].ravel()] = True
            if not getattr(t.map, "canonical", False):
                for v in t.map.expr.variables():
                    touched[self.layout.slice(v)] = True
        return touched

    # ------------------------------------------------------------------ facts
    @property
    def finite_sum(self) -> bool:
        """The sample terms are sums over their rows (a mini-batch of rows estimates f without
        bias): False when a whole-vector loss couples the rows (``cox``'s risk sets)."""
        return self.n_samples is not None and all(self.terms[i].finite_sum for i in self.sample_terms)

    def finite_sum_reason(self) -> str | None:
        """Why the objective is not a finite sum over rows (None when it is one)."""
        if self.n_samples is None:
            return "reads no data rows (no sample axis)"
        for i in self.sample_terms:
            t = self.terms[i]
            if not t.finite_sum:
                return (
                    f"is not a sum over the rows of its data: {t.phi.name}(...) is one function of the whole "
                    "vector of its samples (it couples them), so a mini-batch of rows does not estimate it"
                )
        return None

    @property
    def least_squares(self) -> bool:
        """Only c * sum_squares(affine) terms with c > 0 (plus linear terms and constants)."""
        return bool(self.terms) and not self.lin.any() and all(t.quadratic and t.coef > 0 for t in self.terms)

    @property
    def quadratic(self) -> bool:
        return all(t.quadratic for t in self.terms)

    def describe(self) -> str:
        if self.least_squares:
            return "least squares (direct QR/Cholesky restricted solves)"
        if self.quadratic:
            return "quadratic (direct Cholesky restricted solves)"
        names = sorted({t.phi.name for t in self.terms})
        return f"sum of losses ({', '.join(names)}) of affine maps (Newton restricted solves)"

    def curvature_bound(self) -> float | None:
        """max over terms of sup phi'' (None if some phi'' is unbounded, e.g. exp or log): each
        term's :attr:`Term.curvature_sup`, which the atom states (built-in or user ``func``)."""
        bounds = []
        for t in self.terms:
            b = t.curvature_sup
            if b is None:
                return None
            bounds.append(b)
        return max(bounds, default=0.0)

    # ------------------------------------------------------------------ evaluation
    def value(self, x: np.ndarray) -> float:
        f = self.const + float(self.lin @ x)
        for t in self.terms:
            v = t.derivs(t.map.value(x), 0)[0]
            f += t.coef * float(np.sum(v))
        return f

    def _one_pass_square(self, t: Term, x: np.ndarray, offset: bool = True) -> tuple[float, np.ndarray] | None:
        """For a square loss over a chunked operator: (sum_i w_i z_i^2, the gradient of it) with
        z = A x (+ b with ``offset``), from ONE pass over the data (each row block forms its z and
        its share of A'(2 w z)); the map's other blocks (views, in-memory data) on the driver.
        None when the term has another form (then two passes: A x, then A' phi'(z))."""
        m = t.map
        if not (self._chunked and t.quadratic and not t.rowwise and getattr(m, "canonical", False)):
            return None
        big = [blk for blk in m.blocks if blk.op is not None and blk.op.chunked]
        if len(big) != 1:
            return None
        blk = big[0]
        if len(blk.vshape) != 1 or blk.scalar_out or blk.right is not None or np.ndim(blk.scale) != 0:
            return None
        if blk.nshape != m.shape:
            return None
        zo = m.b.copy() if offset else np.zeros(m.size)
        for ob in m.blocks:
            if ob is not blk:
                zo += ob.value(x).reshape(-1)
        xs = x[blk.coords]
        nz = np.flatnonzero(xs)
        v, gB, z = blk.op.square_pass(nz, xs[nz], zo, t.weights, float(blk.scale))
        g = np.zeros(self.n)
        g[blk.coords] += gB
        rest = [ob for ob in m.blocks if ob is not blk]
        if rest:
            cot = (2.0 * (t.weights * z if t.weights is not None else z)).reshape(m.shape)
            for ob in rest:
                ob.vjp(cot, g)
        return v, g

    def value_and_grad(self, x: np.ndarray, coords: np.ndarray | None = None) -> tuple[float, np.ndarray]:
        f = self.const + float(self.lin @ x)
        g = self.lin.copy()
        for t in self.terms:
            one = self._one_pass_square(t, x)
            if one is not None:
                f += t.coef * one[0]
                g += t.coef * one[1]
                continue
            v, d1, _ = t.derivs(t.map.value(x), 1)
            f += t.coef * float(np.sum(v))
            g += t.coef * t.map.vjp(d1, coords)
        if not np.isfinite(f):
            return f, np.full(self.n, np.nan)
        return f, self.layout.symmetrize_grad(g)

    def grad_from_derivs(self, d1s: list[np.ndarray]) -> np.ndarray:
        """The gradient from each term's loss derivative phi'(z_t) (weights in, as :meth:`Term.derivs`
        gives it) at a point: lin + sum_t c_t A_t' phi'(z_t), one transposed product per term and no
        forward pass (a Newton solve ends with these derivatives)."""
        g = self.lin.copy()
        for t, d1 in zip(self.terms, d1s):
            g += t.coef * t.map.vjp(d1)
        return self.layout.symmetrize_grad(g)

    def hvp(self, x: np.ndarray, v: np.ndarray, bound: bool = False) -> np.ndarray:
        """Hessian at x times v; with ``bound`` the Hessian with phi'' replaced by its global bound
        (for smoothness constants valid everywhere)."""
        out = np.zeros(self.n)
        use = bound and self.curvature_bound() is not None
        for t in self.terms:
            one = self._one_pass_square(t, v, offset=False) if t.weights is None or not use else None
            if one is not None:  # a square loss: phi'' = 2 w everywhere, A'(2 w A v) in one pass
                out += t.coef * one[1]
                continue
            Jv = t.map.value(v) - t.map.b
            if use and t.coef > 0:  # each term's own bound: sup phi'' of its loss
                cb = t.curvature_sup
                if t.weights is None:
                    r = cb * Jv
                else:
                    w = np.abs(t.weights)
                    r = cb * (np.repeat(w, t.map.shape[1]) if t.rowwise else w) * Jv
            else:
                z = t.map.value(x)
                _, _, d2 = t.derivs(z, 2)
                r = t.hessian_apply(z, Jv, d2)
            out += t.coef * t.map.vjp(r)
        return self.layout.symmetrize_grad(out)

    # ------------------------------------------------------------------ columns

    # ------------------------------------------------------------------ finite sum
    def grad_batch(self, x: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Unbiased estimate of the gradient from the sample rows ``rows`` (without replacement):
        (n / s) * sum over the rows of the sample terms' gradients, plus the exact gradient of the
        terms without a sample axis (the separable regularizer) and of the linear terms."""
        n = self.n_samples
        if n is None or not self.finite_sum:
            raise ValueError(f"the objective {self.finite_sum_reason()}")
        rows = np.asarray(rows, dtype=np.int64)
        scale = n / len(rows)
        g = self.lin.copy()
        for i, t in enumerate(self.terms):
            if i in self.sample_terms:
                m = t.map.rows(rows)
                tb = Term(t.coef, t.phi, m, t.weights[rows] if t.weights is not None and t.rowwise else None, t.rowwise)
                if t.weights is not None and not t.rowwise:
                    tb.weights = t.weights.reshape(t.map.shape)[rows].reshape(-1)
                _, d1, _ = tb.derivs(m.value(x), 1)
                g += scale * t.coef * m.vjp(d1)
            else:
                _, d1, _ = t.derivs(t.map.value(x), 1)
                g += t.coef * t.map.vjp(d1)
        return self.layout.symmetrize_grad(g)

    def sample_smoothness(self, top: int | None) -> float | None:
        """l_s of paper 002's Assumption 2: a bound on the restricted smoothness of every f_i (f =
        (1/n) sum_i f_i, f_i = n times sample i's share of the sample terms, plus the terms without
        a sample axis) over directions with at most ``top`` nonzeros (None: any direction). For a
        sample whose terms read the data row a_i through phi (phi'' <= c), the Hessian of f_i is
        n c w_i a_i a_i' (times the identity over the columns of a matrix variable), so l_s is n c w_i
        times the sum of the ``top`` largest a_ij^2, maximized over i (plus free and regularizer
        contributions). None when a sample term has no canonical form or an unbounded phi''."""
        n = self.n_samples
        if n is None or not self.finite_sum:
            return None
        per = np.zeros(n)
        for i in self.sample_terms:
            t = self.terms[i]
            if not getattr(t.map, "canonical", False):
                return None
            c = self._term_curvature_bound(t)
            if c is None:
                return None
            w = np.ones(t.map.shape[0])
            if t.weights is not None:
                ww = np.abs(t.weights).reshape(t.map.shape[0], -1)
                w = ww.max(axis=1)
            acc = np.zeros(n)
            for blk in t.map.blocks:
                sc = (
                    np.abs(np.broadcast_to(blk.scale, blk.shape)).reshape(n, -1).max(axis=1)
                    if np.ndim(blk.scale)
                    else abs(float(blk.scale)) * np.ones(n)
                )
                if blk.op is None:  # a broadcast view (an intercept): each entry at most once per row
                    acc += sc * sc * (int(np.prod(blk.vshape)) if top is None else min(top, int(np.prod(blk.vshape))))
                    continue
                if blk.scalar_out or blk.right is not None:
                    return None
                rowtop = blk.op.row_top_sq(top)
                acc += sc * sc * rowtop
            per += n * abs(t.coef) * c * w * acc
        rest = 0.0  # the terms without a sample axis: their own smoothness bound, exact in every f_i
        for i, t in enumerate(self.terms):
            if i in self.sample_terms:
                continue
            c = self._term_curvature_bound(t)
            if c is None:
                return None
            wmax = float(np.abs(t.weights).max()) if t.weights is not None else 1.0
            blocks = getattr(t.map, "blocks", None)
            if blocks is not None and all(b.op is None and b.right is None for b in blocks):
                # views of the variables (a ridge term): the Hessian is at most (sum of |scales|)^2
                amp = sum(float(np.max(np.abs(b.scale))) for b in blocks)
                rest += c * abs(t.coef) * wmax * amp * amp
                continue
            J = self.full_columns(i)
            if J is None:
                return None
            G = (J.T @ J).toarray() if sp.issparse(J) else J.T @ J
            rest += c * abs(t.coef) * wmax * float(np.abs(G).sum(axis=1).max())  # a Gershgorin bound
        return float(per.max() + rest)

    @staticmethod
    def _term_curvature_bound(t: Term) -> float | None:
        """A bound on |phi''| of a term's loss for the sample smoothness: the atom's sup phi'' when
        phi is convex (then 0 <= phi'' <= sup); None for a loss without a finite bound or a
        concave one (its sup phi'' does not bound |phi''|)."""
        c = t.curvature_sup
        if c is None or t.phi.convex_sign != 1:
            return None
        return float(c)

    # ------------------------------------------------------------------ low-rank subspaces
    def low_rank(
        self,
        W: np.ndarray,
        shape: tuple[int, int],
        U: np.ndarray | None,
        Vt: np.ndarray | None,
        layout_new: Any,
        new_coords: np.ndarray,
        where: np.ndarray,
    ) -> Design | None:
        """The design with the matrix variable at ``W`` replaced by ``U @ C``, ``C @ Vt`` or
        ``U @ C @ Vt`` (None when a term's map has no canonical form that allows it)."""
        try:
            maps = []
            for t in self.terms:
                if not getattr(t.map, "canonical", False):
                    return None
                maps.append(t.map.low_rank(W, shape, U, Vt, new_coords, where, layout_new.n))
        except NotCanonical:
            return None
        d = Design.__new__(Design)
        d.layout = layout_new
        d.n = layout_new.n
        d.const = self.const
        lin = np.zeros(layout_new.n)
        keep = np.ones(self.n, dtype=bool)
        keep[W] = False
        lin[where[np.flatnonzero(keep)]] = self.lin[keep]
        Lw = self.lin[W].reshape(shape)
        if U is not None:
            Lw = U.T @ Lw
        if Vt is not None:
            Lw = Lw @ Vt.T
        lin[new_coords] = Lw.ravel()
        d.lin = lin
        d.terms = [Term(t.coef, t.phi, mp, t.weights, t.rowwise, t.whole) for t, mp in zip(self.terms, maps)]
        d._cache = OrderedDict()
        d._full = {}
        d._few = {}
        d._separable = {}
        d.sample_terms = list(self.sample_terms)
        d.n_samples = self.n_samples
        return d
