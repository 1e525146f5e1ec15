"""A persistent bash session over any byte transport.

Both sandboxes (Docker and bubblewrap) start one long-lived ``bash`` and hand this module
a *transport*: something to write commands into and read output from. The shell runs a
command loop (``command_loop``) that reads each action as raw bytes up to a NUL, runs it
with ``eval`` in the shell itself (``cd``, ``export``, functions and aliases persist the
way a human expects) and prints a marker that carries the shell's random nonce, the exit
code and the working directory. The action runs inside a function that removes itself
first, so no function or variable of icplay's is there for the action to see, and errors
read ``bash: line 1: ...`` as under ``bash -c`` (see ``command_loop``).

Stopping a command (timeout, interrupt, endless output) sends the shell SIGUSR1 and
SIGKILLs every other process in the sandbox. The shell's USR1 trap returns from the
running function and arms a DEBUG trap that makes every enclosing function return too,
so the rest of the action is abandoned, however deeply nested, while the shell and its
state survive. One quirk of running inside a function: a bare ``declare NAME=...`` in an
action is local to that action (``declare -g`` is not).

What the transport cannot do by itself is supplied by the sandbox as callables: kill the
command (every process but the shell), kill the shell, and tell whether the shell is
still alive (background jobs can hold the output stream open after the shell is gone).

icplay's memory stays O(output cap) whatever the action prints: a reader thread parses
the stream as it arrives into output and end-of-command markers (a per-shell random
prefix; any other bytes, ``\x1e`` included, are output), keeps at most the cap of
output per command and only counts the rest, also while no action runs (a background
job printing between actions). Each byte is looked at a bounded number of times, so the
cost is linear in the output.

The marker line also checks that the shell is still fit to run the next action: it can
open files (``ulimit -n``), its resource limits are those it started with; ``set -e`` is
switched off again. A shell that fails the check, or that ignored the stop signal (a trap
of its own on USR1), is replaced with a note.
"""

from __future__ import annotations

import codecs
import logging
import shlex
import re
import secrets
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Protocol

from icplay.sandbox.base import DEFAULT_OUTPUT_CAP, DEFAULT_TIMEOUT, OutputCallback, SandboxError, ShellResult

_log = logging.getLogger(__name__)

# Output beyond the cap is still read (and counted) until this multiple of the cap,
# then the command is stopped: `yes` must not keep a core busy for the whole timeout.
STOP_AFTER_CAP_FACTOR = 8
# After killing a command, how long to wait for the shell to print its marker
# before concluding the shell itself is stuck (a builtin loop) and replacing it.
KILL_GRACE = 2.0
KILL_REPEAT = 0.25
# How often a silent command checks whether the shell is still alive.
LIVENESS_EVERY = 0.5
START_TIMEOUT = 30.0
# The longest marker body (status fields and a working directory up to PATH_MAX).
MAX_MARKER = 4096 + 64

SHELL_ARGV = ["bash", "--noprofile", "--norc"]
# What icplay's own shells export; a sandbox that shows the action only its image's
# environment (``faithful``, see docker.py) exports nothing.
SHELL_EXPORTS = "export PAGER=cat GIT_PAGER=cat LC_ALL=C.UTF-8 TERM=${TERM:-dumb}"
RESTART_NOTE = ("started a new shell because the previous one had exited: "
                "working directory, variables and functions are reset")
# What the marker's health word means; every one but errexit replaces the shell.
HEALTH_NOTES = {
    "files": "the shell could no longer open files (ulimit -n?)",
    "limits": "the shell's resource limits were changed (ulimit)",
    "trap": "the shell did not stop when told to (its signal trap was changed)",
}
CROWDED_NOTE = ("the sandbox was near its process limit: every process left running in the background "
                "was stopped")
ERREXIT_NOTE = "`set -e` was switched off again: with it, any failing command would end the session"

_MARK = b"\x1e"
_END = b"\x1e\n"
_BODY = re.compile(rb"(-?\d+) (\d) (\w+) (\d+) (.*)", re.S)

