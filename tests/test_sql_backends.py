"""The SQL backends and the SQL environment on real SQLite and real MariaDB (no mocks)."""

from __future__ import annotations

import threading
import time

import pytest

from icplay.envs.sql import SqlEnv
from icplay.sql.base import ERROR_PREFIX, QueryResult, is_read_only, leading_verb
from icplay.sql.convert import convert_statements
from icplay.sql.dump import read_catalog, split_statements
from icplay.tasks.model import Task
from test_sql_support import BACKEND_PARAMS, BUNDLED, new_backend

RUNAWAY = "SELECT COUNT(*) FROM ridership a, ridership b, ridership c, ridership d"


@pytest.fixture(params=BACKEND_PARAMS)
def backend(request):
    backend = new_backend(request.param, request)
    backend.reset("bookshop", BUNDLED)
    return backend


def task(gold: str, db: str = "bookshop", query: str = "q") -> Task:
    return Task(id="t", set="test", env="sql", query=query, gold=gold, db=db,
                extra={"databases": str(BUNDLED)})


# --- reading and converting dumps -----------------------------------------------------------


def test_split_statements_respects_quotes_and_comments():
    text = ("-- a comment; with a semicolon\nCREATE TABLE t (a TEXT);\n"
            "INSERT INTO t VALUES ('x;y'), ('it''s -- not a comment'), ('back\\'slash;');\n"
            "/*!40101 SET NAMES utf8 */;\n/* plain; comment */\n# hash comment;\nSELECT 1")
    assert split_statements(text) == [
        "CREATE TABLE t (a TEXT)",
        "INSERT INTO t VALUES ('x;y'), ('it''s -- not a comment'), ('back\\'slash;')",
        "/*!40101 SET NAMES utf8 */",
        "SELECT 1",
    ]


def test_dump_groups_statements_by_database(tmp_path):
    dump = tmp_path / "two.sql"
    dump.write_text("CREATE USER 'admin'@'%';\n"
                    "CREATE DATABASE IF NOT EXISTS `Alpha` /*!40100 DEFAULT CHARACTER SET utf8mb4 */;\n"
                    "USE `Alpha`;\nCREATE TABLE a (x int);\nINSERT INTO a VALUES (1);\n"
                    "CREATE DATABASE beta;\nUSE beta;\nCREATE TABLE b (y int);\n")
    catalog = read_catalog(dump)
    assert catalog.names == ["Alpha", "beta"]
    assert catalog.get("alpha").statements == ["CREATE TABLE a (x int)", "INSERT INTO a VALUES (1)"]
    assert catalog.get("BETA").statements == ["CREATE TABLE b (y int)"]
    assert "gamma" not in catalog


def test_mysql_table_definition_converts_to_sqlite():
    import sqlite3

    from icplay.sql.sqlite import prepare_connection

    statements = convert_statements([
        "DROP TABLE IF EXISTS `t`",
        "/*!40101 SET @saved_cs_client = @@character_set_client */",
        "CREATE TABLE `t` (`id` int NOT NULL AUTO_INCREMENT, `name` varchar(20) COLLATE utf8mb4_general_ci "
        "DEFAULT NULL, `cost` decimal(19,4) DEFAULT NULL, `seen` datetime DEFAULT NULL, "
        "PRIMARY KEY (`id`), KEY `k` (`name`), UNIQUE KEY `u` (`name`(10))) "
        "ENGINE=InnoDB AUTO_INCREMENT=3 DEFAULT CHARSET=utf8mb4",
        "LOCK TABLES `t` WRITE",
        "INSERT INTO `t` VALUES (1,'It\\'s ',567,'2018-03-19 04:39:54'),(2,'Bob',1.5,NULL)",
        "UNLOCK TABLES",
    ])
    conn = prepare_connection(sqlite3.connect(":memory:", detect_types=sqlite3.PARSE_DECLTYPES))
    for statement in statements:
        conn.execute(statement)
    rows = conn.execute("SELECT * FROM t ORDER BY id").fetchall()
    assert str(rows[0]) == "(1, \"It's \", Decimal('567.0000'), datetime.datetime(2018, 3, 19, 4, 39, 54))"
    # MySQL's general_ci: case-insensitive, trailing spaces ignored.
    assert conn.execute("SELECT id FROM t WHERE name = 'IT''S'").fetchall() == [(1,)]


