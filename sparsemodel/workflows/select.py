"""Choosing the bound k: information criteria and K-fold cross-validation over a warm-started path.

Everything starts from the path of :mod:`sparsemodel.workflows.path` on all the data (one lowering,
each point warm-started from its neighbour). Then, at every k on the path:

**Information criteria** (``by`` = ``ebic`` -- the default --, ``aic``, ``bic``, ``ebic_cc``, ``gic``):
the formulas, the data term and the degrees of freedom are in :mod:`sparsemodel.workflows.criteria`.

**Cross-validation** (``by="cv"``). The n samples are split into K folds (a random permutation
with a fixed ``seed``, cut into K nearly equal parts; or the user's ``fold_ids``, one label per
sample, one fold per label; or ``folds`` given as the (train, test) row indices of each split). For each fold the model is rebuilt on the training rows (every data
node with n rows subset: :func:`sparsemodel.model.samples.rebind_rows`; training-only terms such as
a ridge stay), its path is computed over the same k, and the held-out loss at k is the data term
evaluated on the held-out rows at that fold's solution: the model's own loss, whatever its
composite form. The folds' paths run in lockstep with the all-data path, with the solver's
``fold_options`` (their answers are read only for the held-out loss), and where the data term is a
sum over samples each held-out row's loss is kept (:mod:`sparsemodel.objective.samplewise`). The
curve is the mean over folds, with the standard error std / sqrt(K).

``rule="min"`` chooses the k of lowest value (the only rule of the information criteria). For
cross-validation, ``rule="1se_paired"`` (the default) chooses the smallest k whose mean held-out loss
exceeds the minimum's by at most one standard error *of the difference*: the folds, and so the
held-out rows, are the same at every k, so the difference is paired row by row, d_i = l_i(k) -
l_i(k_min) over the N held-out rows of all folds, with standard error std(d) / sqrt(N) (Vehtari,
Gelman & Gabry 2017, Section 5.2: compare models by the standard error of their pointwise
difference, not of each estimate); for a loss without per-row values (cox, ordinal, a custom
loss), fold by fold, std_f(L_f(k) - L_f(k_min)) / sqrt(K). ``rule="1se"`` is Breiman et al.'s (1984)
one-standard-error rule: the smallest k within one standard error of the minimum's own mean, whose
fold-to-fold spread (the level of each fold's loss, shared by every k) swamps the differences on
Poisson data. The solution reported is the all-data path's point at the chosen k.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..lowering.lowered import LoweredProblem
from ..lowering.subsets import SampleLowerings
from ..model.problem import Model
from ..objective.evaluator import Evaluator
from ..objective.sampleview import SampleView, sample_view
from ..objective.samplewise import SampleValues, sample_values
from ..outputs import protected_paths
from ..progress import progress_bar
from ..sets.units import k_header, k_text
from ..solvers.base import blas_threads
from ..util import jsonable
from .criteria import (
    CRITERIA,
    METHODS,
    DataTerm,
    SelectionError,
    criterion,
    default_k_max,
    degrees_of_freedom,
    ebic_count,
)
from .figures import new_figure
from .metrics import bound_cells, with_metric_columns
from .options import SelectOptions, bounds_of
from .path import KernelFoldRun, PathPoint, PathRun, SolutionPath, _span, warm_options
from .report import ERROR, Report, report_html, support_cells
from .runner import Resident, check_jobs, workers

if TYPE_CHECKING:
    from ..solvers.base import Solver
    from ..solvers.result import Result

RULES = ("min", "1se", "1se_paired")


DEFAULT_BY = "ebic"  # the default way to choose k (docs/selection.md: why)


DEFAULT_CV_RULE = "1se_paired"  # cross-validation's default rule (docs/selection.md: why, measured)
# the early stop's defaults (EarlyStop): patience in k, margin in criterion units / standard errors
IC_PATIENCE, IC_MARGIN = 5, 10.0
CV_PATIENCE, CV_MARGIN = 5, 0.0
PER_SAMPLE_LIMIT = 10_000_000  # held-out rows x k kept for the paired rule (80 MB); beyond, folds are paired


SELECT_COLUMNS = (
    "k",
    "unit",
    "value",
    "se",
    "nnz",
    "df",
    "loss",
    "objective",
    "lower_bound",
    "gap",
    "status",
    "support",
    "support_names",
)


def splits_of(n: int, folds: Any, seed: int | None, fold_ids: Any) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (training rows, held-out rows) of each fold: from ``fold_ids`` or an int ``folds`` (see
    :func:`folds_of`), or ``folds`` given as the splits themselves (an iterable of (train, test)
    index arrays, e.g. a scikit-learn splitter's ``split(X)``)."""
    if fold_ids is None and folds is not None and not isinstance(folds, (numbers.Integral, float, bool)):
        out = []
        try:
            pairs = list(folds)
        except TypeError:
            raise SelectionError(
                f"folds={folds!r} is not a number of folds or a list of (train, test) splits"
            ) from None
        for tr, te in pairs:
            tr, te = np.asarray(tr, dtype=np.int64).ravel(), np.asarray(te, dtype=np.int64).ravel()
            if len(tr) == 0 or len(te) == 0 or min(tr.min(), te.min()) < 0 or max(tr.max(), te.max()) >= n:
                raise SelectionError(f"a split of folds= has empty or out-of-range rows (the model has {n} samples)")
            out.append((tr, te))
        if not out:
            raise SelectionError("folds= holds no split")
        return out
    of = folds_of(n, folds, seed, fold_ids)
    return [(np.flatnonzero(of != f), np.flatnonzero(of == f)) for f in range(int(of.max()) + 1)]


