"""The knockoff filter with l0 statistics: W is antisymmetric under swapping a variable with its
knockoff, the false discovery rate is controlled on seeded simulations (mean FDP within q plus two
standard errors), every loss of the language runs through the same path, the same seed gives the
same answer serially and on workers, and the CLI writes its reports."""

from __future__ import annotations

import json

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.cli import main
from sparsemodel.inference import knockoffs
from sparsemodel.inference.base import InferenceError


def ar1(p: int, rho: float) -> np.ndarray:
    i = np.arange(p)
    return rho ** np.abs(np.subtract.outer(i, i))


def linear(seed: int, n: int = 200, p: int = 40, s: int = 8, amp: float = 0.45, rho: float = 0.3, k: int = 16):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) @ np.linalg.cholesky(ar1(p, rho)).T
    beta = np.zeros(p)
    beta[rng.choice(p, s, replace=False)] = amp * rng.choice([-1.0, 1.0], s)
    y = X @ beta + rng.standard_normal(n)
    w = sm.Variable(p, name="w")
    prob = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / (2 * n)), [sm.nnz(w) <= k])
    return prob, X, beta


@pytest.mark.parametrize("statistic", ["path", "support", "coef"])
@pytest.mark.parametrize("solver", ["auto", "omp"])
def test_w_is_antisymmetric_under_swapping_variables_with_their_knockoffs(statistic, solver):
    """Swap the columns J of X with their knockoffs: W_j changes sign for j in J, nothing else
    changes (Barber and Candes 2015, Section 2.2's antisymmetry; exact: the fits are the same
    problem with its columns permuted)."""
    rng = np.random.default_rng(0)
    n, p = 150, 20
    X, Xk = rng.standard_normal((n, p)), rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[:4] = [1.0, -0.8, 0.6, 0.5]
    y = X @ beta + rng.standard_normal(n)

    def model(A):
        w = sm.Variable(p, name="w")
        return sm.Problem(sm.minimize(sm.sum_squares(A @ w - y) / (2 * n) + 0.01 * sm.sum_squares(w)), [sm.nnz(w) <= 8])

    J = np.array([0, 3, 5, 7, 11, 12, 19])
    X2, Xk2 = X.copy(), Xk.copy()
    X2[:, J], Xk2[:, J] = Xk[:, J], X[:, J]
    r1 = knockoffs(model(X), knockoffs=Xk, statistic=statistic, solver=solver)
    r2 = knockoffs(model(X2), knockoffs=Xk2, statistic=statistic, solver=solver)
    flip = np.ones(p)
    flip[J] = -1
    assert np.count_nonzero(r1.W[J]) >= 3  # the swap is tested on statistics that are not zero
    assert np.allclose(r2.W, flip * r1.W, rtol=0, atol=1e-9)


def test_the_fdr_is_controlled_on_seeded_linear_simulations():
    """30 replications with known covariance (exact model-X knockoffs): the mean false discovery
    proportion at q = 0.2 is within q plus two standard errors, and the filter finds most signals."""
    q, fdp, power = 0.2, [], []
    for seed in range(30):
        prob, X, beta = linear(seed)
        res = knockoffs(prob, fdr=q, seed=seed, mu=np.zeros(X.shape[1]), sigma=ar1(X.shape[1], 0.3), truth={"w": beta})
        fdp.append(res.fdp)
        power.append(res.power)
    fdp = np.array(fdp)
    assert fdp.mean() <= q + 2 * fdp.std(ddof=1) / np.sqrt(len(fdp))
    assert np.mean(power) > 0.5


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["logistic", "poisson", "cox", "linear_estimated"])
def test_the_fdr_is_controlled_for_every_loss(loss):
    """40 replications per loss, q = 0.2: logistic, Poisson and Cox with the known covariance, and
    least squares with the covariance estimated from X (Ledoit-Wolf: model-X knockoffs are then
    only approximately exchangeable, and the FDR is checked all the same)."""
    q, fdp = 0.2, []
    n, p, s = 250, 40, 8
    for seed in range(40):
        rng = np.random.default_rng(100 + seed)
        X = rng.standard_normal((n, p)) @ np.linalg.cholesky(ar1(p, 0.3)).T
        beta = np.zeros(p)
        beta[rng.choice(p, s, replace=False)] = rng.choice([-1.0, 1.0], s)
        eta = X @ beta
        w = sm.Variable(p, name="w")
        if loss == "logistic":
            y = np.where(rng.uniform(size=n) < 1 / (1 + np.exp(-0.8 * eta)), 1.0, -1.0)
            f = sm.mean(sm.logistic(-y * (X @ w)))
        elif loss == "poisson":
            y = rng.poisson(np.exp(0.25 * eta))
            f = sm.mean(sm.exp(X @ w) - y * (X @ w))
        elif loss == "cox":
            t = rng.exponential(np.exp(-0.4 * eta))
            c = rng.exponential(3 * np.median(t), n)
            f = sm.cox(X @ w, np.minimum(t, c), (t <= c).astype(float)) / n
        else:
            y = 0.4 * eta + rng.standard_normal(n)
            f = sm.sum_squares(X @ w - y) / (2 * n)
        prob = sm.Problem(sm.minimize(f), [sm.nnz(w) <= 16])
        known = {} if loss == "linear_estimated" else {"mu": np.zeros(p), "sigma": ar1(p, 0.3)}
        fdp.append(knockoffs(prob, fdr=q, seed=seed, truth={"w": beta}, **known).fdp)
    fdp = np.array(fdp)
    assert fdp.mean() <= q + 2 * fdp.std(ddof=1) / np.sqrt(len(fdp))


