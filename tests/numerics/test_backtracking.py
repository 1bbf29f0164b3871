"""The Armijo backtracking's chords (numerics/newton.backtrack): on a convex objective a trial the
chord through two failed trials rules out is one the plain halving would have rejected, so the step
accepted is the same; only the trials are fewer. The chords are read only where convexity is
proven (never on a custom_loss, which is convex by assumption)."""

from __future__ import annotations

import numpy as np

import sparsemodel as sm
from sparsemodel.numerics import newton as newton_mod
from sparsemodel.numerics.evaluation import _State
from sparsemodel.numerics.newton import backtrack


def plain(t, ft, t_prev, f_prev, f, dec, tries):
    return 0.5 * t, tries + 1


def search(phi, dec: float, rule) -> tuple[float | None, int]:
    """The line search of numerics/newton._newton_one on phi (phi(0) = f, phi'(0) = -dec) with the
    next-step rule ``rule``: (the step accepted or None, trials)."""
    f = phi(0.0)
    t, tries, t_prev, f_prev, trials = 1.0, 0, np.nan, np.nan, 0
    while tries < 50:
        ft = phi(t)
        trials += 1
        if ft <= f - 0.25 * t * dec:
            return t, trials
        nxt, tries = rule(t, ft, t_prev, f_prev, f, dec, tries)
        if np.isfinite(ft):
            t_prev, f_prev = t, ft
        t = nxt
    return None, trials


def test_a_chord_skips_only_trials_the_halving_rejects():
    """Random convex rays phi(t) = sum_j a_j softplus(b_j S t - d_j) - (q + dec) t, q = sum_j a_j b_j S
    sigma(-d_j) (a logistic loss along a direction: flat near t = 0 where the d_j are large, linear
    far out; the slope at 0 is -dec) with step scales S from 1 (a good step) to 1e12 (the overlong Newton step of
    a nearly vanished curvature): the same accepted step as the plain halving, never more trials,
    and fewer where it needs many (over 40 rays: half the trials at S = 1e6, a third at 1e12)."""
    total = {S: [0, 0] for S in (1.0, 1e3, 1e6, 1e12)}
    for seed in range(40):
        ray(np.random.default_rng(seed), total)
    assert total[1.0][0] == total[1.0][1]
    assert total[1e6][0] <= 0.6 * total[1e6][1] and total[1e12][0] <= 0.4 * total[1e12][1]


def ray(rng: np.random.Generator, total: dict) -> None:
    m = rng.integers(1, 5)
    a, b, d = rng.uniform(0.1, 3.0, m), rng.uniform(0.5, 4.0, m), rng.uniform(0.0, 30.0, m)
    for S in total:
        q, dec = (a * b * S / (1.0 + np.exp(d))).sum(), rng.uniform(0.1, 2.0)

        def phi(t, a=a, b=b, d=d, S=S, q=q, dec=dec):
            return float((a * np.logaddexp(0.0, b * S * t - d)).sum() - (q + dec) * t)

        got, n_chord = search(phi, dec, backtrack)
        want, n_plain = search(phi, dec, plain)
        assert got == want
        assert n_chord <= n_plain and (n_plain < 12 or n_chord < n_plain)
        total[S][0] += n_chord
        total[S][1] += n_plain


