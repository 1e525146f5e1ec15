"""One container on an image engine (Docker, or Podman through its Docker-compatible API),
as the rest of icplay may touch it: its state, its processes, signals, files in and out
through the engine's archive API, bounded side commands, removal.

Everything that is not a shell sandbox but runs containers (the MariaDB server, Harbor's
verifier, ``--compat intercode``) goes through this class and ``start_container``, with
the client of the kind it was given (``registry.image_engine(name).client()``), so that
each runs on every engine that registers as an image kind. No docker-py object leaves here
but the client.
"""

from __future__ import annotations

import threading
from typing import Any, Iterator

from icplay.sandbox.base import SandboxError
from icplay.sandbox.engine import engine_errors, engine_message
from icplay.sandbox.streams import ExecSocketTransport, bounded_exec
from icplay.sandbox.tracking import container_labels, creating, reap_once, remove_container, track


class EngineContainer:
    """A container of ours on one engine: the client that made it and its id.

    ``top_args``: the ``ps`` arguments the engine's process list takes (None: its default;
    Podman 4 answers its default with an empty body and takes its own descriptors, ``pid``)."""

    def __init__(self, client: Any, container_id: str, top_args: str | None = None):
        self.client = client
        self.id = container_id
        self.top_args = top_args

    def state(self) -> str | None:
        """None while the container runs; else what became of it, in a few words."""
        import docker.errors

        try:
            state = self.client.api.inspect_container(self.id).get("State") or {}
        except docker.errors.NotFound:
            return "was removed"
        except engine_errors() as exc:
            raise SandboxError(f"the container engine does not answer: {engine_message(exc)}") from None
        if state.get("Running") and not state.get("Paused") and not state.get("Restarting"):
            return None
        if state.get("OOMKilled"):
            return "ran out of memory and stopped"
        return f"stopped (exit code {state.get('ExitCode')})"

    def running(self) -> bool:
        """Whether it runs and is not paused (a verifier refuses to score a stopped one)."""
        state = self.client.api.inspect_container(self.id).get("State") or {}
        return bool(state.get("Running")) and not state.get("Paused")

    def finished_before(self, moment: float) -> bool:
        """Whether it had stopped before ``moment`` (a ``time.time()``); False when it is removed."""
        import docker.errors

        try:
            state = self.client.api.inspect_container(self.id).get("State") or {}
        except docker.errors.NotFound:
            return False   # removed: when is not known
        finished = timestamp(str(state.get("FinishedAt") or ""))
        return finished is not None and finished < moment

    def processes(self) -> int:
        """How many processes the engine's process list shows in it."""
        listing = self.client.api.top(self.id, **({"ps_args": self.top_args} if self.top_args else {}))
        return len(listing.get("Processes") or [])

    def signal(self, sig: str) -> None:
        """Send ``sig`` (e.g. ``SIGHUP``) to its pid 1."""
        self.client.api.kill(self.id, signal=sig)

    def put_archive(self, path: str, data: bytes) -> None:
        """Unpack the tar ``data`` at ``path``, through the engine (no tool of the container runs)."""
        self.client.api.put_archive(self.id, path, data)

    def get_archive(self, path: str) -> tuple[Iterator[bytes], dict[str, Any]] | None:
        """``path`` as a stream of tar bytes and its stat, through the engine; None when it is not there."""
        import docker.errors

        try:
            stream, stat = self.client.api.get_archive(self.id, path)
        except docker.errors.NotFound:
            return None
        return stream, stat

    def exec(self, argv: list[str], cap: int, workdir: str | None = None,
             abandon: threading.Event | None = None) -> tuple[int | None, bytes, int]:
        """A side command, its output held to ``cap`` bytes (``streams.bounded_exec``)."""
        return bounded_exec(self.client, self.id, argv, cap, workdir=workdir, abandon=abandon)

    def exec_for(self, argv: list[str], cap: int, timeout: float,
                 workdir: str | None = None) -> tuple[int | None, bytes, int]:
        """``exec``, abandoned after ``timeout`` seconds (exit code None then)."""
        abandon = threading.Event()
        timer = threading.Timer(timeout, abandon.set)
        timer.start()
        try:
            return self.exec(argv, cap, workdir=workdir, abandon=abandon)
        finally:
            timer.cancel()

    def fill(self, tree: bytes, into: str = "/") -> None:
        """Unpack a tar into the container with its own ``tar`` (the image's writable roots
        into their empty tmpfs mounts, where the archive API cannot write)."""
        api = self.client.api
        created = api.exec_create(self.id, ["tar", "-x", "-p", "--numeric-owner", "-f", "-", "-C", into],
                                  stdin=True, stdout=True, stderr=True)
        transport = ExecSocketTransport(api.exec_start(created["Id"], socket=True))
        said = b""
        try:
            transport.write(tree)
            transport.shut_input()
            while chunk := transport.read():
                said = (said + chunk)[-1000:]
        finally:
            transport.close()
        code = api.exec_inspect(created["Id"]).get("ExitCode")
        if code != 0:
            raise SandboxError(f"could not fill the container's writable folders (tar exit {code}): "
                               f"{said.decode(errors='replace').strip()[-300:]}")

    def addresses(self, port: int) -> list[tuple[str, int]]:
        """Where a server in it answers on ``port``: each network's own address, then each
        port published on the host's loopback."""
        settings = self.client.api.inspect_container(self.id).get("NetworkSettings") or {}
        out = []
        for network in (settings.get("Networks") or {}).values():
            if network.get("IPAddress"):
                out.append((network["IPAddress"], port))
        for binding in (settings.get("Ports") or {}).get(f"{port}/tcp") or []:
            out.append(("127.0.0.1", int(binding["HostPort"])))
        return out

    def logs(self, tail: int) -> str:
        return str(self.client.api.logs(self.id, tail=tail).decode("utf-8", "replace"))

    def remove(self) -> None:
        """Remove it, quietly if it is already gone."""
        remove_container(self.client, self.id)


def start_container(client: Any, image: str, purpose: str, **options: Any) -> EngineContainer:
    """A started container of ``image``, labelled and tracked as icplay's (removed at exit,
    reaped after a crash), made through ``client``'s engine with its own limits.

    ``purpose`` is its ``icplay.kind`` label (``sql``, ``bash``); ``options`` are docker-py's
    ``containers.run`` keywords. The engine's refusals come back as a SandboxError."""
    import docker.errors

    reap_once(client)
    try:
        with creating():
            container = client.containers.run(image, detach=True, labels=container_labels(purpose), **options)
            track(container.id, client)
    except docker.errors.ImageNotFound:
        raise SandboxError(f"image {image} is not there: build it (icplay images build) or pull it") from None
    except docker.errors.APIError as exc:
        raise SandboxError(f"the container engine could not start {image}: {engine_message(exc)}") from None
    return EngineContainer(client, container.id)


def timestamp(text: str) -> float | None:
    """An engine's RFC 3339 time (nanoseconds, ``Z`` or an offset) as seconds since the epoch; None if unset."""
    import datetime
    import re

    match = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", text.strip())
    if not match or match.group(1).startswith("0001"):
        return None
    zone = "+00:00" if match.group(3) == "Z" else match.group(3)
    moment = datetime.datetime.fromisoformat(match.group(1) + zone).timestamp()
    return moment + float("0." + (match.group(2) or "0"))