def folds_of(n: int, folds: int | None, seed: int | None, fold_ids: Any) -> np.ndarray:
    """One fold label per sample: the user's ``fold_ids`` (labels 0..K-1 after renumbering), or a
    random permutation (``seed``) cut into ``folds`` nearly equal parts."""
    if fold_ids is not None:
        ids = np.asarray(fold_ids).ravel()
        if ids.shape[0] != n:
            raise SelectionError(
                f"fold_ids has {ids.shape[0]} labels but the model has {n} samples",
                hint="give one fold label per sample (row)",
            )
        labels, out = np.unique(ids, return_inverse=True)
        if len(labels) < 2:
            raise SelectionError("fold_ids has a single label; cross-validation needs at least two folds")
        return out
    if folds is None or isinstance(folds, bool) or int(folds) != folds or not 2 <= int(folds) <= n:
        raise SelectionError(f"folds={folds!r}: cross-validation needs between 2 and n = {n} folds")
    rng = np.random.default_rng(seed)
    out = np.empty(n, dtype=np.int64)
    # fold f is the f-th of np.array_split's parts of the permutation: n % folds parts of one more
    # row first (one scatter instead of one per fold)
    size, extra = divmod(n, int(folds))
    out[rng.permutation(n)] = np.repeat(np.arange(int(folds)), [size + 1] * extra + [size] * (int(folds) - extra))
    return out


@dataclass
class EarlyStop:
    """Stop the path once the curve has clearly turned: after a point k_j, when the last ``patience``
    k (every computed k > k_j - patience) all lie above the minimum so far plus ``margin``, and the
    minimum is at least ``patience`` before k_j. ``margin`` is in criterion units for an information
    criterion, in standard errors of the minimum's mean for cross-validation. A failed point (no
    value) never counts as above."""

    patience: int
    margin: float
    cv: bool

    def check(self, curve: list[dict[str, Any]]) -> str | None:
        vals = [r["value"] for r in curve]
        ks = [r["k"] for r in curve]
        m = _minimum(vals)
        if m is None:
            return None
        last = ks[-1]
        if last - ks[m] < self.patience:
            return None
        width = self.margin * (curve[m]["se"] or 0.0) if self.cv else self.margin
        cut = vals[m] + width
        recent = [i for i in range(len(ks)) if ks[i] > last - self.patience]
        if not all(math.isfinite(vals[i]) and vals[i] > cut for i in recent):
            return None
        unit = f"{self.margin:g} standard errors" if self.cv else f"{self.margin:g}"
        what = "mean held-out loss" if self.cv else "criterion"
        return (
            f"the {what} stayed above its minimum at k={ks[m]} + {unit} for {self.patience} consecutive k "
            f"(k = {ks[recent[0]]}..{last})"
        )

    def reach(self, curve: list[dict[str, Any]], ks: list[int], j: int) -> int:
        """The last index of ``ks`` the path surely computes, ``curve`` holding its points before
        ``ks[j]``: the rule cannot fire before a point at least ``patience`` above the minimum's k,
        and the minimum can only move to a later k (the first of equal values is kept). What
        cross-validation's folds may compute ahead with nothing computed in vain (FoldSteps)."""
        m = _minimum([r["value"] for r in curve])
        base = ks[m] if m is not None else ks[j]
        return next((i for i in range(j, len(ks)) if ks[i] - base >= self.patience), len(ks) - 1)


def _minimum(vals: list[float]) -> int | None:
    """The index of the curve's minimum (the first of equal values; failed points left out), or None."""
    ok = [i for i, v in enumerate(vals) if math.isfinite(v)]
    return min(ok, key=lambda i: (vals[i], i)) if ok else None


def early_stop_of(
    by: str, ks: list[int], early_stop: bool, patience: int | None, margin: float | None
) -> EarlyStop | None:
    """The early-stop rule of ``by`` (None: off, or the bounds are not increasing)."""
    if patience is not None and (isinstance(patience, bool) or int(patience) != patience or patience < 1):
        raise SelectionError(f"patience={patience!r}: the early stop needs a whole number of k >= 1")
    if margin is not None and not (isinstance(margin, numbers.Real) and math.isfinite(margin) and margin >= 0):
        raise SelectionError(f"margin={margin!r}: the early stop's margin must be a number >= 0")
    if not early_stop or any(b <= a for a, b in zip(ks, ks[1:])):
        return None
    cv = by == "cv"
    return EarlyStop(
        int(patience if patience is not None else (CV_PATIENCE if cv else IC_PATIENCE)),
        float(margin if margin is not None else (CV_MARGIN if cv else IC_MARGIN)),
        cv,
    )


