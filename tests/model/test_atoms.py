"""Loss facts live in the atoms (docs/atoms.md): every built-in loss and every user func states
its value, derivatives, curvature bound, parameters and convex conjugate, and the lowering reads
them from there. The conjugates are checked against a numerical sup_z (s z - phi(z)) and the
Fenchel-Young equality; a func and the built-in atom of the same function give the same facts; a
new parameterised atom (:class:`softplus_t`, the worked example of docs/atoms.md) works through
the whole package with nothing edited outside this file."""

from __future__ import annotations

import types

import numpy as np
import pytest
from scipy.optimize import minimize, minimize_scalar

import sparsemodel as sm
from sparsemodel.model import atoms as A
from sparsemodel.model.atoms import NoConjugate, softmax_hessian_apply
from sparsemodel.model.dcp import CONVEX, NONNEG
from sparsemodel.model.expr import as_expr
from sparsemodel.model.samples import rebind_rows, sample_nodes
from sparsemodel.model.userfunc import func
from sparsemodel.objective.terms import Term

ARG = sm.Variable(4, name="u")  # the argument of the atoms under test (its value never enters)


# ---------------------------------------------------------------------- the toy atom (docs/atoms.md)


def _xlogx(s: np.ndarray) -> np.ndarray:
    return np.where(s > 0, s * np.log(np.where(s > 0, s, 1.0)), 0.0)


class softplus_t(A.Elementwise):
    """tau log(1 + exp(z / tau)): the logistic loss at temperature tau > 0 (tau = 1 is ``logistic``). The
    recipe of docs/atoms.md followed once: this class is all there is; nothing outside this test
    file was edited for it."""

    name = "softplus_t"
    curvature_kind = CONVEX
    conjugate_interval = (0.0, 1.0, True, True)

    def __init__(self, x, tau=1.0, span=None):
        self.tau = float(as_expr(tau).constant_value())
        super().__init__(x, span=span)

    @property
    def params(self):
        return {"tau": self.tau}

    @property
    def curvature_sup(self):
        return 0.25 / self.tau

    def _sign_of(self):
        return NONNEG

    def fn(self, z):
        return self.tau * np.logaddexp(0.0, z / self.tau)

    def d1(self, z):
        return A.expit(z / self.tau)

    def d2(self, z):
        p = A.expit(z / self.tau)
        return p * (1.0 - p) / self.tau

    def _conjugate(self, s):
        return self.tau * (_xlogx(s) + _xlogx(1.0 - s))


# ---------------------------------------------------------------------- numerical conjugates


def numerical_sup(g, s: float, lo: float = -60.0, hi: float = 60.0) -> float:
    """sup_z (s z - g(z)) over [lo, hi]: the best point of a fine grid, refined by a bounded
    scalar search between its neighbours."""
    grid = np.unique(np.concatenate([np.linspace(lo, hi, 24001), np.geomspace(1e-9, hi, 2001)]))
    grid = grid[(grid >= lo) & (grid <= hi)]
    with np.errstate(all="ignore"):
        vals = s * grid - g(grid)
    vals = np.where(np.isfinite(vals), vals, -np.inf)
    i = int(np.argmax(vals))
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    res = minimize_scalar(
        lambda t: -(s * t - float(g(np.array([t]))[0])), bounds=(a, b), method="bounded", options={"xatol": 1e-12}
    )
    return max(float(vals[i]), -float(res.fun))


def convex_side(atom):
    """g = sigma phi, the convex one of +-phi, as a numpy function (+inf outside phi's domain)."""
    sig = atom.convex_sign

    def g(z):
        with np.errstate(all="ignore"):
            v = sig * atom.derivs(np.asarray(z, dtype=float), 0)[0]
        return np.where(np.isnan(v), np.inf, v)

    return g


