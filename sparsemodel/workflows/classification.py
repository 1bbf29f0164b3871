"""A classifier's held-out accuracy, AUC and Brier score, read from the model's own predicted
probabilities.

A model is a classifier when its data term is the negative log-likelihood of classes: one loss
term whose atom states its logits (``Atom.logits``: the loss is log sum_j exp(L_j), the
log-partition of a categorical distribution, and phi - L_j = -log p_j with p = softmax(L)), and a
label data of the samples that says which class each sample has. Three ways of writing it are
recognized, each by where its labels are:

* ``logistic(-y * z)`` with labels y in {-c, +c} (±1 labels) *inside* the loss's argument: the
  logits are (0, -y z) and the loss is -log p_0, so p_0 = expit(y z) is the probability of the
  observed label; the class of sample i is y_i > 0;
* ``logistic(z) - y .* z`` (or ``sum(logistic(z)) - y @ z``) with y in {0, 1} *outside* it: the
  logits are (0, z) and the loss is -log p_(y_i), p_1 = expit(z);
* ``logsumexp(Z, axis=1) - sum(Y .* Z, axis=1)`` with one-hot Y (``onehot(y)``): the logits are
  the rows of Z and the loss is -log p_(argmax Y_i).

Which reading holds is checked, not assumed: at every solution the data term's value must equal
c * sum_i w_i (-log p_i) for the class the reading gives (c the term's coefficient, w its
sample weights), to a relative 1e-9; a model written another way (two loss terms, an offset)
gets no classification metrics rather than wrong ones (empty cells). With K classes, c_i the
class of held-out sample i and p_i its predicted probabilities:

* ``accuracy`` = mean_i [argmax_k p_ik = c_i] (scikit-learn's ``accuracy_score`` of the most
  probable class);
* ``auc``: two classes, the area under the ROC curve of p_i1 (``roc_auc_score``; the Mann-Whitney
  statistic, ties counting one half); K > 2, one-vs-rest macro: the mean over the classes of the
  AUC of p_ik for class k against the others (``roc_auc_score(..., multi_class="ovr",
  average="macro")``), a class absent from the held-out rows left out of the mean; None when the
  held-out rows have a single class;
* ``brier`` = mean_i sum_k (p_ik - [c_i = k])^2, halved for two classes: the binary Brier score
  mean_i (p_i1 - [c_i = 1])^2 (scikit-learn's ``brier_score_loss``, whose multiclass form is the
  full sum).

Every held-out sample counts once (sample weights weigh the held-out log-loss, ``test_loss``,
not these). The labels the stratified splits keep in proportion are the same labels
(:func:`class_labels`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp
from scipy.stats import rankdata

from ..model.checks import elementwise_factors
from ..model.expr import Data

if TYPE_CHECKING:
    from ..objective.sampleview import SampleView
    from ..objective.terms import Term

CLASS_METRICS = ("accuracy", "auc", "brier")
CHECK_RTOL = 1e-9  # the data term against c * sum_i w_i (-log p_i): rounding only


@dataclass
class Labels:
    """One reading of a classifier's labels: ``classes`` (per sample, 0..K-1), ``values`` (the
    labels as the data holds them: ±1, 0/1, or the one-hot column), ``inside`` (the labels
    multiply the loss's argument: the loss is the likelihood of logit 0, the observed label) and
    the label data ``node``."""

    classes: np.ndarray
    values: np.ndarray
    inside: bool
    node: Data


def _dense(d: Data) -> np.ndarray:
    return np.asarray(d.value.toarray() if sp.issparse(d.value) else d.value, dtype=float)


def classifier_term(view: SampleView) -> tuple[Term, int] | None:
    """(term, K): the one sample term of the design whose loss states logits (one loss value per
    sample, K classes), when it is the only loss term reading the samples; None otherwise."""
    d = view.design
    if d is None or d.n_samples is None:
        return None
    x0 = np.zeros(view.layout.n)
    found = None
    for i in d.sample_terms:
        t = d.terms[i]
        L = None if t.whole else t.logits(t.map.value(x0))
        if L is None or found is not None or t.out_size != d.n_samples:
            return None  # another loss reads the samples: not the likelihood of classes alone
        found = (t, L.shape[1])
    return found


def readings(view: SampleView, nodes: list[Data], term: tuple[Term, int] | None = None) -> list[Labels]:
    """The candidate readings of the labels of a classifier (the module docstring), in order: ±1
    labels inside the loss's argument, then 0/1 labels or one-hot rows among the sample data
    ``nodes``. Empty when the model is not a classifier (``term``: its :func:`classifier_term`,
    when known)."""
    got = term if term is not None else classifier_term(view)
    if got is None:
        return []
    t, K = got
    n = t.out_size
    out: list[Labels] = []
    seen: set[int] = set()
    if K == 2 and t.phi.args:
        for d in elementwise_factors(t.phi.args[0]):
            if d.uid in seen or d.size != n:
                continue
            v = _dense(d).ravel()
            vals = np.unique(v)
            if 1 <= len(vals) <= 2 and np.all(np.abs(vals) == np.abs(vals[0])) and vals[0] != 0:
                seen.add(d.uid)
                out.append(Labels((v > 0).astype(np.int64), v, True, d))
    for d in nodes:
        if d.uid in seen or d.shape[:1] != (n,) or not isinstance(d.value, np.ndarray):
            continue
        v = d.value
        if K == 2 and (d.ndim == 1 or (d.ndim == 2 and d.shape[1] == 1)) and np.all((v == 0) | (v == 1)):
            out.append(Labels(v.ravel().astype(np.int64), v.ravel().astype(float), False, d))
        elif d.ndim == 2 and d.shape[1] == K and np.all((v == 0) | (v == 1)) and np.all(v.sum(axis=1) == 1):
            cls = v.argmax(axis=1).astype(np.int64)
            out.append(Labels(cls, cls.astype(float), False, d))
    return out


class Classifier:
    """The classification metrics of a classifier's held-out data (:meth:`score` of a point)."""

    def __init__(self, term: Term, readings: list[Labels]):
        self.term = term
        self.readings = readings

    @classmethod
    def of(cls, view: SampleView, nodes: list[Data]) -> Classifier | None:
        """The classifier of a held-out model (its sample view ``view`` and sample data ``nodes``), or
        None when it is not one."""
        got = classifier_term(view)
        rs = readings(view, nodes, got) if got is not None else []
        return cls(got[0], rs) if got is not None and rs else None

    def probabilities(self, x: np.ndarray, value: float) -> tuple[np.ndarray, np.ndarray] | None:
        """(p, classes): the predicted probabilities (n, K) of each held-out sample's classes and
        its class, from the first reading whose likelihood is ``value``, the data term at x (None
        when none is)."""
        t = self.term
        L = t.logits(t.map.value(x))
        lse = logsumexp(L, axis=1)
        logp = L - lse[:, None]
        w = t.weights if t.weights is not None else 1.0
        rows = np.arange(len(L))
        for r in self.readings:
            at = L[rows, 0 if r.inside else r.classes]  # the logit of the class whose likelihood the loss is
            total = t.coef * float(np.sum(w * (lse - at)))
            scale = abs(value) + abs(t.coef) * float(np.sum(np.abs(w) * (np.abs(lse) + np.abs(at))))
            if not (np.isfinite(total) and abs(total - value) <= CHECK_RTOL * max(scale, 1e-300)):
                continue
            p = np.exp(logp)
            if r.inside:  # column 0 is the observed label: put each sample's back in label order
                p = np.where((r.classes == 1)[:, None], p[:, ::-1], p)
            return p, r.classes
        return None

    def score(self, x: np.ndarray, value: float) -> dict[str, float | None]:
        """Accuracy, AUC and Brier score at x (``value``: the data term there), None each when no
        reading of the labels is the data term's likelihood."""
        got = self.probabilities(x, value)
        if got is None:
            return dict.fromkeys(CLASS_METRICS)
        return class_metrics(*got)


def class_metrics(p: np.ndarray, classes: np.ndarray) -> dict[str, float | None]:
    """Accuracy, AUC and Brier score of predicted probabilities ``p`` (n, K) for the true classes
    ``classes`` (n,) in 0..K-1 (the module docstring)."""
    n, K = p.shape
    onehot = np.zeros((n, K))
    onehot[np.arange(n), classes] = 1.0
    accuracy = float(np.mean(p.argmax(axis=1) == classes))
    brier = float(np.mean(np.sum((p - onehot) ** 2, axis=1))) / (2.0 if K == 2 else 1.0)
    if K == 2:
        auc = _auc(classes == 1, p[:, 1])
    else:
        each = [_auc(classes == k, p[:, k]) for k in range(K)]
        known = [a for a in each if a is not None]
        auc = float(np.mean(known)) if known else None
    return {"accuracy": accuracy, "auc": auc, "brier": brier}


def _auc(positive: np.ndarray, score: np.ndarray) -> float | None:
    """The area under the ROC curve of ``score`` for the ``positive`` samples: the Mann-Whitney
    statistic (sum of the positives' ranks - n1 (n1 + 1) / 2) / (n1 n0), tied scores sharing their
    mean rank (the trapezoidal ROC area). None without positives or without negatives."""
    n1 = int(np.sum(positive))
    n0 = len(positive) - n1
    if n1 == 0 or n0 == 0:
        return None
    ranks = rankdata(score)
    return float((np.sum(ranks[positive]) - n1 * (n1 + 1) / 2.0) / (n1 * n0))


def class_labels_of(view: SampleView, nodes: list[Data]) -> tuple[np.ndarray, Data] | None:
    """The label of every sample of a classifier (the first reading of its labels: the ±1 or 0/1
    values, or the one-hot column) and the label data, or None when the model is not a classifier."""
    rs = readings(view, nodes)
    return (rs[0].values, rs[0].node) if rs else None


__all__ = ["CLASS_METRICS", "Classifier", "class_labels_of", "class_metrics"]
