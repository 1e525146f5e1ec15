"""Line mode's output: whole lines, each made safe to show, and text that streams in pieces."""

from __future__ import annotations

from typing import Callable

from icplay.frontend.display import display
from icplay.lines.stdin import stdout_raw


class Terminal:
    """Where line mode writes: ``say`` a line of icplay's (whatever it quotes made safe by
    ``display``), ``raw`` a piece of streamed text; a line never starts in a stream's middle."""

    def __init__(self, write: Callable[[str], None] = print, write_raw: Callable[[str], None] | None = None):
        self.write = write
        self._write_raw = write_raw or stdout_raw
        self.at_line_start = True
        self._helped: set[str] = set()

    def raw(self, text: str) -> None:
        """Output as it streams (no newline added)."""
        self._write_raw(text)
        self.at_line_start = text.endswith("\n")

    def end_line(self) -> None:
        """End a streamed line that is not ended yet."""
        if not self.at_line_start:
            self.write("")
            self.at_line_start = True

    def say(self, text: str) -> None:
        """One line of icplay's, whatever it quotes (a model's, a server's, a file's words) made
        safe to print."""
        self.end_line()
        self.write(display(text))

    def help_once(self, key: str, text: str) -> None:
        """``text`` the first time ``key`` comes up in this episode."""
        if key not in self._helped:
            self._helped.add(key)
            self.say(text)


__all__ = ["Terminal"]
