"""Hostile SQL with huge results: 100k+ rows, endless row streams, huge values. The row
cap (100,000 rows) and the observation's byte cap (1 MiB, the rest counted) hold, the
reward still sees every row up to the cap, icplay's memory stays bounded, the episode
stays usable and the turn is saved (with the first rows of its table)."""

from __future__ import annotations

import pytest
from sql_helpers import BACKENDS, RSS_BOUND_MB, SLACK, TIMEOUT, record, sql_episode

from icplay.sql.base import OUTPUT_CAP
from icplay.store import SAVED_ROWS, load_trajectory

HUGE = "SELECT a.review_id, b.review_id, c.review_id FROM reviews a, reviews b, reviews c"       # 343,000 rows
STREAM = ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 100000000) "
          "SELECT n FROM r")                                                                     # 10^8 rows


@pytest.mark.parametrize("case", ["343k rows", "endless rows"])
@pytest.mark.parametrize("kind", BACKENDS)
def test_a_huge_result_is_cut_at_the_row_cap_with_bounded_memory(kind, case, request, tmp_path):
    ep = sql_episode(kind, request, tmp_path)
    action = HUGE if case == "343k rows" else STREAM
    if kind == "mysql" and case == "endless rows":
        ep.run("SET SESSION max_recursive_iterations = 4294967295")
    turn, seconds, rss = ep.run(action)
    limit = "row cap 100k" if turn.info.get("truncated") else ("timeout" if turn.info.get("timed_out") else "none")
    assert limit != "none", turn.observation[-300:]
    if limit == "row cap 100k":
        assert len(turn.info["rows"]) == 100_000            # small rows: all kept for tables (4 MiB)
        assert len(ep.env.last.keys()) == 100_000          # every row up to the cap reaches the reward
        assert len(turn.observation.encode()) <= OUTPUT_CAP  # ... but only 1 MiB of them the observation
        cut = any(n.startswith("output truncated") for n in turn.info["notes"])
        assert cut == (case == "343k rows")                 # 100k triples pass 1 MiB, 100k numbers do not
        assert any(n.startswith("result truncated") for n in turn.info["notes"])
    assert rss < RSS_BOUND_MB, rss
    ep.assert_usable()
    ep.assert_saved()
    saved = load_trajectory(ep.store.path_for(ep.episode.trajectory)).turns[-2]
    if limit == "row cap 100k":
        assert len(saved.info["rows"]) == SAVED_ROWS and saved.info["rows_saved"] == SAVED_ROWS
    record(kind, f"huge result ({case})", limit, seconds, True, rss)


@pytest.mark.parametrize("kind", BACKENDS)
def test_huge_values_are_refused_or_capped(kind, request, tmp_path):
    ep = sql_episode(kind, request, tmp_path)
    action = {"sqlite": "SELECT zeroblob(1000000000)",
              "mysql": "SELECT REPEAT('x', 1000000000)"}[kind]
    turn, seconds, rss = ep.run(action)
    assert turn.exit_code == 1 or turn.observation == "[(None,)]", turn.observation[:200]
    assert seconds < TIMEOUT + SLACK[kind] and rss < RSS_BOUND_MB
    ep.assert_usable()
    ep.assert_saved()
    record(kind, "huge value (1 GB)", "value size cap", seconds, True, rss)
