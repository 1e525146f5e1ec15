"""How a task's own image runs *faithful*: the action sees the container its image makes
and nothing of icplay's.

InterCode's containers (and any image not built by icplay) run their image's ``/bin/bash``
as pid 1, and so does a faithful container: a plain bash whose *warden* script arrives on
its stdin, not in its command line. The warden starts the session's shell itself, as its
child, with the container's own stdin and stdout for its streams (icplay is attached to
them): so the shell gets the same pid in every container of the image, and a gold's
container and the agent's hold the same processes under the same numbers (``find /`` walks
/proc). A ``docker exec`` would not do: runc's threads take a varying number of pids in the
container's namespace before the exec'd process gets its own (6 to 8, more under load).
The threads of the container's own start vary too, so the warden first hands out pids up to
``FIRST_SHELL_PID - 1`` (one subshell a pid) before it starts the first shell.

No control shell, no pristine copies, no dropped capability (a process the action may not
read would show in ``find /`` as "Permission denied"), no exported variable of icplay's; the
host name is the same in every container of the image. Such containers are not recycled:
every episode and gold run gets a new one.
"""

from __future__ import annotations

import hashlib
import queue
import socket
import threading
from typing import Any

from icplay.sandbox.base import SandboxError
from icplay.sandbox.session import SHELL_ARGV

# The session's first shell gets this pid in every faithful container (see above). Docker's
# start leaves the counter at 6 or so; the margin covers a loaded machine.
FIRST_SHELL_PID = 32

