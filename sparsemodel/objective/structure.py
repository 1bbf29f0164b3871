"""Recognize objectives that are sums of losses of affine maps (the composite form).

Many objectives in this field have the form

    f(x) = sum_t c_t * sum_i w_ti * phi_t((A_t x + b_t)_i)  +  const

(least squares, logistic, Poisson and Huber regression, ridge terms; ``quad_form(a, P)`` becomes
``||R a||^2`` with R'R = P; ``logsumexp(Z, axis=1)``, the softmax loss, is a *row-wise* phi with one
value per row of Z). :func:`decompose` finds that form in the expression tree (or returns None, and
the general L-BFGS path is used); :class:`~sparsemodel.objective.design.Design` turns it into the
data interface the kernels use. :func:`jacobian_columns` extracts the columns ``A[:, S]`` of any
affine expression by batched forward mode (the fallback for affine maps without a canonical block
form), keeping selections of variable coordinates sparse so that ``X @ w`` costs a column gather.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..model import atoms as A
from ..model.arith import Add, Concat, Div, Index, MatMul, Mul, Neg, Sub, Transpose
from ..model.dcp import AFFINE
from ..model.expr import Constant, Data, Expr, Parameter, Variable, dense
from .evaluator import Layout


@dataclass
class RawTerm:
    """c * sum(w * phi(affine)); phi None means the identity (a linear term). ``rowwise``: phi is a
    row-wise loss (logsumexp over axis 1 of a 2-D affine expression), w one weight per row.
    ``whole``: phi is a whole-vector loss, one number of the whole (flattened) affine vector
    (``cox``, ``ordinal``, a ``custom_loss``), no weights."""

    coef: float
    phi: Any
    affine: Expr
    weights: np.ndarray | None = None  # flattened: one per entry (or per row when rowwise)
    rowwise: bool = False
    whole: bool = False


def loss_argument(e: Expr) -> Expr | None:
    """The affine argument of the whole-vector loss ``e``: its loss arguments (the atom's
    ``loss_args``), each affine, flattened and concatenated when there are several; None when
    one is not affine or another argument is not constant (data)."""
    idx = tuple(e.loss_args)
    if any(not e.args[i].curvature == AFFINE for i in idx):
        return None
    if any(not a.is_constant() for i, a in enumerate(e.args) if i not in idx):
        return None
    parts = [e.args[i] for i in idx]
    return parts[0] if len(parts) == 1 else Concat(parts, span=e.span)


@dataclass
class Composite:
    terms: list[RawTerm]
    const: float


class _NotComposite(Exception):
    pass


def decompose(objective: Expr, layout: Layout, value: Callable[[Expr], Any] | None = None) -> Composite | None:
    """The composite form of a scalar objective, or None when it has none; ``value`` gives a
    constant sub-expression's value (default: its own, ``constant_value``; a rebinding's values
    with new data, :meth:`~sparsemodel.model.samples.Binding.value`)."""
    walk = _Decomposition(value or _own_value)
    walk.todo("v", objective, 1.0)
    try:
        while walk.work:
            kind, e, c, w = walk.work.pop()
            (walk.visit if kind == "v" else walk.summand)(e, c, w)
    except _NotComposite:
        return None
    return Composite(walk.terms, walk.const)


def _own_value(e: Expr) -> Any:
    return e.constant_value()


class _Decomposition:
    """The walk of :func:`decompose` over the objective: an explicit stack of (``"v"``: a term c * e
    of the objective, or ``"s"``: an argument of sum(), c * sum(w * e)) (no recursion per term),
    collecting the raw terms and the constant; any node outside the composite form raises
    _NotComposite."""

    def __init__(self, value: Callable[[Expr], Any]) -> None:
        self.value = value
        self.terms: list[RawTerm] = []
        self.const = 0.0
        self.work: list[tuple[str, Expr, float, np.ndarray | None]] = []

    def todo(self, kind: str, e: Expr, c: float, w: np.ndarray | None = None) -> None:
        self.work.append((kind, e, c, w))

    def scalar(self, e: Expr) -> float | None:
        """The value of a scalar constant, None for anything else."""
        if e.is_constant() and e.shape == ():
            return float(self.value(e))
        return None

    def visit(self, e: Expr, c: float, w: np.ndarray | None = None) -> None:
        if e.is_constant():
            self.const += c * float(np.sum(dense(self.value(e))))
            return
        if isinstance(e, Sub):
            self.todo("v", e.args[1], -c)
            self.todo("v", e.args[0], c)
            return
        if isinstance(e, Add):
            if e.args[0].shape != e.shape or e.args[1].shape != e.shape:
                raise _NotComposite
            self.todo("v", e.args[1], c)
            self.todo("v", e.args[0], c)
            return
        if isinstance(e, Neg):
            self.todo("v", e.args[0], -c)
            return
        if isinstance(e, Div):
            s = self.scalar(e.args[1])
            if s is None:
                raise _NotComposite
            self.todo("v", e.args[0], c / s)
            return
        if isinstance(e, Mul):
            for i in (0, 1):
                s = self.scalar(e.args[i])
                if s is not None:
                    self.todo("v", e.args[1 - i], c * s)
                    return
            raise _NotComposite
        if e.shape != ():
            raise _NotComposite
        if isinstance(e, (A.sum, A.mean)) and e.axis is None:  # (an affine sum too: sum(Y .* Z) a linear
            # term over Z's entries, whose map is Z's blocks, not a map of the scalar)
            scale = c / (e.args[0].size if isinstance(e, A.mean) else 1)
            self.todo("s", e.args[0], scale)
            return
        if e.curvature == AFFINE:
            self.terms.append(RawTerm(c, None, e))
            return
        if isinstance(e, A.sum_squares) and e.args[0].curvature == AFFINE:
            self.terms.append(RawTerm(c, A.square(e.args[0]), e.args[0]))
            return
        if isinstance(e, A.quad_form) and e.args[0].curvature == AFFINE:
            # c a'Pa = |c| ||R a||^2 with R'R = sign(c) (P + P')/2 (positive semidefinite for a convex term)
            P = dense(self.value(e.args[1]))
            lam, Q = np.linalg.eigh(np.sign(c) * (P + P.T) / 2)
            if lam[0] < -1e-10 * max(1.0, float(np.abs(lam).max())):
                raise _NotComposite  # a concave (or indefinite) term is no square: clipping would drop it
            R = np.sqrt(np.maximum(lam, 0.0))[:, None] * Q.T
            affine = MatMul(Data(R), e.args[0])
            self.terms.append(RawTerm(abs(c), A.square(affine), affine))
            return
        if getattr(e, "loss_form", None) == "elementwise" and e.args[0].curvature == AFFINE:
            self.terms.append(RawTerm(c, e, e.args[0]))
            return
        if getattr(e, "loss_form", None) == "whole":  # one number of a whole vector: cox, ordinal, ...
            arg = loss_argument(e)
            if arg is None:
                raise _NotComposite
            self.terms.append(RawTerm(c, e, arg, whole=True))
            return
        raise _NotComposite

    def summand(self, e: Expr, c: float, w: np.ndarray | None) -> None:
        """e is the argument of sum(); collect c * sum(w * e)."""
        if e.curvature == AFFINE:
            self.terms.append(RawTerm(c, None, e, weights=w))
            return
        form = getattr(e, "loss_form", None)  # the atom says whether (and how) it is a loss
        if form == "elementwise" and e.args[0].curvature == AFFINE and e.args[0].shape == e.shape:
            self.terms.append(RawTerm(c, e, e.args[0], weights=w))
            return
        if form == "rowwise" and e.args[0].curvature == AFFINE:  # the softmax loss: one logsumexp per row
            self.terms.append(RawTerm(c, e, e.args[0], weights=w, rowwise=True))
            return
        if form == "whole" and e.shape == ():  # sum(w * cox(...)): a scalar weight
            self.todo("v", e, c * (float(w[0]) if w is not None else 1.0))
            return
        if isinstance(e, (Add, Sub)) and e.args[0].shape == e.shape and e.args[1].shape == e.shape:
            self.todo("s", e.args[1], -c if isinstance(e, Sub) else c, w)
            self.todo("s", e.args[0], c, w)
            return
        if isinstance(e, Neg):
            self.todo("s", e.args[0], -c, w)
            return
        if isinstance(e, (Mul, Div)):
            a, b = e.args
            if isinstance(e, Div):
                if not b.is_constant():
                    raise _NotComposite
                k = 1.0 / dense(self.value(b))
                other = a
            elif a.is_constant():
                k, other = dense(self.value(a)), b
            elif b.is_constant():
                k, other = dense(self.value(b)), a
            else:
                raise _NotComposite
            if np.ndim(k) == 0:
                self.todo("s", other, c * float(k), w)
                return
            if other.shape != e.shape:
                raise _NotComposite
            kk = np.broadcast_to(k, e.shape).ravel()
            self.todo("s", other, c, kk if w is None else w * kk)
            return
        raise _NotComposite


# ----------------------------------------------------------------- Jacobian columns


class _Sel:
    """Sparse tangent: direction rows[j] is vals[j] * e_{pos[j]} in the node's flattened shape."""

    def __init__(self, pos: np.ndarray, rows: np.ndarray, vals: np.ndarray, shape: tuple[int, ...], m: int):
        self.pos, self.rows, self.vals, self.shape, self.m = pos, rows, vals, shape, m

    def dense(self) -> np.ndarray:
        T = np.zeros((self.m, math.prod(self.shape)))
        np.add.at(T, (self.rows, self.pos), self.vals)
        return T.reshape((self.m,) + self.shape)

    def matrix(self) -> sp.csc_matrix:
        size = math.prod(self.shape)
        return sp.csc_matrix((self.vals, (self.pos, self.rows)), shape=(size, self.m))