def run_select(
    problem: Model,
    lp: LoweredProblem,
    cls: type[Solver],
    k: Iterable[int] | int | None = None,
    options: dict[str, Any] | None = None,
    choose: SelectOptions | None = None,
    progress: bool | None = False,
    scorer: Any = None,
    n_jobs: int | None = 1,
) -> Selection:
    """Choose the bound among ``k`` (default 0..:func:`default_k_max`) as ``choose`` says
    (:class:`~sparsemodel.workflows.options.SelectOptions`: ``by``, default :data:`DEFAULT_BY`, the
    folds, the rule, the early stop; see the module docstring); ``options`` are the solver's.
    Returns a :class:`Selection`. ``scorer`` (a :class:`~sparsemodel.workflows.metrics.Scorer`)
    adds the held-out loss and the truth's metrics of the all-data point to every row of the curve.
    ``n_jobs`` (a study's, :class:`~sparsemodel.workflows.options.StudyOptions`):
    cross-validation's folds on that many workers (joblib, or a dask cluster's; -1: every core;
    :class:`FoldSteps`), with the serial run's curve; an information criterion's path is one
    warm-started chain and runs here."""
    choose = _checked(choose if choose is not None else SelectOptions(), lp)
    n_jobs = check_jobs(n_jobs, SelectionError)
    by, gamma = choose.by, choose.gamma
    view = sample_view(problem, lp)
    dt = view.term()
    ks = _bounds(k, lp, dt)
    if by in CRITERIA and (dt.scale is None or dt.scale <= 0):
        raise SelectionError(
            "the information criteria read the data term as c * sum_i l_i(x) with one c; the terms of "
            "this objective that read sample data are scaled differently",
            hint="write the loss as one mean(...) or sum(...) over the samples, or use by='cv'",
        )
    stopper = early_stop_of(by, ks, choose.early_stop, choose.patience, choose.margin)
    splits = splits_of(dt.n, choose.folds, choose.seed, choose.fold_ids) if by == "cv" else None
    full = PathRun(problem, lp, cls, options, choose.start, scorer)
    loss_of = _LossAt(lp, dt)
    # the held-out loss of every held-out row at every k, where the data term is a sum over samples
    # (the paired rule's differences); fold f's rows are per_sample[rows[f]:rows[f + 1]]
    rows = np.cumsum([0] + [len(te) for _, te in splits]) if splits is not None else None
    small = rows is not None and rows[-1] * len(ks) <= PER_SAMPLE_LIMIT
    folds_at = FoldSteps(view, lp, cls, options, choose.start, splits, ks, bool(small), n_jobs) if splits else None
    per_fold = np.full((len(splits), len(ks)), np.nan) if splits is not None else None
    per_sample = np.full((int(rows[-1]), len(ks)), np.nan) if folds_at is not None and folds_at.samplewise else None
    curve: list[dict[str, Any]] = []
    bar = progress_bar(total=len(ks), desc=f"choosing k by {by}", unit="k", progress=progress)
    try:
        # one BLAS thread limit around every point of every path (a solve inside it sets none)
        with blas_threads(lp):
            for j, kv in enumerate(ks):
                bar.set_postfix_str(f"k={kv}")
                if folds_at is not None:  # (the folds may answer the bounds up to ks[reach] in one call)
                    reach = stopper.reach(curve, ks, j) if stopper is not None else len(ks) - 1
                    folds_at.ask(j, reach)  # the folds' step on workers while the all-data path takes its own
                pt = full.step(kv)
                row = _row(pt, lp, loss_of, dt, by, gamma)
                row.update({c: pt.metrics.get(c) for c in full.path.metric_columns})
                if per_fold is not None:  # the folds' paths in lockstep with the all-data path
                    for f, got in enumerate(folds_at.at(j, reach)):
                        if got is None:  # the fold's point is not usable
                            continue
                        v, per_fold[f, j] = got
                        if per_sample is not None:
                            per_sample[rows[f] : rows[f + 1], j] = v
                    vals = per_fold[:, j]
                    if np.all(np.isfinite(vals)):
                        K = len(vals)
                        row["value"] = float(vals.mean())
                        row["se"] = float(vals.std(ddof=1) / math.sqrt(K)) if K > 1 else 0.0
                curve.append(row)
                bar.update(1)
                why = stopper.check(curve) if stopper is not None and j + 1 < len(ks) else None
                if why:
                    full.path.stopped, full.path.skipped = why, ks[j + 1 :]
                    if per_fold is not None:
                        per_fold = per_fold[:, : j + 1]
                    if per_sample is not None:
                        per_sample = per_sample[:, : j + 1]
                    break
    except BaseException as exc:  # an error or Ctrl-C: the fold servers are stopped, not waited for
        if folds_at is not None:
            folds_at.close(exc)
        raise
    finally:
        bar.close()
        if folds_at is not None:
            folds_at.close()

    chosen = _chosen(curve, full, lp, cls, choose.rule, per_fold, per_sample)
    result = full.path.at(chosen["k"])
    sel = Selection(
        problem, cls.name, by, choose.rule, chosen["k"], result, full.path, curve, dt, per_fold, gamma, stopper
    )
    sel.metric_columns = list(full.path.metric_columns)
    sel.per_sample = per_sample
    return sel


