"""icplay's Docker images: their names, and building them through the docker SDK.

icplay's Dockerfiles live in ``docker/`` of the repository and are built with the
repository root as the build context (``.dockerignore`` keeps that context to ``docker/``
and ``data/``); a plug-in language's image is built from a folder of its own package
(``ImageSpec.context``). A missing image is built on first use, with the build log streamed to a
``progress`` callback so that the CLI and the TUI can show it.
"""

from __future__ import annotations

import collections
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from icplay.paths import repo_root
from icplay.sandbox.base import SandboxError
from icplay.sandbox.engine import engine_errors

Progress = Callable[[str], None]

BUILD_TIMEOUT = 3600  # seconds the HTTP connection may stay quiet during a build step
LOG_TAIL = 25  # build log lines quoted in a build error
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # the classic builder colours RUN's stderr


@dataclass(frozen=True)
class ImageSpec:
    """One icplay image: its tag and the Dockerfile, relative to the build context:
    ``context``, a folder (a plug-in's, inside its package), or None for icplay's
    repository root."""

    name: str
    dockerfile: str
    description: str = ""
    buildargs: dict[str, str] = field(default_factory=dict)
    context: str | None = None

    def context_dir(self) -> Path:
        return Path(self.context) if self.context is not None else repo_root()


IMAGES: dict[str, ImageSpec] = {
    "bash": ImageSpec(name="icplay-bash:latest", dockerfile="docker/bash.Dockerfile",
                      description="Bash tasks: coreutils and friends, /testbed committed to git"),
    "sql": ImageSpec(name="icplay-sql:latest", dockerfile="docker/sql.Dockerfile",
                     description="SQL tasks: MariaDB server on port 3306"),
}


def register_image(key: str, spec: ImageSpec) -> None:
    """Make a language's image known to `icplay images` and ``ensure_image`` (its spec calls this)."""
    IMAGES.setdefault(key, spec)


class ImageBuildError(SandboxError):
    """A failed image build; the message ends with the last lines of the build log."""

    def __init__(self, message: str, log_tail: list[str]):
        self.log_tail = log_tail
        tail = "\n".join(f"  | {line}" for line in log_tail)
        super().__init__(f"{message}\n{tail}" if tail else message)


# -- the Docker daemon -------------------------------------------------------------------


def engine_client(client: Any) -> Any:
    """``client`` (docker's) made to leave the process environment alone: requests reads the
    proxy variables from ``os.environ`` on every call when a session trusts it, and a pool's
    worker thread iterating ``os.environ`` while another thread changes it fails with a
    KeyError (seen under pytest, which sets PYTEST_CURRENT_TEST at each phase). So an engine is
    reached directly (its socket, or DOCKER_HOST's address), never through an HTTP proxy."""
    client.api.trust_env = False
    return client


def docker_client(timeout: int = 60) -> Any:
    """A connected ``docker.DockerClient``, or a SandboxError saying in one sentence what
    to do (start the daemon, fix permissions, or use bwrap)."""
    try:
        import docker
        import docker.errors
    except ImportError:  # pragma: no cover - docker is a dependency
        raise SandboxError("The docker Python package is missing: pip install docker, "
                           "or use --sandbox bwrap.") from None
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    try:
        client = engine_client(docker.from_env(timeout=timeout))
        client.ping()
        return client
    except connect_errors() as exc:   # down, refusing us, or a bad address: one sentence on what to do
        raise SandboxError(_explain_connect_error(exc, host)) from None


def connect_errors() -> tuple[type[BaseException], ...]:
    """What reaching an engine's API can raise: an engine's errors (``engine_errors``) and a
    ValueError for an address docker-py cannot parse (``http://[::1``)."""
    return engine_errors(ValueError)


def _explain_connect_error(exc: BaseException, host: str) -> str:
    text = f"{type(exc).__name__}: {exc}"
    lowered = text.lower()
    if "permission denied" in lowered:
        return (f"Docker refuses this user at {host}: add yourself to the docker group "
                "(sudo usermod -aG docker $USER, then log in again) or use --sandbox bwrap.")
    if host.startswith("unix://"):
        return ("Docker is not running: start it (sudo systemctl start docker, or sudo dockerd &) "
                "or use --sandbox bwrap.")
    return (f"Docker does not answer at DOCKER_HOST={host}: start it there, fix DOCKER_HOST, "
            "or use --sandbox bwrap.")


# -- images ------------------------------------------------------------------------------


def _spec(env: str) -> ImageSpec:
    try:
        return IMAGES[env]
    except KeyError:
        raise SandboxError(f"no icplay image {env!r} (known: {', '.join(IMAGES)})") from None


INPUTS_LABEL = "icplay.inputs"


def build_inputs_digest(env: str) -> str:
    """A digest of what an image is built from: its Dockerfile and ``data/<env>/`` (a
    plug-in's image: every file of its build context).

    Stored as a label on the image, it tells ``ensure_image`` that a checkout's testbed or
    databases changed since the image was built, so a stale image is rebuilt instead of
    scoring golds against old files.
    """
    import hashlib

    spec = _spec(env)
    root = spec.context_dir()
    digest = hashlib.sha256()
    files = [root / spec.dockerfile]
    data = root / "data" / env if spec.context is None else root
    if data.is_dir():
        files += sorted(p for p in data.rglob("*") if (p.is_file() or p.is_symlink()) and p != files[0])
    for path in files:
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        if path.is_symlink():
            digest.update(os.readlink(path).encode())
        elif path.is_file():
            digest.update(oct(path.stat().st_mode & 0o777).encode())
            digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def image_is_current(client: Any, env: str) -> bool:
    """Whether the image exists and was built from the inputs this checkout has now."""
    import docker.errors

    spec = _spec(env)
    try:
        attrs = client.api.inspect_image(spec.name)
    except (docker.errors.ImageNotFound, docker.errors.NotFound):
        return False
    labels = (attrs.get("Config") or {}).get("Labels") or {}
    return labels.get(INPUTS_LABEL) == build_inputs_digest(env)


