"""What the MariaDB backend's admin (root) session does to the server: sessions' settings,
databases (re)created from their MySQL text, and the agent's privileges on each."""

from __future__ import annotations

from typing import Any

from icplay.sql.base import SqlBackendError
from icplay.sql.dump import DumpDatabase

AGENT_USER = "icplay"


def _quote_name(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _grant_pattern(name: str) -> str:
    """A database name for GRANT, where ``_`` and ``%`` would otherwise be wildcards."""
    return _quote_name(name.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%"))


def deterministic_ties(cursor: Any) -> None:
    """Internal temporary tables on Aria rather than in memory, for every session.

    MariaDB breaks ties in a sort (``GROUP BY g ORDER BY COUNT(*) LIMIT 1`` with equal
    counts) by the rows' positions, which for an in-memory temporary table are memory
    addresses: the same query on the same data then picks a different tied row on
    each server start. On-disk temporary tables make the choice repeatable.
    """
    import mysql.connector

    for scope in ("GLOBAL", "SESSION"):
        try:
            cursor.execute(f"SET {scope} tmp_memory_table_size = 0")
        except mysql.connector.Error:
            pass   # MySQL: no such variable; its TempTable engine is its own story


def set_statement_time(cursor: Any, seconds: float, scope: str = "SESSION") -> None:
    """MariaDB's max_statement_time (seconds), else MySQL's max_execution_time (ms)."""
    import mysql.connector

    try:
        cursor.execute(f"SET {scope} max_statement_time = {float(seconds)}")
    except mysql.connector.Error:
        try:
            cursor.execute(f"SET {scope} max_execution_time = {int(seconds * 1000)}")
        except mysql.connector.Error:
            pass   # neither server's variable: the client's watchdog still kills at the timeout


def load_database(cursor: Any, name: str, entry: DumpDatabase) -> None:
    """(Re)create one database from its text, as the admin session."""
    cursor.execute(f"DROP DATABASE IF EXISTS {_quote_name(name)}")
    if entry.create and name == entry.name:
        cursor.execute(entry.create)
    else:
        cursor.execute(f"CREATE DATABASE {_quote_name(name)} "
                       "DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci")
    cursor.execute(f"USE {_quote_name(name)}")
    import mysql.connector

    for statement in entry.statements:
        try:
            cursor.execute(statement)
            if cursor.with_rows:
                cursor.fetchall()
        except mysql.connector.Error as exc:
            snippet = " ".join(statement.split())[:100]
            raise SqlBackendError(f"database {entry.name}: the server rejects {snippet}: {exc.msg}") from None
    # Statistics now, not whenever InnoDB's background recalculation gets to them: the
    # plans (and so the row order of queries without ORDER BY, and which of several
    # tied groups a LIMIT keeps) would otherwise differ from one run to the next.
    cursor.execute("SHOW FULL TABLES WHERE Table_type = 'BASE TABLE'")
    tables = [row[0] for row in cursor.fetchall()]
    if tables:
        cursor.execute("ANALYZE TABLE " + ", ".join(_quote_name(t) for t in tables))
        cursor.fetchall()
    cursor.execute("USE mysql")


def grant(cursor: Any, name: str, own: bool) -> None:
    """The agent's privileges on one task database: all of them on the episode's own,
    SELECT only on the others (reading another database is fine, writing is not)."""
    import mysql.connector

    pattern = _grant_pattern(name)
    try:
        cursor.execute(f"REVOKE ALL PRIVILEGES ON {pattern}.* FROM '{AGENT_USER}'@'%'")
    except mysql.connector.Error as exc:
        if exc.errno != 1141:   # 1141: no grant there yet
            raise
    cursor.execute(f"GRANT {'ALL PRIVILEGES' if own else 'SELECT'} ON {pattern}.* TO '{AGENT_USER}'@'%'")