def marker_line(nonce: str, status: str) -> str:
    """The shell line that prints the end-of-command marker: status, abort flag, health
    word and working directory. Builtins only (``\\builtin`` passes aliases and
    functions of the same name); it first switches ``set -e`` off (noting it). It runs in
    the command loop, whose ``$1`` holds the resource limits the shell started with."""
    return (
        "case $- in *e*) \\builtin set +e; __ic_h=errexit;; *) __ic_h=;; esac; "
        "{ \\builtin :; } </dev/null || __ic_h=files; "
        "if [[ $__ic_h != files ]]; then "
        "\\builtin mapfile -t __ic_l < /proc/$$/limits; \\builtin printf -v __ic_ls '%s|' \"${__ic_l[@]}\"; "
        "[[ $__ic_ls == \"$1\" ]] || __ic_h=limits; fi; "
        # a sandbox (cgroup) near its process limit: something is multiplying in the background
        "if [[ -z $__ic_h ]]; then for __ic_f in /sys/fs/cgroup/pids.current /sys/fs/cgroup/pids/pids.current; do "
        "[[ -r $__ic_f ]] || continue; __ic_pc=; __ic_pm=; \\builtin read -r __ic_pc < $__ic_f; "
        "\\builtin read -r __ic_pm < ${__ic_f%current}max; "
        "[[ $__ic_pc =~ ^[0-9]+$ && $__ic_pm =~ ^[0-9]+$ ]] && (( __ic_pc * 10 >= __ic_pm * 9 )) && __ic_h=crowded; "
        "break; done; fi; "
        # the last pid handed out (/proc/loadavg's fifth field): the next action's first
        # process gets the one after it (a gold run can be made to start there too)
        "__ic_lp=0; { \\builtin read -r __ic_x __ic_x __ic_x __ic_x __ic_lp; } </proc/loadavg 2>/dev/null; "
        "[[ $__ic_lp =~ ^[0-9]+$ ]] || __ic_lp=0; "
        f"\\builtin printf '\\036{nonce} %d %d %s %d %s\\036\\n' {status} \"${{__ic_abort:-0}}\" \"${{__ic_h:-ok}}\" \"$__ic_lp\" \"$PWD\"; "
        # nothing of icplay's is left for the next action to see
        "\\builtin unset __ic_h __ic_l __ic_ls __ic_f __ic_pc __ic_pm __ic_rc __ic_abort __ic_c __ic_x __ic_lp"
    )


# The command loop, read once at start and never again: each action arrives as its raw
# bytes ending in NUL and runs in a function that removes itself before the action
# starts, so neither ``declare -F`` nor ``set`` shows anything of icplay's while it runs.
# The function is defined afresh for every action *inside* the loop, and the loop is a
# file sourced under the name ``bash``: bash names an error by the source of the function
# it happens in, so errors read ``bash: line 1: foo: command not found`` with the action's
# own line numbers, as under ``bash -c`` (everything here is on the file's line 1).
# Stopping (SIGUSR1): the trap returns from the running function and arms a DEBUG trap
# (inherited by functions, ``set -T``) that makes every enclosing function, and every
# sourced file below the loop's own, return too, so the rest of the action is abandoned
# however deeply nested, while the loop, the shell and its state survive. A signal that
# comes while the loop waits for the next action only sets the abort flag (cleared before
# the next one). ``$1`` of the sourced loop keeps the limits the shell started with.
_USR1_TRAP = ("__ic_abort=1; \\builtin trap \"[[ -n \\${__ic_abort-} && \\${#FUNCNAME[@]} -gt 1 ]] && \\builtin return 2\" DEBUG; "
              "[[ ${#FUNCNAME[@]} -gt 1 ]] && \\builtin return 130")


def command_loop(nonce: str) -> str:
    """The loop's text (one line, see above), started by ``enter_loop``."""
    return (
        # where enter_loop left the folder it sourced this from: back to the start folder
        # (and its parent's modification time back as it was: a recycled container's /tmp
        # must look like a fresh one's)
        '[[ -z ${__ic_d-} ]] || { \\builtin cd -- "$__ic_p"; rm -rf -- "$__ic_d"; \\builtin unset OLDPWD; '
        '[[ -z $__ic_t ]] || touch -m -d "$__ic_t" -- "${__ic_d%/*}" 2>/dev/null; }; '
        "$__ic_sp; \\builtin unset __ic_d __ic_p __ic_sp __ic_lim0 __ic_t; "
        f"{marker_line(nonce, '$$')}; "
        "while \\builtin :; do IFS= \\builtin read -r -d '' __ic_c || \\builtin exit; "
        "\\builtin set -T; \\builtin trap - DEBUG; "
        f"\\builtin trap '{_USR1_TRAP}' USR1; "
        # $? at the action's start is the previous action's status ($2 of the loop), $_ is
        # "bash" as under bash -c
        '__ic_run() { \\builtin unset -f __ic_run; \\builtin eval "\\builtin unset __ic_c; \\builtin set --; '
        '__ic_st() { \\builtin unset -f __ic_st; \\builtin return $1; }; __ic_st bash; $__ic_c"; }; '
        '__ic_run "${2:-0}" </dev/null; __ic_rc=$?; \\builtin trap - DEBUG; \\builtin set -- "$1" "$__ic_rc"; '
        f"{marker_line(nonce, '$__ic_rc')}; done; \\builtin exit"
    )


