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
   the right place); ``func`` bodies are turned into sympy by ``funcbody.SympyBuilder``.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import json
import re
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from lark import Lark, Token, Transformer_NonRecursive, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError

from .. import io as smio
from ..errors import (
    ConstraintError,
    DataError,
    DataWarning,
    ModelError,
    NameResolutionError,
    ParseError,
    ShapeError,
    Source,
    Span,
)
from ..model import atoms as atoms_mod
from ..model.atoms import ATOMS, DATA_FUNCTIONS, Atom
from ..model.constraints import (
    AUTO,
    AXIS_GROUPS,
    BoxConstraint,
    EigBoxConstraint,
    EigExpr,
    NnzConstraint,
    NnzExpr,
    Offdiag,
    RankConstraint,
    RankExpr,
    eig,
    nnz,
    offdiag,
    rank,
)
from ..model.expr import (
    Add,
    Constant,
    Data,
    Div,
    Expr,
    Index,
    MatMul,
    Mul,
    Neg,
    Parameter,
    Sub,
    Transpose,
    Variable,
    dense,
    fmt_shape,
)
from ..model.names import frame_names, names_of
from ..model.problem import Objective
from ..model.userfunc import FuncDef
from ..problem import Problem
from ..util import expand_range

GRAMMAR_FILE = Path(__file__).with_name("sparsemodel.lark")

STATEMENT_KEYWORDS = ("data", "param", "let", "var", "func", "minimize", "subject", "solve", "compare")
CONSTRAINT_FUNCTIONS = {"nnz": nnz, "rank": rank, "eig": eig, "offdiag": offdiag}
BUILTIN_FUNCTIONS = sorted(set(ATOMS) | set(DATA_FUNCTIONS) | set(CONSTRAINT_FUNCTIONS))
_OPEN = {"LPAR": "(", "LSQB": "[", "LBRACE": "{"}
_CLOSE = {"RPAR": ")", "RSQB": "]", "RBRACE": "}"}
_CLOSER = {"(": ")", "[": "]", "{": "}"}


# ============================================================================ Lark setup


class _Unclosed(Exception):
    """Raised by the post-lexer for a bracket that is never closed (turned into a ParseError)."""

    def __init__(self, opener: Token, newline: Token | None):
        super().__init__(str(opener))
        self.opener = opener
        self.newline = newline


class _BracketPostLex:
    """Drop line breaks inside (), [] and {} so long expressions can span lines.

    A line break inside an open bracket followed by a statement keyword, or the end of the text
    inside an open bracket, means the bracket was never closed: that is reported at the bracket.
    """

    always_accept = ("_NL",)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        stack: list[Token] = []
        pending: Token | None = None
        for tok in stream:
            if tok.type == "_NL" and stack:
                pending = pending or tok
                continue
            if pending is not None:
                if str(tok) in STATEMENT_KEYWORDS:
                    raise _Unclosed(stack[-1], pending)
                pending = None
            if tok.type in _OPEN:
                stack.append(tok)
            elif tok.type in _CLOSE and stack:
                stack.pop()
            yield tok
        if stack:
            raise _Unclosed(stack[-1], pending)


def _unclosed_error(exc: _Unclosed, source: Source) -> ParseError:
    opener, nl = exc.opener, exc.newline
    span = Span(source, opener.line, opener.column, opener.line, opener.column + 1)
    where = f"the end of line {nl.line}" if nl is not None else "the end of the file"
    return ParseError(
        f"'{opener}' is never closed",
        span,
        f"expected '{_CLOSER[str(opener)]}' before {where}; inside brackets a statement may continue on the "
        "next lines, but a new statement cannot start there",
    )


@functools.lru_cache(maxsize=1)
def _lark() -> Lark:
    return Lark(
        GRAMMAR_FILE.read_text(encoding="utf-8"),
        parser="lalr",
        propagate_positions=True,
        maybe_placeholders=True,
        postlex=_BracketPostLex(),
    )


