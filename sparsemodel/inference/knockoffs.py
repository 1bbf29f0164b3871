"""The knockoff filter on any model the language writes: ``Problem.knockoffs(fdr=0.1)`` and
``sparsemodel knockoffs MODEL --fdr 0.1``.

One run: the design of the constrained units (:func:`sparsemodel.inference.augment.plan`), a
knockoff copy of it (:mod:`sparsemodel.inference.gaussian`: model-X Gaussian with the MVR, maxent,
SDP or equicorrelated construction, or fixed-X for least squares with n >= 2p + 1), the model
re-solved on [X, X~] with its own loss, free coordinates and penalties, k units among 2p
(:meth:`~sparsemodel.inference.augment.Plan.augment`), the statistics W from the l0 fits (the
path's persistence statistic, or the coefficient difference at k; :mod:`sparsemodel.inference.filter`),
and the knockoff+ threshold at the target FDR. With ``draws=M > 1``, M independent copies and the
e-values of Ren and Barber (2023) make the selection not depend on one draw.

Each draw is a function of (the plan, the sampler, its seed) alone, so draws run serially or on
joblib workers (``n_jobs``) with the same answer seed for seed.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..lowering.lowered import LoweredProblem
from ..model.problem import Model
from ..outputs import protected_paths
from ..progress import progress_bar
from ..workflows.figures import new_figure
from ..workflows.path import run_path
from ..workflows.session import _refuse_bad_models, _with_default_solver, solver_class
from . import filter as F
from .augment import Plan, plan
from .base import InferenceError, check_level, replicates, seeds
from .gaussian import KINDS, METHODS, SHRINKAGE, Sampler, sampler
from .report import Report

STARTS = ("warm", "best", "cold")
SIDES = {  # the report's columns of what each statistic compares
    "path": ("path_sum", "knockoff_path_sum"),
    "support": ("in_supports", "knockoff_in_supports"),
    "coef": ("coef", "knockoff_coef"),
}


@dataclass
class Settings:
    """How each draw fits the augmented model."""

    statistic: str
    ks: list[int]  # the path's bounds (statistics "path" and "support"), or [k] (statistic "coef")
    solver: str
    options: dict[str, Any]
    start: str


@dataclass
class Draw:
    """One knockoff run: its W, and what the fits said (the units' and knockoffs' support counts or
    magnitudes), its time and the notes of failed path points."""

    W: np.ndarray
    real: np.ndarray  # per unit: sum over the path of |b_j(k)| (path), supports holding it (support), |b_j| (coef)
    fake: np.ndarray  # the same for the knockoffs
    time_s: float
    notes: list[str] = field(default_factory=list)


def unit_magnitudes(pl: Plan, values: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(units, knockoffs): the magnitude of each original unit and of its knockoff in a solution of
    the augmented model (|w_j|, or the norm of a row)."""
    x = np.asarray(values[pl.variable.name], dtype=float)
    mags = np.abs(x) if x.ndim == 1 else np.linalg.norm(x.reshape(x.shape[0], -1), axis=1)
    R0 = pl.variable.shape[0]
    return mags[pl.unit_rows], mags[R0 : R0 + pl.p]


def fit_statistic(pl: Plan, Xk: np.ndarray, st: Settings) -> Draw:
    """W for one knockoff copy ``Xk``: the augmented model solved along the path (or at k)."""
    t0 = time.perf_counter()
    aug = pl.augment(Xk, k=max(st.ks))
    lp = LoweredProblem(aug)
    cls = solver_class(lp, st.solver)
    notes: list[str] = []
    if st.statistic in ("path", "support"):
        path = run_path(aug, lp, cls, st.ks, st.options, start=st.start)
        real, fake = [], []
        for pt in path.points:
            if not pt.ok:
                notes.append(f"k={pt.k}: {pt.message}")
                continue
            r, f = unit_magnitudes(pl, pt.result.values)
            real.append(r)
            fake.append(f)
        if not real:
            raise InferenceError(
                "every point of the knockoff path failed: " + "; ".join(notes), hint="try another solver (-o/--solver)"
            )
        R, Fk = np.array(real), np.array(fake)
        if st.statistic == "path":
            return Draw(F.path_statistic(R, Fk), R.sum(axis=0), Fk.sum(axis=0), time.perf_counter() - t0, notes)
        count = (R > 0).sum(axis=0).astype(float), (Fk > 0).sum(axis=0).astype(float)
        return Draw(F.support_statistic(R > 0, Fk > 0), count[0], count[1], time.perf_counter() - t0, notes)
    res = cls(**st.options).solve(lp, bound="none")
    r, f = unit_magnitudes(pl, res.values)
    return Draw(F.coef_statistic(r, f), r, f, time.perf_counter() - t0, notes)


