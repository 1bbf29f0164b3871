"""A model: an objective to minimize and structural constraints, as data (solving it is
:class:`sparsemodel.problem.Problem`'s job, above every layer that the solving needs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ConstraintError, ConvexityError, ModelError, ShapeError, Span
from .constraints import Constraint, EigBoxConstraint, NnzConstraint, ProductConstraint, bounded
from .dcp import UNKNOWN
from .expr import Data, Expr, Parameter, Variable, as_expr, fmt_shape


class Objective:
    """The objective: ``minimize f`` or ``maximize f``. ``expr`` is always the function minimized
    (-f for ``maximize``: what the lowering and every solver see, so ``Result.objective`` of a
    maximized model is -f, and ``Result.extra['maximum']`` is f); ``stated`` is f as written."""

    def __init__(self, expr: Any, span: Span | None = None, sense: str = "minimize"):
        e = as_expr(expr)
        if e.shape != ():
            raise ShapeError(
                f"the objective must be a scalar; {e} has shape {fmt_shape(e.shape)}",
                span or e.span,
                "reduce it with sum(...), mean(...) or sum_squares(...)",
            )
        if sense not in ("minimize", "maximize"):
            raise ModelError(f"an objective is minimized or maximized, not {sense!r}", span or e.span)
        self.sense = sense
        self.stated = e
        self.expr = e if sense == "minimize" else -e
        if sense == "maximize":
            self.expr.span = e.span
        self.span = span or e.span

    @property
    def maximize(self) -> bool:
        return self.sense == "maximize"

    def __str__(self) -> str:
        return f"{self.sense} {self.stated}"


def minimize(expr: Any) -> Objective:
    return Objective(expr)


def maximize(expr: Any) -> Objective:
    """``sm.maximize(f)``: maximize f, solved as the minimization of -f (a concave f, or one of
    the recognised non-convex forms: sparse PCA, see :func:`sparsemodel.model.forms.sparse_pca`)."""
    return Objective(expr, sense="maximize")


def find_nonconvex(e: Expr) -> Expr:
    """The sub-expression to blame: for an unknown curvature, the deepest node where DCP
    composition fails (all its children have known curvature); for a concave expression, the
    innermost concave piece it is built from."""
    node = e
    bad_kind = UNKNOWN if e.curvature == UNKNOWN else e.curvature
    while True:
        bad = next((a for a in node.args if a.curvature == bad_kind), None)
        if bad is None:
            return node
        node = bad


def convexity_error(e: Expr, maximized: Expr | None = None) -> ConvexityError | None:
    """Why the objective minimized, ``e``, is refused (None when it is convex); ``maximized``: the
    f of ``maximize f`` (e = -f), which must be concave."""
    if e.is_convex():
        return None
    if maximized is not None:
        culprit = find_nonconvex(maximized) if maximized.curvature != "convex" else maximized
        return ConvexityError(
            f"maximize needs a concave objective: {culprit.curvature_reason()}",
            culprit.span or maximized.span,
            "sparsemodel maximizes concave functions (minimizes convex ones); the one non-convex form it "
            "recognises is sparse PCA: maximize quad_form(w, S) or sum_squares(X @ w) subject to "
            "norm(w) <= 1 and nnz(w) <= k (docs/language.md, 'Sparse PCA')",
        )
    culprit = find_nonconvex(e)
    where = culprit.span or e.span
    return ConvexityError(
        f"the objective is not convex: {culprit.curvature_reason()}",
        where,
        "sparsemodel minimizes convex losses under structural constraints; rewrite the objective "
        "with convex atoms of affine expressions (DCP rules), or define the loss as a func, whose "
        "convexity is checked symbolically",
    )


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
        from .forms import recognise

        form, why = recognise(self)
        if form is not None:
            return None
        o = self.objective
        return why if why is not None else convexity_error(o.expr, o.stated if o.maximize else None)

    def recognised_form(self) -> str | None:
        """The name of the recognised non-convex form this model is (:mod:`.forms`), or None."""
        from .forms import sparse_pca

        f = sparse_pca(self)
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