def _terminal_display() -> dict[str, str]:
    parser = _lark()
    friendly = {
        "NAME": "a name",
        "NUMBER": "a number",
        "STRING": 'a "quoted string"',
        "_NL": "the end of the line",
        "$END": "the end of the file",
        "CMP": "<= or >=",
        "POW": "** or ^",
        "DOT_T": ".T",
    }
    out = {}
    for t in parser.terminals:
        out[t.name] = friendly.get(t.name, f"'{t.pattern.value}'" if t.pattern.type == "str" else t.name)
    out.update({k: v for k, v in friendly.items() if k not in out})
    return out


_EXPRESSION_START = {"NAME", "NUMBER", "LPAR", "LSQB", "MINUS", "PLUS"}  # LSQB: a list [1, 2]
_OPERATOR_TEXT = {"'+'", "'-'", "'*'", "'/'", "'@'", "** or ^", "'''", ".T", "'['"}
_STATEMENTS = {k.upper() for k in STATEMENT_KEYWORDS}


def describe_expected(expected: set[str]) -> str:
    """'a name or ':'', 'an expression', ... from a set of Lark terminal names."""
    names = set(expected)
    display = _terminal_display()
    parts: list[str] = []
    if _STATEMENTS & names:
        parts.append("a statement (data, param, let, var, func, minimize, subject to, solve with, compare with)")
        names -= _STATEMENTS
        if {"NAME", "NUMBER", "LPAR"} <= names:
            parts.append("a constraint")
            names -= _EXPRESSION_START
    if {"NAME", "NUMBER", "LPAR"} <= names:
        parts.append("an expression")
        names -= _EXPRESSION_START
    ops = {n for n in names if display.get(n) in _OPERATOR_TEXT}
    if len(ops) >= 4:
        parts.append("an operator (+ - * / @ ** ' .T [ ])")
        names -= ops
    order = ["COMMA", "RPAR", "RSQB", "RBRACE", "COLON", "EQUAL", "CMP", "NAME", "NUMBER", "STRING"]
    rest = sorted(names, key=lambda n: (order.index(n) if n in order else len(order), n))
    ends = [n for n in rest if n in ("_NL", "$END")]
    rest = [n for n in rest if n not in ("_NL", "$END")]
    parts += [display.get(n, n) for n in rest]
    if ends:
        parts.append(display["_NL"] if "_NL" in ends else display["$END"])
    if not parts:
        return "nothing more"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]


def _describe_token(tok: Token) -> str:
    if tok.type == "_NL":
        return "end of line"
    if tok.type == "$END":
        return "end of file"
    if tok.type == "NAME":
        return f"name '{tok}'"
    if tok.type == "NUMBER":
        return f"number {tok}"
    if tok.type == "STRING":
        return f"string {tok}"
    if tok.type.lower() in STATEMENT_KEYWORDS or tok.type in ("TO", "WITH", "FROM", "EXCEPT", "MAP", "AT", "IN"):
        return f"keyword '{tok}'"
    return f"'{tok}'"


def _end_position(source: Source) -> tuple[int, int]:
    lines = source.text.splitlines() or [""]
    return len(lines), len(lines[-1]) + 1


STATEMENT_USAGE = {"subject": "subject to", "solve": "solve with NAME", "compare": "compare with NAME, ..."}


def _misspelled_statement(source: Source, line: int | None) -> ParseError | None:
    """``subjet to``, ``minimze ...``, ``parm lam = 1``: a line whose first word is not a statement
    keyword but is close to one, in a line that does not parse: point at the word."""
    if line is None:
        return None
    m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)(\s+([A-Za-z_][A-Za-z0-9_]*))?", source.line(line))
    if m is not None and m.group(1) in ("subject", "solve", "compare") and m.group(3):
        second, want = m.group(3), "to" if m.group(1) == "subject" else "with"
        if second != want and difflib.get_close_matches(second, [want], n=1, cutoff=0.5):
            col = m.start(3) + 1
            return ParseError(
                f"'{m.group(1)} {second}' is not a statement",
                Span(source, line, col, line, col + len(second)),
                f"did you mean '{m.group(1)} {want}'?",
            )
    if m is None or m.group(1) in STATEMENT_KEYWORDS:
        return None
    word = m.group(1)
    close = difflib.get_close_matches(word.lower(), STATEMENT_KEYWORDS, n=1, cutoff=0.75)
    if not close:
        return None
    kw = close[0]
    col = m.start(1) + 1
    return ParseError(
        f"unknown statement '{word}'",
        Span(source, line, col, line, col + len(word)),
        f"did you mean '{kw}'? (a line starting {STATEMENT_USAGE.get(kw, kw)} ...); "
        "statements start with: data, param, let, var, func, minimize, subject to, solve with, compare with",
    )