def one_draw(pl: Plan, smp: Sampler | None, seed: int, st: Settings, given: np.ndarray | None = None) -> Draw:
    """One replicate of the knockoff filter: a copy drawn with its own seed (or the given one), then
    the fit. A function of its arguments alone (joblib runs it on any worker)."""
    Xk = given if given is not None else smp.draw(np.random.default_rng(seed))  # type: ignore[union-attr]
    return fit_statistic(pl, Xk, st)


def knockoffs(
    problem: Model,
    fdr: float = 0.1,
    statistic: str = "path",
    k: int | None = None,
    fixed_x: bool = False,
    method: str = "mvr",
    draws: int = 1,
    alpha_kn: float | None = None,
    offset: int = 1,
    solver: str | None = None,
    start: str = "warm",
    seed: int | None = 0,
    n_jobs: int = 1,
    mu: Any = None,
    sigma: Any = None,
    shrinkage: str = "ledoit_wolf",
    knockoffs: Any = None,
    truth: dict[str, Any] | None = None,
    progress: bool | None = False,
    **options: Any,
) -> KnockoffResult:
    """The knockoff filter (module docstring); see :meth:`sparsemodel.problem.Problem.knockoffs`."""
    t0 = time.perf_counter()
    _refuse_bad_models(problem)
    q = check_level("fdr", fdr)
    if statistic not in F.STATISTICS:
        raise InferenceError(f"unknown statistic {statistic!r}", hint=f"choose one of: {', '.join(F.STATISTICS)}")
    if start not in STARTS:
        raise InferenceError(f"start={start!r} is not one of {', '.join(STARTS)}")
    if offset not in (0, 1):
        raise InferenceError(f"offset={offset!r}: 1 is knockoff+ (FDR control), 0 the knockoff threshold")
    for name, value, allowed in (("method", method, METHODS), ("shrinkage", shrinkage, SHRINKAGE)):
        if value not in allowed:
            raise InferenceError(f"unknown {name} {value!r}", hint=f"choose one of: {', '.join(allowed)}")
    given = _given(knockoffs)
    if given is not None:
        draws = len(given)
    if isinstance(draws, bool) or not isinstance(draws, int) or draws < 1:
        raise InferenceError(f"draws={draws!r} must be a number of knockoff copies >= 1")
    a_kn = check_level("alpha_kn", alpha_kn if alpha_kn is not None else q / 2)
    pl = plan(problem)
    kk = pl.k if k is None else k
    lp0 = LoweredProblem(pl.augment(pl.X, k=1))
    kk = lp0.set.check_budget(kk)  # the bound over the 2p units, checked before anything runs
    if kk < 1:
        raise InferenceError("knockoffs need a bound k >= 1 (k = 0 selects nothing)", pl.constraint.span)
    if fixed_x:
        _fixed_x_allowed(problem, lp0)
    name, opts = _with_default_solver(problem, solver, options)
    cls = solver_class(lp0, name)
    cls.validate(opts)
    st = Settings(statistic, list(range(1, kk + 1)) if statistic != "coef" else [kk], name, opts, start)
    t_s = time.perf_counter()
    smp = None if given is not None else sampler(pl.X, KINDS[int(bool(fixed_x))], method, mu, sigma, shrinkage)
    construct_s = time.perf_counter() - t_s
    for Xk in given or []:
        if np.shape(Xk) != pl.X.shape:
            raise InferenceError(
                f"knockoffs= gives a copy of shape {np.shape(Xk)}; the design of the constrained units is {pl.X.shape}"
            )
    ss = seeds(seed, draws)
    jobs = [(pl, smp, ss[i], st, None if given is None else given[i]) for i in range(draws)]
    if n_jobs == 1 and draws > 1:
        out = []
        bar = progress_bar(total=draws, desc="knockoffs", unit="draw", progress=progress)
        try:
            for args in jobs:
                out.append(one_draw(*args))
                bar.update(1)
        finally:
            bar.close()
    else:
        out = replicates(one_draw, jobs, n_jobs)
    res = KnockoffResult(
        problem,
        pl,
        q=q,
        statistic=statistic,
        ks=st.ks,
        construction="given" if given is not None else ("fixed-X" if fixed_x else "model-X") + f" ({method})",
        offset=offset,
        alpha_kn=a_kn,
        solver=name,
        s=smp.s if smp is not None else None,
        draws=out,
        construct_s=construct_s,
    )
    res.time_s = time.perf_counter() - t0
    if truth is not None:
        res.set_truth(truth)
    return res


