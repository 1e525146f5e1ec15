"""The Docker sandbox: one container per episode, one persistent bash inside it.

The container's pid 1 is a tiny bash "warden" whose traps do what the Docker API cannot do
without spawning a process (impossible when a fork bomb has used up the pids limit):
SIGUSR2 freezes and kills every process but itself and the two shells (and tells the
session's shell to abandon its action), SIGHUP kills the session's shell too. Which two
shells those are, icplay tells the warden on its attached stdin when each starts (pid and
start time, held in the warden's memory), never through a file: the solver is root in its
container and writes any file there. The session
runs through an attached ``docker exec`` socket, so a trivial action costs a round trip on
an open stream instead of a new exec (InterCode's way, ~60 ms). On a task's own image the
container is *faithful* instead (``faithful.py``): pid 1 is the image's bash, no control
shell, and pids numbered alike in every container.

A second shell, the *control* shell, runs the reward's side commands (``git status``,
hashes) without a ``docker exec`` each, and recycles the container for the next episode
when it can prove the container pristine again (see ``recycle.py``). The session's shell
runs with one capability fewer than the control shell and the warden, so the agent
cannot ptrace either of them.

On icplay's own images the root filesystem is read-only and the writable roots are
sized tmpfs mounts (``disk_limit``), so what an action writes is bounded. A container
that dies (pid 1 killed, OOM, removed) is replaced at the next action, with a note.

Containers are labelled ``icplay=1`` with the creating process's pid and host, so the
next icplay start removes what a crashed one left behind, and an ``atexit`` hook removes
this process's containers on a normal exit.
"""

from __future__ import annotations

import contextlib
import io
import secrets
import os
import re
import tarfile
import threading
from pathlib import Path
from typing import Any, Callable

import shlex
import time

from icplay.sandbox.base import (DEFAULT_OUTPUT_CAP, DEFAULT_TIMEOUT, OutputCallback, SandboxCapabilities, SandboxError,
                                 ShellResult)
from icplay.sandbox.recycle import (CLOCK_SLACK, CONTROL_FUNCTIONS, DEFAULT_ROOTS, SCORING_SCRATCH, freeze_and_kill,
                                    RECYCLE_TIMEOUT, pristine_git, take_pristine_copies)
from icplay.sandbox import faithful as faithful_mode
from icplay.sandbox import warden
from icplay.sandbox.registry import SandboxRequest, register_sandbox
from icplay.sandbox.session import SHELL_ARGV, START_TIMEOUT, PersistentShell, ShellControl
from icplay.sandbox.container import EngineContainer
from icplay.sandbox.engine import EngineRules, engine_errors, engine_message
from icplay.sandbox.tracking import (LABEL, _remove_quietly, after_removal, container_labels, creating,  # noqa: F401
                                     reap_leftovers, reap_once, remove_container, track)
from icplay.sandbox.files import tar_of
from icplay.sandbox.streams import ExecSocketTransport as _ExecSocketTransport
from icplay.sandbox.images import INPUTS_LABEL, docker_client, ensure_known_image

# The session's shell drops this capability (nothing a task needs), which makes its
# capabilities a strict subset of the warden's and the control shell's: Linux then
# refuses it ptrace and /proc/<pid>/mem on them. Images without setpriv get a plain
# shell, and their containers are not recycled (the control shell checks the same way).
_DROP = "setpriv --bounding-set=-audit_write --"
CAN_HARDEN = f"command -v setpriv >/dev/null && {_DROP} true 2>/dev/null"
_PLAIN = " ".join(SHELL_ARGV)
CONTROL_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
# What the control shell's side commands run under: the session's capabilities, no more
CONTROL_DROP = ["/usr/bin/setpriv", "--bounding-set=-audit_write", "--"]
SESSION_SHELL_ARGV = ["sh", "-c", f"{CAN_HARDEN} && exec {_DROP} {_PLAIN}; exec {_PLAIN}"]
KILL_SHELL_WAIT = 3.0   # seconds to wait for the warden to kill the session's shell
GONE_SETTLE = 5.0   # seconds Docker may take to see that a container's pid 1 is gone

