"""Errors that carry where they happened and what was expected.

Every error a user can cause is a :class:`ModelError` (or a subclass). It carries an optional
:class:`Span` into the model source; :meth:`ModelError.render` produces the one-paragraph message
the CLI prints: ``file:line:col: what went wrong``, the offending line with a caret under the
offending text, and a hint saying what was expected.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    """The text of a model file (or of a string passed to :func:`sparsemodel.parse`)."""

    name: str
    text: str

    def line(self, lineno: int) -> str:
        lines = self.text.splitlines()
        return lines[lineno - 1] if 1 <= lineno <= len(lines) else ""


@dataclass(frozen=True)
class Span:
    """A region of a model source; lines and columns are 1-based, ``end_column`` exclusive."""

    source: Source
    line: int
    column: int
    end_line: int
    end_column: int

    @property
    def text(self) -> str:
        if self.line == self.end_line:
            return self.source.line(self.line)[self.column - 1 : self.end_column - 1]
        return self.source.line(self.line)[self.column - 1 :]

    def location(self) -> str:
        return f"{self.source.name}:{self.line}:{self.column}"

    def excerpt(self) -> str:
        """The offending line with carets under the span (first line only for multi-line spans)."""
        text = self.source.line(self.line)
        end = self.end_column if self.end_line == self.line else len(text) + 1
        width = max(1, end - self.column)
        gutter = f"{self.line:>4} | "
        return f"{gutter}{text}\n{' ' * len(gutter)}{' ' * (self.column - 1)}{'^' * width}"


class ModelError(Exception):
    """A problem with the user's model, data or options (never a bug in sparsemodel).

    ``message`` says what is wrong, ``span`` where, ``hint`` what was expected or what to try.
    """

    kind = "error"

    def __init__(self, message: str, span: Span | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.span = span
        self.hint = hint

    def render(self) -> str:
        head = f"{self.span.location()}: {self.kind}: {self.message}" if self.span else f"{self.kind}: {self.message}"
        parts = [head]
        if self.span is not None:
            parts.append(self.span.excerpt())
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)

    def __str__(self) -> str:
        return self.render()


class ParseError(ModelError):
    kind = "syntax error"


class NameResolutionError(ModelError):
    kind = "unknown name"


class ShapeError(ModelError):
    kind = "shape error"


class ConvexityError(ModelError):
    kind = "convexity error"


class DataError(ModelError):
    kind = "data error"


class ConstraintError(ModelError):
    kind = "constraint error"


class SolverError(ModelError):
    """Unknown solver, unknown option, or a solver asked for something it cannot do."""

    kind = "solver error"


class NoBoundError(SolverError):
    """No finite lower bound exists for this model (docs/certify.md): the words say why (no ridge and no
    box on the constrained coordinates, a loss without a conjugate, a constraint the perspective
    relaxation does not cover)."""

    kind = "no lower bound"


class OutputError(ModelError):
    """A report or result file that must not or cannot be written."""

    kind = "output error"


class UnboundedError(ModelError):
    """The objective is unbounded below on the feasible set (no minimizer exists)."""

    kind = "unbounded objective"


class EstimatorError(ModelError, ValueError):
    """A model error raised by a scikit-learn estimator's ``fit`` (:mod:`sparsemodel.sklearn`):
    still a ``ModelError`` (its kind, message, location and hint), and a ``ValueError`` as
    scikit-learn expects of a bad parameter or bad data."""

    @classmethod
    def of(cls, exc: ModelError) -> EstimatorError:
        out = cls(exc.message, exc.span, exc.hint)
        out.kind = exc.kind
        return out


class DataWarning(UserWarning):
    """Something about the data worth knowing that does not stop the model: a ``map`` key that
    matches no cell, a clause of the model's data line that a rebound file (``--data``) does not
    take. The CLI prints it as one ``warning:`` line."""