def _given(knockoffs: Any) -> list[np.ndarray] | None:
    if knockoffs is None:
        return None
    if isinstance(knockoffs, np.ndarray) and knockoffs.ndim == 2:
        return [np.asarray(knockoffs, dtype=float)]
    try:
        items = [np.asarray(x, dtype=float) for x in knockoffs]
    except (TypeError, ValueError):
        raise InferenceError("knockoffs= must be an n x p array (one copy) or a list of them") from None
    if not items or any(x.ndim != 2 for x in items):
        raise InferenceError("knockoffs= must be an n x p array (one copy) or a list of them")
    return items


def _fixed_x_allowed(problem: Model, lp: LoweredProblem) -> None:
    """Fixed-X knockoffs control the FDR for statistics of [X X~]'[X X~] and [X X~]'y: least squares."""
    from ..workflows.criteria import SelectionError, data_term

    try:
        gaussian = data_term(problem, lp).gaussian
    except SelectionError:
        gaussian = False
    if not gaussian:
        raise InferenceError(
            "fixed-X knockoffs control the FDR for least squares only (the statistic must read the data through "
            "[X X~]'[X X~] and [X X~]'y); this loss is not a sum of squares",
            problem.objective.span,
            "use model-X knockoffs (the default) for other losses",
        )


