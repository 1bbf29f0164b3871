"""`auto` (the default solver) against abess, and skscope when installed, on the generalized linear problems
listed below.

Problems (every one a sparsity-constrained model written with the builder, solved by
``Solver.solve`` on the lowered problem):

* ``logistic62`` -- paper 000, Section 6.2.1: X 500 x n Gaussian, 50 nonzeros from N(5, 1)
  (``sparsemodel.datasets.sparse_logistic_regression``), labels with P(v = 1) = 1 / (1 + exp(-2 w'u));
  mean logistic loss + 1e-5/2 ||w||^2 (the lambda of Section 6.2.2), k = 50; n = 500 and 1000; per seed;
* ``caravan`` -- the bundled Caravan data: logistic loss with a free intercept on standardized
  columns, lambda = 1e-5 on the coefficients; per k;
* ``linreg61`` -- paper 000, Section 6.1 near the phase transition: n = 175, p = 500, 50 nonzeros,
  k = 50, least squares / (2n); per seed;
* ``binomial``, ``poisson``, ``gamma`` -- data from ``abess.datasets.make_glm_data`` (rho = 0.5,
  sigma = 1, seeded by ``np.random.seed`` as abess's tests do), a free intercept; the logistic
  loss, the Poisson log-likelihood sum(exp(z) - y z), and the Gamma log-likelihood written out by
  hand with the canonical link, sum(y z - log z) with z = X w + b > 0; per seed, at (n, p, k) =
  (100, 20, 3) and (500, 100, 10);
* ``multinomial`` -- ``abess.datasets.make_multivariate_glm_data`` (3 classes, rho = 0.5):
  softmax written ``sum(logsumexp(X W + b, axis = 1)) - sum(Y .* (X W + b))`` with all classes free
  and row groups (``nnz(W, groups = g) <= k``, one label per row of W); per seed;
* ``medium`` -- least squares and logistic regression at n = 1000, p = 5000, k = 20 (a Gaussian
  design, coefficients of random sign and size 1 to 2): the Jacobian (n p = 5e6 entries) is above
  the storage limit, so every product streams from the data;
* ``large`` (``--size full`` only) -- the same at n = 5000, p = 10000, k = 100, skscope's comparison
  size with abess; 2 seeds each;
* ``khan`` -- the Khan gene-expression data (63 x 2308, 4 classes; ``--data``): the same softmax
  with all classes free, row groups, standardized columns and lam/2 ||W||^2 (lam = 1); per k.

Per case: the objective ratio 1 + (f_auto - f_ref) / |f_ref| (the plain ratio for positive
objectives; the log-likelihoods of Poisson and Gamma can be negative); a case counts as "at most"
when f_auto <= f_ref + 1e-9 max(1, |f_ref|) (absolute below 1: a separable logistic or softmax loss
tends to 0, where a ratio of two values near 1e-9 means nothing); f_ref is the lower of our
objective at abess's coefficients and at the refit of abess's support (the best abess's answer can
give under our model), and the time ratio t_auto / t_abess. Everyone runs in this process with one
BLAS thread (threadpoolctl), each solver warmed up once; our time is ``Solver.solve`` on the lowered
problem, the median of ``--repeat`` runs (3; a single run's ratio moved by up to 0.4 between runs of
this command, which decided the per-family verdicts), the runs after the first re-solving the same
lowering (its kernel arrays built: benchmarks/small_vs_abess.py times a first solve apart); the
lowering, shared by every k of a problem, is reported per problem; abess's is
``fit``; skscope's is ``ScopeSolver.solve`` with ``jit=True`` (its JAX compilation included, as a
user pays it). abess gets the same ridge (``alpha``) and intercept as our model.

Targets: no failure; objective ratio <= 1 + 1e-9 in at least 95 % of cases; median time
ratio <= 1, and at most 1.5 in every problem family. The script prints each verdict.

    python benchmarks/vs_abess.py                      # the small size (a few minutes)
    python benchmarks/vs_abess.py --size full --csv vs_abess.csv
    python benchmarks/vs_abess.py --problems caravan,khan --no-skscope
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pinning import pinned
from tabulate import tabulate

import sparsemodel as sm
from sparsemodel.datasets import caravan, sparse_linear_regression, sparse_logistic_regression
from sparsemodel.solvers import get_solver

TOL = 1e-9  # the objective target: f_auto <= f_ref + TOL max(1, |f_ref|) (the solvers' own convention)


@dataclass
class Case:
    problem: str
    label: str
    lp: Any  # the lowered problem at this case's bound
    abess: Callable[[], np.ndarray] | None  # -> our flat x
    skscope: Callable[[], np.ndarray] | None = None  # -> our flat x
    row: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------- competitors


def _abess():
    try:
        import abess

        return abess
    except ImportError:
        return None


def _skscope():
    try:
        import jax

        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        from skscope import ScopeSolver

        return ScopeSolver, jnp
    except ImportError:
        return None


def skscope_fit(lp: Any, k: int, loss: Callable[[Any, Any], Any], data: Any) -> Callable[[], np.ndarray]:
    """ScopeSolver on our flat x: constrained units as groups, free coordinates preselected."""

    def run() -> np.ndarray:
        ScopeSolver, _ = _skscope()
        sps = lp.sparsity
        group = np.empty(lp.n, dtype=np.int64)
        units = sps.unit_of if sps.unit_of is not None else np.arange(sps.size)
        # skscope wants adjacent group members numbered from 0 in order: number groups by first position
        labels = np.empty(lp.n, dtype=np.int64)
        labels[sps.coords] = units
        labels[sps.free] = units.max() + 1 + np.arange(len(sps.free))
        _, first = np.unique(labels, return_index=True)
        rank = np.empty(len(first), dtype=np.int64)
        rank[np.argsort(first)] = np.arange(len(first))
        group = rank[labels]
        free_groups = sorted(set(group[sps.free].tolist()))
        solver = ScopeSolver(
            lp.n, sparsity=k + len(free_groups), sample_size=lp.n_samples, preselect=free_groups, group=group
        )
        return np.asarray(solver.solve(loss, data=data, jit=True))

    return run


# ---------------------------------------------------------------------- problems


def logistic62(args: argparse.Namespace) -> list[Case]:
    ab, sk = _abess(), _skscope() if args.skscope else None
    cases = []
    lam = 1e-5
    for n in (500, 1000):
        for seed in range(args.seeds):
            X, v, _ = sparse_logistic_regression(n, seed=seed)
            w = sm.Variable(X.shape[1], name="w")
            prob = sm.Problem(
                sm.minimize(sm.mean(sm.logistic(-v * (X @ w))) + lam / 2 * sm.sum_squares(w)), [sm.nnz(w) <= 50]
            )
            lp = prob.lower()
            y01 = (v > 0).astype(float)

            def fit(X=X, y01=y01, n=n) -> np.ndarray:
                m = ab.linear.LogisticRegression(support_size=[50], fit_intercept=False, alpha=n * lam / 2)
                return np.asarray(m.fit(X, y01).coef_, dtype=float)

            skf = None
            if sk is not None:
                jnp = sk[1]

                def loss(x, d, jnp=jnp):
                    return jnp.mean(jnp.logaddexp(0.0, -d[1] * (d[0] @ x))) + lam / 2 * jnp.sum(x * x)

                skf = skscope_fit(lp, 50, loss, (X, v))
            cases.append(Case("logistic62", f"n={n} seed={seed}", lp, fit if ab else None, skf))
    return cases


def caravan_cases(args: argparse.Namespace) -> list[Case]:
    ab, sk = _abess(), _skscope() if args.skscope else None
    X, v, _ = caravan()
    Z = (X - X.mean(0)) / X.std(0)
    n, p = Z.shape
    lam = 1e-5
    w = sm.Variable(p + 1, name="w")
    prob = sm.Problem(
        sm.minimize(sm.mean(sm.logistic(-v * (Z @ w[1:] + w[0]))) + lam / 2 * sm.sum_squares(w[1:])),
        [sm.nnz(w[1:]) <= 2],
    )
    lp0 = prob.lower()
    y01 = (v > 0).astype(float)
    ks = range(2, 31) if args.size == "full" else range(2, 31, 4)
    cases = []
    for k in ks:

        def fit(k=k) -> np.ndarray:
            m = ab.linear.LogisticRegression(support_size=[k], alpha=n * lam / 2).fit(Z, y01)
            return np.concatenate([[float(m.intercept_)], np.asarray(m.coef_, dtype=float)])

        skf = None
        if sk is not None:
            jnp = sk[1]

            def loss(x, d, jnp=jnp):
                z = d[0] @ x[1:] + x[0]
                return jnp.mean(jnp.logaddexp(0.0, -d[1] * z)) + lam / 2 * jnp.sum(x[1:] ** 2)

            skf = skscope_fit(lp0.with_budget(k), k, loss, (Z, v))
        cases.append(Case("caravan", f"k={k}", lp0.with_budget(k), fit if ab else None, skf))
    return cases


def linreg61(args: argparse.Namespace) -> list[Case]:
    ab, sk = _abess(), _skscope() if args.skscope else None
    cases = []
    n = 175
    for seed in range(args.seeds * 4):
        X, y, _ = sparse_linear_regression(n, seed=seed)
        w = sm.Variable(X.shape[1], name="w")
        lp = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / (2 * n)), [sm.nnz(w) <= 50]).lower()

        def fit(X=X, y=y) -> np.ndarray:
            return np.asarray(
                ab.linear.LinearRegression(support_size=[50], fit_intercept=False).fit(X, y).coef_, dtype=float
            )

        skf = None
        if sk is not None:
            jnp = sk[1]

            def loss(x, d, jnp=jnp):
                r = d[0] @ x - d[1]
                return jnp.sum(r * r) / (2 * d[0].shape[0])

            skf = skscope_fit(lp, 50, loss, (X, y))
        cases.append(Case("linreg61", f"seed={seed}", lp, fit if ab else None, skf))
    return cases


def glm_cases(family: str, args: argparse.Namespace) -> list[Case]:
    ab, sk = _abess(), _skscope() if args.skscope else None
    if ab is None:
        return []
    from abess.datasets import make_glm_data, make_multivariate_glm_data

    sizes = [(100, 20, 3), (500, 100, 10)]
    cases = []
    for n, p, k in sizes:
        for seed in range(args.seeds):
            np.random.seed(seed)
            if family == "multinomial":
                M = 3
                d = make_multivariate_glm_data(n=n, p=p, k=k, M=M, family="multinomial", rho=0.5)
                X, Y = d.x, d.y
                W = sm.Variable((p, M), name="W")
                b = sm.Variable(M, name="b")
                Zs = X @ W + b
                prob = sm.Problem(
                    sm.minimize(sm.sum(sm.logsumexp(Zs, axis=1)) - sm.sum(Y * Zs)),
                    [sm.nnz(W, groups=np.repeat(np.arange(p), M)) <= k],
                )
                lp = prob.lower()

                def fit(X=X, Y=Y, k=k, lp=lp) -> np.ndarray:
                    m = ab.linear.MultinomialRegression(support_size=[k]).fit(X, Y)
                    return lp.layout.pack({"W": np.asarray(m.coef_), "b": np.asarray(m.intercept_)})

                skf = None
                if sk is not None:
                    jnp, ML, pp = sk[1], M, p

                    def loss(x, dd, ML=ML, pp=pp, jnp=jnp):
                        Wm = x[: pp * ML].reshape(pp, ML)
                        Zm = dd[0] @ Wm + x[pp * ML :]
                        return jnp.sum(jax_lse(jnp, Zm)) - jnp.sum(dd[1] * Zm)  # stable: skscope aborts on inf

                    skf = skscope_fit(lp, k, loss, (X, Y))
                cases.append(Case("multinomial", f"n={n} p={p} k={k} seed={seed}", lp, fit, skf))
                continue
            d = make_glm_data(n=n, p=p, k=k, family=family, rho=0.5, sigma=1)
            X, y = d.x, d.y
            w = sm.Variable(p + 1, name="w")
            z = X @ w[1:] + w[0]
            if family == "binomial":
                loss_expr = sm.sum(sm.logistic(-(2 * y - 1) * z))
                model, sign = ab.linear.LogisticRegression, 1.0
            elif family == "poisson":
                loss_expr = sm.sum(sm.exp(z) - y * z)
                model, sign = ab.linear.PoissonRegression, 1.0
            else:  # gamma, canonical link: abess's eta = x'beta < 0 is our -z
                loss_expr = sm.sum(y * z - sm.log(z))
                model, sign = ab.linear.GammaRegression, -1.0
            lp = sm.Problem(sm.minimize(loss_expr), [sm.nnz(w[1:]) <= k]).lower()

            def fit(X=X, y=y, k=k, model=model, sign=sign) -> np.ndarray:
                m = model(support_size=[k]).fit(X, y)
                return sign * np.concatenate([[float(m.intercept_)], np.asarray(m.coef_, dtype=float)])

            skf = None
            if sk is not None and family != "gamma":  # gamma: skscope starts at 0, outside the domain
                jnp = sk[1]
                if family == "binomial":

                    def loss(x, dd, jnp=jnp):
                        return jnp.sum(jnp.logaddexp(0.0, -(2 * dd[1] - 1) * (dd[0] @ x[1:] + x[0])))

                else:

                    def loss(x, dd, jnp=jnp):
                        zz = dd[0] @ x[1:] + x[0]
                        return jnp.sum(jnp.exp(zz) - dd[1] * zz)

                skf = skscope_fit(lp, k, loss, (X, y))
            cases.append(Case(family, f"n={n} p={p} k={k} seed={seed}", lp, fit, skf))
    return cases


def khan_cases(args: argparse.Namespace) -> list[Case]:
    ab, sk = _abess(), _skscope() if args.skscope else None
    path = os.path.join(args.data, "Khan_xtrain.csv")
    if not os.path.exists(path):
        print(f"khan: {path} not found (give --data DIR); skipped")
        return []
    Xr = np.loadtxt(path, delimiter=",", skiprows=1)
    yr = np.loadtxt(os.path.join(args.data, "Khan_ytrain.csv"), delimiter=",", skiprows=1).astype(int)
    X = (Xr - Xr.mean(0)) / Xr.std(0)
    n, p = X.shape
    M = 4
    Y = np.eye(M)[yr - 1]
    lam = 1.0
    W = sm.Variable((p, M), name="W")
    b = sm.Variable(M, name="b")
    Zs = X @ W + b
    prob = sm.Problem(
        sm.minimize(sm.sum(sm.logsumexp(Zs, axis=1)) - sm.sum(Y * Zs) + lam / 2 * sm.sum_squares(W)),
        [sm.nnz(W, groups=np.repeat(np.arange(p), M)) <= 2],
    )
    lp0 = prob.lower()
    ks = range(2, 21, 2) if args.size == "full" else (2, 5, 10, 20)
    cases = []
    for k in ks:
        lpk = lp0.with_budget(k)

        def fit(k=k, lpk=lpk) -> np.ndarray:
            m = ab.linear.MultinomialRegression(support_size=[k], alpha=lam / 2).fit(X, Y)
            return lpk.layout.pack({"W": np.asarray(m.coef_), "b": np.asarray(m.intercept_)})

        skf = None
        if sk is not None:
            jnp = sk[1]

            def loss(x, dd, jnp=jnp):
                Wm = x[: p * M].reshape(p, M)
                Zm = dd[0] @ Wm + x[p * M :]
                return jnp.sum(jax_lse(jnp, Zm)) - jnp.sum(dd[1] * Zm) + lam / 2 * jnp.sum(Wm * Wm)

            skf = skscope_fit(lpk, k, loss, (X, Y))
        cases.append(Case("khan", f"k={k}", lpk, fit if ab else None, skf))
    return cases


def sized_cases(name: str, n: int, p: int, k: int, args: argparse.Namespace, seeds: int) -> list[Case]:
    """Least squares and logistic regression at one size (Gaussian design, k coefficients of
    random sign and size 1 to 2 at random positions; noise N(0, 1), or labels drawn from the
    logistic model): skscope's comparison size with abess (n = 5000, p = 10000, k = 100) and a
    medium one whose Jacobian (n * p entries) is above the storage limit (design.FULL_LIMIT)."""
    ab = _abess()
    cases = []
    for kind in ("least squares", "logistic"):
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            X = rng.standard_normal((n, p))
            w0 = np.zeros(p)
            S = rng.choice(p, k, replace=False)
            w0[S] = rng.choice([-1.0, 1.0], k) * rng.uniform(1, 2, k)
            w = sm.Variable(p, name="w")
            if kind == "least squares":
                y = X @ w0 + rng.standard_normal(n)
                prob = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / (2 * n)), [sm.nnz(w) <= k])
                model, target = (ab.linear.LinearRegression if ab else None), y
            else:
                v = np.where(rng.random(n) < 1 / (1 + np.exp(-(X @ w0))), 1.0, -1.0)
                prob = sm.Problem(sm.minimize(sm.mean(sm.logistic(-v * (X @ w)))), [sm.nnz(w) <= k])
                model, target = (ab.linear.LogisticRegression if ab else None), (v > 0).astype(float)

            def fit(X=X, target=target, model=model) -> np.ndarray:
                return np.asarray(model(support_size=[k], fit_intercept=False).fit(X, target).coef_, dtype=float)

            cases.append(Case(name, f"{kind} n={n} p={p} k={k} seed={seed}", prob.lower(), fit if ab else None))
    return cases


def jax_lse(jnp: Any, Z: Any) -> Any:
    m = jnp.max(Z, axis=1, keepdims=True)
    return jnp.log(jnp.sum(jnp.exp(Z - m), axis=1)) + m[:, 0]


PROBLEMS = {
    "logistic62": logistic62,
    "caravan": caravan_cases,
    "linreg61": linreg61,
    "binomial": lambda a: glm_cases("binomial", a),
    "poisson": lambda a: glm_cases("poisson", a),
    "gamma": lambda a: glm_cases("gamma", a),
    "multinomial": lambda a: glm_cases("multinomial", a),
    "khan": khan_cases,
    # above the Jacobian storage limit (n * p = 5e6 > design.FULL_LIMIT)
    "medium": lambda a: sized_cases("medium", 1000, 5000, 20, a, a.seeds),
    # skscope's comparison size (full size only: abess takes seconds per fit)
    "large": lambda a: sized_cases("large", 5000, 10000, 100, a, 2) if a.size == "full" else [],
}


# ---------------------------------------------------------------------- measuring


def reference(lp: Any, x: np.ndarray) -> float:
    """The best objective abess's answer gives under our model: at its coefficients, or refitted
    on its support (whichever is lower)."""
    f_raw = lp.oracle.peek(x) if np.all(np.isfinite(x)) else np.inf
    sel = lp.sparsity.support(x)
    f_fit = lp.restricted_minimize(sel).f
    return float(min(f_raw if np.isfinite(f_raw) else np.inf, f_fit))


def ratio(f: float, ref: float) -> float:
    return 1.0 + (f - ref) / max(abs(ref), 1e-300)


def at_most(f: float, ref: float) -> bool:
    """f <= ref up to TOL relative, absolute below 1 (a separable loss tends to 0 on both sides)."""
    return f <= ref + TOL * max(1.0, abs(ref))


def timed(fn: Callable[[], Any], repeat: int) -> tuple[Any, float]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def run_case(c: Case, repeat: int, check_lean: bool = False) -> dict[str, Any]:
    auto = get_solver("auto")()
    res, t_auto = timed(lambda: auto.solve(c.lp), repeat)
    row = {
        "problem": c.problem,
        "case": c.label,
        "k": c.lp.budget,
        "f_auto": res.objective,
        "t_auto": t_auto,
        "status": res.status,
        "swaps": res.extra.get("swaps"),
        "lean": res.extra.get("kernel") == "compiled",
    }
    if check_lean:  # the Python pipeline (lean=false) on the same case: the same steps, the same objective
        py, t_py = timed(lambda: get_solver("auto")(lean=False).solve(c.lp), 1)
        row.update(
            f_python=py.objective, t_python=t_py, lean_diff=(res.objective - py.objective) / max(1.0, abs(py.objective))
        )
    if c.abess is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            xa, t_ab = timed(c.abess, repeat)
        ref = reference(c.lp, xa)
        row.update(
            f_abess=ref,
            t_abess=t_ab,
            obj_ratio=ratio(res.objective, ref),
            ok=at_most(res.objective, ref),
            time_ratio=t_auto / t_ab,
        )
    if c.skscope is not None:
        try:
            xs, t_sk = timed(c.skscope, 1)
            fs = reference(c.lp, xs)
            row.update(
                f_skscope=fs,
                t_skscope=t_sk,
                obj_ratio_sk=ratio(res.objective, fs),
                ok_sk=at_most(res.objective, fs),
                time_ratio_sk=t_auto / t_sk,
            )
        except Exception as exc:  # a competitor's failure is reported, not fatal
            row.update(skscope_error=f"{type(exc).__name__}: {str(exc)[:80]}")
    return row


def summarize(rows: list[dict[str, Any]], key: str, tkey: str, okkey: str) -> list[Any]:
    r = [x[key] for x in rows if key in x]
    t = [x[tkey] for x in rows if tkey in x]
    if not r:
        return [len(rows), "-", "-", "-", "-", "-"]
    ok = sum(bool(x[okkey]) for x in rows if okkey in x)
    return [
        len(r),
        f"{ok}/{len(r)} ({100 * ok / len(r):.0f}%)",
        f"{statistics.median(r):.6f}",
        f"{max(r):.6f}",
        f"{statistics.median(t):.2f}",
        f"{max(t):.2f}",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=("small", "full"), default="small")
    ap.add_argument("--problems", default=",".join(PROBLEMS))
    ap.add_argument("--seeds", type=int, default=None, help="seeds per problem (default: 2 small, 5 full)")
    ap.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="timed runs per case, median kept (3; the runs after the first re-solve the same lowering)",
    )
    ap.add_argument("--data", default=os.environ.get("SPARSEMODEL_DATA", "/work/shared/data"))
    ap.add_argument("--no-skscope", dest="skscope", action="store_false")
    ap.add_argument("--csv", default=None)
    ap.add_argument(
        "--check-lean",
        action="store_true",
        help="also run auto's Python pipeline (lean=false) on every case and compare the objectives",
    )
    args = ap.parse_args()
    if args.repeat is not None and args.repeat < 1:
        ap.error(f"--repeat {args.repeat}: give a whole number of runs >= 1")
    args.seeds = args.seeds or (2 if args.size == "small" else 5)
    repeat = args.repeat or 3
    if _abess() is None:
        print("abess is not installed (pip install -e .[bench]); only our objectives are printed")
    if args.skscope and _skscope() is None:
        args.skscope = False
    rows: list[dict[str, Any]] = []
    with pinned(1):
        for name in args.problems.split(","):
            t0 = time.perf_counter()
            cases = PROBLEMS[name](args)
            print(f"{name}: {len(cases)} cases (data and lowering {time.perf_counter() - t0:.2f} s)", flush=True)
            if cases:  # warm up: imports, first-call costs
                get_solver("auto")().solve(cases[0].lp)
                if cases[0].abess is not None:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        cases[0].abess()
            for c in cases:
                row = run_case(c, repeat, args.check_lean)
                rows.append(row)
                print(
                    f"  {c.label:28s} auto {row['f_auto']:.9g} ({1e3 * row['t_auto']:.1f} ms)"
                    + (
                        f"  abess {row['f_abess']:.9g} ({1e3 * row['t_abess']:.1f} ms)  "
                        f"ratio {row['obj_ratio']:.9f}  time {row['time_ratio']:.2f}"
                        if "f_abess" in row
                        else ""
                    )
                    + (
                        f"  skscope {row['obj_ratio_sk']:.6f} / {row['time_ratio_sk']:.3f}"
                        if "f_skscope" in row
                        else ""
                    )
                    + (f"  skscope failed: {row['skscope_error']}" if "skscope_error" in row else "")
                    + (
                        f"  python pipeline {row['f_python']:.9g} ({1e3 * row['t_python']:.1f} ms, "
                        f"{'lean' if row['lean'] else 'not lean'}, diff {row['lean_diff']:+.1e})"
                        if "f_python" in row
                        else ""
                    ),
                    flush=True,
                )
    headers = [
        "problem",
        "cases",
        "f_auto <= f_ref (tol 1e-9)",
        "median obj ratio",
        "worst obj ratio",
        "median time ratio",
        "worst time ratio",
    ]
    table = []
    for name in args.problems.split(","):
        sub = [r for r in rows if r["problem"] == name]
        if sub:
            table.append([name] + summarize(sub, "obj_ratio", "time_ratio", "ok"))
    table.append(["all"] + summarize(rows, "obj_ratio", "time_ratio", "ok"))
    print("\nauto against abess (objective ratio = 1 + (f_auto - f_abess) / |f_abess|; time ratio = t_auto / t_abess)")
    print(tabulate(table, headers=headers))
    if any("obj_ratio_sk" in r for r in rows):
        table = []
        for name in args.problems.split(","):
            sub = [r for r in rows if r["problem"] == name and "obj_ratio_sk" in r]
            if sub:
                table.append([name] + summarize(sub, "obj_ratio_sk", "time_ratio_sk", "ok_sk"))
        table.append(
            ["all"] + summarize([r for r in rows if "obj_ratio_sk" in r], "obj_ratio_sk", "time_ratio_sk", "ok_sk")
        )
        print("\nauto against skscope (ScopeSolver, JAX compilation included)")
        print(tabulate(table, headers=headers))
    timed_rows = [r for r in rows if "time_ratio" in r]
    if timed_rows:
        ok = sum(bool(r["ok"]) for r in timed_rows)
        med = statistics.median(r["time_ratio"] for r in timed_rows)
        fams = {r["problem"] for r in timed_rows}
        worst = max(
            ((statistics.median(r["time_ratio"] for r in timed_rows if r["problem"] == f_), f_) for f_ in fams),
        )
        print("\ntargets:")
        print(f"  no failure: {'holds' if all(r['status'] != 'diverged' for r in rows) else 'fails'}")
        print(
            f"  objective at most abess's in >= 95 % of cases: {100 * ok / len(timed_rows):.1f} % "
            f"({'holds' if ok >= 0.95 * len(timed_rows) else 'fails'})"
        )
        print(f"  median time ratio <= 1: {med:.2f} ({'holds' if med <= 1 else 'fails'})")
        print(
            f"  median time ratio <= 1.5 in every problem family: worst {worst[1]} {worst[0]:.2f} "
            f"({'holds' if worst[0] <= 1.5 else 'fails'})"
        )
    checked = [r for r in rows if "lean_diff" in r]
    if checked:
        lean = [r for r in checked if r["lean"]]
        differ = [r for r in checked if abs(r["lean_diff"]) > TOL]
        print(
            f"\nthe compiled lean path against the Python pipeline: {len(lean)} of {len(checked)} cases ran the kernel; "
            f"objectives differing by more than {TOL:g} (relative, absolute below 1): {len(differ)}"
            + "".join(f"\n  {r['problem']} {r['case']}: {r['lean_diff']:+.2e}" for r in differ)
        )
    if args.csv:
        keys = sorted({k for r in rows for k in r})
        with open(args.csv, "w", newline="") as fh:
            wr = csv.DictWriter(fh, fieldnames=keys)
            wr.writeheader()
            wr.writerows(rows)
        print(f"\nwrote {args.csv}")


if __name__ == "__main__":
    main()
