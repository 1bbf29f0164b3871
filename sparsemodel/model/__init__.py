"""The model: expression tree, atoms, constraints, problems (the Python builder)."""

# arith, atoms and constraints put what Expr's operators build into expr.OPERATORS when imported
from . import arith  # noqa: F401
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
