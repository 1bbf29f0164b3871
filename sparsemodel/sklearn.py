"""scikit-learn estimators: the public path of :mod:`sparsemodel.estimators` (docs/estimators.md).

Each estimator writes its model with the Python builder (``sm.Variable``, ``sm.Data``, the atoms,
``sm.nnz``, ``sm.Problem``) and solves it with ``Problem.solve``, or chooses k with
``Problem.select`` (an information criterion, EBIC by default, or ``k="cv"``): the same code path
as a model file, no second implementation. scikit-learn is an optional extra
(``pip install sparsemodel[sklearn]``).
"""

from __future__ import annotations

from .estimators import *  # noqa: F403
from .estimators import __all__  # noqa: F401
