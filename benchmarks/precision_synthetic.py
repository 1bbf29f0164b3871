"""Paper 000, Section 6.3.1 / Figure 6: sparse precision matrices on synthetic data.

Truth O = Theta + sigma I with the off-diagonal entries of Theta equal to 1 with probability 0.1
(upper triangle, mirrored) and sigma chosen so that cond(O) = p (``sparsemodel.datasets.sparse_precision``);
n = 100 training and 100 validation samples of N(0, O^{-1}); p in {30, 60, 120, 200}.

Methods, each on the model  min -logdet(O) + <S, O>  s.t.  nnz(offdiag(O)) <= 2k,  Lu's box (auto):
GraHTP (Algorithm 2), GraSP, forward selection, FoBa, and the graphical LASSO (ours: lambda tuned
to exactly k edges, then refit on its graph in the box); k is chosen on the validation negative
log-likelihood -logdet(O) + <S_val, O> over the grid true-edge-count x {0.25, 0.5, 0.75, 1, 1.5, 2}.
scikit-learn's GraphicalLasso (when installed) is the penalized estimator itself, its lambda chosen
on the same validation likelihood over 14 values from 0.95 lambda_max down to 0.02 lambda_max.
forward and FoBa add one edge per step and refit: they run only for p <= ``--greedy-max-p``
(default 60), which the output states. GraSP runs for p <= ``--grasp-max-p`` (default 120): at
p = 200 its merged support (3k pairs, k up to 4160) is nearly the whole graph with n = 100 < p
samples, so every debiasing step is the box-constrained ADMM (measured at seed 0, k = 520 / 1040 /
1560 / 2080: 6 / 8 / 42 / 210 s per fit, 100 iterations without converging).

Reported per p and method: Frobenius error ||O_hat - O||_F, edge F-score, the time of the solve at
the chosen k, and the time of the whole tuning (every k of the grid), as mean and standard error
over the replications (``--reps``, default 20; ``--full``: 100). Verdict of the paper's finding:
GraHTP best or near best (within one standard error of the best mean) in error and F-score, and
faster than the other greedy methods (GraSP, forward, FoBa) over the tuning.

The speed target (GraHTP within twice scikit-learn's time) is measured apart (``--speed-p``, default 200, seed 0, k = the true
edge count): GraHTP's time against scikit-learn's GraphicalLasso at the lambda that gives the same
number of edges (found by our glasso's search), medians of 3 runs, in the same process.

The study is :func:`sparsemodel.experiment`: every replication's training and validation
covariances are drawn, each method runs at every k of the grid, its validation negative
log-likelihood is the held-out loss (the model's objective on the validation covariance), and
``Study.best("test_loss")`` keeps each replication's method at its best k; the Frobenius error and
the F-score are the truth metrics ``error`` and ``f1``.

Every method runs with one BLAS thread (threadpoolctl). Files (never overwritten): rows_p{p}.csv
(every replication, method and k), summary.csv, speed.csv and figure6.png in ``--out``.

    python benchmarks/precision_synthetic.py                       # p = 30, 60, 120, 200; 20 reps
    python benchmarks/precision_synthetic.py --p 30,60 --reps 5    # a quick look
    python benchmarks/precision_synthetic.py --full                # 100 reps
    python benchmarks/precision_synthetic.py --reps-at 200=5       # fewer at p = 200 (GraSP is slow there)
    python benchmarks/precision_synthetic.py --p "" --speed-p 200  # the speed target alone
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from pinning import pinned

import sparsemodel as sm
from sparsemodel.datasets import sparse_precision

OURS = ("grahtp", "grasp", "forward", "foba", "glasso")
GREEDY = ("grasp", "forward", "foba")
K_FACTORS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0)


def mle_cov(Z: np.ndarray) -> np.ndarray:
    """The model's ``cov``: (1/n) sum (z - mean)(z - mean)'."""
    c = Z - Z.mean(axis=0)
    return c.T @ c / Z.shape[0]


def nll(O: np.ndarray, S: np.ndarray) -> float:
    sign, logdet = np.linalg.slogdet(O)
    return math.inf if sign <= 0 else float(-logdet + np.sum(S * O))


def edge_set(O: np.ndarray) -> set[tuple[int, int]]:
    U = np.triu(O, 1)
    big = np.abs(U) > 1e-12 * max(float(np.abs(U).max(initial=0.0)), 1e-300)
    i, j = np.nonzero(big)
    return set(zip(i.tolist(), j.tolist()))


def model(S: np.ndarray, k: int = 1) -> sm.Problem:
    p = len(S)
    O = sm.Variable((p, p), symmetric=True, name="O")
    return sm.Problem(
        sm.minimize(-sm.logdet(O) + sm.trace(S @ O)),
        [sm.nnz(sm.offdiag(O)) <= 2 * k, sm.eig(O).between("auto", "auto")],
    )


def k_grid(m: int) -> list[int]:
    """The true edge count m times K_FACTORS (at least one edge)."""
    return sorted({max(1, round(m * f)) for f in K_FACTORS})


def draw(rng: np.random.Generator, p: int):
    """One replication: 100 training and 100 validation samples of the Section 6.3.1 graph."""
    Z, O = sparse_precision(p, n=200, seed=rng)
    return {"S": mle_cov(Z[:100])}, {"O": O}, {"S": mle_cov(Z[100:])}


def sklearn_fit(data: dict[str, np.ndarray], test: dict[str, np.ndarray]) -> Any:
    """scikit-learn's GraphicalLasso, its lambda chosen on the validation likelihood over 14 values
    from 0.95 lambda_max down to 0.02 lambda_max; reports the chosen fit's time and lambda."""
    from sklearn.covariance import GraphicalLasso

    S, Sv = data["S"], test["S"]
    lam_max = float(np.abs(S - np.diag(np.diag(S))).max())
    best: tuple[float, np.ndarray, float, float] | None = None
    for lam in lam_max * np.geomspace(0.95, 0.02, 14):
        t = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                g = GraphicalLasso(alpha=float(lam), covariance="precomputed", max_iter=200).fit(S)
        except (FloatingPointError, ValueError, np.linalg.LinAlgError):
            continue
        dt = time.perf_counter() - t
        v = nll(g.precision_, Sv)
        if best is None or v < best[0]:
            best = (v, g.precision_, dt, float(lam))
    if best is None:
        raise RuntimeError("no lambda of the grid gave a fit")
    return {"O": best[1]}, {"time_s": best[2], "penalty": best[3]}


