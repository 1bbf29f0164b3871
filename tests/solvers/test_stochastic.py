"""Stochastic hard thresholding (paper 002): recovery, reproducibility, IFO and HT counts, the rank
projection after every thresholding, every loss with a sample axis, and bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.sparse as sp

import sparsemodel as sm
from sparsemodel.cli import main
from sparsemodel.errors import SolverError
from sparsemodel.sets.lowrank import LowRank

STOCHASTIC = ["hsg_ht", "ahsg_ht", "sg_ht", "svrg_ht"]


def noiseless(n: int = 1000, p: int = 100, k: int = 5, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    w = np.zeros(p)
    S = rng.choice(p, k, replace=False)
    w[S] = rng.choice([-1.0, 1.0], k) * rng.uniform(1.0, 2.0, k)
    return X, X @ w, set(S.tolist())


def linreg(X, y, k):
    n, p = X.shape
    w = sm.Variable(p, name="w")
    return sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / (2 * n)), [sm.nnz(w) <= k])


@pytest.mark.parametrize("solver", ["hsg_ht", "ahsg_ht"])
def test_noiseless_recovery(solver):
    X, y, S = noiseless()
    r = linreg(X, y, 5).solve(solver, epochs=30)
    assert set(r.support.tolist()) == S and r.objective < 1e-12
    assert r.extra["step_rule"].startswith("1/(L + l_s/s)")


@pytest.mark.parametrize("solver", STOCHASTIC)
def test_a_fixed_seed_reproduces_the_run(solver):
    X, y, _ = noiseless(n=300, p=40, k=3, seed=1)
    prob = linreg(X, y + 0.1 * np.random.default_rng(2).standard_normal(300), 3)
    a, b = (prob.solve(solver, epochs=3, seed=7) for _ in range(2))
    np.testing.assert_array_equal(a.x, b.x)
    assert a.history["objective"] == b.history["objective"] and a.counters == b.counters
    c = prob.solve(solver, epochs=3, seed=8)
    assert not np.array_equal(a.history["objective"], c.history["objective"])


def test_ifo_counts_samples_touched_and_one_ht_per_iteration():
    X, y, _ = noiseless(n=400, p=30, k=3, seed=3)
    prob = linreg(X, y, 3)
    n = 400
    r = prob.solve("hsg_ht", epochs=5, tau=2, omega=1.1)
    sizes = [min(math.ceil(2 * 1.1**t), n) for t in range(r.iterations)]
    assert r.counters["ifo"] == sum(sizes) and r.counters["ht"] == r.iterations
    r = prob.solve("sg_ht", epochs=1, batch=10)
    assert r.counters["ifo"] == 10 * r.iterations == n
    r = prob.solve("svrg_ht", epochs=4, batch=5, inner=20)
    snapshots = math.ceil(r.iterations / 20)
    assert r.counters["ifo"] == snapshots * n + 2 * 5 * r.iterations and r.counters["ht"] == r.iterations
    full = [f for f in prob.solve("hsg_ht", epochs=40, omega=1.3).history["full"] if f]
    assert full  # the batch outgrew n: full-gradient HT from there, marked in the history


@pytest.mark.parametrize("solver", STOCHASTIC)
def test_rank_after_every_thresholding(solver, monkeypatch):
    rng = np.random.default_rng(4)
    n, p, m, r = 300, 12, 6, 2
    X = rng.standard_normal((n, p))
    Y = X @ (rng.standard_normal((p, r)) @ rng.standard_normal((r, m))) + 0.1 * rng.standard_normal((n, m))
    W = sm.Variable((p, m), name="W")
    prob = sm.Problem(
        sm.minimize(sm.sum_squares(X @ W - Y) / (2 * n) + 1e-5 / 2 * sm.sum_squares(W)), [sm.rank(W) <= r]
    )
    ranks = []
    original = LowRank.project

    def spy(self, z, budget=None, warm=None):
        out = original(self, z, budget, warm)
        if budget is None:  # the solver's thresholdings (the power method truncates at 2r)
            ranks.append(np.linalg.matrix_rank(out[0].reshape(p, m), tol=1e-9))
        return out

    monkeypatch.setattr(LowRank, "project", spy)
    res = prob.solve(solver, epochs=20)
    assert len(ranks) == res.counters["ht"] > 0 and max(ranks) <= r
    assert res.objective < prob.solve("grahtp").objective * 1.5


def test_losses_with_a_sample_axis():
    rng = np.random.default_rng(5)
    n, p, c = 400, 30, 3
    X = sp.random(n, p, density=0.3, random_state=5, format="csr")
    v = np.where(X @ np.r_[np.ones(3), np.zeros(p - 3)] + 0.1 * rng.standard_normal(n) > 0.3, 1.0, -1.0)
    w = sm.Variable(p, name="w")
    logit = sm.Problem(sm.minimize(sm.mean(sm.logistic(-v * (X @ w))) + 1e-3 / 2 * sm.sum_squares(w)), [sm.nnz(w) <= 3])
    best = logit.solve("grahtp").objective
    assert logit.solve("hsg_ht", epochs=60).objective <= best * 1.05
    Xd = rng.standard_normal((n, p))
    Y = np.eye(c)[np.argmax(Xd[:, :c] + 0.3 * rng.standard_normal((n, c)), axis=1)]
    W = sm.Variable((p, c), name="W")
    Z = Xd @ W
    soft = sm.Problem(
        sm.minimize(sm.mean(sm.logsumexp(Z, axis=1) - sm.sum(Y * Z, axis=1)) + 1e-3 * sm.sum_squares(W)),
        [sm.nnz(W) <= 6],
    )
    f0 = soft.lower().oracle.peek(np.zeros(p * c))
    r = soft.solve("ahsg_ht", epochs=30)
    assert r.objective < 0.6 * f0 and len(r.support) <= 6
    huber = sm.Problem(sm.minimize(sm.mean(sm.huber(Xd @ w - Xd[:, 0], M=0.5))), [sm.nnz(w) <= 2])
    assert huber.solve("svrg_ht", epochs=10).objective < 1e-3


def test_bad_input(capsys, tmp_path):
    O = sm.Variable((4, 4), name="O", symmetric=True)
    S = np.cov(np.random.default_rng(0).standard_normal((50, 4)).T)
    prec = sm.Problem(sm.minimize(-sm.logdet(O) + sm.trace(S @ O)), [sm.nnz(sm.offdiag(O)) <= 2])
    with pytest.raises(SolverError, match="needs a finite sum") as e:
        prec.solve("hsg_ht", init=np.eye(4))
    assert "grahtp" in e.value.hint and "hsg_ht" not in e.value.hint
    X, y, _ = noiseless(n=200, p=20, k=3)
    prob = linreg(X, y, 3)
    with pytest.raises(SolverError, match="omega must be > 1"):
        prob.solve("hsg_ht", omega=1.0)
    r = prob.solve("sg_ht", eta=50.0, epochs=2)
    assert r.status == "diverged" and "smaller eta" in r.message
    W = sm.Variable((5, 3), name="W")
    Y = np.random.default_rng(1).standard_normal((40, 3))
    full = sm.Problem(sm.minimize(sm.sum_squares(np.ones((40, 5)) @ W - Y)), [sm.rank(W) <= 3])
    res = full.solve("hsg_ht")  # r = min(p, m): the bound does nothing, the answer is least squares
    assert res.k == 3 and "allows every unit" in res.message
    np.testing.assert_allclose(res.x, np.linalg.lstsq(np.ones((40, 5)), Y, rcond=None)[0], atol=1e-8)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    (tmp_path / "m.sm").write_text(
        'data X : matrix from "X.npy"\ndata y : vector from "y.npy"\nvar w[cols(X)]\n'
        "minimize sum_squares(X @ w - y) / 2\nsubject to\n    nnz(w) <= 3\nsolve with hsg_ht(omega = 1.1, epochs = 20)\n"
    )
    assert main(["solve", str(tmp_path / "m.sm"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["solver"] == "hsg_ht" and out["options"]["omega"] == 1.1
    assert main(["solve", str(tmp_path / "m.sm"), "-o", "omega=0.9"]) == 2
    err = capsys.readouterr().err
    assert "omega must be > 1" in err and "Traceback" not in err


def test_the_papers_constants_are_reachable_by_name(capsys, tmp_path):
    X, y, S = noiseless(n=600, p=40, k=3, seed=6)
    prob = linreg(X, y, 3)
    r = prob.solve("ahsg_ht", nu="theorem3", epochs=40)  # Theorem 3: f is quadratic here
    kappa, ls, rho = r.extra["kappa"], r.extra["l_s"], r.extra["rho"]
    assert kappa == pytest.approx(ls / rho) and 0 < rho <= ls
    assert r.extra["nu"] == pytest.approx(((math.sqrt(kappa) - 1) / (math.sqrt(kappa) + 1)) ** 2)
    assert r.extra["eta"] == pytest.approx(4 / (math.sqrt(ls) + math.sqrt(rho)) ** 2)
    assert set(r.support.tolist()) == S and r.objective < 1e-10
    p = prob.solve("hsg_ht", eta="paper", epochs=2)
    assert p.extra["eta"] == pytest.approx(1 / (6 * p.extra["l_s"])) and p.extra["step_rule"].startswith("1/(6 l_s)")
    for bad in ({"eta": "rss"}, {"nu": 1.5}, {"nu": "theory"}):
        with pytest.raises(SolverError, match="not a valid number|must be"):
            prob.solve("ahsg_ht", **bad)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    (tmp_path / "m.sm").write_text(
        'data X : matrix from "X.npy"\ndata y : vector from "y.npy"\nvar w[cols(X)]\n'
        "minimize sum_squares(X @ w - y) / 2\nsubject to\n    nnz(w) <= 3\n"
    )
    assert main(["solve", str(tmp_path / "m.sm"), "--solver", "ahsg_ht", "-o", "nu=theorem3", "--json"]) == 0
    assert "kappa" in json.loads(capsys.readouterr().out)["extra"]
    assert main(["solve", str(tmp_path / "m.sm"), "--solver", "hsg_ht", "-o", "eta=rss"]) == 2
    assert "'auto'/'paper'" in capsys.readouterr().err
