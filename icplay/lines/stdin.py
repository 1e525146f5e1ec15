"""Where line mode's lines come from: stdin, read on a thread (``StdinLines``) or with ``input``."""

from __future__ import annotations

import os
import queue
import sys
import threading

EOF = object()     # stdin has ended


class StdinLines:
    """stdin's lines, read on a daemon thread so that a line typed while the agent works is
    seen at once. Raw reads of the file descriptor: a thread blocked in a read holds no
    Python lock (a buffered ``sys.stdin`` would make the interpreter's exit fail). One per
    process (``shared()``): a second reader would take the next task's lines."""

    _shared: "StdinLines | None" = None
    told = False    # the control keys were shown (once per process)

    def __init__(self, fd: int = 0):
        self.fd = fd
        self.lines: "queue.Queue[object]" = queue.Queue()
        self._head: list[object] = []
        self.echo = not os.isatty(fd)   # a script's transcript shows what was read
        threading.Thread(target=self._read, name="icplay-stdin", daemon=True).start()

    @classmethod
    def shared(cls) -> "StdinLines":
        if cls._shared is None:
            cls._shared = cls()
        return cls._shared

    def _read(self) -> None:
        pending = b""
        while True:
            try:
                chunk = os.read(self.fd, 4096)
            except InterruptedError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                if pending:
                    self.lines.put(pending.decode(errors="replace"))
                self.lines.put(EOF)
                return
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                self.lines.put(line.rstrip(b"\r").decode(errors="replace"))

    def peek(self, timeout: float = 0.0) -> object | None:
        """The next line (or EOF) without taking it; None when none came within ``timeout``."""
        if not self._head:
            try:
                self._head.append(self.lines.get(timeout=timeout) if timeout > 0 else self.lines.get_nowait())
            except queue.Empty:
                return None
        return self._head[0]

    def take(self) -> object:
        """The line ``peek`` showed, taken; the end of input is never taken (every later read ends too)."""
        got = self._head[0]
        if got is not EOF:
            self._head.pop(0)
        return got


def echoing_input(prompt: str) -> str:
    """``input``, echoing the line when stdin is not a terminal (a script's transcript reads right)."""
    line = input(prompt)
    if not sys.stdin.isatty():
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    return line


def stdout_raw(text: str) -> None:
    """Text as it streams to stdout (no newline added)."""
    sys.stdout.write(text)
    sys.stdout.flush()


__all__ = ["StdinLines", "EOF", "echoing_input", "stdout_raw"]
