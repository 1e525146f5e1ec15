"""The SQL backend protocol: one episode's database session, pristine at every reset.

Two implementations share it: ``sqlite`` (embedded, zero set-up) and ``mysql`` (a MariaDB
or MySQL server in Docker, for parity with InterCode's recorded numbers). The SQL
environment and ``icplay rescore`` only ever talk to this protocol, so a test or the TUI
can plug in either one.

What a backend promises:

- ``reset(db, databases)`` starts an episode on a pristine copy of database ``db`` taken
  from ``databases`` (a MySQL dump file or a folder of ``<db>.sql`` files), with a fresh
  session: nothing an earlier episode did (DDL, DML, session variables, temporary
  tables) is visible.
- ``execute(sql)`` runs one statement with a statement timeout and a row cap; errors come
  back in the result (never raised), since InterCode shows them to the agent as
  observations.
- ``gold(sql)`` runs a query on a pristine copy of the episode's database, whatever the
  agent did to its own copy.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol, runtime_checkable

from icplay.sandbox.base import SandboxError

DEFAULT_TIMEOUT = 10.0          # seconds per statement, like InterCode's bash actions
DEFAULT_MAX_ROWS = 100_000      # rows kept per result; the rest are counted as truncated
OUTPUT_CAP = 1024 * 1024        # bytes of an observation kept, as for shell output; the rest counted
ROWS_CAP = 4 << 20              # bytes of text of the rows kept for tables (info["rows"]); the rest digested
BATCH_BYTES = 4 << 20           # rows fetched at once, in bytes of their text (CappedRows.read)
ERROR_PREFIX = "Error executing query: "

Progress = Callable[[str], None]


class SqlBackendError(SandboxError):
    """A backend that cannot start or load its databases; the message says what to do.

    A SandboxError, so the CLI prints it as one sentence rather than a traceback."""


@dataclass
class QueryResult:
    """What one statement produced, with the driver's values untouched.

    ``columns`` is None when the statement returned no result set (an UPDATE, a CREATE):
    InterCode's observation is then ``None`` and the reward is 0. ``rows`` holds at most
    the backend's row cap; ``truncated`` says more existed.
    """

    columns: list[str] | None = None
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    error: str | None = None
    truncated: bool = False
    rowcount: int = -1
    duration: float = 0.0
    timed_out: bool = False
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)
    # When the observation passed OUTPUT_CAP bytes: its first OUTPUT_CAP bytes and the
    # bytes dropped. When the rows passed ROWS_CAP: every row's key for the reward
    # (``row_key`` for the rows kept in ``rows``, a ``digest_token`` for the others), so
    # the reward still sees every row.
    shown: str | None = None
    dropped_bytes: int = 0
    row_keys: list[str] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def is_result(self) -> bool:
        """Did the statement return rows (possibly none)? Only then can it score."""
        return self.error is None and self.columns is not None

    @property
    def intercode_observation(self) -> str:
        """The observation string InterCode would have recorded for this statement."""
        if self.error is not None:
            return ERROR_PREFIX + self.error
        if self.columns is None:
            return "None"
        if self.shown is not None:
            return self.shown
        return str(self.rows)

    def keys(self) -> list[str]:
        """Every row's key as the reward compares rows (see ``row_keys``)."""
        if self.row_keys is not None:
            return self.row_keys
        return [row_key(row) for row in self.rows]

    @property
    def observation(self) -> str:
        """InterCode's observation plus icplay's notes (truncation, restarts)."""
        text = self.intercode_observation
        notes = self.notes_list()
        if notes:
            text += "\n" + "\n".join(f"[icplay: {n}]" for n in notes)
        return text

    def notes_list(self) -> list[str]:
        """icplay's notes about the statement (truncation, restarts), for StepResult.info."""
        notes = list(self.notes)
        if self.dropped_bytes:
            notes.insert(0, f"output truncated: {self.dropped_bytes} more bytes not shown (limit {OUTPUT_CAP} bytes)")
        if self.truncated:
            kept = len(self.row_keys) if self.row_keys is not None else len(self.rows)
            notes.insert(0, f"result truncated: only the first {kept} rows were kept")
        return notes

    def info(self) -> dict[str, Any]:
        """Facts for StepResult.info: the REPL and the TUI print ``columns`` and ``rows``."""
        return {
            "columns": self.columns, "rows": self.rows, "truncated": self.truncated,
            "rowcount": self.rowcount, "error": self.error, "timed_out": self.timed_out,
            "interrupted": self.interrupted,
        }


