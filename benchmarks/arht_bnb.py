"""ARHT and ``bnb`` on Caravan, one core: time per k, nodes per second, and abess at the same k.

Two models on the bundled Caravan data (5822 x 85), both logistic with a free intercept on
standardized columns:

* **ARHT** (paper 003, Algorithms 5-6, the practical setting of Section 6.3.2) on the README's
  model (``examples/caravan_logistic.sm``: mean logistic loss + 1e-5/2 ||w||^2), k = 2..30 (the
  target: at most 1 s per k). With ``--arht-compare key=value,...`` a second configuration runs in
  the same process at every k and both objectives are printed (the default configuration is the
  paper's practical one; a deviation must not give a worse objective);
* **bnb** (branch and bound on the perspective relaxation) on ``benchmarks/certify.py``'s model
  (ridge lambda2 = 1e-3, which gives the relaxation a finite bound), k in ``--bnb-k``, each with a
  time limit of ``--bnb-time`` seconds: nodes, nodes per second (wall and CPU), the status and the
  proven optimum. The modes of ``--bnb-modes`` run in the same process, so the before/after
  comparison shares the machine's load: ``default`` (bnb's defaults: one Newton step of x(z) per
  Frank-Wolfe step, ``inner="step"``, and a node's steps stopped once its decision is known,
  ``node_stop="decided"``), ``original`` (``inner="exact", node_stop="iters"``: x(z) minimized at
  every step and node_iters steps per node, the code before both changes) and ``steps``
  (``inner="step", node_stop="iters"``: the Newton steps alone). The ratio printed is the first
  mode's nodes per CPU second over the last's.

abess (``LogisticRegression(support_size=[k])``, the same ridge as ``alpha``) runs at the same k
in the same process for reference. Everyone gets one BLAS thread (threadpoolctl). The machine's
load (``os.getloadavg``) is printed beside each figure: on a shared machine compare the rows of
one run, and read the CPU seconds (``time.process_time``) beside the wall time.

    python benchmarks/arht_bnb.py                               # ARHT k = 2..30, bnb k = 2..4 (60 s)
    python benchmarks/arht_bnb.py --part bnb --bnb-k 2:8 --bnb-time 120
    python benchmarks/arht_bnb.py --part bnb --bnb-k 2:4 --bnb-modes default,steps,original
    python benchmarks/arht_bnb.py --part arht --arht-compare reuse_runs=false --kmax 12
    python benchmarks/arht_bnb.py --part arht --arht-compare restricted=newton,screen_tests=false
                                  # against the general Newton pipeline with every test solved to tol
    python benchmarks/arht_bnb.py --part arht --arht-compare group_tests=false
                                  # line 12 solved at each support, Algorithm 5's order
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from threadpoolctl import threadpool_limits

import sparsemodel as sm
from sparsemodel.datasets import caravan
from sparsemodel.solvers.base import get_solver

ARHT_LAM = 1e-5  # the README's model
BNB_MODES = {
    "default": {},
    "steps": {"inner": "step", "node_stop": "iters"},
    "original": {"inner": "exact", "node_stop": "iters"},
}
BNB_LAM = 1e-3  # benchmarks/certify.py's model


def load() -> str:
    return "load {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def data() -> tuple[np.ndarray, np.ndarray]:
    X, v, _ = caravan()
    return (X - X.mean(0)) / X.std(0), v


def arht_problem(Z: np.ndarray, v: np.ndarray) -> sm.Problem:
    w = sm.Variable(Z.shape[1] + 1, name="w")
    loss = sm.mean(sm.logistic(-v * (Z @ w[1:] + w[0]))) + ARHT_LAM / 2 * sm.sum_squares(w[1:])
    return sm.Problem(sm.minimize(loss), [sm.nnz(w[1:]) <= 2])


def bnb_problem(Z: np.ndarray, v: np.ndarray) -> sm.Problem:
    w = sm.Variable(Z.shape[1], name="w")
    b = sm.Variable(1, name="b")
    loss = sm.mean(sm.logistic(-v * (Z @ w + b))) + BNB_LAM / 2 * sm.sum_squares(w)
    return sm.Problem(sm.minimize(loss), [sm.nnz(w) <= 2])


def abess_time(Z: np.ndarray, v: np.ndarray, k: int, lam: float) -> tuple[float, float] | None:
    """abess's fit time at k (median of 3) and its objective under our model (its coefficients)."""
    try:
        import abess
    except ImportError:
        return None
    n = Z.shape[0]
    y01 = (v > 0).astype(float)
    ts = []
    for _ in range(3):
        t0 = time.perf_counter()
        m = abess.linear.LogisticRegression(support_size=[k], alpha=n * lam / 2).fit(Z, y01)
        ts.append(time.perf_counter() - t0)
    z = Z @ np.asarray(m.coef_, dtype=float) + float(m.intercept_)
    f = float(np.mean(np.logaddexp(0.0, -v * z)) + lam / 2 * np.sum(np.asarray(m.coef_) ** 2))
    return float(np.median(ts)), f


def parse_k(text: str) -> list[int]:
    if ":" in text:
        a, b = (int(t) for t in text.split(":")[:2])
        return list(range(a, b + 1))
    return [int(t) for t in text.split(",")]


