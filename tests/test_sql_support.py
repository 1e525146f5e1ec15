"""Shared helpers of the SQL tests: one MariaDB backend per test session, and markers.

Starting a MariaDB container takes a few seconds, so every SQL test module shares the one
made here (``mysql_backend``); tests reset it per episode anyway, which is the point.
Under CI=true a missing Docker daemon fails the test (conftest's ``unavailable``).
"""

from __future__ import annotations

import os

import pytest

from ci_rules import unavailable
from icplay.paths import data_dir

BUNDLED = data_dir() / "sql" / "databases"
_backends: dict[str, object] = {}


def shared_mysql_backend(docker_client):
    """The session's MariaDB backend (started on first use, removed at exit)."""
    backend = _backends.get("mysql")
    if backend is None:
        from icplay.sql import make_sql_backend

        # on the engine the Docker tests drive (ICPLAY_TEST_SANDBOX=podman: MariaDB on Podman)
        backend = make_sql_backend("mysql", engine=os.environ.get("ICPLAY_TEST_SANDBOX") or "docker")
        try:
            backend.start()
        except Exception as exc:
            unavailable(f"cannot start the MariaDB backend: {exc}")
        _backends["mysql"] = backend
    backend.timeout = 10.0
    backend.max_rows = 100_000
    return backend


def new_backend(kind: str, request) -> object:
    """A fresh SQLite backend, or the shared MariaDB one (with Docker from conftest)."""
    from icplay.sql import make_sql_backend

    if kind == "sqlite":
        backend = make_sql_backend("sqlite")
        request.addfinalizer(backend.close)
        return backend
    return shared_mysql_backend(request.getfixturevalue("docker_client"))


BACKEND_PARAMS = [pytest.param("sqlite"), pytest.param("mysql", marks=pytest.mark.mysql)]
