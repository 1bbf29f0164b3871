"""The small pieces of a parse tree that the builders share (expressions, statements, directives, a
func's body): the span of a node, quoted words and numbers, the words an argument list may carry
(a quoted text, the axis word ``rows`` / ``cols``), what a name refers to, and a callable's
signature as the language sees it."""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import dataclass
from typing import Any

from lark import Token, Tree

from ..errors import Source, Span
from ..model.atoms import Atom
from ..model.constraints import STRUCTURAL_TYPES
from ..model.expr import Data, Expr, Parameter, Variable
from ..model.userfunc import FuncDef


def span_of(source: Source, node: Any) -> Span | None:
    """Where a tree or a token stands in the source (None for an empty tree)."""
    meta = node.meta if isinstance(node, Tree) else node
    if isinstance(node, Tree) and getattr(meta, "empty", True):
        return None
    if getattr(meta, "line", None) is None:
        return None
    return Span(source, meta.line, meta.column, meta.end_line, meta.end_column)


def unquote(tok: Token) -> str:
    """The text of a quoted string token (JSON escapes read)."""
    try:
        return json.loads(str(tok))
    except ValueError:
        return str(tok)[1:-1]


def number(tok: Token, negative: bool = False) -> int | float:
    """A number token as an int when it is written as one, else a float."""
    text = str(tok)
    v: int | float = int(text) if re.fullmatch(r"\d+", text) else float(text)
    return -v if negative else v


@dataclass
class Text:
    """A quoted word given to a keyword: ``cox(z, time, event, ties = "breslow")``."""

    text: str
    span: Span | None


@dataclass
class AxisWord:
    """The bare word ``rows`` or ``cols``: in ``nnz(W, groups = rows)`` the row (column) groups of
    a matrix; anywhere else the data function that must be called, ``rows(X)``."""

    word: str
    span: Span | None


def what(obj: Any) -> str:
    """What a name refers to, in the words of an error message."""
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


def structural_name(obj: Any) -> str | None:
    """The written form of a structural expression (``nnz(w)``, ``rank(W)``, ...), None for anything else."""
    return str(obj) if isinstance(obj, STRUCTURAL_TYPES) else None


def callable_signature(fn: Any) -> inspect.Signature:
    """The parameters a call in a model file may name (an atom without its own constructor takes
    one argument; ``span`` is the parser's, not the user's)."""
    if isinstance(fn, type) and issubclass(fn, Atom) and fn.__init__ is Atom.__init__:
        return inspect.Signature([inspect.Parameter("x", inspect.Parameter.POSITIONAL_OR_KEYWORD)])
    sig = inspect.signature(fn)
    return sig.replace(parameters=[p for n, p in sig.parameters.items() if n != "span"])
