"""The syntax of model files: the Lark LALR(1) parser of ``sparsemodel.lark`` (positions kept),
the post-lexer that lets bracketed text run over several lines and reports unclosed brackets, and
the translation of Lark's exceptions into :class:`~sparsemodel.errors.ParseError` (line, column,
the line with a caret, a readable list of what was expected, did-you-mean for misspelled
keywords). :func:`parse_tree` is its one entry."""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Iterator
from pathlib import Path

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from ..errors import (
    ParseError,
    Source,
    Span,
)
from ..model.atoms import ATOMS
from ..model.constraints import (
    STRUCTURAL_FUNCTIONS,
)
from ..model.datafuncs import DATA_FUNCTIONS
from ..util import did_you_mean

GRAMMAR_FILE = Path(__file__).with_name("sparsemodel.lark")


STATEMENT_KEYWORDS = ("data", "param", "let", "var", "func", "minimize", "maximize", "subject", "solve", "compare")


CONSTRAINT_FUNCTIONS = STRUCTURAL_FUNCTIONS


BUILTIN_FUNCTIONS = sorted(set(ATOMS) | set(DATA_FUNCTIONS) | set(CONSTRAINT_FUNCTIONS))


_OPEN = {"LPAR": "(", "LSQB": "[", "LBRACE": "{"}


_CLOSE = {"RPAR": ")", "RSQB": "]", "RBRACE": "}"}


_CLOSER = {"(": ")", "[": "]", "{": "}"}


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
        "CMP": "<=, >= or ==",
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
        parts.append(
            "a statement (data, param, let, var, func, minimize, maximize, subject to, solve with, compare with)"
        )
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
        "statements start with: data, param, let, var, func, minimize, maximize, subject to, solve with, compare with",
    )


def _misspelled_keyword(tok: Token, expected: set[str]) -> str:
    """``data X : matrix form "X.csv"``: a name where a keyword was expected and close to it."""
    if tok.type != "NAME":
        return ""
    words = []
    for t in _lark().terminals:
        if t.name in expected and t.pattern.type == "str" and str(t.pattern.value).isalpha():
            words.append(str(t.pattern.value))
    return did_you_mean(str(tok).lower(), words, cutoff=0.7)


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
