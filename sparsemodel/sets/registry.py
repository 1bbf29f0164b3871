"""The registry of constraint kinds: from a model constraint to its set, its description, and
the assembly of a problem's constraints into the one thresholded set and the convex side sets.

A new constraint kind is one set class (see :mod:`sparsemodel.sets.base` for the protocol) with
its :func:`register_kind` call (below, or at the end of its own module: every module of this
package is imported here), and the model constraint that names the kind (its ``kind``
attribute). Which solvers accept a kind is each solver's ``handles``; nothing outside this package
reads a kind string to decide how to treat a constraint.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConstraintError
from ..model.constraints import (
    BallConstraint,
    BoxConstraint,
    Constraint,
    EigBoxConstraint,
    FusedConstraint,
    LinearConstraint,
    NnzConstraint,
    ProductConstraint,
    RankConstraint,
)
from ..objective.evaluator import Layout
from . import examples as ex
from .ball import Ball
from .base import ConstraintSet
from .fused import FusedSparsity
from .linear import LinearSet
from .lowrank import LowRank
from .product import ProductSet
from .side import Box, EigBox
from .sparsity import CoordinateSparsity


@dataclass(frozen=True)
class Kind:
    """A constraint kind: its name (the model constraint's ``kind``), the line that describes it in
    messages, and how its set is built from the constraint (``S``: a precision objective's
    covariance, for the eigenvalue box's ``auto`` bounds)."""

    name: str
    text: str
    build: Callable[[Any, Layout, np.ndarray | None], ConstraintSet]
    generic: bool = False  # only the protocol is needed: every protocol solver accepts it
    example: Callable[[], Any] | None = None  # a small model of this kind (the conformance suite runs it)


KINDS: dict[str, Kind] = {}
_BY_TYPE: dict[type, Callable[[Any, Layout, np.ndarray | None], ConstraintSet]] = {}


def register_kind(
    constraint_type: type,
    names: Sequence[tuple[str, str]],
    build: Callable[[Any, Layout, np.ndarray | None], ConstraintSet],
    generic: bool = False,
    examples: dict[str, Callable[[], Any]] | None = None,
) -> None:
    """Register a model constraint class: the kinds it can carry (``(name, description)``), the
    function that builds its set, and whether the kind needs nothing but the set protocol
    (``generic``: then every solver that works through the protocol alone accepts it, see
    ``Solver.protocol``)."""
    for name, text in names:
        KINDS[name] = Kind(name, text, build, generic, (examples or {}).get(name))
    _BY_TYPE[constraint_type] = build


def generic_kind(kind: str) -> bool:
    """Whether a kind needs nothing from a solver but the set protocol."""
    k = KINDS.get(kind)
    return k is not None and k.generic


register_kind(
    NnzConstraint,
    [
        ("nnz", "sparsity (nnz(x) <= k)"),
        ("nnz_groups", "group-sparsity (nnz(x, groups=g) <= k)"),
        ("nnz_pairs", "symmetric off-diagonal sparsity (nnz(offdiag(O)) <= 2k on a symmetric O: entries in pairs)"),
    ],
    lambda c, layout, S: CoordinateSparsity(c, layout),
    examples={"nnz": ex.sparsity, "nnz_groups": ex.groups, "nnz_pairs": ex.pairs},
)
register_kind(
    RankConstraint,
    [("rank", "rank (rank(W) <= r)")],
    lambda c, layout, S: LowRank(c, layout),
    examples={"rank": ex.low_rank},
)
register_kind(
    EigBoxConstraint,
    [("eig_box", "eigenvalue-box (alpha <= eig(O) <= beta)")],
    lambda c, layout, S: EigBox(c, layout, S),
    examples={"eig_box": ex.eigenvalue_box},
)
register_kind(
    BoxConstraint,
    [("box", "box (w >= 0, lo <= w <= hi)")],
    lambda c, layout, S: Box(c, layout),
    examples={"box": ex.box},
)


def describe_kind(kind: str) -> str:
    """The words for a constraint kind in messages ("sparsity (nnz(x) <= k)")."""
    k = KINDS.get(kind)
    return k.text if k is not None else kind


def build_set(c: Constraint, layout: Layout, S: np.ndarray | None = None) -> ConstraintSet:
    """The set for a model constraint."""
    for t in type(c).__mro__:
        if t in _BY_TYPE:
            return _BY_TYPE[t](c, layout, S)
    raise ConstraintError(f"no constraint set for {c}", c.span)  # pragma: no cover


@dataclass
class Assembled:
    """A problem's constraints as sets: ``main`` the one projected by hard thresholding (with the
    problem's box and linear constraints composed into it), ``side`` the convex sets kept inside
    restricted solves, ``box`` every coordinate box intersected, ``eigbox`` the eigenvalue box,
    ``linear`` every linear constraint in one set."""

    main: ConstraintSet | None
    side: list[ConstraintSet]
    box: Box | None
    eigbox: EigBox | None
    linear: LinearSet | None = None


def assemble(
    constraints: Sequence[Constraint], layout: Layout, S: np.ndarray | None = None, budget: int | None = None
) -> Assembled:
    """The sets of a problem: every box intersected into one, at most one thresholded set (with
    the box composed into its projection), at most one eigenvalue box whose variable's diagonal
    the sparsity set leaves free; ``budget`` replaces the thresholded set's bound."""
    sets = [build_set(c, layout, S) for c in constraints]
    box: Box | None = None
    for b in [s for s in sets if s.kind == "box"]:
        box = b if box is None else box.merge(b)
    sets = [s for s in sets if s.kind != "box"] + ([box] if box is not None else [])
    linear: LinearSet | None = None
    for li in [s for s in sets if s.kind == "linear"]:
        linear = li if linear is None else linear.merge(li)
    sets = [s for s in sets if s.kind != "linear"] + ([linear] if linear is not None else [])
    if linear is not None:
        linear.check_feasible(box)
    thresh = [s for s in sets if s.thresholds]
    if len(thresh) > 1:  # several bounded variables: the product of their sets
        main: ConstraintSet | None = ProductSet(ProductConstraint([s.constraint for s in thresh]), thresh, layout)
    else:
        main = thresh[0] if thresh else None
    side = [s for s in sets if not s.thresholds]
    if box is not None and main is not None:
        main = main.with_box(box)
    if budget is not None and main is not None:
        main = main.with_budget(budget)
        budget = None
    if linear is not None and main is not None:
        main = linear.compose(main, box)
    if budget is not None:
        if main is None:
            raise ConstraintError(
                f"a bound ({budget}) was given but the problem has no nnz(...) <= k or rank(W) <= r constraint"
            )
        main = main.with_budget(budget)
    eig = [s for s in side if s.kind == "eig_box"]
    if len(eig) > 1:
        raise ConstraintError(
            f"two eigenvalue boxes ({eig[0].constraint}; {eig[1].constraint}); write one: alpha <= eig(O) <= beta",
            eig[1].span,
        )
    eigbox = eig[0] if eig else None
    if eigbox is not None:
        _check_eigbox(eigbox, main)
    return Assembled(main, side, box, eigbox, linear)


def _check_eigbox(box: EigBox, s: ConstraintSet | None) -> None:
    """An eigenvalue box needs the diagonal free: a matrix with eigenvalues >= alpha > 0 has a
    positive diagonal, so a sparsity bound that may zero diagonal entries admits no matrix in the
    box on most supports."""
    if s is None or s.variable is not box.variable or box.alpha <= 0:
        return
    p = box.shape[0]
    diag = box.W[np.arange(p) * (p + 1)]
    if np.isin(diag, s.coords).any():
        raise ConstraintError(
            f"{s.constraint} counts the diagonal of {box.variable.name}, but {box.constraint} needs every "
            f"diagonal entry positive (eigenvalues >= {box.alpha:g}): supports without the whole diagonal "
            "contain no matrix in the box",
            s.span,
            f"bound the off-diagonal only: nnz(offdiag({box.variable.name})) <= 2 * k",
        )


register_kind(
    FusedConstraint,
    [("fused", "fused sparsity (nnz(diff(w)) <= k: at most k changes between consecutive entries)")],
    lambda c, layout, S: FusedSparsity(c, layout),
    generic=True,
    examples={"fused": ex.fused},
)


# beside nnz(...) <= k, linear constraints are accepted by the thresholding solvers that work through
# the projection and the restricted solves (grahtp, fgrahtp, iht: their ``handles``); the greedy
# solvers start from the empty support, which an equality excludes
register_kind(
    LinearConstraint,
    [
        ("linear_eq", "linear equality (A @ w == b, sum(w) == 1)"),
        ("linear_ineq", "linear inequality (A @ w <= b)"),
    ],
    lambda c, layout, S: LinearSet(c, layout),
    examples={"linear_eq": ex.simplex, "linear_ineq": ex.linear_inequality},
)


# the ball of sparse PCA (maximize w'Sw subject to norm(w) <= 1, nnz(w) <= k; model/forms.py): taken by
# the sparse PCA solvers (tpm, spca_htp, dspca), whose restricted solve is S's leading eigenvector on a support
register_kind(
    BallConstraint,
    [("ball", "norm-ball (norm(w) <= 1, with nnz(w) <= k: sparse PCA)")],
    lambda c, layout, S: Ball(c, layout),
    examples={"ball": ex.sparse_pca},
)


register_kind(
    ProductConstraint,
    [("product", "several bounded variables (a product of sets: rank(L) <= r and nnz(S) <= k)")],
    lambda c, layout, S: ProductSet(c, [build_set(p, layout, S) for p in c.parts], layout),
    generic=True,
    examples={"product": ex.product},
)


# a kind may also register itself from its own module (sets/caps.py: the class, and its
# register_kind call below it): every module of this package is imported once the registry
# exists, so that a new kind needs no line here
for _mod in pkgutil.iter_modules([str(Path(__file__).parent)]):
    importlib.import_module(f"{__package__}.{_mod.name}")
