"""What a comparison measures besides the objective: the model's loss on held-out data, the
recovery of a known truth, the degrees of freedom; and the random train/test splits of
replications.

* **Held-out loss** (``test_loss``): the objective's data term (its additive terms that read sample
  data, :func:`sparsemodel.model.samples.split_data_term`; a ridge is not in it) evaluated on the
  held-out rows at the solution, read per sample: the data term is c * sum_i l_i(x), and
  ``test_loss`` = (1 / n_test) sum_{i held out} l_i(x). ``mean(logistic(...))`` gives the mean
  logistic loss, ``sum_squares(X @ w - y) / (2 * n)`` the mean squared error (l_i = r_i^2), whatever
  constant the model was written with. Held-out rows come from a split of the model's own rows
  (:class:`HeldOut` ``.of_rows``: every data node with n rows subset, as cross-validation does) or
  from other data bound to the model's data names (``.of_data``: ``--test X=Xt.npy,y=yt.npy``; a
  model file is built again from its text with those names rebound, so that ``rows(X)`` and
  derived data follow). An objective that is not a sum over samples (the Gaussian likelihood of a
  precision matrix, ``-logdet(O) + trace(S @ O)``) is evaluated whole on the held-out data.
* **A classifier's metrics** (``accuracy``, ``auc``, ``brier``): when the held-out data term is the
  likelihood of labels (the loss atom states its logits; :mod:`~.classification`), beside
  ``test_loss`` (then the held-out log-loss), from the model's own predicted probabilities
  (:class:`HeldOut` ``.classifier``); :func:`class_labels` reads the same labels for stratified
  splits.
* **Truth** (``--truth w=w_true.npy``): per unit of the sparsity constraint (a coordinate, a group,
  an edge), S the units the solution uses and T those of the truth: ``precision`` = |S ∩ T| / |S|,
  ``recall`` = |S ∩ T| / |T|, ``f1`` = 2 |S ∩ T| / (|S| + |T|) (each 1 when its denominator is 0),
  ``exact`` (S = T), ``exact_top`` (the |T| units of largest magnitude of the solution are T:
  paper 000's exact recovery, supp(w, k̄) = supp(w̄), which is ``exact`` when k = |T|), ``covers``
  (T ⊆ S: paper 000's relaxed recovery), ``fp`` = |S \\ T|, ``fn`` = |T \\ S|, and ``error``, the
  Euclidean (Frobenius) norm of the solution minus the truth over the coordinates the truth gives.
  A rank constraint has no support: only ``error``.
* **Degrees of freedom** (``df``): the nonzeros of the constrained coordinates plus the free ones
  (:func:`sparsemodel.workflows.select.degrees_of_freedom`, what the information criteria count).
* **Certificate** (``lower_bound``, ``gap``; every row, docs/certify.md): the run's
  ``Result.lower_bound`` and ``Result.gap`` = (f - lower_bound) / max(|f|, 1), from the bound the
  solve computed (``fast`` by default; ``bnb`` its proof); None (an empty cell) where the model has
  no bound (:func:`bound_cells`).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from ..errors import DataError, ModelError, ShapeError
from ..lowering.lowered import LoweredProblem
from ..model.expr import Data
from ..model.objective import Objective
from ..model.problem import Model
from ..model.samples import data_named, rebind_data
from ..objective.evaluator import Evaluator
from ..objective.sampleview import SelectionError, sample_view
from .classification import CLASS_METRICS, Classifier, class_labels_of

if TYPE_CHECKING:
    from ..solvers.base import Result

# every metric a row can carry, with what it means (docs/comparisons.md; --plot validates against it)
METRICS: dict[str, str] = {
    "objective": "the training objective f(x)",
    "lower_bound": "a lower bound on the best objective at this bound (docs/certify.md; empty where none exists)",
    "gap": "(objective - lower_bound) / max(|objective|, 1): 0 is certified optimal; empty where no bound exists",
    "nnz": "nonzeros of the constrained variable",
    "df": "degrees of freedom: nonzeros of the constrained coordinates + free coordinates",
    "time_s": "seconds of the solve (of the whole selection with --select)",
    "iterations": "iterations of the solver",
    "k": "the bound (the chosen bound with --select)",
    "test_loss": "mean per-sample loss of the model on the held-out rows",
    "accuracy": "a classifier's share of held-out rows whose most probable class is their class",
    "auc": "a classifier's held-out area under the ROC curve (one-vs-rest macro mean for more than 2 classes)",
    "brier": "a classifier's held-out Brier score: mean squared error of the predicted class probabilities",
    "precision": "|S ∩ T| / |S|: the share of selected units that are true",
    "recall": "|S ∩ T| / |T|: the share of true units selected",
    "f1": "2 |S ∩ T| / (|S| + |T|)",
    "exact": "1 when the selected units are exactly the true ones (S = T)",
    "exact_top": "1 when the |T| largest units of the solution are the true ones (paper 000's exact recovery)",
    "covers": "1 when every true unit is selected (T ⊆ S: paper 000's relaxed recovery)",
    "fp": "false positives |S \\ T|",
    "fn": "false negatives |T \\ S|",
    "fdr": "the false discovery proportion |S \\ T| / max(|S|, 1) (its mean over replications is the FDR)",
    "power": "|S ∩ T| / |T|: the share of true units selected (as recall; the name the inference literature uses)",
    "error": "||x - x_true|| (Euclidean; Frobenius for a matrix) over the coordinates the truth gives",
    "penalty": "the convex relaxation's penalty (lambda) at its chosen k",
    "lower_s": "seconds to lower the replication's problem and build its caches (shared by its solvers and k)",
}
TRUTH_METRICS = ("precision", "recall", "f1", "exact", "exact_top", "covers", "fp", "fn", "fdr", "power", "error")
HIGHER_IS_BETTER = {"precision", "recall", "f1", "exact", "exact_top", "covers", "power", "accuracy", "auc"}
ZERO_TOL = 1e-12  # a unit of an outside method's answer counts when its magnitude > ZERO_TOL * the largest


class MetricError(ModelError):
    kind = "comparison error"


class Given(dict):
    """Values by name that remember where each came from (``--test X=Xt.npy``), for messages."""

    def __init__(self, values: dict[str, Any], origins: dict[str, str]):
        super().__init__(values)
        self.origins = origins


def origin(values: Any, default: str) -> str | dict[str, str]:
    return getattr(values, "origins", None) or default


def who(flag: str | dict[str, str], name: str | None = None) -> str:
    """Where a value came from, for messages: ``flag`` is a word (``test``) or, from the command
    line, {name: the argument that gave it} (``--test X=Xt.npy``)."""
    if isinstance(flag, dict):
        if name is None:
            return ", ".join(flag.values())
        return flag.get(name, name)
    return f"{flag} {name}" if name is not None else flag


def bound_cells(res: Result | None) -> dict[str, float | None]:
    """The lower bound and the gap of a run as two cells, None where it has none (never a number
    made up for a model without a bound, or for a failed run)."""
    lb = None if res is None else res.lower_bound
    gap = None if res is None else res.gap
    ok = lb is not None and gap is not None and math.isfinite(lb) and math.isfinite(gap)
    return {"lower_bound": float(lb) if ok else None, "gap": float(gap) if ok else None}


def coordinate(s: Any) -> bool:
    """The set offers the coordinate API (coords, units, unit_of): support metrics apply."""
    return s is not None and bool(getattr(s, "coordinate", False))


def dof(lp: LoweredProblem, x: np.ndarray) -> int | None:
    """Degrees of freedom of the flat point x (None without a sparsity or rank set)."""
    from .criteria import degrees_of_freedom

    if lp.set is None or not lp.set.thresholds:
        return None
    return int(degrees_of_freedom(lp, x)[0])


# ====================================================================== data under other names


def model_data_names(problem: Model) -> dict[str, Data]:
    """The data of a model by name: a model file's declared data (and lets), else the named data
    nodes of the objective (a builder model names them with ``sm.Data(X, name="X")``)."""
    out = dict(problem.data)
    for name, nodes in data_named(problem.objective.expr).items():
        out.setdefault(name, nodes[0])
    return out


def with_data(problem: Model, values: dict[str, Any], flag: str | dict[str, str] = "data") -> Model:
    """The model with the data names in ``values`` bound to other values (held-out rows, a new
    replication's draw): a model file is built again from its text (``rows(X)``, ``let Z =
    standardize(X)`` recomputed), a builder model has those data nodes replaced. The new data must
    have the old data's columns (trailing dimensions and, when both have them, column names) and
    every variable its old shape; ``flag`` names where the values came from in messages."""
    known = model_data_names(problem)
    for name in values:
        if name not in known:
            names = ", ".join(sorted(known)) or "(none: name the data, sm.Data(X, name='X'))"
            raise MetricError(
                f"{who(flag, name)}: the model has no data named {name!r}",
                hint=f"its data: {names}",
            )
    values = {name: _named_like(known[name], v) for name, v in values.items()}
    rebuild = getattr(problem, "rebuild_with", None)
    if rebuild is not None:
        new = rebuild(values)
    else:
        obj = rebind_data(problem.objective.expr, values)
        new = Model(Objective(obj, problem.objective.span), problem.constraints, source=problem.source)
    new_known = model_data_names(new)
    for name in values:
        old, got = known[name], new_known.get(name)
        if got is None:
            continue
        check_columns(old, got, who(flag, name))
    old_vars = {v.name: v.shape for v in problem.variables}
    for v in new.variables:
        if v.name in old_vars and old_vars[v.name] != v.shape:
            raise MetricError(
                f"{who(flag)}: with {', '.join(sorted(values))} rebound, the variable {v.name} has shape "
                f"{v.shape} instead of {old_vars[v.name]}",
                v.span,
                "the held-out or replicated data must have the columns of the data the model was written for",
            )
    return new


def _named_like(old: Data, value: Any) -> Any:
    """A bare array rebound to ``old`` (a replication's draw, held-out rows) with the names of
    old's columns: the new data must have the old columns (:func:`check_columns`), so a result on
    it names its coordinates as one on the model's own data does. Anything that carries its own
    names (a DataFrame, a :class:`Data`, a file) is left as it is."""
    if old.ndim < 2 or all(n is None for n in old.axis_names[1:]):
        return value
    if not (isinstance(value, np.ndarray) or sp.issparse(value)) or value.shape[1:] != old.shape[1:]:
        return value
    return Data(value, name=old.name, span=old.span, kind=old.kind, names=(None, *old.axis_names[1:]))


def check_columns(old: Data, new: Data, what: str) -> None:
    """The new data has the old data's trailing dimensions and (when both have them) column names."""
    if old.shape[1:] != new.shape[1:]:
        cols = lambda d: d.shape[1] if d.ndim == 2 else (d.shape[1:] or "no")  # noqa: E731
        raise MetricError(
            f"{what}: the new data has {cols(new)} columns (shape {new.shape}), but the model's {old.name} "
            f"has {cols(old)} (shape {old.shape})",
            old.span,
            f"give {old.name} with the columns it was declared with",
        )
    if old.ndim == 2:
        a, b = old.axis_names[1], new.axis_names[1]
        if a is not None and b is not None and tuple(a) != tuple(b):
            i = next(j for j, (u, v) in enumerate(zip(a, b)) if u != v)
            raise MetricError(
                f"{what}: column {i} is named {b[i]!r} in the new data but {a[i]!r} in the model's {old.name}",
                old.span,
                "the columns must be the same, in the same order",
            )


# ====================================================================== held-out loss


@dataclass
class HeldOut:
    """The model's loss on held-out data: :meth:`loss` of a solution's values (by variable name)."""

    evaluator: Evaluator
    divisor: float  # c * n_test: the data term is c * sum_i l_i
    n: int | None  # held-out samples (None: the whole objective on other data)
    notes: list[str] = field(default_factory=list)
    classifier: Classifier | None = None  # a likelihood of classes: accuracy, AUC, Brier score too

    @property
    def columns(self) -> list[str]:
        """The held-out metrics: ``test_loss``, and for a classifier ``accuracy``, ``auc``, ``brier``."""
        return ["test_loss", *(CLASS_METRICS if self.classifier is not None else ())]

    def loss(self, values: dict[str, Any]) -> float:
        x = self.evaluator.layout.pack(values)
        return float(self.evaluator.value(x)) / self.divisor

    def score(self, values: dict[str, Any]) -> dict[str, Any]:
        """Every held-out metric of a solution (its values by variable name); None where one is not
        a finite number (a failed evaluation)."""
        out: dict[str, Any] = dict.fromkeys(self.columns)
        try:
            x = self.evaluator.layout.pack(values)
            value = float(self.evaluator.value(x))
            out["test_loss"] = value / self.divisor if math.isfinite(value) else None
            if self.classifier is not None and out["test_loss"] is not None:
                out.update(self.classifier.score(x, value))
        except (ModelError, FloatingPointError, ValueError, np.linalg.LinAlgError):
            pass
        return out

    @classmethod
    def of_model(cls, test: Model, notes: list[str] | None = None) -> HeldOut:
        """The held-out loss of ``test``, the model bound to the held-out data."""
        view = sample_view(test)
        try:
            dt = view.term()
        except SelectionError:  # not a sum over samples: the whole objective on the held-out data
            return cls(Evaluator(test.objective.expr, view.layout), 1.0, None, list(notes or []))
        scale = dt.scale if dt.scale is not None and dt.scale > 0 else 1.0 / dt.n
        ev = Evaluator(dt.expr, view.layout)
        return cls(ev, scale * dt.n, dt.n, list(notes or []), Classifier.of(view, dt.nodes))

    @classmethod
    def of_rows(cls, problem: Model, rows: np.ndarray) -> HeldOut:
        """The held-out loss on rows ``rows`` of the model's own sample data."""
        return cls.of_model(Model(Objective(sample_view(problem).held_out(rows)), source=problem.source))

    @classmethod
    def of_data(cls, problem: Model, values: dict[str, Any], flag: str | dict[str, str] = "test") -> HeldOut:
        """The held-out loss on other data bound to the model's data names (``--test``)."""
        test = with_data(problem, values, flag)
        return cls.of_model(test, recomputed(problem, test, values))


def recomputed(old: Model, new: Model, values: dict[str, Any]) -> list[str]:
    """Notes on the data of ``new`` that was not given but changed (derived data of a model file,
    recomputed from the rebound data)."""
    notes = []
    new_known = model_data_names(new)
    for name, d in model_data_names(old).items():
        if name in values or name not in new_known:
            continue
        e = new_known[name]
        same = e.shape == d.shape and (
            not isinstance(d.value, np.ndarray)
            or not isinstance(e.value, np.ndarray)
            or np.array_equal(d.value, e.value)
        )
        if not same:
            notes.append(
                f"{name} was recomputed from the rebound {', '.join(sorted(values))} (its statistics are theirs)"
            )
    return notes


def train_model(problem: Model, rows: np.ndarray) -> Model:
    """The model on rows ``rows`` of its sample data (every data node with n rows subset)."""
    return sample_view(problem).train(rows)


def rows_data(problem: Model, rows: np.ndarray | None) -> dict[str, Any]:
    """The model's data by name, the sample data restricted to ``rows`` (what an outside method
    is given to fit)."""
    known = model_data_names(problem)
    if rows is None:
        return {n: d.value for n, d in known.items()}
    n = sample_view(problem).term().n
    return {name: (d.value[rows] if d.ndim >= 1 and d.shape[0] == n else d.value) for name, d in known.items()}


# ====================================================================== splits


def class_labels(problem: Model) -> tuple[np.ndarray, Data] | None:
    """The label of every sample when the model is a classifier (its data term the likelihood of
    classes, :mod:`~sparsemodel.workflows.classification`: ±1 labels multiplying the argument of
    ``logistic(...)``, 0/1 labels of ``logistic(z) - y .* z``, or one-hot rows read with
    ``logsumexp``), and the label data. None for other losses."""
    view = sample_view(problem)
    try:
        return class_labels_of(view, view.term().nodes)
    except SelectionError:
        return None


def held_out_columns(problem: Model | None) -> list[str]:
    """The held-out metrics of a model's runs: ``test_loss``, and for a classifier (``problem``
    given, :func:`class_labels`) its accuracy, AUC and Brier score."""
    return ["test_loss", *(CLASS_METRICS if problem is not None and class_labels(problem) is not None else ())]


def holdout_splits(
    n: int,
    splits: int,
    test_size: float,
    seed: int | None,
    labels: np.ndarray | None = None,
    label_node: Data | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``splits`` random (train, test) splits of n samples, a share ``test_size`` held out; with
    ``labels``, stratified: every class split in that share (at least one sample of it on each
    side). Reproducible from ``seed``."""
    if isinstance(splits, bool) or not isinstance(splits, numbers.Integral) or splits < 1:
        raise MetricError(f"splits={splits!r}: give a number of random splits >= 1")
    if isinstance(test_size, bool) or not isinstance(test_size, numbers.Real) or not 0 < test_size < 1:
        raise MetricError(f"test_size={test_size!r}: give the share of samples held out, between 0 and 1 (0.3)")
    rng = np.random.default_rng(seed)
    if labels is None:
        m = int(round(test_size * n))
        if not 1 <= m <= n - 1:
            raise MetricError(
                f"test_size={test_size:g} of n = {n} samples holds out {m}: a split needs at least one "
                "sample on each side"
            )
        out = []
        for _ in range(int(splits)):
            perm = rng.permutation(n)
            out.append((np.sort(perm[m:]), np.sort(perm[:m])))
        return out
    classes, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
    small = [(c, int(k)) for c, k in zip(classes, counts) if k < 2]
    if small:
        c, k = small[0]
        where = ""
        if label_node is not None:
            at = f", declared at {label_node.span.location()}" if label_node.span is not None else ""
            where = f" (data {label_node.name}{at})"
        raise MetricError(
            f"a stratified split is impossible: the class {c:g} of the labels{where} has {k} sample; every "
            "class needs at least 2 (one to train on, one to test on)",
            label_node.span if label_node is not None else None,
            "remove that class, or give held-out data with --test",
        )
    members = [np.flatnonzero(inverse == j) for j in range(len(classes))]
    take = [min(max(int(round(test_size * len(m))), 1), len(m) - 1) for m in members]
    out = []
    for _ in range(int(splits)):
        test = np.concatenate([rng.permutation(m)[:t] for m, t in zip(members, take)])
        mask = np.zeros(n, dtype=bool)
        mask[test] = True
        out.append((np.flatnonzero(~mask), np.flatnonzero(mask)))
    return out


# ====================================================================== the truth


class Truth:
    """A known truth for some variables (by name), checked against the model: every metric of
    :data:`TRUTH_METRICS` for a solution (:meth:`score`)."""

    def __init__(
        self, problem: Model, lp: LoweredProblem, values: dict[str, Any], flag: str | dict[str, str] = "truth"
    ):
        self.values = {}
        variables = {v.name: v for v in problem.variables}
        layout = lp.layout
        self.x = np.zeros(layout.n)
        self.given = np.zeros(layout.n, dtype=bool)
        s = lp.set
        for name, val in values.items():
            if name not in variables:
                raise MetricError(
                    f"{who(flag, name)}: the model has no variable named {name!r}",
                    hint=f"its variables: {', '.join(sorted(variables))}",
                )
            v = variables[name]
            try:
                arr = np.asarray(val.toarray() if hasattr(val, "toarray") else val, dtype=float)
            except (TypeError, ValueError):
                raise DataError(f"{who(flag, name)}: the truth is not numeric") from None
            if not np.all(np.isfinite(arr)):
                raise DataError(f"{who(flag, name)}: the truth holds NaN or infinite values")
            coords = layout.coords(v)
            if arr.shape == v.shape:
                self.x[coords] = arr.ravel()
                self.given[coords] = True
            elif (
                coordinate(s) and s.constraint.variable.uid == v.uid and arr.ndim == 1 and arr.size == s.size
            ):  # the constrained part only (w[1:] without the intercept)
                self.x[s.coords] = arr
                self.given[s.coords] = True
            else:
                part = (
                    f" or {s.size} (the constrained coordinates {s.target_text()})"
                    if coordinate(s) and s.constraint.variable.uid == v.uid and s.size != v.size
                    else ""
                )
                raise ShapeError(
                    f"{who(flag, name)}: the truth has shape {arr.shape}, but the variable {name} has shape "
                    f"{v.shape}{part}",
                    v.span,
                    f"give the true {name} with shape {v.shape}",
                )
            self.values[name] = arr
        self.support_known = coordinate(s) and bool(np.all(self.given[s.coords]))
        self.true_units = _units(s, self.x) if self.support_known else None

    @property
    def n_true(self) -> int | None:
        """|T|, the true units (None when the truth does not give the constrained coordinates)."""
        return None if self.true_units is None else len(self.true_units)

    def score(self, lp: LoweredProblem, x: np.ndarray) -> dict[str, Any]:
        out: dict[str, Any] = dict.fromkeys(TRUTH_METRICS)
        out["error"] = float(np.linalg.norm(x[self.given] - self.x[self.given]))
        if self.true_units is None:
            return out
        S, T = _units(lp.set, x), self.true_units
        tp = len(S & T)
        out["precision"] = tp / len(S) if S else 1.0
        out["recall"] = tp / len(T) if T else 1.0
        out["f1"] = 2.0 * tp / (len(S) + len(T)) if (S or T) else 1.0
        out["exact"] = float(S == T)
        mags = _magnitudes(lp.set, x)
        nz = np.flatnonzero(mags > 0)
        top = nz[np.argsort(-mags[nz], kind="stable")[: len(T)]] if len(nz) > len(T) else nz
        out["exact_top"] = float(set(top.tolist()) == T)
        out["covers"] = float(T <= S)
        out["fp"] = len(S - T)
        out["fn"] = len(T - S)
        out["fdr"] = len(S - T) / max(len(S), 1)
        out["power"] = out["recall"]
        return out


def _magnitudes(s: Any, x: np.ndarray) -> np.ndarray:
    """Per unit of the set (coordinate, group, edge): the norm of x over its coordinates."""
    z = x[s.coords]
    if s.unit_of is None:
        return np.abs(z)
    return np.sqrt(np.bincount(s.unit_of, weights=z * z, minlength=s.n_units))


def _units(s: Any, x: np.ndarray) -> set[int]:
    return set(np.flatnonzero(_magnitudes(s, x) > 0).tolist())


def clean(lp: LoweredProblem, x: np.ndarray) -> np.ndarray:
    """An outside method's answer with the units below ``ZERO_TOL`` times the largest set to zero
    (its numerical zeros)."""
    s = lp.set
    if not coordinate(s):
        return x
    mags = _magnitudes(s, x)
    small = mags <= ZERO_TOL * float(mags.max(initial=0.0))
    out = x.copy()
    drop = small if s.unit_of is None else small[s.unit_of]
    out[s.coords[drop]] = 0.0
    return out


# ====================================================================== the scorer


class Scorer:
    """The metrics of one problem's runs: ``columns`` (in order) and :meth:`score` of a result."""

    def __init__(self, held: HeldOut | None = None, truth: Truth | None = None):
        self.held = held
        self.truth = truth

    @property
    def columns(self) -> list[str]:
        return (self.held.columns if self.held is not None else []) + (
            list(TRUTH_METRICS) if self.truth is not None else []
        )

    @property
    def notes(self) -> list[str]:
        return list(self.held.notes) if self.held is not None else []

    def score(self, lp: LoweredProblem, res: Result) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.held is not None:
            out.update(self.held.score(res.values))
        if self.truth is not None:
            out.update(self.truth.score(lp, lp.layout.pack(res.values)))
        return out

    def empty(self) -> dict[str, Any]:
        return dict.fromkeys(self.columns)


def make_scorer(
    problem: Model,
    lp: LoweredProblem,
    test: dict[str, Any] | None = None,
    truth: dict[str, Any] | None = None,
    test_rows: np.ndarray | None = None,
    flags: tuple[Any, Any] | None = None,
) -> Scorer | None:
    """The scorer of ``problem``'s runs: held-out loss on ``test`` data (names rebound) or on rows
    ``test_rows`` of its own data, and the metrics of a ``truth``; None when neither is given."""
    flags = flags or (origin(test, "test"), origin(truth, "truth"))
    if test is not None and test_rows is not None:
        raise MetricError("give held-out data or held-out rows, not both")
    held = None
    if test is not None:
        if not isinstance(test, dict) or not test:
            raise MetricError(f"{who(flags[0])}: give the held-out data as a dict of data names to values")
        held = HeldOut.of_data(problem, test, flags[0])
    elif test_rows is not None:
        held = HeldOut.of_rows(problem, test_rows)
    tr = None
    if truth is not None:
        if not isinstance(truth, dict) or not truth:
            raise MetricError(f"{who(flags[1])}: give the truth as a dict of variable names to values")
        tr = Truth(problem, lp, truth, flags[1])
    if held is None and tr is None:
        return None
    return Scorer(held, tr)


def _needs(metric: str) -> str:
    if metric == "test_loss":
        return "--test or --splits"
    if metric in CLASS_METRICS:
        return "--test or --splits, and a classifier: a loss that is the likelihood of labels"
    if metric in TRUTH_METRICS:
        return "--truth"
    return {"penalty": "--select", "lower_s": "--splits or --select"}.get(metric, "another report")


def with_metric_columns(columns: tuple[str, ...], metric_columns: list[str]) -> tuple[str, ...]:
    """A report's columns with the metrics asked for (test_loss, the truth's) before the support."""
    i = columns.index("support")
    return columns[:i] + tuple(metric_columns) + columns[i:]


def metric_names(text: str | list[str] | tuple[str, ...], available: list[str] | None = None) -> list[str]:
    """Metric names from ``"test_loss,time_s"`` or a list, each checked (``available``: those the
    report has)."""
    items = [t.strip() for t in text.split(",")] if isinstance(text, str) else list(text)
    items = [t for t in items if t]
    if not items:
        raise MetricError("no metric named", hint=f"metrics: {', '.join(available or list(METRICS))}")
    for m in items:
        pool = available if available is not None else list(METRICS)
        if m not in pool:
            raise MetricError(
                f"{m!r} is not a metric of this report",
                hint=f"metrics: {', '.join(pool)}" + ("" if m not in METRICS else f" ({m} needs {_needs(m)})"),
            )
    return items


__all__ = [
    "with_metric_columns",
    "CLASS_METRICS",
    "METRICS",
    "TRUTH_METRICS",
    "HeldOut",
    "MetricError",
    "Given",
    "Scorer",
    "Truth",
    "bound_cells",
    "class_labels",
    "dof",
    "held_out_columns",
    "holdout_splits",
    "make_scorer",
    "metric_names",
    "train_model",
    "with_data",
]
