"""A model: an objective to minimize and structural constraints, as data (solving it is
:class:`sparsemodel.problem.Problem`'s job, above every layer that the solving needs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ConstraintError, ModelError, Span
from .constraints import Constraint, EigBoxConstraint, NnzConstraint, ProductConstraint, bounded
from .expr import Data, Parameter, Variable
from .forms import recognise
from .objective import Objective, convexity_error


class Model:
    """minimize f(x) subject to structural constraints: the model as data (the Python builder and
    the model language both make one). :class:`sparsemodel.problem.Problem` is the same model with
    the methods that solve it.

    ``solve_with`` / ``compare_with`` carry the model file's defaults; ``symbols`` the names a
    model file declared (data, params, lets, vars), so data can be inspected or rebound.
    """

    def __init__(
        self,
        objective: Objective | Any,
        constraints: Sequence[Constraint] = (),
        *,
        solve_with: tuple[str, dict[str, Any], Span | None] | None = None,
        compare_with: dict[str, Any] | None = None,
        symbols: dict[str, Any] | None = None,
        source: str = "<python>",
    ):
        self.objective = objective if isinstance(objective, Objective) else Objective(objective)
        if constraints is None:
            constraints = ()
        elif isinstance(constraints, Constraint):  # one constraint, not in a list
            constraints = (constraints,)
        elif not hasattr(constraints, "__iter__"):
            raise ConstraintError(
                f"the constraints must be a list; got {constraints!r}", hint="Problem(objective, [nnz(w) <= k, ...])"
            )
        cons: list[Constraint] = []
        for c in constraints:
            if not isinstance(c, Constraint):
                raise ConstraintError(
                    f"{c!r} is not a constraint",
                    hint="constraints are nnz(x) <= k, rank(W) <= r, eig(O) >= alpha, eig(O) <= beta",
                )
            if isinstance(c, EigBoxConstraint):
                prev = next((p for p in cons if isinstance(p, EigBoxConstraint) and p.O is c.O), None)
                if prev is not None:
                    cons[cons.index(prev)] = prev.merge(c)
                    continue
            cons.append(c)
        self.constraints = cons
        self.solve_with = solve_with
        self.compare_with = compare_with
        self.symbols = symbols or {}
        self.source = source
        # set by a front end that can build the model again from its text with some data rebound
        # (the model language: derived data such as `let Z = standardize(X)` and `rows(X)` are then
        # recomputed); None for builder models, whose data nodes are replaced by name
        self.rebuild_with: Any = None
        seen: dict[int, Variable] = {}
        for v in self.objective.expr.variables():
            seen.setdefault(v.uid, v)
        for c in cons:
            seen.setdefault(c.variable.uid, c.variable)
        self.variables: list[Variable] = list(seen.values())
        if not self.variables:
            raise ModelError(
                f"the objective {self.objective.expr} reads no variable: there is nothing to optimize",
                self.objective.span,
                "write the objective in terms of a variable (var w[n] in a model file, sm.Variable(n) in Python)",
            )
        names = [v.name for v in self.variables]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ModelError(
                f"two different variables are named {sorted(dup)[0]!r}", hint="give each variable its own name"
            )
        for c in cons:
            if c.variable.uid not in {v.uid for v in self.objective.expr.variables()}:
                raise ConstraintError(
                    f"the constraint {c} is on {c.variable}, which does not appear in the objective",
                    c.span,
                )

    # ------------------------------------------------------------------ inspection
    @property
    def data(self) -> dict[str, Data]:
        return {n: v for n, v in self.symbols.items() if isinstance(v, Data)}

    @property
    def params(self) -> dict[str, Parameter]:
        return {n: v for n, v in self.symbols.items() if isinstance(v, Parameter)}

    def convexity_error(self) -> ModelError | None:
        """Why the model is refused: not convex (nor a concave maximization) and not a recognised
        non-convex form (:mod:`.forms`: sparse PCA), or a model that is almost that form; None
        when it is accepted."""
        form, why = recognise(self.objective, self.constraints)
        if form is not None:
            return None
        o = self.objective
        return why if why is not None else convexity_error(o.expr, o.stated if o.maximize else None)

    def recognised_form(self) -> str | None:
        """The name of the recognised non-convex form this model is (:mod:`.forms`), or None."""
        f = recognise(self.objective, self.constraints)[0]
        if f is None:
            return None
        v = f.variable.name
        return f"sparse PCA (maximize {v}'S{v} subject to {f.ball}, {f.nnz}; written with {f.spelling})"

    def requirements(self) -> list[Constraint]:
        """What a solver must handle: the constraints as written and, when two or more of them carry
        a bound (``nnz``, ``rank``, changes), their product (kind ``product``: several constrained
        variables solved jointly, which only the solvers of the set protocol take)."""
        parts = bounded(self.constraints)
        return list(self.constraints) + ([ProductConstraint(parts)] if len(parts) > 1 else [])

    def nnz_constraint(self) -> NnzConstraint | None:
        """The sparsity constraint, if any (as written; its set carries the bound used)."""
        return next((c for c in self.constraints if isinstance(c, NnzConstraint)), None)

    def store(self, values: dict[str, Any]) -> None:
        """Set each variable's ``value`` from a result's values."""
        for v in self.variables:
            if v.name in values:
                v.value = values[v.name]

    def __str__(self) -> str:
        lines = [str(self.objective)]
        if self.constraints:
            lines.append("subject to")
            lines += [f"    {c}" for c in self.constraints]
        return "\n".join(lines)