def enter_loop(nonce: str, scratch: str) -> str:
    """Start the command loop: sourced as ``bash`` (``sourcepath`` off: from the working
    folder) through a symlink to a here-string in a private folder made in the first
    writable folder of ``scratch`` and removed by the loop before any action; else from
    /dev/fd/3 (errors then read ``/dev/fd/3: line 1:``)."""
    loop = shlex.quote(command_loop(nonce))
    # one line: bash reads its input a line at a time, and what follows this line must
    # stay unread for the loop's `read`
    return (
        "mapfile -t __ic_l < /proc/$$/limits; printf -v __ic_lim0 '%s|' \"${__ic_l[@]}\"; unset __ic_l; "
        f"__ic_d=; __ic_t=; for __ic_s in {scratch}; do [ -d $__ic_s ] && [ -w $__ic_s ] && "
        "{ __ic_d=$__ic_s/.bash$$; __ic_t=$(stat -c %y -- $__ic_s 2>/dev/null); break; }; done; "
        "unset __ic_s; __ic_p=$PWD; __ic_sp=$(shopt -p sourcepath); "
        "if [ -n \"$__ic_d\" ] && mkdir -m 700 \"$__ic_d\" 2>/dev/null; then "
        "if ln -s /dev/fd/3 \"$__ic_d/bash\" 2>/dev/null && \\builtin cd \"$__ic_d\" 2>/dev/null; then "
        f"\\builtin shopt -u sourcepath; \\builtin source bash \"$__ic_lim0\" 3<<< {loop}; fi; "
        "\\builtin cd \"$__ic_p\"; rm -rf -- \"$__ic_d\"; "
        "[ -z \"$__ic_t\" ] || touch -m -d \"$__ic_t\" -- \"${__ic_d%/*}\" 2>/dev/null; fi; __ic_d=; __ic_t=; $__ic_sp; "
        f"\\builtin source /dev/fd/3 \"$__ic_lim0\" 3<<< {loop} || "
        f"\\builtin source /proc/self/fd/3 \"$__ic_lim0\" 3<<< {loop}; exit\n"
    )


class Transport(Protocol):
    """A started shell's byte streams: stdin in, stdout+stderr out. ``read`` and ``close``
    raise OSError (or subprocess's errors, for a process that will not end) when the stream
    is gone; anything else is taken for a bug and raised."""

    def write(self, data: bytes) -> None: ...

    def read(self) -> bytes:
        """Block for the next chunk; b'' once the stream has ended."""
        ...

    def close(self) -> None: ...


@dataclass
class ShellControl:
    """What a sandbox provides so the session can manage its shell. An error of ``sweep``,
    ``kill_command``, ``kill_shell`` or ``is_alive`` (whatever the kind raises) is logged as a
    warning and the action goes on: the deadline still ends it, a failed liveness check
    counts as alive."""

    open: Callable[[], Transport]                # start a fresh bash, return its streams
    kill_command: Callable[[int], None]          # SIGUSR1 the shell, SIGKILL every other process
    kill_shell: Callable[[int], None]            # kill the shell itself
    is_alive: Callable[[int], bool]              # is the shell (pid as the shell reported it) alive?
    # kill every process but the shell, without telling the shell (nothing of its runs);
    # returns once they are gone. None: the sandbox cannot, and such sweeps are skipped.
    sweep: Callable[[int], None] | None = None
    # kill_command only asks (Docker's warden acts on its own time, and a signal sent while
    # it acts waits for its next round): then it is sent once per stop, since a repeat can
    # be carried out after the marker, stopping the next action and killing its processes.
    kill_is_deferred: bool = False
    # told each new shell's pid (as the shell reported it) once it runs and before any action
    # is sent: Docker's warden learns there which process a stop spares (never from a file)
    started: Callable[[int], None] | None = None


