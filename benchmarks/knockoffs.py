"""Inference (docs/inference.md): the knockoff filter with l0 statistics and stability selection,
on the simulation protocol of the knockoff papers (Candes, Fan, Janson and Lv 2018; Spector and
Janson 2022): n = 1000 rows of N(0, Sigma) with Sigma_ij = 0.5^|i-j| (AR(1)), p = 500, 50 nonzero
coefficients at random positions with random signs and one amplitude, for three losses:

* ``linear``   -- y = X b + N(0, 1), least squares;
* ``logistic`` -- P(y = 1) = 1 / (1 + exp(-X b)), the logistic loss;
* ``cox``      -- exponential survival times with hazard exp(X b), censored by an independent
  exponential time (about a third censored), Cox's partial likelihood.

Each replication draws one model-X knockoff copy from the known Sigma (MVR construction) and runs,
on the same X, X~ and y:

* ours: one l0 path on [X, X~] (``auto``, warm-started, k = 1..K, K = ``--k``, default 100), read
  by the ``path`` statistic (the coefficient difference summed over the path, the default) and the
  ``support`` statistic (the best supports holding each unit); on the linear case also the model
  with a ridge ``--ridge`` ||w||^2 (default 0.1); knockoff+ at q = 0.1;
* knockpy's lasso coefficient-difference statistic (cross-validated lasso on [X, X~], its default)
  and knockpy's masked likelihood ratio (MLR, Spector and Fithian 2022), where knockpy installs
  (linear and logistic: knockpy has no Cox lasso or MLR).

Printed per loss and method: the observed FDR (mean FDP) with its standard error, which must lie
within q + 2 se, and the power with its standard error. Then:

* ``--stability``: stability selection (B complementary pairs, the l0 path on each half) on the
  linear case at n = 500, p = 200, 20 nonzeros, over the path k = 1..40 at threshold 0.6 and at
  k = 10 at threshold 0.75: the observed false selections against the Meinshausen-Buhlmann /
  Shah-Samworth bound;
* ``--timing``: the whole-process time of one knockoff filter on the linear case (covariance
  estimated by Ledoit-Wolf, MVR construction, one draw, the fit, the threshold): ours against
  knockpy's ``KnockoffFilter(ksampler="gaussian", fstat="lasso")`` with the same estimate.

The protocol asks for at least 50 replications; ``--reps`` sets them (each linear replication takes
a few seconds, logistic and Cox tens of seconds, knockpy's MLR about a minute on this machine).
``--amplitude linear=0.1,logistic=0.35,cox=0.15`` overrides the amplitudes (the defaults give power
between 0.3 and 0.9 for our statistic at q = 0.1).

    python benchmarks/knockoffs.py --reps 50                       # the protocol
    python benchmarks/knockoffs.py --reps 5 --losses linear --stability --timing
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from pinning import pinned

import sparsemodel as sm
from sparsemodel.inference import filter as F
from sparsemodel.inference import gaussian as G
from sparsemodel.inference import knockoffs, stability

N, P, S, RHO, Q = 1000, 500, 50, 0.5, 0.1
AMPLITUDE = {"linear": 0.12, "logistic": 0.35, "cox": 0.15}


def ar1(p: int, rho: float = RHO) -> np.ndarray:
    i = np.arange(p)
    return rho ** np.abs(np.subtract.outer(i, i))


def draw(loss: str, seed: int, amp: float, n: int = N, p: int = P, s: int = S) -> dict[str, Any]:
    """One data set of the protocol: X, the truth b, and the response of the loss."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) @ np.linalg.cholesky(ar1(p)).T
    beta = np.zeros(p)
    beta[rng.choice(p, s, replace=False)] = amp * rng.choice([-1.0, 1.0], s)
    eta = X @ beta
    out: dict[str, Any] = {"X": X, "beta": beta}
    if loss == "linear":
        out["y"] = eta + rng.standard_normal(n)
    elif loss == "logistic":
        out["y"] = np.where(rng.uniform(size=n) < 1 / (1 + np.exp(-eta)), 1.0, -1.0)
    else:
        t = rng.exponential(np.exp(-eta))
        c = rng.exponential(4.0 * np.median(t), n)
        out["time"], out["event"] = np.minimum(t, c), (t <= c).astype(float)
    return out


