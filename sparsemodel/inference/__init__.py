"""Inference on the selection: which of the variables are real, with an error guarantee.

The knockoff filter's pieces: the model on [X, X~] (:mod:`.augment`), second-order knockoff
constructions (:mod:`.gaussian`) and the filter's arithmetic (:mod:`.filter`). Built on the l0
path (:mod:`sparsemodel.workflows.path`) and the solvers; never on a solver's internals."""

from .base import InferenceError

__all__ = ["InferenceError"]
