"""Reward-hack and process-reach probes for SQL, on SQLite and on MariaDB where each applies.

Each probe plays as a solver would, through a real Episode saved by a real TrajectoryStore,
and asserts what must hold: a reward below 1.0 or a strict verdict of not solved, or the
refusal (one sentence the solver can read); then the session is still usable and every
turn is saved. icplay's own memory is measured around the hostile turns (peak RSS, reset
before the turn); the SQLite worker's with its VmHWM.

``ICPLAY_MATRIX=<file>`` appends one JSON line per probe (sql_helpers.record) for the
reward-integrity matrix of docs/security.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tests/hostile: sql_helpers

from sql_helpers import BACKENDS, record, sql_episode  # noqa: E402

from icplay.sql.base import OUTPUT_CAP, is_read_only, leading_verb, mysql_code  # noqa: E402
from icplay.store import load_trajectory  # noqa: E402
from icplay.tasks.model import Task  # noqa: E402
from test_sql_support import BUNDLED  # noqa: E402

MB = 1024 * 1024
ICPLAY_BOUND_MB = 64        # icplay's own growth for one hostile turn: a few output caps and noise
# On MariaDB icplay reads the rows itself, one at a time (each at most max_allowed_packet,
# 16 MiB): the connector's buffers, the value and its text are a few copies of one row.
ROW_BOUND_MB = {"sqlite": ICPLAY_BOUND_MB, "mysql": 128}
TRAJECTORY_BOUND = 4 * MB   # what one hostile turn may add to the trajectory file
FIVE_ROWS = "(SELECT 1 AS k UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5) AS five"


def worker_peak_mb(backend) -> float:
    """The SQLite worker process's peak resident memory (MB)."""
    pid = backend._worker.proc.pid
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def task_with_gold(gold: str, task_id: str = "probe") -> Task:
    return Task(id=task_id, set="probe", env="sql", query="q", gold=gold, db="bookshop",
                extra={"databases": str(BUNDLED)})


def episode_on(kind, request, tmp_path, gold: str, timeout: float = 10.0):
    """An episode of a task with this gold (the helpers' episodes all have SELECT 1)."""
    from icplay.episode import Episode
    from icplay.store import TrajectoryStore

    ep = sql_episode(kind, request, tmp_path, timeout=timeout)
    store = TrajectoryStore(tmp_path / "trajectories")
    ep.episode = Episode(ep.env, task_with_gold(gold), save=store.save)
    ep.store = store
    return ep


def trajectory_bytes(ep) -> int:
    return ep.store.path_for(ep.episode.trajectory).stat().st_size


# --- SQLite: nothing reaches the process ------------------------------------------------------

PROCESS_PRAGMAS = {
    "hard_heap_limit": "PRAGMA hard_heap_limit = 1",
    "soft_heap_limit": "PRAGMA soft_heap_limit = 1",
    "temp_store_directory": "PRAGMA temp_store_directory = '/etc'",
    "data_store_directory": "PRAGMA data_store_directory = '/etc'",
    "temp_store to files": "PRAGMA temp_store = FILE",
    "mmap_size": "PRAGMA mmap_size = 268435456",
    "threads": "PRAGMA threads = 8",
    "max_page_count": "PRAGMA max_page_count = 2147483646",
    "temp.max_page_count": "PRAGMA temp.max_page_count = 2147483646",
    "writable_schema": "PRAGMA writable_schema = ON",
    "journal_mode": "PRAGMA journal_mode = OFF",
    "unknown pragma": "PRAGMA icplay_made_up = 1",
    "load_extension": "SELECT load_extension('/lib/x86_64-linux-gnu/libc.so.6')",
    "fts3_tokenizer pointer": "SELECT fts3_tokenizer('simple')",
}


def test_sqlite_process_wide_pragmas_and_functions_are_refused_in_a_sentence(request, tmp_path):
    import sqlite3

    icplay_limit = sqlite3.connect(":memory:").execute("PRAGMA hard_heap_limit").fetchone()
    ep = sql_episode("sqlite", request, tmp_path)
    for name, action in PROCESS_PRAGMAS.items():
        turn, seconds, _ = ep.run(action)
        assert turn.exit_code == 1, (name, turn.observation)
        sentence = turn.observation.removeprefix("Error executing query: ")
        assert "refused" in sentence and sentence.count(". ") == 0 and "not authorized" not in sentence, sentence
        record("sqlite", f"process reach: {name}", "refused", seconds, True, 0.0)
    # The pragma forms that only read are fine, and the limits really are icplay's.
    assert ep.run("PRAGMA table_info(books)")[0].exit_code == 0
    assert ep.run("PRAGMA max_page_count")[0].observation == "[(65536,)]"
    assert sqlite3.connect(":memory:").execute("PRAGMA hard_heap_limit").fetchone() == icplay_limit
    ep.assert_usable()
    ep.assert_saved()
    # A later episode of the same backend, and another backend of this process, work.
    ep.env.reset(task_with_gold("SELECT COUNT(*) FROM books"))
    assert ep.env.gold.rows == [(36,)] and ep.env.step("SELECT COUNT(*) FROM books").observation == "[(36,)]"


