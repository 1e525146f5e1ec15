"""Which containers are icplay's, on every engine: the labels each carries (who made it),
the ones this process made (removed at exit, each through its own engine's client), and
the reaper that removes what a crashed icplay left behind (once per engine and process).

A creation under way is counted (``creating``), so that the exit hook waits for it
instead of leaving behind a container the engine made after the hook listed what to remove.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import threading
from typing import Any, Callable, Iterator

from icplay.sandbox.base import SandboxError
from icplay.sandbox.engine import engine_errors

LABEL = "icplay"

# container id -> the client of the engine that made it (None: the Docker daemon's)
_created: dict[str, Any] = {}
_created_lock = threading.Condition()
_in_flight = 0          # container creations under way (see ``creating``)
_exiting = False        # set by the exit hook: no new container from now on
_reaped: set[str] = set()   # the engines (API addresses) reaped so far
_engines: dict[str, Any] = {}   # API address -> a client of each engine this process used
_after_removal: list[Callable[[], None]] = []


def container_labels(kind: str) -> dict[str, str]:
    """Labels every icplay container carries: who made it, so the reaper can judge it."""
    return {LABEL: "1", "icplay.pid": str(os.getpid()), "icplay.host": socket.gethostname(), "icplay.kind": kind}


def track(container_id: str, client: Any = None) -> None:
    """Remember a container this process made (through ``client``: an engine other than
    the Docker daemon), for removal at exit."""
    with _created_lock:
        _created[container_id] = client


def after_removal(step: Callable[[], None]) -> None:
    """Run ``step`` at exit once this process's containers are removed (stop an engine's service)."""
    with _created_lock:
        _after_removal.append(step)


@contextlib.contextmanager
def creating() -> Iterator[None]:
    """Around a request that creates a container: the exit hook waits for it to return (a
    container created on a worker thread while icplay exits would otherwise outlive it, the
    daemon having made it after the hook had listed what to remove)."""
    global _in_flight
    with _created_lock:
        if _exiting:
            raise SandboxError("icplay is exiting: no new container")
        _in_flight += 1
    try:
        yield
    finally:
        with _created_lock:
            _in_flight -= 1
            _created_lock.notify_all()


def reap_once(client: Any) -> None:
    """Reap leftovers the first time this process talks to an engine (Docker, Podman)."""
    address = str(getattr(getattr(client, "api", None), "base_url", ""))
    with _created_lock:
        _engines.setdefault(address, client)
        if address in _reaped:
            return
        _reaped.add(address)
    reap_leftovers(client)   # each of its engine calls says itself what a failure leaves


def remove_container(client: Any, container_id: str) -> None:
    """Remove a container of ours, quietly if it is already gone."""
    _remove_quietly(client, container_id)


def _remove_quietly(client: Any, container_id: str) -> None:
    try:
        client.api.remove_container(container_id, force=True)
    except engine_errors():
        pass  # already gone (another process reaped it) or the engine went away
    with _created_lock:
        _created.pop(container_id, None)


def reap_leftovers(client: Any) -> int:
    """Remove icplay containers whose creating process (on this host) is gone."""
    removed = 0
    host = socket.gethostname()
    # Listing through the low-level API reads the labels in one call; the high-level list
    # inspects each container and fails when another process removes one meanwhile.
    try:
        found = client.api.containers(all=True, filters={"label": f"{LABEL}=1"})
    except engine_errors():
        return 0   # the engine does not answer: its leftovers wait for the next start
    for entry in found:
        labels = entry.get("Labels") or {}
        if labels.get("icplay.host") == host:
            try:
                os.kill(int(labels.get("icplay.pid", "0")), 0)
                continue  # its icplay is still running
            except (ProcessLookupError, ValueError):
                pass
            except PermissionError:
                continue
        elif labels.get("icplay.host"):
            continue  # another machine's, not ours to judge
        _remove_quietly(client, entry["Id"])
        removed += 1
    return removed


@atexit.register
def _remove_ours() -> None:
    global _exiting
    with _created_lock:
        _exiting = True
        busy = _in_flight > 0
        # a creation under way returns within Docker's API timeout; its container is then ours
        _created_lock.wait_for(lambda: _in_flight == 0, timeout=30)
        made = dict(_created)
        engines = [c for c in _engines.values() if c is not None]
        steps = list(_after_removal)
    if made or busy:
        _remove_made(made, engines, busy)
    for step in steps:
        try:
            step()
        except (OSError, SandboxError):
            pass   # a service that would not stop: its watch stops it once icplay is gone (podman.py)


def _remove_made(made: dict[str, Any], engines: list[Any], busy: bool) -> None:
    """Remove the containers this process made, each through its own engine's client."""
    try:
        import docker

        default = docker.from_env()
    except engine_errors():
        default = None   # no Docker configured: only other engines' containers to remove
    by_client: dict[int, tuple[Any, list[str]]] = {}
    for cid, client in made.items():
        chosen = client if client is not None else default
        if chosen is not None:
            by_client.setdefault(id(chosen), (chosen, []))[1].append(cid)
    if busy:   # also what a creation made but did not get to track
        mine = {f"{LABEL}=1", f"icplay.pid={os.getpid()}", f"icplay.host={socket.gethostname()}"}
        for client in [c for c in (default, *engines) if c is not None]:
            try:
                found = client.api.containers(all=True, filters={"label": sorted(mine)})
            except engine_errors():
                continue   # that engine is gone, and its containers with it or to the next start's reaper
            by_client.setdefault(id(client), (client, []))[1].extend(c["Id"] for c in found)
    for client, ids in by_client.values():
        for cid in dict.fromkeys(ids):
            try:
                client.api.remove_container(cid, force=True)
            except engine_errors():
                pass   # already gone, or its engine is: the next start's reaper removes it
