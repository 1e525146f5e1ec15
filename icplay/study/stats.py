"""The figures of a study report: pure functions over plain numbers, tested against
hand-computed and published values (tests/study/test_study_stats.py).

- ``wilson``: the Wilson score interval of a proportion (Wilson 1927). Unlike the normal
  approximation it stays inside [0, 1] and is not empty at 0 or n successes, which is what
  a small study (6 tasks an annotator) needs.
- ``fleiss_kappa``: agreement of many raters on a category per item, corrected for the
  agreement chance alone would give (Fleiss 1971). Items rated fewer than twice carry no
  agreement and are left out; an item may have any number of raters >= 2, its agreement is
  the share of agreeing rater pairs, and chance comes from the pooled category shares (with
  the same number of raters on every item this is Fleiss's formula exactly).
- ``krippendorff_alpha``: 1 - observed / expected disagreement over pairable values, with
  any number of coders and missing values (Krippendorff 2011, "Computing Krippendorff's
  Alpha-Reliability"); ``INTERVAL`` (squared difference) for rewards, ``NOMINAL`` for labels.

A figure that cannot be computed (no item with two raters, no variance at all) raises
``Undefined`` with the reason in words, which the report shows as "n/a (reason)".
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Callable, Hashable, Iterable, Sequence

Z95 = 1.959963984540054    # the standard normal's 97.5% quantile: a two-sided 95% interval


class Undefined(ValueError):
    """A statistic that has no value on these data; the message says why."""


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``successes`` out of ``n`` (95% by default)."""
    if n <= 0:
        raise Undefined("no episodes")
    if not 0 <= successes <= n:
        raise ValueError(f"{successes} successes out of {n}")
    p = successes / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    # at 0 and n the bound is exactly 0 or 1 (rounding would leave 1e-17 outside)
    return (0.0 if successes == 0 else max(0.0, centre - half), 1.0 if successes == n else min(1.0, centre + half))


def median(values: Iterable[float]) -> float:
    """The middle value (the mean of the two middle ones for an even count)."""
    ordered = sorted(values)
    if not ordered:
        raise Undefined("no values")
    mid = len(ordered) // 2
    return float(ordered[mid]) if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def quartiles(values: Iterable[float]) -> tuple[float, float, float]:
    """Lower quartile, median, upper quartile (the medians of the lower and upper halves,
    the middle value left out of both for an odd count: Tukey's hinges)."""
    ordered = sorted(values)
    if not ordered:
        raise Undefined("no values")
    half = len(ordered) // 2
    lower, upper = ordered[:half] or ordered, ordered[len(ordered) - half:] or ordered
    return median(lower), median(ordered), median(upper)


def fleiss_kappa(items: Iterable[Sequence[int]]) -> float:
    """Fleiss' kappa of a table: one row per item, the number of raters who chose each category.

    Rows with fewer than two ratings are left out (see the module docstring)."""
    rows = [list(row) for row in items if sum(row) >= 2]
    if not rows:
        raise Undefined("no task was rated by 2 or more annotators")
    observed = sum(map(_pair_agreement, rows)) / len(rows)
    chance = sum(p * p for p in _shares(rows))
    if chance >= 1.0 - 1e-12:
        raise Undefined("every rating is the same, so agreement beyond chance is not defined")
    return (observed - chance) / (1 - chance)


def _pair_agreement(row: Sequence[int]) -> float:
    """The share of an item's rater pairs that chose the same category."""
    n = sum(row)
    return sum(c * (c - 1) for c in row) / (n * (n - 1))


def _shares(rows: list[list[int]]) -> list[float]:
    """Each category's share of all the ratings."""
    totals = [sum(column) for column in zip(*rows)]
    return [t / sum(totals) for t in totals]


def category_counts(ratings: Iterable[Sequence[Hashable]], categories: Sequence[Hashable]) -> list[list[int]]:
    """Fleiss' table from each item's ratings: ``[[True, False, True], ...]`` -> counts per category."""
    return [[sum(r == c for r in item) for c in categories] for item in ratings]


Metric = Callable[[float, float], float]


def INTERVAL(a: float, b: float) -> float:
    return (a - b) ** 2


def NOMINAL(a: float, b: float) -> float:
    return 0.0 if a == b else 1.0


def krippendorff_alpha(units: Iterable[Sequence[float]], metric: Metric = INTERVAL) -> float:
    """Krippendorff's alpha over units, each the values its coders gave (missing ones simply
    absent). Units with fewer than two values are not pairable and are left out."""
    pairable = [list(u) for u in units if len(u) >= 2]
    if not pairable:
        raise Undefined("no task has values from 2 or more annotators")
    n = sum(len(u) for u in pairable)
    observed = sum(_disagreement(Counter(u), metric) / (len(u) - 1) for u in pairable) / n
    expected = _disagreement(Counter(v for u in pairable for v in u), metric) / (n * (n - 1))
    if expected == 0:
        raise Undefined("every value is the same, so there is no variance to agree on")
    return 1.0 - observed / expected


def _disagreement(counts: Counter, metric: Metric) -> float:
    """The summed difference of every ordered pair of values (by their counts)."""
    return sum(ca * cb * metric(a, b) for a, ca in counts.items() for b, cb in counts.items())