def test_sqlite_attach_and_other_episodes_databases_are_out_of_reach(request, tmp_path):
    """Episode A keeps a secret; episode B (another backend of the same process) cannot
    reach it, nor any file: ATTACH of a file, of the template cache, of shared-cache and
    named in-memory databases are refused, and plain names only see B's own copy."""
    a = sql_episode("sqlite", request, tmp_path / "a")
    assert a.run("CREATE TABLE secret AS SELECT 'gold-ish' AS v")[0].exit_code == 0
    b = sql_episode("sqlite", request, tmp_path / "b")
    cache = next(Path(b.env.backend.cache).rglob("bookshop.sqlite"))
    attempts = {
        "ATTACH a host file": f"ATTACH DATABASE '{tmp_path / 'host.db'}' AS host",
        "ATTACH the template cache": f"ATTACH DATABASE '{cache}' AS tpl",
        "ATTACH shared-cache memory": "ATTACH DATABASE 'file::memory:?cache=shared' AS shared",
        "ATTACH a named memdb": "ATTACH DATABASE 'file:/bookshop?vfs=memdb' AS named",
        "VACUUM INTO": f"VACUUM INTO '{tmp_path / 'copy.db'}'",
    }
    for name, action in attempts.items():
        turn, seconds, _ = b.run(action)
        assert turn.exit_code == 1 and "refused" in turn.observation, (name, turn.observation)
        record("sqlite", f"other databases: {name}", "refused", seconds, True, 0.0)
    assert not (tmp_path / "host.db").exists() and not (tmp_path / "copy.db").exists()
    turn = b.run("SELECT v FROM secret")[0]
    assert turn.exit_code == 1 and "no such table" in turn.observation
    record("sqlite", "other episodes' databases: plain name", "own copy only", 0.0, True, 0.0)
    b.assert_usable()
    b.assert_saved()
    a.assert_saved()


def test_sqlite_temp_table_bomb_is_bounded_in_bytes(request, tmp_path):
    ep = sql_episode("sqlite", request, tmp_path, timeout=10.0)
    bomb = ("CREATE TEMP TABLE t{n} AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r "
            "WHERE n < 400000) SELECT n, randomblob(1000) AS b FROM r")
    for n in range(3):   # 3 x 400 MB asked for; the episode has 256 MiB in all
        turn, seconds, grown = ep.run(bomb.format(n=n))
        assert grown < ICPLAY_BOUND_MB, grown
        assert turn.exit_code == 1 and "out of memory" in turn.observation, turn.observation
    assert worker_peak_mb(ep.env.backend) < 700      # 256 MiB of SQLite plus Python's share
    record("sqlite", "temp-table bomb (3 x 400 MB)", "heap limit 256 MiB (worker)", seconds, True, grown)
    ep.assert_usable()
    ep.assert_saved()


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_printf_bomb_keeps_icplay_and_the_trajectory_small(kind, request, tmp_path):
    """Five rows of a 60 MB (SQLite) or 12 MB (MariaDB, under max_allowed_packet) value:
    1 MiB of observation kept, the rest counted; icplay grows by a few MB; the turn
    writes a few MB to the trajectory."""
    ep = sql_episode(kind, request, tmp_path, timeout=60.0)   # the pure-Python connector is slow under load
    action = {"sqlite": f"SELECT printf('%.*c', 60000000, 'x') FROM {FIVE_ROWS}",
              "mysql": f"SELECT REPEAT('x', 12000000) FROM {FIVE_ROWS}"}[kind]
    rows = 5
    before = trajectory_bytes(ep) if ep.episode.trajectory.turns else 0
    turn, seconds, grown = ep.run(action)
    assert turn.exit_code == 0, turn.observation[:300]
    assert len(turn.observation.encode()) <= OUTPUT_CAP
    assert any(n.startswith("output truncated") for n in turn.info["notes"]), turn.info["notes"]
    assert grown < ROW_BOUND_MB[kind], grown
    assert trajectory_bytes(ep) - before < TRAJECTORY_BOUND
    # The reward still saw every row (as digests), so a gold of those rows would match them.
    assert len(ep.env.last.keys()) == rows
    record(kind, "printf bomb (5 huge rows)", "observation 1 MiB, rest counted", seconds, True, grown)
    ep.assert_usable()
    ep.assert_saved()


