"""The one place kinds of shell sandbox are registered, and the one factory every language
uses to get sandboxes of a kind.

A kind is a class (or object) with a ``name``, its ``capabilities``, ``available()`` and
``factory(request)``; it registers itself with ``@register_sandbox("name")`` in its module.
icplay's own kinds are listed in ``BUILTIN`` (their module is imported on first use); a
third-party package adds one through the ``icplay.sandboxes`` entry point group
(``name = "package.module:Kind"``), as languages do through ``icplay.envs``.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any, Callable, Protocol, TypeVar

from icplay.plugins import load_plugin, plugins
from icplay.sandbox.base import Sandbox, SandboxCapabilities, SandboxError
from icplay.sandbox.engine import EngineRules

ENTRY_POINT_GROUP = "icplay.sandboxes"

# name -> the module whose ``@register_sandbox`` registers it (imported on first use)
BUILTIN = {
    "docker": "icplay.sandbox.docker",
    "bwrap": "icplay.sandbox.bwrap",
    "podman": "icplay.sandbox.podman",
}

# the kinds a shell language runs on when none is named: the first that is available
DEFAULT_ORDER = ("docker", "bwrap")

Progress = Callable[[str], None]


@dataclass(frozen=True)
class HostRoot:
    """For a kind that runs the host's tools over a folder tree (bwrap): how to make the
    tree (called once, lazily), where the shell starts, and folders of it bound writable."""

    make: Callable[[], Path]
    workdir: str = "/testbed"
    binds: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class SandboxRequest:
    """What a language asks of a kind: the same request serves Docker, Podman and bwrap.

    ``image`` is the image an image-running kind starts (built first when it is one of
    icplay's); ``own_image`` says the task or the user named it (a kind that runs no
    images refuses then, with ``own_image`` as the sentence's subject). ``host`` is the
    folder tree a host-tools kind runs over.
    """

    language: str
    image: str
    host: HostRoot
    own_image: str = ""       # e.g. "a task that needs its own image"; "" when the image is icplay's
    network: bool = False
    timeout: float = 10.0
    recycle: bool = True
    trusted: bool = False
    workdir: str | None = None
    progress: Progress | None = field(default=None, compare=False)
    # for an image-running kind: resource limits over its defaults (Harbor's task.toml), and
    # faithful (nothing of icplay's inside, unbounded root) whatever the image is; None: by the image
    limits: dict[str, Any] | None = field(default=None, compare=False)
    faithful: bool | None = None


class SandboxKind(Protocol):
    """A kind of sandbox: what it can do, whether it can run here, and how to make one."""

    name: str
    capabilities: SandboxCapabilities

    def available(self) -> bool:
        """Whether it can start a sandbox on this machine now (quick; used to pick a default)."""
        ...

    def factory(self, request: SandboxRequest) -> Callable[[], Sandbox]:
        """A maker of unstarted sandboxes for the request (images are built here, once)."""
        ...

    def close(self) -> None:
        """Release what the kind started for this process (a service), if anything."""
        ...


class ImageEngine(SandboxKind, Protocol):
    """A kind that runs images through a Docker-API client (Docker, Podman): ``icplay images`` builds with it."""

    cli: str    # its command-line program, which takes docker's verbs (build, run, exec, cp, rm, rmi)

    def client(self) -> Any:
        """This process's connected client of the engine (a SandboxError saying what to do, else)."""
        ...

    @property
    def rules(self) -> EngineRules:
        """What the engine needs of every container icplay makes on it (Podman: podman.py)."""
        ...


class UnknownSandbox(SandboxError):
    """No sandbox by that name (the message lists the known ones)."""


_lock = threading.RLock()
_registered: dict[str, SandboxKind] = {}

K = TypeVar("K")


def register_sandbox(name: str) -> Callable[[K], K]:
    """Class decorator: register a kind under ``name`` (its class is instantiated once)."""

    def register(kind: K) -> K:
        instance = kind() if isinstance(kind, type) else kind
        with _lock:
            _registered.setdefault(name, instance)  # type: ignore[arg-type]
        return kind

    return register


def _plugins() -> dict[str, EntryPoint]:
    return plugins(ENTRY_POINT_GROUP, BUILTIN)


def names() -> list[str]:
    """Every kind icplay can run: built-ins first, then plug-ins and decorated ones, by name."""
    with _lock:
        extra = set(_registered) - set(BUILTIN)
    return list(BUILTIN) + sorted(extra | set(_plugins()))


def get(name: str) -> SandboxKind:
    """The kind called ``name``, its module imported on first use."""
    with _lock:
        if name in _registered:
            return _registered[name]
    if name in BUILTIN:
        importlib.import_module(BUILTIN[name])
    else:
        loaded = load_plugin(_plugins(), name, "sandbox", names, UnknownSandbox)
        if name not in _registered:   # an entry point may name a kind its module did not decorate
            register_sandbox(name)(loaded)
    with _lock:
        kind = _registered.get(name)
    if kind is None or not isinstance(getattr(kind, "capabilities", None), SandboxCapabilities):
        raise UnknownSandbox(f"entry point {name!r} in group {ENTRY_POINT_GROUP} is not a sandbox kind "
                             f"registered as {name!r}")
    return kind


def known(name: str) -> bool:
    with _lock:
        return name in _registered or name in BUILTIN or name in _plugins()


def default_name() -> str:
    """The kind a shell language runs on when none is named: Docker when a daemon answers."""
    for name in DEFAULT_ORDER:
        if get(name).available():
            return name
    return DEFAULT_ORDER[-1]


def sandbox_factory(name: str, request: SandboxRequest) -> Callable[[], Sandbox]:
    """The one factory: a maker of sandboxes of kind ``name`` for ``request``."""
    return get(name).factory(request)


def image_kinds() -> list[str]:
    """The kinds that run images (for a sentence telling which to use); a plug-in that fails to load is left out."""
    found = []
    for name in names():
        try:
            if get(name).capabilities.runs_images:
                found.append(name)
        except SandboxError:
            continue
    return found


def image_engine(name: str) -> ImageEngine:
    """The kind ``name`` as an image engine, or UnknownSandbox when it runs no images."""
    kind = get(name)
    if not kind.capabilities.runs_images or not callable(getattr(kind, "client", None)):
        raise UnknownSandbox(f"the {name!r} sandbox runs no images (ones that do: {', '.join(image_kinds())})")
    return kind  # type: ignore[return-value]


def capabilities(name: str) -> SandboxCapabilities:
    return get(name).capabilities


def loaded() -> list[Any]:
    """The kinds imported so far (for closing what they started at the end of a run)."""
    with _lock:
        return list(_registered.values())
