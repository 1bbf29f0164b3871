"""bnb's m best supports (``top=m``): the list equals the m best of every support of k units,
found by enumeration, with their objectives; no other support is better than the m-th."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.cli import main


def ridge_ls(seed: int, n: int = 40, p: int = 14, lam: float = 0.05):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[:3] = [1.0, -0.8, 0.6]
    y = X @ beta + 0.8 * rng.standard_normal(n)
    return X, y, lam


def ls_objective(X: np.ndarray, y: np.ndarray, lam: float, S: tuple[int, ...]) -> float:
    """min over w supported on S of ||X w - y||^2 / (2n) + lam/2 ||w||^2, in closed form."""
    n = len(y)
    A = X[:, list(S)]
    H = A.T @ A / n + lam * np.eye(len(S))
    g = A.T @ y / n
    return 0.5 * float(y @ y) / n - 0.5 * float(g @ np.linalg.solve(H, g))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_m_best_supports_are_those_of_enumeration(seed):
    X, y, lam = ridge_ls(seed)
    n, p = X.shape
    k, m = 3, 8
    w = sm.Variable(p, name="w")
    prob = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / (2 * n) + lam / 2 * sm.sum_squares(w)), [sm.nnz(w) <= k])
    r = prob.solve("bnb", top=m, gap_tol=1e-10)
    assert r.status == "optimal" and r.extra["top_proved"]
    every = sorted((ls_objective(X, y, lam, S), S) for S in itertools.combinations(range(p), k))
    got = r.top_supports
    assert len(got) == m
    for e, (f, S) in zip(got, every[:m]):
        assert tuple(e["support"]) == S
        assert e["objective"] == pytest.approx(f, rel=1e-9, abs=1e-12)
        assert e["names"] == [f"w[{i}]" for i in S]
    # the best of the list is the answer, and the shares count each unit's appearances
    assert list(r.support) == list(every[0][1])
    for name, share in r.extra["top_shares"].items():
        j = int(name[2:-1])
        assert share == pytest.approx(sum(j in S for _, S in every[:m]) / m)


def logistic_objective(X: np.ndarray, y: np.ndarray, lam: float, S: tuple[int, ...]) -> float:
    """min over w supported on S of mean(log(1 + exp(-y X w))) + lam/2 ||w||^2, by scipy's BFGS."""
    from scipy.optimize import minimize

    A = X[:, list(S)] * y[:, None]
    n = len(y)

    def f(v):
        z = A @ v
        val = np.mean(np.logaddexp(0.0, -z)) + lam / 2 * v @ v
        g = -A.T @ (1.0 / (1.0 + np.exp(z))) / n + lam * v
        return val, g

    return float(minimize(f, np.zeros(len(S)), jac=True, method="BFGS", options={"gtol": 1e-11}).fun)


def test_the_m_best_logistic_supports_are_those_of_enumeration():
    rng = np.random.default_rng(5)
    n, p, k, m, lam = 80, 10, 2, 6, 0.1
    X = rng.standard_normal((n, p))
    y = np.where(X[:, 0] - X[:, 1] + 0.7 * rng.standard_normal(n) > 0, 1.0, -1.0)
    w = sm.Variable(p, name="w")
    prob = sm.Problem(sm.minimize(sm.mean(sm.logistic(-(y * (X @ w)))) + lam / 2 * sm.sum_squares(w)), [sm.nnz(w) <= k])
    r = prob.solve("bnb", top=m, gap_tol=1e-9)
    assert r.status == "optimal"
    every = sorted((logistic_objective(X, y, lam, S), S) for S in itertools.combinations(range(p), k))
    got = r.top_supports
    assert [tuple(e["support"]) for e in got] == [S for _, S in every[:m]]
    for e, (f, _) in zip(got, every[:m]):
        assert e["objective"] == pytest.approx(f, rel=1e-7, abs=1e-9)


def test_top_one_is_the_plain_proof_and_the_cli_prints_the_list(tmp_path, capsys):
    X, y, lam = ridge_ls(0, n=30, p=10)
    n, p = X.shape
    w = sm.Variable(p, name="w")
    prob = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / (2 * n) + lam / 2 * sm.sum_squares(w)), [sm.nnz(w) <= 2])
    plain = prob.solve("bnb")
    one = prob.solve("bnb", top=1)
    assert one.objective == plain.objective and one.top_supports == [] and "top_supports" not in one.extra
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    (tmp_path / "m.sm").write_text(
        'data X : matrix from "X.npy"\ndata y : vector from "y.npy"\nvar w[cols(X)]\n'
        f"minimize sum_squares(X @ w - y) / (2 * rows(X)) + {lam} / 2 * sum_squares(w)\nsubject to\n    nnz(w) <= 2\n"
    )
    assert main(["solve", str(tmp_path / "m.sm"), "--solver", "bnb", "-o", "top=4"]) == 0
    out = capsys.readouterr().out
    assert "4 best supports (proved" in out and "#4" in out and "shares" in out
