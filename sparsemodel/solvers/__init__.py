"""Solvers: one module per family, one registry, one Result type."""

from . import (
    arht,  # noqa: F401  (registers arht)
    auto,  # noqa: F401  (registers auto, the default pipeline)
    foba,  # noqa: F401  (registers foba)
    glasso,  # noqa: F401  (registers glasso)
    grahtp,  # noqa: F401  (registers grahtp, fgrahtp)
    grasp,  # noqa: F401  (registers grasp)
    greedy,  # noqa: F401  (registers omp, ompr, els, forward)
    iht,  # noqa: F401  (registers iht)
    lasso,  # noqa: F401  (registers lasso)
    nuclear,  # noqa: F401  (registers nuclear)
    stochastic,  # noqa: F401  (registers hsg_ht, ahsg_ht, sg_ht, svrg_ht)
)
from .base import AUTO_ORDER, REGISTRY, Option, Result, Solver, auto_solver, get_solver, register, solvers_for

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