def _checked(choose: SelectOptions, lp: LoweredProblem) -> SelectOptions:
    """The options with ``by``, ``rule`` and ``folds`` resolved (cross-validation when folds are
    given, else the default criterion, BIC for a rank; 5 folds; cross-validation's rule), each
    checked against the others and the problem's set."""
    by, folds, rule, gamma = choose.by, choose.folds, choose.rule, choose.gamma
    if by is None:  # folds given: cross-validation; otherwise the default criterion (BIC for a rank)
        by = "cv" if folds is not None or choose.fold_ids is not None else DEFAULT_BY
        if by == DEFAULT_BY and lp.set is not None and not lp.set.counts_units:
            by = "bic"
    if by in CRITERIA and (folds is not None or choose.fold_ids is not None):
        raise SelectionError(
            f"folds= and fold_ids= split the samples for cross-validation; by={by!r} does not use them",
            hint="drop them, or use by='cv'",
        )
    folds = 5 if folds is None else folds
    if by not in METHODS:
        raise SelectionError(f"by={by!r} is not a way to choose k", hint=f"choose one of: {', '.join(METHODS)}")
    rule = (DEFAULT_CV_RULE if by == "cv" else "min") if rule is None else rule
    if rule not in RULES:
        raise SelectionError(f"rule={rule!r} is not one of {', '.join(RULES)}")
    if rule != "min" and by != "cv":
        raise SelectionError(f"rule={rule!r} needs the standard errors of cross-validation", hint="use by='cv'")
    if lp.set is None or not lp.set.thresholds:
        raise SelectionError(
            "choosing k needs a bound to vary: nnz(...) <= k or rank(W) <= r", hint="add a sparsity or rank constraint"
        )
    if not lp.set.counts_units and by in ("ebic", "ebic_cc", "gic"):
        raise SelectionError(f"{by} counts selected units; with a {lp.set.kind} constraint use aic, bic or cv")
    if not (isinstance(gamma, (int, float)) and 0 <= gamma):
        raise SelectionError(f"gamma={gamma!r}: the EBIC constant must be a number >= 0")
    return replace(choose, by=by, folds=folds, rule=rule)


def _bounds(k: Any, lp: LoweredProblem, dt: DataTerm) -> list[Any]:
    """The bounds tried, each checked by the set: ``k``, or 0..:func:`default_k_max` (refused for
    several bounds, whose combinations have no default range)."""
    if k is None and isinstance(lp.set.limit, Mapping):  # several bounds: no default range of combinations
        name = list(lp.set.limit)[-1]
        raise SelectionError(
            f"choosing among several bounds ({lp.set.bound_text()}) needs the combinations to try",
            hint=f"give them by name: k=[{{'{name}': 1}}, {{'{name}': 2}}, ...] in Python, --k {name}=1:10 at the "
            "command line (a name left out keeps its bound)",
        )
    if k is None:
        free = lp.set.free_count()
        k = range(0, default_k_max(dt.n_eff, lp.set.limit, free) + 1)
    return [lp.set.check_budget(v) for v in bounds_of(k) if v is not None]


def _chosen(
    curve: list[dict[str, Any]],
    full: PathRun,
    lp: LoweredProblem,
    cls: type[Solver],
    rule: str,
    per_fold: np.ndarray | None,
    per_sample: np.ndarray | None,
) -> dict[str, Any]:
    """The row of the curve the rule chooses among those evaluated (a :class:`SelectionError` when
    no point the solver computed could be)."""

    def evaluated(r: dict[str, Any]) -> bool:
        return math.isfinite(r["value"]) and r["objective"] is not None

    valid = [r for r in curve if evaluated(r)]
    # the ends of the bound (0, and every unit allowed) are answered without the solver: a choice
    # among them alone, when every point the solver computed failed, would be no choice at all
    ends = {0} | ({lp.set.limit} if isinstance(lp.set.limit, numbers.Integral) else set())
    inner = [r for r in curve if r["k"] not in ends]
    if not valid or (inner and not any(evaluated(r) for r in inner)):
        failed = [p for p in full.path.points if not p.usable and p.k not in ends]
        raise SelectionError(
            f"no k could be evaluated by {cls.name} (every point it computed failed)",
            hint="; ".join(f"k={p.k}: {p.row()['status']}: {p.row()['message']}" for p in failed)[:500]
            or ("the folds' solves failed at every k" if per_fold is not None else None),
        )
    best = min(valid, key=lambda r: r["value"])
    chosen = best
    if rule == "1se":
        cut = best["value"] + (best["se"] or 0.0)
        chosen = min((r for r in valid if r["value"] <= cut), key=lambda r: r["k"])
    elif rule == "1se_paired":
        at = {id(r): j for j, r in enumerate(curve)}
        ids = [at[id(r)] for r in valid]
        chosen = curve[one_se_paired(per_fold, ids, at[id(best)], [r["k"] for r in curve], per_sample)]
    return chosen