# The warden's kill: everything but itself, the session's shell and the control shell.
_KILL_ALL_BUT = freeze_and_kill('1|"$keep"|"$ctl"')
# Which processes a stop spares: the session's shell and the control shell, as icplay told
# the warden (``warden.py``: never read from a file of the container's)
_SPARED = warden.registered("shell", "keep") + warden.registered("control", "ctl")
# Stopping the session's command: the shell is frozen first, so that nothing more of the
# action runs while the warden decides. A shell that ignores or blocks SIGUSR1 (`trap ''
# USR1`) could not abandon its action: it is killed (the session starts another). Any
# other shell gets SIGUSR1 (pending until it is thawed), every other process is killed,
# then the shell is thawed.
_STOP_SHELL = (
    'if [ -n "$keep" ] && kill -STOP "$keep" 2>/dev/null; then mask=0; '
    'while read -r key value; do case "$key" in SigIgn:|SigBlk:) mask=$(( mask | 0x$value ));; esac; '
    'done < /proc/$keep/status; '
    'if (( mask & 0x200 )); then kill -KILL "$keep"; keep=; else kill -USR1 "$keep"; fi; fi 2>/dev/null; '
)
# When icplay's connection ends, only the traps are left, on the shells last told.
WARDEN = (
    warden.ALIVE + warden.HOLD +
    "trap '" + _SPARED + _STOP_SHELL + _KILL_ALL_BUT + '; [ -n "$keep" ] && kill -CONT "$keep" 2>/dev/null' + "' USR2\n"
    "trap '" + _SPARED + "keep=; " + _KILL_ALL_BUT + "' HUP\n"
    "trap 'exit 0' TERM INT\n"
    + warden.registration_loop("while :; do sleep 2147483647 & wait $!; done")
)
REGISTER_TIMEOUT = 30.0   # seconds for the warden to take a new shell's pid (a loaded machine)

DEFAULT_LIMITS = {"mem_limit": "1g", "memswap_limit": "1g", "pids_limit": 256, "nano_cpus": 1_000_000_000}

# What an action may write, on icplay's own images: the root filesystem is read-only and
# every writable root is a tmpfs of this size, filled from the image at start. tmpfs lives
# in the container's memory cgroup, so the memory limit is raised by the same amount: a
# fill of one root ends in ENOSPC; a fill of several at once ends in the OOM killer, and a
# container that loses its pid 1 that way is replaced (see ``run``). Every file an action
# writes (also Docker's bind-mounted /etc/hosts, /etc/hostname, /etc/resolv.conf, which
# live on the host's disk) is capped by RLIMIT_FSIZE at the same size.
DEFAULT_DISK_LIMIT = "2g"
DISK_LIMIT_ENV = "ICPLAY_DISK_LIMIT"   # e.g. 512m, 4g; "off" leaves the root writable and unbounded
WRITABLE_ROOTS = (*DEFAULT_ROOTS, "/run", "/.git")
_SIZE = re.compile(r"(\d+)([kmg]?)b?", re.I)


def size_bytes(size: str | int) -> int:
    """"2g", "512m", "100k" or a number of bytes, as bytes; a clear error otherwise."""
    if isinstance(size, int):
        return size
    match = _SIZE.fullmatch(str(size).strip())
    if not match:
        raise SandboxError(f"not a size: {size!r} (write e.g. 2g, 512m)")
    return int(match.group(1)) * int(1024 ** " kmg".index((match.group(2) or " ").lower()))

_trees: dict[str, tuple[list[str], bytes]] = {}
_trees_lock = threading.Lock()