def _misspelled_keyword(tok: Token, expected: set[str]) -> str:
    """``data X : matrix form "X.csv"``: a name where a keyword was expected and close to it."""
    if tok.type != "NAME":
        return ""
    words = []
    for t in _lark().terminals:
        if t.name in expected and t.pattern.type == "str" and str(t.pattern.value).isalpha():
            words.append(str(t.pattern.value))
    close = difflib.get_close_matches(str(tok).lower(), words, n=1, cutoff=0.7)
    return f"did you mean '{close[0]}'? " if close else ""


def _convert_lark_error(exc: UnexpectedInput, source: Source) -> ParseError:
    line = getattr(exc, "line", None)
    first = _misspelled_statement(source, line if isinstance(line, int) and line > 0 else None)
    if first is not None:
        return first
    if isinstance(exc, UnexpectedCharacters):
        line, col = exc.line, exc.column
        char = source.line(line)[col - 1 : col] or "?"
        span = Span(source, line, col, line, col + 1)
        if char in "<>=!":
            hint = "constraints are written with <= or >= (nnz(w) <= k, rank(W) <= r, alpha <= eig(O) <= beta)"
        else:
            hint = f"expected {describe_expected(set(exc.allowed or ()))}"
        return ParseError(f"unexpected character {char!r}", span, hint)
    if isinstance(exc, UnexpectedToken):
        tok = exc.token
        if tok.type == "$END" or str(tok) in STATEMENT_KEYWORDS:
            opener = _open_bracket_before(source, tok)
            if opener is not None:
                return opener
        expected = set(getattr(exc, "accepts", None) or exc.expected or ())
        if tok.type == "$END" or tok.line is None:
            line, col = _end_position(source)
            span = Span(source, line, col, line, col + 1)
        else:
            end_col = tok.end_column if tok.end_line == tok.line and tok.type != "_NL" else tok.column + 1
            span = Span(source, tok.line, tok.column, tok.line, max(end_col, tok.column + 1))
        hint = _misspelled_keyword(tok, expected) + f"expected {describe_expected(expected)}"
        if tok.type == "QUOTE" and "STRING" in expected:
            hint += '; strings use double quotes: "text"'
        if tok.type == "NAME" and str(tok) in STATEMENT_KEYWORDS:
            hint += f"; '{tok}' starts a statement and is reserved at the start of a line"
        return ParseError(f"unexpected {_describe_token(tok)}", span, hint)
    line = getattr(exc, "line", None) or 1
    col = getattr(exc, "column", None) or 1
    return ParseError(str(exc).splitlines()[0], Span(source, line, col, line, col + 1))


def _open_bracket_before(source: Source, tok: Token) -> ParseError | None:
    """The unclosed-bracket error when ``tok`` (a statement keyword or the end) sits inside a bracket
    opened on an earlier line; None otherwise."""
    lines = source.text.splitlines()
    if tok.type == "$END" or tok.line is None:
        stop_line, stop_col = len(lines) + 1, 1
    else:
        stop_line, stop_col = tok.line, tok.column
        if source.line(stop_line)[: stop_col - 1].strip():
            return None
    stack: list[tuple[str, int, int]] = []
    for ln, text in enumerate(lines, 1):
        if ln > stop_line:
            break
        in_string = False
        for col, ch in enumerate(text, 1):
            if ln == stop_line and col >= stop_col:
                break
            if in_string:
                in_string = ch != '"' or text[col - 2 : col - 1] == "\\"
            elif ch == '"':
                in_string = True
            elif ch == "#":
                break
            elif ch in _CLOSER:
                stack.append((ch, ln, col))
            elif ch in ")]}" and stack:
                stack.pop()
    if not stack or stack[-1][1] >= stop_line:
        return None
    ch, ln, col = stack[-1]
    fake_open = Token("LPAR", ch, line=ln, column=col)
    fake_nl = Token("_NL", "\n", line=stop_line - 1, column=1)
    return _unclosed_error(_Unclosed(fake_open, fake_nl), source)


