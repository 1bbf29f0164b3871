"""The one loop over independent tasks of a study: the replications of
:func:`~sparsemodel.workflows.experiment.experiment` (``compare --splits``), the points of
:func:`~sparsemodel.workflows.compare.compare`, the folds of cross-validation, the inference
layer's replicates (knockoff draws, stability's half-samples).

:func:`run_tasks` maps a function over the tasks

* serially in this process (``n_jobs`` 1 or None, scikit-learn's convention), or
* on ``n_jobs`` joblib workers (loky processes; ``-1``: one per core), or
* on the workers of a ``dask.distributed`` cluster, when one is active (``scheduler=`` a
  ``Client``, an address or ``"local"``; :mod:`sparsemodel.workflows.scheduler`) and
  ``n_jobs`` asks for more than one worker: at most ``n_jobs`` tasks are in flight (``-1``: all).

and hands each task's result to ``done(index, result)`` **in task order** as soon as every earlier
task has finished, so that rows (and a CSV written row by row) come out in the serial order
whatever order the workers finish in. The progress bar counts finished runs: ``count(result)``
runs per task when it finishes (in this process a task may also call :func:`tick` per run, so a
serial bar moves run by run; the runs of a map inside a serial task count in the enclosing map's
bar as they finish). A task draws its randomness from its own arguments (a seed derived
from its index), never from the order of execution, so the results are the serial run's, seed for
seed.

Ctrl-C (``KeyboardInterrupt``) stops the map: the tasks already finished are handed to ``done``
(in task order, skipping the unfinished), the report is marked ``interrupted`` and attached to
the exception (``exc.report`` and ``exc.<name>``), which propagates; the caller keeps what
finished. Unfinished tasks on workers are cancelled.

Workers do not oversubscribe the cores: with more than one worker each task runs under a limit of
one BLAS/OpenMP thread (threadpoolctl). What is sent to a worker is the task's own arguments (the
model and a replication's seed or row indices, pickled; functions by value through loky's
cloudpickle), never a lowered problem: a worker lowers its own (``benchmarks/jobs.py`` measures
both).
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ModelError


class JobsError(ModelError):
    kind = "jobs error"


def check_jobs(n_jobs: Any, error: type[ModelError] = JobsError, name: str = "n_jobs") -> int:
    """``n_jobs``: None or 1 (serial, the default), a number of workers, or -1 (one per core), as
    scikit-learn's; anything else is refused with ``error``."""
    if n_jobs is None:
        return 1
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral) or n_jobs == 0 or n_jobs < -1:
        raise error(
            f"{name}={n_jobs!r} is not a number of workers",
            hint="give 1 (serial), a number of workers, or -1 (all cores)",
        )
    return int(n_jobs)


def workers(n_jobs: int) -> int:
    """The number of workers ``n_jobs`` means on this machine (-1: every core)."""
    return (os.cpu_count() or 1) if n_jobs == -1 else n_jobs


_TICK: list[Any] = []  # the serial map's progress callback (in this process only)


def tick(n: int = 1) -> None:
    """A task's runs finished (moves a serial map's bar run by run; nothing on a worker)."""
    if _TICK:
        _TICK[-1](n)


def _call(fn: Callable[[Any], Any], index: int, task: Any, pin: bool) -> tuple[int, Any]:
    """One task on a worker: one BLAS thread when several workers share the cores."""
    if not pin:
        return index, fn(task)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        return index, fn(task)


def run_tasks(
    fn: Callable[[Any], Any],
    tasks: Sequence[Any],
    n_jobs: Any = 1,
    done: Callable[[int, Any], None] | None = None,
    count: Callable[[Any], int] | None = None,
    bar: Any = None,
    report: Any = None,
    name: str = "report",
    close: Callable[[], None] | None = None,
) -> list[Any]:
    """``[fn(t) for t in tasks]`` serially or on workers (see the module docstring); returns the
    results in task order. ``done(i, result)`` is called in task order as results finish,
    ``count(result)`` runs advance ``bar``; on Ctrl-C the finished results are handed over,
    ``report.interrupted`` is set and the report attached to the exception as ``name``.
    ``close()`` (and the bar's close) run at the end in every case."""
    n_jobs = check_jobs(n_jobs)
    tasks = list(tasks)
    results: dict[int, Any] = {}
    state = {"next": 0}

    def commit(upto_gaps: bool = False) -> None:
        while state["next"] in results or (upto_gaps and state["next"] < len(tasks)):
            i = state["next"]
            state["next"] += 1
            if i in results and done is not None:
                done(i, results[i])

    ticked = [0]
    outer = _TICK[-1] if _TICK else None  # an enclosing serial map counts these runs too

    def move(n: int) -> None:
        if n and bar is not None:
            bar.update(n)
        if n and outer is not None:
            outer(n)

    def advance(n: int) -> None:  # a task in this process says it finished n runs
        ticked[0] += n
        move(n)

    def finished(i: int, out: Any) -> None:
        results[i] = out
        if count is not None:
            move(max(0, count(out) - ticked[0]))
        ticked[0] = 0
        commit()

    try:
        if n_jobs == 1 or len(tasks) <= 1:
            _TICK.append(advance)
            try:
                for i, t in enumerate(tasks):
                    finished(i, fn(t))
            finally:
                _TICK.pop()
        else:
            from .scheduler import active_client

            client = active_client()
            source = _on_dask(client, fn, tasks, n_jobs) if client is not None else _on_joblib(fn, tasks, n_jobs)
            try:
                for i, out in source:
                    finished(i, out)
            finally:
                source.close()  # a stop in the middle cancels what has not run
    except KeyboardInterrupt as exc:
        commit(upto_gaps=True)  # what finished, in task order
        if report is not None:
            report.interrupted = True
            exc.report = report  # type: ignore[attr-defined]
            setattr(exc, name, report)
        raise
    finally:
        if bar is not None:
            bar.close()
        if close is not None:
            close()
    return [results[i] for i in range(len(tasks))]