def image_exists(client: Any, name: str) -> bool:
    """Whether the daemon has an image of this name (tag or id)."""
    import docker.errors

    try:
        client.api.inspect_image(name)
        return True
    except docker.errors.ImageNotFound:
        return False
    except docker.errors.NotFound:
        return False


def build_image(client: Any, env: str, progress: Progress | None = None, *, nocache: bool = False,
                buildargs: dict[str, str] | None = None) -> str:
    """Build the image of ``env`` ("bash", "sql") from the repository's Dockerfile,
    sending each build log line to ``progress``; returns the image name.

    Raises ImageBuildError (a SandboxError) with the last log lines when the build fails.
    """
    spec = _spec(env)
    progress = progress or (lambda line: None)
    root = spec.context_dir()
    dockerfile = root / spec.dockerfile
    if not dockerfile.is_file() and spec.context is not None:
        raise SandboxError(f"{dockerfile} is not there: the {env!r} image's package lacks its Dockerfile "
                           "(reinstall it, with the Dockerfile among its package data)")
    if not dockerfile.is_file():
        raise SandboxError(f"{dockerfile} is not there: build icplay's images from a source checkout "
                           "(git clone, pip install -e .) or set ICPLAY_ROOT to one.")
    return stream_build(client, spec.name, spec.dockerfile, progress, path=str(root), dockerfile=spec.dockerfile,
                        nocache=nocache, labels={INPUTS_LABEL: build_inputs_digest(env)},
                        buildargs={**spec.buildargs, **(buildargs or {})} or None)


def stream_build(client: Any, name: str, source: str, progress: Progress, **build: Any) -> str:
    """``client.api.build(tag=name, **build)`` with its log lines sent to ``progress``;
    ``source`` names what is built from, for errors. Returns ``name``; raises
    ImageBuildError with the last log lines when the build fails."""
    import docker.errors

    tail: collections.deque[str] = collections.deque(maxlen=LOG_TAIL)

    def emit(line: str) -> None:
        line = _ANSI.sub("", line).rstrip()
        if line:
            tail.append(line)
            progress(line)

    pending = ""  # a "stream" chunk may end mid-line
    try:
        stream = client.api.build(tag=name, decode=True, rm=True, forcerm=True, pull=False,
                                  timeout=BUILD_TIMEOUT, **build)
        for chunk in stream:
            if "stream" in chunk:
                pending += chunk["stream"]
                *lines, pending = pending.split("\n")
                for line in lines:
                    emit(line)
            elif "error" in chunk:
                emit(pending)
                pending = ""
                detail = (chunk.get("errorDetail", {}).get("message") or chunk["error"]).strip()
                if len(detail) > 300:  # "The command '/bin/sh -c <the whole RUN>' returned ..."
                    detail = detail[:150] + " ... " + detail[-120:]
                raise ImageBuildError(f"building {name} from {source} failed: {detail}",
                                      list(tail))
            elif "status" in chunk:
                emit(" ".join(str(chunk[k]) for k in ("status", "id", "progress") if chunk.get(k)))
        emit(pending)
    except ImageBuildError:
        raise
    except docker.errors.APIError as exc:
        raise ImageBuildError(f"building {name} failed: Docker said {exc.explanation or exc}",
                              list(tail)) from None
    except docker.errors.DockerException as exc:
        raise ImageBuildError(f"building {name} failed: {exc}", list(tail)) from None
    except OSError as exc:  # the connection to the daemon broke, or the context is unreadable
        raise ImageBuildError(f"building {name} failed: {type(exc).__name__}: {exc}", list(tail)) from None
    if not image_exists(client, name):
        raise ImageBuildError(f"building {name} ended without an image", list(tail))
    return name


_build_locks: dict[str, threading.Lock] = collections.defaultdict(threading.Lock)
_build_locks_guard = threading.Lock()


def ensure_image(client: Any, env: str, progress: Progress | None = None) -> str:
    """The image of ``env``, built first (once, even with several threads asking) when
    missing or built from other inputs than this checkout's."""
    spec = _spec(env)
    if image_is_current(client, env):
        return spec.name
    with _build_locks_guard:
        lock = _build_locks[env]
    with lock:
        if image_is_current(client, env):
            return spec.name
        if progress is not None:
            why = "is out of date" if image_exists(client, spec.name) else "is missing"
            progress(f"image {spec.name} {why}: building it from {spec.dockerfile} (a minute or two)")
        return build_image(client, env, progress)


def ensure_known_image(client: Any, tag: str, progress: Progress | None = None) -> None:
    """Build the image tagged ``tag`` when it is one of icplay's or a plug-in's (missing
    or stale); any other image (InterCode's, a user's) is used as it is."""
    for key, spec in list(IMAGES.items()):
        if spec.name == tag:
            ensure_image(client, key, progress or (lambda line: None))
            return