def test_read_only_classification_is_conservative():
    assert is_read_only("  select * from t")
    assert is_read_only("/* hi */ SHOW TABLES")
    assert is_read_only("DESC t")
    assert not is_read_only("DELETE FROM t")
    assert not is_read_only("SELECT 1; DROP TABLE t")
    assert not is_read_only("SELECT * INTO OUTFILE '/tmp/x' FROM t")
    assert not is_read_only("/*!50000 DROP TABLE t */")
    assert leading_verb("-- c\n  (SELECT 1)") == "SELECT"


# --- backends --------------------------------------------------------------------------


def test_rows_are_the_drivers_tuples_and_observation_is_intercodes(backend):
    result = backend.execute("SELECT name, born FROM authors WHERE author_id <= 2 ORDER BY author_id")
    assert result.columns == ["name", "born"]
    assert result.rows == [("Amara Okafor", 1968), ("Lars Lindqvist", 1955)]
    assert result.observation == "[('Amara Okafor', 1968), ('Lars Lindqvist', 1955)]"
    day = backend.execute("SELECT joined FROM customers WHERE customer_id = 1")
    assert day.observation.startswith("[(datetime.date(")


def test_errors_and_statements_without_rows_are_observations(backend):
    error = backend.execute("SELECT * FROM no_such_table")
    assert not error.ok and error.observation.startswith(ERROR_PREFIX)
    assert "no_such_table" in error.observation
    update = backend.execute("UPDATE books SET pages = pages + 1 WHERE book_id = 1")
    assert update.ok and update.columns is None and update.observation == "None"
    assert update.rowcount == 1
    # Like InterCode's connector: one statement per action.
    assert not backend.execute("SELECT 1; SELECT 2").ok
    assert backend.execute("SELECT 3").rows == [(3,)]


def test_drop_table_does_not_survive_reset(backend):
    assert backend.execute("DROP TABLE order_items").ok
    assert not backend.execute("SELECT COUNT(*) FROM order_items").ok
    backend.reset("bookshop", BUNDLED)
    assert backend.execute("SELECT COUNT(*) FROM order_items").rows == [(114,)]


def test_committed_changes_do_not_survive_reset(backend):
    backend.execute("DELETE FROM reviews")
    backend.execute("INSERT INTO authors VALUES (99, 'Ghost', 'Nowhere', 2000)")
    backend.execute("COMMIT")
    assert backend.execute("SELECT COUNT(*) FROM reviews").rows == [(0,)]
    backend.reset("bookshop", BUNDLED)
    assert backend.execute("SELECT COUNT(*) FROM reviews").rows == [(70,)]
    assert backend.execute("SELECT COUNT(*) FROM authors").rows == [(12,)]


def test_changes_to_another_database_do_not_survive_reset(backend):
    assert backend.execute("USE transit").ok
    dropped = backend.execute("DROP TABLE incidents")
    # MariaDB: the episode may write its own database only; SQLite: USE switches to the
    # episode's own copy of the other database.
    assert dropped.ok == (backend.kind == "sqlite")
    backend.reset("bookshop", BUNDLED)
    backend.execute("USE transit")
    assert backend.execute("SELECT COUNT(*) FROM incidents").rows == [(30,)]


def test_a_committed_write_to_another_database_never_reaches_a_later_task_or_its_gold(backend):
    """Issue 11: ``UPDATE other_db.t ...; COMMIT`` reached the next task on other_db and its
    gold answer (reward 1.0 on corrupted data)."""
    env = SqlEnv(backend)
    env.reset(task("SELECT COUNT(*) FROM books"))
    update = env.step("UPDATE transit.stations SET name = 'X'")
    env.step("COMMIT")
    assert update.exit_code != 0 and update.observation.startswith(ERROR_PREFIX)
    later = task("SELECT COUNT(*) FROM stations WHERE name = 'X'", db="transit")
    env.reset(later)
    assert env.gold.rows == [(0,)]
    assert env.step("SELECT COUNT(*) FROM stations WHERE name = 'X'").observation == "[(0,)]"
    assert env.submit().reward == 1.0      # the agent's answer and the gold: the pristine data
    # The episode's own database stays writable.
    assert env.step("UPDATE stations SET name = 'Y' WHERE station_id = 1").exit_code == 0


def test_session_state_does_not_survive_reset(backend):
    assert backend.execute("CREATE TEMPORARY TABLE scratch (x INT)").ok
    backend.reset("bookshop", BUNDLED)
    assert not backend.execute("SELECT * FROM scratch").ok