def _on_joblib(fn: Callable[[Any], Any], tasks: list[Any], n_jobs: int) -> Any:
    """(index, result) pairs as joblib's workers finish them."""
    from joblib import Parallel, delayed

    par = Parallel(n_jobs=n_jobs, return_as="generator_unordered")
    return par(delayed(_call)(fn, i, t, True) for i, t in enumerate(tasks))


def _on_dask(client: Any, fn: Callable[[Any], Any], tasks: list[Any], n_jobs: int) -> Any:
    """(index, result) pairs as the cluster's workers finish them, at most ``n_jobs`` in flight
    (all with -1)."""
    from distributed import as_completed

    limit = len(tasks) if n_jobs == -1 else n_jobs
    pending = iter(enumerate(tasks))
    futures = []

    def submit() -> Any:
        nxt = next(pending, None)
        if nxt is None:
            return None
        f = client.submit(_call, fn, nxt[0], nxt[1], True, pure=False)
        futures.append(f)
        return f

    first = [f for f in (submit() for _ in range(min(limit, len(tasks)))) if f is not None]
    queue = as_completed(first)
    try:
        for fut in queue:
            yield fut.result()
            more = submit()
            if more is not None:
                queue.add(more)
    finally:
        unfinished = [f for f in futures if not f.done()]
        if unfinished:
            client.cancel(unfinished)


class Resident:
    """Servers that stay on workers for the length of a computation and answer requests in turn:
    ``server = make(group)`` is built once on a worker (its state -- a fold's path and its
    lowering -- never leaves it), then each :meth:`ask` sends a request to every server and
    :meth:`answers` gathers ``server(request)`` from each, in server order. What cross-validation's
    folds need: their paths advance in lockstep with the all-data path (the early stop reads their
    mean), and a path's point depends on everything the path computed before it, so each fold stays
    in one process from its first k to its last, as it does serially.

    On joblib's workers the requests and answers go through ``multiprocessing`` manager queues; on
    a dask cluster (an active client) through ``distributed.Queue``. Each server runs under a
    limit of one BLAS thread. Use as a context manager (the servers stop at its end)."""

    def __init__(self, make: Callable[[Any], Any], groups: list[Any], n_jobs: int):
        from .scheduler import active_client

        self.client = active_client()
        self.n = len(groups)
        self.manager: Any = None
        if self.client is None:
            import multiprocessing

            from joblib import Parallel, delayed

            self.manager = multiprocessing.Manager()
            self.inbox = [self.manager.Queue() for _ in groups]
            self.outbox = self.manager.Queue()
            par = Parallel(n_jobs=len(groups), return_as="generator_unordered")
            self.running: Any = par(
                delayed(_serve)(make, g, self.inbox[i], self.outbox, i) for i, g in enumerate(groups)
            )
        else:
            from distributed import Queue

            self.inbox = [Queue(client=self.client) for _ in groups]
            self.outbox = Queue(client=self.client)
            self.running = [
                self.client.submit(_serve, make, g, self.inbox[i], self.outbox, i, pure=False)
                for i, g in enumerate(groups)
            ]

    def ask(self, request: Any) -> None:
        for q in self.inbox:
            q.put(request)

    def answers(self) -> list[Any]:
        got: dict[int, Any] = {}
        while len(got) < self.n:
            i, ok, out = self.outbox.get()
            if not ok:
                raise out
            got[i] = out
        return [got[i] for i in range(self.n)]

    def __enter__(self) -> Resident:
        return self

    def __exit__(self, *exc: Any) -> None:
        """Stop the servers: after their last answer, or at once when the caller is unwinding (an
        error, Ctrl-C): the workers are then cancelled, not waited for."""
        try:
            if exc and exc[0] is not None:
                if self.client is None:
                    self.running.close()  # joblib aborts the tasks still running
                else:
                    self.client.cancel(self.running)
                return
            for q in self.inbox:
                q.put(None)
            if self.client is None:
                for _ in self.running:  # the servers' ends
                    pass
            else:
                self.client.gather(self.running)
        finally:
            if self.manager is not None:
                self.manager.shutdown()


def _serve(make: Callable[[Any], Any], group: Any, inbox: Any, outbox: Any, index: int) -> None:
    """A resident server's loop on a worker (one BLAS thread): build, then answer until None."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        try:
            server = make(group)
        except Exception as exc:  # said to the caller at its next answer
            outbox.put((index, False, exc))
            server = None
        while True:
            request = inbox.get()
            if request is None:
                return
            if server is None:
                continue
            try:
                outbox.put((index, True, server(request)))
            except Exception as exc:
                outbox.put((index, False, exc))


__all__ = ["JobsError", "Resident", "check_jobs", "run_tasks", "tick", "workers"]
