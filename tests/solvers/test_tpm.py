"""The sparse PCA solvers (tpm, spca_htp) end to end: the builder, the model file and the CLI give
one answer; the two spellings of the objective agree; auto picks tpm; several components by
deflation; agreement with abess's SparsePCA on abess's own test problem (test_alg.py, test_PCA)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.cli import main
from sparsemodel.datasets import spiked_covariance
from sparsemodel.numerics.spca import adjusted_variance
from sparsemodel.solvers.report import format_result

X, V = spiked_covariance(300, p=30, sizes=(6, 5), variances=(6.0, 3.0), seed=2)
MODEL = """\
data X : matrix from "X.npy"
param k = 6
var w[cols(X)]
maximize {objective}
subject to
    norm(w) <= 1
    nnz(w) <= k
"""


def builder(k: int = 6, spelling: str = "quad_form") -> sm.Problem:
    w = sm.Variable(X.shape[1], name="w")
    Xc = X - X.mean(axis=0)
    f = sm.quad_form(w, sm.cov(X)) if spelling == "quad_form" else sm.sum_squares(Xc @ w) / len(X)
    return sm.Problem(sm.maximize(f), [sm.norm(w) <= 1, sm.nnz(w) <= k])


@pytest.mark.parametrize("solver", ["tpm", "spca_htp"])
def test_the_two_spellings_give_one_answer(solver):
    a = builder().solve(solver)
    b = builder(spelling="sum_squares").solve(solver)
    assert np.array_equal(a.support, b.support) and np.allclose(a.x, b.x)
    assert np.isclose(a.extra["maximum"], b.extra["maximum"])
    S = np.cov(X, rowvar=False, bias=True)
    assert np.isclose(a.extra["explained_variance"], a.x @ S @ a.x) and np.isclose(a.objective, -a.x @ S @ a.x)
    assert set(a.support) == set(range(6))  # the first spike
    assert np.isclose(a.extra["variance_share"], a.extra["explained_variance"] / np.trace(S))


def test_auto_runs_tpm_and_the_result_reports_the_variance():
    r = builder().solve()
    assert r.solver == "tpm" and r.status == "converged"
    f = np.array(r.history["objective"])  # -w'Sw along the best start's power iterations
    assert len(f) >= 2 and np.all(np.diff(f) <= 1e-12 * abs(f).max())
    text = format_result(r)
    assert f"explained_variance {r.extra['explained_variance']:.6g}" in text and "variance_share" in text


def test_several_components_by_deflation():
    r = builder().solve("tpm", components=3)
    W = np.array(r.extra["components"]).T
    S = np.cov(X, rowvar=False, bias=True)
    assert W.shape == (30, 3) and np.allclose(np.linalg.norm(W, axis=0), 1)
    assert np.allclose(W[:, 0], r.x)  # the first component is the result's point
    assert set(np.flatnonzero(W[:, 1])) >= set(range(6, 11))  # the second spike (k = 6: one more)
    assert np.allclose(r.extra["adjusted_variance"], adjusted_variance(S, W))
    assert np.allclose(r.extra["deflated_variance"], r.extra["adjusted_variance"])  # Schur deflation
    assert np.isclose(r.extra["variance_share"], sum(r.extra["adjusted_variance"]) / np.trace(S))
    p = builder().solve("tpm", components=3, deflation="projection")
    assert len(p.extra["components"]) == 3
    with pytest.raises(sm.ModelError, match="deflation"):
        builder().solve("tpm", deflation="hotelling")
    with pytest.raises(sm.ModelError, match="more than the 30 coordinates"):
        builder().solve("tpm", components=31)


def test_the_model_file_and_the_cli(tmp_path, capsys):
    np.save(tmp_path / "X.npy", X)
    (tmp_path / "m.sm").write_text(MODEL.format(objective="quad_form(w, cov(X))") + "solve with auto(components = 2)\n")
    (tmp_path / "s.sm").write_text(MODEL.format(objective="sum_squares(center(X) @ w) / rows(X)"))
    prob = sm.load(tmp_path / "m.sm")
    r = prob.solve()
    assert r.solver == "tpm" and len(r.extra["components"]) == 2
    assert np.allclose(r.x, builder().solve("tpm").x)
    assert main(["solve", str(tmp_path / "s.sm"), "--json", "--quiet", "-o", "components=2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert np.isclose(out["extra"]["adjusted_variance"][0], r.extra["adjusted_variance"][0])
    assert main(["solve", str(tmp_path / "m.sm"), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "components  2: adjusted variance" in text and "#2  variance" in text


def test_the_cli_refuses_a_near_miss_at_its_line(tmp_path, capsys):
    np.save(tmp_path / "X.npy", X)
    (tmp_path / "m.sm").write_text(MODEL.format(objective="quad_form(w, cov(X))") + "    w >= 0\n")
    assert main(["solve", str(tmp_path / "m.sm"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "m.sm:8" in err and "sparse PCA form takes" in err and "Traceback" not in err


def test_other_solvers_refuse_the_form_and_name_the_ones_that_take_it():
    with pytest.raises(sm.ModelError) as e:
        builder().solve("grahtp")
    assert "tpm" in str(e.value.hint)
    w = sm.Variable(5, name="w")
    ls = sm.Problem(sm.minimize(sm.sum_squares(np.eye(5) @ w - 1)), [sm.nnz(w) <= 2])
    with pytest.raises(sm.ModelError, match="tpm needs norm-ball .*sparse PCA"):
        ls.solve("tpm")


def test_the_bound_ends():
    r0 = builder(k=0).solve("tpm")
    assert r0.objective == 0 and not r0.x.any()
    full = builder(k=30).solve("tpm", components=2)
    S = np.cov(X, rowvar=False, bias=True)
    assert np.isclose(full.extra["maximum"], np.linalg.eigvalsh(S)[-1])  # ordinary PCA
    assert len(full.extra["components"]) == 2


def abess_test_problem() -> np.ndarray:
    """The data of abess's test_PCA (python/pytest/test_alg.py): a rank-one signal plus 0.01 noise,
    n = 1000, p = 20, centered; its support size is 10."""
    rng = np.random.RandomState(1)
    x1 = rng.randn(1000, 1)
    x1 /= np.linalg.norm(x1)
    Xa = x1.dot(rng.randn(1, 20)) + 0.01 * rng.randn(1000, 20)
    return Xa - Xa.mean(axis=0)


@pytest.mark.filterwarnings("ignore")
def test_agreement_with_abess_on_its_test_problem():
    abess = pytest.importorskip("abess")
    Xa = abess_test_problem()
    S = Xa.T @ Xa / len(Xa)
    w = sm.Variable(20, name="w")
    prob = sm.Problem(sm.maximize(sm.quad_form(w, S)), [sm.norm(w) <= 1, sm.nnz(w) <= 10])
    m = abess.SparsePCA(support_size=10)
    m.fit(Xa)
    v = m.coef_[:, 0] / np.linalg.norm(m.coef_[:, 0])
    for solver in ("tpm", "spca_htp"):
        r = prob.solve(solver)
        assert np.array_equal(np.sort(r.support), np.flatnonzero(v))  # abess's pass criterion: the support
        assert r.extra["maximum"] >= v @ S @ v * (1 - 1e-10)
        assert abs(r.x @ v) > 1 - 1e-8
    # three components (abess: number=3, the same support size each)
    ss = np.zeros((20, 1))
    ss[9, 0] = 1
    m3 = abess.SparsePCA(support_size=np.hstack([ss, ss, ss]))
    m3.fit(Xa, number=3)
    W = m3.coef_ / np.linalg.norm(m3.coef_, axis=0)
    r3 = prob.solve("tpm", components=3)
    assert all(np.count_nonzero(c) == 10 for c in r3.extra["components"])
    assert sum(r3.extra["adjusted_variance"]) >= adjusted_variance(S, W).sum() * (1 - 1e-10)