class KnockoffResult(Report):
    """The knockoff filter's answer: ``selected`` (unit indices), ``selected_names``, ``W`` (one
    statistic per unit; the mean over draws when derandomized), ``threshold``, ``evalues`` (with
    ``draws > 1``), every draw's W (``draws``), the construction's ``s``, the settings, and with a
    truth the false discovery proportion ``fdp`` and ``power``. ``table()``, ``to_csv`` (one row per
    unit), ``to_json``, ``plot`` (W sorted, the threshold marked)."""

    title = "knockoff filter"

    def __init__(
        self,
        problem: Model,
        pl: Plan,
        q: float,
        statistic: str,
        ks: list[int],
        construction: str,
        offset: int,
        alpha_kn: float,
        solver: str,
        s: np.ndarray | None,
        draws: list[Draw],
        construct_s: float,
    ):
        self.source = getattr(problem, "source", "<python>")
        self.protected = protected_paths(problem)
        self.names = list(pl.names)
        self.unit = "rows" if pl.variable.ndim == 2 else "coordinates"
        self.variable = pl.variable.name
        self.shape = pl.variable.shape
        self.unit_rows = pl.unit_rows
        self.fdr, self.statistic, self.ks, self.construction = q, statistic, ks, construction
        self.offset, self.alpha_kn, self.solver, self.s = offset, alpha_kn, solver, s
        self.draws = draws
        self.construct_s = construct_s
        self.time_s = 0.0
        self.n, self.p = pl.n, pl.p
        self.truth_units: set[int] | None = None
        Ws = np.array([d.W for d in draws])
        if len(draws) == 1:
            self.W = Ws[0]
            self.threshold = F.threshold(self.W, q, offset)
            self.selected = F.select(self.W, self.threshold)
            self.evalues: np.ndarray | None = None
            self.thresholds = [self.threshold]
        else:
            ev = [F.evalues(W, alpha_kn, offset) for W in Ws]
            self.evalues = np.mean([e for e, _ in ev], axis=0)
            self.thresholds = [t for _, t in ev]
            self.W = Ws.mean(axis=0)
            self.threshold = math.nan
            self.selected = F.ebh(self.evalues, q)

    # ------------------------------------------------------------------ reading
    @property
    def selected_names(self) -> list[str]:
        return [self.names[j] for j in self.selected]

    @property
    def k(self) -> int:
        return max(self.ks)

    def set_truth(self, truth: dict[str, Any]) -> None:
        """The true coefficients by variable name (the constrained variable's): adds ``fdp`` and
        ``power`` (the false discovery proportion and the share of true units selected)."""
        if self.variable not in truth:
            raise InferenceError(
                f"the truth gives {', '.join(sorted(truth))}; the selected variable is {self.variable}",
                hint=f"give truth={{'{self.variable}': ...}}",
            )
        t = np.asarray(truth[self.variable], dtype=float)
        if t.shape != self.shape:
            raise InferenceError(
                f"the truth of {self.variable} has shape {t.shape}; the variable has shape {self.shape}",
                hint=f"give the true {self.variable} with shape {self.shape}",
            )
        rows = self.unit_rows
        mags = np.abs(t[rows]) if t.ndim == 1 else np.linalg.norm(t[rows].reshape(len(rows), -1), axis=1)
        self.truth_units = set(np.flatnonzero(mags > 0).tolist())

    @property
    def fdp(self) -> float | None:
        if self.truth_units is None:
            return None
        S = set(self.selected.tolist())
        return len(S - self.truth_units) / max(1, len(S))

    @property
    def power(self) -> float | None:
        if self.truth_units is None:
            return None
        S = set(self.selected.tolist())
        return len(S & self.truth_units) / max(1, len(self.truth_units))

    # ------------------------------------------------------------------ reports
    @property
    def columns(self) -> tuple[str, ...]:
        cols = ["unit", "name", "W", "selected"]
        if self.evalues is not None:
            cols.append("evalue")
        cols += list(SIDES[self.statistic])
        if self.truth_units is not None:
            cols.append("true")
        return tuple(cols)

    def rows(self) -> list[dict[str, Any]]:
        sel = set(self.selected.tolist())
        d0 = self.draws[0]
        out = []
        for j, name in enumerate(self.names):
            r: dict[str, Any] = {"unit": j, "name": name, "W": float(self.W[j]), "selected": int(j in sel)}
            if self.evalues is not None:
                r["evalue"] = float(self.evalues[j])
            a, b = SIDES[self.statistic]
            r[a] = float(d0.real[j]) if len(self.draws) == 1 else None
            r[b] = float(d0.fake[j]) if len(self.draws) == 1 else None
            if self.truth_units is not None:
                r["true"] = int(j in self.truth_units)
            out.append(r)
        return out

    def describe(self) -> str:
        how = f"{self.construction} knockoffs"
        stat = {
            "path": f"l0 path statistic (coefficient difference summed over k = 1..{self.k})",
            "support": f"l0 support statistic (best supports holding each unit, k = 1..{self.k})",
            "coef": f"coefficient difference at k = {self.k}",
        }[self.statistic]
        head = [
            f"knockoff filter at FDR {self.fdr:g}: {len(self.selected)} of {self.p} {self.unit} selected",
            f"  {how}, {stat} ({self.solver}), on the {self.n} x {2 * self.p} design [X, X~]",
        ]
        if len(self.draws) == 1:
            t = self.threshold
            head.append(
                f"  knockoff{'+' if self.offset else ''} threshold "
                + (f"W >= {t:g}" if np.isfinite(t) else "none reached (nothing selected)")
            )
        else:
            head.append(
                f"  derandomized over {len(self.draws)} draws: e-values at alpha_kn = {self.alpha_kn:g}, e-BH at "
                f"{self.fdr:g} (Ren and Barber 2023)"
            )
        if self.truth_units is not None:
            head.append(f"  against the truth: FDP {self.fdp:.3g}, power {self.power:.3g}")
        head.append(f"  time {self.time_s:.3g} s")
        return "\n".join(head)

    def table(self, fmt: str = "simple", top: int = 20) -> str:
        from tabulate import tabulate

        rows = sorted(self.rows(), key=lambda r: -(r["evalue"] if self.evalues is not None else r["W"]))
        cols = [c for c in self.columns if c != "unit"]
        body = [[_cell(r[c]) for c in cols] for r in rows[:top]]
        parts = [self.describe()]
        if len(self.selected):
            parts.append("selected: " + ", ".join(self.selected_names))
        parts.append(tabulate(body, headers=cols, tablefmt=fmt))
        if len(rows) > top:
            parts.append(f"({len(rows) - top} more {self.unit} with smaller W in the CSV and JSON)")
        notes = [n for d in self.draws for n in d.notes]
        if notes:
            parts += ["notes"] + [f"  {n}" for n in notes[:10]]
        return "\n".join(parts)

    def __repr__(self) -> str:
        return f"KnockoffResult(fdr={self.fdr:g}, selected={self.selected_names})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "fdr": self.fdr,
            "statistic": self.statistic,
            "k": self.k,
            "construction": self.construction,
            "offset": self.offset,
            "solver": self.solver,
            "draws": len(self.draws),
            "alpha_kn": self.alpha_kn if len(self.draws) > 1 else None,
            "threshold": self.threshold if np.isfinite(self.threshold) else None,
            "thresholds": [t if np.isfinite(t) else None for t in self.thresholds],
            "selected": self.selected.tolist(),
            "selected_names": self.selected_names,
            "fdp": self.fdp,
            "power": self.power,
            "time_s": self.time_s,
            "construct_s": self.construct_s,
            "s": None if self.s is None else self.s.tolist(),
            "W_draws": [d.W.tolist() for d in self.draws],
            "units": self.rows(),
        }

    def figure(self, metrics: Any = None) -> Any:
        """W per unit, sorted, with the threshold (and -threshold) marked and the selected units filled. (``metrics``: the study reports' plot argument; this plot is fixed)"""
        fig, (ax,) = new_figure(1, width=7.5)
        order = np.argsort(-self.W, kind="stable")
        sel = np.isin(order, self.selected)
        xs = np.arange(len(order))
        ax.bar(xs[~sel], self.W[order][~sel], color="0.7", width=1.0, label="not selected")
        ax.bar(xs[sel], self.W[order][sel], color="C0", width=1.0, label="selected")
        if np.isfinite(self.threshold):
            ax.axhline(self.threshold, color="C3", lw=1, ls="--", label=f"threshold {self.threshold:g}")
            ax.axhline(-self.threshold, color="C3", lw=1, ls=":")
        for i in np.flatnonzero(sel)[:15]:
            ax.annotate(self.names[order[i]], (xs[i], self.W[order[i]]), fontsize=6, rotation=90, va="bottom")
        ax.set_xlabel(f"{self.unit} (sorted by W)")
        ax.set_ylabel("W" + (" (mean over draws)" if len(self.draws) > 1 else ""))
        ax.set_title(f"knockoff statistics ({self.statistic}), FDR {self.fdr:g}: {len(self.selected)} selected")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
        return fig


def _cell(v: Any) -> Any:
    if v is None:
        return "-"
    return f"{v:.4g}" if isinstance(v, float) else v


__all__ = ["Draw", "KnockoffResult", "Settings", "fit_statistic", "knockoffs", "one_draw", "unit_magnitudes"]
