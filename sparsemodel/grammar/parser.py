"""The text front end: model files (``*.sm``) parsed with Lark into a :class:`~sparsemodel.model.problem.Problem`.

``parse(text)`` / ``load(path)`` run in three steps:

1. Lark's LALR(1) parser (grammar in ``sparsemodel.lark``, ``propagate_positions=True``) builds a
   parse tree. A small post-lexer lets bracketed text continue over several lines and reports
   unclosed brackets. Lark's exceptions become :class:`~sparsemodel.errors.ParseError` with the
   line, the column, the offending line with a caret, and a readable list of what was expected.
2. A pre-pass collects the declared names, so that rebinding data (``data=``) or params
   (``params=``) that the model does not declare is refused before anything is read, and so that
   using a name before its declaration gets a precise message.
3. The statements run in order. Expressions are built by :class:`ExprBuilder`, a Lark
   ``Transformer`` producing the model objects directly (every node gets a
   :class:`~sparsemodel.errors.Span` of its text, so later shape and convexity errors point at
   the right place); ``func`` bodies are turned into sympy by ``funcbody.SympyBuilder``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from lark import Token, Tree
from lark.exceptions import VisitError

from .. import io as smio
from ..errors import (
    ConstraintError,
    DataError,
    ModelError,
    NameResolutionError,
    ParseError,
    ShapeError,
    Source,
    Span,
)
from ..model.atoms import ATOMS
from ..model.constraints import (
    STRUCTURAL_FUNCTIONS,
)
from ..model.datafuncs import DATA_FUNCTIONS
from ..model.expr import (
    Constant,
    Data,
    Expr,
    Parameter,
    Variable,
    fmt_shape,
)
from ..model.names import names_of
from ..model.objective import Objective
from ..model.userfunc import FuncDef
from ..problem import Problem
from ..util import did_you_mean
from .data import _UNSET, bind_data
from .directives import Directives
from .expressions import ExprBuilder
from .syntax import BUILTIN_FUNCTIONS, CONSTRAINT_FUNCTIONS, _end_position, parse_tree
from .tokens import AxisWord, Text, callable_signature, number, span_of, structural_name, unquote, what


class ModelBuilder(Directives):
    """Runs the statements of a parse tree in order and assembles the :class:`Problem`."""

    def __init__(
        self,
        source: Source,
        base_dir: Path,
        data: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
    ):
        self.source = source
        self.base_dir = base_dir
        self.data_overrides = dict(data or {})
        self.param_overrides = dict(params or {})
        self.env: dict[str, Any] = {}
        self.funcs: dict[str, FuncDef] = {}
        self.declared_at: dict[str, Span | None] = {}
        self.later: dict[str, Span | None] = {}
        self.objective: Objective | None = None
        self.constraints: list[Any] = []
        self.in_subject = False
        self.solve_with: tuple[str, dict[str, Any], Span | None] | None = None
        self.compare_with: dict[str, Any] | None = None
        self.exprs = ExprBuilder(self.source, self.env, self.lookup, self.call)
        self.k_range: tuple[str, Span | None] | None = None

    # ------------------------------------------------------------------ entry
    def build(self, tree: Tree) -> Problem:
        self._prepass(tree)
        for stmt in tree.children:
            handler = getattr(self, f"_{stmt.data}")
            handler(stmt)
        if self.objective is None:
            line, col = _end_position(self.source)  # point at the end: that is where it is missing
            raise ModelError(
                f"{self.source.name} has no minimize statement",
                Span(self.source, line, max(1, col - 1), line, col),
                "a model needs an objective: minimize EXPR (or maximize EXPR)",
            )
        self._check_k_range()
        symbols = dict(self.env)
        return Problem(
            self.objective,
            self.constraints,
            solve_with=self.solve_with,
            compare_with=self.compare_with,
            symbols=symbols,
            source=self.source.name,
        )

    def _prepass(self, tree: Tree) -> None:
        data_names: list[str] = []
        param_names: list[str] = []
        for stmt in tree.children:
            if stmt.data in ("data_stmt", "param_stmt", "let_stmt", "var_stmt", "func_stmt"):
                tok = stmt.children[0]
                self.later.setdefault(str(tok), span_of(self.source, tok))
                if stmt.data == "data_stmt":
                    data_names.append(str(tok))
                elif stmt.data == "param_stmt":
                    param_names.append(str(tok))
        self._check_overrides(self.data_overrides, data_names, "data")
        self._check_overrides(self.param_overrides, param_names, "params")

    def _check_overrides(self, given: Mapping[str, Any], declared: list[str], what: str) -> None:
        unknown = [k for k in given if k not in declared]
        if not unknown:
            return
        listing = ", ".join(declared) if declared else "(none)"
        hint = "".join(did_you_mean(k, declared) for k in unknown[:1])
        err = DataError if what == "data" else NameResolutionError
        raise err(
            f"{what}= rebinds {', '.join(repr(k) for k in unknown)}, which {self.source.name} does not declare",
            None,
            f"{hint}the model declares these {what}: {listing}",
        )

    # ------------------------------------------------------------------ names
    def span(self, node: Any) -> Span | None:
        return span_of(self.source, node)

    def declare(self, tok: Token, obj: Any) -> None:
        name = str(tok)
        span = self.span(tok)
        if name in self.declared_at:
            prev = self.declared_at[name]
            where = f" on line {prev.line}" if prev is not None else ""
            raise ModelError(
                f"'{name}' is already defined{where}", span, "each name is declared once; pick another name"
            )
        if name in BUILTIN_FUNCTIONS:
            raise ModelError(
                f"'{name}' is the name of a built-in function and cannot be redefined", span, "pick another name"
            )
        self.declared_at[name] = span
        self.env[name] = obj

    def lookup(self, tok: Token, span: Span | None) -> Any:
        name = str(tok)
        if name in self.env:
            obj = self.env[name]
            if isinstance(obj, FuncDef):
                raise ModelError(f"{name} is a func; call it like {name}(...)", span)
            return obj
        if name in BUILTIN_FUNCTIONS or name in self.funcs:
            raise ModelError(f"{name} is a function; call it like {name}(...)", span)
        if name in self.later and self.later[name] is not None:
            where = self.later[name]
            raise NameResolutionError(
                f"'{name}' is used before it is declared (on line {where.line})",
                span,
                "statements run in order: move the declaration above its first use",
            )
        for fname, cls in ATOMS.items():  # a word a keyword takes, written without its quotes
            for key, words in getattr(cls, "keyword_words", {}).items():
                if name in words:
                    raise NameResolutionError(
                        f"'{name}' is not defined",
                        span,
                        f'{fname}\'s {key} takes the word in quotes: {key} = "{name}"',
                    )
        names = [k for k, v in self.env.items() if not isinstance(v, FuncDef)]
        listing = ", ".join(names) if names else "(none yet)"
        raise NameResolutionError(
            f"'{name}' is not defined",
            span,
            f"{did_you_mean(name, names)}names defined so far: {listing}",
        )

    def expr(self, tree: Tree) -> Any:
        try:
            return self.exprs.transform(tree)
        except VisitError as exc:
            raise self._visit_error(exc) from None

    def _visit_error(self, exc: VisitError) -> ModelError:
        """The ModelError inside a Lark VisitError; NumPy/sympy failures on odd input become one too."""
        orig = exc.orig_exc
        if isinstance(orig, ModelError):
            return orig
        span = self.span(exc.obj) if isinstance(exc.obj, Tree) else None
        what = f"'{span.text}'" if span is not None else "this expression"
        return ModelError(f"cannot build {what}: {orig}", span)

    def value_expr(self, tree: Any, what: str) -> Expr:
        v = self.expr(tree)
        if isinstance(v, Expr):
            return v
        if isinstance(v, AxisWord):
            return self.exprs._operand(v, what, v.span)  # raises: rows(...) is called, not named
        s = structural_name(v)
        raise ConstraintError(
            f"{what} cannot be {s}" if s else f"{what} must be an expression",
            self.span(tree),
            f"{', '.join(STRUCTURAL_FUNCTIONS)} only appear in constraints after subject to",
        )

    # ------------------------------------------------------------------ calls
    def call(self, fname: str, args: list[Any], kwargs: dict[str, Any], span: Span | None) -> Any:
        if fname in self.funcs:
            if kwargs or len(args) != 1:
                raise ModelError(f"func {fname} takes one argument", span, f"write {fname}(EXPR)")
            return self.funcs[fname](self.exprs._operand(args[0], fname, span), span=span)
        if fname == "custom_loss" and fname not in self.env:
            raise ModelError(
                "custom_loss takes a Python function, which a model file cannot hold",
                span,
                "build the model in Python with sm.custom_loss(fun, w), or write a Python model module (a .py file "
                "defining problem = sm.Problem(...)) and run sparsemodel solve model.py",
            )
        if fname in ATOMS:
            fn: Any = ATOMS[fname]
        elif fname in DATA_FUNCTIONS:
            fn = DATA_FUNCTIONS[fname]
        elif fname in CONSTRAINT_FUNCTIONS:
            fn = CONSTRAINT_FUNCTIONS[fname]
        elif fname in self.env:
            raise ModelError(f"{fname} is {what(self.env[fname])}, not a function", span)
        else:
            known = sorted(set(BUILTIN_FUNCTIONS) | set(self.funcs))
            raise NameResolutionError(
                f"unknown function '{fname}'",
                span,
                f"{did_you_mean(fname, known)}the functions are: {', '.join(known)} (and funcs defined with func)",
            )
        sig = callable_signature(fn)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise ModelError(f"{fname}(): {exc}", span, f"usage: {fname}{sig}") from None
        for pname, value in list(bound.arguments.items()):
            if isinstance(value, Text) or isinstance(sig.parameters[pname].default, str):
                bound.arguments[pname] = self._text_argument(fname, sig, pname, value, span)
            elif fname == "nnz" and pname == "groups" and isinstance(value, AxisWord):
                bound.arguments[pname] = value.word  # nnz(W, groups = rows)
            elif pname == "axis":
                bound.arguments[pname] = self.exprs._int_value(value, "axis", span)
            elif fname not in CONSTRAINT_FUNCTIONS or pname != "target":
                bound.arguments[pname] = self.exprs._operand(value, fname, span)
        return fn(*bound.args, span=span, **bound.kwargs)

    def _text_argument(self, fname: str, sig: Any, pname: str, value: Any, span: Span | None) -> str:
        """A keyword that takes a word (its default is one: ``cox``'s ``ties``) given in quotes;
        quoted text anywhere else, or an expression where a word is expected, is refused here."""
        default = sig.parameters[pname].default
        if not isinstance(default, str):
            raise ModelError(
                f"{fname}()'s {pname} takes an expression, not the text {value.text!r}",
                value.span or span,
                f"usage: {fname}{sig}",
            )
        if not isinstance(value, Text):
            raise ModelError(
                f'{fname}()\'s {pname} takes a word in quotes, like {pname} = "{default}"',
                span,
                f"usage: {fname}{sig}",
            )
        return value.text

    # ------------------------------------------------------------------ statements
    def _data_stmt(self, stmt: Tree) -> None:
        name_tok, kind_tok, path_tok, except_clause, map_clause = stmt.children
        name, kind = str(name_tok), str(kind_tok)
        span = self.span(stmt)
        if kind not in smio.KINDS:
            raise ParseError(
                f"unknown data kind '{kind}'",
                self.span(kind_tok),
                f"{did_you_mean(kind, list(smio.KINDS))}the kinds are: {', '.join(smio.KINDS)}",
            )
        exclude = [unquote(t) for t in except_clause.children] if except_clause is not None else []
        mapping: dict[Any, float] = {}
        if map_clause is not None:
            for item in map_clause.children:
                if item is None:
                    continue
                key_node, val_node = item.children
                key = unquote(key_node) if isinstance(key_node, Token) else self._signed(key_node)
                if key in mapping:
                    raise ModelError(f"map lists {key!r} twice", self.span(item))
                mapping[key] = float(self._signed(val_node))
        path_spec = (unquote(path_tok), self.span(path_tok)) if path_tok is not None else None
        d = bind_data(
            name, kind, path_spec, self.base_dir, exclude, mapping, span, self.data_overrides.get(name, _UNSET)
        )
        self.declare(name_tok, d)

    def _signed(self, node: Tree) -> int | float:
        return number(node.children[0], negative=node.data == "negative_number")

    def _param_stmt(self, stmt: Tree) -> None:
        name_tok, body = stmt.children
        name = str(name_tok)
        span = self.span(stmt)
        if name in self.param_overrides:
            raw = self.param_overrides[name]
            try:
                value = np.asarray(raw, dtype=float)
            except (TypeError, ValueError):
                raise DataError(f"params= gives {name} the value {raw!r}, which is not a number", span) from None
            if value.shape != ():
                raise DataError(
                    f"params= gives {name} a value of shape {fmt_shape(value.shape)}; params are scalars", span
                )
        else:
            e = self.value_expr(body, f"param {name}")
            if not e.is_constant():
                raise ModelError(
                    f"param {name} = {e} depends on a variable", span, "a param is a number or an expression of numbers"
                )
            if e.shape != ():
                raise ShapeError(
                    f"param {name} = {e} has shape {fmt_shape(e.shape)}; params are scalars",
                    span,
                    "use let for derived data",
                )
            value = np.asarray(float(e.constant_value()))
        if not np.isfinite(value):
            raise DataError(f"param {name} is {float(value)}; a param must be finite", span)
        self.declare(name_tok, Parameter(value, name=name, span=span))

    def _let_stmt(self, stmt: Tree) -> None:
        name_tok, body = stmt.children
        name = str(name_tok)
        span = self.span(stmt)
        e = self.value_expr(body, f"let {name}")
        known = {id(v) for v in self.env.values()}
        if e.is_constant() and id(e) not in known:
            if isinstance(e, Data):
                e.name = name
                e.span = span
            elif not isinstance(e, (Constant, Parameter)) and not any(isinstance(n, Parameter) for n in e.walk()):
                e = Data(e.constant_value(), name=name, span=span, kind="let", names=names_of(e))
        self.declare(name_tok, e)

    def _var_stmt(self, stmt: Tree) -> None:
        name_tok, dims, sym = stmt.children
        name = str(name_tok)
        span = self.span(stmt)
        shape: list[int] = []
        for d in dims.children if dims is not None else []:
            e = self.value_expr(d, f"a dimension of {name}")
            dspan = self.span(d)
            if not e.is_constant() or e.shape != ():
                raise ShapeError(f"the dimension {e} of var {name} must be a number", dspan)
            v = float(e.constant_value())
            if not np.isfinite(v) or v != int(v) or v <= 0:
                raise ShapeError(
                    f"the dimension {e} of var {name} is {v:g}; dimensions must be positive integers", dspan
                )
            shape.append(int(v))
        self.declare(name_tok, Variable(tuple(shape), name=name, symmetric=sym is not None, span=span))

    def _func_stmt(self, stmt: Tree) -> None:
        name_tok, arg_tok, body = stmt.children
        name, arg = str(name_tok), str(arg_tok)
        span = self.span(stmt)
        if arg in self.env:
            raise ModelError(
                f"the argument '{arg}' of func {name} has the name of {what(self.env[arg])} declared earlier",
                self.span(arg_tok),
                "give the argument a fresh name (z, u, t, ...)",
            )
        import sympy  # only models with a func need sympy

        from .funcbody import SympyBuilder

        try:
            sym_body = SympyBuilder(self.source, self.env, self.funcs, name, arg).transform(body)
        except VisitError as exc:
            raise self._visit_error(exc) from None
        bspan = self.span(body)
        text = bspan.text if bspan is not None else str(sym_body)
        try:
            fdef = FuncDef(name, arg, sympy.sympify(sym_body), span=span, text=text)
        except ModelError:
            raise
        except (ArithmeticError, KeyError, TypeError, ValueError, sympy.SympifyError) as exc:
            raise ModelError(
                f"func {name}({arg}) = {text} cannot be used: sympy could not differentiate or compile it ({exc!r})",
                bspan or span,
                "a func must be a smooth real function of its argument, finite where it is used",
            ) from None
        self.declare(name_tok, fdef)
        self.funcs[name] = fdef

    def _minimize_stmt(self, stmt: Tree, sense: str = "minimize") -> None:
        span = self.span(stmt)
        if self.objective is not None:
            prev = self.objective.span
            raise ModelError(
                f"a second objective ({sense})" + (f"; the first is on line {prev.line}" if prev else ""),
                span,
                "a model has one objective (minimize or maximize); add the terms together",
            )
        e = self.value_expr(stmt.children[0], "the objective")
        self.objective = Objective(e, span=e.span or span, sense=sense)

    def _maximize_stmt(self, stmt: Tree) -> None:
        self._minimize_stmt(stmt, "maximize")

    def _subject_stmt(self, stmt: Tree) -> None:
        self.in_subject = True
        if stmt.children and stmt.children[0] is not None:
            self._constraint(stmt.children[0])


def parse(
    text: str,
    data: Mapping[str, Any] | None = None,
    params: Mapping[str, Any] | None = None,
    base_dir: str | Path = ".",
    name: str = "<string>",
) -> Problem:
    """Build a :class:`Problem` from model text.

    ``data`` rebinds declared data names to arrays, sparse matrices or path strings (relative to
    the current directory); ``params`` overrides param values; ``base_dir`` is where the model's own
    data paths are resolved; ``name`` names the source in error messages.
    """
    source = Source(name, text)
    tree = parse_tree(source)
    prob = ModelBuilder(source, Path(base_dir), data, params).build(tree)

    def rebuild_with(values: Mapping[str, Any]) -> Problem:
        """The same model text with these data names rebound too (held-out rows, a new draw)."""
        return parse(text, data={**(data or {}), **values}, params=params, base_dir=base_dir, name=name)

    prob.rebuild_with = rebuild_with
    return prob


def load(path: str | Path, data: Mapping[str, Any] | None = None, params: Mapping[str, Any] | None = None) -> Problem:
    """Read and build a model file; data paths in it are relative to the file's folder."""
    p = Path(path)
    if not p.exists():
        raise ModelError(f"the model file {path} does not exist", None, f"looked for {p.resolve()}")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelError(f"cannot read the model file {path}: {exc}") from None
    return parse(text, data=data, params=params, base_dir=p.parent, name=str(path))


__all__ = ["parse", "load", "ModelBuilder"]
