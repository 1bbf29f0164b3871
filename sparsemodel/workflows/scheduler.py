"""Where the passes over chunked (dask) data run: ``scheduler=`` in Python, ``--scheduler`` on the CLI.

===================  ====================================================================
``None`` (default)   NumPy/scipy data: nothing changes. Dask data: dask's threaded scheduler
                     in this process (no start-up cost; one thread per core)
``"threads"``        the same, explicitly
``"synchronous"``    every task in the calling thread (debugging, exact reproducibility)
``"local"``          an embedded ``distributed.LocalCluster`` in this process (threads, a
                     memory manager, the dashboard), closed at the end of the call; with
                     ``n_jobs``/``--jobs N`` above 1, N one-thread worker processes that run
                     the study's replications
``"tcp://host:8786"`` (or ``host:8786``)  a running dask scheduler (``dask scheduler`` and
                     ``dask worker tcp://host:8786`` on the machines): the row blocks are
                     persisted on its workers, the driver keeps vectors and small matrices
a ``Client``         an existing ``distributed.Client`` (left open)
===================  ====================================================================

The same model file runs unchanged on a laptop and on a cluster; only ``--scheduler`` differs.
With ``n_jobs``/``--jobs N`` above 1 and a cluster (a Client, an address, ``local``), a study's
independent tasks (``compare --splits``'s replications, cross-validation's folds, the inference
layer's replicates) run on the cluster's workers (:mod:`sparsemodel.workflows.runner`).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

from ..errors import ModelError

NAMED = ("threads", "synchronous", "local")
CONNECT_TIMEOUT = "10s"


class SchedulerError(ModelError):
    kind = "scheduler error"


def uses_dask(problem: Any) -> bool:
    """Whether some data of the problem is a dask array."""
    return any(getattr(d, "chunked", False) for d in problem.data.values())


def check_scheduler(spec: Any) -> None:
    """Refuse a scheduler that is neither a name, an address nor a Client (before any work)."""
    if spec is None or not isinstance(spec, str):
        return
    if spec in NAMED or re.match(r"^(tcp|tls|inproc|ws|wss|ucx)://\S+$", spec) or re.match(r"^[\w.\-]+:\d+$", spec):
        return
    raise SchedulerError(
        f"unknown scheduler {spec!r}",
        hint="use threads, synchronous, local, or the address of a dask scheduler such as tcp://host:8786",
    )


@contextlib.contextmanager
def use_scheduler(spec: Any, problem: Any = None, workers: int | None = None) -> Iterator[Any]:
    """Run the body with the scheduler ``spec`` (see the module docstring). With NumPy/scipy data
    and no explicit scheduler nothing is imported or changed. Yields the Client when one is used.
    ``workers`` (a study's ``n_jobs`` above 1) makes ``"local"`` a cluster of that many one-thread
    worker processes, on which the study's replications run (:mod:`sparsemodel.workflows.runner`)."""
    check_scheduler(spec)
    if spec is None and (_ACTIVE or problem is None or not uses_dask(problem)):
        yield None  # NumPy/scipy data, or an enclosing call chose the scheduler already
        return
    _ACTIVE.append(spec)
    try:
        with _scheduler(spec, workers) as client:
            _CLIENTS.append(client)
            try:
                yield client
            finally:
                _CLIENTS.pop()
    finally:
        _ACTIVE.pop()
        if not _ACTIVE:
            from ..objective.chunked import forget_persisted

            forget_persisted()


_ACTIVE: list[Any] = []  # the schedulers of the enclosing use_scheduler calls
_CLIENTS: list[Any] = []  # their clients (None where a scheduler has none)


def active_client() -> Any:
    """The ``distributed.Client`` of the innermost enclosing :func:`use_scheduler`, or None."""
    return next((c for c in reversed(_CLIENTS) if c is not None), None)


@contextlib.contextmanager
def _scheduler(spec: Any, workers: int | None = None) -> Iterator[Any]:
    try:
        import dask
    except ImportError:
        raise SchedulerError(f"--scheduler {spec} needs dask", hint="pip install 'sparsemodel[dask]'") from None
    if spec is None or spec in ("threads", "synchronous"):
        with dask.config.set(scheduler=spec or "threads"):
            yield None
        return
    if not isinstance(spec, str):  # a Client given by the caller: used, not closed
        with dask.config.set(scheduler=spec):
            yield spec
        return
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise SchedulerError(
            f"--scheduler {spec} needs dask.distributed", hint="pip install 'sparsemodel[dask]'"
        ) from None
    cluster = None
    try:
        if spec == "local" and workers is not None and workers > 1:  # a study's tasks: processes
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
        elif spec == "local":
            cluster = LocalCluster(processes=False, dashboard_address=None)
            client = Client(cluster, set_as_default=False)
        else:
            address = spec if "://" in spec else f"tcp://{spec}"
            client = Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        if cluster is not None:
            cluster.close()
        raise SchedulerError(
            f"cannot reach the dask scheduler at {spec}: {exc}",
            hint="start one with `dask scheduler` (and workers with `dask worker ADDRESS`), or use --scheduler local",
        ) from None
    try:
        with client.as_current(), dask.config.set(scheduler=client):
            yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


__all__ = ["NAMED", "SchedulerError", "active_client", "check_scheduler", "use_scheduler", "uses_dask"]
