"""Resource limits for a local (bubblewrap) sandbox: pids, memory, CPU and disk.

What bounds a sandbox depends on what the host lets icplay do, tried in this order:

1. **cgroup v2, delegated**: icplay's own cgroup (``0::/path`` in /proc/self/cgroup) is
   writable and a child of it can get the memory and pids controllers. Each sandbox gets
   a child ``icplay-bwrap-...`` with memory.max (swap 0), pids.max and cpu.max.
2. **systemd scope**: systemd runs the host (/run/systemd/system) and ``systemd-run
   --scope`` works (``--user`` when not root): each sandbox runs in a transient scope
   with MemoryMax, MemorySwapMax=0, TasksMax and CPUQuota.
3. **cgroup v1** (root on a host with the v1 hierarchies, e.g. many CI VMs): a child of
   icplay's own cgroup in the memory, pids and cpu hierarchies.
4. **rlimits** only: RLIMIT_DATA (per process, so a bomb of many processes can use
   pids x memory) and RLIMIT_CPU (CPU seconds per process).

Two rlimits apply in every case: RLIMIT_FSIZE (no file larger than the disk limit) and
RLIMIT_NPROC = the pids limit. NPROC counts the processes of a uid *in a user namespace*,
so it is set inside the sandbox (``prlimit`` starts the shell, after bwrap made the
sandbox's user namespace): it counts only the sandbox's own processes, whoever runs
icplay. (Set outside, for a normal user it would count all of that user's processes.)

The limits are set with ``ICPLAY_BWRAP_MEMORY`` (default 2g: processes and the
sandbox's tmpfs contents together), ``ICPLAY_BWRAP_PIDS`` (256), ``ICPLAY_BWRAP_CPUS``
(1 core) and ``ICPLAY_BWRAP_DISK`` (1g, the size of each writable tmpfs: the testbed and
home, and /tmp). Sizes take a k, m or g suffix.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from icplay.sandbox.base import SandboxError

GIB = 1024 ** 3
MIB = 1024 ** 2
CGROUP_PREFIX = "icplay-bwrap-"
# RLIMIT_CPU when no cgroup bounds CPU: a process may use this many CPU seconds.
RLIMIT_CPU_SECONDS = 600


def parse_size(text: str) -> int:
    """'2g', '512m', '100k' or a number of bytes; SandboxError on anything else."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", text.lower())
    if not match:
        raise SandboxError(f"not a size: {text!r} (write e.g. 512m or 2g)")
    scale = {"": 1, "k": 1024, "m": MIB, "g": GIB, "t": 1024 * GIB}[match.group(2)]
    return int(float(match.group(1)) * scale)


@dataclass(frozen=True)
class Limits:
    memory: int = 2 * GIB
    pids: int = 256
    cpus: float = 1.0
    disk: int = 1 * GIB
    small_tmpfs: int = 64 * MIB     # /run and /dev/shm

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Limits":
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name, parse in (("memory", parse_size), ("disk", parse_size), ("pids", int), ("cpus", float)):
            raw = environ.get(f"ICPLAY_BWRAP_{name.upper()}")
            if raw is None or raw == "":
                continue
            try:
                value = parse(raw)
            except (ValueError, SandboxError):
                raise SandboxError(f"ICPLAY_BWRAP_{name.upper()}={raw!r} is not a valid {name} limit") from None
            if value <= 0:
                raise SandboxError(f"ICPLAY_BWRAP_{name.upper()}={raw!r} must be positive")
            values[name] = value
        return cls(**values)


@dataclass
class Enforcement:
    """How one sandbox's limits are enforced: a command prefix and what to undo after."""

    prefix: list[str]
    cleanup_dirs: list[Path] = field(default_factory=list)
    procs_files: list[Path] = field(default_factory=list)

    def cleanup(self) -> None:
        for path in self.cleanup_dirs:
            remove_cgroup(path)


def remove_cgroup(path: Path) -> bool:
    try:
        os.rmdir(path)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False   # still has processes (they are dying): the next start reaps it


def _own_cgroups() -> dict[str, str]:
    """controller (or '' for v2) -> icplay's own cgroup path in that hierarchy."""
    own: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return own
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            own[name] = path
    return own


def _mounts() -> dict[str, Path]:
    """'cgroup2' or a v1 controller -> where that hierarchy is mounted."""
    found: dict[str, Path] = {}
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        left, _, right = line.partition(" - ")
        fstype, _, options = (right.split(" ") + ["", "", ""])[:3]
        point = Path(left.split(" ")[4])
        if fstype == "cgroup2":
            found.setdefault("cgroup2", point)
        elif fstype == "cgroup":
            for option in options.split(","):
                if option in ("memory", "pids", "cpu"):
                    found.setdefault(option, point)
    return found


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


