"""Several bounded constraints in one model: ``rank(L) <= r`` and ``nnz(S) <= k`` (robust PCA),
``nnz(w) <= k`` and ``rank(W) <= r``, two ``nnz`` on disjoint slices. Each one bounds its own
variable (or its own coordinates); together they are one requirement on a solver, the product of
their sets (kind ``product``): only the solvers that work through the set protocol take it."""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import Span
from ..expr import Variable
from .base import Bounded, Constraint


class ProductConstraint(Constraint):
    """The bounded constraints of a model taken together (two or more of them). It is not written
    by the user: :meth:`~sparsemodel.model.problem.Model.requirements` adds it, so that a solver
    that cannot solve several bounded variables jointly is refused at the second bound's line."""

    kind = "product"

    def __init__(self, parts: Sequence[Constraint]):
        if len(parts) < 2:  # pragma: no cover - built only by Model.requirements
            raise ValueError("a product needs two or more bounded constraints")
        self.parts = list(parts)
        self.span: Span | None = next((p.span for p in self.parts[1:] if p.span is not None), self.parts[0].span)

    @property
    def variable(self) -> Variable:
        return self.parts[0].variable

    def __str__(self) -> str:
        return " and ".join(str(p) for p in self.parts)


def bounded(constraints: Sequence[Constraint]) -> list[Constraint]:
    """The constraints that carry a bound k (nnz, changes, rank), in the model's order."""
    return [c for c in constraints if isinstance(c, Bounded)]
