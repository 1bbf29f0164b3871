"""Reading the data a model binds (see :mod:`.specs` for the data specs and formats): the specs
and the loading (:mod:`.specs`), the text formats (:mod:`.text`), data larger than memory
(:mod:`.chunked`) and the checks every value passes (:mod:`.validation`)."""

from .chunked import read_chunked
from .common import FORMATS, KINDS, DataSpec
from .specs import load_spec, parse_spec, read_data
from .text import read_csv, read_frame, read_libsvm, read_text_file
from .validation import check_labels, validate

__all__ = [
    "KINDS",
    "FORMATS",
    "DataSpec",
    "parse_spec",
    "read_data",
    "load_spec",
    "read_csv",
    "read_frame",
    "read_libsvm",
    "read_text_file",
    "read_chunked",
    "validate",
    "check_labels",
]