def test_gold_runs_on_a_pristine_copy(backend):
    assert backend.execute("UPDATE books SET genre = 'Prose' WHERE genre = 'Poetry'").ok
    backend.execute("COMMIT")
    assert backend.execute("SELECT COUNT(*) FROM books WHERE genre = 'Poetry'").rows == [(0,)]
    assert backend.gold("SELECT COUNT(*) FROM books WHERE genre = 'Poetry'").rows == [(7,)]
    # ... and the agent's copy keeps the agent's change.
    assert backend.execute("SELECT COUNT(*) FROM books WHERE genre = 'Poetry'").rows == [(0,)]


def test_runaway_query_times_out_and_the_connection_survives(backend):
    backend.timeout = 1.0
    backend.reset("transit", BUNDLED)
    started = time.monotonic()
    result = backend.execute(RUNAWAY)
    elapsed = time.monotonic() - started
    assert not result.ok and result.timed_out
    assert result.observation.startswith(ERROR_PREFIX)
    assert elapsed < 5
    assert backend.execute("SELECT COUNT(*) FROM stations").rows == [(22,)]


def test_timeout_holds_even_if_the_agent_lifts_it(backend):
    backend.timeout = 1.0
    backend.reset("transit", BUNDLED)
    backend.execute("SET SESSION max_statement_time = 0")   # MariaDB; an error on SQLite
    started = time.monotonic()
    result = backend.execute(RUNAWAY)
    assert not result.ok and time.monotonic() - started < 6
    assert backend.execute("SELECT 1").rows == [(1,)]


def test_row_cap_truncates_with_a_note(backend):
    backend.max_rows = 50
    result = backend.execute("SELECT a.review_id FROM reviews a, reviews b")
    assert len(result.rows) == 50 and result.truncated
    assert "[icplay: result truncated" in result.observation
    assert result.info()["truncated"] is True
    assert backend.execute("SELECT COUNT(*) FROM reviews").rows == [(70,)]


def test_interrupt_stops_a_running_statement(backend):
    backend.reset("transit", BUNDLED)
    timer = threading.Timer(0.5, backend.interrupt)
    timer.start()
    started = time.monotonic()
    result = backend.execute(RUNAWAY)
    timer.cancel()
    assert not result.ok and time.monotonic() - started < 5
    assert backend.execute("SELECT COUNT(*) FROM metro_lines").rows == [(5,)]


def test_schema_lists_tables_and_columns(backend):
    tables = {t.name.lower(): [c.name for c in t.columns] for t in backend.schema()}
    assert tables["books"] == ["book_id", "title", "author_id", "genre", "published", "pages", "price_cents"]
    assert set(tables) == {"authors", "books", "customers", "orders", "order_items", "reviews"}


# --- the environment -----------------------------------------------------------------------


@pytest.fixture(params=BACKEND_PARAMS)
def env(request):
    return SqlEnv(new_backend(request.param, request))


def test_env_scores_like_intercode(env):
    gold = "SELECT title FROM books WHERE genre = 'Poetry' ORDER BY title"
    assert env.reset(task(gold, query="Poetry titles?")) == "Poetry titles?"
    step = env.step(gold)
    assert step.exit_code == 0 and step.info["columns"] == ["title"] and len(step.info["rows"]) == 7
    result = env.submit()
    assert result.reward == 1.0 and result.solved
    assert result.breakdown["rows_matched"] == 7 and result.breakdown["iou"] == 1.0
    assert result.gold_output.startswith("[('Falling Upward',)")

    env.reset(task(gold))
    env.step("SELECT title FROM books WHERE genre = 'Poetry' ORDER BY title DESC")
    assert env.submit().reward == -1.0          # right rows, reversed order

    env.reset(task(gold))
    env.step("SELECT title FROM books WHERE genre = 'Poetry' AND title < 'M' ORDER BY title")
    assert env.submit().reward == 0.43          # 3 of 7 rows in the right order

    env.reset(task(gold))
    env.step("SELECT nonsense FROM books")
    scored = env.submit()
    assert scored.reward == 0.0 and scored.breakdown["agent_result"] == "error"

    env.reset(task(gold))
    assert env.submit().breakdown["agent_result"] == "no statement was run"