@dataclass
class Marker:
    status: int
    aborted: bool
    health: str
    cwd: str
    last_pid: int = 0      # the pid most recently handed out in the shell's pid namespace


@dataclass
class _Segment:
    """Output up to one marker: at most ``cap`` bytes kept, the rest counted."""

    data: bytearray = field(default_factory=bytearray)
    kept: int = 0          # bytes kept so far (taken ones included)
    dropped: int = 0       # bytes beyond the cap, counted and thrown away
    marker: Marker | None = None


@dataclass
class Taken:
    data: bytes
    dropped: int
    marker: Marker | None
    ended: bool


class Inbox:
    """The reader thread's parse of the shell's stream, bounded: output segments, each
    closed by an end-of-command marker. ``feed`` is linear in its input; memory is at
    most ``cap`` per segment plus one marker's length, and segments end only at markers,
    one per action."""

    def __init__(self, prefix: bytes, cap: int):
        self.prefix = prefix
        self.cap = cap
        self._cond = threading.Condition()
        self._segments: deque[_Segment] = deque([_Segment()])
        self._tail = b""
        self._ended = False

    # -- the reader thread ---------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        buf = self._tail + data if self._tail else data
        self._tail = b""
        prefix, pos, n = self.prefix, 0, len(buf)
        with self._cond:
            while pos < n:
                i = buf.find(prefix, pos)
                if i < 0:
                    # keep a suffix that may be the start of the prefix
                    hold = n
                    j = buf.find(_MARK, max(pos, n - len(prefix) + 1))
                    while j >= 0:
                        if prefix.startswith(buf[j:]):
                            hold = j
                            break
                        j = buf.find(_MARK, j + 1)
                    self._output(buf, pos, hold)
                    self._tail = bytes(buf[hold:])
                    break
                self._output(buf, pos, i)
                body_at = i + len(prefix)
                k = buf.find(_END, body_at, body_at + MAX_MARKER + len(_END))
                if k >= 0:
                    match = _BODY.fullmatch(buf, body_at + 1, k) if buf[body_at:body_at + 1] == b" " else None
                    if match:
                        self._marker(Marker(int(match.group(1)), match.group(2) == b"1",
                                            match.group(3).decode(), match.group(5).decode(errors="replace"),
                                            int(match.group(4))))
                        pos = k + len(_END)
                        continue
                elif n - i < len(prefix) + MAX_MARKER + len(_END):
                    self._tail = bytes(buf[i:])    # a marker still arriving
                    break
                self._output(buf, i, i + 1)       # not a marker after all
                pos = i + 1
            self._cond.notify_all()

    def _output(self, buf: bytes, start: int, end: int) -> None:
        if end <= start:
            return
        seg = self._segments[-1]
        room = self.cap - seg.kept
        take = min(room, end - start) if room > 0 else 0
        if take:
            seg.data += buf[start:start + take]
            seg.kept += take
        seg.dropped += end - start - take

    def _marker(self, marker: Marker) -> None:
        self._segments[-1].marker = marker
        self._segments.append(_Segment())

    def end(self) -> None:
        with self._cond:
            if self._tail:
                self._output(self._tail, 0, len(self._tail))
                self._tail = b""
            self._ended = True
            self._cond.notify_all()

    # -- the session ------------------------------------------------------------------------

    def take(self, timeout: float) -> Taken | None:
        """What arrived of the current segment (None if nothing within ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                seg = self._segments[0]
                ended = self._ended and len(self._segments) == 1
                if seg.data or seg.dropped or seg.marker is not None or ended:
                    data, dropped, marker = bytes(seg.data), seg.dropped, seg.marker
                    seg.data = bytearray()
                    seg.dropped = 0
                    if marker is not None:
                        self._segments.popleft()
                    return Taken(data, dropped, marker, ended and marker is None)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(remaining)

    @property
    def ended(self) -> bool:
        """Whether the stream has ended and everything in it was taken."""
        with self._cond:
            seg = self._segments[0]
            return self._ended and len(self._segments) == 1 and not seg.data and not seg.dropped

    def held(self) -> int:
        """Bytes held (kept output and a partial marker): bounded, for tests."""
        with self._cond:
            return sum(len(s.data) for s in self._segments) + len(self._tail)


@dataclass
class _Collected:
    """One action's run as it is collected: its output kept up to the cap (and streamed to
    ``on_output``), its marker, and how it was stopped."""

    output_cap: int
    on_output: OutputCallback | None
    deadline: float
    kept: bytearray = field(default_factory=bytearray)    # output before the marker, up to the cap
    total: int = 0                                          # all output bytes before the marker
    decoder: codecs.IncrementalDecoder = field(default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace"))
    marker: Marker | None = None
    timed_out: bool = False
    interrupted: bool = False
    stopped_for_output: bool = False
    died: bool = False
    killed_at: float | None = None
    last_kill: float = 0.0
    last_liveness: float = field(default_factory=time.monotonic)

    @property
    def stopped(self) -> bool:
        return self.timed_out or self.interrupted or self.stopped_for_output

    @property
    def truncated(self) -> int:
        return self.total - len(self.kept)

    def take(self, data: bytes, dropped: int = 0) -> None:
        self.total += len(data) + dropped
        room = self.output_cap - len(self.kept)
        if room > 0 and data:
            piece = data[:room]
            self.kept.extend(piece)
            if self.on_output is not None:
                text = self.decoder.decode(piece)
                if text:
                    self.on_output(text)

    def flush(self) -> None:
        """The decoder's last characters to ``on_output``."""
        tail = self.decoder.decode(b"", final=True)
        if tail and self.on_output is not None:
            self.on_output(tail)

    def end_notes(self, timeout: float) -> list[str]:
        """What the action's observation says about how it ended."""
        notes = []
        if self.timed_out:
            notes.append(f"command timed out after {timeout:g} s and was stopped")
        if self.interrupted:
            notes.append("command interrupted")
        if self.stopped_for_output:
            notes.append("command stopped: it kept printing far beyond the output limit")
        if self.truncated > 0:
            notes.append(f"output truncated: {self.truncated} more bytes not shown (limit {self.output_cap} bytes)")
        if self.died and self.stopped:
            notes.append("the shell had to be restarted: working directory, variables and functions are reset")
        return notes