def parse_tree(source: Source) -> Tree:
    """The Lark parse tree of a model source (syntax errors as :class:`ParseError`)."""
    try:
        return _lark().parse(source.text)
    except _Unclosed as exc:
        raise _unclosed_error(exc, source) from None
    except UnexpectedInput as exc:
        raise _convert_lark_error(exc, source) from None


# ============================================================================ helpers


def _span(source: Source, node: Any) -> Span | None:
    meta = node.meta if isinstance(node, Tree) else node
    if isinstance(node, Tree) and getattr(meta, "empty", True):
        return None
    if getattr(meta, "line", None) is None:
        return None
    return Span(source, meta.line, meta.column, meta.end_line, meta.end_column)


def _unquote(tok: Token) -> str:
    try:
        return json.loads(str(tok))
    except ValueError:
        return str(tok)[1:-1]


def _number(tok: Token, negative: bool = False) -> int | float:
    text = str(tok)
    v: int | float = int(text) if re.fullmatch(r"\d+", text) else float(text)
    return -v if negative else v


def _did_you_mean(word: str, options: list[str]) -> str:
    close = [o for o in options if o.lower() == word.lower()] or difflib.get_close_matches(word, options, n=1)
    return f"did you mean '{close[0]}'? " if close else ""


@dataclass
class _Kw:
    name: str
    value: Any
    span: Span | None


@dataclass
class _AxisWord:
    """The bare word ``rows`` or ``cols``: in ``nnz(W, groups = rows)`` the row (column) groups of
    a matrix; anywhere else the data function that must be called, ``rows(X)``."""

    word: str
    span: Span | None


@dataclass
class _Slice:
    start: Any
    stop: Any
    step: Any
    span: Span | None


def _what(obj: Any) -> str:
    if isinstance(obj, Variable):
        return "a variable"
    if isinstance(obj, Parameter):
        return "a param"
    if isinstance(obj, Data):
        return "data"
    if isinstance(obj, FuncDef):
        return "a func"
    if isinstance(obj, Expr):
        return "an expression"
    return "a name"


def _structural_name(obj: Any) -> str | None:
    return str(obj) if isinstance(obj, (NnzExpr, RankExpr, EigExpr, Offdiag)) else None


# ============================================================================ expressions


