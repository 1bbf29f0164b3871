"""Paper 000, Section 6.3.2 protocol on the bundled Khan data: linear discriminant analysis with a
sparse precision matrix.

NOT comparable with the paper's Table 4: the paper uses a breast-cancer data set we do not have;
this is the same protocol on the Khan gene-expression data (4 tumour classes, 63 training and 20
test samples, 2308 genes; ``../shared/data``).

Per split (training / test):

1. genes ranked by the one-way ANOVA F statistic on the training samples; the top p kept
   (``--p``, default 40), standardized with the training mean and standard deviation;
2. the pooled within-class covariance S = (1/n) sum_l sum_{i in l} (x_i - mu_l)(x_i - mu_l)';
3. a precision matrix O from S by each method, on the model
   min -logdet(O) + <S, O>  s.t.  nnz(offdiag(O)) <= 2k,  Lu's box (auto): GraHTP, GraSP,
   forward, FoBa, our graphical LASSO (tuned to exactly k edges, refit in the box), and
   scikit-learn's GraphicalLasso (the penalized estimator, over a lambda grid) when installed;
4. LDA: delta_l(x) = x' O mu_l - mu_l' O mu_l / 2 + log pi_l, the class of largest delta;
5. k (and scikit-learn's lambda) chosen by stratified 6-fold cross-validation on the training
   samples (the gene set fixed by step 1): the largest mean validation accuracy, ties (Khan is
   easy: many k classify every held-out sample correctly) broken by the mean held-out Gaussian
   negative log-likelihood of the validation residuals from the training class means,
   -logdet(O) + <R'R / n, O>. The grid: k = 0 (diagonal LDA), 5, 10, 20, 40, 80, 160 edges.

Reported: test accuracy and per-class recall on the 20 held-out samples of the original split,
then the mean accuracy (standard error) over ``--splits`` repeated stratified re-splits of all 83
samples into 63 + 20 (default 10; ``--full``: 50). One BLAS thread for every method.

    python benchmarks/precision_lda.py
    python benchmarks/precision_lda.py --p 60 --splits 20
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
from pinning import pinned

import sparsemodel as sm

METHODS = ("grahtp", "grasp", "forward", "foba", "glasso")
K_GRID = (0, 5, 10, 20, 40, 80, 160)


def load(folder: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    def mat(name: str) -> np.ndarray:
        return np.loadtxt(folder / name, delimiter=",", skiprows=1)

    return (
        mat("Khan_xtrain.csv"),
        mat("Khan_ytrain.csv").astype(int),
        mat("Khan_xtest.csv"),
        mat("Khan_ytest.csv").astype(int),
    )


def anova_f(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    classes = np.unique(y)
    grand = X.mean(axis=0)
    between = sum(np.sum(y == c) * (X[y == c].mean(axis=0) - grand) ** 2 for c in classes) / (len(classes) - 1)
    within = sum(((X[y == c] - X[y == c].mean(axis=0)) ** 2).sum(axis=0) for c in classes) / (len(y) - len(classes))
    return between / np.maximum(within, 1e-300)


def pooled_cov(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    R = np.vstack([X[y == c] - X[y == c].mean(axis=0) for c in np.unique(y)])
    return R.T @ R / len(y)


def model(S: np.ndarray, k: int) -> sm.Problem:
    p = len(S)
    O = sm.Variable((p, p), symmetric=True, name="O")
    return sm.Problem(
        sm.minimize(-sm.logdet(O) + sm.trace(S @ O)),
        [sm.nnz(sm.offdiag(O)) <= 2 * k, sm.eig(O).between("auto", "auto")],
    )


def precision(method: str, S: np.ndarray, k: int | float) -> np.ndarray:
    if method == "sklearn":
        from sklearn.covariance import GraphicalLasso

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return GraphicalLasso(alpha=float(k), covariance="precomputed", max_iter=200).fit(S).precision_
    return model(S, int(k)).solve(solver=method).x


def lda_predict(O: np.ndarray, means: np.ndarray, priors: np.ndarray, classes: np.ndarray, X: np.ndarray) -> np.ndarray:
    OM = O @ means.T  # p x L
    delta = X @ OM - 0.5 * np.sum(means.T * OM, axis=0) + np.log(priors)
    return classes[np.argmax(delta, axis=1)]


def fit_predict(
    method: str, k: float, Xtr: np.ndarray, ytr: np.ndarray, Xte: np.ndarray, yte: np.ndarray | None = None
) -> tuple[np.ndarray, float]:
    """LDA predictions on Xte and, when yte is given, the held-out Gaussian negative log-likelihood
    of Xte's residuals from the training class means, -logdet(O) + <R'R / n, O>."""
    classes = np.unique(ytr)
    means = np.vstack([Xtr[ytr == c].mean(axis=0) for c in classes])
    priors = np.array([np.mean(ytr == c) for c in classes])
    O = precision(method, pooled_cov(Xtr, ytr), k)
    nll = math.nan
    if yte is not None:
        R = Xte - means[np.searchsorted(classes, yte)]
        sign, logdet = np.linalg.slogdet(O)
        nll = -logdet + float(np.sum((R.T @ R / len(R)) * O)) if sign > 0 else math.inf
    return lda_predict(O, means, priors, classes, Xte), nll


def stratified_folds(y: np.ndarray, folds: int, rng: np.random.Generator) -> np.ndarray:
    ids = np.empty(len(y), dtype=int)
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        ids[idx] = np.arange(len(idx)) % folds
    return ids


def grid(method: str, S: np.ndarray, p: int) -> list[float]:
    if method == "sklearn":
        lam_max = float(np.abs(S - np.diag(np.diag(S))).max())
        return [float(v) for v in lam_max * np.geomspace(0.9, 0.05, 10)]
    return [k for k in K_GRID if k <= p * (p - 1) // 2]


def one_split(Xtr: np.ndarray, ytr: np.ndarray, Xte: np.ndarray, p: int, methods: list[str], seed: int) -> dict:
    """Steps 1-5 on one training set; returns per method the chosen k, the CV accuracy, the test
    predictions and the seconds."""
    genes = np.argsort(anova_f(Xtr, ytr))[::-1][:p]
    mu, sd = Xtr[:, genes].mean(axis=0), Xtr[:, genes].std(axis=0)
    A, B = (Xtr[:, genes] - mu) / sd, (Xte[:, genes] - mu) / sd
    folds = stratified_folds(ytr, 6, np.random.default_rng(seed))
    S = pooled_cov(A, ytr)
    out = {}
    for m in methods:
        t = time.perf_counter()
        best = None
        for k in grid(m, S, p):
            accs, nlls = [], []
            try:
                for f in range(6):
                    pred, nll = fit_predict(m, k, A[folds != f], ytr[folds != f], A[folds == f], ytr[folds == f])
                    accs.append(float(np.mean(pred == ytr[folds == f])))
                    nlls.append(nll)
            except (FloatingPointError, ValueError, np.linalg.LinAlgError):  # scikit-learn: "Non SPD result"
                continue
            key = (statistics.fmean(accs), -statistics.fmean(nlls))  # accuracy, then held-out likelihood
            if best is None or key > best[1]:
                best = (k, key)
        if best is None:
            raise SystemExit(f"{m}: no value of the grid could be fitted on every fold")
        pred, _ = fit_predict(m, best[0], A, ytr, B)
        out[m] = {
            "k": best[0],
            "cv_accuracy": best[1][0],
            "cv_nll": -best[1][1],
            "pred": pred,
            "seconds": time.perf_counter() - t,
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--data", default=os.environ.get("SPARSEMODEL_DATA", str(Path(__file__).parents[2] / "shared" / "data"))
    )
    ap.add_argument("--p", type=int, default=40, help="genes kept by the ANOVA F ranking (default 40)")
    ap.add_argument("--splits", type=int, default=10, help="repeated stratified re-splits of all 83 samples")
    ap.add_argument("--full", action="store_true", help="50 re-splits")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/out/precision_lda", help="output folder (files never overwritten)")
    a = ap.parse_args()
    folder = Path(a.data)
    if not (folder / "Khan_xtrain.csv").exists():
        raise SystemExit(f"Khan data not found in {folder}; give --data or SPARSEMODEL_DATA")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in ("original_split.csv", "resplits.csv"):
        if (out / name).exists():
            raise SystemExit(f"{out / name} exists; choose another --out (results are never overwritten)")
    Xtr, ytr, Xte, yte = load(folder)
    methods = list(METHODS)
    try:
        import sklearn  # noqa: F401

        methods.append("sklearn")
    except ImportError:
        print("scikit-learn not installed: its GraphicalLasso is left out")
    splits = 50 if a.full else a.splits
    classes = [int(c) for c in np.unique(np.concatenate([ytr, yte]))]
    print("Khan data, Section 6.3.2 protocol. NOT comparable with the paper's Table 4 (different data).")
    print(f"p = {a.p} genes by ANOVA F on the training samples; k by stratified 6-fold CV accuracy; 1 BLAS thread\n")
    rows = []
    with pinned(1):
        res = one_split(Xtr, ytr, Xte, a.p, methods, a.seed)
        print("original split (63 training, 20 test samples)")
        print(
            f"{'method':8} {'k / lambda':>11} {'CV acc':>7} {'CV NLL':>8} {'test acc':>9}  recall per class {classes}   seconds"
        )
        for m, r in res.items():
            acc = float(np.mean(r["pred"] == yte))
            rec = [float(np.mean(r["pred"][yte == c] == c)) if np.any(yte == c) else math.nan for c in classes]
            rows.append(
                {"method": m, "k_or_lambda": r["k"], "cv_accuracy": r["cv_accuracy"], "cv_nll": r["cv_nll"]}
                | {"test_accuracy": acc}
                | {f"recall_class_{c}": v for c, v in zip(classes, rec)}
                | {"seconds": r["seconds"]}
            )
            kk = f"{r['k']:.4g}" if m == "sklearn" else str(r["k"])
            print(
                f"{m:8} {kk:>11} {r['cv_accuracy']:7.3f} {r['cv_nll']:8.3f} {acc:9.3f}  "
                f"{' '.join(f'{v:.2f}' for v in rec)}   {r['seconds']:.1f}"
            )
        with open(out / "original_split.csv", "x", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        X = np.vstack([Xtr, Xte])
        y = np.concatenate([ytr, yte])
        rng = np.random.default_rng(a.seed)
        accs: dict[str, list[float]] = {m: [] for m in methods}
        resplit_rows = []
        for s in range(splits):
            test = np.zeros(len(y), dtype=bool)
            for c in classes:  # stratified: each class in proportion, 20 test samples in all
                idx = np.flatnonzero(y == c)
                n_test = max(1, round(20 * len(idx) / len(y)))
                test[rng.choice(idx, n_test, replace=False)] = True
            r = one_split(X[~test], y[~test], X[test], a.p, methods, a.seed + 1 + s)
            for m in methods:
                acc = float(np.mean(r[m]["pred"] == y[test]))
                accs[m].append(acc)
                resplit_rows.append(
                    {"split": s, "method": m, "k_or_lambda": r[m]["k"], "test_accuracy": acc, "n_test": int(test.sum())}
                )
            print(f"  re-split {s + 1}/{splits} done", flush=True)
        with open(out / "resplits.csv", "x", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(resplit_rows[0]))
            w.writeheader()
            w.writerows(resplit_rows)
    print(f"\nrepeated stratified re-splits of all 83 samples ({splits}): mean test accuracy (standard error)")
    for m in methods:
        v = accs[m]
        se = statistics.stdev(v) / math.sqrt(len(v)) if len(v) > 1 else math.nan
        print(f"  {m:8} {statistics.fmean(v):.3f} ({se:.3f})")
    print(f"\nwrote {out}/original_split.csv, resplits.csv")


if __name__ == "__main__":
    main()