def image_tree(client: Any, image: str, roots: tuple[str, ...] = WRITABLE_ROOTS) -> tuple[list[str], bytes]:
    """The image's writable roots (those that are folders in it) and one tar of their
    contents, made once per image and process from a created, never started container."""
    import docker.errors

    image_id = client.api.inspect_image(image)["Id"]
    with _trees_lock:
        if image_id in _trees:
            return _trees[image_id]
        with creating():
            created = client.api.create_container(image_id, command=["true"], labels=container_labels("probe"))["Id"]
            track(created, client)
        try:
            out = io.BytesIO()
            found: list[str] = []
            with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tree:
                for root in roots:
                    try:
                        stream, stat = client.api.get_archive(created, root)
                    except docker.errors.NotFound:
                        continue
                    data = b"".join(stream)
                    if not (int(stat.get("mode", 0)) & (1 << 31)):   # os.ModeDir: a folder
                        continue
                    parent = root.rsplit("/", 1)[0].lstrip("/")
                    with tarfile.open(fileobj=io.BytesIO(data)) as part:
                        for member in part.getmembers():
                            if parent:
                                member.name = f"{parent}/{member.name}"
                                if member.islnk():
                                    member.linkname = f"{parent}/{member.linkname}"
                            tree.addfile(member, part.extractfile(member) if member.isreg() else None)
                    found.append(root)
            _trees[image_id] = (found, out.getvalue())
        finally:
            _remove_quietly(client, created)
        return _trees[image_id]


def icplay_image(client: Any, image: str) -> bool:
    """Whether the image is one of icplay's own (built from docker/, labelled so)."""
    try:
        labels = (client.api.inspect_image(image).get("Config") or {}).get("Labels") or {}
    except engine_errors():
        return False   # not there (start says so) or the engine is gone
    return INPUTS_LABEL in labels


def run_options(client: Any, image: str, limits: dict[str, Any], ulimits: list[Any],
                disk_limit: int | None) -> tuple[dict[str, Any], bytes]:
    """A container's resource options, and (``disk_limit`` given: icplay's images) the tar
    of the image's writable roots, which become tmpfs mounts of that size over a read-only
    root, every file capped at the same size."""
    import docker.types

    options: dict[str, Any] = dict(limits)
    if ulimits:
        options["ulimits"] = ulimits
    if disk_limit is None:
        return options, b""
    roots, tree = image_tree(client, image)
    options.update(
        read_only=True, tmpfs={r: f"rw,exec,nosuid,nodev,size={disk_limit}" for r in roots},
        ulimits=[*ulimits, docker.types.Ulimit(name="fsize", soft=disk_limit, hard=disk_limit)],
        log_config=docker.types.LogConfig(type="none"),
        mem_limit=size_bytes(options["mem_limit"]) + disk_limit,
        memswap_limit=size_bytes(options["memswap_limit"]) + disk_limit)
    return options, tree


def create_attached(client: Any, image: str, command: list[str], labels: dict[str, str],
                    **options: Any) -> tuple[Any, faithful_mode.Pid1Streams]:
    """A started container whose pid 1's stdin and stdout icplay holds, attached before the
    start (nothing pid 1 says is missed; its stdin is open from its first line)."""
    with creating():
        container = client.containers.create(image, command=command, stdin_open=True, detach=True, labels=labels,
                                             privileged=False, **options)
        track(container.id, client)
    attached = False
    try:
        pid1 = faithful_mode.Pid1Streams(_ExecSocketTransport(
            container.attach_socket(params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})))
        container.start()
        attached = True
    finally:
        if not attached:
            _remove_quietly(client, container.id)
    return container, pid1


