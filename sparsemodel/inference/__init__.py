"""Inference on the selection: which of the variables are real, with an error guarantee.

* :func:`knockoffs` -- the knockoff filter (false discovery rate control) with l0 statistics, for
  every model the language writes (:mod:`.knockoffs`, :mod:`.augment`, :mod:`.gaussian`, :mod:`.filter`);
* :func:`stability` -- stability selection with complementary pairs (a bound on the expected number
  of false selections; :mod:`.stability`).

Built on the l0 path (:mod:`sparsemodel.workflows.path`) and the solvers; never on a solver's
internals. docs/inference.md explains both."""

from .base import InferenceError
from .knockoffs import KnockoffResult, knockoffs
from .stability import StabilityResult, stability

__all__ = ["InferenceError", "KnockoffResult", "StabilityResult", "knockoffs", "stability"]
