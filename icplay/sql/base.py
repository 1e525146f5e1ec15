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

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

from icplay.sandbox.base import SandboxError

DEFAULT_TIMEOUT = 10.0          # seconds per statement, like InterCode's bash actions
DEFAULT_MAX_ROWS = 100_000      # rows kept per result; the rest are counted as truncated
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
    rows: list[tuple] = field(default_factory=list)
    error: str | None = None
    truncated: bool = False
    rowcount: int = -1
    duration: float = 0.0
    timed_out: bool = False
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)

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
        return str(self.rows)

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
        if self.truncated:
            notes.insert(0, f"result truncated: only the first {len(self.rows)} rows were kept")
        return notes

    def info(self) -> dict[str, Any]:
        """Facts for StepResult.info: the REPL and the TUI print ``columns`` and ``rows``."""
        return {
            "columns": self.columns, "rows": self.rows, "truncated": self.truncated,
            "rowcount": self.rowcount, "error": self.error, "timed_out": self.timed_out,
            "interrupted": self.interrupted,
        }


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

_COMMENTS = re.compile(r"--[^\n]*|#[^\n]*|/\*(?!!).*?\*/", re.S)
READ_ONLY_VERBS = {"SELECT", "SHOW", "DESC", "DESCRIBE", "EXPLAIN", "WITH", "VALUES", "TABLE", "HELP", "USE"}


def leading_verb(sql: str) -> str:
    """The statement's first keyword in upper case, comments skipped ('' if none).

    Executable comments (``/*! ... */``) are kept, so they read as no verb at all and
    count as writes: whatever they hide is not trusted to be read-only.
    """
    text = _COMMENTS.sub(" ", sql).lstrip(" \t\r\n(")
    match = re.match(r"[A-Za-z]+", text)
    return match.group(0).upper() if match else ""


def is_read_only(sql: str) -> bool:
    """Can this statement leave the database changed? False means "maybe", never "no".

    The MySQL backend uses it to skip restoring a database no statement could have
    touched; anything unrecognised counts as a write.
    """
    verb = leading_verb(sql)
    if verb not in READ_ONLY_VERBS:
        return False
    # SELECT ... INTO @var / OUTFILE changes state outside the tables, and a second
    # statement after ';' is not covered by the first verb.
    body = _COMMENTS.sub(" ", sql)
    return ";" not in body.strip().rstrip(";") and not re.search(r"\binto\b", body, re.I)


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
    match = re.fullmatch(r"\s*use\s+[`\"]?([\w$]+)[`\"]?\s*;?\s*", _COMMENTS.sub(" ", sql), re.I)
    return match.group(1) if match else None
