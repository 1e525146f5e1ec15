"""How a task's own image runs *faithful*: the action sees the container its image makes
and nothing of icplay's.

InterCode's containers (and any image not built by icplay) run their image's ``/bin/bash``
as pid 1, and so does a faithful container: a plain bash whose *warden* script (icplay's
stop logic, in signal traps) arrives on its stdin, not in its command line. The session's
shell is a ``docker exec``, as InterCode's actions are: its parent is outside the container
(``$PPID`` is 0, ``pstree`` from pid 1 does not show it), which is also how the warden tells
it from the action's processes.

A gold's container and the agent's must hold the same processes under the same numbers
(``find /`` walks /proc). Docker's start and exec leave a varying number of pids taken in
the container's namespace (runc's threads: 4 to 8, more under load), so the numbers are
made fixed twice: the warden hands out pids up to ``FIRST_SHELL_PID - 1`` (one subshell a
pid) and says so before the shell is exec'd, which then gets ``FIRST_SHELL_PID``; the shell
first hands out pids up to ``ACTIONS_FROM - 1``, so that its start, and the first action
after it, are numbered alike in every container.

No control shell, no pristine copies, no dropped capability (a process the action may not
read would show in ``find /`` as "Permission denied"), no exported variable of icplay's; the
host name is the same in every container of the image. Such containers are not recycled:
every episode and gold run gets a new one.
"""

from __future__ import annotations

import hashlib
import threading
import time
from icplay.sandbox.base import SandboxError
from icplay.sandbox.session import SHELL_ARGV, Transport