class DockerSandbox:
    """One episode at a time in its own container of an icplay (or user-named) image."""

    kind = "docker"
    capabilities = SandboxCapabilities(runs_images=True, recyclable=True, replaces_dead=True)
    rules = EngineRules()   # what the engine needs of every container (Podman's: podman.py)

    def __init__(self, client: Any, image: str, network: bool = False, limits: dict[str, Any] | None = None,
                 timeout: float = DEFAULT_TIMEOUT, output_cap: int = DEFAULT_OUTPUT_CAP, workdir: str | None = None,
                 recycle: bool = True, trusted: bool = False, disk_limit: str | int | None = "default",
                 faithful: bool | None = None):
        """``disk_limit``: the size of each writable root (and of any file) on icplay's
        images (default: $ICPLAY_DISK_LIMIT, else 2g); None or "off" leaves the root
        filesystem writable and unbounded, as on other images. ``faithful`` (default:
        on any image but icplay's own): nothing of icplay visible to the action (see
        ``faithful.py``); never recycled."""
        self.client = client
        self.faithful = (not icplay_image(client, image)) if faithful is None else faithful
        if disk_limit == "default":
            disk_limit = os.environ.get(DISK_LIMIT_ENV) or DEFAULT_DISK_LIMIT
        self.disk_limit = None if disk_limit in (None, "off", "0") else size_bytes(disk_limit)
        self.bounded = False             # set at start: read-only root, tmpfs roots
        self.image = image
        self.network = network
        self.limits = {**DEFAULT_LIMITS, **(limits or {})}
        self.workdir = workdir
        self.timeout = timeout
        self.output_cap = output_cap
        self.container: Any = None
        self.recyclable = False          # set once the control shell has taken the pristine copies
        self.last_recycle_note = ""      # why the last recycle failed, or what it restored
        self._want_recycle = recycle
        # trusted: only gold commands run here, each in a subshell, so a recycle may keep
        # the shell (its state is the fresh one) instead of starting another
        self.trusted = trusted
        self._hardened = False
        self._settled_at = 0.0           # monotonic time before which nothing may run (recycle.CLOCK_SLACK)
        self._exec_ids: dict[str, str] = {}
        self._pid1: faithful_mode.Pid1Streams | None = None   # pid 1's stdin and stdout (the warden's)
        self._warden: warden.WardenLine | None = None   # requests to pid 1 (not in a faithful container)
        self._shell_argv = SESSION_SHELL_ARGV
        self.shell = self._new_shell()
        self.control: PersistentShell | None = None
        # git's pristine index, commit and tracked top-level names, read by the control shell
        # before any action (envs/bash_facts.py); None where there is no control shell
        self.pristine_git: dict[str, Any] | None = None
        # where scoring makes its private git folder: out of git's listing (/dev is ignored on
        # InterCode's images, /run on icplay's: see _start_control); never under /tmp, which
        # InterCode's images do not ignore
        self.scoring_scratch: str | None = "/dev/shm"
        # called when a new container replaced a dead one, before anything runs in it: the
        # episode puts its files back (CTF's task files, its setup)
        self.on_replaced: Callable[[], None] | None = None

    def _new_shell(self) -> PersistentShell:
        # a faithful shell first hands out the pids its exec's threads did not take, so that
        # every container's first action is numbered alike (faithful.py)
        init = faithful_mode.advance_pids(faithful_mode.ACTIONS_FROM - 1) if self.faithful else ":"
        if self.workdir:
            init += f"; cd {shlex.quote(self.workdir)}"
        return PersistentShell(
            ShellControl(open=lambda: self._open("shell"), kill_command=self._kill_command,
                         kill_shell=self._kill_shell, is_alive=lambda _pid: self._is_alive("shell"),
                         sweep=self._sweep, kill_is_deferred=True,
                         started=None if self.faithful else lambda pid: self._register("shell", pid)),
            init_script=init, output_cap=self.output_cap, default_timeout=self.timeout,
            # a recycled container is proven pristine by ctimes: the shell's start folder
            # goes in /tmp, which the proof restores, not in /dev/shm, which it watches
            **({"exports": ":"} if self.faithful else {"scratch": "/tmp"}))

    def start(self) -> None:
        reap_once(self.client)
        import docker.errors

        labels = container_labels(self.kind)
        try:
            self.bounded = self.disk_limit is not None and icplay_image(self.client, self.image)
            options, tree = run_options(self.client, self.image, self.limits, self.rules.ulimits(),
                                        self.disk_limit if self.bounded else None)
            if self.faithful:
                self._start_faithful(labels, options)
            else:
                self._start_warden(labels, options)
        except docker.errors.ImageNotFound:
            raise SandboxError(f"image {self.image} is not there: build it with `icplay images build`") from None
        except docker.errors.APIError as exc:
            raise SandboxError(f"Docker could not start a container of {self.image}: {exc.explanation or exc}") from None
        started = False
        try:
            if tree:
                self._box().fill(tree)   # the image's writable roots into their empty tmpfs mounts
            if not self.faithful:
                self._start_control()
            # the session's shell starts before the control shell takes the pristine copies:
            # its start makes and removes a folder in /tmp (session.enter_loop)
            self.shell.start()
            if self.control is not None and self._want_recycle and self._hardened:
                self.recyclable, self.last_recycle_note = take_pristine_copies(self.control, self.workdir)
                self._settled_at = time.monotonic() + CLOCK_SLACK
            if self.control is not None:
                self.pristine_git = pristine_git(self.control)
            started = True
        finally:
            if not started:
                self.close()

    def _start_warden(self, labels: dict[str, str], options: dict[str, Any]) -> None:
        """Pid 1 runs the WARDEN, its stdin and stdout attached: icplay tells it there which
        shells a stop spares (``_register``), where no process of the container can write."""
        self.container, self._pid1 = create_attached(
            self.client, self.image, ["bash", "-c", WARDEN], labels, network_mode=None if self.network else "none",
            security_opt=["no-new-privileges", *self.rules.security_opt()], hostname="icplay", **options)
        self._warden = warden.WardenLine(self._pid1, REGISTER_TIMEOUT)

    def _register(self, role: str, pid: int) -> None:
        """Tell the warden the pid of the session's shell or the control shell (``role``)."""
        if self._warden is None:
            raise SandboxError("the container's pid 1 is not attached: its warden cannot be told the shell")
        self._warden.register(role, pid)

    def _held(self) -> contextlib.AbstractContextManager[None]:
        """The solver's processes stopped by the warden meanwhile (``WardenLine.held``)."""
        return self._warden.held() if self._warden is not None else contextlib.nullcontext()

    def _start_faithful(self, labels: dict[str, str], options: dict[str, Any]) -> None:
        """Pid 1 is the image's plain /bin/bash; the warden's script goes in through its
        stdin. Returns once the warden has handed out the pids before the shell's."""
        import docker.types

        image = self.client.api.inspect_image(self.image)
        self._shell_argv = faithful_mode.shell_argv(faithful_mode.unset_variables((image.get("Config") or {}).get("Env")))
        # attached before the start, so that the ready notice cannot be missed
        self.container, self._pid1 = create_attached(
            self.client, self.image, faithful_mode.PID1_ARGV, labels, network_mode=None if self.network else "none",
            security_opt=["no-new-privileges", self.rules.seccomp_option(faithful_mode.SECCOMP)],
            hostname=faithful_mode.hostname(image["Id"]), **{**options, "log_config": docker.types.LogConfig(type="none")})
        ready = b"\x1e" + secrets.token_hex(8).encode() + b"\x1e\n"
        told = False
        try:
            self._pid1.write(faithful_mode.warden(ready).encode())
            self._pid1.wait_for(ready, timeout=START_TIMEOUT)
            told = True
        finally:
            if not told:
                self.close()

    def put_files(self, source: Path | None, dest: str, skip: frozenset[str] = frozenset()) -> None:
        """Copy the host folder ``source`` (None: nothing) to the folder ``dest`` in the
        container, made if missing (a symlink to a folder is followed), owned by root and
        writable, without the folders named in ``skip``. A container that replaces a dead
        one does not have them: ``on_replaced`` puts them back."""
        code, out = self.exec(["mkdir", "-p", dest])
        if code != 0:
            raise SandboxError(f"cannot make {dest} in the container: {out.strip()[-200:]}")
        if source is not None:
            self._box().fill(tar_of(Path(source), skip), into=dest)

    def _start_control(self) -> None:
        """The control shell: side commands without an exec each, and the recycling proof."""
        control = PersistentShell(
            ShellControl(open=lambda: self._open("control"), kill_command=lambda _pid: None,
                         kill_shell=lambda _pid: self._close_control(), is_alive=lambda _pid: self._is_alive("control"),
                         started=lambda pid: self._register("control", pid)),
            # its tools from the read-only system folders only, whatever the image's PATH says
            init_script=f"export PATH={CONTROL_PATH}; "
                        f"mkdir -p {SCORING_SCRATCH}\n{CONTROL_FUNCTIONS}", output_cap=4 * self.output_cap, scratch="/tmp",
            default_timeout=RECYCLE_TIMEOUT)
        try:
            control.start()
        except SandboxError:
            return   # an image without bash features we need: side commands go through docker exec
        self.control = control
        self._hardened = control.run(CAN_HARDEN).exit_code == 0
        self.scoring_scratch = SCORING_SCRATCH

    def _settle(self) -> None:
        """Wait out what is left of the clock slack after the last pristine mark."""
        delay = self._settled_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    def run(self, command: str, timeout: float | None = None, on_output: OutputCallback | None = None) -> ShellResult:
        self._settle()
        replaced: str | None = None
        if self.shell.pid is None and self._gone() is not None:
            replaced = self._replace()
        sent = time.time()
        try:
            result = self.shell.run(command, timeout, on_output)
        except engine_errors() as exc:   # the engine refused the exec (409: not running), or went away
            if self._gone(settle=GONE_SETTLE) is None:
                raise SandboxError(f"Docker could not run the command: {engine_message(exc)}") from None
            replaced = self._replace()
            result = self.shell.run(command, timeout, on_output)
        if replaced is None and result.shell_died and not result.output and self._died_before(sent):
            # The shell's stream outlived its container (Podman may let a shell start in a
            # container that is stopping): nothing of the command ran; it runs in a new one.
            replaced = self._replace()
            result = self.shell.run(command, timeout, on_output)
        if result.shell_died and self.container is not None and self.shell.pid is None:
            # Start the next shell now: if Docker refuses, the container itself is dying.
            try:
                self.shell.start()
            except engine_errors(SandboxError):
                why = self._gone(settle=GONE_SETTLE)
                if why is not None:
                    self._replace()
                    result.notes.append(f"the container {why}: a new container took its place, with the "
                                        "task's files as they were at the start")
                    result.sandbox_replaced = True
        if replaced is not None:
            result.notes.insert(0, replaced)
            result.sandbox_replaced = True
        return result

    def _died_before(self, moment: float) -> bool:
        """Whether the container had stopped before ``moment`` (a ``time.time()``)."""
        box = self.engine_container
        return box is not None and self._gone() is not None and box.finished_before(moment)

    def _gone(self, settle: float = 0.0) -> str | None:
        """None while the container runs; else what became of it, in a few words.

        ``settle``: a container whose pid 1 just died is still "running" to Docker for a
        moment (exec already refuses it): ask again until then."""
        deadline = time.monotonic() + settle
        while True:
            box = self.engine_container
            why = "was closed" if box is None else box.state()
            if why is not None or time.monotonic() >= deadline:
                return why
            time.sleep(0.1)

    def _replace(self) -> str:
        """A new container in place of one that died; the note says so."""
        why = self._gone() or "stopped"
        self.close()
        self.shell = self._new_shell()
        self.recyclable = False
        self.start()
        if self.on_replaced is not None:
            self.on_replaced()
        return (f"the previous container {why}: this command ran in a new container, with the task's "
                "files as they were at the start")

    def interrupt(self) -> None:
        self.shell.interrupt()

    @property
    def engine_container(self) -> EngineContainer | None:
        """The running container, as Harbor's verifier and the liveness checks touch it (None once closed)."""
        return None if self.container is None else EngineContainer(self.client, self.container.id, self.rules.top_args)

    def _box(self) -> EngineContainer:
        if self.container is None:
            raise SandboxError("the sandbox is closed")
        return EngineContainer(self.client, self.container.id, self.rules.top_args)

    def exec(self, argv: list[str], timeout: float = 30.0) -> tuple[int, str]:
        """Run a side command (the reward's); through the control shell when it is there, with
        every other process of the container held by the warden meanwhile (``_held``).

        A container that died is replaced first: it is scored as the new container the
        agent was told about."""
        self._settle()
        with self._held():
            return self._exec_held(argv, timeout)

    def _exec_held(self, argv: list[str], timeout: float) -> tuple[int, str]:
        if self.control is not None:
            # the solver's processes stopped while it runs, with the solver's own capabilities
            drop = shlex.join(CONTROL_DROP) + " " if self._hardened else ""
            line = "cd / && __ic_frozen " + drop + shlex.join(argv)
            result = self._control_run(line, timeout)
            if result.exit_code is None and self._gone() is not None:
                self._replace()
                result = self._control_run(line, timeout)
            if result.exit_code is not None or result.truncated_bytes or result.stopped_for_output:
                # output beyond the control shell's cap stays cut: the caller finds its end missing
                return (-1 if result.exit_code is None else result.exit_code), result.output
            self._close_control()    # killed or stuck: Docker's exec still works, the solver still held
        elif self._gone() is not None:
            self._replace()
        if self._hardened:
            argv = [*CONTROL_DROP, *argv]
        code, output, _dropped = self._box().exec_for(argv, self.output_cap * 4, timeout, workdir="/")
        return (-1 if code is None else code), output.decode("utf-8", "replace")

    def _control_run(self, line: str, timeout: float) -> ShellResult:
        if self.control is None:
            return ShellResult(output="", exit_code=None)
        try:
            return self.control.run(line, timeout=timeout)
        except engine_errors(SandboxError):
            return ShellResult(output="", exit_code=None)   # the control shell is gone: the caller falls back

    def recycle(self) -> bool:
        """Make this container pristine for another episode, or say it cannot be.

        On True the sandbox is as after ``start()``: a new shell at the start directory
        (or, in a trusted sandbox, the same shell, which only ran subshells). On False the
        caller closes it.
        """
        keep = self.shell.pid if self.trusted else None
        if keep is None:
            self.shell.close()
        if not (self.recyclable and self.control is not None and self.container is not None):
            return False
        with self._held():
            result = self.control.run(f"__ic_recycle {keep or ''}", timeout=RECYCLE_TIMEOUT)
        self.last_recycle_note = result.output.strip()[-300:]
        if result.exit_code != 0 or "icplay-pristine" not in result.output:
            self.recyclable = False
            return False
        self._settled_at = time.monotonic() + CLOCK_SLACK
        if keep is not None:
            return True
        self.shell = self._new_shell()
        try:
            self.shell.start()
        except SandboxError:
            self.recyclable = False
            return False
        return True

    def close(self) -> None:
        self.shell.close()
        self._close_control()
        pid1, self._pid1, self._warden = self._pid1, None, None
        if pid1 is not None:
            pid1.close()
        if self.container is not None:
            container, self.container = self.container, None
            _remove_quietly(self.client, container.id)

    def _close_control(self) -> None:
        control, self.control = self.control, None
        self.recyclable = False
        if control is not None:
            control.close()

    # -- the shells ---------------------------------------------------------------------

    def _open(self, which: str) -> "_ExecSocketTransport":
        api = self.client.api
        argv = self._shell_argv if which == "shell" else SHELL_ARGV
        created = api.exec_create(self.container.id, argv, stdin=True, stdout=True, stderr=True, tty=False)
        self._exec_ids[which] = created["Id"]
        sock = api.exec_start(created["Id"], socket=True)
        return _ExecSocketTransport(sock)

    def _signal(self, sig: str) -> None:
        if self.engine_container is not None:
            self.engine_container.signal(sig)

    def _kill_command(self, _shell_pid: int) -> None:
        self._signal("SIGUSR2")

    def _sweep(self, shell_pid: int) -> None:
        """Kill every process but the warden and the two shells, through the control shell
        (builtins only, so it works while a fork bomb holds every pid); in a faithful
        container, through the warden (SIGWINCH), watching Docker's process list."""
        if self.faithful:
            self._signal("SIGWINCH")
            deadline = time.monotonic() + KILL_SHELL_WAIT
            while time.monotonic() < deadline:
                if self.engine_container is not None and self.engine_container.processes() <= 2:
                    return
                time.sleep(0.05)
            raise SandboxError("the sweep left processes running")
        if self.control is None or not shell_pid:
            raise SandboxError("no control shell to sweep with")
        with self._held():
            self.control.run(f"__ic_keep={int(shell_pid)}; __ic_kill_others; __ic_keep=", timeout=10)

    def _kill_shell(self, _shell_pid: int) -> None:
        """Have the warden kill the session's shell, and wait until it is gone: the
        warden acts on its own time, and a shell started meanwhile would die instead."""
        self._signal("SIGHUP")
        deadline = time.monotonic() + KILL_SHELL_WAIT
        while time.monotonic() < deadline:
            try:
                if not self._is_alive("shell"):
                    return
            except engine_errors():
                return   # its exec went with its container
            time.sleep(0.02)

    def _is_alive(self, which: str) -> bool:
        exec_id = self._exec_ids.get(which)
        if exec_id is None:
            return False
        return bool(self.client.api.exec_inspect(exec_id).get("Running"))