@v_args(meta=True)
class ExprBuilder(Transformer_NonRecursive):
    """Builds model expressions (``sparsemodel.model.expr`` nodes) from expression parse trees."""

    def __init__(self, builder: ModelBuilder):
        super().__init__(visit_tokens=False)
        self.b = builder

    def _sp(self, meta: Any) -> Span | None:
        return _span(self.b.source, meta)

    # ---- operands
    def _operand(self, x: Any, op: str, span: Span | None) -> Expr:
        if isinstance(x, Expr):
            return x
        if isinstance(x, _AxisWord):
            raise ModelError(
                f"{x.word} is a function; call it like {x.word}(...)",
                x.span,
                f"{x.word}(X) is the number of {x.word} of X; the bare word {x.word} means row or column groups "
                f"only in nnz(W, groups = {x.word}) <= k",
            )
        s = _structural_name(x)
        if s is not None:
            raise ConstraintError(
                f"{s} cannot be used inside an expression ({op})",
                span,
                "nnz, rank, eig and offdiag only appear in constraints: nnz(w) <= k, rank(W) <= r, "
                "alpha <= eig(O) <= beta, nnz(offdiag(O)) <= 2 * k",
            )
        raise ModelError(f"cannot use {x!r} in an expression", span)

    # ---- leaves
    def number(self, meta, children):
        tok = children[0]
        return Constant(float(tok), span=self._sp(meta), text=str(tok))

    def name(self, meta, children):
        word = str(children[0])
        if word in AXIS_GROUPS and word not in self.b.env:
            return _AxisWord(word, self._sp(meta))
        return self.b.lookup(children[0], self._sp(meta))

    # ---- arithmetic
    def _binary(self, cls: type, op: str, meta: Any, children: list[Any]) -> Expr:
        span = self._sp(meta)
        a, b = (self._operand(c, op, span) for c in children)
        return cls(a, b, span=span)

    def add(self, meta, children):
        return self._binary(Add, "+", meta, children)

    def sub(self, meta, children):
        return self._binary(Sub, "-", meta, children)

    def mul(self, meta, children):
        return self._binary(Mul, "*", meta, children)

    def div(self, meta, children):
        return self._binary(Div, "/", meta, children)

    def matmul(self, meta, children):
        return self._binary(MatMul, "@", meta, children)

    def neg(self, meta, children):
        span = self._sp(meta)
        a = self._operand(children[0], "-", span)
        if isinstance(a, Constant) and not a.shape:
            return Constant(-a.value, span=span, text=f"-{a}")
        return Neg(a, span=span)

    def pos(self, meta, children):
        return self._operand(children[0], "+", self._sp(meta))

    def pow(self, meta, children):
        span = self._sp(meta)
        a = self._operand(children[0], "**", span)
        p = self._operand(children[2], "**", span)
        if not p.is_constant() or p.shape != ():
            raise ModelError(f"the exponent in {a} ** {p} must be a number", span)
        pv = float(p.constant_value())
        if a.is_constant():
            v = np.power(dense(a.constant_value()), pv)
            return Constant(float(v), span=span, text=f"{a}**{p}") if a.shape == () else Data(v, span=span)
        if pv == 2:
            return atoms_mod.square(a, span=span)
        if pv == 1:
            return a
        raise ModelError(
            f"{a} ** {p}: only the power 2 of an expression with variables is supported",
            span,
            "use square(...), sum_squares(...), exp/log, or define the function with func, e.g. func quartic(z) = z^4",
        )

    def list_literal(self, meta, children):
        """``[0, 3, 5]``: a data vector of numbers (for example the indices of ``nnz(w, free = [0, 3])``)."""
        span = self._sp(meta)
        vals = []
        for c in children:
            if c is None:
                continue
            e = self._operand(c, "[ ]", span)
            if not e.is_constant() or e.shape != ():
                raise ModelError(
                    f"a list holds numbers; {e} is {'not a number' if e.shape != () else 'not constant'}",
                    span,
                    "write a list of numbers, e.g. [0, 3, 5]",
                )
            vals.append(float(e.constant_value()))
        return Data(np.array(vals), span=span)

    def transpose(self, meta, children):
        span = self._sp(meta)
        return Transpose(self._operand(children[0], "transpose", span), span=span)

    def slice(self, meta, children):
        return _Slice(*children, span=self._sp(meta))

    def index(self, meta, children):
        span = self._sp(meta)
        base = self._operand(children[0], "[ ]", span)
        key = []
        for c in children[1:]:
            if isinstance(c, _Slice):
                bounds = [self._int_value(x, "slice bound", c.span) for x in (c.start, c.stop, c.step)]
                if bounds[2] == 0:
                    raise ShapeError("a slice step cannot be zero", c.span)
                key.append(slice(*bounds))
            else:
                key.append(self._int_value(c, "index", span))
        return Index(base, tuple(key), span=span)

    def _int_value(self, x: Any, what: str, span: Span | None) -> int | None:
        if x is None:
            return None
        e = self._operand(x, what, span)
        if not e.is_constant() or e.shape != ():
            raise ShapeError(f"an {what} must be an integer constant; got {e}", span)
        v = float(e.constant_value())
        if not np.isfinite(v) or v != int(v):
            raise ShapeError(f"an {what} must be an integer; {e} is {v:g}", span)
        return int(v)

    # ---- calls
    def kwarg(self, meta, children):
        return _Kw(str(children[0]), children[1], self._sp(meta))

    def call(self, meta, children):
        span = self._sp(meta)
        fname = str(children[0])
        raw = [c for c in children[1:] if c is not None]
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for a in raw:
            if isinstance(a, _Kw):
                if a.name in kwargs:
                    raise ModelError(f"{fname}() got the keyword {a.name} twice", a.span)
                kwargs[a.name] = a.value
            else:
                if kwargs:
                    raise ParseError(f"{fname}(): a positional argument follows a keyword argument", span)
                args.append(a)
        return self.b.call(fname, args, kwargs, span)


