"""Sparse minimum-variance portfolios: sum(w) == 1 beside nnz(w) <= k.

    python benchmarks/portfolio.py [--repeats 3] [--no-skscope]

Prints, for each part, the portfolio variance w'Sw reached and the wall time (medians over
``--repeats`` runs, BLAS pinned to one thread for everyone, benchmarks/pinning.py):

1. **enumeration** -- k of p assets (p = 12, 14, 16; k = 4, 4, 5), ``--seeds`` draws each, on
   random 2-factor covariances (datasets.factor_model) in four forms: long-only (w >= 0,
   sum(w) == 1), budget (sum(w) == 1, shorts), A w == b (Markowitz: the budget and a target return),
   A w <= b (long-only with three sector caps); and long-only subsets of the bundled returns
   (examples/data/returns.csv). For auto, grahtp and bnb: the share at the optimum over every
   support (a QP per support), the median and worst ratio of the variance to it, the median time,
   and how many bnb proved (status optimal, its bound at most the optimum).
2. **skscope layers** -- the bundled returns (p = 50), long-only, k = 5 and 10: our grahtp,
   fgrahtp and iht with the constraints themselves against skscope's HTPSolver, IHTSolver and
   ScopeSolver with its SimplexConstraint layer (a reparametrization |params| / sum |params|;
   skscope's test_layer.py problem family). skscope's time includes its JAX compilation, as a
   user sees it.
3. **budget only** (shorts allowed: sum(w) == 1, no bound; skscope's PortfolioSelection,
   MinVar with the empirical covariance): run in a subprocess, because on this machine's JAX it
   aborts the interpreter (a pybind11 error inside its L-BFGS callback); reported as such.
4. **CSI 500** (real data, when skscope's repository snapshot is on disk: its gallery's
   csi500-2020-2021.csv, 486 days x 459 stocks after its own cleaning): skscope's own
   test_PortfolioSelection (k = 50, Ledoit-Wolf covariance of the first 80% of the days, budget
   only, its pass criterion a Sharpe ratio > 0.04 on the last 20%) against PortfolioSelection
   (in a subprocess), and the long-only variant against HTPSolver / IHTSolver with the simplex
   layer; the in-sample variance, the out-of-sample variance and Sharpe ratio of the last 20%.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sparsemodel as sm  # noqa: E402
from benchmarks.pinning import pinned  # noqa: E402
from sparsemodel.datasets import factor_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RETURNS = ROOT / "examples" / "data" / "returns.csv"
CSI500 = Path("/work/.mirror/abess-team+skscope/repo")
CSI500_FILE = "docs/source/gallery/Miscellaneous/data/csi500-2020-2021.csv"
OURS = ("auto", "grahtp", "fgrahtp", "iht")


def returns() -> np.ndarray:
    return np.loadtxt(RETURNS, delimiter=",", skiprows=1)


def timed(fn: Any, repeats: int) -> tuple[Any, float]:
    out, times = None, []
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return out, statistics.median(times)


FORMS = ("long-only", "budget", "A w == b", "A w <= b")
ENUMERATED = ("auto", "grahtp", "bnb")


def portfolio(kind: str, S: np.ndarray, mu: np.ndarray | None, k: int) -> sm.Problem:
    """Minimum variance under one of FORMS: long-only (sum(w) == 1, w >= 0), budget (sum(w) == 1),
    A w == b (Markowitz: sum(w) == 1 and mu'w == the 70th percentile of mu, shorts allowed),
    A w <= b (long-only, three sectors of assets capped at 45 % each)."""
    p = S.shape[0]
    w = sm.Variable(p, name="w")
    cons = [sm.nnz(w) <= k]
    if kind == "A w == b":
        cons.append(sm.Data(np.vstack([np.ones(p), mu])) @ w == np.array([1.0, float(np.quantile(mu, 0.7))]))
    else:
        cons.append(sm.sum(w) == 1)
    if kind in ("long-only", "A w <= b"):
        cons.append(w >= 0)
    if kind == "A w <= b":
        sectors = np.zeros((3, p))
        sectors[np.arange(p) % 3, np.arange(p)] = 1.0
        cons.append(sm.Data(sectors) @ w <= 0.45)
    return sm.Problem(sm.minimize(sm.quad_form(w, S)), cons)


def part_enumeration(args: argparse.Namespace) -> None:
    """Each solver's variance over the optimum of every support (a restricted solve under the
    constraints each), on random 2-factor covariances (datasets.factor_model) of four forms, and on
    long-only subsets of the bundled returns; bnb's status and time."""
    print("1. the optimum by enumeration: variance / optimal variance (auto, grahtp), bnb proved and at it")
    cases = [(12, 4), (14, 4), (16, 5)]
    R = returns()
    sources: list[tuple[str, Any]] = [
        (kind, lambda p, seed, kind=kind: (kind, *factor_model(p, 2, seed))) for kind in FORMS
    ]
    sources.append(
        (
            "returns.csv",
            lambda p, seed: (
                "long-only",
                np.cov(R[:, np.random.default_rng(seed).choice(R.shape[1], p, replace=False)].T),
                None,
            ),
        )
    )
    print(f"   (p, k) in {cases}, {args.seeds} draws each; times: median seconds per problem")
    print(f"   {'problems':24s} {'solver':7s} {'optimal':>8s} {'median':>8s} {'worst':>8s} {'time':>7s}  proved")
    for label, draw in sources:
        ratios: dict[str, list[float]] = {s: [] for s in ENUMERATED}
        times: dict[str, list[float]] = {s: [] for s in ENUMERATED}
        proved = 0
        for p, k in cases:
            for seed in range(args.seeds):
                kind, S, mu = draw(p, seed)
                prob = portfolio(kind, S, mu, k)
                lp = prob.lower()
                best = min(lp.restricted_minimize(np.array(T)).f for T in itertools.combinations(range(p), k))
                for s in ENUMERATED:
                    t = time.perf_counter()
                    r = prob.solve(s)
                    times[s].append(time.perf_counter() - t)
                    ratios[s].append(r.objective / best)
                    if s == "bnb":
                        proved += r.status == "optimal" and r.lower_bound <= best * (1 + 1e-9)
        n = len(ratios["auto"])
        for s in ENUMERATED:
            r = np.array(ratios[s])
            tail = f"  {proved}/{n}" if s == "bnb" else ""
            print(
                f"   {label if s == 'auto' else '':24s} {s:7s} {np.mean(r <= 1 + 1e-7):8.0%} {np.median(r):8.4f} "
                f"{r.max():8.4f} {statistics.median(times[s]):7.2f}{tail}"
            )