class Mechanism:
    """One way to bound a sandbox; ``enforce`` makes the limits for one sandbox process."""

    name = "rlimits"
    bounds: frozenset[str] = frozenset()   # which of "memory", "pids", "cpu" it bounds for the whole sandbox

    def enforce(self, tag: str, limits: Limits) -> Enforcement:
        return Enforcement(prefix=[])

    def reap(self, is_dead_tag: Callable[[str], bool]) -> None:
        """Remove cgroups left by sandboxes whose icplay process is gone."""


class _CgroupDirs(Mechanism):
    """A child cgroup in each of ``parents`` (one per hierarchy), joined by a shell wrapper."""

    def __init__(self, name: str, parents: dict[str, Path], bounds: frozenset[str] | None = None):
        self.name = name
        self.parents = parents
        self.bounds = bounds if bounds is not None else frozenset(k for k in parents if k in ("memory", "pids", "cpu"))

    def _settings(self, key: str, child: Path, limits: Limits) -> list[tuple[str, str]]:
        raise NotImplementedError

    def enforce(self, tag: str, limits: Limits) -> Enforcement:
        made: list[Path] = []
        try:
            for key, parent in self.parents.items():
                child = parent / f"{CGROUP_PREFIX}{tag}"
                child.mkdir(exist_ok=True)
                made.append(child)
                for file, value in self._settings(key, child, limits):
                    _write(child / file, value)
        except OSError as exc:
            for child in made:
                remove_cgroup(child)
            raise SandboxError(f"cannot set up the sandbox's cgroup ({self.name}): {exc}") from None
        procs = [child / "cgroup.procs" for child in made]
        joins = " && ".join(f"echo $$ > {shlex.quote(str(p))}" for p in procs)
        return Enforcement(prefix=["/bin/sh", "-c", f'{joins} && exec "$@"', "icplay-limits"],
                           cleanup_dirs=made, procs_files=procs)

    def reap(self, is_dead_tag: Callable[[str], bool]) -> None:
        for parent in self.parents.values():
            try:
                children = [p for p in parent.iterdir() if p.name.startswith(CGROUP_PREFIX) and p.is_dir()]
            except OSError:
                continue
            for child in children:
                if is_dead_tag(child.name[len(CGROUP_PREFIX):]):
                    remove_cgroup(child)


class CgroupV1(_CgroupDirs):
    def _settings(self, key: str, child: Path, limits: Limits) -> list[tuple[str, str]]:
        period = 100_000
        if key == "memory":
            # memsw (memory + swap) exists only with swap accounting; it must be >= the limit.
            return [("memory.limit_in_bytes", str(limits.memory))] + (
                [("memory.memsw.limit_in_bytes", str(limits.memory))]
                if (child / "memory.memsw.limit_in_bytes").exists() else [])
        if key == "pids":
            return [("pids.max", str(limits.pids))]
        return [("cpu.cfs_period_us", str(period)), ("cpu.cfs_quota_us", str(int(period * limits.cpus)))]


class CgroupV2(_CgroupDirs):
    def _settings(self, key: str, child: Path, limits: Limits) -> list[tuple[str, str]]:
        period = 100_000
        settings = [("memory.max", str(limits.memory)), ("pids.max", str(limits.pids))]
        if (child / "memory.swap.max").exists():
            settings.append(("memory.swap.max", "0"))
        if (child / "cpu.max").exists():
            settings.append(("cpu.max", f"{int(period * limits.cpus)} {period}"))
        return settings


class SystemdScope(Mechanism):
    name = "systemd scope"
    bounds = frozenset({"memory", "pids", "cpu"})

    def __init__(self, user: bool):
        self.user = user

    def enforce(self, tag: str, limits: Limits) -> Enforcement:
        return Enforcement(prefix=[
            "systemd-run", *(["--user"] if self.user else []), "--scope", "--quiet", "--collect",
            f"--unit={CGROUP_PREFIX}{tag}", f"-pMemoryMax={limits.memory}", "-pMemorySwapMax=0",
            f"-pTasksMax={limits.pids}", f"-pCPUQuota={int(limits.cpus * 100)}%", "--"])


