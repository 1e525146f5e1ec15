"""What every front end of the icplay process shares, below the commands and the TUI that
raise and honour it: the error a user can fix, and the orderly shutdown on signals."""

from __future__ import annotations

import signal
import threading
from typing import Any, Callable

from icplay.store import stop_open_trajectories


class UserError(RuntimeError):
    """Something the user can fix; printed as one line without a traceback."""


# --- orderly shutdown on signals -------------------------------------------------------
#
# SIGTERM and SIGHUP take the path Ctrl+C (SIGINT) takes: KeyboardInterrupt in the main
# thread. Every command already unwinds that way: running commands are interrupted,
# envs closed (their containers removed; ``atexit`` removes any container still tracked),
# and the runner stops its episodes. Afterwards every episode this process still has open
# is saved as ``stopped`` (``stop_open_trajectories``). A second SIGTERM/SIGHUP during
# that cleanup is ignored so it can finish; SIGKILL is the way to cut it short.

_SHUTDOWN_SIGNALS = ("SIGTERM", "SIGHUP")


class Shutdown:
    """The shutdown signals' handler while ``main`` runs; remembers which signal came.

    An event loop that must not be unwound by an exception (the Textual app) sets
    ``Shutdown.deliver`` around its run: a function that asks it to quit in order and
    returns True (False: raise KeyboardInterrupt after all)."""

    current: "Shutdown | None" = None

    def __init__(self):
        self.signal: str | None = None
        self.deliver: Callable[[], bool] | None = None
        self._previous: dict[int, Any] = {}   # what signal.signal gave back, put back on exit

    def __enter__(self) -> "Shutdown":
        if threading.current_thread() is threading.main_thread():
            for name in _SHUTDOWN_SIGNALS:
                sig = getattr(signal, name, None)
                if sig is not None:
                    self._previous[sig] = signal.signal(sig, self._on_signal)
            Shutdown.current = self
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        if Shutdown.current is self:
            Shutdown.current = None

    def _on_signal(self, signum: int, frame) -> None:
        if self.signal is None:
            self.signal = signal.Signals(signum).name
            if self.deliver is not None and self.deliver():
                return
            raise KeyboardInterrupt(self.signal)

    def exit_code(self) -> int:
        return 128 + int(getattr(signal, self.signal)) if self.signal else 130

    def stop_open_episodes(self) -> None:
        why = f"icplay was stopped ({self.signal})" if self.signal else "icplay was interrupted"
        stop_open_trajectories(why)


_NO_TEARDOWN = threading.Event()


def skip_teardown() -> None:
    """Say that this process may end without tearing the interpreter down (``console``): a
    command whose every file is closed and every thread ended (``icplay run`` after its
    report) asks for it, so that freeing the openai package's objects does not add a tenth
    of a second or more to its wall time."""
    _NO_TEARDOWN.set()


def exit_process(code: int) -> None:
    """End the process with ``code``: as a normal exit does (non-daemon threads joined, atexit
    handlers run, stdout and stderr flushed) but with ``os._exit`` instead of the interpreter's
    teardown when the command asked for it (``skip_teardown``), else ``sys.exit``."""
    import sys

    if not _NO_TEARDOWN.is_set():
        sys.exit(code)
    import atexit
    import os

    threading._shutdown()  # type: ignore[attr-defined]  # what the exit does first: joins non-daemon threads
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
