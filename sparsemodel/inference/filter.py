"""The knockoff filter's arithmetic: feature statistics from l0 fits, the knockoff(+) threshold, and
derandomization by e-values.

**Statistics.** A statistic W_j is a function of the fit on [X, X~] that changes sign when X_j and
X~_j are swapped (antisymmetry); a large positive W_j is evidence for X_j (Barber and Candes 2015,
Section 2.2; Candes et al. 2018, Section 3.2).

* ``coef`` -- the coefficient difference at one bound k: W_j = |b_j| - |b~_j| (for a row unit, the
  norms of the row and of its knockoff row), b the l0 solution on [X, X~] with k units among 2p;
* ``path`` -- the coefficient difference summed along the l0 path (its "area"): with b(k) the
  best solution on [X, X~] with k units among 2p, W_j = sum_{k=1..K} (|b_j(k)| - |b~_j(k)|). It
  needs no choice of k (the lasso's statistics need a lambda), rewards a unit that enters early and
  stays, and weighs each bound by the size of the coefficients it fits;
* ``support`` -- the support count, the l0 analogue of the lasso's lambda at entry: Z_j = #{k :
  j in S_k}, the number of bounds at which unit j is in the best support, and W_j = max(Z_j, Z~_j)
  sign(Z_j - Z~_j). For nested supports (the lasso's path) Z_j = K + 1 - (the k at which j enters);
  l0 supports are not nested, and counting where a unit is rather than where it first appears keeps
  a knockoff that enters early and leaves from outranking its variable that stays.

On the protocol of benchmarks/knockoffs.py (linear, amplitude 0.12, 20 replications, the same
knockoffs) the powers at q = 0.1 were: ``path`` 0.47, ``support`` 0.45, ``coef`` at k = 50 0.42,
the first entry on the path 0.22, knockpy's lasso coefficient difference 0.50; with a ridge
0.1 ||w||^2 in the model, ``path`` 0.51 (docs/inference.md).

**Threshold.** For a target FDR q, the knockoff+ threshold (Barber and Candes 2015, Theorem 2) is

    T = min { t in {|W_j| : W_j != 0} : (1 + #{j : W_j <= -t}) / max(1, #{j : W_j >= t}) <= q },

(infinite when no t qualifies: nothing is selected), and the selection is {j : W_j >= T}; with
offset 0 instead of 1 it is the knockoff threshold (Theorem 1: a modified FDR).

**Derandomization** (Ren and Barber 2023, Algorithm 1): with M independent knockoff copies, each
run m gives W^(m) and its knockoff+ threshold T^(m) at level alpha_kn (default q / 2), and the
e-values e_j^(m) = p 1{W_j^(m) >= T^(m)} / (1 + #{k : W_k^(m) <= -T^(m)}); their average e_j is
an e-value, and the e-BH procedure at level q selects the k^ largest, k^ = max{k : e_(k) >= p /
(q k)}. The FDR is controlled at q for any M, and the selection no longer depends on one draw.
"""

from __future__ import annotations

import numpy as np

STATISTICS = ("path", "support", "coef")


def threshold(W: np.ndarray, q: float, offset: int = 1) -> float:
    """The knockoff+ threshold (``offset=1``) or the knockoff threshold (``offset=0``) of W at
    level q (the module docstring); ``inf`` when no threshold qualifies."""
    W = np.asarray(W, dtype=float)
    cand = np.unique(np.abs(W[W != 0]))  # ascending
    if not len(cand):
        return np.inf
    Ws = np.sort(W)
    neg = np.searchsorted(Ws, -cand, side="right")  # #{W <= -t}
    pos = len(Ws) - np.searchsorted(Ws, cand, side="left")  # #{W >= t}
    ok = (offset + neg) / np.maximum(1, pos) <= q
    return float(cand[np.argmax(ok)]) if ok.any() else np.inf


def select(W: np.ndarray, t: float) -> np.ndarray:
    """The indices j with W_j >= t (none for an infinite t)."""
    if not np.isfinite(t):
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.asarray(W) >= t)


def support_statistic(real: np.ndarray, fake: np.ndarray) -> np.ndarray:
    """W of the ``support`` statistic: ``real`` and ``fake`` are (number of bounds, p) memberships
    of each unit and of its knockoff in the best support at each k of the path."""
    zr = np.asarray(real, dtype=bool).sum(axis=0).astype(float)
    zf = np.asarray(fake, dtype=bool).sum(axis=0).astype(float)
    return np.maximum(zr, zf) * np.sign(zr - zf)


def path_statistic(real: np.ndarray, fake: np.ndarray) -> np.ndarray:
    """W of the ``path`` statistic: ``real`` and ``fake`` are (number of bounds, p) magnitudes of
    each unit and of its knockoff in the solution at each k of the path."""
    return np.abs(np.asarray(real, dtype=float)).sum(axis=0) - np.abs(np.asarray(fake, dtype=float)).sum(axis=0)


def coef_statistic(real: np.ndarray, fake: np.ndarray) -> np.ndarray:
    """W of the ``coef`` statistic: |b_j| - |b~_j| from the units' magnitudes."""
    return np.abs(np.asarray(real, dtype=float)) - np.abs(np.asarray(fake, dtype=float))


def evalues(W: np.ndarray, alpha: float, offset: int = 1) -> tuple[np.ndarray, float]:
    """(e-values, threshold) of one knockoff run at level ``alpha`` (Ren and Barber 2023, eq. 6)."""
    W = np.asarray(W, dtype=float)
    t = threshold(W, alpha, offset)
    if not np.isfinite(t):
        return np.zeros(len(W)), t
    return len(W) * (W >= t) / (1.0 + np.sum(W <= -t)), t


def ebh(e: np.ndarray, q: float) -> np.ndarray:
    """The e-BH selection at level q (Wang and Ramdas 2022): the k^ largest e-values, k^ = max{k :
    e_(k) >= p / (q k)} (none when no k qualifies)."""
    e = np.asarray(e, dtype=float)
    p = len(e)
    order = np.argsort(-e, kind="stable")
    ks = np.arange(1, p + 1)
    ok = e[order] >= p / (q * ks)
    if not ok.any():
        return np.zeros(0, dtype=np.int64)
    khat = int(ks[ok].max())
    return np.sort(order[:khat])


__all__ = [
    "STATISTICS",
    "coef_statistic",
    "ebh",
    "evalues",
    "path_statistic",
    "select",
    "support_statistic",
    "threshold",
]