def one_se_paired(
    per_fold: np.ndarray, valid: list[int], best: int, ks: list[int], per_sample: np.ndarray | None = None
) -> int:
    """The column of the smallest k (among ``valid`` columns, k = ``ks``) whose mean held-out loss
    exceeds column ``best``'s (the minimum) by at most one standard error of the paired difference:
    over the N held-out rows of all folds (``per_sample``, N x len(k)), std_i(l_i(k) - l_i(best)) /
    sqrt(N) against the mean of those differences; without per-sample losses, over the K folds
    (``per_fold``, K x len(k)), std_f(L_f(k) - L_f(best)) / sqrt(K) against theirs."""
    rows = per_sample if per_sample is not None else per_fold
    ref = rows[:, best]
    N = rows.shape[0]
    for j in sorted(valid, key=lambda j: ks[j]):
        d = rows[:, j] - ref
        if not np.all(np.isfinite(d)):
            continue
        se = float(d.std(ddof=1)) / math.sqrt(N) if N > 1 else 0.0
        if float(d.mean()) <= se:
            return j
    return best


class _LossAt:
    """The data term's value at a path point: the point's objective less the other terms (a ridge,
    evaluated on its own small tree), or the objective itself when the data term is all of it -- the
    solver's value at the point is that of the objective there (solvers/result.finish), so no pass over
    the data is made again; the data term's own tree otherwise (a maximized objective)."""

    def __init__(self, lp: LoweredProblem, dt: DataTerm):
        self.by_objective = not getattr(lp.problem.objective, "maximize", False)
        self.rest = Evaluator(dt.rest, lp.layout) if dt.rest is not None else None
        self.term = Evaluator(dt.expr, lp.layout)

    def __call__(self, x: np.ndarray, objective: float) -> float:
        if self.by_objective and math.isfinite(objective):
            return objective - float(self.rest.value(x)) if self.rest is not None else objective
        return float(self.term.value(x))


def _row(pt: PathPoint, lp: LoweredProblem, loss_of: _LossAt, dt: DataTerm, by: str, gamma: float) -> dict[str, Any]:
    """One row of the curve: the point's nnz, df, data loss and objective, and the criterion's value
    (cross-validation fills the value in later)."""
    cells = support_cells(pt.result)
    row: dict[str, Any] = {
        "k": pt.k,
        "value": math.nan,
        "se": None,
        "nnz": None,
        "df": None,
        "loss": None,
        "objective": None,
        **bound_cells(pt.result),
        "status": pt.result.status if pt.result is not None else ERROR,
        "unit": lp.set.unit,
        "support": cells["support"],
        "support_names": cells["support_names"],
    }
    if pt.ok:
        x = pt.x if pt.x is not None else lp.layout.pack(pt.result.values)  # (the path's step packed it)
        df, s, p = pt.counts if pt.counts is not None else degrees_of_freedom(lp, x)
        row.update(nnz=int(len(pt.result.support)), df=df, objective=float(pt.result.objective))
        row["loss"] = loss_of(x, float(pt.result.objective))
        if by in CRITERIA and pt.usable:
            priced = ebic_count(lp, x) if by == "ebic" else df  # a group once (criteria.py)
            row["value"] = criterion(by, row["loss"] / dt.scale, dt.n_obs, priced, p, s, dt.gaussian, gamma)
    return row


class FoldSteps:
    """The folds' held-out losses at each k of cross-validation, their paths driven in lockstep
    with the all-data path: :meth:`ask` starts the j-th k, :meth:`at` gives one ``(per-sample
    losses or None, held-out loss)`` per fold (None where the fold's point is not usable).

    Serially (``n_jobs`` 1) every fold's :class:`~sparsemodel.workflows.path.PathRun` lives here and
    takes one step per k in :meth:`at`. On workers the folds are dealt to ``min(workers, K)``
    resident servers (:class:`sparsemodel.workflows.runner.Resident`): each builds its folds once
    (from the model's own sample view, :func:`~sparsemodel.objective.sampleview.sample_view`) and
    keeps them, so every fold's path is the serial one point for point (its lowering's caches
    included), while the all-data path takes its step here between :meth:`ask` and :meth:`at`."""

    def __init__(
        self,
        view: SampleView,
        lp: LoweredProblem,
        cls: type[Solver],
        options: dict[str, Any] | None,
        start: str,
        splits: list[tuple[np.ndarray, np.ndarray]],
        ks: list[int],
        small: bool,
        n_jobs: int,
    ):
        self.ks, self.n_jobs, self.small = ks, n_jobs, small
        self.resident: Resident | None = None
        if n_jobs == 1:
            self.runs = _fold_runs(view, cls, options, start, splits, lp)
            # where every fold's data term is a sum over samples (and the rows x k are not too many)
            self.samplewise = small and all(sv is not None for _, _, sv in self.runs)
            return
        count = min(workers(n_jobs), len(splits))
        self.groups = [list(range(len(splits)))[g::count] for g in range(count)]
        job = _FoldJob(view.problem, cls, options, start, splits)
        self.resident = Resident(partial(_FoldServer, job), self.groups, n_jobs).__enter__()
        try:
            self.resident.ask("samplewise")
            self.samplewise = small and all(self.resident.answers())
        except BaseException as exc:  # a fold the worker could not build: said here, the servers stopped
            self.close(exc)
            raise

    def ask(self, j: int, reach: int) -> None:
        """Ask the workers for the folds' points at ks[j] (the bounds up to ks[reach] surely follow)."""
        if self.resident is not None:
            self.resident.ask((self.ks[j], self.samplewise, self.ks[j + 1 : reach + 1]))

    def at(self, j: int, reach: int) -> list[Any]:
        """Each fold's held-out reading at ks[j] (:func:`_fold_loss`); the bounds up to ks[reach]
        surely follow (a fold's solver may answer them in the same call: PathRun.step's ahead)."""
        if self.resident is None:
            sv_on = self.samplewise
            kv, ahead = self.ks[j], self.ks[j + 1 : reach + 1]
            return [_fold_loss(run, run.step(kv, ahead), held, sv if sv_on else None) for run, held, sv in self.runs]
        out: list[Any] = [None] * sum(len(g) for g in self.groups)
        for group, got in zip(self.groups, self.resident.answers()):
            for f, g in zip(group, got):
                out[f] = g
        return out

    def close(self, error: BaseException | None = None) -> None:
        """Stop the fold servers (at once when ``error`` is unwinding the selection)."""
        if self.resident is not None:
            resident, self.resident = self.resident, None
            resident.__exit__(type(error) if error is not None else None, error, None)


