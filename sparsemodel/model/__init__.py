"""The model: expression tree, atoms, constraints, problems (the Python builder)."""

from .atoms import ATOMS
from .constraints import eig, nnz, offdiag, rank
from .datafuncs import DATA_FUNCTIONS
from .expr import Constant, Data, Expr, Parameter, Variable
from .objective import Objective, maximize, minimize
from .problem import Model

__all__ = [
    "ATOMS",
    "DATA_FUNCTIONS",
    "Constant",
    "Data",
    "Expr",
    "Parameter",
    "Variable",
    "Objective",
    "Model",
    "maximize",
    "minimize",
    "nnz",
    "rank",
    "eig",
    "offdiag",
]
