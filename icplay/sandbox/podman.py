"""The Podman sandbox: Docker's sandbox, run by Podman instead of a Docker daemon.

Podman has no daemon: each container is a child of its own ``conmon``. What it has is a
Docker-compatible API, served on demand by ``podman system service``; icplay drives that
API with the same docker-py code as Docker (``docker.py``: the warden, the attached exec
shells, the control shell, recycling, faithful containers, sized tmpfs roots), so the
sandbox is the same sandbox and the images are built from the same Dockerfiles.

The service: ``$ICPLAY_PODMAN_HOST`` (e.g. ``unix:///run/podman/podman.sock``) when set;
else the system's socket when it answers; else icplay starts ``podman system service`` on
a socket of its own for the life of the process and stops it at exit, after removing
this process's containers.

Resource limits: Podman gives every container RLIMIT_NOFILE and RLIMIT_NPROC of its own
choosing (1048576 and the pid limit), and raising a hard limit needs CAP_SYS_RESOURCE,
which root inside a container (a CI runner) lacks: every start then fails ("error setting
rlimit"). icplay asks for the limits its own process has (never more), in each container
and, through the service it starts, in every build step.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import resource
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from icplay.sandbox import faithful as faithful_mode
from icplay.sandbox.base import SandboxError
from icplay.sandbox.engine import EngineRules, engine_message
from icplay.sandbox.docker import DockerSandbox, ImageKind
from icplay.sandbox.tracking import after_removal
from icplay.sandbox.images import connect_errors, engine_client
from icplay.sandbox.registry import register_sandbox

_profiles: dict[str, Path] = {}
_profiles_lock = threading.Lock()


def profile_file(profile: dict[str, Any]) -> Path:
    """The profile as a file of this process's own (one per content), removed at exit."""
    text = json.dumps(profile, sort_keys=True)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    with _profiles_lock:
        if digest not in _profiles:
            folder = Path(tempfile.mkdtemp(prefix="icplay-seccomp-"))
            path = folder / f"{digest}.json"
            path.write_text(text)
            _profiles[digest] = path
            atexit.register(shutil.rmtree, folder, True)
        return _profiles[digest]


HOST_ENV = "ICPLAY_PODMAN_HOST"
SYSTEM_SOCKET = "unix:///run/podman/podman.sock"
SERVICE_WAIT = 30.0     # seconds for a started service to answer