class ImageKind:
    """A kind whose sandboxes are containers of Docker images, driven through a Docker API
    client (docker-py): the Docker daemon's here; Podman's service in ``podman.py``."""

    name = "docker"
    cli = "docker"      # its command-line program (Harbor's oracle check drives it: harbor/oracle.py)
    capabilities = DockerSandbox.capabilities
    sandbox_class: type[DockerSandbox] = DockerSandbox

    def __init__(self) -> None:
        self._client: Any = None
        self._client_lock = threading.Lock()

    def connect(self) -> Any:
        """A new connected client, or a SandboxError saying what to do."""
        return docker_client()

    def client(self) -> Any:
        """This process's client of the engine (connected on first use)."""
        with self._client_lock:
            if self._client is None:
                self._client = self.connect()
            return self._client

    def available(self) -> bool:
        try:
            self.connect()
            return True
        except SandboxError:
            return False

    def factory(self, request: SandboxRequest) -> Callable[[], DockerSandbox]:
        client = self.client()
        ensure_known_image(client, request.image, request.progress)   # icplay's or a plug-in's: built if missing
        cls, r = self.sandbox_class, request
        # faithful: the image's own bash as pid 1 and its root as it is (no tmpfs roots, no size bound)
        disk: dict[str, Any] = {"disk_limit": None} if r.faithful else {}
        return lambda: cls(client, r.image, network=r.network, timeout=r.timeout, recycle=r.recycle,
                           trusted=r.trusted, workdir=r.workdir, limits=r.limits, faithful=r.faithful, **disk)

    @property
    def rules(self) -> EngineRules:
        """What the engine needs of every container, its sandboxes' and any other."""
        return self.sandbox_class.rules

    def close(self) -> None:
        """Nothing to stop: the Docker daemon is the user's."""


@register_sandbox("docker")
class DockerKind(ImageKind):
    """Docker: a container per episode of icplay's images or a task's own."""