def test_fixed_x_knockoffs_and_the_derandomized_filter():
    prob, X, beta = linear(3, n=200, p=30, s=6, amp=0.6)
    fx = knockoffs(prob, fdr=0.2, fixed_x=True, truth={"w": beta})
    assert fx.power >= 0.8 and fx.construction.startswith("fixed-X")
    # knockoff+ at alpha_kn needs 1 / alpha_kn selections: with 6 signals, q = 0.4 (alpha_kn = 0.2)
    der = knockoffs(prob, fdr=0.4, draws=4, seed=1, truth={"w": beta})
    assert der.evalues is not None and len(der.draws) == 4
    # e-BH at q on the averaged e-values (Ren and Barber 2023): what the result selected
    p = len(der.evalues)
    order = np.argsort(-der.evalues, kind="stable")
    ok = [j for j in range(1, p + 1) if der.evalues[order[j - 1]] >= p / (0.4 * j)]
    assert sorted(der.selected.tolist()) == sorted(order[: max(ok, default=0)].tolist())
    assert der.power >= 0.8


def test_fixed_x_is_refused_for_a_loss_other_than_least_squares():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((100, 10))
    lab = np.where(X[:, 0] + rng.standard_normal(100) > 0, 1.0, -1.0)
    w = sm.Variable(10, name="w")
    prob = sm.Problem(sm.minimize(sm.mean(sm.logistic(-lab * (X @ w)))), [sm.nnz(w) <= 3])
    with pytest.raises(InferenceError, match="least squares"):
        knockoffs(prob, fixed_x=True)


@pytest.mark.parametrize("loss", ["logistic", "poisson", "cox", "multinomial"])
def test_every_loss_finds_strong_signals(loss):
    """Recovery with a known truth: five strong signals among 20 variables get the largest W of
    the l0 path on [X, X~] under each loss, and are selected at q = 0.3 (knockoff+ selects at
    least 1/q units or none)."""
    rng = np.random.default_rng(7)
    n, p = 300, 20
    X = rng.standard_normal((n, p))
    true = [2, 5, 9, 13, 15]
    eta = X[:, true] @ np.array([1.5, -1.5, 1.2, 1.3, -1.4])
    if loss == "multinomial":
        K = 3
        B = np.zeros((p, K))
        B[true, 0], B[true, 1] = [2.0, -2.0, 1.5, 0.0, 1.8], [-1.5, 1.5, 2.0, 2.0, 0.0]
        logits = X @ B
        cls = np.array([rng.choice(K, p=np.exp(r - r.max()) / np.exp(r - r.max()).sum()) for r in logits])
        Y = np.eye(K)[cls]
        W = sm.Variable((p, K), name="W")
        prob = sm.Problem(
            sm.minimize((sm.sum(sm.logsumexp(X @ W, axis=1)) - sm.sum(Y * (X @ W))) / n),
            [sm.nnz(W, groups="rows") <= 8],
        )
        truth = {"W": B}
    else:
        w = sm.Variable(p, name="w")
        z = X @ w
        if loss == "logistic":
            y = np.where(eta + rng.logistic(size=n) > 0, 1.0, -1.0)
            f = sm.mean(sm.logistic(-y * z))
        elif loss == "poisson":
            y = rng.poisson(np.exp(0.4 * eta))
            f = sm.mean(sm.exp(z) - y * z)
        else:
            t = rng.exponential(np.exp(-eta))
            c = rng.exponential(2.0, n)
            f = sm.cox(z, np.minimum(t, c), (t <= c).astype(float)) / n
        prob = sm.Problem(sm.minimize(f), [sm.nnz(w) <= 8])
        beta = np.zeros(p)
        beta[true] = 1.0
        truth = {"w": beta}
    res = knockoffs(prob, fdr=0.3, seed=2, truth=truth)
    top = np.argsort(-res.W, kind="stable")[:5]
    assert sorted(top.tolist()) == true
    assert set(true) <= set(res.selected.tolist())


