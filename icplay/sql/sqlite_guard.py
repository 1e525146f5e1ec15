"""What every SQLite connection of icplay is set up with, and what confines an episode's.

Kept apart from the backend so the episode's worker process (``sqlite_worker``) can load
it without sqlglot: MySQL-like value converters and collation for any connection to a
converted database, and ``confine`` for a connection a solver's statements run on:

- a deadline checked by a progress handler (timeouts and ``interrupt``);
- values and rows capped in bytes (``SQLITE_LIMIT_LENGTH``), each database copy capped
  in pages, temporary tables and sorts kept in memory (the worker's heap limit counts
  them, no file is written);
- an authorizer that lets a statement act on its own connection's databases only. SQLite
  has pragmas and functions that act on the whole process or on host files (heap limits,
  the temporary-file folder, memory-mapped files, extension loading, tokenizer pointers)
  and ATTACH reaches any file: they are refused, each with one sentence saying why.
  Pragmas are allowed by name (a list of those acting on the connection's own
  databases); a pragma not on the list, or one SQLite adds later, is refused.
"""

from __future__ import annotations

import datetime
import decimal
import sqlite3
import time
from typing import Any, Callable

from icplay.sql.base import QueryResult

HEAP_BYTES = 256 << 20      # SQLite's memory for one episode (the worker's hard heap limit)
MAX_PAGES = 65_536           # 256 MB per database copy (4 KiB pages)
MAX_VALUE_BYTES = 64 << 20   # the largest string, blob or row a statement may build
_PROGRESS_STEPS = 2000       # SQLite VM instructions between deadline checks (~0.1 ms)
OUT_OF_MEMORY = (f"out of memory: the episode's databases and statements may use at most {HEAP_BYTES >> 20} MiB; "
                 "the statement was stopped and the session keeps working")


# --- MySQL-like values ------------------------------------------------------------------
# The reward compares `str(tuple(row))`, so a value's Python type matters: MySQL's
# connector returns datetime for DATETIME columns and Decimal('567.0000') for a
# DECIMAL(19,4) column. These converters and the collation make SQLite return the same
# where the declared column type tells; computed values (AVG over integers is a DECIMAL
# in MySQL, a float here) still differ, see docs/sql.md.

def _converter(parse: Callable[[str], Any], invalid: type[Exception] = ValueError) -> Callable[[bytes], Any]:
    """A converter of a declared type: the column's text parsed, or kept as text when it does not parse."""
    def convert(raw: bytes) -> Any:
        text = raw.decode("utf-8", "replace")
        try:
            return parse(text)
        except invalid:
            return text
    return convert


def _decimal_converter(scale: int) -> Callable[[bytes], Any]:
    quantum = decimal.Decimal(1).scaleb(-scale)
    return _converter(lambda text: decimal.Decimal(text).quantize(quantum, rounding=decimal.ROUND_HALF_UP),
                      decimal.InvalidOperation)


_datetime, _date = _converter(datetime.datetime.fromisoformat), _converter(datetime.date.fromisoformat)
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


def episode_connection() -> sqlite3.Connection:
    """An empty in-memory connection as an episode's copies use it (autocommit, types)."""
    return prepare_connection(sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None,
                                              detect_types=sqlite3.PARSE_DECLTYPES))


# --- the authorizer ---------------------------------------------------------------------

# Pragmas that act on this connection's own databases only: reading and setting them is
# harmless to the process and to other episodes.
LOCAL_PRAGMAS = frozenset("""
analysis_limit application_id auto_vacuum automatic_index busy_timeout cache_size cache_spill
case_sensitive_like cell_size_check collation_list compile_options count_changes data_version
database_list default_cache_size defer_foreign_keys empty_result_callbacks encoding
foreign_key_check foreign_key_list foreign_keys freelist_count full_column_names function_list
ignore_check_constraints incremental_vacuum index_info index_list index_xinfo integrity_check
legacy_alter_table locking_mode module_list optimize page_count page_size pragma_list query_only
quick_check read_uncommitted recursive_triggers reverse_unordered_selects secure_delete
short_column_names shrink_memory stats synchronous table_info table_list table_xinfo user_version
""".split())

# Pragmas that may be read but not set, and why setting them is refused.
READ_ONLY_PRAGMAS = {
    "max_page_count": "it would lift the episode's database size limit",
    "journal_mode": "an in-memory episode database keeps its journal in memory",
    "temp_store": "it would move temporary tables out of memory, past the episode's memory limit, into files",
    "schema_version": "writing it corrupts the database's schema",
    "threads": "it starts helper threads beyond the episode's statement",
    "trusted_schema": "it would let views and triggers call functions with side effects",
    "wal_autocheckpoint": "an in-memory episode database has no write-ahead log",
}

