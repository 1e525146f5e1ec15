"""The embedded backend: SQLite in this process, a pristine in-memory copy per episode.

Each task database is converted from its MySQL text once and cached as a file under
``~/.icplay/cache/sqlite`` (keyed by the source's digest), then held in memory as a
template; an episode (and every gold run) gets its own copy through SQLite's backup API,
which takes about a millisecond for a Spider database. So a ``DROP TABLE`` in one episode
can never reach the next one or the gold.

Statements run with a deadline checked by a progress handler (a runaway cross join is
stopped and the connection keeps working), results are capped at ``max_rows``, and
``interrupt()`` may be called from any thread.
"""

from __future__ import annotations

import datetime
import decimal
import os
import re
import sqlite3
import threading
import time
from pathlib import Path

from icplay.paths import home_dir
from icplay.sql.base import (
    DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT, Column, Progress, QueryResult, SqlBackendError, Table, is_use, not_utf8,
)
from icplay.sql.convert import CONVERTER_VERSION, convert_statements, mysql_query_to_sqlite
from icplay.sql.dump import Catalog, default_databases, load_catalog

GOLD_TIMEOUT = 60.0
MAX_PAGES = 65_536           # 256 MB per database copy (4 KiB pages): a memory bomb fails
MAX_VALUE_BYTES = 64 << 20   # the largest string or blob a statement may build
_PROGRESS_STEPS = 2000   # SQLite VM instructions between deadline checks (~0.1 ms)


# --- MySQL-like values ------------------------------------------------------------------
# The reward compares `str(tuple(row))`, so a value's Python type matters: MySQL's
# connector returns datetime for DATETIME columns and Decimal('567.0000') for a
# DECIMAL(19,4) column. These converters and the collation make SQLite return the same
# where the declared column type tells; computed values (AVG over integers is a DECIMAL
# in MySQL, a float here) still differ, see docs/sql.md.

def _datetime(raw: bytes):
    text = raw.decode("utf-8", "replace")
    try:
        return datetime.datetime.fromisoformat(text)
    except ValueError:
        return text


def _date(raw: bytes):
    text = raw.decode("utf-8", "replace")
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        return text


def _decimal_converter(scale: int):
    quantum = decimal.Decimal(1).scaleb(-scale)

    def convert(raw: bytes):
        text = raw.decode("utf-8", "replace")
        try:
            return decimal.Decimal(text).quantize(quantum, rounding=decimal.ROUND_HALF_UP)
        except decimal.InvalidOperation:
            return text
    return convert


for _name, _convert in (("DATETIME", _datetime), ("TIMESTAMP", _datetime), ("DATE", _date)):
    sqlite3.register_converter(_name, _convert)
for _scale in range(31):
    sqlite3.register_converter(f"DECIMAL_{_scale}", _decimal_converter(_scale))


def _mysql_ci(a: str, b: str) -> int:
    """MySQL's utf8mb4_general_ci, nearly: case-insensitive, trailing spaces ignored."""
    x, y = a.rstrip(" ").casefold(), b.rstrip(" ").casefold()
    return (x > y) - (x < y)


def prepare_connection(conn: sqlite3.Connection) -> sqlite3.Connection:
    """Register what icplay's converted databases need on any connection to them."""
    conn.create_collation("MYSQL_CI", _mysql_ci)
    return conn


def _authorize(action: int, arg1, arg2, _db, _trigger) -> int:
    """Keep the agent inside its in-memory copy: no ATTACH (or VACUUM INTO) of host files,
    no lifting the size cap."""
    if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA and str(arg1).lower() == "max_page_count" and arg2 is not None:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def cache_dir() -> Path:
    return home_dir() / "cache" / "sqlite"


def _shown_type(declared: str) -> str:
    """A column type as people expect it: DECIMAL_4(19, 4) is icplay's DECIMAL(19, 4)."""
    return re.sub(r"^DECIMAL_\d+", "DECIMAL", declared)


class _Deadline:
    """The progress handler's state: abort when past the deadline or interrupted."""

    def __init__(self):
        self.deadline = float("inf")
        self.interrupted = False
        self.timed_out = False

    def start(self, timeout: float | None) -> None:
        self.deadline = time.monotonic() + timeout if timeout else float("inf")
        self.interrupted = False
        self.timed_out = False

    def __call__(self) -> int:
        if self.interrupted:
            return 1
        if time.monotonic() > self.deadline:
            self.timed_out = True
            return 1
        return 0