def speed(p: int, repeat: int = 3) -> dict[str, Any]:
    """The speed target: GraHTP at the true edge count against scikit-learn at the same edges."""
    Z, O = sparse_precision(p, n=100, seed=0)
    S = mle_cov(Z)
    m = len(edge_set(O))
    prob = model(S, m)
    out: dict[str, Any] = {"p": p, "true_edges": m}
    for label, opts in (("grahtp", {}), ("grahtp_paper_stop", {"search": False})):
        ts = []
        for _ in range(repeat):
            t = time.perf_counter()
            r = prob.solve(solver="grahtp", **opts)
            ts.append(time.perf_counter() - t)
        out[f"{label}_seconds"] = statistics.median(ts)
        out[f"{label}_edges"] = r.extra["edges"]
        out[f"{label}_eig_decomps"] = r.extra.get("eig_decomps", 0)
    t = time.perf_counter()
    gl = prob.solve(solver="glasso")
    out["glasso_ours_seconds"] = time.perf_counter() - t
    out["glasso_lambda"] = lam = float(gl.extra["lambda"])
    try:
        from sklearn.covariance import GraphicalLasso
    except ImportError:
        return out
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its ConvergenceWarning: reported below as n_iter = max_iter
            g = GraphicalLasso(alpha=lam, covariance="precomputed").fit(S)  # its defaults (max_iter = 100)
        ts.append(time.perf_counter() - t)
    out["sklearn_seconds"] = statistics.median(ts)
    out["sklearn_edges"] = len(edge_set(g.precision_))
    out["sklearn_iterations"] = int(g.n_iter_)
    out["sklearn_max_iter"] = int(g.max_iter)
    out["ratio_grahtp_to_sklearn"] = out["grahtp_seconds"] / out["sklearn_seconds"]
    out["ratio_paper_stop_to_sklearn"] = out["grahtp_paper_stop_seconds"] / out["sklearn_seconds"]
    return out


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with open(path, "x", newline="") as fh:  # never overwrite
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def _rows(summary: Any) -> list[dict[str, Any]]:
    """A summary as a list of dicts (a pandas DataFrame or the list sparsemodel gives without pandas)."""
    return summary.to_dict("records") if hasattr(summary, "to_dict") else list(summary)


