"""``icplay rescore`` and the InterCode importers: synthetic files on SQLite, and the real
recorded gpt-3.5 run on MariaDB (the parity target)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from icplay.envs.sql import SqlEnv
from icplay.sql import make_sql_backend
from icplay.rescore.sql import read_results, rescore
from icplay.tasks.registry import load_tasks

NO_CODE = "No SQL code was found in your last response.\n\nYour response should be a SQL command."


def bundled_results(tmp_path):
    """A turn_history results file over bundled tasks 0 and 1 with InterCode's quirks."""
    tasks = load_tasks("sql")
    episodes = {
        "0": {"environment": "ic_sql", "task_id": 0, "query": tasks[0].query, "turn_history": {
            "actions": ["SELECT title FROM books", "USE bookshop;", tasks[0].gold],
            "observations": ["[...]", NO_CODE, "[...]"],
            "rewards": [0.03, 0, 1.0], "valid_action": [True, False, True]}},
        "1": {"environment": "ic_sql", "task_id": 1, "query": tasks[1].query, "turn_history": {
            "actions": ["SELECT COUNT(*) FROM customer", "SELECT COUNT(*) FROM customers"],
            "observations": ["Error executing query: no such table", "[(24,)]"],
            "rewards": [0.0, 1.0], "valid_action": [False, True]}},
    }
    path = tmp_path / "results.json"
    path.write_text(json.dumps(episodes))
    return path, tasks


def sqlite_env():
    return SqlEnv(make_sql_backend("sqlite"))


def test_turn_history_results_are_replayed(tmp_path):
    path, tasks = bundled_results(tmp_path)
    episodes = read_results(path)
    assert [e.task_index for e in episodes] == [0, 1]
    results, summary = rescore(episodes, tasks, sqlite_env)
    first = results["0"]
    assert [r.executed for r in first] == [True, False, True]
    assert first[1].reward == 0.0                      # never sent to the database
    assert first[2].reward == 1.0 and first[2].agrees
    assert results["1"][0].reward == 0.0
    # Turn 1 of episode 1 recorded 1.0 but the answer (24 customers) is not the gold's (4).
    assert results["1"][1].agrees is False
    assert summary.turns == 5 and summary.turns_agreeing == 3
    assert summary.episodes == 2 and summary.episodes_agreeing == 1
    assert summary.disagreeing_episodes == ["1"]


def test_per_episode_logs_are_replayed(tmp_path):
    tasks = load_tasks("sql")
    folder = tmp_path / "logs_ic_sql"
    folder.mkdir()
    log = {"environment": "ic_sql", "query_idx": 4, "query": tasks[4].query, "gold": tasks[4].gold,
           "reward": 1.0, "trajectory": [
               {"action": "SELECT status FROM orders", "observation": "('shipped',)('pending',)"},
               {"action": tasks[4].gold, "observation": "(1,)"}], "info": {}}
    (folder / "log_1.json").write_text(json.dumps(log))
    (folder / "log_2.json").write_text(json.dumps({**log, "reward": 0.0}))
    episodes = read_results(folder)
    assert len(episodes) == 2 and episodes[0].rewards == [None, 1.0]
    results, summary = rescore(episodes, tasks, sqlite_env)
    assert summary.turns_compared == 2 and summary.turns_agreeing == 1
    assert results[episodes[0].key][1].observation_agrees        # ''.join(map(str, rows)) form
    assert summary.episodes_agreeing == 1


def test_rescore_command_writes_one_line_per_turn(tmp_path):
    path, _ = bundled_results(tmp_path)
    out = tmp_path / "turns.jsonl"
    done = subprocess.run([sys.executable, "-m", "icplay.cli", "rescore", str(path), "--tasks", "sql",
                           "--sandbox", "sqlite", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "turns agreeing within 0.01: 3 / 5" in done.stdout
    assert "episodes whose solved status agrees: 1 / 2" in done.stdout
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 5
    assert {"episode", "turn", "action", "recorded_reward", "reward", "agrees"} <= set(lines[0])


def test_a_bad_results_file_is_one_sentence(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    done = subprocess.run([sys.executable, "-m", "icplay.cli", "rescore", str(bad), "--tasks", "sql",
                           "--sandbox", "sqlite"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr and "bad.json" in done.stderr


# --- InterCode's data ------------------------------------------------------------------------


@pytest.mark.shared
def test_spider_and_wikisql_load_on_sqlite(shared_intercode):
    """The MySQL dumps convert to SQLite (sqlglot) and every Spider gold runs there."""
    backend = make_sql_backend("sqlite")
    spider = load_tasks("spider")
    failed = []
    for task in spider:
        backend.reset(task.db, task.extra["databases"])
        if not backend.gold(task.gold).is_result:
            failed.append(task.id)
    assert len(spider) == 1034 and len(failed) <= 5, failed
    wikisql = load_tasks("wikisql")
    backend.reset(wikisql[0].db, wikisql[0].extra["databases"])
    assert backend.execute("SELECT COUNT(*) FROM table_1_10015132_11").rows == [(7,)]


@pytest.mark.mysql
@pytest.mark.shared
def test_wikisql_loads_on_mariadb(shared_intercode, request):
    from test_sql_support import new_backend

    backend = new_backend("mysql", request)
    wikisql = load_tasks("wikisql")
    backend.reset(wikisql[0].db, wikisql[0].extra["databases"])
    assert backend.execute("SELECT Position FROM table_1_10015132_11 WHERE Player = 'Martin Lewis'").rows \
        == [("Guard-Forward",)]


@pytest.mark.mysql
@pytest.mark.shared
@pytest.mark.slow
def test_recorded_gpt35_run_is_reproduced_on_mariadb(shared_intercode, docker_client):
    """The parity target: >= 7440 of 7499 turns and >= 1020 of 1034 solved statuses."""
    from test_sql_support import shared_mysql_backend

    results_file = shared_intercode / "results/sql/gpt-3.5/ic_sql_multiturn_gpt-3.5_10_turns.json"
    episodes = read_results(results_file)
    tasks = load_tasks("spider")
    backend = shared_mysql_backend(docker_client)

    class SharedEnv(SqlEnv):
        def close(self):   # the session's server outlives this test
            pass

    _, summary = rescore(episodes, tasks, lambda: SharedEnv(backend))
    assert summary.turns == 7499 and summary.episodes == 1034
    assert summary.turns_agreeing >= 7440, summary.lines()
    assert summary.episodes_agreeing >= 1020, summary.lines()