class SqliteBackend:
    """SQL episodes on SQLite; see the module docstring."""

    kind = "sqlite"

    def __init__(self, timeout: float | None = None, max_rows: int | None = None,
                 progress: Progress | None = None, cache: str | Path | None = None,
                 gold_dialect: str = "mysql", **_ignored):
        self.timeout = DEFAULT_TIMEOUT if timeout is None else timeout
        self.max_rows = DEFAULT_MAX_ROWS if max_rows is None else max_rows
        self.progress = progress
        self.cache = Path(cache) if cache else cache_dir()
        self.gold_dialect = gold_dialect     # "mysql": rewrite gold queries with sqlglot first
        self._templates: dict[tuple[str, str], sqlite3.Connection] = {}
        self._lock = threading.Lock()
        self._catalog: Catalog | None = None
        self._db: str | None = None
        self._conns: dict[str, sqlite3.Connection] = {}
        self._conn: sqlite3.Connection | None = None
        self._deadline = _Deadline()
        # One thread at a time on the episode's connections (the runner's statement, the
        # schema browser's worker). Two threads on one connection can deadlock: a statement's
        # authorizer and progress callbacks need the GIL while SQLite holds the connection's
        # mutex, and some sqlite3 calls wait for that mutex holding the GIL. ``interrupt``
        # stays outside it (sqlite3_interrupt is made to be called from another thread).
        self._using = threading.RLock()

    # --- lifecycle ------------------------------------------------------------------

    def start(self) -> None:
        """Nothing to start: SQLite lives in this process."""

    def reset(self, db: str | None, databases: str | Path | None = None) -> None:
        """A new episode on a pristine copy of ``db`` (the first database if None)."""
        with self._using:
            self._reset(db, databases)

    def _reset(self, db: str | None, databases: str | Path | None) -> None:
        self._close_episode()
        self._catalog = load_catalog(databases or default_databases())
        name = db or self._catalog.names[0]
        self._db = self._catalog.get(name).name
        self._conn = self._episode_conn(self._db)

    def close(self) -> None:
        self._close_episode()
        with self._lock:
            for conn in self._templates.values():
                conn.close()
            self._templates.clear()

    def _close_episode(self) -> None:
        with self._using:
            for conn in self._conns.values():
                conn.close()
            self._conns.clear()
            self._conn = None

    # --- templates and copies -------------------------------------------------------

    def template_file(self, catalog: Catalog, db: str) -> Path:
        """The cached SQLite file of one database, built from its MySQL text if missing."""
        entry = catalog.get(db)
        path = self.cache / f"{catalog.digest}-v{CONVERTER_VERSION}" / f"{entry.name.lower()}.sqlite"
        if path.is_file():
            return path
        if self.progress:
            self.progress(f"converting database {entry.name} to SQLite (once)")
        statements = convert_statements(entry.statements, f"{catalog.source} database {entry.name}")
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        partial.unlink(missing_ok=True)
        conn = prepare_connection(sqlite3.connect(partial))
        try:
            conn.execute("PRAGMA journal_mode=OFF")
            conn.execute("BEGIN")
            for statement in statements:
                try:
                    conn.execute(statement)
                except sqlite3.Error as exc:
                    raise SqlBackendError(f"{catalog.source} database {entry.name}: SQLite rejects "
                                          f"{' '.join(statement.split())[:100]}: {exc}") from None
            conn.execute("COMMIT")
        finally:
            conn.close()
        os.replace(partial, path)
        return path

    def _template(self, catalog: Catalog, db: str) -> sqlite3.Connection:
        key = (catalog.digest, db.lower())
        with self._lock:
            conn = self._templates.get(key)
            if conn is None:
                source = sqlite3.connect(f"file:{self.template_file(catalog, db)}?mode=ro", uri=True)
                conn = prepare_connection(sqlite3.connect(":memory:", check_same_thread=False))
                source.backup(conn)
                source.close()
                self._templates[key] = conn
            return conn

    def _copy(self, db: str) -> sqlite3.Connection:
        """A fresh in-memory copy of a database of the current catalog."""
        assert self._catalog is not None
        template = self._template(self._catalog, db)
        conn = prepare_connection(sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None,
                                                  detect_types=sqlite3.PARSE_DECLTYPES))
        with self._lock:
            template.backup(conn)
        conn.execute(f"PRAGMA max_page_count = {MAX_PAGES}")
        if hasattr(conn, "setlimit"):   # Python 3.11+
            conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        conn.set_authorizer(_authorize)
        conn.set_progress_handler(self._deadline, _PROGRESS_STEPS)
        return conn

    def _episode_conn(self, db: str) -> sqlite3.Connection:
        key = db.lower()
        if key not in self._conns:
            self._conns[key] = self._copy(db)
        return self._conns[key]

    # --- running statements ---------------------------------------------------------

    def execute(self, sql: str) -> QueryResult:
        """Run one agent statement in the episode's copy."""
        with self._using:
            return self._execute(sql)

    def _execute(self, sql: str) -> QueryResult:
        if self._conn is None:
            raise SqlBackendError("no episode: call reset(db, databases) first")
        refused = not_utf8(sql)
        if refused is not None:
            return refused
        used = is_use(sql)
        if used is not None:
            return self._use(used)
        emulated = self._mysql_show(sql)
        if emulated is not None:
            return emulated
        return self._run(self._conn, sql, self.timeout, self.max_rows)

    def gold(self, sql: str) -> QueryResult:
        """Run a gold query on a fresh pristine copy of the episode's database."""
        if self._db is None:
            raise SqlBackendError("no episode: call reset(db, databases) first")
        conn = self._copy(self._db)
        try:
            query = sql
            if self.gold_dialect == "mysql":
                query = mysql_query_to_sqlite(sql) or sql
            result = self._run(conn, query, GOLD_TIMEOUT, None)
            if result.error and query != sql:
                result = self._run(conn, sql, GOLD_TIMEOUT, None)
            return result
        finally:
            conn.close()

    def interrupt(self) -> None:
        """Stop the running statement (any thread); the connection stays usable."""
        self._deadline.interrupted = True
        conn = self._conn
        if conn is not None:
            conn.interrupt()

    def _run(self, conn: sqlite3.Connection, sql: str, timeout: float | None, max_rows: int | None) -> QueryResult:
        started = time.monotonic()
        self._deadline.start(timeout)
        result = QueryResult()
        cursor = None
        try:
            cursor = conn.execute(sql)
            if cursor.description is not None:
                result.columns = [d[0] for d in cursor.description]
                if max_rows is None:
                    result.rows = cursor.fetchall()
                else:
                    rows = cursor.fetchmany(max_rows + 1)
                    result.truncated = len(rows) > max_rows
                    result.rows = rows[:max_rows]
            result.rowcount = cursor.rowcount
        except (sqlite3.Error, ValueError, OverflowError) as exc:
            result.columns, result.rows = None, []
            if self._deadline.timed_out:
                result.timed_out = True
                result.error = f"Query execution was interrupted (statement timeout of {timeout:g} s exceeded)"
            elif self._deadline.interrupted:
                result.interrupted = True
                result.error = "Query execution was interrupted"
            else:
                result.error = str(exc)
        finally:
            if cursor is not None:
                cursor.close()
            if conn.in_transaction and result.error and (result.timed_out or result.interrupted):
                pass   # the agent's own transaction stays open, as on MySQL
            self._deadline.start(None)
        result.duration = time.monotonic() - started
        return result

    def _use(self, db: str) -> QueryResult:
        """MySQL's ``USE db`` on SQLite: switch to this episode's copy of another database."""
        assert self._catalog is not None
        if db not in self._catalog:
            return QueryResult(error=f"Unknown database '{db}'")
        self._conn = self._episode_conn(self._catalog.get(db).name)
        self._db = self._catalog.get(db).name
        return QueryResult(columns=None, rowcount=0)

    _SHOW_TABLES = re.compile(r"\s*show\s+(?:full\s+)?tables\s*;?\s*", re.I)
    _DESCRIBE = re.compile(r"\s*(?:desc|describe|explain|show\s+columns\s+from)\s+[`\"]?(\w+)[`\"]?\s*;?\s*", re.I)

    def _mysql_show(self, sql: str) -> QueryResult | None:
        """``SHOW TABLES`` and ``DESCRIBE t``, which SQLite lacks and MySQL users type."""
        if self._SHOW_TABLES.fullmatch(sql):
            return QueryResult(columns=[f"Tables_in_{self._db}"],
                               rows=[(t.name,) for t in self.schema()], rowcount=0)
        match = self._DESCRIBE.fullmatch(sql)
        if match:
            table = match.group(1)
            assert self._conn is not None
            info = self._conn.execute(f'PRAGMA table_info("{table}")').fetchall()
            if not info:
                return QueryResult(error=f"no such table: {table}")
            rows = [(name, _shown_type(type_).lower(), "NO" if notnull else "YES",
                     "PRI" if pk else "", default, "") for _, name, type_, notnull, default, pk in info]
            return QueryResult(columns=["Field", "Type", "Null", "Key", "Default", "Extra"], rows=rows, rowcount=0)
        return None

    # --- schema browser -------------------------------------------------------------

    def schema(self) -> list[Table]:
        """Tables and columns of the episode's current database, as they are now."""
        with self._using:
            if self._conn is None:
                return []
            names = [r[0] for r in self._conn.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
                "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
            tables = []
            for name in names:
                info = self._conn.execute(f'PRAGMA table_info("{name}")').fetchall()
                tables.append(Table(name, tuple(Column(c[1], _shown_type(c[2])) for c in info)))
            return tables

    @property
    def database(self) -> str | None:
        return self._db