def _bcast(T: np.ndarray, shape: tuple[int, ...], out: tuple[int, ...]) -> np.ndarray:
    m = T.shape[0]
    T = T.reshape((m,) + (1,) * (len(out) - len(shape)) + shape)
    return np.broadcast_to(T, (m,) + out)


def _as_dense(T: Any) -> np.ndarray:
    return T.dense() if isinstance(T, _Sel) else T


def jacobian_columns(expr: Expr, layout: Layout, cols: np.ndarray) -> np.ndarray | sp.csc_matrix:
    """The columns ``cols`` (flat coordinates of x) of the Jacobian of the affine ``expr``:
    an (expr.size, len(cols)) matrix, dense or sparse."""
    cols = np.asarray(cols, dtype=np.int64)
    m = len(cols)
    tang: dict[int, Any] = {}
    for node in expr.walk():
        tang[node.uid] = _jvp(node, [tang[a.uid] for a in node.args], layout, cols, m)
    T = tang[expr.uid]
    size = expr.size
    if T is None:
        return sp.csc_matrix((size, m))
    if isinstance(T, _Sel):
        return T.matrix()
    return T.reshape(m, size).T


def _jvp(node: Expr, ts: list[Any], layout: Layout, cols: np.ndarray, m: int) -> Any:
    if node.is_constant():
        return None
    if isinstance(node, Variable):
        sl = layout.slice(node)
        rows = np.flatnonzero((cols >= sl.start) & (cols < sl.stop))
        return _Sel(cols[rows] - sl.start, rows, np.ones(len(rows)), node.shape, m)
    shape = node.shape
    if isinstance(node, Index):
        (T,) = ts
        if isinstance(T, _Sel):
            inv = np.full(node.args[0].size, -1, dtype=np.int64)
            inv[node.flat_indices()] = np.arange(node.size)
            newpos = inv[T.pos]
            keep = newpos >= 0
            return _Sel(newpos[keep], T.rows[keep], T.vals[keep], shape, m)
        return T[(slice(None),) + node.key]
    if isinstance(node, Transpose):
        (T,) = ts
        if isinstance(T, _Sel):
            src = node.args[0].shape
            perm = np.arange(int(np.prod(src))).reshape(src).T.ravel()  # out position -> in position
            inv = np.empty_like(perm)
            inv[perm] = np.arange(len(perm))
            return _Sel(inv[T.pos], T.rows, T.vals, shape, m)
        return np.moveaxis(T, list(range(1, T.ndim)), list(range(T.ndim - 1, 0, -1)))
    if isinstance(node, Neg):
        (T,) = ts
        if isinstance(T, _Sel):
            return _Sel(T.pos, T.rows, -T.vals, shape, m)
        return -T
    if isinstance(node, (Add, Sub)):
        a, b = node.args
        Ta, Tb = ts
        if isinstance(node, Sub) and Tb is not None:
            Tb = _jvp_neg(Tb)
        if Ta is None or Tb is None:
            T = Ta if Tb is None else Tb
            src = a.shape if Tb is None else b.shape
            if isinstance(T, _Sel) and src == shape:
                return T
            return _bcast(_as_dense(T), src, shape)
        return _bcast(_as_dense(Ta), a.shape, shape) + _bcast(_as_dense(Tb), b.shape, shape)
    if isinstance(node, (Mul, Div)):
        a, b = node.args
        if isinstance(node, Div):
            k, T, src = 1.0 / dense(b.constant_value()), ts[0], a.shape
        elif a.is_constant():
            k, T, src = dense(a.constant_value()), ts[1], b.shape
        else:
            k, T, src = dense(b.constant_value()), ts[0], a.shape
        if isinstance(T, _Sel) and src == shape:
            kk = np.broadcast_to(k, shape).ravel() if np.ndim(k) else np.full(1, float(k))
            return _Sel(T.pos, T.rows, T.vals * (kk[T.pos] if np.ndim(k) else kk[0]), shape, m)
        return _bcast(_as_dense(T), src, shape) * np.asarray(k)
    if isinstance(node, MatMul):
        a, b = node.args
        if a.is_constant():
            D = a.constant_value()
            T = ts[1]
            if b.ndim == 1 and isinstance(T, _Sel):
                if (
                    D.ndim == 2
                    and len(T.rows) == m == b.shape[0]
                    and np.array_equal(T.pos, np.arange(m))
                    and np.array_equal(T.rows, T.pos)
                    and np.all(T.vals == 1.0)
                ):  # every column of D in order: the Jacobian is D itself (no copy)
                    return (D.toarray() if sp.issparse(D) else D).T
                out = np.zeros((m,) + shape)
                if len(T.rows):  # each direction selects one coordinate: rows are distinct
                    cols_ = D[..., T.pos]
                    cols_ = cols_.toarray() if sp.issparse(cols_) else cols_
                    out[T.rows] = (cols_ * T.vals).T if D.ndim == 2 else cols_ * T.vals
                return out
            T = _as_dense(T)
            if sp.issparse(D):
                Tm = T.reshape(m, b.shape[0], -1)
                res = np.stack([np.asarray(D @ Tm[i]) for i in range(m)])
                return res.reshape((m,) + shape)
            return np.matmul(D, T) if b.ndim == 2 else np.einsum("ij,mj->mi", D, T) if D.ndim == 2 else T @ D
        D = b.constant_value()
        T = _as_dense(ts[0])
        D = dense(D)
        if a.ndim == 1:
            return T @ D
        return np.matmul(T, D)
    if isinstance(node, Concat):  # each part's tangent at its place in the flat vector
        if all(T is None or isinstance(T, _Sel) for T in ts):
            at = np.cumsum([0] + [a.size for a in node.args])
            sels = [(T, at[i]) for i, T in enumerate(ts) if T is not None]
            if not sels:
                return None
            return _Sel(
                np.concatenate([T.pos + o for T, o in sels]),
                np.concatenate([T.rows for T, _ in sels]),
                np.concatenate([T.vals for T, _ in sels]),
                shape,
                m,
            )
        return np.concatenate(
            [np.zeros((m, a.size)) if T is None else _as_dense(T).reshape(m, a.size) for a, T in zip(node.args, ts)],
            axis=1,
        )
    if isinstance(node, (A.sum, A.mean)):
        (T,) = ts
        T = _as_dense(T)
        if node.axis is None:
            r = T.reshape(m, -1).sum(axis=1)
        else:
            r = T.sum(axis=(node.axis % node.args[0].ndim) + 1)
        if isinstance(node, A.mean):
            r = r / node._count()
        return r
    if isinstance(node, A.trace):
        return np.trace(_as_dense(ts[0]), axis1=1, axis2=2)
    raise TypeError(f"jacobian_columns: {type(node).__name__} is not affine")


def _jvp_neg(T: Any) -> Any:
    if isinstance(T, _Sel):
        return _Sel(T.pos, T.rows, -T.vals, T.shape, T.m)
    return -T


__all__ = ["Composite", "RawTerm", "decompose", "jacobian_columns", "loss_argument", "Constant", "Data", "Parameter"]
