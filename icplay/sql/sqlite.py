"""The embedded backend: SQLite, a pristine in-memory copy per episode, in its own process.

Each task database is converted from its MySQL text once and cached as a file under
``~/.icplay/cache/sqlite`` (keyed by the source's digest), then held in memory as an
image (its serialized bytes, shared by every backend of the process, ``TEMPLATE_BUDGET``
bytes at most). The solver's statements run in a worker process (``sqlite_worker``),
borrowed warm from a pool (``sqlite_pool``) at the first reset and given back, reset, at
``close``: it gets each image once and gives the episode (and each database it ``USE``s) a
fresh copy of it at every reset. So a ``DROP TABLE`` in one episode can never reach the
next one, nothing a statement does (a pragma, a memory bomb, a crash) reaches icplay's
process or another episode, and the episode's memory is bounded in bytes. Gold queries
run here, in icplay's process, on a fresh copy of the image.

Statements run with a deadline checked by a progress handler (a runaway cross join is
stopped and the connection keeps working), results are capped at ``max_rows`` rows and
their observation at ``OUTPUT_CAP`` bytes, and ``interrupt()`` may be called from any
thread.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable

from icplay.paths import home_dir
from icplay.sql.base import (
    DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT, Column, Progress, QueryResult, SqlBackendError, Table, is_use, not_utf8,
)
from icplay.sql.convert import CONVERTER_VERSION, convert_statements, mysql_query_to_sqlite
from icplay.sql.dump import Catalog, default_databases, load_catalog
from icplay.sql.sqlite_guard import Deadline, confine, episode_connection, prepare_connection, run_statement
from icplay.sql.sqlite_pool import POOL, WorkerPool
from icplay.sql.sqlite_worker import START_TIMEOUT, WorkerClient, WorkerLost

__all__ = ["SqliteBackend", "prepare_connection", "cache_dir"]

GOLD_TIMEOUT = 60.0
WORKER_GRACE = 3.0   # seconds past the statement timeout before a silent worker is stopped


TEMPLATE_BUDGET = 256 << 20   # bytes of pristine images kept in icplay's process


class Templates:
    """Pristine images by cache file, shared by the backends of this process (oldest
    dropped past ``TEMPLATE_BUDGET``): a new backend loads nothing already loaded."""

    def __init__(self, budget: int = TEMPLATE_BUDGET) -> None:
        self.budget = budget
        self._images: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def image(self, path: Path) -> bytes:
        key = str(path)
        with self._lock:
            image = self._images.pop(key, None)
            if image is None:
                image = _load_image(path)
            self._images[key] = image
            while len(self._images) > 1 and sum(map(len, self._images.values())) > self.budget:
                del self._images[next(iter(self._images))]
            return image


def _load_image(path: Path) -> bytes:
    source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    memory = sqlite3.connect(":memory:")
    try:
        source.backup(memory)
        return memory.serialize()
    finally:
        source.close()
        memory.close()


TEMPLATES = Templates()


def cache_dir() -> Path:
    return home_dir() / "cache" / "sqlite"


def _shown_type(declared: str) -> str:
    """A column type as people expect it: DECIMAL_4(19, 4) is icplay's DECIMAL(19, 4)."""
    return re.sub(r"^DECIMAL_\d+", "DECIMAL", declared)