# The session's first shell gets this pid in every faithful container, and the first
# action's processes are numbered from ACTIONS_FROM (see above): Docker's start leaves the
# counter at 6 or so, an exec's threads take 4 to 8 more; the margins cover a loaded machine.
FIRST_SHELL_PID = 32
ACTIONS_FROM = 64

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
NAMESPACE_FLAGS = [0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000]
SECCOMP = {
    "defaultAction": "SCMP_ACT_ALLOW",
    "syscalls": [
        {"names": _DENIED_CALLS, "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
        {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38},
        *({"names": ["clone"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
           "args": [{"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}]}
          for flag in NAMESPACE_FLAGS),
    ],
}
# pid 1: the image's /bin/bash, without randomisation when the image has setarch. No fork
# here (``execfail``: an image without setarch goes on to plain bash), so that nothing takes
# a pid before the warden runs.
PID1_ARGV = ["/bin/bash", "-c", "shopt -s execfail; exec setarch -R /bin/bash; exec /bin/bash"]

# Variables bash adds to what it exports: the session's shell is exec'd through ``bash -c``,
# which would pass them on, so it is started without them unless the image itself sets
# them: its environment is the one a plain ``docker exec`` gives.
BASH_ADDED_VARIABLES = ("PWD", "SHLVL", "_")

# The warden's traps. Kept alive by every stop: pid 1 and every process whose parent is
# outside the container (the session's shell, a ``docker exec`` of the reward's: no
# process of the action can have that parent).
_KEEP = ('keep=" "; for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" = 1 ] && continue; line=; '
         'read -r line < "$d/stat" 2>/dev/null || continue; rest=${line##*) }; rest=${rest#* }; '
         '[ "${rest%% *}" = 0 ] && keep="$keep$p "; done')
_KILL = ('seen=" "; for round in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do fresh=0; '
         'for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" = 1 ] && continue; '
         'case "$keep$seen" in *" $p "*) continue;; esac; kill -STOP "$p" 2>/dev/null; seen="$seen$p "; '
         'fresh=1; done; [ $fresh = 1 ] || break; done; for p in $seen; do kill -KILL "$p" 2>/dev/null; done')
# USR2, stop the session's command: what is kept is frozen and told to abandon its action
# (USR1, pending until it is thawed; one that ignores or blocks USR1 is killed), every
# other process is killed, the kept ones thawed. HUP: kill everything. WINCH (a sweep):
# kill everything but what is kept.
_STOP = ('for k in $keep; do kill -STOP "$k" 2>/dev/null || continue; mask=0; '
         'while read -r key value; do case "$key" in SigIgn:|SigBlk:) mask=$(( mask | 0x$value ));; esac; '
         'done < /proc/$k/status; if (( mask & 0x200 )); then kill -KILL "$k"; else kill -USR1 "$k"; fi; done 2>/dev/null')


def advance_pids(last: int) -> str:
    """Bash that hands out pids (one subshell each) until the namespace's last pid
    (/proc/loadavg's fifth field) is at least ``last``."""
    return (f"while {{ read -r __ic_a __ic_a __ic_a __ic_a __ic_p; }} </proc/loadavg && [[ $__ic_p =~ ^[0-9]+$ ]] "
            f"&& (( __ic_p < {int(last)} )); do ( : ); done; unset __ic_a __ic_p")


def warden(ready: bytes) -> str:
    """Pid 1's script: its traps, then pids handed out up to FIRST_SHELL_PID - 1, then
    ``ready`` printed; then it waits on stdin (no pid taken; traps interrupt the wait)."""
    escaped = "".join(f"\\{byte:03o}" for byte in ready)
    return (
        "trap '" + _KEEP + "; " + _STOP + "; " + _KILL + '; for k in $keep; do kill -CONT "$k" 2>/dev/null; done'
        + "' USR2\n"
        "trap 'keep=\" \"; " + _KILL + "' HUP\n"
        "trap '" + _KEEP + "; " + _KILL + "' WINCH\n"
        "trap 'exit 0' TERM INT\n"
        f"{advance_pids(FIRST_SHELL_PID - 1)}\n"
        f"printf '{escaped}'\n"
        # stdin ends only when icplay's connection is gone (icplay died): stop reading then
        "while :; do read -r _ || exec sleep infinity; done\n"
    )


def shell_argv(unset: tuple[str, ...] = BASH_ADDED_VARIABLES) -> list[str]:
    """The session's shell, exec'd: no fork on the way (it keeps the exec's pid), without
    address randomisation where the image has setarch, without the variables bash -c adds
    where the image has env (``command -v``: once env or setarch is exec'd, there is no
    going back to the next choice)."""
    plain = " ".join(SHELL_ARGV)
    options = " ".join(f"-u {name}" for name in unset)
    drop = f'command -v env >/dev/null && e="env {options}"; ' if unset else ""
    return ["bash", "-c", f"e=; {drop}command -v setarch >/dev/null && exec $e setarch -R {plain}; exec $e {plain}"]


def hostname(image_id: str) -> str:
    """The host name of every faithful container of an image: twelve hex digits, as
    Docker's own names look, the same for the gold's container and the agent's."""
    return hashlib.sha256(image_id.encode()).hexdigest()[:12]


def unset_variables(image_env: list[str] | None) -> tuple[str, ...]:
    """Which of BASH_ADDED_VARIABLES the session's shell starts without: those the image
    does not set itself."""
    names = {entry.split("=", 1)[0] for entry in image_env or []}
    return tuple(name for name in BASH_ADDED_VARIABLES if name not in names)


class Pid1Streams:
    """The attached stdin and stdout of a faithful container's pid 1: the warden's script
    goes in; its ready notice comes out, and whatever else pid 1 prints is read and dropped
    (a full pipe would block the warden). ``stream`` is the attach connection with Docker's
    frames already split (docker.py's socket transport, a ``session.Transport``); it stays
    open as long as the container: closed, it would end pid 1's stdin (see the warden)."""

    def __init__(self, stream: Transport):
        self._stream = stream
        self._seen = bytearray()
        self._cond = threading.Condition()
        self._ended = False
        threading.Thread(target=self._drain, daemon=True, name="icplay-pid1-reader").start()

    def write(self, data: bytes) -> None:
        self._stream.write(data)

    def wait_for(self, notice: bytes, timeout: float) -> None:
        """Until pid 1 has printed ``notice`` (Docker's frame headers may cut it anywhere)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while notice not in self._seen:
                remaining = deadline - time.monotonic()
                if self._ended or remaining <= 0:
                    said = bytes(self._seen[-300:]).decode(errors="replace")
                    raise SandboxError(f"the container's pid 1 did not get ready{'; it printed: ' + said if said else ''}")
                self._cond.wait(remaining)
            self._seen.clear()

    def close(self) -> None:
        self._stream.close()

    def _drain(self) -> None:
        try:
            while True:
                data = self._stream.read()
                if not data:
                    break
                with self._cond:
                    self._seen += data
                    del self._seen[:-4096]
                    self._cond.notify_all()
        except OSError:
            pass
        with self._cond:
            self._ended = True
            self._cond.notify_all()
