"""Hostile SQL that runs too long: runaway joins, endless recursion, sleeps, CPU burners.

Each statement must end within the statement timeout (plus the backend's slack), leave
the episode usable, be saved as a turn, and not grow icplay's memory beyond a bound.
"""

from __future__ import annotations

import pytest
from sql_helpers import BACKENDS, RSS_BOUND_MB, SLACK, TIMEOUT, record, sql_episode

CROSS_JOIN = "SELECT COUNT(*) FROM reviews a, reviews b, reviews c, reviews d, reviews e"
ENDLESS = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT COUNT(*) FROM r"
SLOW = ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 10000000000) "
        "SELECT COUNT(*) FROM r")

# (case, action per backend, what must stop it per backend)
CASES = {
    "cartesian join": ({"sqlite": CROSS_JOIN, "mysql": CROSS_JOIN}, {"sqlite": "timeout", "mysql": "timeout"}),
    "endless recursion": ({"sqlite": ENDLESS, "mysql": ENDLESS},
                          {"sqlite": "timeout", "mysql": "max_recursive_iterations (1000)"}),
    "long recursion": ({"sqlite": SLOW, "mysql": SLOW}, {"sqlite": "timeout", "mysql": "max_recursive_iterations (1000)"}),
    "sleep": ({"sqlite": SLOW, "mysql": "SELECT SLEEP(100)"}, {"sqlite": "timeout", "mysql": "timeout"}),
    "cpu burner": ({"sqlite": SLOW, "mysql": "SELECT BENCHMARK(10000000000, MD5('x'))"},
                   {"sqlite": "timeout", "mysql": "timeout"}),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("kind", BACKENDS)
def test_a_long_statement_is_stopped_at_its_timeout(kind, case, request, tmp_path):
    actions, limits = CASES[case]
    ep = sql_episode(kind, request, tmp_path)
    turn, seconds, rss = ep.run(actions[kind])
    assert seconds < TIMEOUT + SLACK[kind], seconds
    if limits[kind] == "timeout":
        assert turn.info["timed_out"], turn.observation
    ep.assert_usable()
    ep.assert_saved()
    assert rss < RSS_BOUND_MB
    record(kind, case, limits[kind], seconds, True, rss)


@pytest.mark.mysql
@pytest.mark.docker
def test_mariadb_lifted_limits_still_end_at_the_timeout(request, tmp_path):
    """The agent may raise its session's limits; the server's global timeout and icplay's
    watchdog (KILL QUERY) still end the statement."""
    ep = sql_episode("mysql", request, tmp_path)
    for setting in ("SET SESSION max_statement_time = 0", "SET SESSION max_recursive_iterations = 4294967295"):
        assert ep.run(setting)[0].exit_code == 0
    for case, action in (("sleep, timeout lifted", "SELECT SLEEP(100)"), ("endless recursion, cap lifted", ENDLESS)):
        turn, seconds, rss = ep.run(action)
        assert turn.exit_code == 1 and seconds < TIMEOUT + SLACK["mysql"], (seconds, turn.observation)
        record("mysql", case, "watchdog KILL QUERY", seconds, True, rss)
        assert rss < RSS_BOUND_MB
    ep.assert_usable()
    ep.assert_saved()