@pytest.mark.slow  # joblib's workers start in seconds
def test_the_same_seed_gives_the_same_answer_serially_and_on_workers():
    pytest.importorskip("joblib")
    prob, X, beta = linear(5, n=120, p=15, s=4, k=6)
    serial = knockoffs(prob, fdr=0.3, draws=3, seed=11)
    again = knockoffs(prob, fdr=0.3, draws=3, seed=11)
    parallel = knockoffs(prob, fdr=0.3, draws=3, seed=11, n_jobs=2)
    for other in (again, parallel):
        assert np.array_equal(other.W, serial.W) and np.array_equal(other.evalues, serial.evalues)
        assert np.array_equal(other.selected, serial.selected)
    assert not np.array_equal(knockoffs(prob, fdr=0.3, draws=3, seed=12).W, serial.W)


def test_bad_settings_are_refused_before_anything_runs():
    prob, X, beta = linear(0, n=60, p=10, s=2, k=4)
    with pytest.raises(InferenceError, match="fdr"):
        knockoffs(prob, fdr=1.5)
    with pytest.raises(InferenceError, match="statistic"):
        knockoffs(prob, statistic="lasso")
    with pytest.raises(InferenceError, match="method"):
        knockoffs(prob, method="ci")
    with pytest.raises(sm.errors.ConstraintError):
        knockoffs(prob, k=21)  # more than the 2p = 20 units of [X, X~]
    with pytest.raises(InferenceError, match="shape"):
        knockoffs(prob, knockoffs=np.zeros((60, 9)))


def test_the_cli_writes_the_w_table_and_the_plot(tmp_path, capsys):
    prob, X, beta = linear(1, n=150, p=12, s=3, amp=0.8, k=6)
    np.savetxt(tmp_path / "X.csv", X, delimiter=",", header=",".join(f"v{j}" for j in range(12)), comments="")
    yv = X @ beta + np.random.default_rng(9).standard_normal(150)
    np.savetxt(tmp_path / "y.csv", yv)
    np.save(tmp_path / "w.npy", beta)
    (tmp_path / "m.sm").write_text(
        'data X : matrix from "X.csv"\ndata y : vector from "y.csv"\nvar w[cols(X)]\n'
        "minimize sum_squares(X @ w - y) / (2 * rows(X))\nsubject to\n    nnz(w) <= 6\n"
    )
    args = ["knockoffs", str(tmp_path / "m.sm"), "--fdr", "0.3", "--truth", f"w={tmp_path / 'w.npy'}"]
    assert main([*args, "--csv", str(tmp_path / "w.csv"), "--plot", str(tmp_path / "w.png")]) == 0
    out = capsys.readouterr().out
    assert "knockoff filter at FDR 0.3" in out and "knockoff+ threshold" in out
    rows = (tmp_path / "w.csv").read_text().splitlines()
    assert rows[0].startswith("unit,name,W,selected") and len(rows) == 13
    assert (tmp_path / "w.png").read_bytes()[:4] == b"\x89PNG"
    assert main([*args, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["fdr"] == 0.3 and len(d["units"]) == 12 and {u["name"] for u in d["units"]} == {f"v{j}" for j in range(12)}
    # an output over the model is refused, and a bad level is a user error (exit 2)
    assert main([*args, "--csv", str(tmp_path / "m.sm")]) == 2
    assert main(["knockoffs", str(tmp_path / "m.sm"), "--fdr", "2"]) == 2
    assert "fdr=2.0 must be a number between 0 and 1" in capsys.readouterr().err
