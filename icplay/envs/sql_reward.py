"""InterCode's SQL reward as pure functions: multiset IoU scaled by Kendall's tau-b.

The facts below are taken from InterCode's ``SqlEnv.get_reward`` so that rewards measured
in icplay are comparable with the published ones:

- Rows are compared as ``str(tuple(row))`` (InterCode stringifies the connector's tuples
  "to avoid comparator bugs"), so ``1`` and ``'1'`` differ and so do ``1`` and ``1.0``.
- IoU over multisets: sum of the per-row minimum counts over the sum of the per-row
  maximum counts; both results empty gives 1.0.
- If any row is shared, each side keeps its rows that belong to the multiset
  intersection, in its own order: a row shared ``k`` times keeps its first ``k``
  occurrences (DESIGN.md's "first occurrences"; the task brief's "first occurrence of
  each shared row" would be wrong for repeated rows, the reference vectors need ``k``).
  ``scipy.stats.kendalltau`` is then applied to those two equally long lists of strings,
  i.e. position ``i`` pairs the ``i``-th kept row of the agent with the ``i``-th kept row
  of the gold, and rows are ranked by string order. That is what InterCode computes, so
  we compute exactly that.
- When tau-b is defined the reward is ``round(tau * iou, 2)`` (negative for a reversed
  order); when it is undefined (a single kept row, or all kept rows identical on either
  side) InterCode keeps the IoU unrounded.

Non-result observations: InterCode scores 0 whenever the agent's last observation is not
a list of rows (an ``Error executing query: ...`` string, or None after a statement that
returned no result set). The environment decides that; :func:`non_result_reward` gives
the breakdown to report. A gold query that fails counts as returning no rows (InterCode
resets the gold observation to ``[]``), so the caller should pass ``[]`` for it.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any, Hashable, Iterable, Sequence

from icplay.sql.base import DIGEST_MARK, digest_token, row_key


@dataclass
class SqlReward:
    """The reward and the numbers that explain it."""

    reward: float
    iou: float
    kendall_tau_b: float | None
    shared: int          # rows in the multiset intersection (with multiplicity)
    agent_count: int
    gold_count: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def non_result_reward(agent_count: int = 0, gold_count: int = 0) -> SqlReward:
    """The breakdown for an agent observation that is not a result set: reward 0."""
    return SqlReward(
        reward=0.0, iou=0.0, kendall_tau_b=None, shared=0,
        agent_count=agent_count, gold_count=gold_count,
    )


def _kept_in_intersection(keys: Sequence[str], intersection: Counter[str]) -> list[str]:
    """The keys that belong to the multiset intersection, first occurrences first."""
    remaining = Counter(intersection)
    kept = []
    for key in keys:
        if remaining[key] > 0:
            remaining[key] -= 1
            kept.append(key)
    return kept


def sql_reward(agent_rows: Sequence[Iterable[Any]], gold_rows: Sequence[Iterable[Any]]) -> SqlReward:
    """InterCode's reward of the agent's result rows against the gold rows."""
    return sql_reward_keys([row_key(row) for row in agent_rows], [row_key(row) for row in gold_rows])


def resolve_digests(agent_keys: Sequence[str], gold_keys: Sequence[str]) -> list[str]:
    """The agent's keys with each ``digest_token`` (a row too big to keep, see
    icplay.sql.base.CappedRows) replaced by the gold key it stands for, if any.

    The reward needs a row's full text only where it is shared with the gold (its rank
    among the shared rows); a token matching no gold row stays a token, which counts in
    the union like the row it stands for. So the reward is the same as on full rows."""
    if not any(key.startswith(DIGEST_MARK) for key in agent_keys):
        return list(agent_keys)
    by_token = {digest_token(key): key for key in gold_keys}
    return [by_token.get(key, key) if key.startswith(DIGEST_MARK) else key for key in agent_keys]


def sql_reward_keys(agent_keys: Sequence[str], gold_keys: Sequence[str]) -> SqlReward:
    """InterCode's reward over row keys (``row_key``; the agent's may hold digest tokens)."""
    agent_keys = resolve_digests(agent_keys, gold_keys)
    gold_keys = list(gold_keys)
    agent_counts = Counter(agent_keys)
    gold_counts = Counter(gold_keys)
    intersection = agent_counts & gold_counts
    union = agent_counts | gold_counts
    shared = sum(intersection.values())
    counts = {"shared": shared, "agent_count": len(agent_keys), "gold_count": len(gold_keys)}

    if not union:
        return SqlReward(reward=1.0, iou=1.0, kendall_tau_b=None, **counts)

    iou = shared / sum(union.values())
    if not intersection:
        return SqlReward(reward=iou, iou=iou, kendall_tau_b=None, **counts)

    tau = kendall_tau_b(
        _kept_in_intersection(agent_keys, intersection),
        _kept_in_intersection(gold_keys, intersection),
    )
    reward = iou if tau is None else round(tau * iou, 2)
    return SqlReward(reward=reward, iou=iou, kendall_tau_b=tau, **counts)


# --- Kendall's tau-b --------------------------------------------------------------------


def kendall_tau_b(x: Sequence[Hashable], y: Sequence[Hashable]) -> float | None:
    """Kendall's tau-b of the pairs ``(x[i], y[i])``, as scipy.stats.kendalltau gives it.

    None where scipy returns NaN: empty input, or every pair tied in ``x`` or in ``y``.
    O(n log n): see :func:`kendall_tau_b_with_work`.
    """
    return kendall_tau_b_with_work(x, y)[0]


def kendall_tau_b_with_work(x: Sequence[Hashable], y: Sequence[Hashable]) -> tuple[float | None, int]:
    """Kendall's tau-b plus the number of element moves the inversion count made.

    The count lets tests check the O(n log n) bound by counting rather than timing.
    Values need only be hashable and mutually orderable (rows here are strings).

    Follows scipy's algorithm: rank both sides densely, order the pairs by (x, y), count
    the discordant pairs as the strict inversions of y in that order with a merge sort,
    and derive the concordant-minus-discordant count from the tie counts.
    """
    if len(x) != len(y):
        raise ValueError("x and y must have the same length")
    size = len(x)
    if size == 0:
        return None, 0

    x_ranks = _dense_ranks(x)
    y_ranks = _dense_ranks(y)
    pairs = sorted(zip(x_ranks, y_ranks))

    total_pairs = size * (size - 1) // 2
    x_ties = _tied_pairs(Counter(x_ranks).values())
    y_ties = _tied_pairs(Counter(y_ranks).values())
    joint_ties = _tied_pairs(Counter(pairs).values())
    if x_ties == total_pairs or y_ties == total_pairs:
        return None, 0

    discordant, work = _count_strict_inversions([y_rank for _, y_rank in pairs])
    concordant_minus_discordant = total_pairs - x_ties - y_ties + joint_ties - 2 * discordant
    # Same operation order as scipy, so the float result is bit-for-bit the same.
    tau = concordant_minus_discordant / math.sqrt(total_pairs - x_ties) / math.sqrt(total_pairs - y_ties)
    return min(1.0, max(-1.0, tau)), work


def _dense_ranks(values: Sequence[Any]) -> list[int]:
    """Rank 0 for the smallest distinct value, 1 for the next, and so on."""
    rank_of = {value: rank for rank, value in enumerate(sorted(set(values)))}
    return [rank_of[value] for value in values]


def _tied_pairs(group_sizes: Iterable[int]) -> int:
    """Number of pairs inside groups of equal values."""
    return sum(n * (n - 1) // 2 for n in group_sizes)


def _count_strict_inversions(values: list[int]) -> tuple[int, int]:
    """Pairs i < j with values[i] > values[j] (equal values are not inversions).

    Bottom-up merge sort; returns (inversions, element moves), the moves being at most
    n * ceil(log2 n).
    """
    size = len(values)
    source = list(values)
    target = [0] * size
    inversions = 0
    moves = 0
    width = 1
    while width < size:
        for start in range(0, size, 2 * width):
            middle = min(start + width, size)
            end = min(start + 2 * width, size)
            left, right, out = start, middle, start
            while left < middle and right < end:
                if source[right] < source[left]:
                    # Every element still waiting on the left is greater than this one.
                    inversions += middle - left
                    target[out] = source[right]
                    right += 1
                else:
                    target[out] = source[left]
                    left += 1
                out += 1
            if left < middle:
                target[out:end] = source[left:middle]
            elif right < end:
                target[out:end] = source[right:end]
            moves += end - start
        source, target = target, source
        width *= 2
    return inversions, moves