def test_the_steps_and_answers_of_a_separable_softmax_are_unchanged(monkeypatch):
    """On separable softmax draws (the loss tends to 0: Newton steps far too long, halved tens of
    times) the Python pipeline ends at the same point, bit for bit, with the chords as with the plain
    halving, in a third of the trials; the compiled kernel ends at the infimum too."""
    from tests.solvers.test_lean import AUTO, multinomial

    trials = [0]
    real = _State.trial

    def counting(self, *args, **kw):
        trials[0] += 1
        return real(self, *args, **kw)

    monkeypatch.setattr(_State, "trial", counting)
    for seed in (2, 3):
        lp = multinomial(24, 20, 4, seed).lower()
        out = []
        for rule in (backtrack, plain):
            monkeypatch.setattr(newton_mod, "backtrack", rule)
            trials[0] = 0
            r = AUTO(lean=False).solve(lp)
            out.append((r, trials[0]))
        (chord, n_chord), (halving, n_plain) = out
        assert np.array_equal(chord.x, halving.x) and chord.objective == halving.objective
        assert n_chord < n_plain / 2
        monkeypatch.setattr(newton_mod, "backtrack", backtrack)
        lean = AUTO().solve(lp)
        if lean.extra.get("kernel") == "compiled":  # (separable: both at the infimum 0 to the rounding
            # of a loss whose terms are the size of the coefficients, test_lean's separable test)
            assert abs(lean.objective) <= 1e-6 and abs(chord.objective) <= 1e-6


def test_chords_are_read_only_where_convexity_is_proven():
    """A built-in convex loss and a proven user function are convex terms; a custom_loss (convex by
    assumption: a nonconvex one gets a local answer, tests/model/test_custom.py) and a concave term
    are not."""
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((30, 4)), rng.integers(0, 2, 30).astype(float)
    w = sm.Variable(4, name="w")

    def terms(obj):
        lp = sm.Problem(sm.minimize(obj), [sm.nnz(w) <= 2]).lower()
        return [t.convex for t in lp.design.terms]

    assert all(terms(sm.sum(sm.logistic(-(2 * y - 1) * (X @ w)))))
    assert all(terms(sm.sum(sm.exp(X @ w) - y * (X @ w))))
    loss = sm.custom_loss(lambda v: (float(v @ v), 2 * v), w, hvp=lambda v, d: 2 * d)
    assert not any(terms(loss))


def test_a_trial_that_passes_the_test_without_a_decrease_is_no_step(monkeypatch):
    """Where t dec / 4 falls below the rounding of f the Armijo test passes with f unchanged; such a
    trial is no step (the solve is at its optimum to rounding along the direction), so every step of
    a line search lowers f (only the final polish may keep f): on quasi-separable softmax draws the
    solves used to take tens of such steps, to their iteration limit (10 classes, 200 x 50: 595 ->
    423 Newton steps in the kernel). The kernel ends where the Python pipeline does."""
    from tests.solvers.test_lean import AUTO, agree_answer, multinomial

    events: list[tuple[str, float]] = []
    trial, accept, fg, one = _State.trial, _State.accept, _State.fg, newton_mod._newton_one
    bad = []

    def fg_(self, idx):
        fa, ga = fg(self, idx)
        events.append(("f", float(fa[0])))
        return fa, ga

    def trial_(self, idx, U):
        fs, keep = trial(self, idx, U)
        events.append(("t", float(fs[0])))
        return fs, keep

    def accept_(self, idx, U, keep, ok=None):
        events.append(("a", 0.0))
        return accept(self, idx, U, keep, ok)

    def one_(rd, U0, opts):
        events.clear()
        out = one(rd, U0, opts)
        steps = [i for i, (e, _) in enumerate(events) if e == "a"][:-1]  # (the last may be the polish)
        for i in steps:
            f = next(v for e, v in reversed(events[:i]) if e == "f")
            bad.append(not events[i - 1][1] < f)
        return out

    for classes, n, p, k, seed in ((4, 24, 20, 4, 1), (4, 24, 20, 4, 5), (6, 60, 30, 5, 5)):
        lp = multinomial(n, p, k, seed, classes=classes).lower()
        for obj, name, fn in ((_State, "fg", fg_), (_State, "trial", trial_), (_State, "accept", accept_)):
            monkeypatch.setattr(obj, name, fn)
        monkeypatch.setattr(newton_mod, "_newton_one", one_)
        python = AUTO(lean=False).solve(lp)
        monkeypatch.undo()
        assert bad and not any(bad)
        lean = AUTO().solve(lp)
        if lean.extra.get("kernel") == "compiled":
            agree_answer(lean, python)