def parse_reps_at(specs: list[str]) -> dict[int, int]:
    out = {}
    for spec in specs:
        try:
            p, n = spec.split("=")
            out[int(p)] = int(n)
        except ValueError:
            raise SystemExit(f"--reps-at {spec!r}: expected P=N, for example 200=5") from None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--p", default="30,60,120,200", help="dimensions (comma separated)")
    ap.add_argument("--reps", type=int, default=20, help="replications per p (default 20)")
    ap.add_argument("--full", action="store_true", help="100 replications")
    ap.add_argument(
        "--reps-at",
        action="append",
        default=[],
        metavar="P=N",
        help="replications at one p (repeatable), e.g. 200=5: GraSP alone takes minutes per fit at p = 200",
    )
    ap.add_argument("--greedy-max-p", type=int, default=60, help="largest p for forward and FoBa (default 60)")
    ap.add_argument(
        "--grasp-max-p",
        type=int,
        default=120,
        help="largest p for GraSP (default 120: at p = 200 one fit at k = 2080 took 210 s, 20097 eigen-decompositions)",
    )
    ap.add_argument("--speed-p", type=int, default=200, help="p of the speed measurement (0: skip)")
    ap.add_argument(
        "--seed", type=int, default=0, help="seed of the draws (at each p, the study seed is seed + 1000 p)"
    )
    ap.add_argument("--out", default="benchmarks/out/precision_synthetic", help="output folder")
    a = ap.parse_args()
    reps = 100 if a.full else a.reps
    reps_at = parse_reps_at(a.reps_at)
    ps = [int(s) for s in a.p.split(",") if s]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in [*(f"rows_p{p}.csv" for p in ps), "summary.csv", "speed.csv", "figure6.png"]:
        if (out / name).exists():
            raise SystemExit(f"{out / name} exists; choose another --out (results are never overwritten)")
    try:
        import sklearn  # noqa: F401

        baseline = [sm.External("sklearn", sklearn_fit, chooses_k=True)]
    except ImportError:
        baseline = []
    summary: list[dict[str, Any]] = []
    with pinned(1):
        for p in ps:
            methods = [
                m
                for m in OURS
                if (m not in ("forward", "foba") or p <= a.greedy_max_p) and (m != "grasp" or p <= a.grasp_max_p)
            ]
            if p > a.greedy_max_p:
                print(f"p = {p}: forward and FoBa skipped (p > --greedy-max-p = {a.greedy_max_p})")
            if p > a.grasp_max_p:
                print(f"p = {p}: GraSP skipped (p > --grasp-max-p = {a.grasp_max_p})")
            study = sm.experiment(
                model,
                methods + baseline,
                k=k_grid,  # relative to each replication's true edge count
                data=lambda rng, p=p: draw(rng, p),
                reps=reps_at.get(p, reps),
                seed=a.seed + 1000 * p,
                progress=True,
                csv=out / f"rows_p{p}.csv",
            )
            chosen = study.best("test_loss")  # each replication's method at the k of least validation nll
            cols = {
                "error": "frobenius_error",
                "f1": "f_score",
                "time_s": "seconds",
                "time_total": "tune_seconds",
                "k": "chosen_edges",
            }
            for e in _rows(chosen.summary(list(cols), by=["solver"])):
                entry: dict[str, Any] = {"p": p, "method": e["solver"], "reps": e["runs"]}
                for src, dst in cols.items():
                    entry[dst], entry[dst + "_se"] = e[src], e[src + "_se"]
                summary.append(entry)
        speed_row = speed(a.speed_p) if a.speed_p else None
    if summary:
        write_csv(out / "summary.csv", summary)
    print("\nFigure 6 protocol: n = 100 train + 100 validation, mean (standard error) over the replications")
    print(
        f"{'p':>4} {'method':8} {'reps':>4} {'edges':>8} {'Frobenius error':>18} {'F-score':>16} {'solve s':>16} {'tuning s':>16}"
    )
    for e in summary:
        print(
            f"{e['p']:>4} {e['method']:8} {e['reps']:>4} {e['chosen_edges']:8.1f} {e['frobenius_error']:10.3f} ({e['frobenius_error_se']:.3f})"
            f" {e['f_score']:8.3f} ({e['f_score_se']:.3f}) {e['seconds']:8.3f} ({e['seconds_se']:.3f})"
            f" {e['tune_seconds']:8.2f} ({e['tune_seconds_se']:.2f})"
        )
    print("\nVerdicts (paper: GraHTP best or near best in error and F-score, faster than the other greedy methods)")
    for p in ps:
        es = {e["method"]: e for e in summary if e["p"] == p}
        g = es["grahtp"]
        best_err = min(es.values(), key=lambda e: e["frobenius_error"])
        best_f = max(es.values(), key=lambda e: e["f_score"])
        near_err = g["frobenius_error"] <= best_err["frobenius_error"] + max(g["frobenius_error_se"], 0.0)
        near_f = g["f_score"] >= best_f["f_score"] - max(g["f_score_se"], 0.0)
        slower = [m for m in GREEDY if m in es and es[m]["tune_seconds"] <= g["tune_seconds"]]
        if not any(m in es for m in GREEDY):
            speed_text = (
                f"speed not judged (no other greedy method ran at this p; GraHTP tuning {g['tune_seconds']:.2f} s)"
            )
        else:
            speed_text = (
                f"speed {'holds' if not slower else 'fails (not slower: ' + ', '.join(slower) + ')'} "
                f"(tuning {g['tune_seconds']:.2f} s against "
                + ", ".join(f"{m} {es[m]['tune_seconds']:.2f} s" for m in GREEDY if m in es)
                + ")"
            )
        print(
            f"  p = {p}: error {'holds' if near_err else 'fails'} (GraHTP {g['frobenius_error']:.3f}, best "
            f"{best_err['method']} {best_err['frobenius_error']:.3f}); F-score {'holds' if near_f else 'fails'} "
            f"(GraHTP {g['f_score']:.3f}, best {best_f['method']} {best_f['f_score']:.3f}); {speed_text}"
        )
    if speed_row is not None:
        write_csv(out / "speed.csv", [speed_row])
        s = speed_row
        print(f"\nSpeed target (p = {s['p']}, n = 100, k = {s['true_edges']} true edges, medians of 3, 1 thread):")
        print(
            f"  GraHTP {s['grahtp_seconds']:.2f} s ({s['grahtp_eig_decomps']} eigen-decompositions); with the paper's stop "
            f"(search=false) {s['grahtp_paper_stop_seconds']:.2f} s; our glasso (search for lambda + refit) "
            f"{s['glasso_ours_seconds']:.2f} s"
        )
        if "sklearn_seconds" in s:
            print(
                f"  scikit-learn GraphicalLasso at lambda = {s['glasso_lambda']:.4g} ({s['sklearn_edges']} edges): "
                f"{s['sklearn_seconds']:.2f} s ({s['sklearn_iterations']} of at most {s['sklearn_max_iter']} iterations); ratio GraHTP / scikit-learn {s['ratio_grahtp_to_sklearn']:.2f} "
                f"({'held' if s['ratio_grahtp_to_sklearn'] <= 2 else 'not held'}: target <= 2), paper's stop "
                f"{s['ratio_paper_stop_to_sklearn']:.2f}"
            )
    if summary:
        plot(summary, ps, out / "figure6.png")
        print(f"\nwrote {out}/rows_p*.csv, summary.csv, figure6.png" + (", speed.csv" if speed_row else ""))
    elif speed_row is not None:
        print(f"\nwrote {out}/speed.csv")


def plot(summary: list[dict[str, Any]], ps: list[int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    for m in [*OURS, "sklearn"]:
        es = [e for e in summary if e["method"] == m]
        if not es:
            continue
        x = [e["p"] for e in es]
        for ax, key, label in zip(
            axes, ("frobenius_error", "f_score", "tune_seconds"), ("Frobenius error", "edge F-score", "tuning time (s)")
        ):
            ax.errorbar(x, [e[key] for e in es], yerr=[e[key + "_se"] for e in es], marker="o", capsize=3, label=m)
            ax.set_xlabel("p")
            ax.set_ylabel(label)
    axes[2].set_yscale("log")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize="small")
    fig.suptitle("Paper 000, Section 6.3.1 (Figure 6 protocol): n = 100 + 100 validation")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
