"""Database backends for the SQL environment: embedded SQLite and MariaDB/MySQL in a container (Docker or Podman).

``make_sql_backend("sqlite" | "mysql", **options)`` is how everything else gets one; the
protocol is in ``icplay.sql.base``.
"""

from __future__ import annotations

from typing import Any

from icplay.sql.base import QueryResult, SqlBackend, SqlBackendError

BACKENDS = ("sqlite", "mysql")

__all__ = ["make_sql_backend", "SqlBackend", "QueryResult", "SqlBackendError", "BACKENDS"]


def make_sql_backend(kind: str, **options: Any) -> SqlBackend:
    """A backend by name. Options: ``timeout``, ``max_rows``, ``progress``, and for mysql
    ``image`` (default ``icplay-sql:latest``; any MariaDB/MySQL image works, see docs/sql.md) and
    ``engine`` (``docker`` or ``podman``; default: Docker when its daemon answers, else Podman)."""
    if kind == "sqlite":
        from icplay.sql.sqlite import SqliteBackend   # start-up: sqlglot (128 modules) loads when a backend is made

        return SqliteBackend(**options)
    if kind in ("mysql", "mariadb"):
        from icplay.sql.mysql import MysqlBackend   # start-up: MariaDB's backend loads only when asked for

        return MysqlBackend(**options)
    raise SqlBackendError(f"no SQL backend {kind!r} (known: {', '.join(BACKENDS)})")
