"""Background threads whose end can be waited for safely on the main thread.

On Python 3.11, a KeyboardInterrupt (Ctrl+C, or SIGTERM/SIGHUP which icplay.cli turns into
one) that lands while the main thread sits in ``Thread.join`` marks the joined thread as
stopped although it still runs: a later ``join()`` returns at once and ``is_alive()`` says
False (CPython's bpo-45274 fix releases a lock the running thread holds). icplay then
exited under a running episode. Waiting on an Event the thread sets as it ends has no such
flaw, so the main thread waits on ``Worker.wait`` instead of ``join``.
"""

from __future__ import annotations

import threading
from typing import Any, Callable


class Worker(threading.Thread):
    """A daemon thread that sets ``ended`` when its target returns or raises."""

    def __init__(self, target: Callable[..., Any], args: tuple = (), name: str | None = None):
        super().__init__(target=target, args=args, name=name, daemon=True)
        self.ended = threading.Event()

    def run(self) -> None:
        try:
            super().run()
        finally:
            self.ended.set()

    def running(self) -> bool:
        """Started and not ended (unlike ``is_alive``, right after an interrupted join too)."""
        return self.ident is not None and not self.ended.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Until the thread has ended (True) or ``timeout`` passed (False)."""
        return self.ended.wait(timeout)
