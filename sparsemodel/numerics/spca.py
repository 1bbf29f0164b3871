"""Sparse PCA kernels on arrays: maximize w'Sw subject to ||w|| = 1 and nnz(w) <= k.

* :func:`tpm` -- the truncated power method (Yuan & Zhang 2013, "Truncated power method for sparse
  eigenvalue problems", JMLR 14:899-925, Algorithm 1; the loop is :func:`.smooth.truncated_power`),
  from several starts, each answer debiased;
* :func:`htp` -- a GraHTP-like iteration: a gradient step on -w'Sw, hard thresholding to k
  coordinates, then the debiasing below (Yuan & Li's GraHTP with the exact restricted solve);
* :func:`leading` -- the debiasing: the leading eigenvector of S restricted to a support, which is
  the exact maximizer of w'Sw over unit vectors on that support;
* :func:`deflate` -- several components by deflation (Mackey 2009, "Deflation methods for sparse
  PCA", NIPS): Schur complement deflation (default) or projection deflation;
* :func:`adjusted_variance` -- the variance explained by several non-orthogonal components, as
  Zou, Hastie & Tibshirani (2006, "Sparse principal component analysis", JCGS 15, Section 3.4)
  define it: Z = XW = QR, adjusted variance sum_j R_jj^2 (here from W'SW = R'R).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla
import scipy.sparse.linalg as spla

from .smooth import truncated_power

EIGSH_ABOVE = 400  # above this many coordinates, the leading eigenvector of S by Lanczos


def top_k(v: np.ndarray, k: int) -> np.ndarray:
    """The positions of the k entries of largest magnitude, sorted (ties: the lower position)."""
    if k >= len(v):
        return np.arange(len(v))
    idx = np.argsort(-np.abs(v), kind="stable")[:k]
    return np.sort(idx)


def truncate(v: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros_like(v)
    idx = top_k(v, k)
    out[idx] = v[idx]
    return out


def _signed(v: np.ndarray) -> np.ndarray:
    """v with its entry of largest magnitude positive (one answer for +-v)."""
    i = int(np.argmax(np.abs(v))) if v.size else 0
    return -v if v.size and v[i] < 0 else v


def leading(S: np.ndarray, cols: np.ndarray) -> tuple[float, np.ndarray]:
    """(lambda_max(S[C, C]), the unit w supported on C with w_C its eigenvector): the maximum of
    w'Sw over unit vectors supported on C, exact."""
    p = S.shape[0]
    w = np.zeros(p)
    cols = np.asarray(cols, dtype=np.int64)
    if len(cols) == 0:
        return 0.0, w
    sub = S[np.ix_(cols, cols)]
    if len(cols) > EIGSH_ABOVE:
        lam, V = spla.eigsh(sub, k=1, which="LA")
        lam0, v = float(lam[0]), V[:, 0]
    else:
        lam, V = sla.eigh(sub, subset_by_index=[len(cols) - 1, len(cols) - 1])
        lam0, v = float(lam[0]), V[:, 0]
    w[cols] = _signed(v)
    return lam0, w


def filled(S: np.ndarray, C: np.ndarray, k: int) -> np.ndarray:
    """C with coordinates of the largest variances S_ii added up to k (an end point of the power
    method can have exact zeros, e.g. on a block-diagonal S); the maximum on a larger support is
    never smaller (Cauchy interlacing)."""
    if len(C) >= k:
        return C
    order = [i for i in np.argsort(-np.diag(S), kind="stable") if i not in set(C.tolist())]
    return np.sort(np.r_[C, order[: k - len(C)]]).astype(np.int64)


def starts(S: np.ndarray, k: int, n_starts: int) -> list[np.ndarray]:
    """Deterministic starts: the leading eigenvector of S truncated to k coordinates (the start
    Yuan & Zhang recommend), then the columns of S of the largest diagonal entries."""
    p = S.shape[0]
    _, v = leading(S, np.arange(p))
    out = [truncate(v, k)]
    for i in np.argsort(-np.diag(S), kind="stable")[: max(0, n_starts - 1)]:
        out.append(truncate(S[:, i].copy(), k))
    return out


EXHAUSTIVE_SWAPS = 400  # up to this many exchanges (k (p - k)), the polish tries every one


def _exchanges(S: np.ndarray, w: np.ndarray, C: np.ndarray, m: int) -> list[np.ndarray]:
    """The supports one exchange away from C that the polish evaluates: every one when there are
    at most EXHAUSTIVE_SWAPS; else, for each of the m outside coordinates j of largest |(Sw)_j| (the
    first-order gain of adding j), C + j minus the coordinate of least weight in its leading
    eigenvector."""
    p, k = S.shape[0], len(C)
    outside = np.setdiff1d(np.arange(p), C)
    if k * (p - k) <= EXHAUSTIVE_SWAPS:
        return [np.sort(np.r_[np.delete(C, i), j]) for i in range(k) for j in outside]
    score = np.abs(S @ w)
    score[C] = -np.inf
    out = []
    for j in np.argsort(-score, kind="stable")[:m]:
        D = np.sort(np.r_[C, j])
        _, v = leading(S, D)
        drop = D[int(np.argmin(np.abs(v[D])))]
        if drop != j:
            out.append(D[D != drop])
    return out