# atom, points of the conjugate's domain, points outside it, z range for Fenchel-Young
CASES = {
    "square": (lambda: A.square(ARG), [-3.0, -0.5, 0.0, 1.2, 4.0], [], np.linspace(-3, 3, 13)),
    "logistic": (lambda: A.logistic(ARG), [0.0, 1e-3, 0.3, 0.5, 0.9, 1.0], [-0.1, 1.1], np.linspace(-8, 8, 17)),
    "exp (Poisson)": (lambda: A.exp(ARG), [0.0, 0.01, 1.0, 5.0], [-0.5], np.linspace(-5, 3, 9)),
    "huber M=0.7": (lambda: A.huber(ARG, M=0.7), [-1.4, -1.0, 0.0, 0.5, 1.4], [-1.5, 1.5], np.linspace(-3, 3, 13)),
    "-log (Gamma)": (lambda: A.log(ARG), [-5.0, -1.0, -0.1], [0.0, 0.5], np.geomspace(0.05, 20, 9)),
    "softplus_t tau=0.5": (
        lambda: softplus_t(ARG, tau=0.5),
        [0.0, 0.2, 0.5, 0.95, 1.0],
        [-0.2, 1.3],
        np.linspace(-4, 4, 9),
    ),
    "func log(1+exp(z))": (
        lambda: func("phi", "log(1 + exp(z))")(ARG),
        [0.0, 0.3, 0.5, 1.0],
        [-0.1, 1.1],
        np.linspace(-8, 8, 17),
    ),
    "func z^2 + logistic (numerical)": (
        lambda: func("q", "z^2 + log(1 + exp(z))")(ARG),
        [-4.0, 0.0, 0.5, 3.0],
        [],
        np.linspace(-3, 3, 13),
    ),
    "func sqrt (concave)": (
        lambda: func("r", "sqrt(z)")(ARG),
        [-3.0, -0.5, -0.05],
        [0.0, 1.0],
        np.geomspace(0.05, 20, 9),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_conjugate_is_the_numerical_sup(case):
    """(sigma phi)*(s) = sup_z (s z - sigma phi(z)) at points of the domain (ends included: their
    values are limits, e.g. 0 for the logistic at s = 0 and 1), +inf outside it, where s z - phi(z)
    indeed grows without bound."""
    make, inside, outside, _ = CASES[case]
    atom = make()
    g = convex_side(atom)
    positive = case in ("-log (Gamma)", "func sqrt (concave)")  # phi's domain: z > 0
    lo, hi = (1e-9, 1e4) if positive else (-60.0, 60.0)
    got = atom.conjugate(np.array(inside))
    assert np.all(atom.conjugate_domain(np.array(inside)))
    for s, v in zip(inside, got):
        assert v == pytest.approx(numerical_sup(g, s, lo=lo, hi=hi), abs=1e-7), (case, s)
    if outside:
        assert np.all(np.isinf(atom.conjugate(np.array(outside))))
        assert not np.any(atom.conjugate_domain(np.array(outside)))
        for s in outside:  # unbounded: s z - g(z) passes any level far out on one side
            far = np.array([1e-12, 1e30] if positive else [-1e4, 1e4])
            with np.errstate(all="ignore"):
                assert np.max(s * far - g(far)) > 50, (case, s)


@pytest.mark.parametrize("case", list(CASES))
def test_fenchel_young_equality_at_the_derivative(case):
    """g(z) + g*(g'(z)) = z g'(z) for g = sigma phi at every z (with g'(z) at an end of the domain
    where huber is linear)."""
    make, _, _, zs = CASES[case]
    atom = make()
    sig = atom.convex_sign
    v, d1, _ = atom.derivs(zs, 1)
    s = sig * d1
    np.testing.assert_allclose(sig * v + atom.conjugate(s), zs * s, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("case", list(CASES))
def test_derivatives_are_finite_differences(case):
    """phi' and phi'' of every case (the toy atom and the funcs included) against central
    differences of phi and phi', away from huber's kinks."""
    make, _, _, zs = CASES[case]
    atom = make()
    zs = zs[np.abs(np.abs(zs) - 0.7) > 1e-3]
    h = 1e-6 * np.maximum(1.0, np.abs(zs))
    v, d1, d2 = atom.derivs(zs, 2)
    fd1 = (atom.derivs(zs + h, 0)[0] - atom.derivs(zs - h, 0)[0]) / (2 * h)
    fd2 = (atom.derivs(zs + h, 1)[1] - atom.derivs(zs - h, 1)[1]) / (2 * h)
    np.testing.assert_allclose(d1, fd1, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(d2, fd2, rtol=1e-5, atol=1e-5)
    sup = atom.curvature_sup
    if sup is not None:  # the curvature bound holds
        assert np.all(d2 <= sup + 1e-12)


def test_softmax_conjugate_fenchel_young_and_sup():
    """The row-wise softmax: lse*(s) = sum_j s_j log s_j on the simplex (a numerical sup by BFGS),
    +inf off it (a negative entry or a sum other than 1), and lse(z) + lse*(p) = p'z at p = softmax(z)."""
    L = A.logsumexp(sm.Variable((3, 4)), axis=1)
    assert L.loss_form == "rowwise" and A.logsumexp(sm.Variable((3, 4)), axis=0).loss_form is None
    rng = np.random.default_rng(0)
    S = rng.dirichlet(np.ones(4), size=3)
    for s, v in zip(S, L.conjugate(S)):
        res = minimize(
            lambda z, s=s: np.logaddexp.reduce(z) - s @ z, np.zeros(4), method="BFGS", options={"gtol": 1e-10}
        )
        assert v == pytest.approx(-res.fun, abs=1e-7)
    bad = np.array([[0.5, 0.6, -0.1, 0.0], [0.3, 0.3, 0.3, 0.3], [1.0, 0.0, 0.0, 0.0]])
    assert L.conjugate(bad).tolist()[:2] == [np.inf, np.inf] and L.conjugate(bad)[2] == 0.0
    Z = rng.standard_normal((5, 4)) * 3
    v, P, _ = L.derivs(Z, 1)
    np.testing.assert_allclose(v + L.conjugate(P), np.einsum("ij,ij->i", P, Z), rtol=1e-10, atol=1e-12)


def test_softmax_hessian_is_the_derivative_of_the_gradient():
    """The one softmax Hessian (diag(p) - p p' per row) against finite differences of the atom's
    gradient, on one direction and on columns at once; a weighted row-wise term's hessian_apply and
    row_hessians agree with the same differences (weights in)."""
    rng = np.random.default_rng(1)
    n, m = 5, 3
    L = A.logsumexp(sm.Variable((n, m)), axis=1)
    Z, U = rng.standard_normal((n, m)), rng.standard_normal((n, m))
    eps = 1e-6
    fd = (L.derivs(Z + eps * U, 1)[1] - L.derivs(Z - eps * U, 1)[1]) / (2 * eps)
    np.testing.assert_allclose(L.hessian_apply(Z, U), fd, atol=1e-8)
    Q = rng.standard_normal((n, m, 2))
    cols = softmax_hessian_apply(L.probs(Z), Q)
    for j in range(2):
        np.testing.assert_allclose(cols[:, :, j], L.hessian_apply(Z, Q[:, :, j]), atol=1e-14)
    w = np.array([1.0, 2.0, 0.5, 0.0, 3.0])
    t = Term(0.7, L, types.SimpleNamespace(shape=(n, m), size=n * m), w, rowwise=True)
    z, u = Z.ravel(), U.ravel()
    fd = (t.derivs(z + eps * u, 1)[1] - t.derivs(z - eps * u, 1)[1]) / (2 * eps)
    np.testing.assert_allclose(t.hessian_apply(z, u), fd, atol=1e-8)
    np.testing.assert_allclose(t.row_hessians(z).reshape(n, m, m) @ U[:, :, None], fd.reshape(n, m, 1), atol=1e-8)
    J = rng.standard_normal((n * m, 3))
    np.testing.assert_allclose(t.hessian_apply(z, J)[:, 1], t.hessian_apply(z, J[:, 1]), atol=1e-14)


# ---------------------------------------------------------------------- terms: coefficients and weights


def test_term_conjugate_scales_by_coefficient_and_weights():
    """g(z) = c sum_i w_i phi(z_i) has g*(s) = sum_i a_i phi*(s_i / a_i), a_i = c w_i sigma: against a
    numerical sup entry by entry (logistic, huber, and Gamma's -log written -1 * log); a zero
    weight gives 0 at s = 0 and +inf elsewhere; a concave term has no conjugate."""
    w = np.array([0.5, 1.0, 2.0, 0.0])
    shape = types.SimpleNamespace(shape=(4,), size=4)
    for coef, atom, s in (
        (0.3, A.logistic(ARG), np.array([0.1, 0.2, 0.55, 0.0])),
        (2.0, A.huber(ARG, M=0.5), np.array([-0.9, 0.3, 3.9, 0.0])),  # |s_i| <= 2 M a_i = a_i
        (-1.0, A.log(ARG), np.array([-2.0, -0.3, -4.0, 0.0])),
    ):
        t = Term(coef, atom, shape, w)
        got = t.conjugate(s)
        for i in range(3):
            a = coef * w[i]

            def g(z, a=a, atom=atom):
                with np.errstate(all="ignore"):
                    v = a * atom.derivs(z, 0)[0]
                return np.where(np.isnan(v), np.inf, v)

            lo = 1e-9 if atom.convex_sign < 0 else -60.0
            assert got[i] == pytest.approx(numerical_sup(g, s[i], lo=lo), abs=1e-7), (atom.name, i)
        assert got[3] == 0.0 and np.isinf(t.conjugate(np.array([0.0, 0.0, 0.0, 0.1]))[3])
    with pytest.raises(NoConjugate, match="not convex"):
        Term(-1.0, A.square(ARG), shape).conjugate(np.zeros(4))
    with pytest.raises(NoConjugate, match="neither convex nor concave"):
        func("sn", "sin(z)")(ARG).conjugate(np.zeros(2))


def test_rowwise_term_conjugate():
    """The weighted softmax term: row i's conjugate is a_i lse*(S_i / a_i), finite when S_i >= 0
    sums to a_i = c w_i (a numerical sup of S_i'z - a_i lse(z) by BFGS)."""
    rng = np.random.default_rng(2)
    L = A.logsumexp(sm.Variable((3, 4)), axis=1)
    w = np.array([1.0, 2.5, 0.0])
    t = Term(0.4, L, types.SimpleNamespace(shape=(3, 4), size=12), w, rowwise=True)
    S = rng.dirichlet(np.ones(4), size=3) * (0.4 * w)[:, None]
    got = t.conjugate(S.ravel())
    for i in range(2):
        res = minimize(
            lambda z, i=i: 0.4 * w[i] * np.logaddexp.reduce(z) - S[i] @ z,
            np.zeros(4),
            method="BFGS",
            options={"gtol": 1e-10},
        )
        assert got[i] == pytest.approx(-res.fun, abs=1e-7)
    assert got[2] == 0.0
    S[0] *= 1.1
    assert np.isinf(t.conjugate(S.ravel())[0])


# ---------------------------------------------------------------------- user funcs: the same facts


SPELLINGS = [
    (lambda: A.logistic(ARG), "log(1 + exp(z))"),
    (lambda: A.square(ARG), "z^2"),
    (lambda: A.exp(ARG), "exp(z)"),
    (lambda: A.log(ARG), "log(z)"),
]


@pytest.mark.parametrize("make, body", SPELLINGS, ids=[b for _, b in SPELLINGS])
def test_a_func_and_the_builtin_state_the_same_facts(make, body):
    """One function spelled as a built-in atom and as a func: the same curvature bound, conjugate
    domain and conjugate values (inside, at the ends, outside), from sympy's closed form; the
    func's numerical conjugate (Newton-bisection on phi'(z) = s) agrees with its closed form."""
    atom, user = make(), func("phi", body)(ARG)
    assert user.curvature_sup == atom.curvature_sup
    assert user.convex_sign == atom.convex_sign
    assert user.conjugate_interval == atom.conjugate_interval
    assert user.fdef.conjugate_how == "closed form"
    lo, hi, _, _ = atom.conjugate_interval
    s = np.concatenate([np.linspace(max(lo, -6) - 0.5, min(hi, 6) + 0.5, 41), [lo, hi]])
    s = s[np.isfinite(s)]
    np.testing.assert_allclose(user.conjugate(s), atom.conjugate(s), rtol=1e-10, atol=1e-12)
    inner = s[atom.conjugate_domain(s) & (s > lo) & (s < hi)]
    np.testing.assert_allclose(
        user.fdef.conjugate_values(inner, numerical=True), atom.conjugate(inner), rtol=1e-9, atol=1e-10
    )


def test_a_func_without_a_closed_form_gets_a_numerical_conjugate():
    """z^2 + log(1 + exp(z)): sympy cannot solve 2z + sigmoid(z) = s, so the conjugate is numerical
    (checked above against the sup and Fenchel-Young); its domain is the whole line, the curvature
    bound exact (2 + 1/4)."""
    q = func("q", "z^2 + log(1 + exp(z))")
    assert q.conjugate_how == "numerical" and q.conjugate_expr is None
    assert q.conjugate_interval == (-np.inf, np.inf, False, False)
    assert q.curvature_sup == 2.25


# ---------------------------------------------------------------------- parameters: copy and compare


def test_parameters_copy_and_compare_atoms():
    """Every atom rebuilds itself on new arguments with its parameters, and two atoms are the same
    function exactly when their class and parameters agree."""
    x, y = sm.Variable(3), sm.Variable(3)
    h = A.huber(x, M=0.5)
    assert h.params == {"M": 0.5}
    h2 = h.rebuild([y])
    assert isinstance(h2, A.huber) and h2.M == 0.5 and h2.args[0] is y
    assert h.loss_key() == h2.loss_key() != A.huber(x, M=2.0).loss_key()
    f = func("phi", "log(1 + exp(-z))")
    u = f(x)
    assert u.rebuild([y]).fdef is f and u.rebuild([y]).loss_key() == u.loss_key()
    assert u.loss_key() != func("phi", "log(1 + exp(-z))")(x).loss_key()  # another definition
    s = A.logsumexp(sm.Variable((2, 3)), axis=1)
    assert s.rebuild([sm.Variable((5, 3))]).axis == 1
    t = softplus_t(x, tau=0.5)
    assert t.rebuild([y]).tau == 0.5 and t.loss_key() != softplus_t(x, tau=2.0).loss_key()


def toy_problem(T1: float, T2: float, seed: int = 0):
    """Sixteen small terms (8 at temperature T1, 8 at T2) next to a least-squares sample term."""
    rng = np.random.default_rng(seed)
    X, y = rng.standard_normal((30, 16)), rng.standard_normal(30)
    v = sm.Variable(16, name="v")
    obj = sm.sum_squares(X @ v - y) / 30
    for j in range(8):
        obj = obj + sm.sum(softplus_t(v[2 * j : 2 * j + 2], tau=T1))
        obj = obj + 0.5 * sm.sum(softplus_t(v[2 * j : 2 * j + 2] - 1.0, tau=T2))

    def value(x):
        f = float(np.sum((X @ x - y) ** 2) / 30)
        f += float(np.sum(T1 * np.logaddexp(0, x / T1)))
        return f + 0.5 * float(np.sum(T2 * np.logaddexp(0, (x - 1.0) / T2)))

    return sm.Problem(sm.minimize(obj), [sm.nnz(v) <= 4]), value


def test_small_terms_merge_by_parameters():
    """Small terms are merged per loss (one sparse product instead of a loop over terms) by the
    atom's class and parameters: the terms at tau = 0.5 and at tau = 2 become two merged terms, never
    one (the old key read a parameter named M, so these would have been merged into one loss), and
    value and gradient are those of the model."""
    prob, value = toy_problem(0.5, 2.0)
    lp = prob.lower()
    d = lp.design
    temps = sorted(t.phi.params["tau"] for t in d.terms if t.phi.name == "softplus_t")
    assert temps == [0.5, 2.0]
    rng = np.random.default_rng(3)
    for _ in range(3):
        x = rng.standard_normal(16)
        f, g = lp.oracle.value_and_grad(x)
        assert f == pytest.approx(value(x), rel=1e-12)
        e = rng.standard_normal(16) * 1e-6
        assert f + g @ e == pytest.approx(value(x + e), rel=1e-9)
    same, _ = toy_problem(0.5, 0.5)
    assert len([t for t in same.lower().design.terms if t.phi.name == "softplus_t"]) == 1


def test_a_new_parameterised_atom_needs_no_special_case(monkeypatch, tmp_path):
    """softplus_t, defined in this file only, works everywhere a built-in loss does: at tau = 1 it is
    the logistic loss, and the two spellings give the same sample smoothness (l_s, from the atom's
    curvature bound), Hessian bound and answer; rebind_rows keeps tau (cross-validation's folds); the
    stochastic solvers get its l_s; registered in ATOMS (one line), the model language takes it."""
    rng = np.random.default_rng(4)
    n, p = 120, 10
    X = rng.standard_normal((n, p))
    y = np.where(X[:, 0] - 2 * X[:, 3] + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
    w = sm.Variable(p, name="w")
    Xy = X * y[:, None]

    def model(atom):
        return sm.Problem(sm.minimize(sm.sum(atom(-(Xy @ w))) / n + 1e-3 * sm.sum_squares(w)), [sm.nnz(w) <= 2])

    a = model(A.logistic)
    b = model(lambda z: softplus_t(z, tau=1.0))
    la, lb = a.lower(), b.lower()
    ls = la.design.sample_smoothness(4)
    assert ls is not None and lb.design.sample_smoothness(4) == pytest.approx(ls, rel=1e-12)
    half = model(lambda z: softplus_t(z, tau=0.5)).lower().design.sample_smoothness(4)
    assert half > ls  # a sharper loss, a larger bound (1/(4T) per sample)
    x = rng.standard_normal(p)
    v = rng.standard_normal(p)
    np.testing.assert_allclose(la.hessian_operator(x)(v), lb.hessian_operator(x)(v), rtol=1e-12)
    ra, rb = a.solve("grahtp"), b.solve("grahtp")
    assert ra.support.tolist() == rb.support.tolist() == [0, 3]
    assert ra.objective == pytest.approx(rb.objective, rel=1e-10)
    assert b.solve("svrg_ht", epochs=5).status in ("converged", "max_iter")
    # the model on a subset of its rows (what K-fold CV builds): tau kept, value that of the subset
    obj = b.objective.expr
    rows = np.arange(0, n, 3)
    sub = rebind_rows(obj, sample_nodes(obj, n), rows)
    atoms = [e for e in sub.walk() if isinstance(e, softplus_t)]
    assert atoms and all(e.tau == 1.0 for e in atoms)
    xv = rng.standard_normal(p)
    got = sm.Problem(sm.minimize(sub), [sm.nnz(w) <= 2]).lower().oracle.value_and_grad(xv)[0]
    want = float(np.sum(np.logaddexp(0, -(Xy[rows] @ xv)))) / n + 1e-3 * float(xv @ xv)
    assert got == pytest.approx(want, rel=1e-12)
    # the language: one entry in the table of atoms
    monkeypatch.setitem(A.ATOMS, "softplus_t", softplus_t)
    np.savetxt(tmp_path / "X.csv", X, delimiter=",")
    np.savetxt(tmp_path / "y.csv", y, delimiter=",")
    src = tmp_path / "m.sm"
    src.write_text(
        f'data X : matrix from "{tmp_path / "X.csv"}"\n'
        f'data y : vector from "{tmp_path / "y.csv"}"\n'
        "var w[10]\n"
        f"minimize sum(softplus_t(-(y * (X @ w)), tau = 1)) / {n} + 0.001 * sum_squares(w)\n"
        "subject to\n    nnz(w) <= 2\n"
    )
    rt = sm.load(str(src)).solve("grahtp")
    assert rt.support.tolist() == [0, 3] and rt.objective == pytest.approx(ra.objective, rel=1e-9)


def test_a_func_gets_the_sample_smoothness_of_its_builtin_twin():
    """Paper 002's l_s (``Design.sample_smoothness``, the stochastic solvers' step) reads the
    curvature bound from the atom: a func spelling of the logistic loss gets the same l_s as the
    built-in (it had none: the bound was read by isinstance on three built-ins)."""
    rng = np.random.default_rng(5)
    X, y = rng.standard_normal((80, 12)), np.sign(rng.standard_normal(80))
    w = sm.Variable(12, name="w")
    phi = func("phi", "log(1 + exp(z))")
    ls = []
    for loss in (A.logistic, phi):
        prob = sm.Problem(sm.minimize(sm.mean(loss(-(y * (X @ w)))) + 0.01 * sm.sum_squares(w)), [sm.nnz(w) <= 3])
        ls.append(prob.lower().design.sample_smoothness(6))
    assert ls[0] is not None and ls[1] == pytest.approx(ls[0], rel=1e-12)


def test_short_reduce_equals_numpy_reduce_bit_for_bit():
    """The slice-by-slice reduction of a short axis (the softmax's max and sums over its classes)
    gives NumPy's values exactly, for every axis length (short ones and the fallback), batch
    shape and layout (the strided (n, m, q) products of a Hessian applied to Fortran-ordered
    Jacobian columns)."""
    from sparsemodel.model.atoms.reductions import short_reduce

    rng = np.random.default_rng(3)
    for m in range(1, 11):
        for shape in [(m,), (37, m), (2, 29, m), (0, m)]:
            Z = rng.standard_normal(shape) * 30.0
            for op in (np.add, np.maximum):
                got = short_reduce(op, Z)
                want = op.reduce(Z, axis=-1, keepdims=True)
                assert got.shape == want.shape
                assert np.array_equal(got, want), (m, shape, op)
        J = np.asfortranarray(rng.standard_normal((41 * m, 13)) * 30.0)
        P = rng.random((41, m))
        PU = P[..., None] * J.reshape(41, m, 13)
        for op in (np.add, np.maximum):
            assert np.array_equal(short_reduce(op, PU, axis=-2), op.reduce(PU, axis=-2, keepdims=True)), (m, op)