@dataclass
class _FoldJob:
    """What the fold servers of one cross-validation share (sent once to each): the model, not its
    sample view or lowering; a worker reads its own view."""

    problem: Model
    cls: type[Solver]
    options: dict[str, Any] | None
    start: str
    splits: list[tuple[np.ndarray, np.ndarray]]


class _FoldServer:
    """A worker's folds (:class:`FoldSteps`): built once, one step per request."""

    def __init__(self, job: _FoldJob, folds: list[int]):
        lp = LoweredProblem(job.problem)  # (the all-data arrays a fold's kernel problem is made from)
        view = sample_view(job.problem, lp)
        self.runs = _fold_runs(view, job.cls, job.options, job.start, [job.splits[f] for f in folds], lp)

    def __call__(self, request: Any) -> Any:
        if request == "samplewise":
            return all(sv is not None for _, _, sv in self.runs)
        kv, samplewise, ahead = request
        return [_fold_loss(run, run.step(kv, ahead), held, sv if samplewise else None) for run, held, sv in self.runs]


def _fold_loss(run: PathRun, pt: PathPoint, held: Any, sv: SampleValues | None) -> Any:
    """A fold's point as (each held-out row's loss or None, the held-out loss); None if unusable.
    With per-sample losses the held-out loss is their sum (the same number as ``held.value(x)``, up
    to rounding)."""
    if not pt.usable:
        return None
    x = pt.x if pt.x is not None else run.lp.layout.pack(pt.result.values)
    if sv is not None:
        v = _held_values(run, sv, x)
        return v, sv.const + float(v.sum())
    return None, float(held.value(x))


def _held_values(run: PathRun, sv: SampleValues, x: np.ndarray) -> np.ndarray:
    """The held-out per-sample losses at the fold's point x; with the points its solver answered
    ahead (``run.ready``) read in the same call and kept for their steps (each row the bits of the
    point alone: SampleValues.values_many)."""
    kept = run.read_ahead.pop(id(x), None)
    if kept is not None and kept[0] is x:
        return kept[1]
    pts = [x, *(y for _, y in run.ready)]
    V = sv.values_many(np.array(pts))
    run.read_ahead = {id(y): (y, v) for y, v in zip(pts[1:], V[1:])}
    return V[0]


def _fold_runs(
    view: SampleView,
    cls: type[Solver],
    options: dict[str, Any] | None,
    start: str,
    splits: list[tuple[np.ndarray, np.ndarray]],
    lp: LoweredProblem,
) -> list[tuple[Any, Any, SampleValues | None]]:
    """For each fold: the path of the model rebuilt on its training rows (lowered once, or rebound
    from the first fold of its size: lowering/subsets.py; driven one k at a time), the reader of the
    data term's value on its held-out rows (``.value(x)``), and its per-sample reading (None for a
    loss that couples its samples). Where the data term on a subset of the rows is proved to be a sum
    of its samples' values (``DataTerm.subset``: :func:`~sparsemodel.model.samples.subset_scale`),
    the held-out reading is the rows of the all-data term's (:meth:`SampleValues.on_rows`: the same
    numbers, up to the rounding of a mean's coefficient), without rebuilding the held-out term, and
    the fold's points are asked of its solver's kernel on rows of the all-data lowering ``lp``'s
    arrays where it has one (``Solver.fold_kernel``: :class:`~sparsemodel.workflows.path.KernelFoldRun`,
    the fold lowered only if the kernel leaves a point to it)."""
    out = []
    options = {**getattr(cls, "fold_options", {}), **(options or {})}  # the solver's for folds, then the user's
    lowerings = SampleLowerings(
        view.problem, view, share=False
    )  # (a fold's size: the first lowered, the others rebound)
    dt = view.term()
    reader = sample_values(dt.expr, view.layout, dt.n) if dt.subset is not None else None
    # (the fold's solver of its warm points, as PathRun makes it; the options were checked by the
    # all-data path's PathRun)
    quick = (
        cls(**warm_options(cls, options))
        if start == "warm" and dt.subset is not None and "init" not in options
        else None
    )
    for train, test in splits:

        def make(train: np.ndarray = train) -> PathRun:
            tlp = lowerings.lower(train)
            return PathRun(tlp.problem, tlp, cls, options, start, fold=True)

        kernel = quick.fold_kernel(lp, train, dt.n / len(train) if dt.subset == 1 else 1.0) if quick else None
        run: Any = KernelFoldRun(kernel, make) if kernel is not None else make()
        samples = reader.on_rows(test, dt.subset) if reader is not None else None
        if samples is not None:
            held: Any = _HeldTotal(samples)
        else:
            term = view.held_out(test)
            held, samples = Evaluator(term, view.layout), sample_values(term, view.layout, len(test))
        out.append((run, held, samples))
    return out