def model(loss: str, d: dict[str, Any], k: int, ridge: float = 0.0) -> sm.Problem:
    """The model of the loss with a free intercept (not for Cox: it cancels), and ``ridge`` ||w||^2."""
    X = d["X"]
    n, p = X.shape
    w = sm.Variable(p, name="w")
    if loss == "linear":
        b = sm.Variable(name="b")
        f = sm.sum_squares(X @ w + b - d["y"]) / (2 * n)
    elif loss == "logistic":
        b = sm.Variable(name="b")
        f = sm.mean(sm.logistic(-d["y"] * (X @ w + b)))
    else:
        f = sm.cox(X @ w, d["time"], d["event"]) / n
    if ridge > 0:
        f = f + ridge * sm.sum_squares(w)
    return sm.Problem(sm.minimize(f), [sm.nnz(w) <= k])


def fdp_power(selected: np.ndarray, beta: np.ndarray) -> tuple[float, float]:
    S_ = set(np.asarray(selected).tolist())
    T = set(np.flatnonzero(beta).tolist())
    return len(S_ - T) / max(len(S_), 1), len(S_ & T) / len(T)


def knockpy_stat(fstat: str, X: np.ndarray, Xk: np.ndarray, y: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """knockpy's W on the given knockoffs (its lasso: cross-validated coefficient difference)."""
    from knockpy.knockoff_filter import KnockoffFilter

    kf = KnockoffFilter(fstat=fstat, ksampler="gaussian")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kf.forward(
            X=X, y=np.where(y > 0, 1.0, 0.0) if set(np.unique(y)) <= {-1.0, 1.0} else y, Xk=Xk, Sigma=sigma, fdr=Q
        )
    return np.asarray(kf.W)


def have_knockpy() -> bool:
    try:
        import knockpy  # noqa: F401
    except ImportError:
        return False
    return True


def l0_statistics(
    loss: str, d: dict[str, Any], Xk: np.ndarray, k: int, ridge: float = 0.0
) -> tuple[dict[str, np.ndarray], float]:
    """Our statistics from one l0 path on [X, X~] (auto, warm-started, k = 1..K): ``path`` (the
    coefficient difference summed over the path) and ``support`` (the supports holding each unit),
    the library's own functions on one path; and the path's time."""
    from sparsemodel.inference.augment import plan
    from sparsemodel.inference.knockoffs import unit_magnitudes
    from sparsemodel.lowering.lowered import LoweredProblem
    from sparsemodel.workflows.path import run_path
    from sparsemodel.workflows.session import solver_class

    m = model(loss, d, k, ridge)
    t0 = time.perf_counter()
    pl = plan(m)
    aug = pl.augment(Xk, k=k)
    lp = LoweredProblem(aug)
    path = run_path(aug, lp, solver_class(lp, "auto"), list(range(1, k + 1)), {}, start="warm")
    mags = [unit_magnitudes(pl, pt.result.values) for pt in path.points if pt.ok]
    R, Fk = np.array([a for a, _ in mags]), np.array([b for _, b in mags])
    W = {"path": F.path_statistic(R, Fk), "support": F.support_statistic(R > 0, Fk > 0)}
    return W, time.perf_counter() - t0


def replicate(
    loss: str, seed: int, amp: float, k: int, mlr: bool, ridge: float
) -> dict[str, tuple[float, float, float]]:
    """One replication: {method: (fdp, power, seconds)}, every method on the same X, X~ and y."""
    d = draw(loss, seed, amp)
    sigma = ar1(P)
    s = G.s_vector(sigma, "mvr")
    Xk = G.model_x(d["X"], np.zeros(P), sigma, s, np.random.default_rng(10_000 + seed))
    out: dict[str, tuple[float, float, float]] = {}
    Ws, secs = l0_statistics(loss, d, Xk, k)
    for name, W in Ws.items():
        out[f"l0 {name}"] = (*fdp_power(F.select(W, F.threshold(W, Q)), d["beta"]), secs)
    if ridge > 0 and loss == "linear":
        Ws, secs = l0_statistics(loss, d, Xk, k, ridge)
        out[f"l0 path, ridge {ridge:g}"] = (
            *fdp_power(F.select(Ws["path"], F.threshold(Ws["path"], Q)), d["beta"]),
            secs,
        )
    if loss != "cox" and have_knockpy():
        fstats = [("knockpy lasso", "lasso")] + ([("knockpy MLR", "mlr")] if mlr else [])
        for name, fstat in fstats:
            t0 = time.perf_counter()
            W = knockpy_stat(fstat, d["X"], Xk, d["y"], sigma)
            out[name] = (*fdp_power(F.select(W, F.threshold(W, Q)), d["beta"]), time.perf_counter() - t0)
    return out


def summary(rows: list[dict[str, tuple[float, float, float]]]) -> list[list[Any]]:
    """Per method: replications, FDR (mean FDP) ± se, whether it is within q + 2 se, power ± se, the
    paired difference of power against knockpy's lasso on the same replications ± se, median time."""
    methods = list(dict.fromkeys(m for r in rows for m in r))
    base = "knockpy lasso"
    table = []
    for m in methods:
        v = np.array([r[m] for r in rows if m in r])
        se = v.std(axis=0, ddof=1) / np.sqrt(len(v)) if len(v) > 1 else np.full(3, np.nan)
        ok = "yes" if v[:, 0].mean() <= Q + 2 * se[0] else "NO"
        paired = "-"
        both = [r[m][1] - r[base][1] for r in rows if m in r and base in r]
        if m != base and len(both) > 1:
            paired = f"{np.mean(both):+.3f} ± {np.std(both, ddof=1) / np.sqrt(len(both)):.3f}"
        table.append(
            [
                m,
                len(v),
                f"{v[:, 0].mean():.3f} ± {se[0]:.3f}",
                ok,
                f"{v[:, 1].mean():.3f} ± {se[1]:.3f}",
                paired,
                f"{np.median(v[:, 2]):.2f}",
            ]
        )
    return table


def run_fdr(
    losses: list[str], reps: int, amps: dict[str, float], k: int, mlr: bool, ridge: float, out: dict[str, Any]
) -> None:
    from tabulate import tabulate

    for loss in losses:
        rows = []
        for r in range(reps):
            rows.append(replicate(loss, r, amps[loss], k, mlr, ridge))
            print(f"  {loss} replication {r + 1}/{reps}", file=sys.stderr, flush=True)
        table = summary(rows)
        out[loss] = {"amplitude": amps[loss], "reps": reps, "table": table, "rows": rows}
        print(
            f"\n{loss}: n = {N}, p = {P}, {S} nonzeros of amplitude {amps[loss]}, AR(1) {RHO}, q = {Q}, {reps} replications"
        )
        print(
            tabulate(
                table,
                headers=[
                    "method",
                    "reps",
                    "FDR (mean FDP ± se)",
                    "<= q + 2 se",
                    "power ± se",
                    "power - lasso",
                    "median s",
                ],
            )
        )


def run_stability(reps: int, pairs: int, amp: float, out: dict[str, Any]) -> None:
    """Linear case at a smaller size (n = 500, p = 200, 20 nonzeros): false selections against the
    bound, over the whole path k = 1..40 at threshold 0.6, and at k = 10 at threshold 0.75 (q near
    sqrt(p / 2), where the bound is informative)."""
    n, p, s = 500, 200, 20
    for label, k, at_k, tau in (("path k = 1..40", 40, None, 0.6), ("at k = 10", 10, 10, 0.75)):
        fs, bounds, um, powers = [], [], [], []
        for r in range(reps):
            d = draw("linear", 500 + r, amp * np.sqrt(N / n), n=n, p=p, s=s)
            res = stability(
                model("linear", d, k), pairs=pairs, threshold=tau, at_k=at_k, seed=r, truth={"w": d["beta"]}
            )
            fs.append(res.false_selections)
            bounds.append(res.bound)
            um.append(res.bound_unimodal if res.bound_unimodal is not None else float("nan"))
            powers.append(len(set(res.selected.tolist()) & set(np.flatnonzero(d["beta"]).tolist())) / s)
            print(f"  stability ({label}) replication {r + 1}/{reps}", file=sys.stderr, flush=True)
        fs_ = np.array(fs, dtype=float)
        se = fs_.std(ddof=1) / np.sqrt(len(fs_)) if len(fs_) > 1 else float("nan")
        out.setdefault("stability", {})[label] = {"false": fs, "bound": bounds, "unimodal": um, "power": powers}
        print(
            f"\nstability selection ({label}, threshold {tau}; linear, n = {n}, p = {p}, {s} nonzeros, {pairs} pairs, "
            f"{reps} replications): false selections {fs_.mean():.2f} ± {se:.2f} (max {int(fs_.max())}) against the "
            f"bound E[V] <= {np.mean(bounds):.2f} (unimodal: {np.nanmean(um):.2f}); power {np.mean(powers):.3f}"
        )


def run_timing(k: int, amp: float, repeat: int, out: dict[str, Any]) -> None:
    """Whole process, one knockoff filter on the linear case, covariance estimated (Ledoit-Wolf)."""
    d = draw("linear", 12345, amp)
    times: dict[str, list[float]] = {"ours (l0 path)": [], "ours (l0 coef at 50)": []}
    for _ in range(repeat):
        for name, stat, kk in (("ours (l0 path)", "path", k), ("ours (l0 coef at 50)", "coef", S)):
            t0 = time.perf_counter()
            knockoffs(model("linear", d, kk), fdr=Q, statistic=stat, seed=1)
            times[name].append(time.perf_counter() - t0)
        if have_knockpy():
            from knockpy.knockoff_filter import KnockoffFilter

            for fstat in ("lasso",):
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    KnockoffFilter(fstat=fstat, ksampler="gaussian", knockoff_kwargs={"method": "mvr"}).forward(
                        X=d["X"], y=d["y"], fdr=Q, shrinkage="ledoitwolf"
                    )
                times.setdefault(f"knockpy ({fstat})", []).append(time.perf_counter() - t0)
    out["timing"] = times
    print(
        f"\nwhole-process time of one knockoff filter (linear, n = {N}, p = {P}, Ledoit-Wolf + MVR), median of {repeat}:"
    )
    for name, ts in times.items():
        print(f"  {name:<22} {np.median(ts):7.2f} s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=50, help="replications per loss (the protocol: at least 50)")
    ap.add_argument("--losses", default="linear,logistic,cox")
    ap.add_argument("--k", type=int, default=100, help="the l0 path's largest k (default 100)")
    ap.add_argument("--amplitude", default="", help="loss=value,... (defaults: linear 0.12, logistic 0.35, cox 0.15)")
    ap.add_argument("--no-mlr", action="store_true", help="skip knockpy's MLR statistic (slow)")
    ap.add_argument("--ridge", type=float, default=0.1, help="also the linear model with ridge * ||w||^2 (0: skip)")
    ap.add_argument("--stability", action="store_true", help="also stability selection's false selections vs its bound")
    ap.add_argument("--stability-reps", type=int, default=20)
    ap.add_argument("--pairs", type=int, default=50)
    ap.add_argument("--timing", action="store_true", help="also the whole-process time against knockpy")
    ap.add_argument("--repeat", type=int, default=3, help="timing repeats (median)")
    ap.add_argument("--json", help="write the figures to this JSON file")
    a = ap.parse_args(argv)
    amps = dict(AMPLITUDE)
    for item in filter(None, a.amplitude.split(",")):
        name, value = item.split("=")
        amps[name.strip()] = float(value)
    out: dict[str, Any] = {}
    with pinned(1):
        losses = [x.strip() for x in a.losses.split(",") if x.strip()]
        if a.reps > 0 and losses:
            run_fdr(losses, a.reps, amps, a.k, not a.no_mlr, a.ridge, out)
        if a.stability:
            run_stability(a.stability_reps, a.pairs, amps["linear"], out)
        if a.timing:
            run_timing(a.k, amps["linear"], a.repeat, out)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
