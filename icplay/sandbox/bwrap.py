"""The local sandbox: bubblewrap namespaces over the host's /usr, no Docker needed.

Each episode gets its own copy of a prepared *root* folder on the host: a git repository
holding ``testbed/`` (bound at ``/testbed``) and ``root/`` (bound at ``/root``, the home),
committed once when the template is made. So ``git status --short`` in that folder lists
``testbed/...`` paths exactly as it does at ``/`` in the Docker image, and the reward reads
both sandboxes the same way.

What the action gets (the same whoever runs icplay):

- **An unprivileged user.** Inside it is ``icplay`` (uid and gid 1000, home /root) with
  no capabilities (``--cap-drop ALL``), in its own user, pid, mount, ipc, uts, cgroup and
  network namespaces, with no way to make another user namespace (``--disable-userns``),
  so no mount, remount or ``unshare -r``. When icplay runs as root, bwrap itself runs as
  a *dedicated host uid* (``UID_BASE`` + a slot claimed with a lock file, one per live
  sandbox): the action's files and processes belong to that uid on the host, which owns
  nothing there, so even a remount would not let it write the host's files. Run by a
  normal user, the action has that user's uid on the host, and sees only what is bound.
- **A clean environment**: exactly ``ENVIRONMENT`` below (PATH, HOME=/root, LANG=C.UTF-8,
  TERM=xterm-256color, USER and LOGNAME=icplay, SHELL=/bin/bash); bwrap and its helpers
  are started with ``HOST_ENV`` only, so not even /proc/1/environ (bwrap's own init)
  holds anything of icplay's environment.
- **A minimal /etc of its own**, read-only: generated passwd, group, hosts, hostname,
  resolv.conf and nsswitch.conf, plus the few host entries in ``HOST_ETC`` that programs
  need to run (the loader cache, Debian's alternatives, time zone, certificates, ...);
  never the host's shadow or the rest of its /etc.
- **Read-only everything else**: /usr (and the merged-/usr links) bound read-only, /dev
  minimal and read-only, the sandbox's root read-only.
- **Bounded disk**: /tmp, /run and /dev/shm are sized tmpfs (``--size``); the testbed and
  home live in a sized tmpfs mounted on the host when icplay may mount (root), so that
  the scoring side door sees them and a restarted shell keeps them. RLIMIT_FSIZE bounds
  any single file in every case. See icplay/sandbox/limits.py for pids, memory and CPU.
- **No network** unless the task asks for it (``--share-net``).

Leftovers: each icplay process keeps its sandboxes under ``<tmp>/icplay-bwrap.<uid>/p<pid>``
and holds an flock on its ``lock`` file while it lives; the next start of any icplay
reaps every folder whose lock is free (unmounting its tmpfs) and the cgroups it left.

``exec`` (the side door for scoring) runs on the host in the episode's root folder,
as the sandbox's host uid when icplay is root, with ``HOST_ENV`` and no git configuration
but the repository's own: it only ever runs icplay's own git and md5 commands.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import fcntl
import itertools
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any, Callable, Iterator

from icplay.sandbox import limits as limits_mod
from icplay.sandbox.base import (DEFAULT_OUTPUT_CAP, DEFAULT_TIMEOUT, OutputCallback, SandboxCapabilities, SandboxError,
                                 ShellResult)
from icplay.sandbox.limits import Limits
from icplay.sandbox.registry import SandboxRequest, image_kinds, register_sandbox
from icplay.sandbox.session import SHELL_ARGV, PersistentShell, ShellControl
from icplay.paths import own_paths
from icplay.sandbox.files import copy_into

INSIDE_UID = 1000
INSIDE_USER = "icplay"
# Dedicated host uids for sandboxes when icplay runs as root: UID_BASE + slot. Far above
# any login user and the usual subordinate-id ranges (/etc/subuid starts at 100000).
UID_BASE = 1_500_000_000
MAX_SLOTS = 4096
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ENVIRONMENT = {"PATH": SANDBOX_PATH, "HOME": "/root", "LANG": "C.UTF-8", "TERM": "xterm-256color",
               "USER": INSIDE_USER, "LOGNAME": INSIDE_USER, "SHELL": "/bin/bash"}
HOST_ENV = {"PATH": SANDBOX_PATH, "LANG": "C.UTF-8"}
# Host /etc entries the sandbox sees (read-only, when they exist): what programs need to
# load and behave, nothing about the host's users, secrets or services.
HOST_ETC = ("alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone",
            "os-release", "debian_version", "lsb-release", "protocols", "services", "mime.types",
            "magic", "magic.mime", "ssl", "ca-certificates", "ca-certificates.conf", "terminfo",
            "inputrc", "gai.conf", "host.conf", "locale.alias", "locale.conf", "perl",
            "python3", "python3.9", "python3.10", "python3.11", "python3.12", "python3.13", "fonts")
GENERATED_ETC = {
    "passwd": (f"root:x:0:0:root:/root:/bin/bash\n{INSIDE_USER}:x:{INSIDE_UID}:{INSIDE_UID}:{INSIDE_USER}:/root:/bin/bash\n"
               "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"),
    "group": f"root:x:0:\n{INSIDE_USER}:x:{INSIDE_UID}:\nnogroup:x:65534:\n",
    "hosts": "127.0.0.1\tlocalhost icplay\n::1\tlocalhost ip6-localhost ip6-loopback\n",
    "hostname": "icplay\n",
    "resolv.conf": "# no network in this sandbox\n",
    "nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\n"
                     "protocols: files\nservices: files\n",
    "shells": "/bin/sh\n/bin/bash\n/usr/bin/bash\n",
}

MS_NOSUID, MS_NODEV, MNT_DETACH = 2, 4, 2
_libc = ctypes.CDLL(None, use_errno=True)


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


_FEATURES: set[str] | None = None


def _features() -> set[str]:
    """Which optional bwrap options this bwrap knows (--size from 0.5, --disable-userns from 0.8)."""
    global _FEATURES
    if _FEATURES is None:
        try:
            text = subprocess.run([bwrap_path() or "bwrap", "--help"], capture_output=True, text=True).stdout
        except OSError:
            text = ""
        _FEATURES = {name for name in ("--size", "--disable-userns", "--cap-drop") if name in text}
    return _FEATURES


def running_as_root() -> bool:
    return os.geteuid() == 0


def bwrap_problem() -> str | None:
    """None when bubblewrap can make a sandbox here, else one sentence on what to do."""
    if bwrap_path() is None:
        return "bubblewrap is not installed: install it (apt-get install bubblewrap) or use --sandbox docker."
    probe_uid = None
    if running_as_root():
        if shutil.which("setpriv") is None:
            return "icplay runs as root, so it runs bwrap as an unprivileged uid with setpriv, which is missing: install util-linux."
        probe_uid = UID_BASE + MAX_SLOTS  # never a sandbox's
    argv = [*_as_host_uid(probe_uid), bwrap_path() or "bwrap", *_namespace_args(), "--ro-bind", "/usr", "/usr", *_usr_links(), "true"]
    probe = subprocess.run(argv, capture_output=True, text=True, env=HOST_ENV, cwd="/")
    if probe.returncode != 0:
        reason = probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else f"exit {probe.returncode}"
        who = " for an unprivileged uid (icplay never runs an action with root's privileges)" if probe_uid else ""
        return (f"bubblewrap cannot create namespaces here{who} ({reason}): allow unprivileged user namespaces "
                "(sysctl user.max_user_namespaces=10000 kernel.unprivileged_userns_clone=1, or the AppArmor "
                "userns rule for bwrap) or use --sandbox docker.")
    return None


def _as_host_uid(uid: int | None) -> list[str]:
    """Command prefix that drops root to ``uid`` (no groups, no capabilities) before bwrap."""
    if uid is None:
        return []
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--"]


def _namespace_args() -> list[str]:
    args = ["--unshare-all", "--unshare-user", "--uid", str(INSIDE_UID), "--gid", str(INSIDE_UID),
            "--die-with-parent", "--new-session"]
    if "--disable-userns" in _features():
        args.append("--disable-userns")
    if "--cap-drop" in _features():
        args += ["--cap-drop", "ALL"]
    return args


def _usr_links() -> list[str]:
    """Recreate the merged-/usr links (/bin -> usr/bin, ...) that the host has."""
    args: list[str] = []
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), f"/{name}"]
        elif host.is_dir():
            args += ["--ro-bind", str(host), f"/{name}"]
    return args


def _bound_prefixes() -> list[str]:
    """The host folders a sandbox sees through binds: /usr, the non-link /bin-style
    folders, the host's /etc entries of HOST_ETC."""
    prefixes = ["/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = Path("/") / name
        if host.is_dir() and not host.is_symlink():
            prefixes.append(str(host))
    prefixes += [os.path.realpath(Path("/etc") / name) for name in HOST_ETC if (Path("/etc") / name).exists()]
    return prefixes


def _own_masks() -> list[str]:
    """bwrap arguments that hide icplay's own folders (its package and bundle, data, cache,
    home: icplay.paths.own_paths) wherever one lies inside a bound host folder (an install
    under /usr or /usr/local, a cache set there): an empty read-only tmpfs over each."""
    args: list[str] = []
    prefixes = _bound_prefixes()
    for path in own_paths():
        text = str(path)
        if not any(text.startswith(prefix.rstrip("/") + "/") for prefix in prefixes):
            continue
        if path.is_dir():
            args += ["--tmpfs", text, "--remount-ro", text]
        elif path.exists():
            args += ["--ro-bind", "/dev/null", text]
    return args


def _sized(size: int) -> list[str]:
    return ["--size", str(size)] if "--size" in _features() else []


# -- this process's folder, leftovers of dead ones, dedicated uids ---------------------

_OWNER_LOCK = threading.Lock()
_OWNER: dict[int, tuple[Path, int]] = {}   # pid -> (folder, lock fd)
_EPISODES = itertools.count()


def state_root() -> Path:
    """<tmp>/icplay-bwrap.<uid>: every sandbox folder of every icplay process of this user."""
    chosen = os.environ.get("ICPLAY_BWRAP_DIR")
    base = Path(chosen or tempfile.gettempdir())
    if os.geteuid() == 0 and not passable(base):
        # As root a sandbox runs under a dedicated uid that must walk down to its folder: a
        # private TMPDIR (pytest's /tmp/pytest-of-root is 0700) would stop it at the door.
        if chosen:
            raise SandboxError(f"ICPLAY_BWRAP_DIR={chosen} is not reachable by other users (a folder on "
                               "the way lacks o+x); the sandboxes' uids could not enter it: pick another.")
        base = Path("/tmp")
    root = base / f"icplay-bwrap.{os.geteuid()}"
    try:
        os.mkdir(root, 0o711)
    except FileExistsError:
        pass
    info = os.lstat(root)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise SandboxError(f"{root} is not a folder of this user's own: remove it, or set ICPLAY_BWRAP_DIR.")
    os.chmod(root, 0o711)   # a dedicated uid must pass through to its sandbox's folder
    return root


def passable(path: Path) -> bool:
    """Whether every folder from / down to ``path`` lets other users through (o+x)."""
    path = Path(os.path.realpath(path))
    for folder in [path, *path.parents]:
        try:
            if not os.stat(folder).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


def process_folder() -> Path:
    """This process's folder (made, and dead processes' folders reaped, on first use)."""
    with _OWNER_LOCK:
        pid = os.getpid()
        if pid not in _OWNER:
            root = state_root()
            reap_leftovers(root)
            folder = root / f"p{pid}"
            folder.mkdir(mode=0o711)
            # Locked before it gets its name: another icplay never sees an unlocked lock
            # file of a live process (it would take it for a dead one and reap the folder).
            fd = os.open(folder / "lock.new", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)   # held as long as this process lives
            os.rename(folder / "lock.new", folder / "lock")
            etc = folder / "etc"
            etc.mkdir(mode=0o755)
            for name, text in GENERATED_ETC.items():
                (etc / name).write_text(text)
                (etc / name).chmod(0o644)
            _OWNER[pid] = (folder, fd)
            atexit.register(_remove_own_folder, pid)
        return _OWNER[pid][0]


def _remove_own_folder(pid: int) -> None:
    """At a normal exit: this process's folder goes (a killed one's is reaped by the next start)."""
    if os.getpid() != pid or pid not in _OWNER:
        return
    folder, fd = _OWNER.pop(pid)
    for episode in folder.glob("e*"):
        _unmount(episode / "root")
    _remove_tree(folder)
    os.close(fd)


def _owner_alive(folder: Path) -> bool:
    """Is the icplay process that made ``folder`` (p<pid>) still running?"""
    pid = int(folder.name[1:])
    if pid == os.getpid():
        return pid in _OWNER and folder == _OWNER[pid][0]
    try:
        fd = os.open(folder / "lock", os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return Path(f"/proc/{pid}").exists()   # being made right now, or half made by a dead one
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def reap_leftovers(root: Path | None = None) -> list[Path]:
    """Remove the folders (and tmpfs mounts and cgroups) of icplay processes that are gone."""
    root = root or state_root()
    reaped = []
    for folder in sorted(root.glob("p*")):
        if not folder.name[1:].isdigit() or _owner_alive(folder):
            continue
        for episode in folder.glob("e*"):
            _unmount(episode / "root")
        _remove_tree(folder)
        reaped.append(folder)
    dead_pids = {int(f.name[1:]) for f in reaped}
    live = {int(f.name[1:]) for f in root.glob("p*") if f.name[1:].isdigit()}

    def is_dead_tag(tag: str) -> bool:
        owner = tag.split("-", 1)[0]
        if not owner.startswith("p") or not owner[1:].isdigit():
            return False
        pid = int(owner[1:])
        return pid in dead_pids or (pid not in live and pid != os.getpid() and not Path(f"/proc/{pid}").exists())

    try:
        limits_mod.mechanism().reap(is_dead_tag)
    except (OSError, subprocess.SubprocessError):   # cgroups this host will not show us: left to the next reap
        pass
    return reaped


def _unmount(path: Path) -> None:
    if os.path.ismount(path):
        _libc.umount2(str(path).encode(), MNT_DETACH)


def _remove_tree(path: Path) -> None:
    """rmtree that also gets through folders the action made unreadable (chmod 000)."""
    def retry(function: Callable[..., Any], name: str, _exc: object) -> None:
        try:
            os.chmod(os.path.dirname(name), 0o700)
            if os.path.isdir(name) and not os.path.islink(name):
                os.chmod(name, 0o700)
                shutil.rmtree(name, ignore_errors=True)
            else:
                os.unlink(name)
        except OSError:
            pass
    shutil.rmtree(path, onerror=retry)


def _claim_uid() -> tuple[int, int]:
    """A dedicated host uid for one sandbox (root only) and the lock fd that holds it."""
    slots = state_root() / "uids"
    slots.mkdir(mode=0o700, exist_ok=True)
    for slot in range(MAX_SLOTS):
        fd = os.open(slots / str(slot), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        if _has_processes(UID_BASE + slot):   # a killed icplay's sandbox still dying
            os.close(fd)
            continue
        return UID_BASE + slot, fd
    raise SandboxError(f"all {MAX_SLOTS} sandbox uids are in use: too many bwrap sandboxes at once.")


def _has_processes(uid: int) -> bool:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    return True
            except OSError:
                pass
    return False


def template_folder() -> Path:
    """A folder for a root template, inside this process's folder so that it is reaped
    with it when icplay is killed."""
    return Path(tempfile.mkdtemp(prefix="template-", dir=process_folder()))


def _mount_tmpfs(path: Path, size: int, uid: int) -> bool:
    """Mount a sized tmpfs owned by ``uid`` at ``path`` on the host; False if not allowed."""
    options = f"size={size},mode=0700,uid={uid},gid={uid}".encode()
    if _libc.mount(b"icplay-bwrap", str(path).encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
        return False
    return True


def make_root_template(testbed: Path, setup_script: Path | None, into: Path) -> Path:
    """Build a root folder (testbed/ and root/ under git) from a testbed source tree."""
    root = into / "root-template"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(testbed, root / "testbed", symlinks=True)
    (root / "root").mkdir()
    (root / "root" / ".keep").write_text("")
    if setup_script is not None:
        subprocess.run(["bash", str(setup_script), str(root / "testbed")], check=True, capture_output=True)
    git = ["git", "-c", "user.name=icplay", "-c", "user.email=icplay@localhost", "-c", "init.defaultBranch=main"]
    # No sample hooks, and objects packed: every episode copies this folder, and a .git of
    # two pack files copies about 3x faster than hundreds of loose objects.
    subprocess.run([*git, "init", "-q", "--template=", str(root)], check=True)
    subprocess.run([*git, "-C", str(root), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(root), "commit", "-q", "-m", "initial state"], check=True)
    subprocess.run([*git, "-C", str(root), "repack", "-adq"], check=True)
    subprocess.run([*git, "-C", str(root), "prune-packed"], check=True)
    return root


def _can_mount_tmpfs() -> bool:
    if not running_as_root():
        return False
    probe = Path(tempfile.mkdtemp(prefix="mount-probe-", dir=process_folder()))
    try:
        if not _mount_tmpfs(probe, 1024 * 1024, os.geteuid()):
            return False
        _unmount(probe)
        return True
    finally:
        shutil.rmtree(probe, ignore_errors=True)


def isolation_report(limits: Limits | None = None) -> list[tuple[str, bool, str]]:
    """(what, ok, detail) lines on how bwrap sandboxes are confined here, for ``icplay doctor``."""
    limits = limits or Limits.from_env()
    size = limits_mod.size_text
    lines = []
    features = _features()
    if running_as_root():
        lines.append(("bwrap user", True,
                      f"icplay is root: each sandbox runs as its own unprivileged host uid ({UID_BASE}+), "
                      f"uid {INSIDE_UID} inside, no capabilities"
                      + ("" if "--disable-userns" in features else "; this bwrap is older than 0.8, so the "
                         "action may make user namespaces of its own (upgrade bubblewrap)")))
    else:
        lines.append(("bwrap user", True,
                      f"actions run as your uid (uid {INSIDE_UID} inside), no capabilities, seeing only /usr, "
                      "their testbed and a minimal /etc"))
    whole, detail = limits_mod.describe(limits)
    lines.append(("bwrap limits", True, detail if whole else f"weaker: {detail}"))
    if "--size" not in features:
        lines.append(("bwrap disk", False, "this bwrap is older than 0.5 (no --size): /tmp is not bounded; "
                      "upgrade bubblewrap"))
    elif _can_mount_tmpfs():
        lines.append(("bwrap disk", True, f"testbed and home in a {size(limits.disk)} tmpfs, /tmp "
                      f"{size(limits.disk)}, /run and /dev/shm {size(limits.small_tmpfs)} (ICPLAY_BWRAP_DISK)"))
    else:
        lines.append(("bwrap disk", True, f"weaker: /tmp {size(limits.disk)}, /run and /dev/shm "
                      f"{size(limits.small_tmpfs)}, but the testbed and home are on the host's disk "
                      f"({state_root()}), bounded only per file ({size(limits.disk)}): only root may mount "
                      "a sized tmpfs for them"))
    return lines


class BwrapSandbox:
    """One episode in bubblewrap, over a private copy of a root template."""

    kind = "bwrap"
    capabilities = SandboxCapabilities(runs_images=False, recyclable=False, replaces_dead=False)
    faithful = False      # no image of its own to be faithful to

    def __init__(self, root_template: Path, workdir: str = "/testbed", timeout: float = DEFAULT_TIMEOUT,
                 output_cap: int = DEFAULT_OUTPUT_CAP, network: bool = False, limits: Limits | None = None,
                 binds: tuple[tuple[str, str], ...] = ()):
        """``binds``: more (folder of the root, path inside) pairs bound writable, e.g. CTF's
        ("ctf", "/ctf")."""
        self.root_template = Path(root_template)
        self.workdir = workdir
        self.binds = tuple(binds)
        self.network = network
        self.limits = limits or Limits.from_env()
        self.episode_dir: Path | None = None
        self.host_uid: int | None = None      # the dedicated uid when icplay is root
        self.disk_bounded = False             # the testbed lives in a sized tmpfs
        self._uid_lock: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._enforcement: limits_mod.Enforcement | None = None
        self._opens = itertools.count()
        self._proc_lock = threading.Lock()
        # the strict verdict's facts (envs/bash_facts.py): the root folder's .git is out of
        # the action's reach, so its own index is the pristine one
        self.pristine_git: dict[str, Any] | None = {
            "index": None, "head": None, "roots": ["testbed", "root", *(f for f, _i in self.binds)]}
        self.scoring_scratch: str | None = None
        self.on_replaced: Callable[[], None] | None = None   # never called: a bwrap folder is not replaced
        self.shell = PersistentShell(
            ShellControl(open=self._open, kill_command=self._kill_command, kill_shell=self._kill_shell,
                         is_alive=self._is_alive),
            init_script=f"cd {workdir} 2>/dev/null || cd /", output_cap=output_cap, default_timeout=timeout)

    # -- Sandbox protocol -------------------------------------------------------------

    def start(self) -> None:
        if bwrap_path() is None:  # the full probe (bwrap_problem) is for doctor and tests
            raise SandboxError(bwrap_problem())
        folder = process_folder()
        self.episode_dir = folder / f"e{next(_EPISODES)}"
        self.episode_dir.mkdir(mode=0o711)
        try:
            if running_as_root():
                self.host_uid, self._uid_lock = _claim_uid()
            root = self.root
            root.mkdir(mode=0o700)
            if self.host_uid is not None:
                self.disk_bounded = _mount_tmpfs(root, self.limits.disk, self.host_uid)
            # cp -a keeps timestamps and modes exactly (the testbed's setup fixed them).
            subprocess.run(["cp", "-a", f"{self.root_template}/.", str(root)], check=True, env=HOST_ENV)
            if self.host_uid is not None:
                subprocess.run(["chown", "-R", "-h", f"{self.host_uid}:{self.host_uid}", str(root)], check=True,
                               env=HOST_ENV)
            self.shell.start()
        except BaseException:   # even Ctrl+C: the half-made sandbox is removed, the error re-raised
            self.close()
            raise

    @property
    def root(self) -> Path:
        assert self.episode_dir is not None, "sandbox not started"
        return self.episode_dir / "root"

    def run(self, command: str, timeout: float | None = None, on_output: OutputCallback | None = None) -> ShellResult:
        return self.shell.run(command, timeout, on_output)

    def interrupt(self) -> None:
        self.shell.interrupt()

    def exec(self, argv: list[str], timeout: float = 30.0) -> tuple[int, str]:
        """A side command on the host in the episode's root folder, as the sandbox's host
        uid, with the sandbox's processes stopped meanwhile (so that nothing swaps a path
        for a symlink to a host file between a listing and its hash); at most
        ``4 × output_cap`` of its output is kept, the rest counted and dropped."""
        env = {**HOST_ENV, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
        with self._frozen():
            process = subprocess.Popen([*_as_host_uid(self.host_uid), *argv], cwd=self.root, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                       start_new_session=True)
            stdout = process.stdout
            assert stdout is not None, "opened with stdout=PIPE"
            timer = threading.Timer(timeout, lambda: _kill_group(process))
            timer.start()
            try:
                kept, _dropped = read_bounded(stdout, 4 * self.shell.output_cap)
                code = process.wait()
            finally:
                timer.cancel()
                _kill_group(process)
                stdout.close()
        return code, kept.decode("utf-8", "replace")

    @contextlib.contextmanager
    def _frozen(self) -> Iterator[None]:
        """Every process of the sandbox stopped (those it stopped itself left so), then let go."""
        frozen: list[int] = []
        try:
            for _ in range(50):
                shell, others = self._sandbox_processes()
                fresh = [pid for pid in ([shell] if shell else []) + others if pid not in frozen]
                fresh = [pid for pid in fresh if _state(pid) not in ("T", "t", "Z", "X", None)]
                if not fresh:
                    break
                for pid in fresh:
                    try:
                        os.kill(pid, signal.SIGSTOP)
                        frozen.append(pid)
                    except ProcessLookupError:
                        pass
            yield
        finally:
            for pid in frozen:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass

    def put_files(self, source: Path | None, dest: str, skip: frozenset[str] = frozenset()) -> None:
        """Copy the host folder ``source`` (None: nothing) to the folder ``dest`` in the
        sandbox, made if missing, owned by the sandbox's user and writable, without the
        folders named in ``skip``. ``dest`` lies under /testbed, /root or a bound folder:
        the rest of the sandbox's root is read-only."""
        target = base = None
        for folder, inside in (("testbed", "/testbed"), ("root", "/root"), *self.binds):
            if dest == inside or dest.startswith(inside.rstrip("/") + "/"):
                base = (self.root / folder).resolve()
                target = self.root / folder / dest[len(inside):].lstrip("/")
        if target is None or base is None:
            raise SandboxError(f"files go under /testbed, /root or {', '.join(i for _f, i in self.binds) or '-'} "
                               f"in a bwrap sandbox, not {dest}")
        if not target.resolve().is_relative_to(base):   # '..' in a name: never a host folder, made and chowned as root
            raise SandboxError(f"files go inside the sandbox's folders, and {dest} leads out of them")
        target.mkdir(parents=True, exist_ok=True)
        if source is not None:
            copy_into(Path(source), target, skip)
        if self.host_uid is not None:
            subprocess.run(["chown", "-R", "-h", f"{self.host_uid}:{self.host_uid}", str(target)], check=True)

    def recycle(self) -> bool:
        """A bwrap folder is never reused: a new copy of the template is as quick."""
        return False

    def close(self) -> None:
        self.shell.close()
        self._stop_process()
        if self.episode_dir is not None:
            _unmount(self.episode_dir / "root")
            _remove_tree(self.episode_dir)
            self.episode_dir = None
        if self._uid_lock is not None:
            os.close(self._uid_lock)
            self._uid_lock = None

    # -- the shell's process ------------------------------------------------------------

    def _argv(self) -> list[str]:
        root = self.root
        folder = process_folder()
        args = [bwrap_path() or "bwrap", *_namespace_args(), "--hostname", "icplay"]
        if self.network:
            args.append("--share-net")
        args += ["--ro-bind", "/usr", "/usr", *_usr_links(),
                 "--proc", "/proc", "--dev", "/dev", *_sized(self.limits.small_tmpfs), "--tmpfs", "/dev/shm",
                 "--remount-ro", "/dev",
                 *_sized(self.limits.disk), "--tmpfs", "/tmp", *_sized(self.limits.small_tmpfs), "--tmpfs", "/run",
                 *self._etc_args(folder / "etc"), *_own_masks(),
                 "--bind", str(root / "testbed"), "/testbed", "--bind", str(root / "root"), "/root",
                 *[arg for folder, inside in self.binds for arg in ("--bind", str(root / folder), inside)],
                 "--remount-ro", "/", "--chdir", "/", "--clearenv"]
        for name, value in ENVIRONMENT.items():
            args += ["--setenv", name, value]
        return args + limits_mod.inside_args(self.limits) + SHELL_ARGV

    def _etc_args(self, generated: Path) -> list[str]:
        args = ["--tmpfs", "/etc"]
        for name in HOST_ETC:
            host = Path("/etc") / name
            if host.is_symlink():
                args += ["--symlink", os.readlink(host), f"/etc/{name}"]
            elif host.exists():
                args += ["--ro-bind", str(host), f"/etc/{name}"]
        for name in GENERATED_ETC:
            if name == "resolv.conf" and self.network and Path("/etc/resolv.conf").exists():
                args += ["--ro-bind", "/etc/resolv.conf", "/etc/resolv.conf"]
            else:
                args += ["--ro-bind", str(generated / name), f"/etc/{name}"]
        return args + ["--remount-ro", "/etc"]

    def _open(self) -> _PipeTransport:
        self._stop_process()
        assert self.episode_dir is not None, "the sandbox was not started"
        tag = f"{process_folder().name}-{self.episode_dir.name}-{next(self._opens)}"
        enforcement = limits_mod.mechanism().enforce(tag, self.limits)
        rlimits = limits_mod.rlimit_args(self.limits, limits_mod.mechanism().bounds)
        argv = [*enforcement.prefix, *rlimits, *_as_host_uid(self.host_uid), *self._argv()]
        try:
            process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       start_new_session=True, env=HOST_ENV, cwd="/")
        except BaseException:   # even Ctrl+C: the cgroup made for it is removed, the error re-raised
            enforcement.cleanup()
            raise
        with self._proc_lock:
            self._process = process
            self._enforcement = enforcement
        return _PipeTransport(process)

    def _stop_process(self) -> None:
        with self._proc_lock:
            process, self._process = self._process, None
            enforcement, self._enforcement = self._enforcement, None
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(timeout=5)
        if enforcement is not None:
            _empty_cgroups(enforcement)

    def _sandbox_processes(self) -> tuple[int | None, list[int]]:
        """(host pid of the shell, host pids of every other process inside the sandbox)."""
        process = self._process
        if process is None:
            return None, []
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            ppid = int(stat[stat.rfind(b")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(entry))
        # bwrap (host) -> bwrap (pid 1 inside) -> bash (the shell) -> ...
        inner_init = children.get(process.pid, [])
        shell = None
        for init in inner_init:
            kids = children.get(init, [])
            if kids:
                shell = min(kids)
        others: list[int] = []
        stack = [pid for init in inner_init for pid in children.get(init, [])]
        while stack:
            pid = stack.pop()
            stack.extend(children.get(pid, []))
            if pid != shell:
                others.append(pid)
        return shell, others

    def _kill_command(self, _shell_pid: int) -> None:
        shell, _ = self._sandbox_processes()
        if shell is not None:
            try:
                os.kill(shell, signal.SIGUSR1)  # its trap abandons the rest of the action
            except ProcessLookupError:
                pass
        # Freeze first, then kill: a stopped process cannot fork, so a fork bomb is caught
        # whole instead of outrunning the scan.
        frozen: set[int] = set()
        for _ in range(50):
            _, others = self._sandbox_processes()
            fresh = [pid for pid in others if pid not in frozen]
            if not fresh:
                break
            for pid in fresh:
                try:
                    os.kill(pid, signal.SIGSTOP)
                except ProcessLookupError:
                    pass
                frozen.add(pid)
        for pid in frozen:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _kill_shell(self, _shell_pid: int) -> None:
        self._stop_process()

    def _is_alive(self, _shell_pid: int) -> bool:
        process = self._process
        if process is None or process.poll() is not None:
            return False
        shell, _ = self._sandbox_processes()
        return shell is not None


def _state(pid: int) -> str | None:
    """A host process's state letter (R, S, T, Z, ...), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2:].split()[0].decode()


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def read_bounded(stream: IO[bytes], cap: int) -> tuple[bytes, int]:
    """Read a stream to its end, keeping its first ``cap`` bytes: (kept, bytes dropped)."""
    kept, dropped = bytearray(), 0
    fd = stream.fileno()
    while chunk := os.read(fd, 1 << 16):
        room = cap - len(kept)
        if room > 0:
            kept += chunk[:room]
        dropped += len(chunk) - max(0, min(room, len(chunk)))
    return bytes(kept), dropped


def _empty_cgroups(enforcement: limits_mod.Enforcement, wait: float = 2.0) -> None:
    """Kill what is left in the sandbox's cgroups (the pid namespace dies with bwrap, but
    not at once) and remove them; a cgroup still busy after ``wait`` is left for the reaper."""
    deadline = time.monotonic() + wait
    while True:
        for procs in enforcement.procs_files:
            try:
                pids = [int(p) for p in procs.read_text().split()]
            except OSError:
                continue
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        if all(limits_mod.remove_cgroup(d) for d in enforcement.cleanup_dirs) or time.monotonic() > deadline:
            return
        time.sleep(0.02)


@register_sandbox("bwrap")
class BwrapKind:
    """bubblewrap: the host's tools over a private copy of a folder tree; no images."""

    name = "bwrap"
    capabilities = BwrapSandbox.capabilities

    def available(self) -> bool:
        return bwrap_path() is not None

    def factory(self, request: SandboxRequest) -> Callable[[], BwrapSandbox]:
        if request.own_image:
            raise SandboxError(f"{request.own_image} runs only on Docker or another sandbox that runs images "
                               f"({', '.join(image_kinds())}): use --sandbox docker")
        host, timeout, network = request.host, request.timeout, request.network
        template = host.make()
        return lambda: BwrapSandbox(template, workdir=host.workdir, timeout=timeout, network=network,
                                    binds=host.binds)

    def close(self) -> None:
        """Nothing to stop: each sandbox removes its own folder."""


class _PipeTransport:
    """A subprocess's stdin and merged stdout/stderr as a Transport."""

    def __init__(self, process: subprocess.Popen[bytes]):
        assert process.stdin is not None and process.stdout is not None, "made with stdin and stdout pipes"
        self.process = process
        self.stdin: IO[bytes] = process.stdin
        self._out = process.stdout.fileno()

    def write(self, data: bytes) -> None:
        self.stdin.write(data)
        self.stdin.flush()

    def read(self) -> bytes:
        return os.read(self._out, 65536)

    def close(self) -> None:
        # Kill first: the reader thread then sees EOF instead of reading a closed fd.
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait(timeout=5)
        try:
            self.stdin.close()
        except OSError:   # a broken pipe flushing to the killed shell: nothing left to send
            pass