class PersistentShell:
    """One long-lived bash; ``run`` executes one action and returns its ShellResult."""

    def __init__(self, control: ShellControl, init_script: str = "", output_cap: int = DEFAULT_OUTPUT_CAP,
                 default_timeout: float = DEFAULT_TIMEOUT, exports: str = SHELL_EXPORTS,
                 scratch: str = "/dev/shm /tmp"):
        self.control = control
        self.exports = exports
        # where the loop's start makes (and at once removes) its private folder (enter_loop)
        self.scratch = scratch
        self.init_script = init_script
        self.output_cap = output_cap
        self.default_timeout = default_timeout
        self.cwd: str | None = None
        # the pid namespace's last pid when the shell last finished something (0: unknown):
        # the next action's processes are numbered from the one after it
        self.last_pid = 0
        self._transport: Transport | None = None
        self._inbox: Inbox | None = None
        self._nonce = ""
        self._pid: int | None = None
        self._interrupt = threading.Event()
        self._lock = threading.Lock()
        self._restart_note: str | None = None
        self._ever_started = False

    # -- life cycle ---------------------------------------------------------------

    def start(self) -> None:
        """Start bash and wait until it has run the init script."""
        self._discard()
        self._transport = self.control.open()
        self._nonce = secrets.token_hex(8)
        self._inbox = inbox = Inbox(b"\x1e" + self._nonce.encode(), self.output_cap)
        transport = self._transport
        threading.Thread(target=self._pump, args=(transport, inbox), daemon=True, name="icplay-shell-reader").start()
        script = (
            "exec 2>&1\n"
            f"{self.exports}\n"
            "shopt -s expand_aliases\n"
            f"{self.init_script}\n"
            f"{enter_loop(self._nonce, self.scratch)}"
        )
        transport.write(script.encode())
        deadline = time.monotonic() + START_TIMEOUT
        seen = b""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._discard()
                raise SandboxError(f"the shell did not start within {START_TIMEOUT:.0f} s; output so far: {seen[-500:]!r}")
            got = inbox.take(remaining)
            if got is None:
                continue
            seen = (seen + got.data)[-500:]
            if got.marker is not None:
                self._pid = got.marker.status
                self.cwd = got.marker.cwd
                self.last_pid = got.marker.last_pid
                break
            if got.ended:
                self._discard()
                raise SandboxError(f"the shell exited while starting; it printed: {seen.decode(errors='replace')!r}")
        if self.control.started is not None and self._pid is not None:
            try:
                self.control.started(self._pid)
            except BaseException:   # even Ctrl+C: the unregistered shell is dropped, the error re-raised
                self._discard()
                raise
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
            except (OSError, subprocess.SubprocessError):   # a stream already gone, a shell that will not die
                pass                                         # (killed again with its sandbox): nothing left to do

    @staticmethod
    def _pump(transport: Transport, inbox: Inbox) -> None:
        """Reader thread: parse the transport's bytes into the inbox until it ends."""
        try:
            while True:
                data = transport.read()
                if not data:
                    break
                inbox.feed(data)
        except OSError:   # the stream was closed under the reader: the shell's output ends here
            pass
        finally:          # anything else is a bug, printed by the thread's excepthook; the shell still ends
            inbox.end()

    def held_bytes(self) -> int:
        """Bytes of output icplay holds for this shell right now (bounded by the cap)."""
        return self._inbox.held() if self._inbox is not None else 0

    # -- running actions ------------------------------------------------------------

    def interrupt(self) -> None:
        """Stop the running command (as on timeout); harmless when nothing runs."""
        self._interrupt.set()

    def run(self, command: str, timeout: float | None = None, on_output: OutputCallback | None = None) -> ShellResult:
        with self._lock:
            return self._run(command, self.default_timeout if timeout is None else timeout, on_output)

    def _script(self, command: str) -> bytes:
        # The loop reads the action's bytes up to a NUL (bash strings cannot hold one).
        return command.encode("utf-8", "surrogateescape").replace(b"\0", b"") + b"\0"

    def _run(self, command: str, timeout: float, on_output: OutputCallback | None) -> ShellResult:
        started = time.monotonic()
        self._interrupt.clear()
        self._send(command)
        inbox = self._inbox
        assert inbox is not None
        restarted = self._restart_note is not None
        notes: list[str] = [self._restart_note] if self._restart_note is not None else []
        self._restart_note = None
        run = _Collected(self.output_cap, on_output, started + timeout)
        self._collect(run, inbox)
        unfit = self._health(run, notes)
        self._settle(run, unfit, notes)
        run.flush()
        notes += run.end_notes(timeout)
        exit_code = run.marker.status if run.marker is not None else None
        return ShellResult(
            output=bytes(run.kept).decode("utf-8", "replace"),
            exit_code=None if (run.stopped or run.died) else exit_code,
            duration=time.monotonic() - started,
            timed_out=run.timed_out, interrupted=run.interrupted, truncated_bytes=max(0, run.truncated),
            stopped_for_output=run.stopped_for_output, shell_died=run.died or unfit is not None,
            shell_restarted=restarted, cwd=self.cwd, notes=notes, restart_reason=unfit,
        )

    def _send(self, command: str) -> None:
        """Write the action to the shell, starting one first when there is none (or it ended)."""
        if self._transport is not None and self._inbox is not None and self._inbox.ended:
            self._discard()      # the shell's stream ended while no action ran: it is gone
        if self._transport is None:
            self.start()
        try:
            self._started().write(self._script(command))
        except OSError:
            # The shell died between actions (its stream is closed): start another once.
            self._discard()
            self.start()
            self._started().write(self._script(command))

    def _started(self) -> Transport:
        """The shell's transport, which ``start`` has just opened."""
        assert self._transport is not None, "start() opens the transport"
        return self._transport

    def _collect(self, run: _Collected, inbox: Inbox) -> None:
        """Take the action's output until its marker, the end of the shell's stream, or a
        stop the shell does not survive."""
        while True:
            now = self._first_stop(run)
            self._stop_again(run, now)
            if run.died:
                return
            wait = 0.05 if run.killed_at is not None else max(0.0, min(run.deadline - now, LIVENESS_EVERY))
            got = inbox.take(wait)
            if got is None:
                if self._gone_quiet(run, inbox):
                    return
                continue
            run.take(got.data, got.dropped)
            if got.marker is not None:
                run.marker = got.marker
                self.cwd = got.marker.cwd
                self.last_pid = got.marker.last_pid
                return
            if got.ended:
                run.died = True
                return

    def _first_stop(self, run: _Collected) -> float:
        """Stop the command, once, for the first reason that holds (far too much output, an
        interrupt, the timeout); the time now."""
        if run.killed_at is None and run.total > self.output_cap * STOP_AFTER_CAP_FACTOR:
            run.stopped_for_output = True
            run.killed_at = run.last_kill = self._kill_command()
        now = time.monotonic()
        if run.killed_at is None and self._interrupt.is_set():
            run.interrupted = True
            run.killed_at = run.last_kill = self._kill_command()
        if run.killed_at is None and now >= run.deadline:
            run.timed_out = True
            run.killed_at = run.last_kill = self._kill_command()
        return now

    def _stop_again(self, run: _Collected, now: float) -> None:
        """A stopped command that goes on is stopped again where the kill acts at once (a
        nested function or loop may have survived one round); past the grace the shell
        itself is stuck (e.g. a builtin `while :; do :; done`) and is killed."""
        if run.killed_at is None:
            return
        if not self.control.kill_is_deferred and now - run.last_kill >= KILL_REPEAT:
            run.last_kill = self._kill_command()
        if now - run.killed_at > KILL_GRACE:
            self._kill_shell()
            run.died = True

    def _gone_quiet(self, run: _Collected, inbox: Inbox) -> bool:
        """Nothing came for a while: True when the shell is gone (its last output taken)."""
        if time.monotonic() - run.last_liveness < LIVENESS_EVERY:
            return False
        run.last_liveness = time.monotonic()
        if self._shell_alive():
            return False
        run.died = True
        late = inbox.take(0.1)     # output already in flight, a moment to arrive
        if late is not None:
            run.take(late.data, late.dropped)
        return True

    def _health(self, run: _Collected, notes: list[str]) -> str | None:
        """What the marker says of the shell: notes for what was put right, and why it must be
        replaced (None when it can take the next action)."""
        marker = run.marker
        if marker is None:
            return None
        if marker.health == "errexit":
            notes.append(ERREXIT_NOTE)
        elif marker.health == "crowded" and self.control.sweep is not None:
            try:
                self.control.sweep(self._pid or 0)
                notes.append(CROWDED_NOTE)
            except Exception as exc:   # the kind's own errors (Docker's API, a plug-in's): said; the action's result stands
                _log.warning("sweep failed: %s: %s", type(exc).__name__, exc)
        elif marker.health in HEALTH_NOTES:
            return marker.health
        elif run.stopped and not marker.aborted:
            return "trap"
        return None

    def _settle(self, run: _Collected, unfit: str | None, notes: list[str]) -> None:
        """A dead shell is let go; one that answers but cannot be trusted with the next action
        is replaced now."""
        if run.died:
            self._discard()
            if not run.stopped:
                notes.append("the shell exited; the next command starts a new one")
        elif unfit is not None:
            self._kill_shell()
            self._discard()
            self._restart_note = None
            try:
                self.start()
                self._restart_note = None
                notes.append(f"{HEALTH_NOTES[unfit]}: started a new shell; working directory, variables "
                             "and functions are reset")
            except SandboxError:
                notes.append(f"{HEALTH_NOTES[unfit]}: the next command starts a new shell")

    def _kill_command(self) -> float:
        try:
            self.control.kill_command(self._pid or 0)
        except Exception as exc:   # the kind's own errors: the deadline still ends the wait for the marker
            _log.warning("stopping the command failed: %s: %s", type(exc).__name__, exc)
        return time.monotonic()

    def _kill_shell(self) -> None:
        try:
            self.control.kill_shell(self._pid or 0)
        except Exception as exc:   # the kind's own errors: the shell is discarded and replaced regardless
            _log.warning("killing the shell failed: %s: %s", type(exc).__name__, exc)

    def _shell_alive(self) -> bool:
        try:
            return self.control.is_alive(self._pid or 0)
        except Exception as exc:   # the kind's own errors: taken for alive, so a shell is never replaced on a guess
            _log.warning("asking whether the shell lives failed: %s: %s", type(exc).__name__, exc)
            return True
