"""Solving again with new data of the same shape (``LoweredProblem.rebind``): the rebound lowering
gives the answers of the model lowered afresh with that data, its kernel problem is the old one's
(rewritten in place), and what cannot be rebound is refused at the data's name."""

from __future__ import annotations

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.errors import ConvexityError, ModelError
from sparsemodel.lowering import lean as lean_mod


def draw(family: str, seed: int, n: int = 100, p: int = 20) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    eta = X[:, :3] @ np.array([1.5, -1.0, 0.8])
    if family == "ls":
        y = eta + rng.standard_normal(n)
    elif family == "logistic":
        y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)
    else:
        y = rng.poisson(np.exp(0.4 * eta)).astype(float)
    return X, y


def model(family: str, X: np.ndarray, y: np.ndarray, k: int = 3) -> sm.Problem:
    Xd, yd = sm.Data(X, name="X"), sm.Data(y, name="y")
    w = sm.Variable(X.shape[1] + 1, name="w")
    z = Xd @ w[1:] + w[0]
    if family == "ls":
        loss = sm.sum_squares(z - yd)
    elif family == "logistic":
        loss = sm.sum(sm.logistic(z)) - yd @ z
    else:
        loss = sm.sum(sm.exp(z)) - yd @ z
    return sm.Problem(sm.minimize(loss + 0.1 * sm.sum_squares(w[1:])), [sm.nnz(w[1:]) <= k])


@pytest.mark.parametrize("family", ["ls", "logistic", "poisson"])
def test_a_rebound_lowering_solves_the_model_with_the_new_data(family):
    from sparsemodel.solvers import get_solver

    auto = get_solver("auto")
    X1, y1 = draw(family, 0)
    lp = model(family, X1, y1).lower()
    auto().solve(lp)
    kernel = lean_mod.lean_data(lp)
    for seed in (1, 2, 3):
        X2, y2 = draw(family, seed)
        lp2 = lp.rebind(X=X2, y=y2)
        got = auto().solve(lp2)
        fresh = auto().solve(model(family, X2, y2).lower())
        assert abs(got.objective - fresh.objective) <= 1e-9 * max(1.0, abs(fresh.objective))
        assert list(got.support) == list(fresh.support)
        assert np.allclose(got.x, fresh.x, atol=1e-7)
        if kernel is not None:
            assert lean_mod.lean_data(lp2) is kernel  # the same compiled problem, new numbers
            assert got.extra.get("kernel") == "compiled"
        # the objective's value and gradient are the new model's
        x = np.linspace(-0.2, 0.3, X2.shape[1] + 1)
        f2, g2 = lp2.value_and_grad(x)
        f3, g3 = model(family, X2, y2).lower().value_and_grad(x)
        assert np.isclose(f2, f3) and np.allclose(g2, g3)
        lp = lp2


def test_a_rebound_lowering_gives_the_bound_a_fresh_one_gives():
    """The lower bound beside a rebound answer is the fresh lowering's: a refusal is kept across
    rebinding only while the ridges that decide it are unchanged (here the ridge's weights are data
    that are rebound from zero to positive, which makes a finite bound exist)."""
    from sparsemodel.solvers import get_solver

    auto = get_solver("auto")
    X1, y1 = draw("logistic", 0)

    def ridged(X, y, lam):
        w = sm.Variable(X.shape[1] + 1, name="w")
        z = sm.Data(X, name="X") @ w[1:] + w[0]
        loss = sm.sum(sm.logistic(z)) - sm.Data(y, name="y") @ z
        ridge = sm.sum(sm.Data(lam, name="lam") * sm.square(w[1:]))
        return sm.Problem(sm.minimize(loss + ridge), [sm.nnz(w[1:]) <= 3])

    zero, half = np.zeros(20), np.full(20, 0.5)
    lp = ridged(X1, y1, zero).lower()
    first = auto().solve(lp)
    assert first.lower_bound is None and "neither a ridge nor a box" in first.bound_note
    for seed, lam in ((1, zero), (2, half), (3, zero)):
        X2, y2 = draw("logistic", seed)
        lp = lp.rebind(X=X2, y=y2, lam=lam)
        got, fresh = auto().solve(lp), auto().solve(ridged(X2, y2, lam).lower())
        assert got.bound_note == fresh.bound_note
        if fresh.lower_bound is None:
            assert got.lower_bound is None
        else:
            assert got.lower_bound == pytest.approx(fresh.lower_bound, rel=1e-9, abs=1e-12)
    assert fresh.lower_bound is None and got.lower_bound is None
    lp = lp.rebind(lam=half)
    assert auto().solve(lp).lower_bound is not None  # the refusal of lam = 0 was not carried


