"""What every atom is (:class:`Atom`: shape, DCP properties, ``params``, ``rebuild``, ``loss_key``)
and what an elementwise atom adds (:class:`Elementwise`: the loss facts of the package docstring
from ``derivs``); :class:`NoConjugate` for an atom without a conjugate."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from ...errors import ModelError, Span
from ..dcp import (
    AFFINE,
    CONCAVE,
    CONSTANT,
    CONVEX,
    DECREASING,
    INCREASING,
    UNKNOWN,
)
from ..expr import Expr, as_expr, dense


def expit(z: Any) -> Any:
    """The logistic sigmoid 1 / (1 + exp(-z)) without overflow (numpy only: importing the model
    layer does not load scipy.special)."""
    z = np.asarray(z, dtype=float)
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _lse(z: np.ndarray, axis: Any = None) -> Any:
    """log(sum(exp(z))) along ``axis``, shifted by the maximum (no overflow)."""
    m = np.max(z, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(z - m), axis=axis, keepdims=True)) + m
    return np.squeeze(out, axis=axis) if axis is not None else out.reshape(())


class Atom(Expr):
    """A function application ``name(args...)``; subclasses define the numerics and DCP facts."""

    name = "atom"
    curvature_kind = AFFINE
    precedence = 100
    # its curvature is taken on trust (a user's custom_loss, "smooth and convex" by assumption), not
    # proven: what rests on convexity for speed alone (a line search's chord, numerics/newton.backtrack)
    # does not read it
    curvature_assumed = False

    def __init__(self, *args: Any, span: Span | None = None):
        exprs = [as_expr(a) for a in args]
        super().__init__(exprs, self._shape([a.shape for a in exprs], exprs, span), span)

    # --- to define in subclasses
    def _shape(self, shapes: list[tuple[int, ...]], args: list[Expr], span: Span | None) -> tuple[int, ...]:
        return ()

    def monotonicity(self, i: int) -> str:
        return INCREASING

    def extra_repr(self) -> str:
        return ""

    # --- parameters: what an atom is built with beyond its arguments
    @property
    def params(self) -> dict[str, Any]:
        """The keyword arguments that, with the arguments, rebuild this atom (hashable values):
        ``type(a)(*args, **a.params)`` is the same function of other arguments."""
        return {}

    def rebuild(self, args: list[Any], span: Span | None = None) -> Atom:
        """The same atom (same parameters) applied to other arguments."""
        return type(self)(*args, span=span if span is not None else self.span, **self.params)

    @property
    def loss_form(self) -> str | None:
        """How this atom can be the loss of a composite objective c * sum_i w_i phi(z_i):
        "elementwise" (one phi per entry of its argument), "rowwise" (one per row of a matrix
        argument), or None (not a loss)."""
        return None

    def logits(self, z: np.ndarray) -> np.ndarray | None:
        """When this loss is the log-partition function of a categorical distribution (a classifier's
        loss): its logits L(z), shape (..., K) for a loss value's argument z (an entry of an
        elementwise loss, a row (..., m) of a row-wise one), such that phi(z) = log sum_j exp(L_j)
        and phi(z) - L_j = -log p_j, p = softmax(L): the negative log-likelihood of class j.
        ``logistic``: L = (0, z), two classes; ``logsumexp`` over the rows: L = z, one class per
        column. None for a loss that is not a likelihood of classes."""
        return None

    def loss_key(self) -> tuple:
        """What makes two atoms the same function of their arguments: the class and the parameters
        (two huber atoms with different M differ; the arguments do not enter)."""
        return (type(self), tuple(sorted(self.params.items())))

    # --- DCP composition rule
    def _curvature(self) -> str:
        if all(a.is_constant() for a in self.args):
            return CONSTANT
        conv = self.curvature_kind in (CONVEX, AFFINE)
        conc = self.curvature_kind in (CONCAVE, AFFINE)
        for i, a in enumerate(self.args):
            c = a.curvature
            if c in (CONSTANT, AFFINE):
                continue
            m = self.monotonicity(i)
            conv = conv and ((m == INCREASING and c == CONVEX) or (m == DECREASING and c == CONCAVE))
            conc = conc and ((m == INCREASING and c == CONCAVE) or (m == DECREASING and c == CONVEX))
        if conv and conc:
            return AFFINE
        if conv:
            return CONVEX
        if conc:
            return CONCAVE
        return UNKNOWN

    def curvature_reason(self) -> str:
        for i, a in enumerate(self.args):
            if a.curvature in (CONSTANT, AFFINE):
                continue
            m = self.monotonicity(i)
            return (
                f"{self.name} is {self.curvature_kind} and {m} in its argument, but its argument {a} is {a.curvature}"
            )
        return f"{self} is {self.curvature}"

    def _render(self) -> str:
        inner = ", ".join(str(a) for a in self.args)
        extra = self.extra_repr()
        return f"{self.name}({inner}{', ' + extra if extra else ''})"


class NoConjugate(ModelError):
    """The loss has no convex conjugate the package can evaluate (not convex, or not known)."""


class Elementwise(Atom, ABC):
    """f applied to each entry, and a loss of a composite objective (the module docstring lists the
    loss facts). ``d1`` and ``d2`` are f' and f''. ``curvature_sup`` is sup f'' over f's domain (a
    global curvature bound, used for smoothness constants valid everywhere), or None when f'' is
    unbounded or the bound is not known; a user ``func`` computes its own.

    The conjugate: a subclass gives ``conjugate_interval`` (the domain of phi*, an interval of the
    real line: (lo, hi, lo included, hi included)) and ``_conjugate(s)`` (its values inside);
    :meth:`conjugate` and :meth:`conjugate_domain` follow from them."""

    curvature_sup: float | None = None
    quadratic = False  # phi(z) = z^2 exactly
    conjugate_interval: tuple[float, float, bool, bool] | None = None
    loss_form = "elementwise"

    def _shape(self, shapes, args, span):
        return shapes[0]

    @abstractmethod
    def fn(self, z: np.ndarray) -> np.ndarray:
        """f(z) entrywise."""

    @abstractmethod
    def d1(self, z: np.ndarray) -> np.ndarray:
        """f'(z) entrywise."""

    @abstractmethod
    def d2(self, z: np.ndarray) -> np.ndarray:
        """f''(z) entrywise."""

    def derivs(self, z: np.ndarray, order: int = 2) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """f(z) and, up to ``order``, f'(z) and f''(z) (None beyond it), computed together."""
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return (
                self.fn(z),
                self.d1(z) if order >= 1 else None,
                self.d2(z) if order >= 2 else None,
            )

    def hessian_apply(self, z: np.ndarray, U: np.ndarray, d2: np.ndarray | None = None) -> np.ndarray:
        """The Hessian of sum_i phi(z_i), diag(phi''(z)), applied to U (shape of z, or of z with a
        trailing axis of columns); ``d2``: phi''(z) when already computed."""
        if d2 is None:
            d2 = self.derivs(z, 2)[2]
        return d2[..., None] * U if np.ndim(U) > np.ndim(d2) else d2 * U

    def forward(self, vals):
        z = dense(vals[0])
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return self.fn(z)

    def vjp(self, g, vals, out, needs):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return [g * self.d1(dense(vals[0]))]

    # --- the convex conjugate
    @property
    def convex_sign(self) -> int:
        """sigma with sigma * phi convex: +1 (convex or affine), -1 (concave), 0 (neither)."""
        return {CONVEX: 1, AFFINE: 1, CONCAVE: -1}.get(self.curvature_kind, 0)

    def _no_conjugate(self) -> NoConjugate:
        return NoConjugate(
            f"no convex conjugate is known for the loss {self.name}",
            self.span,
            "conjugates exist for convex losses with a closed form (the built-in atoms) and for convex user funcs",
        )

    def conjugate_domain(self, s: Any) -> np.ndarray:
        """Where (sigma phi)*(s) is finite, entrywise."""
        iv = self.conjugate_interval
        if iv is None:
            raise self._no_conjugate()
        lo, hi, lo_in, hi_in = iv
        s = np.asarray(s, dtype=float)
        return ((s >= lo) if lo_in else (s > lo)) & ((s <= hi) if hi_in else (s < hi))

    def conjugate(self, s: Any) -> np.ndarray:
        """(sigma phi)*(s) = sup_z (s z - sigma phi(z)) entrywise, +inf outside the domain."""
        s = np.asarray(s, dtype=float)
        inside = self.conjugate_domain(s)
        out = np.full(s.shape, np.inf)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            out[inside] = self._conjugate(s[inside])
        return out

    def _conjugate(self, s: np.ndarray) -> np.ndarray:
        raise self._no_conjugate()


