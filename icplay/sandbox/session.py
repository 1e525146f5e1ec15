"""A persistent bash session over any byte transport.

Both sandboxes (Docker and bubblewrap) start one long-lived ``bash`` and hand this module
a *transport*: something to write commands into and read output from. Each action is
sent as ``__ic_run $'<escaped text>' </dev/null`` followed by a ``printf`` of a sentinel
that carries a fresh random nonce, the exit code and the working directory. Because the
text travels escaped, an unbalanced quote in the action cannot swallow the sentinel, and
because ``__ic_run`` is a shell function that ``eval``s the text in the shell itself,
``cd``, ``export``, functions and aliases persist the way a human expects.

Stopping a command (timeout, interrupt, endless output) sends the shell SIGUSR1 and
SIGKILLs every other process in the sandbox. The shell's USR1 trap returns from the
running function and arms a DEBUG trap that (with ``extdebug``) makes every enclosing
function return too, so the rest of the action is abandoned, however deeply nested,
while the shell and its state survive. One quirk of running inside a function: a bare
``declare NAME=...`` in an action is local to that action (``declare -g`` is not).

What the transport cannot do by itself is supplied by the sandbox as callables: kill the
command (every process but the shell), kill the shell, and tell whether the shell is
still alive (background jobs can hold the output stream open after the shell is gone).
"""

from __future__ import annotations

import codecs
import queue
import re
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Callable, Protocol

from icplay.sandbox.base import DEFAULT_OUTPUT_CAP, DEFAULT_TIMEOUT, OutputCallback, SandboxError, ShellResult

# Output beyond the cap is still read (and counted) until this multiple of the cap,
# then the command is stopped: `yes` must not keep a core busy for the whole timeout.
STOP_AFTER_CAP_FACTOR = 8
# After killing a command, how long to wait for the shell to print its sentinel
# before concluding the shell itself is stuck (a builtin loop) and replacing it.
KILL_GRACE = 2.0
KILL_REPEAT = 0.25
# How often a silent command checks whether the shell is still alive.
LIVENESS_EVERY = 0.5
START_TIMEOUT = 30.0

SHELL_ARGV = ["bash", "--noprofile", "--norc"]
RESTART_NOTE = ("started a new shell because the previous one had exited: "
                "working directory, variables and functions are reset")


def sentinel(nonce: str, status: str) -> tuple[str, re.Pattern[bytes]]:
    """The shell line that prints the end-of-command marker with ``status`` and the working
    directory, and the pattern that finds it (groups: status, directory)."""
    line = f"printf '\\036{nonce} %d %s\\036\\n' {status} \"$PWD\""
    return line, re.compile(rb"\x1e" + nonce.encode() + rb" (-?\d+) (.*?)\x1e\n", re.S)

_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-+=/.,:@%^~")


def ansi_c_quote(text: str) -> str:
    """Quote text as bash's $'...' so it arrives byte for byte without a fork."""
    out = []
    for byte in text.encode("utf-8", "surrogateescape"):
        out.append(chr(byte) if byte in _SAFE else f"\\x{byte:02x}")
    return "$'" + "".join(out) + "'"


class Transport(Protocol):
    """A started shell's byte streams: stdin in, stdout+stderr out."""

    def write(self, data: bytes) -> None: ...

    def read(self) -> bytes:
        """Block for the next chunk; b'' once the stream has ended."""
        ...

    def close(self) -> None: ...


@dataclass
class ShellControl:
    """What a sandbox provides so the session can manage its shell."""

    open: Callable[[], Transport]                # start a fresh bash, return its streams
    kill_command: Callable[[int], None]          # SIGUSR1 the shell, SIGKILL every other process
    kill_shell: Callable[[int], None]            # kill the shell itself
    is_alive: Callable[[int], bool]              # is the shell (pid as the shell reported it) alive?


_EOF = object()


