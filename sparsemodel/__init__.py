"""sparsemodel: a modeling language and solver suite for sparsity-, rank- and spectrum-constrained learning.

import sparsemodel as sm
w = sm.Variable(p, name="w")
prob = sm.Problem(sm.minimize(sm.sum_squares(A @ w - y) / (2 * n)), [sm.nnz(w) <= k])
res = prob.solve(solver="grahtp")
"""

from .errors import ModelError
from .grammar import load, parse
from .model.atoms import (
    cols,
    cov,
    exp,
    eye,
    huber,
    log,
    logdet,
    logistic,
    logsumexp,
    mean,
    normalize_columns,
    onehot,
    ones,
    quad_form,
    rows,
    square,
    standardize,
    sum,
    sum_squares,
    trace,
)
from .model.constraints import box, eig, nnz, offdiag, rank
from .model.expr import Constant, Data, Expr, Parameter, Variable
from .model.problem import Objective, Problem, minimize
from .solvers import REGISTRY as registry
from .solvers import Result

__version__ = "0.1.0"

__all__ = [
    "ModelError",
    "load",
    "parse",
    "Variable",
    "Data",
    "Parameter",
    "Constant",
    "Expr",
    "Problem",
    "Objective",
    "minimize",
    "nnz",
    "box",
    "rank",
    "eig",
    "offdiag",
    "Result",
    "registry",
    "sum",
    "mean",
    "sum_squares",
    "square",
    "logistic",
    "logsumexp",
    "exp",
    "log",
    "logdet",
    "trace",
    "quad_form",
    "huber",
    "cov",
    "rows",
    "cols",
    "standardize",
    "normalize_columns",
    "onehot",
    "ones",
    "eye",
]
