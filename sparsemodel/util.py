"""Small helpers shared across layers."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def jsonable(v: Any) -> Any:
    """A JSON-safe copy: containers recursively, NumPy scalars and arrays to Python values,
    non-finite floats to strings ("inf", "nan"), anything else unknown to its str()."""
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return jsonable(v.tolist())
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return f if math.isfinite(f) else str(f)
    if v is None or isinstance(v, (int, str)):
        return v
    return str(v)