class WholeLoss(Atom, ABC):
    """A loss that is one number of a whole vector (it does not separate over entries or rows):
    the Cox partial likelihood (its risk sets couple the samples), the cumulative-logit likelihood
    (its cut-points are shared by every sample), a user's ``custom_loss``. ``loss_form`` is
    "whole": a term ``c * phi(z)`` of a composite objective, z the flattened concatenation of the
    arguments listed in ``loss_args`` (each affine; every other argument is data).

    A subclass gives ``derivs(z, order)`` -- (phi(z), its gradient, None) on the last axis of z
    (which may carry leading batch axes) -- and ``hessian_apply(z, U)`` -- the Hessian of phi at z
    (one vector) applied to U ((size,) or (size, q) columns), never formed as a matrix; and, as
    every loss, ``curvature_sup`` (sup of the largest eigenvalue of the Hessian, or None),
    ``conjugate(s)`` (or :class:`NoConjugate` with the reason), ``sample_count`` (the rows of
    data it reads) and ``observations`` (the n of the information criteria, in
    ``observations_unit``; the rows by default). ``forward`` and ``vjp`` follow from ``derivs``."""

    loss_form = "whole"
    loss_args: tuple[int, ...] = (0,)
    curvature_sup: float | None = None
    quadratic = False
    convex_sign = 1

    def loss_vector(self, vals: list[Any]) -> np.ndarray:
        """The loss argument z from the values of the atom's arguments (flattened, concatenated)."""
        return np.concatenate([np.ravel(dense(vals[i])) for i in self.loss_args])

    @property
    def sample_count(self) -> int | None:
        """The rows of data the loss reads (its sample axis): the first loss argument's length."""
        a = self.args[self.loss_args[0]]
        return a.shape[0] if a.shape else None

    #: what :attr:`observations` counts, as the information criteria print it
    observations_unit = "samples"

    @property
    def observations(self) -> float | None:
        """The sample size n of the information criteria (BIC's log n): the rows it reads, unless
        the likelihood has one factor per something else (``cox``: the events)."""
        return self.sample_count

    @abstractmethod
    def derivs(self, z: np.ndarray, order: int = 1) -> tuple[Any, Any, None]:
        """(phi(z), its gradient, None) on the last axis of z (the class docstring)."""

    @abstractmethod
    def hessian_apply(self, z: np.ndarray, U: np.ndarray) -> np.ndarray:
        """The Hessian of phi at z applied to U, never formed (the class docstring)."""

    def forward(self, vals):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return float(self.derivs(self.loss_vector(vals), 0)[0])

    def vjp(self, g, vals, out, needs):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            grad = self.derivs(self.loss_vector(vals), 1)[1] * float(g)
        res: list[Any] = [None] * len(self.args)
        at = 0
        for i in self.loss_args:
            a = self.args[i]
            part = grad[at : at + a.size]
            at += a.size
            res[i] = part.reshape(a.shape) if a.shape else float(part[0])
        return res

    def no_conjugate_reason(self) -> str:
        return f"no closed form of the convex conjugate of {self.name} is known"

    def conjugate(self, s: Any) -> np.ndarray:
        raise NoConjugate(
            self.no_conjugate_reason(),
            self.span,
            "conjugates are known for the elementwise losses, the softmax and convex user funcs",
        )

    def conjugate_domain(self, s: Any) -> np.ndarray:
        return np.isfinite(self.conjugate(s))
