"""The text front end: ``load(path)`` and ``parse(text)`` build a Problem from the model language."""

from .parser import load, parse
from .syntax import parse_tree

__all__ = ["load", "parse", "parse_tree"]
