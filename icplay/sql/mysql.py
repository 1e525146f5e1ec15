"""The server backend: MariaDB (or MySQL) in a container, for parity with InterCode.

One container per backend (``mysql_server.py``), from ``icplay-sql:latest`` unless another
image is named, on Docker or Podman (``engine``; default: Docker when its daemon answers,
else Podman), with the same ``icplay=1`` / pid / host labels as the bash sandboxes, so a
crashed run's server is reaped by the next icplay start. Task databases are loaded on first use from their
MySQL text, as they are (InterCode's dumps need no conversion here).

Connections, and why there are three:

- the *agent* session runs the episode's statements as user ``icplay``, who has every
  privilege on the episode's own database, only SELECT on the other loaded task
  databases, and none elsewhere (no ``SET GLOBAL``, no FILE privilege so no
  ``LOAD_FILE`` / ``INTO OUTFILE`` / ``LOAD DATA INFILE``, no users, no touching icplay's
  own state); multi-statements are off, like InterCode's connector, and autocommit is
  off, also like InterCode's. The grants move with each reset: a write to another task's
  database (``UPDATE other_db.t ...; COMMIT``) is refused, so it can never reach a later
  task on that database or its gold answer;
- the *admin* session (root) loads and restores databases and runs gold queries;
- the *killer* session (root) only sends ``KILL QUERY``, so ``interrupt()`` and the
  timeout watchdog work while the other two are busy.

Pristine episodes without reloading everything: a reset first resets the agent session
(``COM_RESET_CONNECTION``: rollback, temporary tables and session variables gone). If the
episode ran any statement that is not plainly read-only (``is_read_only``), the episode's
databases are reloaded from their text (tens of ms each), plus any other database whose
``information_schema`` fingerprint changed. A read-only episode costs two round trips.

Statement timeout: the server's ``max_statement_time`` (set globally, so the agent cannot
lift it for good) plus a client watchdog that sends ``KILL QUERY`` a moment later in
case the agent lowered its session value. Either way the observation is an error and the
session survives.
"""

from __future__ import annotations

import secrets
import threading
import time
from pathlib import Path
from typing import Any

from icplay.sql.base import (
    DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT, CappedRows, Column, Progress, QueryResult, SqlBackendError, Table,
    is_read_only, is_use, not_utf8,
)
from icplay.sql.dump import Catalog, DumpDatabase, default_databases, load_catalog
from icplay.sql.mysql_admin import (AGENT_USER, _quote_name, deterministic_ties, grant, load_database,  # noqa: F401
                                    set_statement_time)
from icplay.sql.mysql_server import DEFAULT_IMAGE, START_TIMEOUT, MariadbServer

GOLD_TIMEOUT = 60.0
SCRATCH_DB = "icplay_scratch"
WATCHDOG_GRACE = 2.0     # seconds after the statement timeout before the watchdog kills
MAX_EXTRA_RESULTS = 64   # results a CALL may add to its first (each read off the connection, then dropped)
LOST_CONNECTION = {2006, 2013, 2055, 4031}
SYSTEM_SCHEMAS = ("mysql", "information_schema", "performance_schema", "sys", SCRATCH_DB)

# One row per database that changes whenever a table, view, routine or trigger is
# created, dropped, altered or written to (UPDATE_TIME), read from information_schema.
_FINGERPRINT = """
SELECT s, SUM(h), COUNT(*) FROM (
  SELECT TABLE_SCHEMA AS s, CRC32(CONCAT_WS('|', TABLE_NAME, TABLE_TYPE, CREATE_TIME, UPDATE_TIME,
         TABLE_ROWS, AUTO_INCREMENT)) AS h FROM information_schema.TABLES
  UNION ALL SELECT ROUTINE_SCHEMA, CRC32(CONCAT_WS('|', ROUTINE_NAME, CREATED, LAST_ALTERED))
         FROM information_schema.ROUTINES
  UNION ALL SELECT TRIGGER_SCHEMA, CRC32(CONCAT_WS('|', TRIGGER_NAME, CREATED)) FROM information_schema.TRIGGERS
) AS f WHERE s NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys') GROUP BY s
"""

CONVERSION_ERRORS = (ValueError, TypeError, ArithmeticError, LookupError, MemoryError, RuntimeError, OSError)


def close_quietly(closable: Any) -> None:
    """Close a connection or cursor that may be broken already (then there is nothing to close).
    A cursor whose connection was replaced meanwhile (a reconnect after a statement's error) holds
    only a dead weak reference to it: its close raises ReferenceError, and nothing is left open."""
    import mysql.connector

    try:
        closable.close()
    except (mysql.connector.Error, OSError, ReferenceError):
        pass


