"""Stability selection with complementary pairs: ``Problem.stability()`` and ``sparsemodel stability MODEL``.

B random splits of the n samples into two disjoint halves of floor(n/2) (complementary pairs,
Shah and Samworth 2013), the model refitted on each of the 2B halves along the l0 path
k = 1..K (each half's path warm-started, one lowering per half: :mod:`sparsemodel.workflows.path`),
and for each unit (coordinate, group, row) and k its selection probability

    pi(u, k) = #{halves whose best support at k holds u} / (2B).

The stable set at threshold tau (default 0.6) is {u : max over k <= K of pi(u, k) >= tau}
(Meinshausen and Buhlmann 2010, eq. 7, over the whole path), or {u : pi(u, k) >= tau} at one
``at_k``. Beside it the expected number of false selections V is bounded, with q the average number
of units the base procedure selects on a half (the union of the path's supports up to K, or S_k at
one k) and p the number of units:

* E[V] <= q^2 / ((2 tau - 1) p) for tau > 1/2 (Meinshausen and Buhlmann 2010, Theorem 1, under
  exchangeability and a selector no worse than random; Shah and Samworth 2013, Theorem 1, show the
  same for the complementary pairs among the units of low selection probability without those
  assumptions);
* under unimodality of the selection frequencies, Shah and Samworth's sharper bound
  E[V] <= q^2 / (p C(tau, B)), C = 2 (2 tau - 1 - 1/(2B)) for tau <= 3/4 and
  C = (1 + 1/B) / (4 (1 - tau + 1/(2B))) above (defined for tau > 1/2 + min(theta^2, 1/(2B) +
  3 theta^2 / 4), theta = q / p; as the ``stabs`` R package computes it).

Each half is a function of (the model, its rows) alone, so halves run serially or on joblib's
workers (``n_jobs``) with the same answer.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from ..lowering.lowered import LoweredProblem
from ..lowering.subsets import SampleLowerings
from ..model.problem import Model
from ..outputs import protected_paths
from ..progress import progress_bar
from ..sets.sparsity import group_names
from ..sets.units import k_header
from ..solvers.result import coordinate_label, problem_names
from ..workflows.criteria import SelectionError, data_term
from ..workflows.figures import new_figure
from ..workflows.metrics import coordinate, train_model
from ..workflows.path import run_path
from ..workflows.session import _refuse_bad_models, _with_default_solver, solver_class
from .base import InferenceError, check_level, replicates
from .report import Report


def unit_members(lp: LoweredProblem, values: dict[str, Any]) -> np.ndarray:
    """Which units of the constraint set are nonzero in a solution (bool per unit)."""
    s = lp.set
    z = lp.layout.pack(values)[s.coords]
    if s.unit_of is None:
        return z != 0
    return np.bincount(s.unit_of, weights=z * z, minlength=s.n_units) > 0


def unit_names(problem: Model, lp: LoweredProblem) -> list[str]:
    """The name of each unit of the constraint set: a coordinate's, a row's or a group's."""
    s = lp.set
    c = s.constraint
    var = c.variable
    names = problem_names(problem).get(var.name)
    local = np.asarray(c.coords)
    if s.unit_of is None:
        return [coordinate_label(names, var.name, var.shape, int(i)) for i in local]
    first = [int(local[np.flatnonzero(s.unit_of == u)[0]]) for u in range(s.n_units)]
    return [group_names(c, np.array([f]), names)[0] for f in first]


def half_path(
    problem: Model,
    rows: np.ndarray,
    ks: list[int],
    solver: str,
    options: dict[str, Any],
    start: str,
    lowerings: SampleLowerings | None = None,
) -> np.ndarray:
    """(len(ks), units) memberships of the best supports along the path on the rows ``rows``: one
    replicate of stability selection, a function of its arguments alone (``lowerings``: the
    model's lowerings on its halves, shared by the replicates of one process: every half after the
    first rebound instead of lowered, lowering/subsets.py)."""
    if lowerings is None:
        lp = LoweredProblem(train_model(problem, rows))
    else:
        lp = lowerings.lower(rows)
    model = lp.problem
    path = run_path(model, lp, solver_class(lp, solver), ks, options, start=start)
    out = np.zeros((len(ks), lp.set.n_units), dtype=bool)
    for i, pt in enumerate(path.points):
        if not pt.ok:
            raise InferenceError(f"the path on a half of the samples failed at k={pt.k}: {pt.message}")
        out[i] = unit_members(lp, pt.result.values)
    return out