def parse_opts(text: str) -> dict:
    out: dict = {}
    for item in filter(None, text.split(",")):
        key, val = item.split("=", 1)
        low = val.lower()
        out[key] = True if low == "true" else False if low == "false" else _number(val)
    return out


def _number(val: str) -> object:
    try:
        return int(val)
    except ValueError:
        try:
            return float(val)
        except ValueError:
            return val


def part_arht(args: argparse.Namespace, Z: np.ndarray, v: np.ndarray) -> None:
    lp0 = arht_problem(Z, v).lower()
    other = parse_opts(args.arht_compare)
    get_solver("arht")().solve(lp0.with_budget(2))  # warm-up (imports, first-call costs)
    print(f"\n== ARHT on Caravan (README model, lambda = {ARHT_LAM:g}), k = {args.kmin}..{args.kmax}; {load()}")
    head = f"{'k':>3} {'wall s':>8} {'cpu s':>7} {'objective':>20}"
    if other:
        head += f" | {'wall s':>8} {'cpu s':>7} {'objective':>20} {'obj diff':>10}  ({args.arht_compare})"
    head += f" | {'abess s':>8} {'abess objective':>16}   load"
    print(head)
    worst = 0.0
    for k in range(args.kmin, args.kmax + 1):
        lp = lp0.with_budget(k)
        t0, c0 = time.perf_counter(), time.process_time()
        r = get_solver("arht")().solve(lp)
        t, c = time.perf_counter() - t0, time.process_time() - c0
        worst = max(worst, t)
        row = f"{k:3d} {t:8.3f} {c:7.3f} {r.objective:20.14f}"
        if other:
            t0, c0 = time.perf_counter(), time.process_time()
            r2 = get_solver("arht")(**other).solve(lp)
            t2, c2 = time.perf_counter() - t0, time.process_time() - c0
            row += f" | {t2:8.3f} {c2:7.3f} {r2.objective:20.14f} {r2.objective - r.objective:10.2e}"
        ab = abess_time(Z, v, k, ARHT_LAM)
        row += f" | {ab[0]:8.3f} {ab[1]:16.10f}" if ab else " | abess not installed"
        print(row + f"   {os.getloadavg()[0]:.1f}", flush=True)
    print(f"ARHT: slowest k {worst:.2f} s wall (target: at most 1 s per k up to k = 30)")


def part_bnb(args: argparse.Namespace, Z: np.ndarray, v: np.ndarray) -> None:
    lp0 = bnb_problem(Z, v).lower()
    modes = [m for m in args.bnb_modes.split(",") if m]
    unknown = [m for m in modes if m not in BNB_MODES]
    if unknown:
        raise SystemExit(f"--bnb-modes: unknown mode(s) {', '.join(unknown)}; expected some of {', '.join(BNB_MODES)}")
    print(
        f"\n== bnb on Caravan (certify.py model, lambda2 = {BNB_LAM:g}), time limit {args.bnb_time:g} s per k "
        f"and mode; {load()}"
    )
    print(
        f"{'k':>3} {'mode':>8} {'status':>11} {'wall s':>8} {'cpu s':>8} {'nodes':>7} {'nodes/s':>8} "
        f"{'nodes/cpu-s':>11} {'gap':>9} {'objective':>18} {'lower bound':>18} | {'abess s':>8}   load"
    )
    for k in parse_k(args.bnb_k):
        lp = lp0.with_budget(k)
        ab = abess_time(Z, v, k, BNB_LAM)
        rates = {}
        for mode in modes:
            t0, c0 = time.perf_counter(), time.process_time()
            r = get_solver("bnb")(time_limit=args.bnb_time, **BNB_MODES[mode]).solve(lp)
            t, c = time.perf_counter() - t0, time.process_time() - c0
            nodes = r.extra["nodes"]
            rates[mode] = nodes / max(c, 1e-9)
            print(
                f"{k:3d} {mode:>8} {r.status:>11} {t:8.2f} {c:8.2f} {nodes:7d} {nodes / t:8.1f} {rates[mode]:11.1f} "
                f"{r.gap:9.2e} {r.objective:18.12f} {r.lower_bound:18.12f} | "
                + (f"{ab[0]:8.3f}" if ab else "   n/a  ")
                + f"   {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        if len(modes) > 1:
            a, b = modes[0], modes[-1]
            print(f"    k = {k}: nodes per CPU second, {a} / {b} = {rates[a] / max(rates[b], 1e-9):.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("all", "arht", "bnb"), default="all")
    ap.add_argument("--kmin", type=int, default=2)
    ap.add_argument("--kmax", type=int, default=30)
    ap.add_argument("--arht-compare", default="", help="a second ARHT configuration, e.g. reuse_runs=false")
    ap.add_argument("--bnb-k", default="2:4", help="k for bnb: 2:8 or 2,4,6")
    ap.add_argument("--bnb-time", type=float, default=60.0, help="bnb's time limit per k and mode (s)")
    ap.add_argument(
        "--bnb-modes", default="default,original", help=f"bnb's configurations, in order ({', '.join(BNB_MODES)})"
    )
    args = ap.parse_args()
    Z, v = data()
    with threadpool_limits(1):
        if args.part in ("all", "arht"):
            part_arht(args, Z, v)
        if args.part in ("all", "bnb"):
            part_bnb(args, Z, v)


if __name__ == "__main__":
    main()
