"""Scale: time and peak memory of grahtp on NumPy, scipy.sparse and dask data against abess and
scikit-learn; the cost per stored nonzero; the dask overhead; an out-of-core solve (docs/scale.md).

Every run is a fresh subprocess (peak RSS from ``resource.getrusage``, data generated inside it
from a seed), with the BLAS threads of every method pinned to ``--threads`` by threadpoolctl and
a wall-time limit (``--limit``). Three parts:

1. ``sparse``: sparse linear and logistic regression, n = p from 1e4 (``--small``) up to 1e6
   (``--full``), 20 stored entries per row, k = 20: grahtp (scipy.sparse), abess, scikit-learn
   (Lasso / LogisticRegression with l1, liblinear). The log-log slope of grahtp's time against the
   stored nonzeros is fitted (target: about 1, linear cost).
2. ``dense``: a dense design that fits in memory: grahtp on NumPy against grahtp on the same
   matrix as a dask array (threaded scheduler, persisted). Target: dask / numpy <= 3.
3. ``ooc``: a dense design written to disk as Zarr, larger than the memory given to the solving
   process (``SPARSEMODEL_MEMORY_LIMIT``, and with ``--rlimit`` also ``RLIMIT_AS``): grahtp reads
   it in row blocks at each pass. Target: peak RSS below the limit. ``--small``: 1.6 GB under
   0.8 GB; ``--full``: 8 GB under 4 GB. ``baseline_rss_mb`` is the process after its imports and
   the response vector, before the solve.

    python benchmarks/scale.py            # --small: a few minutes on two cores
    python benchmarks/scale.py --full     # n, p up to 1e6 and the 8 GB out-of-core run
    python benchmarks/scale.py --part ooc --ooc-gb 8 --limit-gb 4

Writes benchmarks/out/scale_<part>.csv (a new name if one exists) and prints the tables.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
K = 20
PER_ROW = 20


# ---------------------------------------------------------------------- data (inside the child)


def sparse_data(n: int, p: int, kind: str, seed: int = 0):
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    nnz = n * PER_ROW
    rows = np.repeat(np.arange(n), PER_ROW)
    cols = rng.integers(0, p, nnz)
    X = sp.csr_matrix((rng.standard_normal(nnz), (rows, cols)), shape=(n, p))
    X.sum_duplicates()
    beta = np.zeros(p)
    beta[rng.choice(p, K, replace=False)] = rng.choice([-1.0, 1.0], K) * rng.uniform(1, 2, K)
    z = X @ beta
    if kind == "linear":
        y = z + 0.1 * rng.standard_normal(n)
    else:
        y = np.where(rng.uniform(size=n) < 1 / (1 + np.exp(-z)), 1.0, -1.0)
    return X, y


def dense_data(n: int, p: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[rng.choice(p, K, replace=False)] = rng.uniform(1, 2, K)
    return X, X @ beta + 0.1 * rng.standard_normal(n)


def model(X, y, kind: str):
    import sparsemodel as sm

    n, p = X.shape
    w = sm.Variable(p, name="w")
    D = sm.Data(X, name="X")
    if kind == "linear":
        obj = sm.sum_squares(D @ w - y) / (2 * n)
    else:
        obj = sm.sum(sm.logistic(-(y * (D @ w)))) / n
    return sm.Problem(sm.minimize(obj), [sm.nnz(w) <= K])


def child(spec: dict) -> dict:
    from pinning import pinned

    out: dict = {}
    with pinned(spec["threads"]):
        method, kind = spec["method"], spec["kind"]
        if spec["part"] == "ooc":
            os.environ["SPARSEMODEL_MEMORY_LIMIT"] = str(int(spec["limit_gb"] * 2**30))
            if spec.get("rlimit"):
                lim = int(spec["limit_gb"] * 2**30)
                resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
            import dask.array as da

            import sparsemodel  # noqa: F401  (imports before the baseline)

            X = da.from_zarr(spec["path"])
            y = np.load(spec["y"])
            out["baseline_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            t = time.perf_counter()
            res = model(X, y, "linear").solve(solver="grahtp", scheduler=spec.get("scheduler", "threads"))
            out.update(time_s=time.perf_counter() - t, objective=res.objective, iterations=res.iterations)
            from sparsemodel.progress import data_passes

            out["passes"] = data_passes()
        else:
            if spec["part"] == "sparse":
                X, y = sparse_data(spec["n"], spec["p"], kind)
            else:
                X, y = dense_data(spec["n"], spec["p"])
            out["nnz"] = int(X.nnz) if hasattr(X, "nnz") else int(X.size)
            Xv, sched = X, None
            if method == "grahtp-dask":  # imports and the dask array's graph before the clock starts
                from sparsemodel.objective.chunked import as_dask

                Xv, sched = as_dask(X, max(1, X.shape[0] // (4 * spec["threads"]))), "threads"
            t = time.perf_counter()
            if method.startswith("grahtp"):
                res = model(Xv, y, kind).solve(solver="grahtp", scheduler=sched)
                out.update(objective=res.objective, iterations=res.iterations)
            elif method == "abess":
                import abess

                est = (
                    abess.LinearRegression(support_size=K)
                    if kind == "linear"
                    else abess.LogisticRegression(support_size=K)
                )
                est.fit(X, y if kind == "linear" else (y > 0).astype(float))
            elif method == "sklearn":
                from sklearn.linear_model import Lasso, LogisticRegression

                if kind == "linear":
                    amax = float(np.max(np.abs(X.T @ y))) / X.shape[0]
                    Lasso(alpha=0.05 * amax, fit_intercept=False).fit(X, y)
                else:
                    LogisticRegression(penalty="l1", solver="liblinear", C=0.05, fit_intercept=False).fit(X, y)
            out["time_s"] = time.perf_counter() - t
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


# ---------------------------------------------------------------------- driver


def run(spec: dict, limit: float) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(spec["threads"]), OPENBLAS_NUM_THREADS=str(spec["threads"]))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    try:
        proc = subprocess.run(
            [sys.executable, __file__, "--child", json.dumps(spec)],
            capture_output=True,
            text=True,
            timeout=limit,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return {**spec, "status": f"> {limit:g} s"}
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {**spec, "status": f"failed: {tail[:80]}"}
    return {**spec, "status": "ok", **json.loads(proc.stdout.strip().splitlines()[-1])}


def fresh(path: Path) -> Path:
    i = 1
    out = path
    while out.exists():
        out = path.with_name(f"{path.stem}_{i}{path.suffix}")
        i += 1
    return out


def write(rows: list[dict], name: str) -> Path:
    out = fresh(HERE / "out" / f"scale_{name}.csv")
    out.parent.mkdir(exist_ok=True)
    keys = sorted({k for r in rows for k in r if k != "path"})
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return out


def show(rows: list[dict], cols: list[str]) -> None:
    from tabulate import tabulate

    def fmt(v):
        return f"{v:.4g}" if isinstance(v, float) else v

    print(tabulate([[fmt(r.get(c, "")) for c in cols] for r in rows], headers=cols))


def slope(xs: list[float], ys: list[float]) -> float:
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0]) if len(xs) >= 2 else math.nan


def part_sparse(args) -> None:
    sizes = [10_000, 30_000, 100_000] if not args.full else [10_000, 100_000, 1_000_000]
    rows = []
    for kind in ("linear", "logistic"):
        for n in sizes:
            for method in ("grahtp-sparse", "abess", "sklearn"):
                spec = {"part": "sparse", "kind": kind, "n": n, "p": n, "method": method, "threads": args.threads}
                r = run(spec, args.limit)
                rows.append(r)
                print(
                    f"  {kind:8} n=p={n:<8} {method:14} {r['status']:>8} {r.get('time_s', math.nan):8.3f} s "
                    f"{r.get('peak_rss_mb', math.nan):8.0f} MB",
                    flush=True,
                )
    print(
        "\nsparse linear / logistic regression, n = p, 20 stored entries per row, k = 20, "
        f"BLAS threads = {args.threads}"
    )
    show(rows, ["kind", "n", "p", "method", "status", "nnz", "time_s", "peak_rss_mb", "iterations"])
    for kind in ("linear", "logistic"):
        ok = [r for r in rows if r["kind"] == kind and r["method"] == "grahtp-sparse" and r["status"] == "ok"]
        print(
            f"grahtp {kind}: log-log slope of time vs stored nonzeros = "
            f"{slope([r['nnz'] for r in ok], [r['time_s'] for r in ok]):.2f} over {len(ok)} sizes"
        )
    print(f"wrote {write(rows, 'sparse')}")


def part_dense(args) -> None:
    sizes = [(20_000, 500), (50_000, 1_000)] if not args.full else [(100_000, 1_000), (200_000, 2_000)]
    rows = []
    for n, p in sizes:
        for method in ("grahtp-numpy", "grahtp-dask", "abess", "sklearn"):
            spec = {"part": "dense", "kind": "linear", "n": n, "p": p, "method": method, "threads": args.threads}
            times = [run(spec, args.limit) for _ in range(args.repeat)]
            ok = [t for t in times if t["status"] == "ok"]
            r = dict(times[0])
            if ok:
                r.update(ok[0])
                r["time_s"] = float(np.median([t["time_s"] for t in ok]))
            rows.append(r)
            print(
                f"  n={n:<7} p={p:<5} {method:13} {r['status']:>8} {r.get('time_s', math.nan):8.3f} s "
                f"{r.get('peak_rss_mb', math.nan):8.0f} MB",
                flush=True,
            )
    print(f"\ndense linear regression in memory, k = 20, BLAS threads = {args.threads}, median of {args.repeat}")
    show(rows, ["n", "p", "method", "status", "time_s", "peak_rss_mb", "iterations", "objective"])
    for n, p in sizes:
        t = {r["method"]: r.get("time_s") for r in rows if r["n"] == n}
        if t.get("grahtp-numpy") and t.get("grahtp-dask"):
            ratio = t["grahtp-dask"] / t["grahtp-numpy"]
            print(f"n={n} p={p}: dask / numpy = {ratio:.2f} (target <= 3: {'held' if ratio <= 3 else 'NOT held'})")
    print(f"wrote {write(rows, 'dense')}")


def part_ooc(args) -> None:
    import dask
    import dask.array as da

    gb = args.ooc_gb if args.ooc_gb else (8.0 if args.full else 1.6)
    limit_gb = args.limit_gb if args.limit_gb else gb / 2
    p = 1_000
    n = int(gb * 2**30 / (8 * p))
    tmp = Path(args.tmp or tempfile.mkdtemp(prefix="sm_ooc_"))
    path = tmp / f"X_{n}x{p}.zarr"
    ypath = tmp / f"y_{n}.npy"
    rows_per = 8_192
    if not path.exists():
        print(f"writing a {n} x {p} dense design ({n * p * 8 / 2**30:.2f} GB) to {path} ...", flush=True)
        rng_beta = np.random.default_rng(1)
        beta = np.zeros(p)
        beta[rng_beta.choice(p, K, replace=False)] = rng_beta.uniform(1, 2, K)
        X = da.random.RandomState(0).standard_normal((n, p), chunks=(rows_per, p))
        with dask.config.set(scheduler="threads", num_workers=args.threads):
            X.to_zarr(str(path))
            Xd = da.from_zarr(str(path))
            y = (Xd @ beta).compute() + 0.1 * np.random.default_rng(2).standard_normal(n)
        np.save(ypath, y)
    spec = {
        "part": "ooc",
        "kind": "linear",
        "method": "grahtp-dask-zarr",
        "n": n,
        "p": p,
        "threads": args.threads,
        "path": str(path),
        "y": str(ypath),
        "limit_gb": limit_gb,
        "rlimit": args.rlimit,
        "data_gb": n * p * 8 / 2**30,
    }
    r = run(spec, args.limit * 20)
    held = r.get("peak_rss_mb", math.inf) < limit_gb * 1024
    print(
        f"\nout of core: {spec['data_gb']:.2f} GB dense design on disk (Zarr, {rows_per}-row blocks), "
        f"memory limit {limit_gb:.2f} GB ({'RLIMIT_AS and ' if args.rlimit else ''}SPARSEMODEL_MEMORY_LIMIT)"
    )
    show(
        [r],
        ["n", "p", "data_gb", "limit_gb", "status", "time_s", "baseline_rss_mb", "peak_rss_mb", "iterations", "passes"],
    )
    print(
        f"peak RSS {r.get('peak_rss_mb', math.nan):.0f} MB vs limit {limit_gb * 1024:.0f} MB: "
        f"{'held' if held else 'NOT held'}"
    )
    print(f"wrote {write([r], 'ooc')}  (the design stays in {tmp}; delete it when done)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--full", action="store_true", help="n, p up to 1e6 and 8 GB out of core")
    ap.add_argument("--small", action="store_true", help="the default: a few minutes")
    ap.add_argument("--part", choices=("sparse", "dense", "ooc", "all"), default="all")
    ap.add_argument("--threads", type=int, default=1, help="BLAS / dask threads for every method (default 1)")
    ap.add_argument("--limit", type=float, default=120.0, help="seconds per run before it counts as not finished")
    ap.add_argument("--repeat", type=int, default=3, help="runs per dense point (the median is reported)")
    ap.add_argument("--ooc-gb", type=float, help="size of the out-of-core design (default 0.8, --full 8)")
    ap.add_argument("--limit-gb", type=float, help="memory limit of the out-of-core run (default half the design)")
    ap.add_argument("--rlimit", action="store_true", help="also enforce the limit with RLIMIT_AS")
    ap.add_argument("--tmp", help="folder for the out-of-core design (default a new temporary folder)")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    if args.part in ("sparse", "all"):
        part_sparse(args)
    if args.part in ("dense", "all"):
        part_dense(args)
    if args.part in ("ooc", "all"):
        part_ooc(args)


if __name__ == "__main__":
    main()