@pytest.mark.parametrize("family", ["ls", "logistic", "poisson"])
def test_a_rebound_lowering_carries_its_relaxation_with_the_new_data(family):
    """With the ridges unchanged the plain relaxation is carried to the rebound lowering (not built
    again), reading the new design: the fast and the tight bounds at the rebound answer are the
    fresh lowering's, and a point's bound moves with the data."""
    from sparsemodel.lowering.bound import lower_bound, relaxation
    from sparsemodel.solvers import get_solver

    auto = get_solver("auto")
    X1, y1 = draw(family, 0)
    lp = model(family, X1, y1).lower()
    auto().solve(lp)
    old = relaxation(lp)
    for seed in (4, 5):
        X2, y2 = draw(family, seed)
        lp2 = lp.rebind(X=X2, y=y2)
        rel = relaxation(lp2)
        assert rel is not old and rel.design is lp2.design and rel.units is old.units  # carried, not rebuilt
        fresh_lp = model(family, X2, y2).lower()
        got = auto().solve(lp2)
        x = lp2.layout.pack(got.values)
        for mode in ("fast", "tight"):
            a, b = lower_bound(lp2, x, mode).value, lower_bound(fresh_lp, x, mode).value
            assert a == pytest.approx(b, rel=1e-9, abs=1e-12), mode
        assert lower_bound(lp2, x).value != pytest.approx(lower_bound(lp, x).value, rel=1e-6)
        lp, old = lp2, rel


def test_the_old_lowering_still_solves_its_own_data():
    from sparsemodel.solvers import get_solver

    auto = get_solver("auto")
    X1, y1 = draw("logistic", 0)
    X2, y2 = draw("logistic", 5)
    lp = model("logistic", X1, y1).lower()
    before = auto().solve(lp)
    lp.rebind(X=X2, y=y2)
    again = auto().solve(lp)
    assert abs(again.objective - before.objective) <= 1e-9 * max(1.0, abs(before.objective))


def test_what_cannot_be_rebound_is_refused():
    X, y = draw("ls", 0)
    lp = model("ls", X, y).lower()
    with pytest.raises(ModelError, match="no data named 'Z'"):
        lp.rebind(Z=X)
    with pytest.raises(ModelError, match=r"shape \(50, 20\)"):
        lp.rebind(X=X[:50])
    bad = y.copy()
    bad[3] = np.nan
    with pytest.raises(ModelError, match="NaN"):
        lp.rebind(y=bad)
    bad[3], bad[4] = np.inf, -np.inf  # (their sum is NaN)
    with pytest.raises(ModelError, match="infinite"):
        lp.rebind(y=bad)
    huge = np.full_like(y, 1e308)  # finite entries whose sum overflows: accepted
    assert lp.rebind(y=huge).design is not None
    A = sm.Data(np.ones((1, 20)), name="A")
    w = sm.Variable(20, name="w")
    lpc = sm.Problem(
        sm.minimize(sm.sum_squares(sm.Data(X, name="X") @ w - y) + sm.sum(A @ w)), [sm.nnz(w) <= 3, A @ w == 1]
    ).lower()
    with pytest.raises(ModelError, match="read by a constraint"):
        lpc.rebind(A=np.full((1, 20), 2.0))


def test_a_rebound_dataframe_names_the_coordinates_by_its_columns():
    """New data given as a DataFrame names the answer's coordinates by its own columns; an array of
    the same shape keeps the names the model had."""
    pd = pytest.importorskip("pandas")
    from sparsemodel.solvers import get_solver

    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 6))
    y = X[:, 2] - X[:, 4] + 0.1 * rng.standard_normal(80)
    w = sm.Variable(6, name="w")
    Xd = sm.Data(pd.DataFrame(X, columns=list("abcdef")), name="X")
    lp = sm.Problem(sm.minimize(sm.sum_squares(Xd @ w - sm.Data(y, name="y"))), [sm.nnz(w) <= 2]).lower()
    auto = get_solver("auto")()
    assert auto.solve(lp).support_names == ["c", "e"]
    lp2 = lp.rebind(X=pd.DataFrame(X[:, ::-1], columns=list("uvwxyz")))
    assert auto.solve(lp2).support_names == ["v", "x"]
    assert auto.solve(lp.rebind(X=X[:, ::-1])).support_names == ["b", "d"]


