"""The pieces of a composite objective: a :class:`Term` c * sum_i w_i phi(z_i) (z = its affine map
of x; a row-wise phi for the softmax), which reads every fact about its loss from the atom, and a
:class:`Reduced` design (the terms on a subset of coordinates), what the numerical kernels take.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..model.atoms import NoConjugate


@dataclass
class Term:
    """c * sum_i w_i phi(z_i), z = map(x); ``rowwise``: phi maps each row of an (n, m) z to a number;
    ``whole``: phi maps the whole (flattened) z to one number (``cox``, ``ordinal``, a
    ``custom_loss``: losses that do not separate over entries or rows), no weights.

    Every fact about phi is the atom's (:mod:`sparsemodel.model.atoms`: values, derivatives, the
    Hessian's action, the curvature bound, the conjugate); the term adds its coefficient, weights
    and shape."""

    coef: float
    phi: Any
    map: Any
    weights: np.ndarray | None = None
    rowwise: bool = False
    whole: bool = False

    @property
    def diagonal(self) -> bool:
        """The loss Hessian is diagonal (an elementwise loss): the term's Hessian is J' diag(c) J.
        Row-wise and whole-vector losses apply theirs (:meth:`hessian_apply`)."""
        return not (self.rowwise or self.whole)

    @property
    def n_rows(self) -> int | None:
        """The rows of data the term reads (its sample axis): the map's leading dimension, or what a
        whole-vector loss states (``ordinal``'s map [X w; theta] has n + J - 1 entries, n samples)."""
        if self.whole:
            return getattr(self.phi, "sample_count", self.map.n_rows)
        return self.map.n_rows

    @property
    def observations(self) -> float:
        """The sample size of the information criteria (unweighted): the loss values, or what a
        whole-vector loss states (``cox``: its events), else its rows."""
        if self.whole:
            obs = getattr(self.phi, "observations", None)
            return float(obs if obs is not None else self.n_rows)
        return float(self.out_size)

    @property
    def observations_unit(self) -> str:
        return getattr(self.phi, "observations_unit", "samples") if self.whole else "samples"

    @property
    def finite_sum(self) -> bool:
        """The term is a sum over its rows (elementwise and row-wise losses), so a subset of rows gives
        an unbiased estimate; a whole-vector loss couples its rows (the risk sets of ``cox``)."""
        return not self.whole

    @property
    def quadratic(self) -> bool:
        """phi(z) = z^2: the term is a weighted sum of squares (least-squares kernels apply)."""
        return bool(self.phi.quadratic)

    @property
    def curvature_sup(self) -> float | None:
        """sup phi'' of the loss (a global curvature bound), as its atom states it (built-in or user
        ``func``; 1/2 for the row-wise softmax, whose Hessian diag(p) - p p' has norm <= 1/2)."""
        return self.phi.curvature_sup

    def logits(self, z: np.ndarray) -> np.ndarray | None:
        """Per loss value (entry, or row) the class logits its atom states (``Atom.logits``), shape
        (out_size, K), at the term's affine values z; None when the loss is not a likelihood of
        classes (or is a whole-vector loss)."""
        if self.whole:
            return None
        L = self.phi.logits(self._rows(z) if self.rowwise else z)
        return None if L is None else np.asarray(L, dtype=float).reshape(self.out_size, -1)

    @property
    def out_size(self) -> int:
        """Number of phi values: entries, rows for a row-wise loss, 1 for a whole-vector loss."""
        if self.whole:
            return 1
        return self.map.shape[0] if self.rowwise else self.map.size

    def _rows(self, z: np.ndarray) -> np.ndarray:
        """A row-wise term's affine values (batch..., n*m) as (batch..., n, m)."""
        return z.reshape(z.shape[:-1] + (-1, self.map.shape[1]))

    def derivs(self, z: np.ndarray, order: int = 2) -> tuple[np.ndarray, Any, Any]:
        """phi values and derivatives on the last axis of ``z`` (which may carry a leading batch
        axis), weights applied. Elementwise: (v, phi', phi'') per entry. Row-wise: (v per row,
        gradient per entry, None; the Hessian is applied by :meth:`hessian_apply`). Whole-vector:
        (the value with a trailing axis of length 1, the gradient, None)."""
        w = self.weights
        if self.whole:
            v, g, _ = self.phi.derivs(z, order)
            return np.asarray(v, dtype=float)[..., None], g, None
        if self.rowwise:
            Z = self._rows(z)
            v, P, _ = self.phi.derivs(Z, order)
            if w is not None:
                v = v * w
                if P is not None:
                    P = P * w[:, None]
            return v, (P.reshape(z.shape) if P is not None else None), None
        v, d1, d2 = self.phi.derivs(z, order)
        if w is not None:
            v = v * w
            d1 = d1 * w if d1 is not None else None
            d2 = d2 * w if d2 is not None else None
        return v, d1, d2

    def hessian_apply(self, z: np.ndarray, U: np.ndarray, d2: np.ndarray | None = None) -> np.ndarray:
        """The loss Hessian at z (per entry, or per row for a row-wise loss), weights in, applied to
        U: shape of z (one direction) or (size, q) (q columns, e.g. Jacobian columns). ``d2``: the
        weighted phi'' of :meth:`derivs` when already computed (elementwise)."""
        if self.whole:
            return self.phi.hessian_apply(z, U)
        if not self.rowwise:
            if d2 is None:
                d2 = self.derivs(z, 2)[2]
            return self.phi.hessian_apply(z, U, d2)
        Z = self._rows(z)
        cols = U.ndim > z.ndim
        out = self.phi.hessian_apply(Z, U.reshape(Z.shape + U.shape[z.ndim :]))
        if self.weights is not None:
            out = out * (self.weights[:, None, None] if cols else self.weights[:, None])
        return out.reshape(U.shape)

    def row_hessians(self, z: np.ndarray) -> np.ndarray:
        """A row-wise term's per-row loss Hessians w_i (diag(p_i) - p_i p_i') as (n, m, m)."""
        m = self.map.shape[1]
        n = z.shape[-1] // m
        return self.hessian_apply(z, np.tile(np.eye(m), (n, 1))).reshape(n, m, m)

    def class_columns(self, J: Any) -> tuple[np.ndarray, np.ndarray] | None:
        """For a row-wise term's columns J (rows ordered (sample, class), m classes): when every
        column is nonzero in one class slot only -- the columns of W and b in Z = X W + b -- its values
        per sample (n x q) and the slot of each column; else None."""
        m = self.map.shape[1]
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

    def class_hessian(self, z: np.ndarray, V: np.ndarray, cls: np.ndarray) -> np.ndarray:
        """J' H(z) J (the loss part's Hessian, without the coefficient) for columns that read one
        class each (:meth:`class_columns`: their values V, their classes cls): the block of classes
        c, c2 is V_c' diag(Lam_i[c, c2]) V_c2 with Lam_i the row's loss Hessian (:meth:`row_hessians`),
        one product per pair of classes (the other by symmetry), instead of J' (H J) over the n m
        rows of J, m - 1 of every m entries of each column zero (m^2 / 2 fewer products for m classes
        of one column count)."""
        m = self.map.shape[1]
        Lam = self.row_hessians(z)
        order = np.argsort(cls, kind="stable")  # the columns class by class: each block a slice
        Vs = V[:, order]
        at = np.searchsorted(cls[order], np.arange(m + 1))
        Hs = np.empty((len(cls), len(cls)))
        for c in range(m):
            a0, a1 = at[c], at[c + 1]
            if a0 == a1:
                continue
            for c2 in range(c, m):
                b0, b1 = at[c2], at[c2 + 1]
                if b0 == b1:
                    continue
                blk = Vs[:, a0:a1].T @ (Lam[:, c, c2][:, None] * Vs[:, b0:b1])
                Hs[a0:a1, b0:b1] = blk
                if c2 != c:
                    Hs[b0:b1, a0:a1] = blk.T
        inv = np.empty_like(order)
        inv[order] = np.arange(len(order))
        return Hs[np.ix_(inv, inv)]

    # ------------------------------------------------------------------ the conjugate
    def _scale(self) -> np.ndarray:
        """a = c w sigma per value (entry, or row): the term is sum_i a_i (sigma phi)(z_i) with
        sigma phi convex; negative entries make the term concave (no conjugate)."""
        self.check_convex_scale()
        w = self.weights if self.weights is not None else np.ones(self.out_size)
        return self.coef * self.phi.convex_sign * np.asarray(w, dtype=float)

    def check_convex_scale(self) -> None:
        """Raise NoConjugate where some a_i = c w_i sigma of :meth:`_scale` is negative (or sigma is
        0): the test alone, without the array (a term without weights reads only its coefficient)."""
        sigma = self.phi.convex_sign
        cs = self.coef * sigma
        if sigma == 0 or (
            cs < 0 if self.weights is None else bool(np.any(cs * np.asarray(self.weights, dtype=float) < 0))
        ):
            raise NoConjugate(
                f"the term {self.coef:g} * sum(w * {self.phi.name}(...)) is not convex in its argument: it has no conjugate"
            )

    @cached_property
    def convex(self) -> bool:
        """The term is provably convex in x (every c w_i sigma >= 0 with sigma phi convex: the test of
        :meth:`check_convex_scale`, as a flag; read once per term), phi's curvature proven, not
        assumed (a ``custom_loss``'s)."""
        if getattr(self.phi, "curvature_assumed", False):
            return False
        try:
            self.check_convex_scale()
        except NoConjugate:
            return False
        return True

    def conjugate(self, s: np.ndarray) -> np.ndarray:
        """The conjugate of g(z) = c sum_i w_i phi(z_i) at s (shape of z), one value per entry (or
        per row): g*(s) = sum_i a_i phi_sigma*(s_i / a_i) with a_i = c w_i sigma and phi_sigma =
        sigma phi convex (the atom's ``conjugate``); an entry with a_i = 0 contributes 0 at
        s_i = 0 and +inf elsewhere. The linear part of a design (``lin'x``, constants) is not a
        term: in a Fenchel dual it enters the dual's linear constraint, not a conjugate."""
        a = self._scale()
        s = np.asarray(s, dtype=float)
        if self.whole:  # one value: a phi*(s / a) (the atom raises NoConjugate when it has none)
            if a[0] == 0:
                return np.array([0.0 if not np.any(s) else np.inf])
            with np.errstate(invalid="ignore"):
                return np.atleast_1d(a[0] * self.phi.conjugate(s / a[0]))
        if self.rowwise:
            S = self._rows(s)
            pos = a > 0
            safe = np.where(pos, a, 1.0)
            with np.errstate(invalid="ignore"):
                v = a * self.phi.conjugate(S / safe[:, None])
            return np.where(pos, v, np.where(np.all(S == 0, axis=-1), 0.0, np.inf))
        pos = a > 0
        safe = np.where(pos, a, 1.0)
        with np.errstate(invalid="ignore"):
            v = a * self.phi.conjugate(s / safe)
        return np.where(pos, v, np.where(s == 0, 0.0, np.inf))

    def conjugate_domain(self, s: np.ndarray) -> np.ndarray:
        """Where :meth:`conjugate` is finite (per entry, or per row)."""
        return np.isfinite(self.conjugate(s))


@dataclass
class Reduced:
    """A design restricted to d coordinates: what the kernels minimize over.

    ``Js[t]`` is term t's Jacobian columns (size_t x d, dense or sparse), ``offsets[t]`` its affine
    value at the fixed part of x (b_t, plus A_t x for coordinates held at a given value), ``lin``
    the gradient of the linear terms on these coordinates."""

    terms: list[Term]
    Js: list[Any]
    offsets: list[np.ndarray]
    lin: np.ndarray
    const: float
    # per term: the diagonal r of a separable ridge on these columns (see Design.separable_diagonal),
    # False for a term that is not one, None where not known (the kernel then checks the columns)
    folds: list[Any] | None = None

    @property
    def d(self) -> int:
        return len(self.lin)

    @property
    def least_squares(self) -> bool:
        return all(t.quadratic and t.coef > 0 for t in self.terms)

    @property
    def quadratic(self) -> bool:
        return all(t.quadratic for t in self.terms)

    @property
    def convex(self) -> bool:
        """Every term convex in x (:attr:`Term.convex`; the linear part is): what a line search may
        read of the objective's shape along a direction (numerics/newton.backtrack)."""
        return all(t.convex for t in self.terms)

    def dense(self) -> Reduced:
        Js = [J.toarray() if sp.issparse(J) else np.asarray(J, dtype=float) for J in self.Js]
        return Reduced(self.terms, Js, self.offsets, self.lin, self.const)
