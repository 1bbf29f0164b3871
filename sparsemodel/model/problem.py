"""Problems: an objective to minimize and structural constraints; solving and checking them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import ConstraintError, ConvexityError, ModelError, ShapeError, Span
from .constraints import Constraint, EigBoxConstraint, NnzConstraint
from .expr import UNKNOWN, Data, Expr, Parameter, Variable, as_expr, fmt_shape


class Objective:
    def __init__(self, expr: Any, span: Span | None = None):
        e = as_expr(expr)
        if e.shape != ():
            raise ShapeError(
                f"the objective must be a scalar; {e} has shape {fmt_shape(e.shape)}",
                span or e.span,
                "reduce it with sum(...), mean(...) or sum_squares(...)",
            )
        self.expr = e
        self.span = span or e.span

    def __str__(self) -> str:
        return f"minimize {self.expr}"


def minimize(expr: Any) -> Objective:
    return Objective(expr)


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


def convexity_error(e: Expr) -> ConvexityError | None:
    if e.is_convex():
        return None
    culprit = find_nonconvex(e)
    where = culprit.span or e.span
    return ConvexityError(
        f"the objective is not convex: {culprit.curvature_reason()}",
        where,
        "sparsemodel minimizes convex losses under structural constraints; rewrite the objective "
        "with convex atoms of affine expressions (DCP rules), or define the loss as a func, whose "
        "convexity is checked symbolically",
    )


class Problem:
    """minimize f(x) subject to structural constraints.

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
        seen: dict[int, Variable] = {}
        for v in self.objective.expr.variables():
            seen.setdefault(v.uid, v)
        for c in cons:
            seen.setdefault(c.variable.uid, c.variable)
        self.variables: list[Variable] = list(seen.values())
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

    def convexity_error(self) -> ConvexityError | None:
        return convexity_error(self.objective.expr)

    def check(self):
        """What `sparsemodel check` prints: shapes, convexity, the constraint sets and their bounds,
        which solvers apply (a :class:`sparsemodel.session.CheckReport`)."""
        from .. import session

        return session.check(self)

    def nnz_constraint(self) -> NnzConstraint | None:
        """The sparsity constraint, if any (as written; its set carries the bound used)."""
        return next((c for c in self.constraints if isinstance(c, NnzConstraint)), None)

    # ------------------------------------------------------------------ solving (delegated to the session)
    def lower(self, k: int | None = None):
        """The lowered problem (what solvers see), with the bound ``k`` in place of the model's."""
        from .. import session

        return session.lower(self, k)

    def solve(self, solver: str | None = None, k: int | None = None, **options: Any):
        """Solve with a registered solver (``'auto'`` picks one that handles every constraint).

        ``k`` overrides the bound of the sparsity or rank constraint for this solve (in its unit:
        entries, groups or the rank). Options are the solver's (see ``sparsemodel solvers``);
        unknown options are refused with the list of valid ones. Without a solver name, the model
        file's ``solve with`` line (if any) is used, else ``'auto'``.
        """
        from .. import session

        return session.solve(self, solver, k=k, **options)

    def store(self, values: dict[str, Any]) -> None:
        """Set each variable's ``value`` from a result's values."""
        for v in self.variables:
            if v.name in values:
                v.value = values[v.name]

    def compare(
        self,
        solvers: Iterable[str],
        k: Iterable[int] | int | None = None,
        options: dict[str, dict[str, Any]] | None = None,
        **kw: Any,
    ):
        """Run several solvers on this problem, optionally over a range of the bound ``k`` or of
        a param (``sweep={"lam": [...]}``); see :func:`sparsemodel.session.compare`."""
        from .. import session

        return session.compare(self, list(solvers), k=k, options=options, **kw)

    def path(
        self,
        k: Iterable[int] | int,
        solver: str | None = None,
        start: str = "best",
        progress: bool | None = False,
        **options: Any,
    ):
        """A warm-started path over the bound: ``solver`` at every k (one lowering), each point
        started from its neighbour's solution; ``start`` = ``best`` (also solve cold, keep the lower
        objective: never worse than ``solve(k=k)``), ``cold`` (identical to ``solve(k=k)``) or
        ``warm``. Returns a :class:`sparsemodel.compare.path.SolutionPath`; see docs/selection.md."""
        from .. import session

        return session.path(self, k, solver=solver, start=start, progress=progress, **options)

    def select(
        self,
        k: Iterable[int] | int | None = None,
        by: str | None = None,
        solver: str | None = None,
        folds: Any = None,
        seed: int | None = 0,
        fold_ids: Any = None,
        rule: str | None = None,
        **kw: Any,
    ):
        """Choose the bound among ``k`` (default: 0 to n / (log(log n) log p)): ``by`` = ``"ebic"``
        (the default), ``"aic"``, ``"bic"``, ``"gic"``, or ``"cv"`` (K-fold cross-validation with a
        fixed ``seed``, or the user's ``fold_ids``; the held-out loss is the model's own data term
        on the held-out rows); ``rule`` = ``min`` or ``1se`` (cross-validation's default). The path
        is warm-started and stops once the curve has clearly turned. Other keywords: ``gamma``
        (EBIC), ``early_stop``, ``patience``, ``margin`` (the early stop), ``start`` and
        ``progress`` (the path), solver options. Returns a
        :class:`sparsemodel.compare.select.Selection` (``.k``, ``.result``, ``.curve``); see
        docs/selection.md."""
        from .. import session

        return session.select(self, k, by=by, solver=solver, folds=folds, seed=seed, fold_ids=fold_ids, rule=rule, **kw)

    def __str__(self) -> str:
        lines = [str(self.objective)]
        if self.constraints:
            lines.append("subject to")
            lines += [f"    {c}" for c in self.constraints]
        return "\n".join(lines)