def skscope_layer_runs(S: np.ndarray, k: int, repeats: int) -> dict[str, tuple[float, float, int]]:
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from skscope import HTPSolver, IHTSolver, ScopeSolver, layer

    p = S.shape[0]
    Sj = jnp.array(S)
    out = {}
    for cls in (HTPSolver, IHTSolver, ScopeSolver):

        def run(cls: Any = cls) -> np.ndarray:
            solver = cls(p, k, random_state=0)
            return np.asarray(solver.solve(lambda v: v @ Sj @ v, layers=[layer.SimplexConstraint(p)], jit=True))

        w, t = timed(run, repeats)
        feasible = abs(w.sum() - 1) < 1e-6 and w.min() >= -1e-12
        out[cls.__name__] = (float(w @ S @ w) if feasible else float("nan"), t, int(np.count_nonzero(w)))
    return out


def part_skscope(args: argparse.Namespace) -> None:
    print("\n2. long-only on the bundled returns (p = 50): variance, time (s), nonzeros")
    S = np.cov(returns().T)
    for k in (5, 10):
        prob = portfolio("long-only", S, None, k)
        rows = {}
        for s in OURS:
            r, t = timed(lambda s=s, prob=prob: prob.solve(s), args.repeats)
            rows[s] = (r.objective, t, int(np.count_nonzero(r.x)))
        if args.skscope:
            try:
                rows.update(skscope_layer_runs(S, k, args.repeats))
            except ImportError:
                print("   (skscope not installed)")
        best = min(v[0] for v in rows.values() if np.isfinite(v[0]))
        print(f"   k = {k}")
        for name, (f, t, nz) in rows.items():
            shown = f"{f:.6e}" if np.isfinite(f) else "infeasible (sum != 1 or w < 0)"
            print(
                f"     {name:12s} {shown:>32s}  x best {f / best if np.isfinite(f) else float('nan'):7.4f}  {t:8.3f} s  nnz {nz}"
            )