def _pid_max() -> int:
    try:
        return int(Path("/proc/sys/kernel/pid_max").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def own_ulimits() -> dict[str, tuple[int, int]]:
    """nofile and nproc as (soft, hard): this process's own, nproc at most the pid limit
    (what Podman lowers its own to), so that the OCI runtime never has to raise one."""
    found: dict[str, tuple[int, int]] = {}
    for name, which, cap in (("nofile", resource.RLIMIT_NOFILE, 1 << 20),
                             ("nproc", resource.RLIMIT_NPROC, _pid_max())):
        soft, hard = resource.getrlimit(which)
        hard = cap if hard == resource.RLIM_INFINITY else min(hard, cap)
        soft = hard if soft == resource.RLIM_INFINITY else min(soft, hard)
        found[name] = (soft, hard)
    return found


ENGINE_SECCOMP = Path("/usr/share/containers/seccomp.json")   # Podman's default profile
# what Docker's default profile refuses a container without CAP_SYS_ADMIN and Podman's allows
_NAMESPACE_CALLS = {"clone", "clone3", "unshare", "setns", "mount", "umount", "umount2", "keyctl"}
_NAMESPACE_MASK = sum(faithful_mode.NAMESPACE_FLAGS)


def hardened_seccomp(default: dict[str, Any]) -> dict[str, Any]:
    """Podman's default profile without what Docker's refuses: new namespaces (``unshare``,
    ``clone`` with a namespace flag; ``clone3``, whose flags seccomp cannot read, answers
    ENOSYS so that the C library falls back to ``clone``), ``setns``, mounts and keyrings."""
    rules = []
    for rule in default.get("syscalls") or []:
        names = [n for n in rule.get("names") or [] if n not in _NAMESPACE_CALLS]
        if rule.get("action") == "SCMP_ACT_ALLOW" and len(names) != len(rule.get("names") or []):
            if not names:
                continue
            rule = {**rule, "names": names}
        rules.append(rule)
    rules.append({"names": ["clone"], "action": "SCMP_ACT_ALLOW",
                  "args": [{"index": 0, "value": _NAMESPACE_MASK, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}]})
    rules.append({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38})
    return {**default, "syscalls": rules}


class PodmanRules(EngineRules):
    """What Podman needs of every container: this process's own resource limits, its
    default seccomp profile narrowed to Docker's rule (read from a file), and its own
    process list's descriptor (Podman 4 answers Docker's default ``-ef`` with an empty body)."""

    top_args = "pid"

    def ulimits(self) -> list[Any]:
        import docker.types

        return [docker.types.Ulimit(name=name, soft=soft, hard=hard) for name, (soft, hard) in own_ulimits().items()]

    def security_opt(self) -> list[str]:
        try:
            default = json.loads(ENGINE_SECCOMP.read_text())
        except (OSError, ValueError):
            # no default profile to narrow: the faithful one (everything allowed but what it lists)
            return [self.seccomp_option(faithful_mode.SECCOMP)]
        return [self.seccomp_option(hardened_seccomp(default))]

    def seccomp_option(self, profile: dict[str, Any]) -> str:
        """Podman reads a profile from a file (a path on the machine its service runs on)."""
        return "seccomp=" + str(profile_file(profile))


class PodmanSandbox(DockerSandbox):
    """One episode in a Podman container; the Docker sandbox's code through Podman's API."""

    kind = "podman"
    rules = PodmanRules()


# Runs the service ($3...) while icplay (pid $1) lives: when icplay ends without stopping it
# (killed with SIGKILL), the service is stopped within a second and its folder ($2)
# removed; a TERM (icplay's own stop) stops it at once. PR_SET_PDEATHSIG would not do:
# it fires when the thread that started the service ends, and that is a worker's.
WATCH_PARENT = (
    'parent=$1 folder=$2; shift 2; "$@" & service=$!; '
    'trap \'kill -TERM $service 2>/dev/null; wait $service; exit 0\' TERM INT; '
    'while kill -0 "$parent" 2>/dev/null && kill -0 "$service" 2>/dev/null; do sleep 1; done; '
    'if kill -0 "$service" 2>/dev/null; then kill -TERM $service; wait $service; rm -rf -- "$folder"; fi'
)


class PodmanService:
    """``podman system service`` on a private socket, started by icplay and stopped at exit."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="icplay-podman-"))
        self.url = f"unix://{self.folder / 'podman.sock'}"
        self.log = self.folder / "service.log"
        conf = self.folder / "containers.conf"
        limits = ", ".join(f'"{name}={soft}:{hard}"' for name, (soft, hard) in own_ulimits().items())
        conf.write_text(f"[containers]\ndefault_ulimits = [{limits}]\n")
        podman = shutil.which("podman")
        if podman is None:
            raise SandboxError("podman is not installed: install it (apt-get install podman) or use --sandbox docker")
        with open(self.log, "wb") as log:
            # its own session: a Ctrl+C at the terminal reaches icplay, which stops it in order;
            # under a watch that stops it when icplay is gone without stopping it (SIGKILL)
            self.process = subprocess.Popen(["/bin/sh", "-c", WATCH_PARENT, "icplay-podman-watch", str(os.getpid()),
                                             self.folder, podman, "system", "service", "--time=0", self.url],
                                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            env={**os.environ, "CONTAINERS_CONF": str(conf)}, start_new_session=True)

    def wait(self, connect: Any) -> Any:
        """A client once the service answers, or a SandboxError quoting its log."""
        deadline = time.monotonic() + SERVICE_WAIT
        while True:
            if self.process.poll() is not None:
                break
            try:
                return connect(self.url)
            except connect_errors():   # not listening yet (connection refused), or not answering yet
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.1)
        tail = self.log.read_text(errors="replace").strip()[-300:] if self.log.exists() else ""
        self.stop()
        raise SandboxError(f"podman system service did not answer within {SERVICE_WAIT:.0f}s: {tail or 'no output'}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def _client(url: str, timeout: int = 60) -> Any:
    import docker

    client = engine_client(docker.DockerClient(base_url=url, timeout=timeout))
    client.ping()
    return client


@register_sandbox("podman")
class PodmanKind(ImageKind):
    """Podman: the Docker sandbox's containers with no Docker daemon (``podman system service``)."""

    name = "podman"
    cli = "podman"
    capabilities = PodmanSandbox.capabilities
    sandbox_class = PodmanSandbox

    def __init__(self) -> None:
        super().__init__()
        self._service: PodmanService | None = None
        self._service_lock = threading.Lock()

    def available(self) -> bool:
        """Installed, or a service named: starting one is left to the first sandbox."""
        return bool(os.environ.get(HOST_ENV)) or shutil.which("podman") is not None

    def connect(self) -> Any:
        named = os.environ.get(HOST_ENV)
        if named:
            try:
                return _client(named)
            except connect_errors() as exc:   # the named service is down: one sentence on what to do
                raise SandboxError(f"Podman does not answer at {HOST_ENV}={named}: {engine_message(exc)}; "
                                   "start `podman system service` there or unset it") from None
        with self._service_lock:
            if self._service is not None:
                return self._service.wait(_client)
            try:
                return _client(SYSTEM_SOCKET)
            except connect_errors():   # no system service answers: icplay starts one of its own
                pass
            self._service = PodmanService()
            after_removal(self.close)
            return self._service.wait(_client)

    def close(self) -> None:
        """Stop the service icplay started (its containers were removed first, see docker.py)."""
        with self._service_lock:
            service, self._service = self._service, None
        if service is not None:
            service.stop()

