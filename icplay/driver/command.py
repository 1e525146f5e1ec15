"""The command under way in a driver's env, and interrupting it from any thread.

The envs drop an interrupt that arrives before the command has really started (they clear
the flag as a step begins), and a view learns that a command runs a moment before it does;
so an interrupt is repeated every 0.25 s until that command has ended. An interrupt asked
for a turn whose command has not started yet (a human's answered command) is kept and
carried out as that command starts.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

log = logging.getLogger(__name__)

REPEAT_SECONDS = 0.25


class CommandGuard:
    """Whether a command runs, and its interrupts. ``lock`` is the driver's own: a stop and
    the start of a command see each other (one of them comes first under it)."""

    def __init__(self, lock: threading.Lock, interrupt_env: Callable[[], None]):
        self._lock = lock
        self._interrupt_env = interrupt_env
        self.running = False                              # read with ``lock`` held
        self._over: threading.Event | None = None         # set when the running command has ended
        self._interrupting: threading.Event | None = None   # the command an interrupt repeats for
        self._at_turn: int | None = None                  # interrupt the command of this turn as it starts

    def begin(self, turn: int) -> tuple[threading.Event, bool]:
        """(With ``lock`` held.) The command of turn ``turn`` starts: the event its end sets,
        and whether an interrupt was asked for it before it started."""
        self.running = True
        over = self._over = threading.Event()
        asked = self._at_turn == turn
        self._at_turn = None
        return over, asked

    def end(self, over: threading.Event) -> None:
        with self._lock:
            self.running = False
        over.set()

    def interrupt(self, turn: int | None, turns_now: int) -> None:
        """Interrupt the running command; without one, remember ``turn`` (the index the next
        command will have, ``turns_now`` being the turns so far) to interrupt it as it starts."""
        with self._lock:
            over = self._over if self.running else None
            if over is None:
                if turn is not None and turns_now == turn:
                    self._at_turn = turn
                return
            if self._interrupting is over:
                return
            self._interrupting = over
        self._send()

        def again() -> None:
            while not over.wait(REPEAT_SECONDS):
                self._send()

        threading.Thread(target=again, name="icplay-interrupt", daemon=True).start()

    def _send(self) -> None:
        try:
            self._interrupt_env()
        except (OSError, RuntimeError, ValueError) as exc:   # a sandbox gone meanwhile: the command ends anyway
            log.debug("interrupt not delivered: %s", exc)


__all__ = ["CommandGuard", "REPEAT_SECONDS"]