class PersistentShell:
    """One long-lived bash; ``run`` executes one action and returns its ShellResult."""

    def __init__(self, control: ShellControl, init_script: str = "", output_cap: int = DEFAULT_OUTPUT_CAP,
                 default_timeout: float = DEFAULT_TIMEOUT):
        self.control = control
        self.init_script = init_script
        self.output_cap = output_cap
        self.default_timeout = default_timeout
        self.cwd: str | None = None
        self._transport: Transport | None = None
        self._chunks: queue.Queue = queue.Queue()
        self._pid: int | None = None
        self._leftover = b""
        self._interrupt = threading.Event()
        self._lock = threading.Lock()
        self._restart_note: str | None = None
        self._ever_started = False

    # -- life cycle ---------------------------------------------------------------

    def start(self) -> None:
        """Start bash and wait until it has run the init script."""
        self._transport = self.control.open()
        self._chunks = queue.Queue()
        self._leftover = b""
        transport, chunks = self._transport, self._chunks
        threading.Thread(target=self._pump, args=(transport, chunks), daemon=True, name="icplay-shell-reader").start()
        ready_line, pattern = sentinel(secrets.token_hex(8), "$$")
        script = (
            "exec 2>&1\n"
            "export PAGER=cat GIT_PAGER=cat LC_ALL=C.UTF-8 TERM=${TERM:-dumb}\n"
            "shopt -s expand_aliases extdebug\n"
            "set -T\n"
            "__ic_dbg() { [[ -n $__ic_abort && ${#FUNCNAME[@]} -gt 1 ]] && return 2; return 0; }\n"
            "trap '__ic_abort=1; trap __ic_dbg DEBUG; return 130 2>/dev/null' USR1\n"
            "__ic_status() { return \"$1\"; }\n"
            "__ic_run() { __ic_status \"${__ic_rc:-0}\"; eval \"$1\"; }\n"
            f"{self.init_script}\n"
            f"{ready_line}\n"
        )
        transport.write(script.encode())
        deadline = time.monotonic() + START_TIMEOUT
        buffer = b""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._discard()
                raise SandboxError(f"the shell did not start within {START_TIMEOUT:.0f} s; output so far: {buffer[-500:]!r}")
            try:
                chunk = chunks.get(timeout=remaining)
            except queue.Empty:
                continue
            if chunk is _EOF:
                self._discard()
                raise SandboxError(f"the shell exited while starting; it printed: {buffer[-500:].decode(errors='replace')!r}")
            buffer += chunk
            match = pattern.search(buffer)
            if match:
                self._pid = int(match.group(1))
                self.cwd = match.group(2).decode(errors="replace")
                self._leftover = buffer[match.end():]
                break
        if self._ever_started:
            self._restart_note = RESTART_NOTE
        self._ever_started = True

    @property
    def pid(self) -> int | None:
        """The shell's pid as the shell itself reported it (inside its sandbox)."""
        return self._pid if self._transport is not None else None

    def close(self) -> None:
        self._discard()

    def _discard(self) -> None:
        transport, self._transport = self._transport, None
        if transport is not None:
            try:
                transport.close()
            except Exception:
                pass

    @staticmethod
    def _pump(transport: Transport, chunks: queue.Queue) -> None:
        """Reader thread: move the transport's bytes into the queue until it ends."""
        try:
            while True:
                data = transport.read()
                if not data:
                    break
                chunks.put(data)
        except Exception:
            pass
        chunks.put(_EOF)

    # -- running actions ------------------------------------------------------------

    def interrupt(self) -> None:
        """Stop the running command (as on timeout); harmless when nothing runs."""
        self._interrupt.set()

    def run(self, command: str, timeout: float | None = None, on_output: OutputCallback | None = None) -> ShellResult:
        with self._lock:
            return self._run(command, self.default_timeout if timeout is None else timeout, on_output)

    def _run(self, command: str, timeout: float, on_output: OutputCallback | None) -> ShellResult:
        started = time.monotonic()
        self._interrupt.clear()
        if self._transport is None:
            self.start()
        done_line, pattern = sentinel(secrets.token_hex(8), "$__ic_rc")
        script = (f"__ic_run {ansi_c_quote(command)} </dev/null\n"
                  f"__ic_rc=$?; trap - DEBUG; __ic_abort=; {done_line}\n")
        try:
            self._transport.write(script.encode())
        except OSError:
            # The shell died between actions (its stream is closed): start another once.
            self._discard()
            self.start()
            self._transport.write(script.encode())
        chunks = self._chunks
        restarted = self._restart_note is not None
        notes: list[str] = [self._restart_note] if restarted else []
        self._restart_note = None

        kept = bytearray()       # output before the marker, up to the cap
        total = 0                # all output bytes before the marker
        pending = self._leftover  # bytes not yet classified (may hold a partial marker)
        self._leftover = b""
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        exit_code: int | None = None
        timed_out = interrupted = stopped_for_output = died = False
        killed_at: float | None = None
        last_kill = 0.0
        last_liveness = time.monotonic()
        deadline = started + timeout

        def take(data: bytes) -> None:
            nonlocal total
            total += len(data)
            room = self.output_cap - len(kept)
            if room > 0:
                piece = data[:room]
                kept.extend(piece)
                if on_output is not None:
                    text = decoder.decode(piece)
                    if text:
                        on_output(text)

        while True:
            match = pattern.search(pending)
            if match:
                take(pending[:match.start()])
                exit_code = int(match.group(1))
                self.cwd = match.group(2).decode(errors="replace")
                self._leftover = pending[match.end():]
                break
            # Hand on everything that cannot be the start of the marker.
            cut = pending.rfind(b"\x1e")
            safe_end = len(pending) if cut < 0 else cut
            if safe_end:
                take(pending[:safe_end])
                pending = pending[safe_end:]
            if killed_at is None and total > self.output_cap * STOP_AFTER_CAP_FACTOR:
                stopped_for_output = True
                killed_at = last_kill = self._kill_command()
            now = time.monotonic()
            if killed_at is None and self._interrupt.is_set():
                interrupted = True
                killed_at = last_kill = self._kill_command()
            if killed_at is None and now >= deadline:
                timed_out = True
                killed_at = last_kill = self._kill_command()
            if killed_at is not None and now - last_kill >= KILL_REPEAT:
                # A nested function or loop may have survived one round: go again.
                last_kill = self._kill_command()
            if killed_at is not None and now - killed_at > KILL_GRACE:
                # The shell itself is stuck (e.g. a builtin `while :; do :; done`).
                self._kill_shell()
                died = True
                break
            wait = 0.05 if killed_at is not None else max(0.0, min(deadline - now, LIVENESS_EVERY))
            try:
                chunk = chunks.get(timeout=wait)
            except queue.Empty:
                if time.monotonic() - last_liveness >= LIVENESS_EVERY:
                    last_liveness = time.monotonic()
                    if not self._shell_alive():
                        died = True
                        # Give output already in flight a moment to arrive.
                        pending += self._drain(chunks, 0.1)
                        take(pending)
                        pending = b""
                        break
                continue
            if chunk is _EOF:
                died = True
                take(pending)
                pending = b""
                break
            pending += chunk

        if died:
            self._discard()
            if not (timed_out or interrupted or stopped_for_output):
                notes.append("the shell exited; the next command starts a new one")
        tail = decoder.decode(b"", final=True)
        if tail and on_output is not None:
            on_output(tail)
        truncated = total - len(kept)
        if timed_out:
            notes.append(f"command timed out after {timeout:g} s and was stopped")
        if interrupted:
            notes.append("command interrupted")
        if stopped_for_output:
            notes.append("command stopped: it kept printing far beyond the output limit")
        if truncated > 0:
            notes.append(f"output truncated: {truncated} more bytes not shown (limit {self.output_cap} bytes)")
        if died and (timed_out or interrupted or stopped_for_output):
            notes.append("the shell had to be restarted: working directory, variables and functions are reset")
        return ShellResult(
            output=bytes(kept).decode("utf-8", "replace"),
            exit_code=None if (timed_out or interrupted or stopped_for_output or died) else exit_code,
            duration=time.monotonic() - started,
            timed_out=timed_out, interrupted=interrupted, truncated_bytes=max(0, truncated),
            stopped_for_output=stopped_for_output, shell_died=died, shell_restarted=restarted,
            cwd=self.cwd, notes=notes,
        )

    @staticmethod
    def _drain(chunks: queue.Queue, wait: float) -> bytes:
        data = b""
        end = time.monotonic() + wait
        while time.monotonic() < end:
            try:
                chunk = chunks.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                break
            if chunk is _EOF:
                break
            data += chunk
        return data

    def _kill_command(self) -> float:
        try:
            self.control.kill_command(self._pid or 0)
        except Exception:
            pass
        return time.monotonic()

    def _kill_shell(self) -> None:
        try:
            self.control.kill_shell(self._pid or 0)
        except Exception:
            pass

    def _shell_alive(self) -> bool:
        try:
            return self.control.is_alive(self._pid or 0)
        except Exception:
            return True
