"""Test-session setup: one BLAS / OpenMP thread.

The tests solve small problems (matrices of tens to hundreds of rows), where a second BLAS thread
buys nothing and, on a machine whose cores are busy with other work, costs a great deal: OpenBLAS's
idle threads spin while they wait, and a 135 x 93 product measured 29 ms with two threads against
0.13 ms with one on this project's loaded 2-core machine (the default run took 5.5 minutes instead
of under two). Pinning the pools to one thread makes the run's time the time of its work. Set
SPARSEMODEL_TEST_THREADS to another count (or "default") to run with other limits.
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _one_blas_thread():
    want = os.environ.get("SPARSEMODEL_TEST_THREADS", "1")
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn (the test extra)
        yield
        return
    if want == "default":
        yield
        return
    import numpy  # noqa: F401 - load the BLAS pool before limiting it
    import scipy.linalg  # noqa: F401

    with threadpool_limits(limits=int(want)):
        yield