@pytest.mark.parametrize("kind", BACKENDS)
def test_huge_rows_past_the_cap_are_still_scored_exactly(kind, request, tmp_path):
    """Not a hack but its guard: the byte cap must not change the reward. The same big
    answer as the gold scores 1.0; one row different scores below."""
    gold = f"SELECT k, REPEAT('y', 1000000) FROM {FIVE_ROWS} ORDER BY k"
    if kind == "sqlite":
        gold = f"SELECT k, printf('%.*c', 1000000, 'y') FROM {FIVE_ROWS} ORDER BY k"
    ep = episode_on(kind, request, tmp_path, gold)
    ep.run(gold)
    assert ep.env.last.dropped_bytes > 0 and ep.env.last.row_keys is not None   # 5 MB: past both caps
    assert len(ep.env.last.rows) < 5
    assert ep.env.score().reward == 1.0
    ep.run(gold.replace("ORDER BY k", "WHERE k < 5 UNION ALL SELECT 9, 'z' ORDER BY 1"))
    assert ep.env.score().reward < 1.0
    ep.assert_saved()


def test_sqlite_memory_errors_stay_in_their_statement_and_episode(request, tmp_path):
    """A statement that runs the worker out of memory (SQLite's heap or Python's) gets an
    error; the same session, a later episode and another episode of this process go on."""
    a = sql_episode("sqlite", request, tmp_path / "a", timeout=30.0)
    b = sql_episode("sqlite", request, tmp_path / "b")
    # SQLite heap: a 600 MB sort, past the 256 MiB heap limit. Python's share: 200 MB of
    # values fit SQLite's heap, but their text (4 bytes per blob byte, 800 MB) with the
    # values themselves needs 1.2 GB, past the worker's 1 GiB address space.
    bombs = {"SQLite heap": "SELECT COUNT(*) FROM (WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r "
                            "WHERE n < 3000000) SELECT n, randomblob(200) FROM r ORDER BY random())",
             "Python's share": "SELECT randomblob(50000000), randomblob(50000000), randomblob(50000000), "
                               "randomblob(50000000)"}
    for name, action in bombs.items():
        turn, seconds, grown = a.run(action)
        assert turn.exit_code == 1 and "out of memory" in turn.observation, (name, turn.observation[:300])
        assert grown < ICPLAY_BOUND_MB
        record("sqlite", f"MemoryError ({name})", "the statement's error", seconds, True, grown)
        assert b.run("SELECT COUNT(*) FROM authors")[0].observation == "[(12,)]"
    a.assert_usable()
    a.assert_saved()
    b.assert_saved()
    a.env.reset(task_with_gold("SELECT COUNT(*) FROM authors"))
    assert a.env.gold.rows == [(12,)]


def test_sqlite_a_killed_worker_is_the_statements_error_and_the_episode_goes_on(request, tmp_path):
    """Whatever ends the worker (the kernel's OOM killer, a crash), the statement's
    observation says so, a new worker runs on a pristine copy, and the turn is saved."""
    import signal
    import threading

    ep = sql_episode("sqlite", request, tmp_path, timeout=10.0)
    ep.run("CREATE TABLE mine (x INT)")
    worker = ep.env.backend._worker.proc
    threading.Timer(0.5, lambda: os.kill(worker.pid, signal.SIGKILL)).start()
    turn, seconds, _ = ep.run("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT COUNT(*) FROM r")
    assert turn.exit_code == 1 and "killed" in turn.observation and "pristine" in turn.observation, turn.observation
    assert ep.run("SELECT * FROM mine")[0].exit_code == 1      # the pristine copy has no such table
    record("sqlite", "worker killed mid-statement", "new worker, pristine copy", seconds, True, 0.0)
    ep.assert_usable()
    ep.assert_saved()