class MysqlBackend:
    """SQL episodes on a MariaDB/MySQL server in Docker (or at ``host``:``port``)."""

    kind = "mysql"

    def __init__(self, image: str | None = None, timeout: float | None = None, max_rows: int | None = None,
                 progress: Progress | None = None, host: str | None = None, port: int = 3306,
                 root_password: str | None = None, memory: str = "1g", engine: str | None = None,
                 **_ignored: Any) -> None:
        self.image = image or DEFAULT_IMAGE
        self.timeout = DEFAULT_TIMEOUT if timeout is None else timeout
        self.max_rows = DEFAULT_MAX_ROWS if max_rows is None else max_rows
        self.progress = progress
        self.memory = memory
        self._root_password = root_password or ("icplay" if host else secrets.token_hex(12))
        self.server = MariadbServer(self.image, self._root_password, memory, progress, host, port, engine)
        self._agent_password = secrets.token_hex(12)
        self._admin: Any = None
        self._killer: Any = None
        self._agent: Any = None
        self._admin_lock = threading.RLock()
        self._killer_lock = threading.Lock()
        self._started = False
        self._global_timeout = self.timeout
        self._loaded: dict[str, tuple[str, DumpDatabase]] = {}   # lower name -> (catalog digest, text)
        self._fingerprint: dict[str, tuple[Any, ...]] = {}
        self._catalog: Catalog | None = None
        self._db: str | None = None           # the episode's database
        self._current: str | None = None      # the agent session's current database
        self._touched: set[str] = set()       # databases the agent USEd this episode
        self._granted: str | None = None      # the one database the agent may write (lower case)
        self._dirty = False
        self._interrupted = False
        self._watchdog_fired = False
        self._statement = 0

    # --- start and stop -------------------------------------------------------------

    def start(self) -> None:
        """Start the server container (or connect to ``host``) and open the sessions."""
        if self._started:
            return
        self.server.start()
        deadline = time.monotonic() + START_TIMEOUT
        self._admin = self._connect_root(deadline)
        self._killer = self._connect_root(deadline)
        cursor = self._admin.cursor()
        set_statement_time(cursor, self.timeout, scope="GLOBAL")
        self._global_timeout = self.timeout
        deterministic_ties(cursor)
        set_statement_time(cursor, 0)
        cursor.execute(f"CREATE USER IF NOT EXISTS '{AGENT_USER}'@'%' IDENTIFIED BY '{self._agent_password}'")
        cursor.execute(f"ALTER USER '{AGENT_USER}'@'%' IDENTIFIED BY '{self._agent_password}'")
        cursor.close()
        self._agent = self._connect_agent()
        self._started = True

    def _connect_root(self, deadline: float) -> Any:
        return self.server.connect(deadline, user="root", password=self._root_password, autocommit=True)

    def _connect_agent(self) -> Any:
        conn = self.server.connect(time.monotonic() + 30, user=AGENT_USER, password=self._agent_password,
                             autocommit=False)
        if self._current:
            cursor = conn.cursor()
            cursor.execute(f"USE {_quote_name(self._current)}")
            cursor.close()
        return conn

    def close(self) -> None:
        for conn in (self._agent, self._killer, self._admin):
            if conn is not None:
                close_quietly(conn)
        self._agent = self._killer = self._admin = None
        self.server.close()
        self._started = False

    @property
    def container_id(self) -> str | None:
        return self.server.container_id

    # --- loading and restoring ------------------------------------------------------

    def _ensure_catalog(self, catalog: Catalog) -> None:
        """Load every database of the catalog not yet loaded from this exact text."""
        missing = [d for key, d in catalog.databases.items()
                   if self._loaded.get(key, ("",))[0] != catalog.digest]
        if not missing:
            return
        if self.progress:
            self.progress(f"loading {len(missing)} database(s) from {catalog.source.name}")
        with self._admin_lock:
            cursor = self._admin.cursor(buffered=True)
            for entry in missing:
                load_database(cursor, entry.name, entry)
                grant(cursor, entry.name, own=False)
                self._loaded[entry.name.lower()] = (catalog.digest, entry)
            cursor.close()
            self._fingerprint = self._fingerprints()

    def _move_grants(self, name: str) -> None:
        """Give the agent write access to ``name`` alone (before its session is reset, so
        the session's next ``USE`` sees the new privileges)."""
        if self._granted == name.lower():
            return
        with self._admin_lock:
            cursor = self._admin.cursor(buffered=True)
            if self._granted is not None and self._granted in self._loaded:
                grant(cursor, self._loaded[self._granted][1].name, own=False)
            grant(cursor, name, own=True)
            cursor.close()
        self._granted = name.lower()

    def _fingerprints(self) -> dict[str, tuple[Any, ...]]:
        with self._admin_lock:
            cursor = self._admin.cursor(buffered=True)
            cursor.execute(_FINGERPRINT)
            rows = cursor.fetchall()
            cursor.close()
        return {str(r[0]).lower(): tuple(r[1:]) for r in rows}

    def _restore_changed(self) -> list[str]:
        """After an episode that may have written: reload what it touched or changed."""
        now = self._fingerprints()
        names = {n.lower() for n in self._touched if n}
        names |= {k for k in set(now) | set(self._fingerprint) if now.get(k) != self._fingerprint.get(k)}
        restored = []
        with self._admin_lock:
            cursor = self._admin.cursor(buffered=True)
            for key in sorted(names):
                if key in self._loaded:
                    load_database(cursor, self._loaded[key][1].name, self._loaded[key][1])
                    restored.append(key)
                elif key not in SYSTEM_SCHEMAS:
                    # Not ours (the agent cannot create databases, but be safe).
                    cursor.execute(f"DROP DATABASE IF EXISTS {_quote_name(key)}")
            cursor.close()
        self._fingerprint = self._fingerprints()
        return restored

    # --- episodes -------------------------------------------------------------------

    def reset(self, db: str | None, databases: str | Path | None = None) -> None:
        """A new episode on a pristine ``db``, in a fresh agent session whose current
        database is ``db`` (InterCode ran ``use <db>`` first)."""
        self.start()
        catalog = load_catalog(databases or default_databases())
        self._ensure_catalog(catalog)
        self._catalog = catalog
        name = catalog.get(db or catalog.names[0]).name
        if self.timeout != self._global_timeout:   # changed since start: sessions inherit it
            with self._admin_lock:
                cursor = self._admin.cursor()
                set_statement_time(cursor, self.timeout, scope="GLOBAL")
                cursor.close()
            self._global_timeout = self.timeout
        self._move_grants(name)
        self._reset_session()
        if self._dirty:
            self._restore_changed()
        self._dirty = False
        self._db = self._current = name
        self._touched = {name}
        cursor = self._agent.cursor()
        cursor.execute(f"USE {_quote_name(name)}")
        cursor.close()

    def _reset_session(self) -> None:
        import mysql.connector

        try:
            if self._agent.unread_result:
                self._agent.consume_results()
            self._agent.cmd_reset_connection()
        except mysql.connector.Error:
            close_quietly(self._agent)
            self._current = None
            self._agent = self._connect_agent()

    # --- statements -----------------------------------------------------------------

    def execute(self, sql: str) -> QueryResult:
        """Run one agent statement; errors come back as results, never raised."""
        import mysql.connector

        if self._db is None:
            raise SqlBackendError("no episode: call reset(db, databases) first")
        refused = not_utf8(sql)
        if refused is not None:
            return refused
        if not is_read_only(sql):
            self._dirty = True
        started = time.monotonic()
        self._interrupted = False
        result = QueryResult()
        self._statement += 1
        watchdog = threading.Timer(self.timeout + WATCHDOG_GRACE, self._kill_running,
                                   kwargs={"timed_out": True, "statement": self._statement})
        watchdog.daemon = True
        self._watchdog_fired = False
        cursor = None
        try:
            cursor = self._agent.cursor()
            watchdog.start()
            cursor.execute(sql)
            self._read_outcome(cursor, sql, started, result)
            self._drop_other_results(cursor)
        except mysql.connector.Error as exc:
            self._note_server_error(exc, result)
        except CONVERSION_ERRORS as exc:
            # a value the connector cannot convert (a date beyond Python's, a bad decimal), more results than
            # MAX_EXTRA_RESULTS, out of memory: the statement's error, in a new session
            result = QueryResult()
            result.error = str(exc)
            self._reconnect_agent(result)
        finally:
            watchdog.cancel()
            self._statement += 1
            if cursor is not None:
                close_quietly(cursor)
        result.duration = time.monotonic() - started
        return result

    def _drop_other_results(self, cursor: Any) -> None:
        """A ``CALL`` answers with several results (the procedure's, then the call's status):
        the first is the action's; the others are read off the connection here, or the next
        statement would take them for its own (and the one after find the connection unusable)."""
        for _ in range(MAX_EXTRA_RESULTS):
            if not cursor.nextset():
                return
            self._agent.consume_results()
        raise RuntimeError(f"the statement answered with more than {MAX_EXTRA_RESULTS} results")

    def _read_outcome(self, cursor: Any, sql: str, started: float, result: QueryResult) -> None:
        """Fill ``result`` from a statement that ran: its rows (capped), its row count, the
        database a USE chose, and a note when it ran for the whole timeout."""
        if time.monotonic() - started >= self.timeout * 0.98 and self.timeout > 0:
            # The server's max_statement_time cuts some functions short without an
            # error (BENCHMARK returns 0): say so rather than pass the value as real.
            result.timed_out = True
            result.notes.append(f"the statement ran for the whole statement timeout ({self.timeout:g} s); "
                                "its result may have been cut short")
        if cursor.description is not None:
            result.columns = [d[0] for d in cursor.description]
            CappedRows(self.max_rows).read(lambda n: cursor.fetchmany(size=n)).fill(result)
            if result.truncated:
                self._discard_rest()
        result.rowcount = cursor.rowcount
        used = is_use(sql)
        if used is not None:
            self._current = used
            self._touched.add(used)

    def _note_server_error(self, exc: Any, result: QueryResult) -> None:
        """The server refused or cut the statement: its message, whether the timeout or an
        interrupt did it, and a fresh connection if this one was lost."""
        result.columns, result.rows, result.shown, result.row_keys, result.dropped_bytes = None, [], None, None, 0
        result.error = exc.msg if getattr(exc, "msg", None) else str(exc)
        errno = getattr(exc, "errno", None)
        result.timed_out = errno == 1969 or (errno == 1317 and self._watchdog_fired)
        result.interrupted = errno == 1317 and self._interrupted and not self._watchdog_fired
        if errno in LOST_CONNECTION or not self._agent.is_connected():
            self._reconnect_agent(result)

    def _reconnect_agent(self, result: QueryResult) -> None:
        close_quietly(self._agent)
        self._agent = self._connect_agent()
        self._dirty = True
        result.notes.append("the database connection was lost and reopened; session state is gone")

    def _discard_rest(self) -> None:
        """Stop a result beyond the row cap without reading it all."""
        import mysql.connector

        self._kill_running()
        try:
            self._agent.consume_results()
        except mysql.connector.Error:
            pass

    def _kill_running(self, timed_out: bool = False, statement: int | None = None) -> None:
        if statement is not None and statement != self._statement:
            return   # a late watchdog: its statement is over, do not kill the next one
        if timed_out:
            self._watchdog_fired = True
        agent = self._agent
        if agent is None or self._killer is None:
            return
        import mysql.connector

        with self._killer_lock:
            try:
                cursor = self._killer.cursor()
                cursor.execute(f"KILL QUERY {int(agent.connection_id)}")
                cursor.close()
            except mysql.connector.Error:
                pass

    def interrupt(self) -> None:
        """Stop the agent's running statement (any thread); the session survives."""
        self._interrupted = True
        self._kill_running()

    def gold(self, sql: str) -> QueryResult:
        """Run a gold query on a pristine copy of the episode's database.

        Before the episode wrote anything, that is the database itself, read from the
        admin session (which cannot see the agent's uncommitted changes); afterwards a
        scratch copy is loaded from the database's text.
        """
        import mysql.connector

        if self._db is None:
            raise SqlBackendError("no episode: call reset(db, databases) first")
        started = time.monotonic()
        result = QueryResult()
        with self._admin_lock:
            cursor = self._admin.cursor(buffered=True)
            scratch = self._dirty
            try:
                if scratch:
                    load_database(cursor, SCRATCH_DB, self._loaded[self._db.lower()][1])
                cursor.execute(f"USE {_quote_name(SCRATCH_DB if scratch else self._db)}")
                set_statement_time(cursor, GOLD_TIMEOUT)
                cursor.execute(sql)
                if cursor.description is not None:
                    result.columns = [d[0] for d in cursor.description]
                    result.rows = [tuple(r) for r in cursor.fetchall()]
                result.rowcount = cursor.rowcount
            except mysql.connector.Error as exc:
                result.columns, result.rows = None, []
                result.error = exc.msg if getattr(exc, "msg", None) else str(exc)
            finally:
                set_statement_time(cursor, 0)
                if scratch:
                    cursor.execute(f"DROP DATABASE IF EXISTS {_quote_name(SCRATCH_DB)}")
                cursor.execute("USE mysql")
                cursor.close()
        result.duration = time.monotonic() - started
        return result

    def schema(self) -> list[Table]:
        """Tables and columns of the agent's current database (temporary tables aside)."""
        if self._current is None:
            return []
        with self._admin_lock:
            cursor = self._admin.cursor(buffered=True)
            cursor.execute(
                "SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS "
                "WHERE TABLE_SCHEMA = %s ORDER BY TABLE_NAME, ORDINAL_POSITION", (self._current,))
            rows = cursor.fetchall()
            cursor.close()
        tables: dict[str, list[Column]] = {}
        for table, column, type_ in rows:
            tables.setdefault(table, []).append(Column(column, type_))
        return [Table(name, tuple(cols)) for name, cols in tables.items()]

    @property
    def database(self) -> str | None:
        return self._current