PS_SCRIPT = """
import sys, numpy as np, time
import jax
jax.config.update("jax_enable_x64", True)
from skscope.skmodel import PortfolioSelection
R = np.loadtxt(sys.argv[1], delimiter=",", skiprows=1)
t = time.perf_counter()
m = PortfolioSelection(sparsity=int(sys.argv[2]), obj="MinVar", cov_matrix="empirical", random_state=0).fit(R)
w = np.asarray(m.coef_)
print(float(w @ np.cov(R.T) @ w), time.perf_counter() - t, int(np.count_nonzero(w)))
"""


def part_budget(args: argparse.Namespace) -> None:
    print("\n3. budget only (shorts allowed, sum(w) == 1) on the bundled returns: variance, time (s)")
    S = np.cov(returns().T)
    for k in (5, 10):
        prob = portfolio("budget", S, None, k)
        print(f"   k = {k}")
        for s in OURS:
            r, t = timed(lambda s=s, prob=prob: prob.solve(s), args.repeats)
            print(f"     {s:12s} {r.objective:.6e}  {t:8.3f} s  nnz {np.count_nonzero(r.x)}")
        if args.skscope:
            proc = subprocess.run(
                [sys.executable, "-c", PS_SCRIPT, str(RETURNS), str(k)], capture_output=True, text=True, timeout=600
            )
            if proc.returncode == 0 and proc.stdout.strip():
                f, t, nz = proc.stdout.split()
                print(f"     {'skscope PS':12s} {float(f):.6e}  {float(t):8.3f} s  nnz {nz}")
            else:
                print(f"     skscope PortfolioSelection failed (exit {proc.returncode}): {_last_line(proc.stderr)}")


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip() and not ln.startswith(" ")]
    return lines[0] if lines else "(no message)"


def csi500() -> np.ndarray | None:
    if not (CSI500 / "HEAD").exists() and not (CSI500 / ".git").exists():
        return None
    import io

    import pandas as pd

    try:
        raw = subprocess.run(
            ["git", "-C", str(CSI500), "show", f"HEAD:{CSI500_FILE}"], capture_output=True, check=True
        ).stdout
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None
    X = pd.read_csv(io.BytesIO(raw), encoding="gbk")  # skscope's own cleaning (test_skmodel.py)
    X = X[X.columns[X.isnull().sum() <= 20]].fillna(0)
    return X.iloc[:, 1:].values / 100


CSI_PS_SCRIPT = """
import sys, time, numpy as np
sys.path.insert(0, sys.argv[1])
from benchmarks.portfolio import csi500
from benchmarks.pinning import pinned
from sklearn.covariance import LedoitWolf
from skscope.skmodel import PortfolioSelection
R = csi500(); n = int(0.8 * len(R))
S = LedoitWolf().fit(R[:n]).covariance_
times = []
with pinned(1):
    for _ in range(int(sys.argv[2])):
        t = time.perf_counter()
        m = PortfolioSelection(sparsity=50, alpha=0.001, random_state=0).fit(R[:n])
        times.append(time.perf_counter() - t)
w = np.asarray(m.coef_, dtype=float)
St = np.cov(R[n:].T)
print(float(w @ S @ w), float(w @ St @ w), float(np.median(times)), m.score(R[n:]), int(np.count_nonzero(w)), w.min())
"""


