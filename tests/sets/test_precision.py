"""Sparse precision matrices with an eigenvalue box (paper 000, Section 5.3, Algorithm 2, App. D.2):
the ADMM of subproblem (13) against cvxpy, feasibility of every solver's answer, recovery, the
graphical LASSO's two backends, the auto box, the model-file and builder spellings, bad input."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.cli import main
from sparsemodel.errors import ConstraintError, SolverError
from sparsemodel.lowering.cvxpy_lower import precision_cvxpy
from sparsemodel.numerics.logdet import (
    admm_logdet,
    covsel,
    logdet_box_newton,
    shift_into_box,
    soft_offdiag_prox,
    support_prox,
)
from sparsemodel.objective.precision import edge_gains


def truth(p: int, seed: int) -> np.ndarray:
    """Section 6.3.1: Theta off-diagonal entries 1 w.p. 0.1 (upper triangle, mirrored), sigma so
    that cond(Theta + sigma I) = p."""
    rng = np.random.default_rng(seed)
    T = np.triu((rng.random((p, p)) < 0.1).astype(float), 1)
    T = T + T.T
    lam = np.linalg.eigvalsh(T)
    return T + (lam[-1] - p * lam[0]) / (p - 1) * np.eye(p)


def sample_cov(O: np.ndarray, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    Z = rng.multivariate_normal(np.zeros(len(O)), np.linalg.inv(O), size=n)
    return np.cov(Z, rowvar=False)


def problem(S: np.ndarray, k: int, alpha="auto", beta="auto", spelling="trace") -> sm.Problem:
    p = len(S)
    O = sm.Variable((p, p), symmetric=True, name="O")
    lin = sm.trace(S @ O) if spelling == "trace" else sm.sum(S * O)
    cons = [sm.nnz(sm.offdiag(O)) <= 2 * k]
    if alpha is not None:
        cons.append(sm.eig(O).between(alpha, beta))
    return sm.Problem(sm.minimize(-sm.logdet(O) + lin), cons)


def edges(O: np.ndarray) -> set[tuple[int, int]]:
    i, j = np.nonzero(np.triu(O, 1))
    return set(zip(i.tolist(), j.tolist()))


def test_admm_solves_subproblem_13_as_cvxpy_does_with_an_active_box():
    p = 10
    S = sample_cov(truth(p, 0), 40, 1)
    rng = np.random.default_rng(2)
    mask = np.triu(rng.random((p, p)) < 0.3, 1)
    mask = mask | mask.T | np.eye(p, dtype=bool)
    free = admm_logdet(S, support_prox(mask), tol=1e-11)
    lam = np.linalg.eigvalsh(free.Theta)
    alpha, beta = lam[0] * 1.3, lam[-1] * 0.8  # both ends of the box active
    res = admm_logdet(S, support_prox(mask), alpha, beta, tol=1e-11)
    ref, _ = precision_cvxpy(S, mask, alpha, beta)
    assert res.converged
    assert np.linalg.norm(res.Theta - ref) / np.linalg.norm(ref) < 1e-6
    assert np.all(res.Theta[~mask] == 0) and np.array_equal(res.Theta, res.Theta.T)
    ev = np.linalg.eigvalsh(shift_into_box(res.Theta, alpha, beta))
    assert ev[0] >= alpha - 1e-8 and ev[-1] <= beta + 1e-8
    assert ev[0] == pytest.approx(alpha, abs=1e-6) and ev[-1] == pytest.approx(beta, abs=1e-6)  # active


def test_the_restricted_solve_of_the_model_matches_cvxpy():
    S = sample_cov(truth(12, 3), 30, 4)
    lp = problem(S, 6, 0.3, 5.0).lower()
    sel = lp.set.select(np.abs(lp.grad(np.eye(12).ravel()))[lp.set.coords], 6)
    a = lp.restricted_minimize(sel, method="admm")
    b = lp.restricted_minimize(sel, method="cvxpy")
    assert abs(a.f - b.f) <= 1e-6 * max(1.0, abs(b.f))
    assert np.linalg.norm(a.x - b.x) <= 1e-5 * np.linalg.norm(b.x)


def test_covsel_solves_the_graph_mle_as_cvxpy_does():
    p = 14
    S = sample_cov(truth(p, 5), 60, 6)
    rng = np.random.default_rng(7)
    mask = np.triu(rng.random((p, p)) < 0.3, 1)
    mask = mask | mask.T | np.eye(p, dtype=bool)
    res = covsel(S, mask, tol=1e-12, max_sweeps=1000)
    ref, _ = precision_cvxpy(S, mask, 0.0, np.inf)
    assert res.converged
    assert np.all(res.Theta[~mask] == 0) and np.array_equal(res.Theta, res.Theta.T)
    f = lambda O: -np.linalg.slogdet(O)[1] + np.sum(S * O)  # noqa: E731
    assert f(res.Theta) <= f(ref) + 1e-10 and f(res.Theta) == pytest.approx(f(ref), rel=1e-8)
    assert np.linalg.norm(res.Theta - ref) / np.linalg.norm(ref) < 5e-6  # cvxpy's own accuracy: ~1e-6
    assert np.abs(np.where(mask, S - np.linalg.inv(res.Theta), 0)).max() < 1e-9  # KKT on the graph
    warm = covsel(S, mask, tol=1e-12, max_sweeps=1000, W0=res.W)  # a solution's W: two sweeps
    assert np.allclose(warm.Theta, res.Theta, atol=1e-9) and warm.sweeps == 2 < res.sweeps


def test_barrier_newton_solves_subproblem_13_as_cvxpy_does_with_an_active_box():
    p = 10
    S = sample_cov(truth(p, 0), 40, 1)
    rng = np.random.default_rng(2)
    mask = np.triu(rng.random((p, p)) < 0.3, 1)
    mask = mask | mask.T | np.eye(p, dtype=bool)
    mle = covsel(S, mask, tol=1e-12, max_sweeps=1000).Theta
    lam = np.linalg.eigvalsh(mle)
    alpha, beta = lam[0] * 1.3, lam[-1] * 0.8  # both ends of the box active
    f = lambda O: -np.linalg.slogdet(O)[1] + np.sum(S * O)  # noqa: E731
    ref, _ = precision_cvxpy(S, mask, alpha, beta)
    for start in (None, mle):  # cold, and from the graph's MLE outside the box
        res = logdet_box_newton(S, mask, alpha, beta, Theta0=start)
        assert res.converged and res.gap <= 1e-11
        assert np.all(res.Theta[~mask] == 0) and np.array_equal(res.Theta, res.Theta.T)
        ev = np.linalg.eigvalsh(res.Theta)
        assert alpha <= ev[0] <= alpha * (1 + 1e-8) and beta * (1 - 1e-8) <= ev[-1] <= beta  # both ends active
        assert f(res.Theta) <= f(ref) + 1e-8 and f(res.Theta) == pytest.approx(f(ref), rel=1e-8)
        assert np.linalg.norm(res.Theta - ref) / np.linalg.norm(ref) < 1e-5  # cvxpy's own accuracy
    # no box: plain Newton for the graph's MLE, as covsel. Both stop at their own accuracy (Newton on
    # its decrement, covsel on its sweeps' change), so they are compared as their optimality allows:
    # the objective to second order in the gradient on the graph, and the matrices within what the
    # strong convexity of -logdet (1 / lambda_max^2 on the segment between them) makes of the two
    # gradients' sizes: ||T1 - T2||_F <= lambda_max^2 (||G1||_F + ||G2||_F) to first order.
    free = logdet_box_newton(S, mask)
    assert free.converged
    grad_norm = lambda O: np.linalg.norm(np.where(mask, S - np.linalg.inv(O), 0))  # noqa: E731
    g_free, g_mle = grad_norm(free.Theta), grad_norm(mle)
    assert g_free < 1e-6 and g_mle < 1e-9  # both optimal on the graph at their stated accuracy
    lam_max = max(np.linalg.eigvalsh(mle)[-1], np.linalg.eigvalsh(free.Theta)[-1])
    assert np.linalg.norm(free.Theta - mle) <= 2 * lam_max**2 * (g_free + g_mle)
    assert abs(f(free.Theta) - f(mle)) <= lam_max**2 * (g_free + g_mle) ** 2 + 1e-14 * abs(f(mle))


@pytest.mark.parametrize("active", [False, True])
def test_the_default_restricted_solve_is_covsel_and_hands_an_active_box_to_barrier_newton(active):
    p = 12
    S = sample_cov(truth(p, 3), 30, 4)
    rng = np.random.default_rng(8)
    mask = np.triu(rng.random((p, p)) < 0.25, 1)
    mle = covsel(S, mask | mask.T | np.eye(p, dtype=bool), tol=1e-12).Theta
    lam = np.linalg.eigvalsh(mle)
    alpha, beta = (lam[0] * 1.2, lam[-1] * 0.9) if active else (lam[0] * 0.5, lam[-1] * 2)
    lp = problem(S, int(mask.sum()), alpha, beta).lower().fresh()
    i, j = np.nonzero(mask)
    cols = np.concatenate([i * p + j, j * p + i, np.arange(p) * (p + 1)])
    a = lp.restricted_minimize(None, cols=cols)
    b = lp.restricted_minimize(None, cols=cols, method="cvxpy")
    assert a.method == "newton" if active else a.method == "covsel"
    assert lp.oracle.counters.eig_decomps == 1  # covsel's box check; Newton takes none
    assert (lp.oracle.counters.newton_steps > 0) == active
    assert a.f <= b.f + 1e-8 and abs(a.f - b.f) <= 1e-6 * max(1.0, abs(b.f))
    assert np.linalg.norm(a.x - b.x) <= 1e-5 * np.linalg.norm(b.x)
    ev = np.linalg.eigvalsh(a.x.reshape(p, p))
    assert ev[0] >= alpha - 1e-8 and ev[-1] <= beta + 1e-8


def test_an_active_box_on_a_large_support_goes_to_the_admm(monkeypatch):
    from sparsemodel.lowering import precision_solve

    monkeypatch.setattr(precision_solve, "BOX_NEWTON_MIN", 0)
    monkeypatch.setattr(precision_solve, "BOX_NEWTON_RATIO", 1)  # every support with edges counts as large
    p = 12
    S = sample_cov(truth(p, 3), 30, 4)
    rng = np.random.default_rng(8)
    mask = np.triu(rng.random((p, p)) < 0.25, 1)
    mle = covsel(S, mask | mask.T | np.eye(p, dtype=bool), tol=1e-12).Theta
    lam = np.linalg.eigvalsh(mle)
    lp = problem(S, int(mask.sum()), lam[0] * 1.2, lam[-1] * 0.9).lower().fresh()
    i, j = np.nonzero(mask)
    cols = np.concatenate([i * p + j, j * p + i, np.arange(p) * (p + 1)])
    a = lp.restricted_minimize(None, cols=cols)
    b = lp.restricted_minimize(None, cols=cols, method="newton")
    assert a.method == "admm" and b.method == "newton"
    assert lp.oracle.counters.eig_decomps > 1
    # the ADMM (a first-order method) is the reference here, accurate to about 1e-6 relative in f;
    # its last iterate may sit a little outside the box and below the constrained minimum, so the
    # Newton answer may be above it by that much, not by less
    assert abs(a.f - b.f) <= 1e-6 * max(1.0, abs(b.f))


def test_grahtp_gives_the_same_answer_with_the_papers_admm_and_with_covsel():
    O0 = truth(20, 9)
    prob = problem(sample_cov(O0, 200, 10), len(edges(O0)))
    a = prob.solve(solver="grahtp")
    b = prob.solve(solver="grahtp", restricted="admm", admm_rho=0.5, admm_tol=1e-10)
    assert edges(a.x) == edges(b.x)
    assert np.allclose(a.x, b.x, atol=1e-6) and a.objective == pytest.approx(b.objective, abs=1e-8)
    assert b.counters["eig_decomps"] > 5 * a.counters["eig_decomps"]  # the ADMM's eigen-decompositions


@pytest.mark.parametrize("solver", ["grahtp", "grasp", "forward", "foba", "glasso"])
def test_every_answer_is_symmetric_in_the_box_with_at_most_k_edges(solver):
    p, k = 20, 15
    S = sample_cov(truth(p, 5), 60, 6)
    prob = problem(S, k)
    lp = prob.lower()
    alpha, beta = lp.eigbox.alpha, lp.eigbox.beta
    r = prob.solve(solver=solver)
    O = r.x
    ev = np.linalg.eigvalsh(O)
    assert np.array_equal(O, O.T)
    assert alpha - 1e-8 <= ev[0] and ev[-1] <= beta + 1e-8
    assert len(edges(O)) <= k and r.extra["edges"] == len(edges(O))
    assert r.extra["in_box"] and r.extra["eig_min"] == pytest.approx(ev[0])
    assert r.objective == pytest.approx(-np.linalg.slogdet(O)[1] + np.sum(S * O), rel=1e-10)


def test_grahtp_recovers_the_true_graph_from_2000_samples():
    O0 = truth(30, 0)
    S = sample_cov(O0, 2000, 1)
    k = len(edges(O0))
    r = problem(S, k).solve(solver="grahtp")
    assert edges(r.x) == edges(O0)
    assert r.counters["eig_decomps"] > 0 and r.status == "converged"


def test_theory_step_is_alpha_squared_over_two_and_algorithm_2_decreases_f():
    S = sample_cov(truth(15, 2), 50, 3)
    prob = problem(S, 10, 0.2, 10.0)
    r = prob.solve(solver="grahtp", eta="rss", backtracking=False, search=False)
    assert r.extra["eta"] == pytest.approx(0.2**2 / 2)
    f = np.array(r.history["objective"])
    assert np.all(np.diff(f) <= 1e-10 * np.abs(f[:-1]))


def test_starting_point_is_alpha_identity():
    S = sample_cov(truth(8, 1), 40, 2)
    lp = problem(S, 4, 0.25, 9.0).lower()
    from sparsemodel.solvers.base import initial_point

    np.testing.assert_allclose(initial_point(lp, "zeros").reshape(8, 8), 0.25 * np.eye(8), atol=1e-12)


def test_auto_box_is_lus_rule_with_the_dimension():
    S = sample_cov(truth(10, 0), 30, 0)
    lp = problem(S, 5).lower()
    p, xi = 10, 1e-2
    a = 1 / (np.linalg.norm(S, 2) + p * xi)
    assert lp.eigbox.beta == pytest.approx((p - a * np.trace(S)) / xi)  # Lu's beta
    assert lp.eigbox.alpha == pytest.approx(min(a, 1 / np.trace(S)))  # Lu's alpha, lowered to 1 / tr(S)
    lp = problem(S, 5, "auto", 50.0).lower()
    assert lp.eigbox.alpha == pytest.approx(min(a, 1 / np.trace(S))) and lp.eigbox.beta == 50.0
    S1 = np.array([[1.0, 0.999], [0.999, 1.0]])  # nearly rank one: tr(S) ~ ||S||, Lu's alpha is the lower
    a1 = 1 / (np.linalg.norm(S1, 2) + 2 * xi)
    from sparsemodel.model.constraints import auto_box

    assert auto_box(S1) == pytest.approx((a1, (2 - a1 * 2.0) / xi))


def test_auto_box_lower_end_holds_every_graphs_mle():
    """Lu's alpha bounds the l1 estimate; the l0 estimate on a graph keeps W_ii = S_ii, so its
    smallest eigenvalue is at least 1 / tr(S), where the auto box puts alpha when Lu's is above it:
    on random standardized data and random graphs Lu's alpha cuts some graphs' maximum-likelihood
    estimates, 1 / tr(S) never does."""
    from sparsemodel.model.constraints import lu_box

    p, cut = 4, 0
    for seed in range(100):
        rng = np.random.default_rng(seed)
        Z = rng.standard_normal((40, p)) @ rng.standard_normal((p, p))
        Z = (Z - Z.mean(0)) / Z.std(0)
        S = np.cov(Z, rowvar=False, bias=True)
        mask = np.triu(rng.random((p, p)) < 0.5, 1)
        mask = mask | mask.T | np.eye(p, dtype=bool)
        lam = np.linalg.eigvalsh(covsel(S, mask, tol=1e-12, max_sweeps=5000).Theta)[0]
        lp = problem(S, 2).lower()
        assert lp.eigbox.alpha == pytest.approx(min(lu_box(S)[0], 1 / np.trace(S)))
        assert lam >= lp.eigbox.alpha * (1 - 1e-9)
        cut += lam < lu_box(S)[0]
    assert cut > 0  # Lu's alpha would have cut some of these graphs' estimates
    assert "alpha lowered from Lu's" in lp.eigbox.describe()


def test_glasso_admm_matches_cvxpy_and_scikit_learn():
    S = sample_cov(truth(12, 7), 40, 8)
    lam = 0.1
    res = admm_logdet(S, soft_offdiag_prox(lam), tol=1e-11)
    ref, _ = precision_cvxpy(S, None, lam=lam)
    assert np.linalg.norm(res.Theta - ref) / np.linalg.norm(ref) < 1e-6
    skc = pytest.importorskip("sklearn.covariance")
    _, prec = skc.graphical_lasso(S, alpha=lam, tol=1e-10, max_iter=1000, enet_tol=1e-10)
    assert np.linalg.norm(res.Theta - prec) / np.linalg.norm(prec) < 1e-4  # sklearn's own tolerance


def test_glasso_hits_k_edges_with_both_backends():
    S = sample_cov(truth(10, 9), 50, 10)
    prob = problem(S, 6)
    a = prob.solve(solver="glasso")
    b = prob.solve(solver="glasso", backend="cvxpy")
    assert a.extra["edges"] == b.extra["edges"] == 6
    assert edges(a.x) == edges(b.x)
    assert a.objective == pytest.approx(b.objective, rel=1e-6)
    raw = prob.solve(solver="glasso", debias=False)
    assert raw.objective >= a.objective - 1e-9  # the refit on the same graph only lowers f


def test_edge_gains_are_exact_line_searches():
    S = sample_cov(truth(7, 4), 30, 5)
    O = np.diag(1 / np.diag(S))
    O[0, 3] = O[3, 0] = 0.1
    Sigma = np.linalg.inv(O)
    pairs = (np.array([0, 1, 2]), np.array([3, 5, 6]))
    gain, t = edge_gains(S, Sigma, O, pairs)

    def L(M):
        return -np.linalg.slogdet(M)[1] + np.sum(S * M)

    for n in range(3):
        i, j = pairs[0][n], pairs[1][n]
        E = np.zeros_like(O)
        E[i, j] = E[j, i] = 1.0
        grid = np.linspace(t[n] - 0.05, t[n] + 0.05, 201)
        vals = [L(O + s * E) if np.linalg.eigvalsh(O + s * E)[0] > 0 else np.inf for s in grid]
        assert L(O + t[n] * E) - L(O) == pytest.approx(gain[n], abs=1e-10)
        assert min(vals) >= L(O + t[n] * E) - 1e-12


def test_model_file_builder_and_two_spellings_agree(tmp_path):
    rng = np.random.default_rng(0)
    Z = rng.multivariate_normal(np.zeros(8), np.linalg.inv(truth(8, 2)), size=80)
    np.savetxt(tmp_path / "genes.csv", Z, delimiter=",")
    text = textwrap.dedent(
        """
        data Z : matrix from "genes.csv"
        let S = cov(Z)
        var O[cols(Z), cols(Z)] symmetric
        minimize -logdet(O) + trace(S @ O)
        subject to
            nnz(offdiag(O)) <= 2 * 4
            auto <= eig(O) <= auto
        """
    )
    (tmp_path / "m.sm").write_text(text)
    a = sm.load(tmp_path / "m.sm").solve(solver="grahtp")
    S = np.cov(Z, rowvar=False, bias=True)  # the language's cov divides by n
    b = problem(S, 4).solve(solver="grahtp")
    c = problem(S, 4, spelling="sum").solve(solver="grahtp")
    np.testing.assert_allclose(a.x, b.x, atol=1e-8)
    np.testing.assert_allclose(b.x, c.x, atol=1e-8)


def test_cli_check_prints_the_box_and_solve_compare_run(tmp_path, capsys):
    Z = np.random.default_rng(1).standard_normal((60, 6))
    np.save(tmp_path / "Z.npy", Z)
    (tmp_path / "m.sm").write_text(
        'data Z : matrix from "Z.npy"\nlet S = cov(Z)\nvar O[cols(Z), cols(Z)] symmetric\n'
        "minimize -logdet(O) + trace(S @ O)\nsubject to\n  nnz(offdiag(O)) <= 4\n  0.5 <= eig(O) <= 20\n"
    )
    assert main(["check", str(tmp_path / "m.sm")]) == 0
    out = capsys.readouterr().out
    assert "eigenvalues of O in [0.5, 20]" in out
    assert main(["solve", str(tmp_path / "m.sm"), "--solver", "grahtp"]) == 0
    out = capsys.readouterr().out
    assert "edges       2" in out and "in_box True" in out
    assert main(["compare", str(tmp_path / "m.sm"), "--solvers", "grahtp,glasso,foba", "--k", "2,4", "--quiet"]) == 0


@pytest.mark.parametrize(
    "body, fragment",
    [
        ("  nnz(offdiag(O)) <= 4\n  3 <= eig(O) <= 2\n", "not below the upper bound"),
        ("  nnz(offdiag(O)) <= 4\n  0 <= eig(O) <= 2\n", "must be positive"),
        ("  nnz(offdiag(O)) <= 4\n  -1 <= eig(O) <= 2\n", "must be positive"),
        ("  nnz(O) <= 20\n  0.5 <= eig(O) <= 20\n", "counts the diagonal"),
        ("  nnz(offdiag(O)) <= 4\n  auto <= nnz(O)\n", "auto is a bound of eig"),
    ],
)
def test_bad_boxes_are_located_errors_with_exit_2(tmp_path, capsys, body, fragment):
    np.save(tmp_path / "Z.npy", np.random.default_rng(1).standard_normal((30, 5)))
    text = (
        'data Z : matrix from "Z.npy"\nlet S = cov(Z)\nvar O[cols(Z), cols(Z)] symmetric\n'
        "minimize -logdet(O) + trace(S @ O)\nsubject to\n" + body
    )
    (tmp_path / "m.sm").write_text(text)
    code = main(["solve", str(tmp_path / "m.sm"), "--solver", "grahtp"])
    err = capsys.readouterr().err
    assert code == 2 and fragment in err and "Traceback" not in err
    assert "m.sm:" in err  # located


def test_non_symmetric_and_non_square_eig_and_solvers_without_the_box():
    O = sm.Variable((3, 3), name="O")
    with pytest.raises(ConstraintError, match="not declared symmetric"):
        sm.eig(O)
    with pytest.raises(ConstraintError, match="square matrix"):
        sm.eig(sm.Variable((3, 2), name="W"))
    S = sample_cov(truth(6, 1), 30, 1)
    with pytest.raises(SolverError, match="(?s)fgrahtp does not handle eigenvalue-box.*grahtp"):
        problem(S, 3).solve(solver="fgrahtp")
    with pytest.raises(ConstraintError, match="needs the objective|'auto' computes the box"):
        x = sm.Variable((6, 6), symmetric=True, name="X")
        sm.Problem(sm.minimize(sm.sum_squares(x)), [sm.eig(x).between("auto", 3.0)]).lower()


def test_the_auto_box_refuses_an_objective_without_s():
    X = sm.Variable((4, 4), symmetric=True, name="X")
    prob = sm.Problem(sm.minimize(sm.sum_squares(X)), [sm.eig(X).between(0.5, 3.0)])
    with pytest.raises(SolverError, match="need the objective"):
        prob.solve(solver="grahtp")


def test_a_covariance_with_nan_is_refused():
    S = np.eye(4)
    S[1, 2] = np.nan
    with pytest.raises(sm.errors.DataError, match="NaN"):
        problem(S, 2, 0.1, 10.0)


def breast_cancer_problem(entries: int) -> tuple[sm.Problem, np.ndarray]:
    """The collinear case of docs/precision.md: standardized breast-cancer features (p = 30, cond(S) = 1e5), the auto box."""
    datasets = pytest.importorskip("sklearn.datasets")
    X = datasets.load_breast_cancer().data
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    S = np.cov(X, rowvar=False, bias=True)
    O = sm.Variable((30, 30), symmetric=True, name="O")
    cons = [sm.nnz(sm.offdiag(O)) <= entries, sm.eig(O).between("auto", "auto")]
    return sm.Problem(sm.minimize(-sm.logdet(O) + sm.trace(S @ O)), cons), S


def test_breast_cancer_precision_matrix_solves_without_false_divergence():
    """grahtp once ended 'diverged' (f only decreased) after 250k eigen-decompositions; the
    default must now end 'converged', in the box to 1e-8, at most at forward's objective."""
    prob, S = breast_cancer_problem(80)
    lp = prob.lower()
    alpha, beta = lp.eigbox.alpha, lp.eigbox.beta
    fwd = prob.solve("forward")
    results = {"auto": prob.solve(), "grahtp": prob.solve("grahtp")}
    assert results["auto"].solver == "auto" and results["auto"].extra["start"]
    for name, r in results.items():
        assert r.status == "converged" and "diverged" not in r.message, name
        O = r.x
        assert np.array_equal(O, O.T) and len(edges(O)) <= 40
        ev = np.linalg.eigvalsh(O)
        assert ev[0] >= alpha - 1e-8 and ev[-1] <= beta + 1e-8, name
        assert r.objective == pytest.approx(-np.linalg.slogdet(O)[1] + np.sum(S * O), abs=1e-9)
    assert results["auto"].objective <= fwd.objective + 1e-9
    assert results["auto"].objective <= results["grahtp"].objective + 1e-9
    assert results["auto"].counters["eig_decomps"] < 1000  # was 250,051


def test_breast_cancer_with_the_upper_end_of_the_box_active():
    """At 80 edges the graph's estimate has eigenvalues up to 3,407 > beta = 2,779: every restricted
    solve there is the barrier Newton method, and the answer sits on the box's upper end."""
    prob, S = breast_cancer_problem(160)
    beta = prob.lower().eigbox.beta
    r = prob.solve("grahtp")
    assert r.status == "converged" and r.extra["newton_steps"] > 0
    ev = np.linalg.eigvalsh(r.x)
    assert ev[-1] <= beta + 1e-8 and ev[-1] >= beta * (1 - 1e-6)  # active
    free = prob.lower().restricted_minimize(None, cols=np.flatnonzero(r.x.ravel()), method="newton")
    assert free.f == pytest.approx(r.objective, abs=1e-9)  # the answer is (13)'s minimum on its graph