# ============================================================================ statements


def _callable_signature(fn: Any) -> inspect.Signature:
    if isinstance(fn, type) and issubclass(fn, Atom) and fn.__init__ is Atom.__init__:
        return inspect.Signature([inspect.Parameter("x", inspect.Parameter.POSITIONAL_OR_KEYWORD)])
    sig = inspect.signature(fn)
    return sig.replace(parameters=[p for n, p in sig.parameters.items() if n != "span"])


class ModelBuilder:
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
        self.exprs = ExprBuilder(self)
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
                "a model needs an objective: minimize EXPR",
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

    def _check_k_range(self) -> None:
        """``compare ... at k in A:B:C`` (the bound) must not ask for more than the constraint has;
        nor may a param sweep that moves the bound (``nnz(offdiag(O)) <= 2 * k``, ``at k in ...``),
        checked value by value as ``compare`` checks it before running."""
        if self.k_range is not None and self.compare_with is not None and self.compare_with.get("k") is None:
            self._check_param_range()
        if self.k_range is None or self.compare_with is None or self.compare_with.get("k") is None:
            return
        ks = self.compare_with["k"]
        c = next((c for c in self.constraints if isinstance(c, (NnzConstraint, RankConstraint))), None)
        if c is None:
            raise ConstraintError(
                f"compare ... at {self.k_range[0]} in {self.compare_with['text']} sweeps a bound, "
                "but the model has no nnz(...) <= k or rank(W) <= r constraint",
                self.k_range[1],
                "add a constraint, or sweep a param",
            )
        if isinstance(c, RankConstraint):
            limit, unit, what = min(c.variable.shape), "rank", f"{c.variable.name} has rank at most"
        else:  # k counts what is selected: coordinates, groups, or edges (pairs of a symmetric matrix)
            limit = c.n_units
            unit = "edges" if c.unit_size == 2 else "groups" if c.groups is not None else "coordinates"
            what = f"{c.nnz.target_text} has only"
        if ks and max(ks) > limit:
            raise ConstraintError(
                f"compare ... at {self.k_range[0]} in {self.compare_with['text']} goes up to {self.k_range[0]} = {max(ks)}, "
                f"but {what} {limit} {unit if unit != 'rank' else ''}".rstrip(),
                self.k_range[1],
                f"choose values between 0 and {limit}",
            )

    def _prepass(self, tree: Tree) -> None:
        data_names: list[str] = []
        param_names: list[str] = []
        for stmt in tree.children:
            if stmt.data in ("data_stmt", "param_stmt", "let_stmt", "var_stmt", "func_stmt"):
                tok = stmt.children[0]
                self.later.setdefault(str(tok), _span(self.source, tok))
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
        hint = "".join(_did_you_mean(k, declared) for k in unknown[:1])
        err = DataError if what == "data" else NameResolutionError
        raise err(
            f"{what}= rebinds {', '.join(repr(k) for k in unknown)}, which {self.source.name} does not declare",
            None,
            f"{hint}the model declares these {what}: {listing}",
        )

    # ------------------------------------------------------------------ names
    def span(self, node: Any) -> Span | None:
        return _span(self.source, node)

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
        names = [k for k, v in self.env.items() if not isinstance(v, FuncDef)]
        listing = ", ".join(names) if names else "(none yet)"
        raise NameResolutionError(
            f"'{name}' is not defined",
            span,
            f"{_did_you_mean(name, names)}names defined so far: {listing}",
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
        if isinstance(v, _AxisWord):
            return self.exprs._operand(v, what, v.span)  # raises: rows(...) is called, not named
        s = _structural_name(v)
        raise ConstraintError(
            f"{what} cannot be {s}" if s else f"{what} must be an expression",
            self.span(tree),
            "nnz, rank, eig and offdiag only appear in constraints after subject to",
        )

    # ------------------------------------------------------------------ calls
    def call(self, fname: str, args: list[Any], kwargs: dict[str, Any], span: Span | None) -> Any:
        if fname in self.funcs:
            if kwargs or len(args) != 1:
                raise ModelError(f"func {fname} takes one argument", span, f"write {fname}(EXPR)")
            return self.funcs[fname](self.exprs._operand(args[0], fname, span), span=span)
        if fname in ATOMS:
            fn: Any = ATOMS[fname]
        elif fname in DATA_FUNCTIONS:
            fn = DATA_FUNCTIONS[fname]
        elif fname in CONSTRAINT_FUNCTIONS:
            fn = CONSTRAINT_FUNCTIONS[fname]
        elif fname in self.env:
            raise ModelError(f"{fname} is {_what(self.env[fname])}, not a function", span)
        else:
            known = sorted(set(BUILTIN_FUNCTIONS) | set(self.funcs))
            raise NameResolutionError(
                f"unknown function '{fname}'",
                span,
                f"{_did_you_mean(fname, known)}the functions are: {', '.join(known)} (and funcs defined with func)",
            )
        sig = _callable_signature(fn)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise ModelError(f"{fname}(): {exc}", span, f"usage: {fname}{sig}") from None
        for pname, value in list(bound.arguments.items()):
            if fname == "nnz" and pname == "groups" and isinstance(value, _AxisWord):
                bound.arguments[pname] = value.word  # nnz(W, groups = rows)
            elif pname == "axis":
                bound.arguments[pname] = self.exprs._int_value(value, "axis", span)
            elif fname not in CONSTRAINT_FUNCTIONS or pname != "target":
                bound.arguments[pname] = self.exprs._operand(value, fname, span)
        return fn(*bound.args, span=span, **bound.kwargs)

    # ------------------------------------------------------------------ statements
    def _data_stmt(self, stmt: Tree) -> None:
        name_tok, kind_tok, path_tok, except_clause, map_clause = stmt.children
        name, kind = str(name_tok), str(kind_tok)
        span = self.span(stmt)
        if kind not in smio.KINDS:
            raise ParseError(
                f"unknown data kind '{kind}'",
                self.span(kind_tok),
                f"{_did_you_mean(kind, list(smio.KINDS))}the kinds are: {', '.join(smio.KINDS)}",
            )
        exclude = [_unquote(t) for t in except_clause.children] if except_clause is not None else []
        mapping: dict[Any, float] = {}
        if map_clause is not None:
            for item in map_clause.children:
                if item is None:
                    continue
                key_node, val_node = item.children
                key = _unquote(key_node) if isinstance(key_node, Token) else self._signed(key_node)
                if key in mapping:
                    raise ModelError(f"map lists {key!r} twice", self.span(item))
                mapping[key] = float(self._signed(val_node))
        path: Path | None = None
        info: dict[str, Any] = {}
        if name in self.data_overrides:
            given = self.data_overrides[name]
            if isinstance(given, (str, Path)):
                ds = smio.parse_spec(given, Path.cwd(), name, span)
                value, lines = smio.load_spec(
                    ds, kind, exclude=exclude, mapping=mapping, name=name, span=span, info=info, rebound=True
                )
                value = smio.validate(
                    value,
                    kind,
                    name=name,
                    origin=f"file {ds.describe()} (rebound with data= or --data)",
                    span=span,
                    lines=lines,
                )
                path = ds.path
            else:
                if isinstance(given, Data):  # sm.Data(X, names=...): the values and their names
                    info["names"], given = given.axis_names, given.value
                given, frame = frame_names(given)
                if frame is not None:
                    info["names"] = frame
                value = smio.validate(
                    given, kind, name=name, origin=f"the value rebound with data={{'{name}': ...}}", span=span
                )
        elif path_tok is None:
            raise DataError(
                f"data {name} has no file and no value was given for it",
                span,
                f'write data {name} : {kind} from "FILE", or pass data={{"{name}": ...}} (--data {name}=FILE)',
            )
        else:
            pspan = self.span(path_tok)
            ds = smio.parse_spec(_unquote(path_tok), self.base_dir, name, pspan)
            value, lines = smio.load_spec(ds, kind, exclude=exclude, mapping=mapping, name=name, span=pspan, info=info)
            value = smio.validate(value, kind, name=name, origin=f"file {ds.describe()}", span=pspan, lines=lines)
            path = ds.path
        for note in info.get("notes", []):
            where = f"{span.location()}: " if span is not None else ""
            warnings.warn(f"{where}data {name}: {note}", DataWarning, stacklevel=2)
        d = Data(value, name=name, span=span, kind=kind, names=info.get("names"))
        d.path = str(path.resolve()) if path is not None else None
        d.label_text = info.get("label_text")
        self.declare(name_tok, d)

    def _signed(self, node: Tree) -> int | float:
        return _number(node.children[0], negative=node.data == "negative_number")

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
                f"the argument '{arg}' of func {name} has the name of {_what(self.env[arg])} declared earlier",
                self.span(arg_tok),
                "give the argument a fresh name (z, u, t, ...)",
            )
        import sympy  # only models with a func need sympy

        from .funcbody import SympyBuilder

        try:
            sym_body = SympyBuilder(self, name, arg).transform(body)
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

    def _minimize_stmt(self, stmt: Tree) -> None:
        span = self.span(stmt)
        if self.objective is not None:
            prev = self.objective.span
            raise ModelError(
                "a second minimize statement" + (f" (the first is on line {prev.line})" if prev else ""),
                span,
                "a model has one objective; add the terms together",
            )
        e = self.value_expr(stmt.children[0], "the objective")
        self.objective = Objective(e, span=e.span or span)

    def _subject_stmt(self, stmt: Tree) -> None:
        self.in_subject = True
        if stmt.children and stmt.children[0] is not None:
            self._constraint(stmt.children[0])

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
            "alpha <= eig(O) <= beta, w >= 0, lo <= w <= hi"
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
            self.constraints.append(
                BoxConstraint(b, lower=self._bound(lo, text, span), upper=self._bound(hi, text, span), span=span)
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
            self.constraints.append(
                EigBoxConstraint(
                    b.var, lower=self._bound(lo, text, span), upper=self._bound(hi, text, span), span=span, xi=b.xi
                )
            )
            return
        op = ops[0]
        if AUTO in (a, b) and not isinstance(a if b == AUTO else b, EigExpr):
            raise ConstraintError(
                f"'{text}': auto is a bound of eig(...) only (the box of paper 000, Section 5.3)",
                span,
                "write: auto <= eig(O) <= auto, or give a number",
            )
        if isinstance(b, (NnzExpr, RankExpr, EigExpr)) and not isinstance(a, (NnzExpr, RankExpr, EigExpr)):
            a, b = b, a
            op = ">=" if op == "<=" else "<="
        if isinstance(a, NnzExpr):
            if op != "<=":
                raise ConstraintError(
                    f"'{text}' bounds {a} from below", span, "sparsity constraints read nnz(...) <= k"
                )
            self.constraints.append(NnzConstraint(a, self._bound(b, text, span), span=span))
        elif isinstance(a, RankExpr):
            if op != "<=":
                raise ConstraintError(f"'{text}' bounds {a} from below", span, "rank constraints read rank(W) <= r")
            self.constraints.append(RankConstraint(a.var, self._bound(b, text, span), span=span))
        elif isinstance(a, EigExpr):
            bound = self._bound(b, text, span)
            lower, upper = (bound, None) if op == ">=" else (None, bound)
            self.constraints.append(EigBoxConstraint(a.var, lower=lower, upper=upper, span=span, xi=a.xi))
        elif isinstance(a, Expr) and isinstance(b, Expr) and (a.is_constant() != b.is_constant()):
            if a.is_constant():  # 0 <= w reads w >= 0
                a, b = b, a
                op = ">=" if op == "<=" else "<="
            bound = self._bound(b, text, span)
            lower, upper = (bound, None) if op == ">=" else (None, bound)
            self.constraints.append(BoxConstraint(a, lower=lower, upper=upper, span=span))
        else:
            raise ConstraintError(
                f"'{text}' is not a structural constraint",
                span,
                f"sparsemodel handles sparsity, rank, eigenvalue and box constraints: {usage}",
            )

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
            return _unquote(val)
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
                for c in self.constraints:
                    if isinstance(c, (NnzConstraint, RankConstraint)):
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


# ============================================================================ entry points


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


__all__ = ["parse", "load", "parse_tree", "describe_expected", "ExprBuilder", "ModelBuilder"]
