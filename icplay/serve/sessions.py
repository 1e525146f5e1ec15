"""The environments a server holds at once, whatever door they came through.

An HTTP ``/reset`` or ``/step`` holds a place for its one request; a WebSocket holds one from
its handshake to its close or its expiry. ``Places`` counts both against the one limit
(``--max-envs``): the sandboxes, containers and databases a server keeps are bounded by it,
however the clients mix their doors.
"""

from __future__ import annotations

import threading


class AtCapacity(Exception):
    """Every place is taken; the sentence says how many there are."""

    def __init__(self, limit: int, held: int):
        self.limit, self.held = limit, held
        super().__init__(f"this server holds its limit of {limit} environment(s) (--max-envs) now: "
                         "try again when a session ends")


class Places:
    """At most ``limit`` environments at once, for every kind of session (thread-safe)."""

    def __init__(self, limit: int):
        if limit < 1:
            raise ValueError("--max-envs must be at least 1")
        self.limit = limit
        self.held = 0
        self._lock = threading.Lock()

    def take(self) -> None:
        """A place, or AtCapacity: never waits (a waiting client would hold a connection instead)."""
        with self._lock:
            if self.held >= self.limit:
                raise AtCapacity(self.limit, self.held)
            self.held += 1

    def give_back(self) -> None:
        with self._lock:
            self.held = max(0, self.held - 1)