def halves(n: int, pairs: int, seed: int | None) -> list[np.ndarray]:
    """2B halves: B random splits of n samples into two disjoint sets of floor(n/2) rows each."""
    rng = np.random.default_rng(seed)
    m = n // 2
    out = []
    for _ in range(pairs):
        perm = rng.permutation(n)
        out += [np.sort(perm[:m]), np.sort(perm[m : 2 * m])]
    return out


def stability(
    problem: Model,
    k: Any = None,
    pairs: int = 50,
    threshold: float = 0.6,
    at_k: int | None = None,
    solver: str | None = None,
    start: str = "warm",
    seed: int | None = 0,
    n_jobs: int = 1,
    truth: dict[str, Any] | None = None,
    progress: bool | None = False,
    **options: Any,
) -> StabilityResult:
    """Stability selection (module docstring); see :meth:`sparsemodel.problem.Problem.stability`."""
    t0 = time.perf_counter()
    _refuse_bad_models(problem)
    tau = check_level("threshold", threshold, 0.5, 1.0 + 1e-12)
    if isinstance(pairs, bool) or not isinstance(pairs, int) or pairs < 1:
        raise InferenceError(f"pairs={pairs!r} must be a number of complementary pairs >= 1 (50 is usual)")
    lp = LoweredProblem(problem)
    if not coordinate(lp.set):
        raise InferenceError(
            "stability selection counts units of a sparsity constraint nnz(...) <= k (coordinates, groups, rows)",
            problem.objective.span,
            "write one nnz(w) <= k on the variable whose coordinates are to be selected",
        )
    try:
        n = data_term(problem, lp).n
    except SelectionError as exc:
        raise InferenceError(f"stability selection resamples the rows: {exc.message}", exc.span, exc.hint) from None
    if n < 4:
        raise InferenceError(f"stability selection needs at least 4 samples to halve; this model has {n}")
    ks = _ks(lp, k)
    if at_k is not None:
        at_k = lp.set.check_budget(at_k)
        if at_k not in ks:
            raise InferenceError(f"at_k={at_k} is not on the path k = {ks[0]}..{ks[-1]}", hint="widen k or change at_k")
    name, opts = _with_default_solver(problem, solver, options)
    solver_class(lp, name).validate(opts)
    rows = halves(n, pairs, seed)
    jobs = [(problem, r, ks, name, opts, start) for r in rows]
    if n_jobs == 1:
        out = []
        bar = progress_bar(total=len(jobs), desc="stability", unit="half", progress=progress)
        lowerings = SampleLowerings(problem)  # (every half has floor(n/2) rows: one lowering, rebound)
        try:
            for args in jobs:
                out.append(half_path(*args, lowerings))
                bar.update(1)
        finally:
            bar.close()
    else:
        out = replicates(half_path, jobs, n_jobs)
    res = StabilityResult(problem, unit_names(problem, lp), ks, np.array(out), tau, at_k, name, pairs, n)
    res.unit = lp.set.unit
    res.time_s = time.perf_counter() - t0
    if truth is not None:
        res.set_truth(problem, lp, truth)
    return res


def _ks(lp: LoweredProblem, k: Any) -> list[int]:
    """The path's bounds: 1..K for k = K (default the model's bound), or the values given."""
    if k is None:
        k = lp.set.budget
    if isinstance(k, (int, np.integer)) and not isinstance(k, bool):
        ks = list(range(1, int(k) + 1))
    else:
        try:
            ks = sorted({int(v) for v in k})
        except (TypeError, ValueError):
            raise InferenceError(
                f"k={k!r}: give the largest bound K (the path runs 1..K) or a list of bounds"
            ) from None
    ks = [lp.set.check_budget(v) for v in ks]
    if not ks or ks[0] < 1:
        raise InferenceError("the stability path needs bounds k >= 1", hint="k = 10 runs the path k = 1..10")
    return ks