def test_env_gold_is_computed_before_the_agent_acts(env):
    gold = "SELECT COUNT(*) FROM books"
    env.reset(task(gold))
    env.step("DROP TABLE books")
    env.step("SELECT 36")
    assert env.submit().reward == 1.0


def test_env_reports_a_failing_gold(env):
    env.reset(task("SELECT * FROM missing_table"))
    env.step("SELECT * FROM books WHERE 1 = 0")
    result = env.submit()
    assert result.breakdown["gold_error"] and result.reward == 1.0   # both empty, as InterCode


def test_query_result_observation_notes():
    result = QueryResult(columns=["a"], rows=[(1,)], truncated=True, notes=["reconnected"])
    assert result.observation == "[(1,)]\n[icplay: result truncated: only the first 1 rows were kept]\n[icplay: reconnected]"


def test_sqlite_agent_stays_inside_its_copy(tmp_path, request):
    """No ATTACH or VACUUM INTO of host files, and a size cap the agent cannot lift."""
    backend = new_backend("sqlite", request)
    backend.reset("bookshop", BUNDLED)
    host = tmp_path / "host"
    host.mkdir()
    for statement in (f"ATTACH DATABASE '{host / 'x.db'}' AS x", f"VACUUM INTO '{host / 'y.db'}'",
                      "PRAGMA max_page_count = 100000000"):
        assert not backend.execute(statement).ok
    assert not list(host.iterdir())
    bomb = backend.execute("CREATE TABLE big AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
                           "SELECT i, randomblob(1000) AS b FROM n")
    assert not bomb.ok
    assert backend.execute("SELECT COUNT(*) FROM books").rows == [(36,)]


# --- byte caps: the observation is cut, the reward is not -------------------------------------


def test_capped_rows_cut_the_text_and_keep_the_reward_exact():
    """Rows past the caps reach the reward as digests; the reward equals InterCode's on
    the full rows, for agents that match, reorder, duplicate or miss gold rows."""
    from icplay.envs.sql_reward import sql_reward, sql_reward_keys
    from icplay.sql.base import CappedRows

    gold = [(i, "v" * (i % 7) * 40) for i in range(60)]
    agents = {"same": list(gold), "reversed": gold[::-1], "duplicated": gold + gold[:5],
              "missing": gold[10:], "other": [(i, "w") for i in range(30)] + gold[:20]}
    for name, agent in agents.items():
        collected = CappedRows(max_rows=None, cap=300, rows_cap=600)
        for row in agent:
            collected.add(row)
        result = QueryResult(columns=["a", "b"])
        collected.fill(result)
        assert result.row_keys is not None and len(result.rows) < len(agent), name
        assert len(result.shown.encode()) == 300 and result.dropped_bytes + 300 == len(str(agent).encode()), name
        assert str(agent).startswith(result.shown), name
        assert sql_reward_keys(result.keys(), [str(r) for r in gold]) == sql_reward(agent, gold), name


def test_executable_comments_count_as_code_in_the_read_only_check():
    assert not is_read_only("SELECT 1 /*M! INTO @x */")
    assert not is_read_only("SELECT 1 /*!50000 INTO @x */")
    assert leading_verb("/*M!100502 DELETE FROM t */") == "DELETE"
    assert is_read_only("SELECT /* INTO @x */ 1")
    assert not is_read_only("SELECT 1 /* never closed")


def test_tasks_check_lists_the_golds_that_cannot_tell(tmp_path, capsys):
    """`icplay tasks --check`: a gold returning no rows or failing is listed with its reason."""
    import json

    from icplay.cli import main

    records = [{"id": "empty", "db": "bookshop", "query": "q", "gold": "SELECT name FROM authors WHERE 1 = 0"},
               {"id": "fails", "db": "bookshop", "query": "q", "gold": "SELECT nope FROM nowhere"},
               {"id": "fine", "db": "bookshop", "query": "q", "gold": "SELECT COUNT(*) FROM authors"}]
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps(records))
    assert main(["tasks", "--check", str(path), "--env", "sql"]) == 0
    head, *listed = capsys.readouterr().out.splitlines()
    assert head.startswith("tasks: 2 of 3 tasks have a gold that is not discriminative on sqlite")
    assert [line.split()[0] for line in listed] == ["empty", "fails"]
    assert "returns no rows on sqlite" in listed[0] and "fails on sqlite" in listed[1]
    assert main(["tasks", "--check", "sql"]) == 0
    assert capsys.readouterr().out.startswith("sql: 0 of 44 tasks")