# Pragmas refused outright, and why: they act on the whole process or on host files.
PROCESS_PRAGMAS = {
    "hard_heap_limit": "it sets the memory limit of every SQLite connection in the process, not just this episode's",
    "soft_heap_limit": "it sets the memory limit of every SQLite connection in the process, not just this episode's",
    "temp_store_directory": "it names a host folder for the temporary files of every connection in the process",
    "data_store_directory": "it names a host folder for the database files of every connection in the process",
    "mmap_size": "it maps host files into the process's memory",
    "writable_schema": "it lets a statement corrupt the database's schema",
    "wal_checkpoint": "an in-memory episode database has no write-ahead log",
    "parser_trace": "it writes to the process's standard output",
    "vdbe_trace": "it writes to the process's standard output",
    "vdbe_listing": "it writes to the process's standard output",
    "vdbe_debug": "it writes to the process's standard output",
    "vdbe_addoptrace": "it writes to the process's standard output",
    "checkpoint_fullfsync": "it acts on host files",
    "fullfsync": "it acts on host files",
    "journal_size_limit": "it acts on host files",
    "legacy_file_format": "it acts on host files",
}

# Functions refused, and why.
PROCESS_FUNCTIONS = {
    "load_extension": "it loads a shared library from the host into the process",
    "fts3_tokenizer": "it reads and sets code pointers inside the process",
}


class Guard:
    """The authorizer of one connection; ``refused`` is the sentence of its last refusal."""

    def __init__(self) -> None:
        self.refused: str | None = None

    def _deny(self, sentence: str) -> int:
        self.refused = sentence
        return sqlite3.SQLITE_DENY

    def __call__(self, action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None) -> int:
        if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
            return self._deny("ATTACH, DETACH and VACUUM INTO are refused: an episode works on its own "
                              "databases only, never on other files or other episodes' databases")
        if action == sqlite3.SQLITE_FUNCTION and str(arg2).lower() in PROCESS_FUNCTIONS:
            name = str(arg2).lower()
            return self._deny(f"the function {name}() is refused: {PROCESS_FUNCTIONS[name]}")
        if action == sqlite3.SQLITE_PRAGMA:
            return self._pragma(str(arg1).lower(), arg2)
        return sqlite3.SQLITE_OK

    def _pragma(self, name: str, value: str | None) -> int:
        if name in LOCAL_PRAGMAS:
            return sqlite3.SQLITE_OK
        if name in READ_ONLY_PRAGMAS:
            if value is None:
                return sqlite3.SQLITE_OK
            return self._deny(f"setting PRAGMA {name} is refused: {READ_ONLY_PRAGMAS[name]}")
        if name in PROCESS_PRAGMAS:
            return self._deny(f"PRAGMA {name} is refused: {PROCESS_PRAGMAS[name]}")
        return self._deny(f"PRAGMA {name} is refused: only pragmas known to act on the episode's own "
                          "databases are allowed")


# --- the deadline -----------------------------------------------------------------------

class Deadline:
    """The progress handler's state: abort when past the deadline or interrupted."""

    def __init__(self) -> None:
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


def confine(conn: sqlite3.Connection, deadline: Deadline) -> Guard:
    """Limits, the authorizer and the deadline on a connection solver statements run on."""
    conn.execute("PRAGMA temp_store = MEMORY")
    conn.execute(f"PRAGMA max_page_count = {MAX_PAGES}")
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    conn.setlimit(sqlite3.SQLITE_LIMIT_WORKER_THREADS, 0)
    guard = Guard()
    conn.set_authorizer(guard)
    conn.set_progress_handler(deadline, _PROGRESS_STEPS)
    return guard


def run_statement(conn: sqlite3.Connection, sql: str, deadline: Deadline, timeout: float | None,
                  guard: Guard | None, collect: Callable[[sqlite3.Cursor, QueryResult], None]) -> QueryResult:
    """Run one statement under ``deadline``; ``collect`` reads its rows into the result.

    Every failure inside the statement (SQLite's errors, a value Python cannot hold, out
    of memory) is the result's error; a refusal of the authorizer reads as its sentence."""
    if guard is not None:
        guard.refused = None
    started = time.monotonic()
    deadline.start(timeout)
    result = QueryResult()
    cursor = None
    try:
        cursor = conn.execute(sql)
        if cursor.description is not None:
            result.columns = [d[0] for d in cursor.description]
            collect(cursor, result)
        result.rowcount = cursor.rowcount
    except (sqlite3.Error, ValueError, OverflowError, MemoryError, RecursionError) as exc:
        result = QueryResult()
        if deadline.timed_out:
            result.timed_out = True
            result.error = f"Query execution was interrupted (statement timeout of {timeout:g} s exceeded)"
        elif deadline.interrupted:
            result.interrupted = True
            result.error = "Query execution was interrupted"
        elif guard is not None and guard.refused:
            result.error = guard.refused
        elif isinstance(exc, MemoryError):
            result.error = OUT_OF_MEMORY
        else:
            result.error = str(exc) or type(exc).__name__
    finally:
        if cursor is not None:
            try:
                cursor.close()
            except sqlite3.Error:
                pass
        deadline.start(None)
    result.duration = time.monotonic() - started
    return result
