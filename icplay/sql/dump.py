"""Read task databases as SQL: a MySQL dump holding several databases, or a folder of files.

Both backends start from the same text: MariaDB replays a database's statements as they
are, SQLite converts them first (``icplay.sql.convert``). A *catalog* is that text split
into statements and grouped by database:

- a dump file (InterCode's ``ic_spider_dbs.sql``, ``ic_wikisql_dev.sql``): statements
  after ``CREATE DATABASE x`` / ``USE x`` belong to ``x``; what comes before the first of
  them (InterCode creates a user there) is ignored, since icplay manages its own users;
- a folder (icplay's ``data/sql/databases``): ``<db>.sql`` holds database ``db``.

Database names are looked up case-insensitively, as MySQL does with
``lower_case_table_names=1`` (InterCode's server lower-cased ``cre_Doc_Template_Mgt``).
"""

from __future__ import annotations

import hashlib
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from icplay.paths import data_dir
from icplay.sql.base import SqlBackendError

_TOKENS = re.compile(
    r"'(?:[^'\\]|\\.|'')*'"          # string, MySQL escapes
    r'|"(?:[^"\\]|\\.|"")*"'         # string or identifier
    r"|`(?:[^`]|``)*`"               # identifier
    r"|--[^\n]*|#[^\n]*"             # line comments
    r"|/\*.*?\*/"                    # block comments, executable ones included
    r"|;",
    re.S,
)


def split_statements(text: str) -> list[str]:
    """The statements of a SQL script, without their ``;`` and without plain comments.

    Quotes are respected (a ``;`` or ``--`` inside a string is data). MySQL's executable
    comments (``/*!40101 SET ... */``) are code and kept; statements left empty are dropped.
    """
    statements: list[str] = []
    pieces: list[str] = []
    position = 0
    for match in _TOKENS.finditer(text):
        token = match.group(0)
        pieces.append(text[position:match.start()])
        position = match.end()
        if token == ";":
            statements.append("".join(pieces))
            pieces = []
        elif token.startswith(("--", "#")) or (token.startswith("/*") and not token.startswith("/*!")):
            pieces.append(" ")
        else:
            pieces.append(token)
    pieces.append(text[position:])
    statements.append("".join(pieces))
    return [s.strip() for s in statements if s.strip()]


_CREATE_DB = re.compile(r"create\s+(?:database|schema)\s+(?:if\s+not\s+exists\s+)?[`\"]?([\w$]+)[`\"]?", re.I)
_USE_DB = re.compile(r"use\s+[`\"]?([\w$]+)[`\"]?\s*$", re.I)


@dataclass
class DumpDatabase:
    """One database's statements, MySQL dialect, in load order."""

    name: str
    statements: list[str] = field(default_factory=list)
    create: str | None = None   # the dump's CREATE DATABASE statement, if any


@dataclass
class Catalog:
    """The databases of one source (dump file or folder), keyed by lower-cased name."""

    source: Path
    digest: str
    databases: dict[str, DumpDatabase]

    def get(self, name: str) -> DumpDatabase:
        try:
            return self.databases[name.lower()]
        except KeyError:
            known = ", ".join(sorted(d.name for d in self.databases.values()))
            raise SqlBackendError(f"{self.source}: no database {name!r} (it holds {known})") from None

    def __contains__(self, name: str) -> bool:
        return name.lower() in self.databases

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.databases.values()]


def parse_dump(text: str, source: Path) -> dict[str, DumpDatabase]:
    """Group a multi-database dump's statements by the database they load into."""
    databases: dict[str, DumpDatabase] = {}
    current: DumpDatabase | None = None
    for statement in split_statements(text):
        created = _CREATE_DB.match(statement)
        used = _USE_DB.match(statement)
        named = created or used
        if named:
            name = named.group(1)
            current = databases.setdefault(name.lower(), DumpDatabase(name))
            if created:
                current.create = statement
            continue
        if current is not None:
            current.statements.append(statement)
    if not databases:
        raise SqlBackendError(f"{source}: no CREATE DATABASE or USE statement, so no database to load")
    return databases


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SqlBackendError(f"cannot read databases from {path}: {exc}") from None


def read_catalog(path: str | Path) -> Catalog:
    """Parse a dump file or a folder of ``<db>.sql`` files (no caching)."""
    path = Path(path)
    digest = hashlib.sha256()
    if path.is_dir():
        databases = {}
        for file in sorted(path.glob("*.sql")):
            text = _read(file)
            digest.update(file.name.encode() + b"\0" + text.encode())
            statements = split_statements(text)
            for statement in statements:
                if _CREATE_DB.match(statement) or _USE_DB.match(statement):
                    raise SqlBackendError(f"{file}: a database file must not switch databases "
                                          f"(the file name {file.stem!r} names the database)")
            databases[file.stem.lower()] = DumpDatabase(file.stem, statements)
        if not databases:
            raise SqlBackendError(f"{path}: no .sql files")
    elif path.is_file():
        text = _read(path)
        digest.update(text.encode())
        databases = parse_dump(text, path)
    else:
        raise SqlBackendError(f"no such database file or folder: {path}")
    return Catalog(path.resolve(), digest.hexdigest()[:16], databases)


_cache: dict[tuple[str, tuple[Any, ...]], Catalog] = {}
_lock = threading.Lock()


def load_catalog(path: str | Path) -> Catalog:
    """``read_catalog`` cached per path and modification time: dumps are parsed once."""
    path = Path(path).resolve()
    try:
        stat = path.stat()
    except OSError:
        raise SqlBackendError(f"no such database file or folder: {path}") from None
    stamp: tuple[Any, ...] = (stat.st_mtime_ns, stat.st_size)
    if path.is_dir():
        stamp += tuple((f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in sorted(path.glob("*.sql")))
    key = (str(path), stamp)
    with _lock:
        catalog = _cache.get(key)
        if catalog is None:
            catalog = read_catalog(path)
            _cache[key] = catalog
        return catalog


def default_databases() -> Path:
    """icplay's bundled databases, used when a task names none."""
    return data_dir() / "sql" / "databases"