# ---------------------------------------------------------------------------- every composite form
# Each form is rebound twice in a row (new data of the same shape) and the answers compared with a
# fresh lowering of the model with that data: x, objective, support, status, bound and certificate.


def _glm(rng: np.random.Generator, n: int = 80, p: int = 12) -> tuple[np.ndarray, np.ndarray]:
    X = rng.standard_normal((n, p))
    return X, X[:, :3] @ np.array([1.0, -1.0, 0.6])


def _form(name: str, d: dict, lam: object = None) -> sm.Problem:
    """The model ``name`` on the data ``d`` (each array named by its key)."""
    D = {key: sm.Data(v, name=key) for key, v in d.items() if key != "X2"}
    X = D.get("X")
    p = d["X"].shape[1] if "X" in d else 0
    w = sm.Variable(p + 1, name="w")
    z = X @ w[1:] + w[0] if X is not None else None
    k, cons = 3, None
    if name == "least squares":
        loss = sm.sum_squares(z - D["y"])
    elif name == "ridge":
        loss = sm.sum_squares(z - D["y"]) / (2 * len(d["y"])) + 0.05 * sm.sum_squares(w[1:])
    elif name == "logistic, labels +-1":
        loss = sm.sum(sm.logistic(-(2 * D["y"] - 1) * z))
    elif name == "logistic, canonical":
        loss = sm.sum(sm.logistic(z)) - D["y"] @ z
    elif name == "poisson":
        loss = sm.sum(sm.exp(z) - D["y"] * z)
    elif name == "gamma":
        loss = sm.sum(D["y"] * z - sm.log(z))
    elif name == "weighted logistic":
        loss = sm.sum(D["wt"] * sm.logistic(-(2 * D["y"] - 1) * z)) + 0.1 * sm.sum_squares(w[1:])
    elif name == "data read twice":  # two nodes named X and one read in two terms
        w = sm.Variable(p, name="w")
        Xw = X @ w
        loss = sm.sum_squares(Xw - D["y"]) + 0.5 * sm.sum_squares(sm.Data(d["X"], name="X") @ w) - D["y"] @ Xw
    elif name == "quad_form of data":
        w = sm.Variable(p, name="w")
        loss = sm.sum_squares(X @ w - D["y"]) + sm.quad_form(w, D["P"])
    elif name == "huber (outside the lean class)":
        w = sm.Variable(p, name="w")
        loss = sm.sum(D["wt"] * sm.huber(X @ w - D["y"], M=0.5))
    elif name == "sparse data":
        w = sm.Variable(p, name="w")
        loss = sm.sum_squares(X @ w - D["y"]) + 0.1 * sm.sum_squares(w)
    elif name == "a param's coefficient":
        loss = sm.sum_squares(z - D["y"]) + lam * sm.sum_squares(w[1:])
    elif name == "maximize":
        return sm.Problem(sm.maximize(-sm.sum_squares(z - D["y"])), [sm.nnz(w[1:]) <= k])
    elif name == "cox, times rebound (the general path)":
        w = sm.Variable(p, name="w")
        loss = sm.cox(X @ w, D["t"], D["e"])
    elif name == "multinomial":
        W, b = sm.Variable((p, 3), name="W"), sm.Variable(3, name="b")
        Z = X @ W + b
        loss = sm.sum(sm.logsumexp(Z, axis=1)) - sm.sum(D["Y"] * Z) + 0.2 * sm.sum_squares(W)
        return sm.Problem(sm.minimize(loss), [sm.nnz(W, groups=np.repeat(np.arange(p), 3)) <= 2])
    elif name == "softmax, coordinates of a matrix":
        W = sm.Variable((p, 3), name="W")
        Z = X @ W
        loss = sm.mean(sm.logsumexp(Z, axis=1) - sm.sum(D["Y"] * Z, axis=1)) + 0.05 * sm.sum_squares(W)
        return sm.Problem(sm.minimize(loss), [sm.nnz(W) <= 4])
    else:  # pragma: no cover
        raise KeyError(name)
    var = w if cons is None and w.size == p else w[1:]
    return sm.Problem(sm.minimize(loss), [sm.nnz(var) <= k])


