"""The directive statements of a model file, as a mixin of :class:`~sparsemodel.grammar.parser.ModelBuilder`:
``subject to`` (each constraint line: counting bounds, boxes, linear and eigenvalue constraints,
located errors), ``solve with`` (a solver and its options) and ``compare with`` (solvers and the k
or param sweep), with the checks of their ranges. The statement loop and the declarations
(data, param, let, var, func, the objective) are in :mod:`sparsemodel.grammar.parser`."""

from __future__ import annotations

from typing import Any

import numpy as np
from lark import Tree

from ..errors import (
    ConstraintError,
    ModelError,
    ParseError,
    Span,
)
from ..model.constraints import (
    AUTO,
    EigExpr,
    NnzExpr,
    NormExpr,
    RankExpr,
    bounded,
    box,
    constrain,
    is_view,
)
from ..model.expr import (
    Expr,
    Parameter,
)
from ..util import expand_range
from .tokens import unquote


class Directives:
    """``subject to``, ``solve with`` and ``compare with`` (methods of the model builder)."""

    def _check_k_range(self) -> None:
        """``compare ... at k in A:B:C`` (the bound) must not ask for more than the constraint has;
        nor may a param sweep that moves the bound (``nnz(offdiag(O)) <= 2 * k``, ``at k in ...``),
        checked value by value as ``compare`` checks it before running."""
        if self.k_range is not None and self.compare_with is not None and self.compare_with.get("k") is None:
            self._check_param_range()
        if self.k_range is None or self.compare_with is None or self.compare_with.get("k") is None:
            return
        ks = self.compare_with["k"]
        several = bounded(self.constraints)
        if len(several) > 1:
            last = several[-1]
            raise ConstraintError(
                f"compare ... at {self.k_range[0]} in {self.compare_with['text']} sweeps the bound, but this model "
                f"has {len(several)} bounds ({'; '.join(map(str, several))}): {self.k_range[0]} does not say which",
                self.k_range[1],
                "write the bound to sweep with a param and sweep that param: param s = 10, "
                f"{last.bound_text('s')}, compare with ... at s in "
                f"{self.compare_with['text']}",
            )
        c = next(iter(several), None)
        if c is None:
            raise ConstraintError(
                f"compare ... at {self.k_range[0]} in {self.compare_with['text']} sweeps a bound, "
                "but the model has no nnz(...) <= k or rank(W) <= r constraint",
                self.k_range[1],
                "add a constraint, or sweep a param",
            )
        for v in sorted(ks, reverse=True):  # each value by the constraint's one bound check, at the sweep
            try:
                c.check_bound(v)
            except ConstraintError as exc:
                raise ConstraintError(
                    f"compare ... at {self.k_range[0]} in {self.compare_with['text']}: {self.k_range[0]} = {v}: "
                    + exc.message.split(": ", 1)[-1],
                    self.k_range[1],
                    f"choose values between 0 and {c.limit}",
                ) from None

    def _constraint(self, stmt: Tree) -> None:
        span = self.span(stmt)
        if not self.in_subject:
            raise ParseError(
                "a constraint before 'subject to'",
                span,
                "write 'subject to' on a line of its own (or before the first constraint)",
            )
        a_t, op1, b_t, op2, c_t = stmt.children
        a, b = self._side(a_t), self._side(b_t)
        c = self._side(c_t) if c_t is not None else None
        ops = [str(op1)] + ([str(op2)] if op2 is not None else [])
        text = span.text if span is not None else "this constraint"
        usage = (
            "nnz(EXPR) <= k, nnz(w, groups = g) <= k, nnz(w, free = [0, 3]) <= k, rank(W) <= r, "
            "alpha <= eig(O) <= beta, w >= 0, lo <= w <= hi, A @ w == b, sum(w) == 1, A @ w <= b, norm(w) <= 1"
        )
        if "==" in ops and len(ops) > 1:
            raise ConstraintError(
                f"'{text}': == does not chain; a two-sided bound reads lo <= w <= hi",
                span,
                "write one equality per line: A @ w == b",
            )
        if c is not None and isinstance(b, Expr) and not b.is_constant():
            if ops[0] != ops[1]:
                raise ConstraintError(f"'{text}': a two-sided bound needs the same comparison twice", span)
            lo, hi = (a, c) if ops[0] == "<=" else (c, a)
            for side in (lo, hi):
                if not isinstance(side, Expr) or not side.is_constant():
                    raise ConstraintError(
                        f"'{text}': the bounds of {b} must be constants (numbers, params or data)",
                        span,
                        "write lo <= w <= hi",
                    )
            if not is_view(b):  # lo <= A @ w <= hi: two linear inequalities
                self.constraints.append(constrain(b, ">=", self._bound(lo, text, span), span))
                self.constraints.append(constrain(b, "<=", self._bound(hi, text, span), span))
                return
            self.constraints.append(
                box(b, lower=self._bound(lo, text, span), upper=self._bound(hi, text, span), span=span)
            )
            return
        if c is not None:
            if not isinstance(b, EigExpr):
                raise ConstraintError(
                    f"'{text}': only eig(...) can be bounded on both sides", span, f"the constraints are: {usage}"
                )
            if ops[0] != ops[1]:
                raise ConstraintError(f"'{text}': a two-sided bound needs the same comparison twice", span)
            lo, hi = (a, c) if ops[0] == "<=" else (c, a)
            self.constraints.append(b.between(self._bound(lo, text, span), self._bound(hi, text, span), span))
            return
        op = ops[0]
        if AUTO in (a, b) and not isinstance(a if b == AUTO else b, EigExpr):
            raise ConstraintError(
                f"'{text}': auto is a bound of eig(...) only (the box of paper 000, Section 5.3)",
                span,
                "write: auto <= eig(O) <= auto, or give a number",
            )
        flip = {"<=": ">=", ">=": "<=", "==": "=="}
        structural = (NnzExpr, RankExpr, EigExpr, NormExpr)
        if isinstance(b, structural) and not isinstance(a, structural):  # k >= nnz(w) reads nnz(w) <= k
            a, b = b, a
            op = flip[op]
        if isinstance(a, Expr) and isinstance(b, Expr) and a.is_constant() and not b.is_constant():
            a, b = b, a  # 0 <= w reads w >= 0
            op = flip[op]
        if isinstance(a, Expr) and not a.is_constant() and isinstance(b, Expr) and not b.is_constant():
            # two sides with variables: a linear constraint (w[0] >= w[1]), located at the constraint
            self.constraints.append(constrain(a, op, b, span))
            return
        if not isinstance(a, (*structural, Expr)) or (isinstance(a, Expr) and (a.is_constant() or not b.is_constant())):
            raise ConstraintError(
                f"'{text}' is not a structural constraint",
                span,
                f"sparsemodel handles sparsity, rank, eigenvalue, box and linear constraints: {usage}",
            )
        # the builder's own constructor of one-sided constraints (what nnz(w) <= k, rank(W) <= r,
        # eig(O) >= a, w >= 0 and sum(w) == 1 call), located at the whole constraint
        self.constraints.append(constrain(a, op, self._bound(b, text, span), span))

    def _side(self, t: Any) -> Any:
        """A side of a constraint: an expression, or the word ``auto`` (an eigenvalue bound computed
        from the data) when no symbol of that name is defined."""
        if isinstance(t, Tree) and t.data == "name" and str(t.children[0]) == AUTO and AUTO not in self.env:
            return AUTO
        return self.expr(t)

    def _bound(self, x: Any, text: str, span: Span | None) -> Any:
        if isinstance(x, str) and x == AUTO:
            return x
        if isinstance(x, Expr):
            with np.errstate(all="ignore"):
                finite = not (x.is_constant() and x.shape == ()) or np.isfinite(float(x.constant_value()))
            if not finite:
                raise ConstraintError(f"'{text}': the bound {x} is not a finite number", span)
            return x
        raise ConstraintError(f"'{text}': the bound must be a number or a param, not {x}", span)

    def _solve_stmt(self, stmt: Tree) -> None:
        name_tok, opts = stmt.children
        span = self.span(stmt)
        if self.solve_with is not None:
            raise ModelError("a second 'solve with' line", span, "a model names at most one default solver")
        options: dict[str, Any] = {}
        for opt in opts.children if opts is not None else []:
            if opt is None:
                continue
            key_tok, val = opt.children
            key = str(key_tok)
            if key in options:
                raise ModelError(f"the option {key} is given twice", self.span(opt))
            options[key] = self._option_value(val)
        self.solve_with = (str(name_tok), options, span)

    def _option_value(self, val: Any) -> Any:
        if isinstance(val, Tree):
            return self._signed(val)
        if val.type == "STRING":
            return unquote(val)
        text = str(val)
        return {"true": True, "false": False, "none": None}.get(text.lower(), text)

    def _compare_stmt(self, stmt: Tree) -> None:
        span = self.span(stmt)
        if self.compare_with is not None:
            raise ModelError("a second 'compare with' line", span, "list every solver on one compare line")
        names = [str(c) for c in stmt.children[:-1]]
        rng = stmt.children[-1]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ModelError(f"compare with lists {dup[0]} twice", span)
        values: list[Any] | None = None
        text: str | None = None
        var: str | None = None
        bound = False
        if rng is not None:
            var_tok, *nums = rng.children
            rspan = self.span(rng)
            nums = [n for n in nums if n is not None]
            first, last = self.span(nums[0]), self.span(nums[-1])
            if first is not None and last is not None:
                text = self.source.line(first.line)[first.column - 1 : last.end_column - 1]
            vals = [self._signed(n) for n in nums]
            var = str(var_tok)
            param = self.env.get(var)
            bound = var in ("k", "r") and var not in self.env
            if not bound and not isinstance(param, Parameter):
                raise ModelError(
                    f"compare ... at {var} in ...: {var} is neither the bound (k) nor a param",
                    self.span(var_tok),
                    "write: compare with grahtp, lasso at k in 5:50:5 (the bound), or at NAME in ... for a param NAME",
                )
            if rng.data == "k_list":
                values = vals
            else:
                try:
                    values = expand_range(*vals)
                except ValueError as exc:
                    raise ModelError(
                        f"the range {text} is empty or invalid ({exc})",
                        rspan,
                        "write START:STOP:STEP with START <= STOP and STEP > 0 (STOP is included)",
                    ) from None
            if bound or isinstance(param, Parameter) and self._is_bound_param(var):
                if not all(isinstance(x, int) or float(x).is_integer() for x in values):
                    raise ModelError(f"the range {text} of the bound must consist of integers", rspan)
                values = [int(x) for x in values]
                if any(x < 0 for x in values):
                    raise ModelError(f"the range {text} of the bound has negative values", rspan, "bounds are >= 0")
            self.k_range = (var, rspan)
        self.compare_with = {
            "solvers": names,
            "sweep": var,
            "values": values,
            "text": text,
            "span": span,
            "k": values if bound else None,
            "k_text": text if bound else None,
        }

    def _check_param_range(self) -> None:
        name = self.compare_with["sweep"]
        param = self.env.get(name)
        if not isinstance(param, Parameter) or not self._is_bound_param(name):
            return
        saved = param.value.copy()
        try:
            for v in self.compare_with["values"]:
                param.value = np.asarray(float(v))
                for c in bounded(self.constraints):
                    try:
                        c.validate()
                    except ConstraintError as exc:
                        raise ConstraintError(
                            f"compare ... at {name} in {self.compare_with['text']}: at {name} = {v:g}, {exc.message}",
                            self.k_range[1],
                            exc.hint,
                        ) from None
        finally:
            param.value = saved

    def _is_bound_param(self, name: str) -> bool:
        """Whether the param ``name`` appears in the bound of a sparsity or rank constraint."""
        for c in self.constraints:
            e = getattr(c, "k_expr", None) or getattr(c, "r_expr", None)
            if e is not None and any(isinstance(n, Parameter) and n.name == name for n in e.walk()):
                return True
        return False