def test_sqlite_icplay_stays_bounded_under_a_bomb_measured_from_outside(tmp_path):
    """The same bombs in a fresh interpreter, measured by its own VmHWM: icplay's peak
    stays far below what the bombs ask for (the old in-process SQLite took 4.7 GB)."""
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        from icplay.sql.sqlite import SqliteBackend
        from test_sql_support import BUNDLED
        b = SqliteBackend(timeout=20)
        b.reset("bookshop", BUNDLED)
        for n in range(3):
            b.execute("CREATE TEMP TABLE t%d AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r "
                      "WHERE n < 400000) SELECT n, randomblob(1000) AS b FROM r" % n)
        r = b.execute("SELECT printf('%.*c', 60000000, 'x') FROM {FIVE_ROWS}")
        assert r.error is None and r.dropped_bytes > 250_000_000, r.error
        b.close()
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                print(int(line.split()[1]) // 1024)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    peak_mb = int(done.stdout.split()[-1])
    assert peak_mb < 200, peak_mb
    record("sqlite", "temp tables + printf bomb, icplay's own peak", "worker process", 0.0, True, peak_mb)


# --- MariaDB: executable comments are code --------------------------------------------------


EXECUTABLE = {
    "/*! */ verb": ("/*!DROP TABLE books */", False),
    "/*M! */ verb": ("/*M!DROP TABLE books */", False),
    "/*M!100000 */ INTO": ("SELECT 1 /*M!100000 INTO @planted */", False),
    "/*!50000 */ INTO OUTFILE": ("SELECT * FROM books /*!50000 INTO OUTFILE '/tmp/x' */", False),
    "/*M! */ second statement": ("SELECT 1 /*M!; DELETE FROM books */", False),
    "comment inside": ("SELECT 1 /*M! /* */ INTO @x */", False),
    "unterminated": ("SELECT 1 /*M! INTO @x", False),
    "plain comment": ("SELECT /* INTO @x */ 1", True),
    "string with markers": ("SELECT '/*M! INTO @x */'", False),     # 'into' in a string: assumed a write
    "-- needs a space": ("SELECT 1 --1", True),
}


def test_executable_comments_are_read_as_the_server_reads_them():
    for name, (sql, read_only) in EXECUTABLE.items():
        assert is_read_only(sql) is read_only, name
    assert leading_verb("/*M!100502 DELETE FROM t */") == "DELETE"
    assert mysql_code("SELECT 1 /*M!100000 , 2 */") .split() == ["SELECT", "1", ",", "2"]
    assert mysql_code("SELECT 1 /* x") is None


@pytest.mark.mysql
@pytest.mark.docker
def test_mariadb_hidden_writes_in_executable_comments_never_reach_a_later_episode(request, tmp_path):
    ep = sql_episode("mysql", request, tmp_path)
    actions = ["/*M!UPDATE books SET title = 'planted' */", "/*!DELETE FROM reviews */",
               "SELECT 1 /*M!100000 INTO @planted */", "COMMIT"]
    for action in actions:
        turn, seconds, _ = ep.run(action)
        record("mysql", f"executable comment: {action[:30]}", "read as code (restored)", seconds, True, 0.0)
    assert ep.env.backend._dirty
    ep.assert_saved()
    ep.env.reset(task_with_gold("SELECT COUNT(*) FROM books WHERE title = 'planted'"))
    assert ep.env.gold.rows == [(0,)]
    assert ep.env.step("SELECT COUNT(*) FROM reviews").observation != "[(0,)]"
    assert ep.env.step("SELECT @planted").observation == "[(None,)]"


# --- strict verdict: a gold that cannot tell --------------------------------------------------


@pytest.mark.parametrize("gold", ["SELECT name FROM authors WHERE author_id < 0", "SELECT nope FROM nowhere"],
                         ids=["gold returns no rows", "gold fails"])
@pytest.mark.parametrize("kind", BACKENDS)
def test_a_constant_empty_answer_is_never_strictly_solved(kind, gold, request, tmp_path):
    ep = episode_on(kind, request, tmp_path, gold)
    turn, seconds, _ = ep.run("SELECT name FROM authors WHERE 1 = 0")
    result = ep.episode.submit()
    assert result.reward == 1.0                       # InterCode's reward, kept for parity
    assert result.strict["solved"] is False
    assert any("cannot be strictly solved" in r for r in result.strict["reasons"])
    assert result.breakdown["gold_discriminative"] is False
    assert ep.episode.trajectory.strictly_solved is False
    saved = load_trajectory(ep.store.path_for(ep.episode.trajectory))
    assert saved.strict["solved"] is False and [t.action for t in saved.turns] == [t.action for t in ep.episode.trajectory.turns]
    record(kind, f"empty answer, {'failing' if 'nope' in gold else 'empty'} gold", "strict: not solved", seconds,
           True, 0.0)


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_real_answer_on_a_discriminative_gold_is_strictly_solved(kind, request, tmp_path):
    """The guard's other side: the strict verdict does not refuse a real solution."""
    gold = "SELECT name FROM authors WHERE author_id <= 3 ORDER BY author_id"
    ep = episode_on(kind, request, tmp_path, gold)
    ep.run(gold)
    result = ep.episode.submit()
    assert result.reward == 1.0 and result.strict == {"solved": True, "reasons": []}


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_row_forged_as_a_digest_token_matches_nothing(kind, request, tmp_path):
    """The reward compares rows past the byte cap by digest tokens; a solver who returns
    the token of the gold's row as a value gets a different key (keys are tuples' text)."""
    from icplay.sql.base import digest_token, row_key

    gold = "SELECT name FROM authors WHERE author_id = 1"
    ep = episode_on(kind, request, tmp_path, gold)
    token = digest_token(row_key(ep.env.gold.rows[0]))
    literal = token.replace("\x00", "")
    turn, seconds, _ = ep.run(f"SELECT CONCAT(CHAR(0), '{literal}')" if kind == "mysql"
                              else f"SELECT char(0) || '{literal}'")
    assert ep.env.score().reward < 1.0
    record(kind, "row forged as a digest token", "keys are row text", seconds, True, 0.0)
    ep.assert_saved()


# --- MariaDB: the gold's and other episodes' databases ---------------------------------------


@pytest.mark.mysql
@pytest.mark.docker
def test_mariadb_the_scratch_database_and_admin_sessions_are_out_of_reach(request, tmp_path):
    ep = sql_episode("mysql", request, tmp_path)
    checks = {
        "scratch copy of the gold": ("SELECT * FROM icplay_scratch.books", lambda t: t.exit_code == 1),
        "process list (admin's queries)": ("SELECT USER, INFO FROM information_schema.PROCESSLIST",
                                            lambda t: "root" not in t.observation),
        "databases listed": ("SHOW DATABASES", lambda t: "icplay_scratch" not in t.observation
                             and "mysql'" not in t.observation),
    }
    for name, (action, held) in checks.items():
        turn, seconds, _ = ep.run(action)
        assert held(turn), (name, turn.observation[:300])
        record("mysql", f"other databases: {name}", "privileges", seconds, True, 0.0)
    ep.assert_usable()
    ep.assert_saved()


@pytest.mark.mysql
@pytest.mark.docker
def test_mariadb_temp_table_bomb_stays_in_the_server(request, tmp_path):
    ep = sql_episode("mysql", request, tmp_path, timeout=5.0)
    bomb = ("CREATE TEMPORARY TABLE t{n} ENGINE=MEMORY AS SELECT a.review_id AS x, REPEAT('z', 200) AS pad "
            "FROM reviews a, reviews b, reviews c")
    for n in range(3):
        turn, seconds, grown = ep.run(bomb.format(n=n))
        assert grown < ICPLAY_BOUND_MB
    record("mysql", "temp-table bomb", "server's table size limits / container memory", seconds, True, grown)
    ep.assert_usable()
    ep.assert_saved()
    ep.env.reset(task_with_gold("SELECT COUNT(*) FROM authors"))
    assert ep.env.step("SELECT COUNT(*) FROM authors").observation == "[(12,)]"


@pytest.mark.parametrize("kind", BACKENDS)
def test_planted_objects_never_reach_a_later_gold(kind, request, tmp_path):
    """A table replaced by a view, a planted trigger and a table of the gold's answer,
    committed: the next episode's gold (and its agent) see the pristine database."""
    ep = sql_episode(kind, request, tmp_path)
    pristine = ep.run("SELECT COUNT(*) FROM reviews")[0].observation
    plants = ["CREATE TABLE reviews_copy AS SELECT * FROM reviews", "DROP TABLE reviews",
              "CREATE VIEW reviews AS SELECT * FROM reviews_copy WHERE review_id = 1",
              {"sqlite": "CREATE TRIGGER planted AFTER INSERT ON books FOR EACH ROW BEGIN DELETE FROM reviews_copy; END",
               "mysql": "CREATE TRIGGER planted AFTER INSERT ON books FOR EACH ROW DELETE FROM reviews_copy"}[kind],
              "COMMIT"]
    for action in plants:
        turn, seconds, _ = ep.run(action)
        assert turn.exit_code == 0 or action == "COMMIT", (action, turn.observation)   # SQLite autocommits
    assert ep.run("SELECT COUNT(*) FROM reviews")[0].observation == "[(1,)]" != pristine   # the plant took
    ep.assert_saved()
    ep.env.reset(task_with_gold("SELECT COUNT(*) FROM reviews"))
    assert ep.env.gold.intercode_observation == pristine
    assert ep.env.step("SELECT COUNT(*) FROM reviews").observation == pristine
    record(kind, "planted view / trigger for a later gold", "pristine copy per episode", seconds, True, 0.0)