class SqliteBackend:
    """SQL episodes on SQLite; see the module docstring."""

    kind = "sqlite"

    def __init__(self, timeout: float | None = None, max_rows: int | None = None,
                 progress: Progress | None = None, cache: str | Path | None = None,
                 gold_dialect: str = "mysql", pool: WorkerPool | None = None, **_ignored: Any) -> None:
        self.timeout = DEFAULT_TIMEOUT if timeout is None else timeout
        self.max_rows = DEFAULT_MAX_ROWS if max_rows is None else max_rows
        self.progress = progress
        self.cache = Path(cache) if cache else cache_dir()
        self.gold_dialect = gold_dialect     # "mysql": rewrite gold queries with sqlglot first
        self._catalog: Catalog | None = None
        self._db: str | None = None
        self.pool = pool or POOL
        self._worker: WorkerClient | None = None    # borrowed from the pool at reset, given back at close
        self._lease = 0
        self._gold_deadline = Deadline()
        # One thread at a time talks to the worker (the runner's statement, the schema
        # browser's worker): its protocol is one request, one reply. ``interrupt`` stays
        # outside (it signals the worker).
        self._using = threading.RLock()

    # --- lifecycle ------------------------------------------------------------------

    def start(self) -> None:
        """Nothing to start: the worker is borrowed at the first episode."""

    def reset(self, db: str | None, databases: str | Path | None = None) -> None:
        """A new episode on a pristine copy of ``db`` (the first database if None)."""
        with self._using:
            self._catalog = load_catalog(databases or default_databases())
            self._db = self._catalog.get(db or self._catalog.names[0]).name
            try:
                self._fresh_session()
            except WorkerLost as exc:
                raise SqlBackendError(f"SQLite: {exc}") from None

    def _fresh_session(self) -> None:
        """The worker's episode state dropped and the current database opened pristine; a
        worker whose process-wide settings moved is replaced first."""
        assert self._db is not None
        if self._worker is None:
            self._worker = self.pool.acquire()
            self._lease = self._worker.lease
        key = self._send_template(self._db)
        reply = self._worker.request({"op": "reset", "key": key}, timeout=START_TIMEOUT)
        if reply.get("replace"):
            self._worker.stop()
            key = self._send_template(self._db)
            reply = self._worker.request({"op": "reset", "key": key}, timeout=START_TIMEOUT)
            if reply.get("replace"):
                raise WorkerLost("a new SQLite worker process does not keep icplay's memory limits")
        if reply.get("error"):
            raise WorkerLost(reply["error"])

    def close(self) -> None:
        """Give the worker back to the pool (reset there, or stopped if unsound)."""
        with self._using:
            worker, self._worker = self._worker, None
            self._db = None
            if worker is not None:
                self.pool.release(worker)

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

    def _image(self, db: str, catalog: Catalog | None = None) -> bytes:
        catalog = catalog or self._catalog
        assert catalog is not None
        return TEMPLATES.image(self.template_file(catalog, db))

    def _send_template(self, db: str) -> str:
        """The worker's key of ``db``'s image, sent to it if it lacks it."""
        assert self._catalog is not None and self._worker is not None
        key = str(self.template_file(self._catalog, db))
        self._worker.send_image(key, lambda: self._image(db))
        return key

    def _copy(self, db: str, catalog: Catalog) -> sqlite3.Connection:
        """A fresh in-memory copy of a database of ``catalog``, in this process (golds)."""
        conn = episode_connection()
        conn.deserialize(self._image(db, catalog))
        confine(conn, self._gold_deadline)
        return conn

    # --- running statements ---------------------------------------------------------

    def execute(self, sql: str) -> QueryResult:
        """Run one agent statement in the episode's copy (in the worker)."""
        with self._using:
            return self._execute(sql)

    def _execute(self, sql: str) -> QueryResult:
        if self._db is None:
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
        started = time.monotonic()
        reply = self._call({"op": "execute", "sql": sql, "timeout": self.timeout, "max_rows": self.max_rows},
                           self.timeout + WORKER_GRACE if self.timeout else None)
        if "result" in reply:
            result = QueryResult(**reply["result"])
        else:
            result = QueryResult(error=reply["error"], notes=reply.get("notes", []))
        result.duration = time.monotonic() - started
        return result

    def _call(self, message: dict[str, Any], timeout: float | None) -> dict[str, Any]:
        """One request to the worker. If the worker is lost, a new one starts on a pristine
        copy of the current database and the reply is an error saying so."""
        assert self._worker is not None
        try:
            return self._worker.request(message, timeout)
        except WorkerLost as exc:
            lost = str(exc)
        try:
            self._fresh_session()
            restarted = (f"{lost}; a new one was started on a pristine copy of {self._db}, "
                         "so this episode's changes are gone")
        except WorkerLost as exc:
            restarted = f"{lost}; starting a new one failed too ({exc})"
        return {"error": restarted, "notes": ["the database session was restarted; session state is gone"]}

    def gold(self, sql: str) -> QueryResult:
        """Run a gold query on a fresh pristine copy of the episode's database, in this process."""
        return self.deferred_gold(sql)()

    def deferred_gold(self, sql: str) -> Callable[[], QueryResult]:
        """The gold of the episode just reset, run when called (on a fresh pristine copy of the
        database the episode began on, in this process: nothing the episode did since reaches it,
        a ``USE`` neither), so an env can leave it out of the way of a run's first model request."""
        catalog, db = self._catalog, self._db
        if catalog is None or db is None:
            raise SqlBackendError("no episode: call reset(db, databases) first")
        return lambda: self._gold_on(catalog, db, sql)

    def _gold_on(self, catalog: Catalog, db: str, sql: str) -> QueryResult:
        conn = self._copy(db, catalog)
        try:
            query = sql
            if self.gold_dialect == "mysql":
                query = mysql_query_to_sqlite(sql) or sql
            result = self._run_gold(conn, query)
            if result.error and query != sql:
                result = self._run_gold(conn, sql)
            return result
        finally:
            conn.close()

    def interrupt(self) -> None:
        """Stop the running statement (any thread); the connection stays usable."""
        worker = self._worker
        if worker is not None:
            worker.interrupt(self._lease)

    def _run_gold(self, conn: sqlite3.Connection, sql: str) -> QueryResult:
        return run_statement(conn, sql, self._gold_deadline, GOLD_TIMEOUT, None,
                             lambda cursor, result: setattr(result, "rows", cursor.fetchall()))

    def _use(self, db: str) -> QueryResult:
        """MySQL's ``USE db`` on SQLite: switch to this episode's copy of another database."""
        assert self._catalog is not None
        if db not in self._catalog:
            return QueryResult(error=f"Unknown database '{db}'")
        name = self._catalog.get(db).name
        try:
            key = self._send_template(name)
        except WorkerLost as exc:
            return QueryResult(error=str(exc))
        reply = self._call({"op": "open", "key": key}, START_TIMEOUT)
        if reply.get("error"):
            return QueryResult(error=reply["error"], notes=reply.get("notes", []))
        self._db = name
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
            reply = self._call({"op": "table_info", "table": table}, START_TIMEOUT)
            if reply.get("error"):
                return QueryResult(error=reply["error"], notes=reply.get("notes", []))
            info = reply["info"]
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
            if self._db is None:
                return []
            reply = self._call({"op": "schema"}, START_TIMEOUT)
            return [Table(name, tuple(Column(c, _shown_type(t)) for c, t in columns))
                    for name, columns in reply.get("tables", [])]

    @property
    def database(self) -> str | None:
        return self._db
