"""The study report's statistics against published and hand-computed values."""

from __future__ import annotations

import pytest

from icplay.study.stats import (INTERVAL, NOMINAL, Undefined, category_counts, fleiss_kappa, krippendorff_alpha,
                                median, quartiles, wilson)

N = None


def units(coders: list[list]) -> list[list[float]]:
    """Reliability data as printed (one row per coder, N = missing) -> the values of each unit."""
    return [[row[i] for row in coders if row[i] is not None] for i in range(len(coders[0]))]


# Krippendorff's example of 3 coders, 15 units with missing values (as in Wikipedia's
# "Krippendorff's alpha" article and the krippendorff package's tests): nominal 0.691, interval 0.811.
THREE_CODERS = [[N, N, N, N, N, 3, 4, 1, 2, 1, 1, 3, 3, N, 3],
                [1, N, 2, 1, 3, 3, 4, 3, N, N, N, N, N, N, N],
                [N, N, 2, 1, 3, 4, 4, N, 2, 1, 1, 3, 3, N, 4]]
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability": 4 observers, 12 units,
# with missing values: nominal 0.743, interval 0.849.
FOUR_OBSERVERS = [[1, 2, 3, 3, 2, 1, 4, 1, 2, N, N, N],
                  [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, N, 3],
                  [N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, N],
                  [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, N]]


def test_krippendorff_alpha_on_the_published_examples():
    assert krippendorff_alpha(units(THREE_CODERS), INTERVAL) == pytest.approx(0.810845, abs=5e-7)
    assert krippendorff_alpha(units(THREE_CODERS), NOMINAL) == pytest.approx(0.691358, abs=5e-7)
    assert krippendorff_alpha(units(FOUR_OBSERVERS), INTERVAL) == pytest.approx(0.849, abs=5e-4)
    assert krippendorff_alpha(units(FOUR_OBSERVERS), NOMINAL) == pytest.approx(0.743, abs=5e-4)


def test_krippendorff_alpha_by_hand():
    # units (1, 1), (0, 1), (0, 0): n = 6 pairable values, 3 ones and 3 zeros.
    # observed: only unit 2 disagrees, its 2 ordered pairs each (1-0)^2 / (2-1) -> Do = 2/6.
    # expected: 3*3*2 ordered pairs of unequal values over n(n-1) = 30 -> De = 18/30.
    # alpha = 1 - (1/3) / (3/5) = 4/9
    assert krippendorff_alpha([[1, 1], [0, 1], [0, 0]]) == pytest.approx(4 / 9)
    # a unit with one value is not pairable: it changes nothing
    assert krippendorff_alpha([[1, 1], [0, 1], [0, 0], [0.5]]) == pytest.approx(4 / 9)
    assert krippendorff_alpha([[1, 1], [0, 0]]) == 1.0


def test_krippendorff_alpha_undefined():
    with pytest.raises(Undefined, match="2 or more"):
        krippendorff_alpha([[1], [0]])
    with pytest.raises(Undefined, match="same"):
        krippendorff_alpha([[1, 1], [1, 1]])


def test_fleiss_kappa_on_the_classic_table():
    # 10 subjects, 14 raters, 5 categories (Wikipedia's "Fleiss' kappa" worked example):
    # P-bar = 0.378, P-bar-e = 0.213, kappa = 0.210
    table = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
             [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    assert fleiss_kappa(table) == pytest.approx(0.20993, abs=5e-6)


def test_fleiss_kappa_by_hand():
    # three tasks, two annotators each: both solved, one of two, neither.
    # P_i = 1, 0, 1 -> P-bar = 2/3; shares 3/6 and 3/6 -> Pe = 1/2; kappa = (2/3 - 1/2) / (1/2) = 1/3
    assert fleiss_kappa([[2, 0], [1, 1], [0, 2]]) == pytest.approx(1 / 3)
    # raters vary: [3, 0] agrees fully (6/6), [1, 1] not at all, [1, 0] has one rater and is left out.
    # P-bar = 1/2; shares 4/5, 1/5 -> Pe = 0.68; kappa = (0.5 - 0.68) / 0.32 = -0.5625
    assert fleiss_kappa([[3, 0], [1, 1], [1, 0]]) == pytest.approx(-0.5625)
    assert category_counts([[True, True, False], [False]], [True, False]) == [[2, 1], [0, 1]]


def test_fleiss_kappa_undefined():
    with pytest.raises(Undefined, match="2 or more"):
        fleiss_kappa([[1, 0], [0, 1]])
    with pytest.raises(Undefined, match="same"):
        fleiss_kappa([[2, 0], [3, 0]])


@pytest.mark.parametrize("successes, n, low, high", [
    # Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table I (Wilson, no correction)
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718),
    # by hand: p = 1/2, z^2 = 3.8415; centre (0.5 + 0.19207) / 1.38415 = 0.5;
    # half 1.96 * sqrt(0.025 + 0.0096) / 1.38415 = 0.2634
    (5, 10, 0.2366, 0.7634),
    (20, 20, 0.8389, 1.0),
])
def test_wilson_interval(successes, n, low, high):
    got = wilson(successes, n)
    assert got == (pytest.approx(low, abs=5e-5), pytest.approx(high, abs=5e-5))


def test_wilson_bad_input():
    with pytest.raises(Undefined):
        wilson(0, 0)
    with pytest.raises(ValueError):
        wilson(3, 2)


def test_median_and_quartiles():
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 3, 2]) == 2.5
    assert quartiles([1, 2, 3, 4, 5]) == (1.5, 3, 4.5)
    assert quartiles([1, 2, 3, 4]) == (1.5, 2.5, 3.5)
    assert quartiles([7]) == (7, 7, 7)
    with pytest.raises(Undefined):
        median([])