def row_key(row: Iterable[Any]) -> str:
    """The string InterCode compares rows by (and prints them as)."""
    return str(tuple(row))


DIGEST_MARK = "\x00digest:"


def digest_token(key: str) -> str:
    """A short stand-in for a row key too big to keep: equal keys give equal tokens, and a
    token never equals a real key (keys start with ``(``). Hashed a slice at a time, so a
    huge key is never copied whole."""
    digest = hashlib.blake2b(digest_size=16)
    for start in range(0, len(key), _SLICE):
        digest.update(key[start:start + _SLICE].encode("utf-8", "surrogatepass"))
    return DIGEST_MARK + digest.hexdigest()


_SLICE = 1 << 20


def text_bytes(text: str) -> int:
    """UTF-8 length of ``text`` without copying it when it is ASCII (the common case)."""
    if text.isascii():
        return len(text)
    return sum(len(text[i:i + _SLICE].encode("utf-8", "surrogatepass")) for i in range(0, len(text), _SLICE))


@dataclass
class CappedRows:
    """Rows read from a cursor within byte budgets. The observation's text is
    ``str(rows)``, built piece by piece and kept up to ``cap`` bytes (the rest counted);
    the rows themselves are kept for tables up to ``rows_cap`` bytes of their text; past
    that each row is only digested for the reward."""

    max_rows: int | None
    cap: int = OUTPUT_CAP
    rows_cap: int = ROWS_CAP
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    truncated: bool = False
    dropped: int = 0
    _parts: list[str] = field(default_factory=list)
    _used: int = 1                  # the opening "["
    _rows_used: int = 0
    _full: bool = False

    def add(self, row: tuple[Any, ...]) -> bool:
        """Take one row; False once the row cap is reached (the row is not kept)."""
        if self.max_rows is not None and len(self.keys) >= self.max_rows:
            self.truncated = True
            return False
        key = row_key(row)
        separator = ", " if self.keys else ""
        size = len(separator) + text_bytes(key)
        if self._full:
            self.dropped += size
        elif self._used + size + 1 <= self.cap:
            self._parts.append(separator + key)
            self._used += size
        else:
            self._full = True
            room = self.cap - self._used
            head = (separator + key[:room]).encode("utf-8", "surrogatepass")[:room].decode("utf-8", "ignore")
            self._parts.append(head)
            kept = len(head.encode("utf-8", "surrogatepass"))
            self._used += kept
            self.dropped += size - kept
        if len(self.rows) == len(self.keys) and self._rows_used + size <= self.rows_cap:
            self.rows.append(tuple(row))
            self.keys.append(key)
            self._rows_used += size
        else:
            self.keys.append(digest_token(key))
        return True

    def read(self, fetch: Callable[[int], list[Any]]) -> "CappedRows":
        """Fetch batches with ``fetch(n)`` until the cursor is exhausted or the row cap.

        A batch holds about ``BATCH_BYTES`` of rows at most, judged by the largest row so
        far (the first batch is one row), so a result of huge values is read a row at a time."""
        largest = 0      # bytes of the largest row so far (0: none read yet)
        while True:
            want = max(1, min(256, BATCH_BYTES // largest)) if largest else 1
            if self.max_rows is not None:
                want = max(1, min(want, self.max_rows + 1 - len(self.keys)))
            batch = fetch(want)
            if not batch:
                return self
            for row in batch:
                before = self._used + self.dropped
                if not self.add(row):
                    return self
                largest = max(largest, self._used + self.dropped - before)

    def fill(self, result: "QueryResult") -> None:
        """Put the rows, and past the budgets the shown text and every row's key, in ``result``."""
        result.rows = self.rows
        result.truncated = self.truncated
        if len(self.rows) < len(self.keys):
            result.row_keys = self.keys
        if self._full:
            result.shown = "[" + "".join(self._parts)
            result.dropped_bytes = self.dropped + 1          # the closing "]"


@dataclass(frozen=True)
class Column:
    name: str
    type: str


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]


@runtime_checkable
class SqlBackend(Protocol):
    """One episode's database session. ``start`` may be slow; the rest is quick."""

    kind: str            # "sqlite" or "mysql"
    timeout: float       # statement timeout in seconds
    max_rows: int        # row cap per result

    def start(self) -> None: ...

    def reset(self, db: str | None, databases: str | Path | None) -> None: ...

    def execute(self, sql: str) -> QueryResult: ...

    def gold(self, sql: str) -> QueryResult: ...

    def schema(self) -> list[Table]: ...

    def interrupt(self) -> None: ...

    def close(self) -> None: ...


# --- statement classification -----------------------------------------------------------

READ_ONLY_VERBS = {"SELECT", "SHOW", "DESC", "DESCRIBE", "EXPLAIN", "WITH", "VALUES", "TABLE", "HELP", "USE"}
_QUOTES = "'\"`"


def mysql_code(sql: str) -> str | None:
    """The statement as MariaDB's lexer reads it: comments become a space, and the content
    of executable comments (``/*! ... */``, ``/*!50700 ... */``, ``/*M! ... */``,
    ``/*M!100500 ... */``) is code, its version number dropped (kept whatever the version:
    a check must not depend on which server reads it). String literals are kept as they
    are. None when the text cannot be read with certainty (an unterminated comment or
    string, a comment inside an executable comment): callers then assume the worst.
    """
    out: list[str] = []
    i, n, executable = 0, len(sql), False
    while i < n:
        c = sql[i]
        if c in _QUOTES:
            end = _string_end(sql, i)
            if end is None:
                return None
            out.append(sql[i:end])
            i = end
        elif c == "#" or (sql.startswith("--", i) and (i + 2 >= n or sql[i + 2] <= " ")):
            newline = sql.find("\n", i)
            i = n if newline < 0 else newline
            out.append(" ")
        elif sql.startswith("/*", i):
            marker = re.match(r"/\*M?!(\d{0,6})", sql[i:])
            if marker and not executable:
                executable = True
                i += marker.end()
                out.append(" ")
                continue
            if executable:
                return None   # a comment inside an executable comment: the servers disagree
            end = sql.find("*/", i + 2)
            if end < 0:
                return None
            i = end + 2
            out.append(" ")
        elif executable and sql.startswith("*/", i):
            executable = False
            i += 2
            out.append(" ")
        else:
            out.append(c)
            i += 1
    return None if executable else "".join(out)


def _string_end(sql: str, start: int) -> int | None:
    """The index after the string literal opening at ``start`` (backslash escapes and
    doubled quotes), None if it never closes."""
    quote, i = sql[start], start + 1
    while i < len(sql):
        c = sql[i]
        if c == "\\" and quote != "`":
            i += 2
        elif c == quote:
            if sql.startswith(quote * 2, i):
                i += 2
            else:
                return i + 1
        else:
            i += 1
    return None


def leading_verb(sql: str) -> str:
    """The statement's first keyword in upper case as the server reads it ('' if none or
    unreadable): the content of an executable comment counts, ``/*!DROP TABLE t*/`` is a DROP."""
    code = mysql_code(sql)
    if code is None:
        return ""
    match = re.match(r"[A-Za-z]+", code.lstrip(" \t\r\n\f\v("))
    return match.group(0).upper() if match else ""


def is_read_only(sql: str) -> bool:
    """Can this statement leave the database changed? False means "maybe", never "no".

    The MySQL backend uses it to skip restoring a database no statement could have
    touched; anything unrecognised (or unreadable) counts as a write. Executable comments
    are read as code, as the server reads them.
    """
    code = mysql_code(sql)
    if code is None or leading_verb(sql) not in READ_ONLY_VERBS:
        return False
    # SELECT ... INTO @var / OUTFILE changes state outside the tables, and a second
    # statement after ';' is not covered by the first verb.
    return ";" not in code.strip().rstrip(";") and not re.search(r"\binto\b", code, re.I)


def not_utf8(sql: str) -> QueryResult | None:
    """An error result for a statement holding bytes that are not UTF-8, else None.

    Such bytes reach icplay as lone surrogates (``surrogateescape``); no database driver
    can send them, so the statement is refused whole, before it reaches the database,
    rather than breaking the connection. (The trajectory still keeps what was typed.)"""
    try:
        sql.encode("utf-8")
    except UnicodeEncodeError as exc:
        return QueryResult(error=f"the statement holds bytes that are not UTF-8 (at character {exc.start + 1}); "
                                 "nothing was run")
    return None


def is_use(sql: str) -> str | None:
    """The database named by a ``USE db`` statement, else None."""
    code = mysql_code(sql)
    match = re.fullmatch(r"\s*use\s+[`\"]?([\w$]+)[`\"]?\s*;?\s*", code or "", re.I)
    return match.group(1) if match else None