def _try_v2() -> Mechanism | None:
    mounts, own = _mounts(), _own_cgroups()
    if "cgroup2" not in mounts or "" not in own:
        return None
    parent = mounts["cgroup2"] / own[""].lstrip("/")
    try:
        available = (parent / "cgroup.controllers").read_text().split()
        if not {"memory", "pids"} <= set(available):
            return None
        enabled = (parent / "cgroup.subtree_control").read_text().split()
        wanted = [c for c in ("memory", "pids", "cpu") if c in available and c not in enabled]
        if wanted:
            # Fails (EBUSY) when icplay's own cgroup holds processes and is not the root.
            _write(parent / "cgroup.subtree_control", " ".join(f"+{c}" for c in wanted))
        probe = parent / f"{CGROUP_PREFIX}probe-{os.getpid()}"
        probe.mkdir(exist_ok=True)
        remove_cgroup(probe)
    except OSError:
        return None
    return CgroupV2("cgroup v2", {"": parent}, frozenset(c for c in ("memory", "pids", "cpu") if c in available))


def _try_systemd() -> Mechanism | None:
    if not Path("/run/systemd/system").is_dir() or shutil.which("systemd-run") is None:
        return None
    user = os.geteuid() != 0
    mechanism = SystemdScope(user)
    probe = mechanism.enforce(f"probe-{os.getpid()}", Limits())
    try:
        done = subprocess.run([*probe.prefix, "true"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return mechanism if done.returncode == 0 else None


def _try_v1() -> Mechanism | None:
    mounts, own = _mounts(), _own_cgroups()
    parents: dict[str, Path] = {}
    for controller in ("memory", "pids", "cpu"):
        if controller in mounts and controller in own:
            parent = mounts[controller] / own[controller].lstrip("/")
            probe = parent / f"{CGROUP_PREFIX}probe-{os.getpid()}"
            try:
                probe.mkdir(exist_ok=True)
                remove_cgroup(probe)
            except OSError:
                continue
            parents[controller] = parent
    if not {"memory", "pids"} <= set(parents):
        return None
    return CgroupV1("cgroup v1", parents)


_CHOSEN: Mechanism | None = None
FORCE_ENV = "ICPLAY_BWRAP_LIMITS"   # "rlimits" forces the fallback (tests, or a host where cgroups misbehave)


def mechanism() -> Mechanism:
    """The strongest mechanism this host allows (probed once per process)."""
    global _CHOSEN
    if os.environ.get(FORCE_ENV) == "rlimits":
        return Mechanism()
    if _CHOSEN is None:
        _CHOSEN = _try_v2() or _try_systemd() or _try_v1() or Mechanism()
    return _CHOSEN


def rlimit_args(limits: Limits, bounded: frozenset[str]) -> list[str]:
    """A ``prlimit`` command prefix for what no cgroup bounds (and FSIZE always)."""
    if shutil.which("prlimit") is None:
        return []
    args = ["prlimit", f"--fsize={limits.disk}"]
    if "memory" not in bounded:
        args.append(f"--data={limits.memory}")
    if "cpu" not in bounded:
        args.append(f"--cpu={RLIMIT_CPU_SECONDS}")
    return [*args, "--"]


def inside_args(limits: Limits) -> list[str]:
    """The prefix of the sandbox's shell: RLIMIT_NPROC, counted in its own user namespace."""
    if shutil.which("prlimit") is None:
        return []
    return ["prlimit", f"--nproc={limits.pids}:{limits.pids}", "--"]


def size_text(n: int) -> str:
    """A byte count as doctor shows it: GiB from one GiB up, MiB below."""
    return f"{n / GIB:g} GiB" if n >= GIB else f"{n // MIB} MiB"


def describe(limits: Limits) -> tuple[bool, str]:
    """(whole-sandbox limits in force, one sentence) for ``icplay doctor``."""
    chosen = mechanism()
    parts = []
    if chosen.bounds:
        bounded = ", ".join(sorted(chosen.bounds))
        parts.append(f"{chosen.name} bounds {bounded} (memory {size_text(limits.memory)}, {limits.pids} pids, "
                     f"{limits.cpus:g} CPU)")
    else:
        parts.append(f"no cgroup here (none delegated, no systemd scope, not root on cgroup v1): rlimits only, "
                     f"per process: data {size_text(limits.memory)}, {RLIMIT_CPU_SECONDS} CPU s")
    if shutil.which("prlimit") is None:
        parts.append("prlimit is missing (util-linux), so no file-size or process-count rlimit")
    else:
        parts.append(f"files up to {size_text(limits.disk)}, {limits.pids} processes (RLIMIT_NPROC in the sandbox's "
                     "user namespace)")
    return bool(chosen.bounds), "; ".join(parts)
