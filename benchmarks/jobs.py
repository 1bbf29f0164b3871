"""Every study on every core: the README's Caravan study (20 stratified splits, k = 2, 4, ..., 20,
auto, omp and lasso: `sparsemodel compare examples/caravan_logistic.sm --solvers auto,omp,lasso
--splits 20`) serially, on ``n_jobs`` joblib workers and on a local ``dask.distributed`` cluster of
as many one-thread worker processes; the wall-clock time of each, its ratio to the serial time
(the target on 2 cores: at most 0.6), and whether the rows are the serial ones cell for cell
(wall-clock times aside). The machine's load (``os.getloadavg``) is printed beside each figure: on
a shared machine a ratio means little without it. This machine's kernel gives CPU shares per
session (``sched_autogroup``): when other sessions keep the cores busy, a session's workers share
the one share its serial run had, and only the CPU seconds of each process (printed too: the
busiest worker's is the wall-clock time on otherwise idle cores) show what the workers save.

Also measured: what a worker is sent. A replication's task carries the model (its data) and the
split's row indices, and the worker lowers its own problem; the alternative, a lowered problem
sent through cloudpickle, is timed for comparison (it holds closures: the standard pickle refuses
it).

    python benchmarks/jobs.py                # the README's study, 2 workers
    python benchmarks/jobs.py --splits 4     # a quicker look
"""

from __future__ import annotations

import argparse
import os
import pickle
import time
from pathlib import Path

import numpy as np

import sparsemodel as sm
from sparsemodel.workflows.experiment import experiment

HERE = Path(__file__).resolve().parents[1]
TIMES = ("time_s", "lower_s", "time_total")


def cpu() -> dict[int, float]:
    """CPU seconds (user + system) of this process and of each of its child processes (the
    workers), by process id (psutil; empty without it)."""
    try:
        import psutil
    except ImportError:
        return {}
    me = psutil.Process()
    out = {}
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
            out[p.pid] = t.user + t.system
        except psutil.Error:
            pass
    return out


def cpu_text(before: dict[int, float], after: dict[int, float]) -> str:
    """The CPU seconds each process spent between two readings: on a shared machine the work done,
    which the wall-clock time is not (this machine's scheduler gives one share per session)."""
    me = os.getpid()
    used = {pid: t - before.get(pid, 0.0) for pid, t in after.items()}
    workers = sorted((t for pid, t in used.items() if pid != me and t > 0.5), reverse=True)
    text = f"CPU: this process {used.get(me, 0.0):.1f} s"
    if workers:
        text += f", workers {' + '.join(f'{t:.1f}' for t in workers)} s (busiest {workers[0]:.1f} s)"
    return text


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f} (1 min) {five:.2f} (5 min)"


def cells(study) -> list[dict]:
    return [{c: v for c, v in r.items() if c not in TIMES} for r in study.rows]


def equal(a: list[dict], b: list[dict]) -> bool:
    def eq(x, y):
        return x == y or (isinstance(x, float) and isinstance(y, float) and np.isnan(x) and np.isnan(y))

    return len(a) == len(b) and all(
        ra.keys() == rb.keys() and all(eq(ra[c], rb[c]) for c in ra) for ra, rb in zip(a, b)
    )


def sizes(problem) -> None:
    import cloudpickle

    from sparsemodel.lowering.lowered import LoweredProblem

    t0 = time.perf_counter()
    blob = cloudpickle.dumps(problem)  # as loky sends it (a model file's rebuild_with is a closure)
    t1 = time.perf_counter()
    pickle.loads(blob)
    t2 = time.perf_counter()
    print(
        f"the model through cloudpickle: {len(blob) / 1e6:.1f} MB, {1e3 * (t1 - t0):.0f} ms to pickle, {1e3 * (t2 - t1):.0f} ms to load"
    )
    t0 = time.perf_counter()
    LoweredProblem(problem)
    t_lower = time.perf_counter() - t0
    lp = LoweredProblem(problem)
    lp.restricted_minimize(lp.set.empty())
    try:
        t0 = time.perf_counter()
        blob = cloudpickle.dumps(lp)
        t1 = time.perf_counter()
        cloudpickle.loads(blob)
        t2 = time.perf_counter()
        print(
            f"a lowered problem through cloudpickle: {len(blob) / 1e6:.1f} MB, {1e3 * (t1 - t0):.0f} ms to pickle, "
            f"{1e3 * (t2 - t1):.0f} ms to load; lowering it on the worker instead: {1e3 * t_lower:.0f} ms"
        )
    except Exception as exc:  # what the closures of a lowering do to cloudpickle
        print(f"a lowered problem through cloudpickle: refused ({type(exc).__name__}: {str(exc)[:100]})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--no-dask", action="store_true")
    args = ap.parse_args()
    problem = sm.load(HERE / "examples" / "caravan_logistic.sm")
    kw = dict(k=list(range(2, 21, 2)), splits=args.splits, seed=0, progress=False)
    solvers = ["auto", "omp", "lasso"]
    print(f"Caravan: {args.splits} stratified splits, k = 2..20 by 2, {', '.join(solvers)}; {os.cpu_count()} cores")
    sizes(problem)

    t0 = time.perf_counter()  # the workers' start: their processes, imports (cvxpy for lasso), first solves
    experiment(problem, solvers, k=[2], splits=args.jobs, n_jobs=args.jobs, progress=False)
    print(f"starting {args.jobs} joblib workers (a study of one k): {time.perf_counter() - t0:.1f} s, then kept")
    before, c0 = load(), cpu()
    t0 = time.perf_counter()
    serial = experiment(problem, solvers, **kw)
    t_serial = time.perf_counter() - t0
    print(f"serial          {t_serial:7.1f} s   {cpu_text(c0, cpu())}   ({before}; after: {load()})")

    before, c0 = load(), cpu()
    t0 = time.perf_counter()
    par = experiment(problem, solvers, n_jobs=args.jobs, **kw)
    t_par = time.perf_counter() - t0
    print(
        f"n_jobs={args.jobs}        {t_par:7.1f} s   {t_par / t_serial:.2f} x serial, rows equal: "
        f"{equal(cells(serial), cells(par))}   {cpu_text(c0, cpu())}   ({before}; after: {load()})"
    )
    if args.no_dask:
        return
    from distributed import Client, LocalCluster

    t0 = time.perf_counter()
    with LocalCluster(n_workers=args.jobs, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            experiment(problem, solvers, k=[2], splits=args.jobs, n_jobs=args.jobs, scheduler=client, progress=False)
            t_start = time.perf_counter() - t0
            before, c0 = load(), cpu()
            t0 = time.perf_counter()
            dk = experiment(problem, solvers, n_jobs=args.jobs, scheduler=client, **kw)
            t_dask = time.perf_counter() - t0
            used = cpu_text(c0, cpu())
    print(
        f"dask LocalCluster({args.jobs} workers) {t_dask:7.1f} s   {t_dask / t_serial:.2f} x serial, rows equal: "
        f"{equal(cells(serial), cells(dk))}; cluster start {t_start:.1f} s   {used}   ({before}; after: {load()})"
    )


if __name__ == "__main__":
    main()
