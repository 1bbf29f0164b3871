"""Atoms: the functions a model may use, each with value, gradient and DCP properties.

An atom is one class: ``forward`` computes its value, ``vjp`` its gradient (reverse mode),
``curvature_kind`` / ``monotonicity`` / ``_sign_of`` its DCP properties, ``params`` the constants
it was built with beyond its arguments (huber's ``M``, a reduction's ``axis``, a user func's
definition): :meth:`Atom.rebuild` copies an atom onto new arguments and :meth:`Atom.loss_key`
compares two atoms as functions through them, with no special case per atom. Lowerings live below
the model: the cvxpy counterpart of every atom is one entry of the table in
:mod:`sparsemodel.lowering.cvxpy_lower`.

Loss facts. An atom that can be the loss phi of a composite objective ``c * sum_i w_i phi(z_i)``
(every :class:`Elementwise` atom, and :class:`logsumexp` along the rows of a matrix, the softmax
loss) states every fact the lowering and the solvers read about it, and nothing outside the model
layer restates one (docs/atoms.md):

* ``loss_form`` -- "elementwise", "rowwise", "whole" or None (how the atom is a loss, what the
  recognizer of the composite form reads; a whole-vector loss, :class:`WholeLoss`, is one number of
  the whole vector of its ``loss_args``: ``cox``, ``ordinal``, ``custom_loss``);
* ``derivs(z, order)`` -- phi and its derivatives (``d1``/``d2`` for elementwise atoms);
  ``hessian_apply(z, U)`` -- the loss Hessian at z applied to U (``phi''(z) * U`` entrywise; per
  row ``diag(p) - p p'`` for the softmax, :func:`softmax_hessian_apply`, the one place it is
  written);
* ``curvature_sup`` -- sup phi'' over phi's domain (None when unbounded or unknown): the global
  curvature bound of smoothness constants; ``quadratic`` -- phi(z) = z^2 exactly (the
  least-squares kernels apply);
* ``params`` -- the constants above;
* ``logits(z)`` -- when the loss is the log-partition of a categorical distribution (``logistic``:
  logits (0, z); ``logsumexp`` over rows: the row), its logits: a classifier's predicted
  probabilities are their softmax (None for other losses);
* the convex conjugate: ``conjugate(s)`` (vectorised; +inf outside the domain) and
  ``conjugate_domain(s)`` of the convex one of +-phi (``convex_sign`` says which: +1 for a convex
  atom, -1 for a concave one such as ``log``, whose term enters an objective as ``-c log z``);
  ``conjugate_interval`` the domain of an elementwise conjugate as (lo, hi, lo included, hi
  included). A term ``a * phi(z)`` with a = c w sigma > 0 has the conjugate
  ``a * phi*(s / a)`` (:meth:`sparsemodel.objective.terms.Term.conjugate`). An atom without one
  raises :class:`NoConjugate` with the reason.

Data functions (``cov``, ``rows``, ``cols``, ``standardize`` ...) are not atoms: they run once on
data when the model is built and return data (:mod:`sparsemodel.model.datafuncs`).

The atoms live by kind in :mod:`.base` (Atom, Elementwise), :mod:`.elementwise`,
:mod:`.reductions` and :mod:`.matrix`; a new atom is a class in one of them (or a new module)
and one entry of :data:`ATOMS` below (docs/atoms.md). ``custom_loss`` (:mod:`.custom`, a loss
computed by the user's Python callables) is not in :data:`ATOMS`: a model file cannot call it."""

from __future__ import annotations

from ..dcp import ANYSIGN
from .base import Atom, Elementwise, NoConjugate, WholeLoss, expit
from .custom import custom_loss
from .elementwise import exp, huber, log, logistic, square
from .matrix import logdet, quad_form, trace
from .ordinal import ordinal
from .reductions import logsumexp, mean, softmax_hessian_apply, sum, sum_squares  # noqa: A004
from .survival import cox

ATOMS: dict[str, type[Atom]] = {
    cls.name: cls
    for cls in (
        square,
        exp,
        log,
        logistic,
        huber,
        sum,
        mean,
        sum_squares,
        logsumexp,
        trace,
        logdet,
        quad_form,
        cox,
        ordinal,
    )
}


__all__ = [
    *ATOMS,
    "custom_loss",
    "Atom",
    "Elementwise",
    "WholeLoss",
    "NoConjugate",
    "softmax_hessian_apply",
    "expit",
    "ATOMS",
    "ANYSIGN",
]