class _HeldTotal:
    """The held-out data term's value read from its per-sample reading (const + the samples' sum)."""

    def __init__(self, samples: SampleValues):
        self.samples = samples

    def value(self, x: np.ndarray) -> float:
        return self.samples.total(x)


class Selection(Report):
    """The outcome of :func:`run_select`: the chosen ``k``, its all-data ``result``, the ``curve``
    (one dict per k: value of the criterion or the mean held-out loss, its standard error, nnz, df,
    the data loss on all rows, the objective), the all-data ``path``, the per-fold held-out losses
    (``per_fold``, K x len(k), cross-validation only); a table, CSV, JSON and a PNG plot."""

    def __init__(
        self,
        problem: Any,
        solver: str,
        by: str,
        rule: str,
        k: int,
        result: Result,
        path: SolutionPath,
        curve: list[dict[str, Any]],
        dt: DataTerm,
        per_fold: np.ndarray | None,
        gamma: float,
        early_stop: EarlyStop | None = None,
    ):
        self.source = getattr(problem, "source", "<python>")
        self.solver = solver
        self.by = by
        self.rule = rule
        self.k = k
        self.result = result
        self.path = path
        self.curve = curve
        self.n = dt.n
        self.n_eff = dt.n_eff
        self.n_obs = dt.n_obs
        self.n_unit = dt.n_unit
        self.gaussian = dt.gaussian
        self.per_fold = per_fold
        self.per_sample: np.ndarray | None = None  # cross-validation: each held-out row's loss at each k
        self.gamma = gamma
        self.early_stop = early_stop
        self.protected = protected_paths(problem)
        self.metric_columns: list[str] = []  # test_loss and the truth's metrics, when asked

    @property
    def columns(self) -> tuple[str, ...]:
        return with_metric_columns(SELECT_COLUMNS, self.metric_columns)

    @property
    def metrics(self) -> list[str]:
        """The numeric columns a plot can show: the curve's value and the rest."""
        return ["value", "objective", "lower_bound", "gap", "loss", "nnz", "df", *self.metric_columns]

    @property
    def stopped(self) -> str | None:
        """Why the path ended early (None: every k was computed)."""
        return self.path.stopped

    @property
    def skipped(self) -> list[int]:
        """The k not computed after an early stop."""
        return self.path.skipped

    @property
    def ks(self) -> list[int]:
        return [r["k"] for r in self.curve]

    @property
    def values(self) -> list[float]:
        return [r["value"] for r in self.curve]

    def describe(self) -> str:
        """The formula with its constants, as the table prints it."""
        n = f"{self.n_obs:g}" + (f" {self.n_unit}" if self.n_unit != "samples" else "")
        if self.by == "cv":
            K = self.per_fold.shape[0] if self.per_fold is not None else 0
            return f"{K}-fold cross-validation: mean held-out loss (the model's data term on the held-out rows), n = {self.n}"
        D = "n log(RSS/n)" if self.gaussian else "2 L (L = sum of per-sample losses)"
        pen = {
            "aic": "2 df",
            "bic": f"log(n) df = {math.log(self.n_obs):.4g} df",
            "ebic": f"(log(n) + 2 gamma log(p)) df, gamma = {self.gamma:g}",
            "ebic_cc": f"log(n) df + 2 gamma log binom(p, s), gamma = {self.gamma:g}",
            "gic": f"log(log n) log(p) df = {math.log(math.log(self.n_obs)):.4g} log(p) df",
        }[self.by]
        return f"{self.by.upper()} = {D} + {pen}; n = {n}, df = nonzeros + free coordinates"

    def table(self, fmt: str = "simple") -> str:
        from tabulate import tabulate

        name = "mean held-out loss" if self.by == "cv" else self.by.upper()
        head = (
            [k_header(self.result.unit), name]
            + (["se"] if self.by == "cv" else [])
            + ["nnz", "df", "data loss", "objective", "gap", "status", *self.metric_columns]
        )
        body = []
        for r in self.curve:
            mark = " *" if r["k"] == self.k else ""
            line = [f"{r['k']}{mark}", "-" if not math.isfinite(r["value"]) else f"{r['value']:.8g}"]
            if self.by == "cv":
                line.append("-" if r["se"] is None else f"{r['se']:.3g}")
            line += [
                "-" if r["nnz"] is None else r["nnz"],
                "-" if r["df"] is None else r["df"],
                "-" if r["loss"] is None else f"{r['loss']:.8g}",
                "-" if r["objective"] is None else f"{r['objective']:.8g}",
                "-" if r["gap"] is None else f"{r['gap']:.3g}",
                r["status"],
            ]
            line += ["-" if r.get(c) is None else f"{r[c]:.6g}" for c in self.metric_columns]
            body.append(line)
        parts = [
            f"choosing k by {self.by} ({self.describe()})",
            tabulate(body, headers=head, tablefmt=fmt, disable_numparse=True),
            f"chosen {k_text(self.k, self.result.unit)} (rule: {self.rule}; path of {self.solver}, start={self.path.start})",
        ]
        if self.stopped:
            parts.append(
                f"early stop after k={self.curve[-1]['k']}: {self.stopped}; not computed: k = {_span(self.skipped)}"
            )
        elif self.early_stop is not None:
            parts.append(
                f"early stop (patience {self.early_stop.patience}, margin {self.early_stop.margin:g}) did not fire: "
                "every k was computed"
            )
        return "\n".join(parts)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return f"Selection(by={self.by!r}, k={self.k}, solver={self.solver!r}, ks={self.ks})"

    def to_dict(self) -> dict[str, Any]:
        return jsonable(
            {
                "source": self.source,
                "solver": self.solver,
                "by": self.by,
                "rule": self.rule,
                "formula": self.describe(),
                "k": self.k,
                "curve": self.curve,
                "early_stop": None
                if self.early_stop is None
                else {"patience": self.early_stop.patience, "margin": self.early_stop.margin},
                "stopped": self.stopped,
                "skipped": self.skipped,
                "per_fold": self.per_fold.tolist() if self.per_fold is not None else None,
                "result": self.result.to_dict(),
                "path": self.path.to_dict()["points"],
            }
        )

    def table_rows(self) -> list[dict[str, Any]]:
        return self.curve

    def _repr_html_(self) -> str:
        """A notebook shows the curve's table, the plot and the chosen solution."""
        head = f"<p>choosing k by {self.by} ({self.describe()})</p>"
        table = report_html(
            self.curve,
            self.columns,
            f"chosen {k_text(self.k, self.result.unit)} (rule: {self.rule}; path of {self.solver})",
            self.figure(),
            head,
        )
        return table + self.result._repr_html_()

    def figure(self, metrics: Any = None) -> Any:
        """The plot as a matplotlib Figure (Agg canvas; pyplot's global state untouched)."""
        if metrics is not None:
            from .figures import metric_figure
            from .metrics import metric_names

            chosen = metric_names(metrics, self.metrics)
            xs = self.ks
            se = [r["se"] if r["se"] is not None else math.nan for r in self.curve] if self.by == "cv" else None
            per = {
                m: (
                    xs,
                    [math.nan if r.get(m) is None else r[m] for r in self.curve],
                    se if m == "value" else None,
                )
                for m in chosen
            }
            name = Path(self.source).name if not self.source.startswith("<") else "problem"
            return metric_figure(
                {self.solver: per},
                chosen,
                k_header(self.result.unit),
                f"{name}: choosing k by {self.by} ({self.solver})",
                mark=(self.k, f"chosen k = {self.k}"),
            )
        fig, (ax, ax_o) = new_figure(2)
        ks = self.ks
        vals = [r["value"] for r in self.curve]
        if self.by == "cv":
            se = [r["se"] if r["se"] is not None else math.nan for r in self.curve]
            ax.errorbar(ks, vals, yerr=se, marker="o", capsize=3, label="mean held-out loss ± se")
        else:
            ax.plot(ks, vals, marker="o", label=self.by.upper())
        chosen = next(r for r in self.curve if r["k"] == self.k)
        ax.axvline(self.k, color="tab:red", alpha=0.5, ls="--")
        ax.plot([self.k], [chosen["value"]], "o", color="tab:red", ms=9, label=f"chosen k = {self.k}")
        if self.stopped:
            ax.axvline(ks[-1], color="tab:gray", ls=":", label=f"early stop after k = {ks[-1]}")
        objs = [r["objective"] if r["objective"] is not None else math.nan for r in self.curve]
        ax_o.plot(ks, objs, marker="o")
        if all(v > 0 for v in objs if not math.isnan(v)):
            ax_o.set_yscale("log")
        ax.set_title("mean held-out loss" if self.by == "cv" else self.by.upper())
        ax_o.set_title("objective on all the data")
        for a in (ax, ax_o):
            a.set_xlabel(k_header(self.result.unit))
            a.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
        name = Path(self.source).name if not self.source.startswith("<") else "problem"
        fig.suptitle(f"{name}: choosing k by {self.by} ({self.solver})")
        return fig


__all__ = [
    "Selection",
    "folds_of",
    "splits_of",
    "run_select",
]
