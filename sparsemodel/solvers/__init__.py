"""Solvers: one module per family, one registry, one Result type."""

import importlib
import pkgutil

from .base import AUTO_ORDER, REGISTRY, Solver, auto_solver, get_solver, register, solvers_for
from .options import Option
from .result import Result

# every module of this package registers its solvers when imported: a new solver is one module
for _mod in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_mod.name}")

# the order `sparsemodel solvers` and `check` list them in: paper 000, 001, 003, then baselines
ORDER = (
    "auto",
    "grahtp",
    "fgrahtp",
    "iht",
    "omp",
    "forward",
    "ompr",
    "els",
    "arht",
    "grasp",
    "foba",
    "lasso",
    "nuclear",
    "glasso",
    "hsg_ht",
    "ahsg_ht",
    "sg_ht",
    "svrg_ht",
)
for _name in sorted(REGISTRY, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n)):
    REGISTRY[_name] = REGISTRY.pop(_name)

__all__ = [
    "REGISTRY",
    "AUTO_ORDER",
    "Option",
    "Result",
    "Solver",
    "auto_solver",
    "get_solver",
    "register",
    "solvers_for",
]
