"""What the Docker sandbox's pid 1 (the warden) knows of the shells it must spare, and how
it learns it: from icplay, on its attached stdin, never from a file of the container.

The solver is root in its container and can write every writable file: a pid file the
warden read let a process of the solver's name itself a shell (the stops spared it), and a
FIFO in its place hung the warden.

So icplay writes ``shell|control PID NONCE`` to pid 1 when each shell starts, before any
action is sent to it; the warden reads the process's start time then, keeps both in its
memory and answers NONCE on its stdout; a stop spares a registered pid only while a
process with that pid and start time lives. On icplay's images pid 1's stdin and stdout
cannot be opened from an action (``/proc/1/fd``: the session's shell has one capability
fewer; tests/hostile/test_sandbox_steering.py). Builtins only: no pid is taken, and it
works under a fork bomb.

Used by the warden of icplay's images (docker.py). A faithful container's warden
(faithful.py) spares every process whose parent is outside the container instead; its
action has pid 1's capabilities by design, so it could write pid 1's stdin and read its
memory anyway (docs/security.md, "What is NOT contained").
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from typing import Iterator

from icplay.sandbox.base import SandboxError
from icplay.sandbox.faithful import Pid1Streams

# __w_alive PID [START]: whether PID lives (with that start time, field 22 of its stat);
# its start time in __w_t
ALIVE = (
    '__w_alive() { local pid=$1 want=$2 line rest; __w_t=; [[ $pid =~ ^[0-9]+$ ]] || return 1; '
    'read -r line < /proc/$pid/stat 2>/dev/null || return 1; rest=${line##*) }; set -f; set -- $rest; set +f; '
    '__w_t=${20}; [ -z "$want" ] || [ "$__w_t" = "$want" ]; }\n'
)


def registered(role: str, into: str) -> str:
    """Bash that sets ``into`` to the registered ``role``'s pid (empty unless that process
    still lives). A trap may come while the loop registers a shell: it leaves __w_t as it was."""
    return (f'__w_was=$__w_t; {into}=; __w_alive "$__w_{role}" "$__w_{role}_t" && {into}=$__w_{role}; '
            '__w_t=$__w_was; ')


# __w_hold: every process but pid 1 and the registered control shell stopped (a process
# already stopped is left so, and not counted), then the control shell continued. The solver
# is root in its container and may stop the control shell (same uid): this undoes that where
# it cannot act again, since nothing of it runs until __w_release continues what was stopped.
# Pid 1 cannot be stopped from inside its pid namespace. Builtins only, as the stops.
HOLD = (
    '__w_held=" "\n'
    '__w_hold() { local round d p line rest state fresh ctl; ' + registered("control", "ctl") +
    'for round in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do fresh=0; '
    'for d in /proc/[0-9]*; do p=${d#/proc/}; case "$p" in 1|"$ctl") continue;; esac; '
    'case "$__w_held" in *" $p "*) continue;; esac; '
    'line=; read -r line 2>/dev/null < "$d/stat" || continue; rest=${line##*) }; state=${rest%% *}; '
    'case "$state" in T|t|Z|X) continue;; esac; '
    'kill -STOP "$p" 2>/dev/null && { __w_held="$__w_held$p "; fresh=1; }; done; [ $fresh = 1 ] || break; done; '
    # a stop sent while a process is inside its own kill() lands after that call: the control
    # shell is continued only once each held process is seen stopped (or gone); one still
    # running (a tracer let it go on) is stopped again
    'for p in $__w_held; do for ((round = 0; round < 2000; round++)); do line=; read -r line 2>/dev/null < "/proc/$p/stat" || break; '
    'rest=${line##*) }; case "${rest%% *}" in T|t|Z|X) break;; esac; kill -STOP "$p" 2>/dev/null; done; done; '
    '[ -z "$ctl" ] || kill -CONT "$ctl" 2>/dev/null; return 0; }\n'
    '__w_release() { local p; for p in $__w_held; do kill -CONT "$p" 2>/dev/null; done; __w_held=" "; }\n'
)


def registration_loop(when_icplay_is_gone: str) -> str:
    """The warden's last lines: it reads icplay's lines and answers each with its NONCE once it
    holds the pid (``shell``, ``control``) or has done what it was asked (``hold``,
    ``release``: see HOLD, which the script must define); a read cut by a trapped signal is read again. (No ``IFS=`` before that
    read: it would hold in the traps, which run while the read waits, and split their reads.)
    At the end of its stdin (icplay is gone), ``when_icplay_is_gone`` runs."""
    return (
        "__w_shell=; __w_shell_t=; __w_control=; __w_control_t=\n"
        "while :; do what=; pid=; nonce=; read -r what pid nonce; rc=$?\n"
        "  if [ $rc -gt 128 ]; then continue; elif [ $rc -ne 0 ]; then break; fi\n"
        "  __w_alive \"$pid\" || __w_t=-\n"
        "  case $what in shell) __w_shell=$pid __w_shell_t=$__w_t;; control) __w_control=$pid __w_control_t=$__w_t;; "
        "hold) __w_hold;; release) __w_release;; *) continue;; esac\n"
        "  printf '\\036%s\\036\\n' \"$nonce\"\n"
        "done\n"
        f"{when_icplay_is_gone}\n"
    )


def registration(role: str, pid: int, nonce: str) -> tuple[bytes, bytes]:
    """(the line icplay writes to the warden, the answer it waits for)."""
    return f"{role} {int(pid)} {nonce}\n".encode(), b"\x1e" + nonce.encode() + b"\x1e\n"


def request(what: str, nonce: str) -> tuple[bytes, bytes]:
    """``hold`` or ``release``: (the line icplay writes to the warden, the answer it waits for)."""
    assert what in ("hold", "release"), what
    return f"{what} - {nonce}\n".encode(), b"\x1e" + nonce.encode() + b"\x1e\n"


class WardenLine:
    """Pid 1's attached stdin and stdout as the warden's request line: one request at a time,
    each answered (its nonce echoed) before the next."""

    def __init__(self, pid1: Pid1Streams, timeout: float):
        self.pid1, self.timeout = pid1, timeout
        self._lock = threading.Lock()

    def tell(self, line: bytes, answer: bytes) -> None:
        with self._lock:
            self.pid1.write(line)
            self.pid1.wait_for(answer, timeout=self.timeout)

    def register(self, role: str, pid: int) -> None:
        """The pid of the session's shell or the control shell (``role``), held by the warden
        with that process's start time once this returns: a stop spares that process."""
        self.tell(*registration(role, pid, secrets.token_hex(8)))

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Every process of the container but pid 1 and the control shell stopped by the warden,
        and the control shell continued, then let go (``HOLD``): the solver, root in its
        container, may stop the control shell, and its processes would race a ``docker exec``.
        A warden that does not answer (the container died) holds nothing; the caller finds that."""
        holding = True
        try:
            self.tell(*request("hold", secrets.token_hex(8)))
        except (SandboxError, OSError):
            holding = False
        try:
            yield
        finally:
            if holding:
                with contextlib.suppress(SandboxError, OSError):
                    self.tell(*request("release", secrets.token_hex(8)))
