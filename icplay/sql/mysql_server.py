"""The MariaDB server a ``MysqlBackend`` talks to: a container of ``icplay-sql`` (or another
MariaDB/MySQL image) on an image engine of the sandbox registry (Docker, Podman), or a
server already running at ``host``:``port``; and the root and agent connections to it.

The container carries icplay's labels (``sandbox/tracking.py``), so a crashed run's server
is reaped by the next start, and is reached at its own network address or, where the
engine gives none that answers, at a port published on the host's loopback.
"""

from __future__ import annotations

import os
import time
from typing import Any

from icplay.sandbox import registry
from icplay.sandbox.base import SandboxError
from icplay.sandbox.container import EngineContainer, start_container
from icplay.sandbox.images import ensure_image
from icplay.sql.base import Progress, SqlBackendError

DEFAULT_IMAGE = "icplay-sql:latest"
START_TIMEOUT = 90.0
ENGINE_ORDER = ("docker", "podman")   # the engine MariaDB runs on when none is named: the first that answers
ENGINE_ENV = "ICPLAY_SQL_ENGINE"      # names it instead (docker, podman)


def default_engine() -> str:
    """$ICPLAY_SQL_ENGINE when set; else Docker when its daemon answers, else Podman when it
    is installed, else Docker (whose error says what to do)."""
    named = os.environ.get(ENGINE_ENV)
    if named:
        return named
    for name in ENGINE_ORDER:
        if registry.get(name).available():
            return name
    return ENGINE_ORDER[0]


class MariadbServer:
    """One server: started in a container of ``image`` on ``engine`` (a kind of the sandbox
    registry that runs images), unless ``host`` names one that runs already."""

    def __init__(self, image: str, root_password: str, memory: str, progress: Progress | None = None,
                 host: str | None = None, port: int = 3306, engine: str | None = None):
        self.image, self.root_password, self.memory, self.progress = image, root_password, memory, progress
        self.host, self.port = host, port
        self.engine = engine
        self.container: EngineContainer | None = None

    def start(self) -> None:
        """The container started (nothing when ``host`` names a server)."""
        if self.host is not None:
            return
        self.engine = self.engine or default_engine()
        try:
            client = registry.image_engine(self.engine).client()
            if self.image == DEFAULT_IMAGE:
                ensure_image(client, "sql", self.progress)
            if self.progress:
                self.progress(f"starting a database server ({self.image} on {self.engine})")
            ulimits = registry.image_engine(self.engine).rules.ulimits()
            self.container = start_container(
                client, self.image, "sql",
                environment={"MARIADB_ROOT_PASSWORD": self.root_password, "MYSQL_ROOT_PASSWORD": self.root_password},
                ports={"3306/tcp": ("127.0.0.1", None)}, mem_limit=self.memory, memswap_limit=self.memory,
                pids_limit=512, security_opt=["no-new-privileges"], **({"ulimits": ulimits} if ulimits else {}))
        except SandboxError as exc:
            raise SqlBackendError(str(exc)) from None

    def addresses(self) -> list[tuple[str, int]]:
        """Where the server answers: the container's own address, else the published port."""
        if self.container is None:
            return [(self.host or "127.0.0.1", self.port)]
        try:
            stopped = self.container.state()
            if stopped is not None:
                raise SqlBackendError(f"the database server container {stopped}:\n{self.container.logs(tail=15)}")
            return self.container.addresses(3306)
        except SandboxError as exc:
            raise SqlBackendError(str(exc)) from None

    def connect(self, deadline: float, **kwargs: Any) -> Any:
        """A connection (``kwargs``: user, password, autocommit), retried until ``deadline``."""
        import mysql.connector
        from mysql.connector.constants import ClientFlag

        last: Exception | None = None
        while time.monotonic() < deadline:
            for host, port in self.addresses():
                try:
                    conn = mysql.connector.connect(
                        host=host, port=port, connection_timeout=2, use_pure=True,
                        client_flags=[-ClientFlag.MULTI_STATEMENTS], **kwargs)
                    self.host, self.port = host, port   # remember what worked
                    return conn
                except mysql.connector.Error as exc:
                    last = exc
            time.sleep(0.2)
        raise SqlBackendError(f"the database server did not answer within {START_TIMEOUT:g} s: {last}")

    def close(self) -> None:
        """The container removed (a server at ``host`` is left alone)."""
        if self.container is not None:
            container, self.container = self.container, None
            container.remove()   # quietly when it is gone already

    @property
    def container_id(self) -> str | None:
        return self.container.id if self.container is not None else None