def polish(S: np.ndarray, w: np.ndarray, value: float, candidates: int | None = None) -> tuple[np.ndarray, float, int]:
    """Exchange one coordinate of the support of w for one outside while that raises the maximum
    of w'Sw on the support (:func:`_exchanges`; ``candidates``: m, default min(k, 10); values
    exact, :func:`leading`); the best exchange of each round is taken. Returns (w, its value,
    exchanges made); the value never decreases."""
    C = np.flatnonzero(w)
    k, p = len(C), S.shape[0]
    if k == 0 or k == p:
        return w, value, 0
    m = min(p - k, candidates or min(k, 10))
    swaps = 0
    while swaps < 10 * k:
        best: tuple[float, np.ndarray | None] = (value, None)
        for E in _exchanges(S, w, C, m):
            lam = float(np.linalg.eigvalsh(S[np.ix_(E, E)])[-1])
            if lam > best[0] * (1 + 1e-12) + 1e-300:
                best = (lam, E)
        if best[1] is None:
            break
        C = best[1]
        value, w = leading(S, C)
        swaps += 1
    return w, value, swaps


@dataclass
class Component:
    """One component: w (unit, k-sparse), its variance w'Sw, the iterations and the quotients seen."""

    w: np.ndarray
    value: float
    iterations: int
    trace: list[float] = field(default_factory=list)
    swaps: int = 0  # exchanges made by the polish


def tpm(
    S: np.ndarray, k: int, n_starts: int = 5, max_iter: int = 200, rtol: float = 1e-10, swaps: int | None = 0
) -> Component:
    """The truncated power method from :func:`starts`; each end point debiased by :func:`leading`
    on its support; the best kept, then (``swaps``: None for k candidates, a number, or 0 for
    none) improved by :func:`polish`."""
    best: Component | None = None
    for x0 in starts(S, k, n_starts):
        v, _, seen = truncated_power(lambda u: S @ u, lambda u: truncate(u, k), x0, max_iter, rtol)
        lam, w = leading(S, filled(S, np.flatnonzero(v), k))
        if best is None or lam > best.value + 1e-12 * abs(lam):
            best = Component(w, lam, len(seen), seen)
    assert best is not None
    if swaps != 0:
        best.w, best.value, best.swaps = polish(S, best.w, best.value, swaps)
    return best


def htp(
    S: np.ndarray,
    k: int,
    n_starts: int = 5,
    max_iter: int = 100,
    step: float | None = None,
    swaps: int | None = 0,
) -> Component:
    """GraHTP-like: w <- leading(S, top_k(w + eta * 2 S w)) until the support repeats; eta =
    1 / (2 lambda_max(S)) unless given (the gradient of -w'Sw is -2Sw). From :func:`starts`; the
    best end point kept."""
    lam_max = max(leading(S, np.arange(S.shape[0]))[0], 1e-300)
    eta = step if step is not None else 1.0 / (2.0 * lam_max)
    best: Component | None = None
    for x0 in starts(S, k, n_starts):
        val, w = leading(S, np.flatnonzero(x0))
        seen = [val]
        C = np.flatnonzero(w)
        its = 0
        while its < max_iter:
            its += 1
            C_new = top_k(w + eta * 2.0 * (S @ w), k)
            if np.array_equal(C_new, C):
                break
            val_new, w_new = leading(S, C_new)
            seen.append(val_new)
            if val_new <= val:  # no gain: keep the better point
                break
            C, val, w = C_new, val_new, w_new
        if best is None or val > best.value + 1e-12 * abs(val):
            best = Component(w, val, its, seen)
    assert best is not None
    if swaps != 0:
        best.w, best.value, best.swaps = polish(S, best.w, best.value, swaps)
    return best


DEFLATIONS = ("schur", "projection")


def deflate(S: np.ndarray, w: np.ndarray, how: str = "schur") -> np.ndarray:
    """S after removing the component w (Mackey 2009). ``schur``: S - S w w' S / (w'Sw), the
    covariance of x given w'x: positive semidefinite, and it annihilates w and every component
    removed before (S_t w_s = 0 for s <= t), so each component's w'S_t w is the variance it adds,
    and their sum is :func:`adjusted_variance`. ``projection``: (I - ww') S (I - ww') (w a unit
    vector): positive semidefinite and annihilates w (the last component only)."""
    if how == "schur":
        Sw = S @ w
        d = float(w @ Sw)
        out = S - np.outer(Sw, Sw) / d if d > 0 else S.copy()
    elif how == "projection":
        u = w / max(np.linalg.norm(w), 1e-300)
        P = np.eye(len(w)) - np.outer(u, u)
        out = P @ S @ P
    else:
        raise ValueError(f"unknown deflation {how!r}; expected one of {DEFLATIONS}")
    return (out + out.T) / 2


def adjusted_variance(S: np.ndarray, W: np.ndarray) -> np.ndarray:
    """The adjusted variance of each component (columns of W): R_jj^2 where W'SW = R'R (Zou,
    Hastie & Tibshirani 2006: the scores XW = QR), i.e. the variance of component j's score
    after regressing out the scores of components 1..j-1 (0 for a component that adds none)."""
    G = W.T @ S @ W
    G = (G + G.T) / 2
    out = np.zeros(W.shape[1])
    for j in range(W.shape[1]):
        if j == 0:
            out[j] = G[0, 0]
            continue
        A, c = G[:j, :j], G[:j, j]
        sol = np.linalg.lstsq(A, c, rcond=1e-12)[0]
        out[j] = max(G[j, j] - float(c @ sol), 0.0)
    return out