def um_const(tau: float, pairs: int, theta: float) -> float | None:
    """Shah and Samworth's constant of the unimodal bound (None where it is not defined)."""
    B = pairs
    if tau <= 0.75:
        if tau <= 0.5 + min(theta**2, 1 / (2 * B) + 0.75 * theta**2):
            return None
        return 2 * (2 * tau - 1 - 1 / (2 * B))
    return (1 + 1 / B) / (4 * (1 - tau + 1 / (2 * B)))


class StabilityResult(Report):
    """Stability selection's answer: ``probabilities`` (len(ks) x units: pi(u, k)), ``selected``
    (unit indices), ``selected_names``, ``q`` (the average number selected by the base procedure),
    ``bound`` (Meinshausen-Buhlmann / Shah-Samworth) and ``bound_unimodal``; with a truth, the
    false selections ``false_selections``. ``table()``, ``to_csv`` (one row per unit, a column per
    k), ``to_json``, ``plot`` (the stability paths)."""

    title = "stability selection"

    def __init__(
        self,
        problem: Model,
        names: list[str],
        ks: list[int],
        members: np.ndarray,  # (2B, len(ks), units)
        tau: float,
        at_k: int | None,
        solver: str,
        pairs: int,
        n: int,
    ):
        self.source = getattr(problem, "source", "<python>")
        self.protected = protected_paths(problem)
        self.names, self.ks, self.tau, self.at_k, self.solver, self.n_pairs, self.n = (
            names,
            ks,
            tau,
            at_k,
            solver,
            pairs,
            n,
        )
        self.members = members
        self.probabilities = members.mean(axis=0)
        self.p = members.shape[2]
        self.unit = ""
        self.time_s = 0.0
        self.truth_units: set[int] | None = None
        if at_k is None:
            score = self.probabilities.max(axis=0)
            self.q = float(members.any(axis=1).sum(axis=1).mean())  # |union of the path's supports| per half
        else:
            i = ks.index(at_k)
            score = self.probabilities[i]
            self.q = float(members[:, i].sum(axis=1).mean())
        self.score = score
        self.selected = np.flatnonzero(score >= tau)

    @property
    def selected_names(self) -> list[str]:
        return [self.names[j] for j in self.selected]

    @property
    def bound(self) -> float:
        """E[V] <= q^2 / ((2 tau - 1) p) (Meinshausen and Buhlmann 2010, Theorem 1)."""
        return self.q**2 / ((2 * self.tau - 1) * self.p) if self.tau > 0.5 else math.inf

    @property
    def bound_unimodal(self) -> float | None:
        """Shah and Samworth's bound under unimodality (None where it is not defined)."""
        c = um_const(self.tau, self.n_pairs, self.q / self.p)
        return None if c is None else self.q**2 / (self.p * c)

    def set_truth(self, problem: Model, lp: LoweredProblem, truth: dict[str, Any]) -> None:
        """The true values by variable name: the true units, and the false selections."""
        from ..workflows.metrics import Truth

        t = Truth(problem, lp, truth)
        if t.true_units is None:
            raise InferenceError("the truth does not give every constrained coordinate", hint="give the whole variable")
        self.truth_units = set(t.true_units)

    @property
    def false_selections(self) -> int | None:
        if self.truth_units is None:
            return None
        return len(set(self.selected.tolist()) - self.truth_units)

    @property
    def columns(self) -> tuple[str, ...]:
        cols = ["unit", "name", "max_probability" if self.at_k is None else f"probability_at_{self.at_k}", "selected"]
        if self.truth_units is not None:
            cols.append("true")
        return tuple(cols + [f"k={k}" for k in self.ks])

    def rows(self) -> list[dict[str, Any]]:
        sel = set(self.selected.tolist())
        out = []
        for j, name in enumerate(self.names):
            r: dict[str, Any] = {
                "unit": j,
                "name": name,
                self.columns[2]: float(self.score[j]),
                "selected": int(j in sel),
            }
            if self.truth_units is not None:
                r["true"] = int(j in self.truth_units)
            for i, k in enumerate(self.ks):
                r[f"k={k}"] = float(self.probabilities[i, j])
            out.append(r)
        return out

    def describe(self) -> str:
        where = f"k = {self.ks[0]}..{self.ks[-1]}" if self.at_k is None else f"k = {self.at_k}"
        lines = [
            f"stability selection: {len(self.selected)} of {self.p} {self.unit or 'units'} selected "
            f"at threshold {self.tau:g} ({where})",
            f"  {self.n_pairs} complementary pairs of halves ({self.n // 2} of {self.n} rows each), the l0 path of "
            f"{self.solver} on each",
            f"  q = {self.q:.3g} units selected per half on average; expected false selections E[V] <= {self.bound:.3g} "
            "(Meinshausen-Buhlmann / Shah-Samworth)",
        ]
        um = self.bound_unimodal
        lines.append(
            f"  under unimodality (Shah-Samworth): E[V] <= {um:.3g}"
            if um is not None
            else "  (the unimodal bound of Shah-Samworth is not defined at this threshold)"
        )
        if self.truth_units is not None:
            lines.append(f"  against the truth: {self.false_selections} false selections")
        lines.append(f"  time {self.time_s:.3g} s")
        return "\n".join(lines)

    def table(self, fmt: str = "simple", top: int = 20) -> str:
        from tabulate import tabulate

        rows = sorted(self.rows(), key=lambda r: -r[self.columns[2]])
        cols = ["name", self.columns[2], "selected"] + (["true"] if self.truth_units is not None else [])
        show = [k for k in self.ks if k in (self.ks[0], self.ks[-1]) or k == self.at_k][:3]
        body = [
            [r[c] if not isinstance(r[c], float) else f"{r[c]:.3g}" for c in cols]
            + [f"{r[f'k={k}']:.3g}" for k in show]
            for r in rows[:top]
        ]
        parts = [self.describe()]
        if len(self.selected):
            parts.append("selected: " + ", ".join(self.selected_names))
        parts.append(tabulate(body, headers=cols + [f"pi at k={k}" for k in show], tablefmt=fmt))
        if len(rows) > top:
            parts.append(f"({len(rows) - top} more units with smaller probabilities in the CSV and JSON)")
        return "\n".join(parts)

    def __repr__(self) -> str:
        return f"StabilityResult(threshold={self.tau:g}, selected={self.selected_names})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "threshold": self.tau,
            "k": self.ks,
            "at_k": self.at_k,
            "pairs": self.n_pairs,
            "solver": self.solver,
            "q": self.q,
            "bound": self.bound,
            "bound_unimodal": self.bound_unimodal,
            "selected": self.selected.tolist(),
            "selected_names": self.selected_names,
            "false_selections": self.false_selections,
            "time_s": self.time_s,
            "units": self.rows(),
        }

    def figure(self, metrics: Any = None) -> Any:
        """The stability paths: pi(u, k) against k, one line per unit (selected ones in colour). (``metrics``: the study reports' plot argument; this plot is fixed)"""
        fig, (ax,) = new_figure(1, width=7.0)
        sel = set(self.selected.tolist())
        for j in range(self.p):
            if j not in sel:
                ax.plot(self.ks, self.probabilities[:, j], color="0.75", lw=0.7)
        for j in sorted(sel):
            ax.plot(self.ks, self.probabilities[:, j], lw=1.4, label=self.names[j] if len(sel) <= 12 else None)
        ax.axhline(self.tau, color="C3", ls="--", lw=1, label=f"threshold {self.tau:g}")
        ax.set_xlabel(k_header(self.unit) or "k (bound)")
        ax.set_ylabel("selection probability")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"stability paths ({2 * self.n_pairs} halves): {len(sel)} selected, E[V] <= {self.bound:.3g}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
        return fig


__all__ = ["StabilityResult", "half_path", "halves", "stability", "um_const", "unit_members", "unit_names"]