# Faithful containers run without address-space randomisation (``setarch -R``, inherited
# by every process of the action): ``find /`` lists /proc/<pid>/map_files, whose names are
# the address ranges of each mapped file, and with randomisation the gold's container and
# the agent's never listed the same names. Docker's default seccomp profile refuses that
# personality, so these containers get a profile that allows every system call but the
# ones the default profile refuses (namespaces, mounts, kernel keys and modules, clocks,
# tracing other processes' memory...); ``personality`` is the one it now allows. An image
# without setarch runs as before.
_DENIED_CALLS = [
    "acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "create_module", "delete_module",
    "finit_module", "fsconfig", "fsmount", "fsopen", "fspick", "get_kernel_syms", "get_mempolicy",
    "init_module", "ioperm", "iopl", "kcmp", "kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie",
    "mbind", "mount", "mount_setattr", "move_mount", "move_pages", "name_to_handle_at", "nfsservctl",
    "open_by_handle_at", "open_tree", "perf_event_open", "pivot_root", "process_vm_readv",
    "process_vm_writev", "quotactl", "quotactl_fd", "query_module", "reboot", "request_key",
    "set_mempolicy", "setns", "settimeofday", "stime", "swapoff", "swapon", "sysfs", "_sysctl", "umount",
    "umount2", "unshare", "uselib", "userfaultfd", "ustat", "vm86", "vm86old",
]
# clone with any namespace flag (CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID,
# NEWNET); clone3 says "not implemented", so that the C library falls back to clone
_NAMESPACE_FLAGS = [0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000]
SECCOMP = {
    "defaultAction": "SCMP_ACT_ALLOW",
    "syscalls": [
        {"names": _DENIED_CALLS, "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
        {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38},
        *({"names": ["clone"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
           "args": [{"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}]}
          for flag in _NAMESPACE_FLAGS),
    ],
}
# pid 1: the image's /bin/bash, without randomisation when the image has setarch. No fork
# here (``execfail``: an image without setarch goes on to plain bash), so that nothing takes
# a pid before the warden runs.
PID1_ARGV = ["/bin/bash", "-c", "shopt -s execfail; exec setarch -R /bin/bash; exec /bin/bash"]

# Variables bash adds to what it exports (pid 1's bash -c passes them to the warden): the
# session's shell is started without them unless the image itself sets them, so that its
# environment is the one ``docker exec`` would give it.
BASH_ADDED_VARIABLES = ("PWD", "SHLVL", "_")

# The warden's traps. Kept alive by every stop: pid 1, the session's shell ($s) and any
# process whose parent is outside the container (a ``docker exec`` of icplay's reward:
# no process of the action can have that parent).
_KEEP = ('keep=" $s "; for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" = 1 ] && continue; line=; '
         'read -r line < "$d/stat" 2>/dev/null || continue; rest=${line##*) }; rest=${rest#* }; '
         '[ "${rest%% *}" = 0 ] && keep="$keep$p "; done')
_KILL = ('seen=" "; for round in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do fresh=0; '
         'for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" = 1 ] && continue; '
         'case "$keep$seen" in *" $p "*) continue;; esac; kill -STOP "$p" 2>/dev/null; seen="$seen$p "; '
         'fresh=1; done; [ $fresh = 1 ] || break; done; for p in $seen; do kill -KILL "$p" 2>/dev/null; done')
# USR2, stop the session's command: the shell is frozen, told to abandon its action (USR1,
# pending until it is thawed; a shell that ignores or blocks USR1 is killed), every other
# process is killed, the shell thawed. HUP: kill everything, the shell too. WINCH (a
# sweep): kill everything but what is kept.
_STOP = ('if [ -n "$s" ] && kill -STOP "$s" 2>/dev/null; then mask=0; '
         'while read -r key value; do case "$key" in SigIgn:|SigBlk:) mask=$(( mask | 0x$value ));; esac; '
         'done < /proc/$s/status; if (( mask & 0x200 )); then kill -KILL "$s"; else kill -USR1 "$s"; fi; fi 2>/dev/null')


def warden(notice: bytes, unset: tuple[str, ...] = BASH_ADDED_VARIABLES) -> str:
    """Pid 1's script. It reads a line ("go") for each session shell to start, starts it
    on the container's stdin and stdout, waits for it, and prints ``notice`` once it is
    gone. Waiting (``wait``, ``read``) takes no pid, and traps interrupt both."""
    plain = " ".join(SHELL_ARGV)
    env_unset = " ".join(f"-u {name}" for name in unset)
    start = f"exec env {env_unset} {plain}; exec {plain}" if unset else f"exec {plain}"
    escaped = "".join(f"\\{byte:03o}" for byte in notice)
    return (
        "shopt -s execfail\n"
        "s=\n"
        "trap '" + _KEEP + "; " + _STOP + "; " + _KILL + '; [ -n "$s" ] && kill -CONT "$s" 2>/dev/null' + "' USR2\n"
        "trap 'keep=\" \"; " + _KILL + "' HUP\n"
        "trap '" + _KEEP + "; " + _KILL + "' WINCH\n"
        "trap 'exit 0' TERM INT\n"
        "while { read -r a a a a p; } </proc/loadavg && [[ $p =~ ^[0-9]+$ ]] && "
        f"(( p < {FIRST_SHELL_PID - 1} )); do ( : ); done; unset a p\n"
        # one line, parsed whole before it runs: from here on the warden reads stdin only
        # while no shell runs (a line each), and stdin ends only when icplay's connection
        # is gone (icplay died): it stops reading then
        "while :; do read -r _ || exec sleep infinity; "
        f"( {start} ) <&0 2>&1 & s=$!; "
        'while :; do wait "$s"; kill -0 "$s" 2>/dev/null || break; done; s=; '
        f"printf '{escaped}'; done\n"
    )


def hostname(image_id: str) -> str:
    """The host name of every faithful container of an image: twelve hex digits, as
    Docker's own names look, the same for the gold's container and the agent's."""
    return hashlib.sha256(image_id.encode()).hexdigest()[:12]


def unset_variables(image_env: list[str] | None) -> tuple[str, ...]:
    """Which of BASH_ADDED_VARIABLES the session's shell starts without: those the image
    does not set itself."""
    names = {entry.split("=", 1)[0] for entry in image_env or []}
    return tuple(name for name in BASH_ADDED_VARIABLES if name not in names)


class AttachedShell:
    """The streams of one session shell started by the warden (a ``session.Transport``):
    the container's stdout up to the warden's notice that this shell is gone."""

    def __init__(self, channel: "Pid1Channel"):
        self._channel = channel
        self._chunks: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self.gone = threading.Event()

    def write(self, data: bytes) -> None:
        if self.gone.is_set():
            raise OSError("the shell is gone")
        self._channel.write(data)

    def read(self) -> bytes:
        return self._chunks.get()

    def close(self) -> None:
        """Stop listening (the shell itself is stopped through the warden)."""
        self._channel.detach(self)

    def _deliver(self, data: bytes) -> None:
        if data:
            self._chunks.put(data)

    def _end(self) -> None:
        if not self.gone.is_set():
            self.gone.set()
            self._chunks.put(b"")


class Pid1Channel:
    """The attached stdin and stdout of a faithful container's pid 1, shared by the warden
    and the session shells it starts one after another. A reader thread splits Docker's
    frames and hands the output to the current shell until the warden's notice."""

    def __init__(self, sock: Any, notice: bytes):
        self._wrapper = sock
        self._sock = getattr(sock, "_sock", sock)
        self._sock.settimeout(None)    # an idle shell may rightly stay silent for hours
        self.notice = notice
        self._lock = threading.Lock()
        self._current: AttachedShell | None = None
        self._closed = False
        self._tail = b""
        self._reader = threading.Thread(target=self._read_all, daemon=True, name="icplay-pid1-reader")
        self._reader.start()

    def write(self, data: bytes) -> None:
        self._sock.sendall(data)

    def open_shell(self) -> AttachedShell:
        """Have the warden start a new session shell; its streams. The previous one must
        be gone (its notice seen): a live one would read the next shell's input."""
        with self._lock:
            if self._closed:
                raise SandboxError("the container's streams are closed")
            if self._current is not None and not self._current.gone.is_set():
                raise SandboxError("the previous shell is still running")
            shell = self._current = AttachedShell(self)
        self.write(b"go\n")
        return shell

    def busy(self) -> bool:
        """Whether a session shell the warden started is still running."""
        with self._lock:
            return self._current is not None and not self._current.gone.is_set()

    def detach(self, shell: AttachedShell) -> None:
        with self._lock:
            if self._current is shell and shell.gone.is_set():
                self._current = None

    def close(self) -> None:
        with self._lock:
            self._closed = True
        for closer in (lambda: self._sock.shutdown(socket.SHUT_RDWR), self._sock.close, self._wrapper.close):
            try:
                closer()
            except Exception:
                pass

    # -- the reader thread ----------------------------------------------------------------

    def _read_all(self) -> None:
        buffer = bytearray()
        try:
            while True:
                chunk = self._sock.recv(1 << 18)
                if not chunk:
                    break
                buffer += chunk
                # Docker's frames: 1 byte stream id, 3 zero bytes, 4 bytes big-endian length
                pos = 0
                while len(buffer) - pos >= 8:
                    length = int.from_bytes(buffer[pos + 4:pos + 8], "big")
                    if len(buffer) - pos - 8 < length:
                        break
                    payload = bytes(buffer[pos + 8:pos + 8 + length])
                    if buffer[pos] == 2:       # the warden's own errors (a fork refused...)
                        self._to_current(payload)
                    else:                      # the shell's output and the warden's notices
                        self._output(payload)
                    pos += 8 + length
                del buffer[:pos]
        except OSError:
            pass
        with self._lock:
            self._closed = True
            current = self._current
        if current is not None:
            current._deliver(self._tail)
            current._end()

    def _output(self, data: bytes) -> None:
        """Output to the current shell; at the notice, that shell ends. A suffix that may
        be the notice's start is held until the next chunk."""
        data = self._tail + data
        self._tail = b""
        notice = self.notice
        while data:
            at = data.find(notice)
            if at >= 0:
                self._to_current(data[:at], end=True)
                data = data[at + len(notice):]
                continue
            hold = len(data)
            start = data.find(notice[:1], max(0, len(data) - len(notice) + 1))
            while start >= 0:
                if notice.startswith(data[start:]):
                    hold = start
                    break
                start = data.find(notice[:1], start + 1)
            self._to_current(data[:hold])
            self._tail = data[hold:]
            break

    def _to_current(self, data: bytes, end: bool = False) -> None:
        with self._lock:
            current = self._current
        if current is None or current.gone.is_set():
            return            # output of no shell (a background job of one that is gone)
        current._deliver(data)
        if end:
            current._end()
