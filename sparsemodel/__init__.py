"""sparsemodel: a modeling language and solver suite for sparsity-, rank- and spectrum-constrained learning.

import sparsemodel as sm
w = sm.Variable(p, name="w")
prob = sm.Problem(sm.minimize(sm.sum_squares(A @ w - y) / (2 * n)), [sm.nnz(w) <= k])
res = prob.solve(solver="grahtp")
"""

from typing import Any

from .errors import ModelError
from .model.atoms import (
    cox,
    custom_loss,
    exp,
    huber,
    log,
    logdet,
    logistic,
    logsumexp,
    mean,
    ordinal,
    quad_form,
    square,
    sum,
    sum_squares,
    trace,
)
from .model.constraints import STRUCTURAL_FUNCTIONS, box
from .model.datafuncs import center, cols, cov, eye, levels, normalize_columns, onehot, ones, rows, standardize
from .model.expr import Constant, Data, Expr, Parameter, Variable
from .model.objective import Objective, maximize, minimize
from .problem import Problem

# the constraint words (nnz, rank, eig, offdiag, diff, ...): the same table the model language reads
globals().update(STRUCTURAL_FUNCTIONS)

__version__ = "0.1.0"

# loaded on first use, so that `import sparsemodel` costs little more than numpy and scipy.sparse:
# the grammar (lark) only for model files, the solvers (and their numerics) only for a solve
_LAZY = {
    "load": ("grammar", "load"),
    "parse": ("grammar", "parse"),
    "registry": ("solvers", "REGISTRY"),
    "Result": ("solvers", "Result"),
    "experiment": ("workflows.experiment", "experiment"),
    "External": ("workflows.experiment", "External"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(f".{module}", __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'sparsemodel' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    *STRUCTURAL_FUNCTIONS,
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
    "maximize",
    "minimize",
    "box",
    "Result",
    "registry",
    "experiment",
    "External",
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
    "cox",
    "ordinal",
    "custom_loss",
    "levels",
    "cov",
    "rows",
    "center",
    "cols",
    "standardize",
    "normalize_columns",
    "onehot",
    "ones",
    "eye",
]
