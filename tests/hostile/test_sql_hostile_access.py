"""Hostile SQL that reaches outside its task: other databases, the server's and the host's
files, users and server settings. Each is refused (or, on SQLite, confined to the
episode's own in-memory copy), the episode stays usable, every turn is saved, and a later
task on the other database, and its gold, see pristine data.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sql_helpers import BACKENDS, record, sql_episode

from icplay.tasks.model import Task
from test_sql_support import BUNDLED


@pytest.mark.parametrize("kind", BACKENDS)
def test_cross_database_writes_never_reach_another_task(kind, request, tmp_path):
    ep = sql_episode(kind, request, tmp_path)
    writes = ["UPDATE transit.stations SET name = 'X'", "DELETE FROM transit.incidents",
              "DROP TABLE transit.incidents", "CREATE TABLE transit.planted (x INT)",
              "INSERT INTO transit.stations SELECT * FROM transit.stations"]
    for action in writes:
        turn, seconds, _ = ep.run(action)
        assert turn.exit_code == 1, (action, turn.observation)
    ep.run("COMMIT")
    ep.run("USE transit")
    used = ep.run("UPDATE stations SET name = 'X'")[0]
    ep.run("COMMIT")
    # MariaDB refuses it; SQLite's USE switched to this episode's own copy of transit.
    assert used.exit_code == (1 if kind == "mysql" else 0)
    ep.assert_saved()
    # A later task on transit: its gold and its agent see the pristine database.
    later = Task(id="later", set="hostile", env="sql", query="q", db="transit",
                 gold="SELECT COUNT(*) FROM stations WHERE name = 'X'", extra={"databases": str(BUNDLED)})
    ep.env.reset(later)
    assert ep.env.gold.rows == [(0,)]
    assert ep.env.step("SELECT COUNT(*) FROM incidents").observation == "[(30,)]"
    assert ep.env.step("SHOW TABLES").observation.count("planted") == 0
    record(kind, "cross-database write", "privilege (mysql) / no such table (sqlite)", seconds, True, 0.0)


FILE_ACTIONS = {
    "sqlite": {
        "ATTACH": "ATTACH DATABASE '{out}' AS host",
        "VACUUM INTO": "VACUUM INTO '{out}'",
        "load_extension": "SELECT load_extension('{out}')",
        "raise max_page_count": "PRAGMA max_page_count = 2147483646",
    },
    "mysql": {
        "LOAD_FILE": "SELECT LOAD_FILE('/etc/passwd')",
        "INTO OUTFILE": "SELECT * FROM authors INTO OUTFILE '{out}'",
        "INTO DUMPFILE": "SELECT 'x' INTO DUMPFILE '{out}'",
        "LOAD DATA INFILE": "LOAD DATA INFILE '/etc/passwd' INTO TABLE authors",
        "LOAD DATA LOCAL INFILE": "LOAD DATA LOCAL INFILE '/etc/passwd' INTO TABLE authors",
        "read mysql.user": "SELECT * FROM mysql.user",
        "CREATE DATABASE": "CREATE DATABASE planted",
        "CREATE USER": "CREATE USER 'x'@'%'",
        "SET GLOBAL": "SET GLOBAL max_statement_time = 0",
    },
}


@pytest.mark.parametrize("kind", BACKENDS)
def test_file_access_and_server_changes_are_refused(kind, request, tmp_path):
    ep = sql_episode(kind, request, tmp_path)
    out = tmp_path / "written-by-the-agent"
    for name, template in FILE_ACTIONS[kind].items():
        turn, seconds, _ = ep.run(template.format(out=out))
        refused = turn.exit_code == 1 or turn.observation in ("[(None,)]",)   # LOAD_FILE without FILE: NULL
        assert refused, (name, turn.observation)
        assert not out.exists() and not Path(f"{out}.so").exists(), name
        record(kind, f"file access: {name}", "refused", seconds, True, 0.0)
    ep.assert_usable()
    ep.assert_saved()
