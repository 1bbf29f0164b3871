"""Problems: an objective to minimize and structural constraints; solving and checking them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConstraintError, ConvexityError, ModelError, ShapeError, SolverError, Span
from .checks import label_errors
from .constraints import Constraint, EigBoxConstraint, NnzConstraint
from .expr import AFFINE, CONSTANT, CONVEX, UNKNOWN, Data, Expr, Parameter, Variable, as_expr, fmt_shape


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


def _fmt_opt(v: Any) -> str:
    """An option value as the model language writes it."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    return str(v)


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


@dataclass
class CheckReport:
    """What `sparsemodel check` prints: shapes, convexity, constraint kinds, applicable solvers."""

    source: str
    variables: list[tuple[str, tuple[int, ...], bool]]
    data: list[tuple[str, tuple[int, ...], str]]
    params: list[tuple[str, Any]]
    objective: str
    curvature: str
    structure: str
    constraints: list[tuple[str, str, str]]
    solvers: list[tuple[str, str]]
    default_solver: str | None
    solve_with: str | None
    compare_with: str | None
    errors: list[ModelError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def render(self) -> str:
        out = [f"model       {self.source}"]
        for name, shape, sym in self.variables:
            out.append(f"variable    {name}  shape {fmt_shape(shape)}{'  symmetric' if sym else ''}")
        for name, shape, kind in self.data:
            out.append(f"data        {name}  shape {fmt_shape(shape)}  {kind}")
        for name, val in self.params:
            out.append(f"param       {name} = {val}")
        out.append(f"objective   {self.objective}")
        out.append(f"convexity   {self.curvature}")
        out.append(f"structure   {self.structure}")
        for text, kind, detail in self.constraints:
            out.append(f"constraint  {text}   [{kind}] {detail}")
        if not self.constraints:
            out.append("constraint  (none)")
        if self.solvers:
            out.append("solvers     " + ", ".join(f"{n}" for n, _ in self.solvers))
        if self.default_solver:
            out.append(f"auto        {self.default_solver}")
        if self.solve_with:
            out.append(f"solve with  {self.solve_with}")
        if self.compare_with:
            out.append(f"compare     {self.compare_with}")
        for e in self.errors:
            out.append(e.render())
        out.append("ok" if self.ok else f"{len(self.errors)} problem(s) found")
        return "\n".join(out)


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

    def check(self) -> CheckReport:
        from ..compile.lowered import LoweredProblem
        from ..solvers import REGISTRY, auto_solver, solvers_for

        errors: list[ModelError] = []
        e = self.objective.expr
        ce = self.convexity_error()
        if ce is not None:
            errors.append(ce)
        errors.extend(label_errors(e))
        structure = "(not lowered)"
        default = None
        try:
            lp = LoweredProblem(self)
            structure = lp.structure
            if ce is None:
                try:
                    default = auto_solver(lp)
                except SolverError as exc:
                    errors.append(exc)
        except ModelError as exc:
            errors.append(exc)
        cons = []
        kinds = set()
        for c in self.constraints:
            kinds.add(c.kind)
            if isinstance(c, NnzConstraint):
                unit = "groups" if c.groups is not None else "coordinates"
                try:
                    detail = f"k = {c.k} of {c.n_units} {unit} of {c.variable.name}"
                except ModelError as exc:
                    errors.append(exc)
                    detail = "(invalid bound)"
                free = c.variable.size - len(c.coords)
                if free:
                    detail += f"; {free} coordinate(s) of {c.variable.name} free"
            else:
                detail = f"on {c.variable.name}"
            handlers = solvers_for(c.kind)
            detail += f"; solvers: {', '.join(handlers)}" if handlers else "; no solver yet"
            cons.append((str(c), c.kind, detail))
        applicable = [(n, cls.summary) for n, cls in REGISTRY.items() if kinds <= cls.handles]
        sw = None
        if self.solve_with:
            name, opts, _ = self.solve_with
            sw = name + ("(" + ", ".join(f"{k} = {_fmt_opt(v)}" for k, v in opts.items()) + ")" if opts else "")
        cw = None
        if self.compare_with:
            cw = ", ".join(self.compare_with["solvers"])
            if self.compare_with.get("k") is not None:
                cw += f" at k in {self.compare_with['k_text']}"
        return CheckReport(
            source=self.source,
            variables=[(v.name, v.shape, v.symmetric) for v in self.variables],
            data=[
                (n, d.shape, "sparse" if not isinstance(d.value, np.ndarray) else "dense") for n, d in self.data.items()
            ],
            params=[(n, p.value.tolist()) for n, p in self.params.items()],
            objective=str(e),
            curvature={CONVEX: "convex", AFFINE: "affine", CONSTANT: "constant"}.get(
                e.curvature, f"NOT convex ({e.curvature})"
            ),
            structure=structure,
            constraints=cons,
            solvers=applicable,
            default_solver=default,
            solve_with=sw,
            compare_with=cw,
            errors=errors,
        )

    # ------------------------------------------------------------------ solving
    def nnz_constraint(self) -> NnzConstraint | None:
        return next((c for c in self.constraints if isinstance(c, NnzConstraint)), None)

    def lower(self, k: int | None = None):
        from ..compile.lowered import LoweredProblem

        return LoweredProblem(self, k=self._checked_k(k))

    def _checked_k(self, k: int | None) -> int | None:
        if k is None:
            return None
        c = self.nnz_constraint()
        if c is None:
            raise ConstraintError(f"k={k} was given but the problem has no nnz(...) <= k constraint")
        return c.with_k(int(k)).k

    def solve(self, solver: str | None = None, k: int | None = None, **options: Any):
        """Solve with a registered solver (``'auto'`` picks one that handles every constraint).

        ``k`` overrides the sparsity bound for this solve. Options are the solver's (see
        ``sparsemodel solvers``); unknown options are refused with the list of valid ones. Without a
        solver name, the model file's ``solve with`` line (if any) is used, else ``'auto'``.
        """
        from ..solvers import auto_solver, get_solver

        ce = self.convexity_error()
        if ce is not None:
            raise ce
        bad_labels = label_errors(self.objective.expr)
        if bad_labels:
            raise bad_labels[0]
        if solver is None and self.solve_with is not None:
            name, opts, _ = self.solve_with
            solver = name
            options = {**opts, **options}
        solver = solver or "auto"
        lp = self.lower(k)
        if solver == "auto":
            solver = auto_solver(lp)
        cls = get_solver(solver)
        result = cls(**options).solve(lp)
        self._store(result)
        return result

    def _store(self, result: Any) -> None:
        for v in self.variables:
            if v.name in result.values:
                v.value = result.values[v.name]

    def compare(
        self,
        solvers: Iterable[str],
        k: Iterable[int] | int | None = None,
        options: dict[str, dict[str, Any]] | None = None,
        **kw: Any,
    ):
        """Run several solvers on this problem (optionally over a range of k); see sparsemodel.compare."""
        from ..compare import compare

        return compare(self, list(solvers), k=k, options=options, **kw)

    def __str__(self) -> str:
        lines = [str(self.objective)]
        if self.constraints:
            lines.append("subject to")
            lines += [f"    {c}" for c in self.constraints]
        return "\n".join(lines)
