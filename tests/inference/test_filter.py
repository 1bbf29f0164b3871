"""The knockoff filter's arithmetic against hand computations: the knockoff and knockoff+
thresholds, the path, support and coefficient statistics, e-values and e-BH."""

from __future__ import annotations

import numpy as np
import pytest

from sparsemodel.inference import filter as F

# W sorted by |W|: 9, 8, 7, -6, 5, 4, -3, 2, -1, 0, 0
W = np.array([9.0, -3.0, 8.0, 0.0, 7.0, -6.0, 5.0, 4.0, 2.0, -1.0, 0.0])


def test_the_knockoff_plus_threshold_by_hand():
    # positives 9, 8, 7, 5, 4, 2; negatives -6, -3, -1. (1 + #{W <= -t}) / #{W >= t} at each t:
    #   t=1: (1+3)/6 = 0.667   t=2: (1+2)/6 = 0.5   t=3: (1+2)/5 = 0.6   t=4: (1+1)/5 = 0.4
    #   t=5: (1+1)/4 = 0.5     t=6: (1+1)/3 = 0.667 t=7: 1/3 = 0.333     t=8: 1/2   t=9: 1/1
    assert F.threshold(W, 0.34) == 7.0
    assert F.threshold(W, 0.45) == 4.0
    assert F.threshold(W, 0.5) == 2.0
    assert F.threshold(W, 0.30) == np.inf  # no t reaches 0.3: nothing selected
    assert list(F.select(W, F.threshold(W, 0.34))) == [0, 2, 4]
    assert list(F.select(W, F.threshold(W, 0.45))) == [0, 2, 4, 6, 7]
    assert len(F.select(W, np.inf)) == 0


def test_the_knockoff_threshold_without_the_offset_by_hand():
    #   t=1: 3/6   t=2: 2/6 = 0.333   t=3: 2/5   t=4: 1/5 = 0.2   t=5: 1/4   t=6: 1/3   t=7: 0/3
    assert F.threshold(W, 0.34, offset=0) == 2.0
    assert F.threshold(W, 0.2, offset=0) == 4.0
    assert F.threshold(W, 0.01, offset=0) == 7.0


def test_thresholds_agree_with_knockpy():
    kf = pytest.importorskip("knockpy.knockoff_stats")
    rng = np.random.default_rng(0)
    for _ in range(20):
        # no ties in |W|: knockpy counts a tie group by its sort order, the definition counts all of it
        w = rng.standard_normal(60) * 3 + 1.0
        for q in (0.05, 0.1, 0.2, 0.4):
            theirs = kf.data_dependent_threshhold(w, fdr=q, offset=1)
            assert F.threshold(w, q) == theirs


def test_the_support_statistic_by_hand():
    # rows: k = 1..4. unit 0 in every support, its knockoff at k = 3, 4; unit 1 never, its
    # knockoff at k = 2 only; unit 2 and its knockoff both at k = 4; unit 3: never, nor its
    # knockoff; unit 4 at k = 2 only (it enters and leaves)
    real = np.array([[1, 0, 0, 0, 0], [1, 0, 0, 0, 1], [1, 0, 0, 0, 0], [1, 0, 1, 0, 0]], dtype=bool)
    fake = np.array([[0, 0, 0, 0, 0], [0, 1, 0, 0, 0], [1, 0, 0, 0, 0], [1, 0, 1, 0, 0]], dtype=bool)
    # Z = supports holding the unit: unit 0: 4 vs 2 -> +4; unit 1: 0 vs 1 -> -1; unit 2: 1 vs 1 -> 0;
    # unit 3: 0; unit 4: 1 vs 0 -> +1
    assert list(F.support_statistic(real, fake)) == [4.0, -1.0, 0.0, 0.0, 1.0]
    # antisymmetric: swapping each unit with its knockoff flips every sign
    assert list(F.support_statistic(fake, real)) == [-4.0, 1.0, 0.0, 0.0, -1.0]


def test_the_path_statistic_by_hand():
    # |b(k)| of two units and their knockoffs at k = 1, 2, 3
    real = np.array([[1.0, 0.0], [0.8, -0.5], [0.7, -0.4]])
    fake = np.array([[0.0, 0.0], [0.0, 0.0], [0.2, 0.6]])
    # unit 0: 2.5 - 0.2 = 2.3; unit 1: 0.9 - 0.6 = 0.3
    assert np.allclose(F.path_statistic(real, fake), [2.3, 0.3])
    assert np.allclose(F.path_statistic(fake, real), [-2.3, -0.3])


def test_the_coefficient_statistic_by_hand():
    assert list(F.coef_statistic(np.array([2.0, 0.0, -1.0]), np.array([0.5, 1.5, 1.0]))) == [1.5, -1.5, 0.0]


def test_e_values_and_e_bh_by_hand():
    # at alpha 0.45 the threshold is 4 (above): 5 selected, #{W <= -4} = 1, p = 11:
    # e = 11 / (1 + 1) = 5.5 for the selected, 0 for the others
    e, t = F.evalues(W, 0.45)
    assert t == 4.0
    assert list(e) == [5.5 if j in (0, 2, 4, 6, 7) else 0.0 for j in range(11)]
    # e-BH at q: the k largest with e_(k) >= p / (q k). q = 0.5: 11 / (0.5 k) <= 5.5 iff k >= 4: k^ = 5
    assert list(F.ebh(e, 0.5)) == [0, 2, 4, 6, 7]
    # q = 0.3: 11 / (0.3 k) <= 5.5 iff k >= 6.67, but only 5 are positive: none
    assert len(F.ebh(e, 0.3)) == 0
    # no threshold: every e-value is 0
    e0, t0 = F.evalues(W, 0.1)
    assert t0 == np.inf and not e0.any()


def test_e_bh_takes_the_largest_qualifying_rank():
    e = np.array([10.0, 0.0, 4.0, 3.0, 0.5])
    # p = 5, q = 0.5: thresholds p / (q k) = 10, 5, 3.33, 2.5, 2; sorted e = 10, 4, 3, 0.5, 0
    # k=1: 10 >= 10 yes; k=2: 4 >= 5 no; k=3: 3 >= 3.33 no; k=4: 0.5 >= 2.5 no -> k^ = 1
    assert list(F.ebh(e, 0.5)) == [0]
    # q = 0.7: 7.14, 3.57, 2.38, 1.79, 1.43: k=1 yes, k=2 (4) yes, k=3 (3) yes, k=4 (0.5) no -> 3
    assert list(F.ebh(e, 0.7)) == [0, 2, 3]