def _data(name: str, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    X, eta = _glm(rng)
    n, p = X.shape
    if name in ("least squares", "ridge", "a param's coefficient", "maximize", "data read twice"):
        return {"X": X, "y": eta + rng.standard_normal(n)}
    if name == "quad_form of data":
        A = rng.standard_normal((p, p))
        return {"X": X, "y": eta + rng.standard_normal(n), "P": A @ A.T / p + 0.1 * np.eye(p)}
    if name in ("logistic, labels +-1", "logistic, canonical"):
        return {"X": X, "y": (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)}
    if name == "weighted logistic":
        return {"X": X, "y": (rng.random(n) < 1 / (1 + np.exp(-eta))) * 1.0, "wt": rng.uniform(0.5, 2.0, n)}
    if name == "poisson":
        return {"X": X, "y": rng.poisson(np.exp(0.4 * eta)).astype(float)}
    if name == "gamma":
        return {"X": X, "y": rng.gamma(2.0, 1.0 / (1.0 + np.exp(-eta)) / 2.0)}
    if name == "huber (outside the lean class)":
        return {"X": X, "y": eta + rng.standard_t(2, n), "wt": rng.uniform(0.5, 2.0, n)}
    if name == "cox, times rebound (the general path)":
        return {"X": X, "t": np.exp(-eta + rng.standard_normal(n)), "e": (rng.random(n) < 0.7) * 1.0}
    if name == "sparse data":
        import scipy.sparse as sparse

        Xs = sparse.random(n, p, density=0.3, random_state=seed, format="csr")
        return {"X": Xs, "y": Xs @ np.r_[1.0, -1.0, np.zeros(p - 2)] + 0.1 * rng.standard_normal(n)}
    Y = np.eye(3)[np.argmax(X[:, :3] + 0.5 * rng.standard_normal((n, 3)), axis=1)]
    return {"X": X, "Y": Y}


FORMS = [
    "least squares",
    "ridge",
    "logistic, labels +-1",
    "logistic, canonical",
    "poisson",
    "gamma",
    "weighted logistic",
    "data read twice",
    "quad_form of data",
    "huber (outside the lean class)",
    "sparse data",
    "maximize",
    "multinomial",
    "softmax, coordinates of a matrix",
    "cox, times rebound (the general path)",
]
LOWERED_AGAIN = {"cox, times rebound (the general path)"}  # (the loss reads the new times itself)


def same_answer(got, fresh) -> None:
    assert got.status == fresh.status
    assert abs(got.objective - fresh.objective) <= 1e-9 * max(1.0, abs(fresh.objective))
    assert list(got.support) == list(fresh.support)
    assert np.allclose(got.x, fresh.x, atol=1e-7)
    assert got.bound_note == fresh.bound_note
    if fresh.lower_bound is None:
        assert got.lower_bound is None
    else:
        assert got.lower_bound == pytest.approx(fresh.lower_bound, rel=1e-8, abs=1e-10)
    assert (got.certificate is None) == (fresh.certificate is None)


@pytest.mark.parametrize("name", FORMS)
def test_every_form_rebound_twice_solves_the_model_with_the_new_data(name):
    from sparsemodel.solvers import get_solver

    auto = get_solver("auto")
    d1 = _data(name, 0)
    lp = _form(name, d1).lower()
    auto().solve(lp)
    kept = {key: (v.copy() if isinstance(v, np.ndarray) else v.copy()) for key, v in d1.items()}
    for seed in (1, 2):
        d = _data(name, seed)
        given = {key: v.copy() for key, v in d.items()}
        lp = lp.rebind(**d)
        got = auto().solve(lp)
        same_answer(got, auto().solve(_form(name, d).lower()))
        assert ("_bound" in lp.__dict__) == (name not in LOWERED_AGAIN)  # (the replay, not the general path)
        if name not in LOWERED_AGAIN:  # the solve read the design: the model's new tree was never built
            assert "stated" not in lp.problem.objective.__dict__
        for key, v in d.items():  # nothing given is modified
            a, b = (v.toarray(), given[key].toarray()) if hasattr(v, "toarray") else (v, given[key])
            assert np.array_equal(a, b)
        x = lp.layout.pack(got.values) * 0.9  # (the objective and gradient beside the answer)
        f, g = lp.value_and_grad(x)
        f0, g0 = _form(name, d).lower().value_and_grad(x)
        assert np.isclose(f, f0) and np.allclose(g, g0)
        assert str(lp.problem.objective) == str(_form(name, d).objective)
    for key, v in d1.items():  # the first data too
        a, b = (v.toarray(), kept[key].toarray()) if hasattr(v, "toarray") else (v, kept[key])
        assert np.array_equal(a, b)


def test_rebinding_one_name_at_a_time_keeps_the_others():
    from sparsemodel.solvers import get_solver

    auto = get_solver("auto")
    d0, d1 = _data("logistic, labels +-1", 0), _data("logistic, labels +-1", 1)
    lp = _form("logistic, labels +-1", d0).lower()
    lp = lp.rebind(X=d1["X"])
    same_answer(auto().solve(lp), auto().solve(_form("logistic, labels +-1", {"X": d1["X"], "y": d0["y"]}).lower()))
    lp = lp.rebind(y=d1["y"])
    same_answer(auto().solve(lp), auto().solve(_form("logistic, labels +-1", d1).lower()))


def test_a_param_changed_before_a_rebinding_is_read_with_its_new_value():
    """A lowering keeps the numbers it read; a rebinding reads the model's params again, as a fresh
    lowering of the model with the new data does."""
    from sparsemodel.solvers import get_solver

    auto = get_solver("auto")
    lam = sm.Parameter(0.5, name="lam")
    lp = _form("a param's coefficient", _data("a param's coefficient", 0), lam).lower()
    auto().solve(lp)
    lam.value = 20.0
    d = _data("a param's coefficient", 1)
    same_answer(auto().solve(lp.rebind(**d)), auto().solve(_form("a param's coefficient", d, lam).lower()))


def test_rebinding_then_a_path_gives_the_fresh_path():
    from sparsemodel.solvers import get_solver
    from sparsemodel.workflows.path import run_path

    auto = get_solver("auto")
    lp = _form("poisson", _data("poisson", 0)).lower()
    auto().solve(lp)
    d = _data("poisson", 3)
    lp = lp.rebind(**d)
    fresh = _form("poisson", d)
    got, want = run_path(lp.problem, lp, auto, [1, 2, 3, 4]), run_path(fresh, fresh.lower(), auto, [1, 2, 3, 4])
    for a, b in zip(got.points, want.points, strict=True):
        same_answer(a.result, b.result)


def test_derived_data_of_a_model_file_is_rebound_by_its_own_name():
    """``let Z = standardize(X)`` is data of its own (computed once): the objective reads Z, so Z is
    rebound (to the new X standardized) and X is refused at its name."""
    from sparsemodel.model.datafuncs import standardize
    from sparsemodel.solvers import get_solver

    text = """
data X : matrix
data y : vector
let Z = standardize(X)
var w[cols(X)]
minimize sum_squares(Z @ w - y) / (2 * rows(X))
subject to
    nnz(w) <= 3
"""
    auto = get_solver("auto")
    d0, d1 = _data("least squares", 0), _data("least squares", 1)
    lp = sm.parse(text, data=d0).lower()
    with pytest.raises(ModelError, match="no data named 'X'"):
        lp.rebind(X=d1["X"])
    lp = lp.rebind(Z=standardize(d1["X"]).value, y=d1["y"])
    assert "_bound" in lp.__dict__
    same_answer(auto().solve(lp), auto().solve(sm.parse(text, data=d1).lower()))


def test_new_data_of_another_kind_is_refused_at_its_name():
    X, y = draw("ls", 0)
    lp = model("ls", X, y).lower()
    with pytest.raises(ModelError, match="not numeric"):
        lp.rebind(y=np.array(["a"] * len(y)))
    with pytest.raises(ModelError, match="complex"):
        lp.rebind(y=y + 1j)


def test_data_whose_sign_the_convexity_rests_on_is_checked_again():
    """A weighted loss is convex because its weights are nonnegative (the DCP proof reads the data's
    sign): new weights with a negative entry are refused as a fresh lowering refuses them, not solved
    as an unbounded nonconvex problem; nonnegative ones (zeros included) and a sign the proof did not
    read rebind as before."""
    rng = np.random.default_rng(3)
    X, v = rng.standard_normal((60, 10)), np.sign(rng.standard_normal(60))
    wts = rng.uniform(0.5, 1.5, 60)
    w = sm.Variable(10, name="w")

    def weighted(weights, labels):
        loss = sm.sum(sm.Data(weights, name="wts") * sm.logistic(-sm.Data(labels, name="v") * (X @ w)))
        return sm.Problem(sm.minimize(loss), [sm.nnz(w) <= 3])

    lp = weighted(wts, v).lower()
    bad = wts.copy()
    bad[:5] = -1.0
    with pytest.raises(ConvexityError, match="new data for 'wts'") as got:
        lp.rebind(wts=bad)
    with pytest.raises(ConvexityError):  # (what the fresh lowering says)
        weighted(bad, v).solve()
    assert got.value.hint and "sign" in got.value.hint
    from sparsemodel.solvers import get_solver

    auto = get_solver("auto")
    ok = wts.copy()
    ok[:5] = 0.0
    same_answer(auto().solve(lp.rebind(wts=ok)), auto().solve(weighted(ok, v).lower()))
    flipped = -v  # the labels' sign is unknown to the proof: nothing to check again
    same_answer(auto().solve(lp.rebind(v=flipped)), auto().solve(weighted(wts, flipped).lower()))


@pytest.mark.parametrize("family", ["ls", "logistic"])
def test_rebinding_one_lowering_again_and_again_shares_its_kernel_problem(family, monkeypatch):
    """A study rebinds one base lowering to each data set (``lp.rebind(...)`` in a loop, not a chain)
    and may solve the base between them: every lowering of the family shares the one kernel problem,
    which takes the numbers of whichever is solved (written in place: no kernel problem is built
    after the first), and each answers its own model, as a fresh lowering does."""
    from sparsemodel.solvers import get_solver

    auto = get_solver("auto")
    X, y = draw(family, 0)
    lp = model(family, X, y).lower()
    base = auto().solve(lp)
    first = lean_mod.lean_data(lp)
    assert first is not None
    built = []
    real = lean_mod._build
    monkeypatch.setattr(lean_mod, "_build", lambda lp_: built.append(1) or real(lp_))
    sets = [draw(family, s) for s in (1, 2, 3)]
    for X2, y2 in sets + sets[:1]:
        lp2 = lp.rebind(X=X2, y=y2)
        same_answer(auto().solve(lp2), auto().solve(model(family, X2, y2).lower()))
        assert lean_mod.lean_data(lp2).P is first.P
        same_answer(auto().solve(lp), base)  # the base again: its own numbers written back
    assert built == [1] * 4  # (only the fresh lowerings of the comparison built theirs)


@pytest.mark.parametrize("family", ["ls", "logistic"])
def test_a_base_never_solved_builds_one_kernel_problem_and_one_relaxation(family, monkeypatch):
    """A study lowers its first sample and rebinds every sample from that lowering without solving
    it (cross-validation's folds, stability selection's halves): the first rebound solve builds the
    family's kernel problem and relaxation, and every later rebinding reuses them (rewritten and
    carried) instead of building its own; an earlier member solved again answers its own data."""
    from sparsemodel.lowering import bound as bound_mod
    from sparsemodel.solvers import get_solver

    auto = get_solver("auto")
    X, y = draw(family, 0)
    lp = model(family, X, y).lower()
    built, relaxed = [], []
    real_build, real_rel = lean_mod._build, bound_mod.Relaxation.__init__
    monkeypatch.setattr(lean_mod, "_build", lambda lp_: built.append(1) or real_build(lp_))

    def counted(self, *a, **kw):
        relaxed.append(1)
        real_rel(self, *a, **kw)

    monkeypatch.setattr(bound_mod.Relaxation, "__init__", counted)
    sets = [draw(family, s) for s in (1, 2, 3)]
    kept = []
    for X2, y2 in sets:
        lp2 = lp.rebind(X=X2, y=y2)
        got = auto().solve(lp2)
        assert got.lower_bound is not None
        kept.append((lp2, got))
    assert built == [1] and relaxed == [1]  # (the first rebound solve's, shared by the others)
    P = lean_mod.lean_data(kept[0][0]).P
    assert all(lean_mod.lean_data(m).P is P for m, _ in kept)
    for (lp2, got), (X2, y2) in zip(kept, sets):
        same_answer(auto().solve(lp2), got)  # (its own numbers written back after the others')
        fresh = auto().solve(model(family, X2, y2).lower())
        same_answer(got, fresh)
        assert got.lower_bound == pytest.approx(fresh.lower_bound, rel=1e-9, abs=1e-12)


def test_an_offset_skips_only_what_is_zero_at_the_origin():
    """Binding.at_zero leaves out the subtrees zero at the origin whatever their data (X @ w, w[0],
    their sums); every other node is evaluated: the offset of each affine form equals its value
    with every variable at zero, computed node by node."""
    from sparsemodel.model.samples import Binding, zero_at_origin

    rng = np.random.default_rng(3)
    X, y, c = rng.standard_normal((6, 3)), rng.standard_normal(6), rng.standard_normal(3)
    w, v = sm.Variable(3, name="w"), sm.Variable(6, name="v")
    Xd, yd = sm.Data(X, name="X"), sm.Data(y, name="y")
    forms = {
        Xd @ w - yd: False,
        Xd @ w + w[0]: True,
        2 * (Xd @ w) / 3 + v: True,
        Xd @ (w + c): False,  # (a variable moved by a constant: X c at the origin)
        -(2 * yd - 1) * (Xd @ w + w[1]): True,
        sm.sum(Xd @ w) + yd[0]: False,
        (Xd @ w)[2:4] - yd[:2]: False,
        sm.mean(Xd @ w - 1.0): False,
    }
    for e, zero in forms.items():
        assert zero_at_origin(e) is zero, e
        vals = {}
        for n in e.walk():  # the definition: every node forward with the variables at zero
            vals[n.uid] = np.zeros(n.shape) if isinstance(n, sm.Variable) else n.forward([vals[a.uid] for a in n.args])
        got = Binding({}, set(), {}, {}).at_zero(e)
        np.testing.assert_allclose(got, vals[e.uid], rtol=0, atol=1e-15)


def test_a_term_outside_the_canonical_maps_is_rebound_on_its_own_tree():
    """A term whose map is no canonical block form (Z = X @ (W @ R): an ExprMap through its tree):
    rebound, it reads the new data in the same tree (no tree rebuilt, no linearization again), and
    the design's linear part, constant and the objective's value and gradient are the fresh
    lowering's. The multinomial's linear part -sum(Y * Z) is a canonical map over Z's entries
    (rebound from its blocks), with the fresh lowering's linear part too."""
    from sparsemodel.objective.affine import ExprMap

    d0, d1 = _data("multinomial", 0), _data("multinomial", 1)
    R = np.array([[1.0, 0.5, 0.0], [0.0, 1.0, -0.5], [0.3, 0.0, 1.0]])

    def form(d: dict) -> sm.Problem:
        X, Y = sm.Data(d["X"], name="X"), sm.Data(d["Y"], name="Y")
        p = d["X"].shape[1]
        W = sm.Variable((p, 3), name="W")
        Z = X @ (W @ R)
        loss = sm.sum(sm.logsumexp(Z, axis=1)) - sm.sum(Y * Z) + 0.2 * sm.sum_squares(W)
        return sm.Problem(sm.minimize(loss), [sm.nnz(W, groups=np.repeat(np.arange(p), 3)) <= 2])

    lp = form(d0).lower()
    got = lp.rebind(**d1)
    fresh = form(d1).lower()
    olds = [m for m in lp.design.maps if isinstance(m, ExprMap)]
    news = [m for m in got.design.maps if isinstance(m, ExprMap)]
    assert olds and len(news) == len(olds)
    assert all(a.expr is b.expr and a is not b for a, b in zip(olds, news, strict=True))
    np.testing.assert_allclose(got.design.lin, fresh.design.lin, rtol=1e-12, atol=1e-12)
    assert got.design.const == pytest.approx(fresh.design.const, rel=1e-12)
    x = np.random.default_rng(0).standard_normal(lp.n)
    (fg, gg), (ff, gf) = got.oracle.value_and_grad(x), fresh.oracle.value_and_grad(x)
    assert fg == pytest.approx(ff, rel=1e-12)
    np.testing.assert_allclose(gg, gf, rtol=1e-10, atol=1e-10)
    lpm = _form("multinomial", d0).lower()
    assert not any(isinstance(m, ExprMap) for m in lpm.design.maps)
    gm, fm = lpm.rebind(**d1), _form("multinomial", d1).lower()
    np.testing.assert_allclose(gm.design.lin, fm.design.lin, rtol=1e-12, atol=1e-12)
    assert gm.design.const == pytest.approx(fm.design.const, rel=1e-12)