def sharpe(w: np.ndarray, R: np.ndarray) -> float:
    """skscope's PortfolioSelection.score: mean / standard deviation of the portfolio's returns."""
    r = R @ w
    return float(np.mean(r) / np.std(r))


def part_csi500(args: argparse.Namespace) -> None:
    R = csi500()
    print("\n4. CSI 500 (real returns), k = 50, Ledoit-Wolf covariance of the first 80% of the days")
    print("   (skscope's test_PortfolioSelection: its pass criterion is a Sharpe ratio > 0.04 on the last 20%)")
    if R is None:
        print("   (skscope's repository snapshot is not on disk: skipped)")
        return
    from sklearn.covariance import LedoitWolf

    n_train = int(0.8 * len(R))
    S = LedoitWolf().fit(R[:n_train]).covariance_
    S_test = np.cov(R[n_train:].T)
    print(f"   {R.shape[0]} days x {R.shape[1]} stocks")
    for long in (False, True):
        print("   " + ("long-only (w >= 0, sum(w) == 1)" if long else "budget only (sum(w) == 1, shorts allowed)"))
        prob = portfolio("long-only" if long else "budget", S, None, 50)
        rows: dict[str, tuple[np.ndarray, float]] = {}
        for s in OURS:
            r, t = timed(lambda s=s, prob=prob: prob.solve(s), args.repeats)
            rows[s] = (r.x, t)
        if args.skscope and long:
            try:
                import jax

                jax.config.update("jax_enable_x64", True)
                import jax.numpy as jnp
                from skscope import HTPSolver, IHTSolver, layer

                Sj = jnp.array(S)
                for cls in (HTPSolver, IHTSolver):

                    def run(cls: Any = cls, Sj: Any = Sj) -> np.ndarray:
                        solver = cls(S.shape[0], 50, random_state=0)
                        return np.asarray(
                            solver.solve(lambda v: v @ Sj @ v, layers=[layer.SimplexConstraint(S.shape[0])], jit=True)
                        )

                    rows[cls.__name__] = timed(run, args.repeats)
            except ImportError:
                pass
        for name, (w, t) in rows.items():
            print(
                f"     {name:12s} in-sample {w @ S @ w:.6e}  out-of-sample {w @ S_test @ w:.6e}  "
                f"Sharpe {sharpe(w, R[n_train:]):.4f}  {t:7.3f} s  nnz {np.count_nonzero(w)}  min {w.min():.2g}"
            )
        if args.skscope and not long:
            proc = subprocess.run(
                [sys.executable, "-c", CSI_PS_SCRIPT, str(ROOT), str(args.repeats)],
                capture_output=True,
                text=True,
                timeout=900,
            )
            if proc.returncode == 0 and proc.stdout.strip():
                f, ft, t, sh, nz, lo = proc.stdout.split()[-6:]
                print(
                    f"     {'skscope PS':12s} in-sample {float(f):.6e}  out-of-sample {float(ft):.6e}  "
                    f"Sharpe {float(sh):.4f}  "
                    f"{float(t):7.3f} s  nnz {nz}  min {float(lo):.2g}"
                )
            else:
                print(f"     skscope PortfolioSelection failed (exit {proc.returncode}): {_last_line(proc.stderr)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--no-skscope", dest="skscope", action="store_false")
    ap.add_argument("--parts", default="1,2,3,4")
    args = ap.parse_args()
    parts = {"1": part_enumeration, "2": part_skscope, "3": part_budget, "4": part_csi500}
    with pinned(1):
        for key in args.parts.split(","):
            parts[key](args)


if __name__ == "__main__":
    main()
