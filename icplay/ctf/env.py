"""The CTF environment: a shell over the task's files, scored by the submitted flag.

It reuses the Bash environment's sandboxes (``icplay.sandbox``: the persistent session,
Docker containers with recycling, bubblewrap) with two differences: the sandbox is the
same for every task (the ``icplay-ctf`` image, or bwrap over the host's tools) and the
task's files are copied in when the episode starts, to ``/ctf/<id>``; the shell then
``cd``s there and runs the task's ``setup``, as InterCode's reset did.
"""

from __future__ import annotations

import io
import shlex
import shutil
import subprocess
import tarfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from icplay.ctf.reward import flag_reward
from icplay.tasks.ctf import CTF_ROOT, HIDDEN_FOLDERS, assets_dir, mount_path, setup_of
from icplay.envs.base import HAS_CWD, STREAMS_OUTPUT, StepResult, SubmitResult
from icplay.sandbox.base import DEFAULT_TIMEOUT, Sandbox, SandboxError
from icplay.sandbox.pool import SandboxPool
from icplay.tasks.model import Task

DEFAULT_IMAGE = "icplay-ctf:latest"
SETUP_TIMEOUT = 120.0
# The tools InterCode-CTF's tasks reach for; ``missing_host_tools`` names those a bwrap
# sandbox (which sees the host's /usr) lacks.
TOOLS = ("python3", "gcc", "gdb", "objdump", "strings", "file", "xxd", "unzip", "nc", "curl", "mmls", "fls",
         "icat", "pdftotext", "convert", "exiftool", "binwalk", "openssl", "git")


def missing_host_tools() -> list[str]:
    """InterCode-CTF's tools the host lacks (a bwrap sandbox has only the host's), and
    pycryptodome when the host's python3 cannot import it."""
    missing = [tool for tool in TOOLS if shutil.which(tool, path="/usr/local/bin:/usr/bin:/bin") is None]
    python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
    if python and subprocess.run([python, "-c", "import Crypto"], capture_output=True).returncode != 0:
        missing.append("pycryptodome (python3: import Crypto)")
    return missing


def _tar_of(folder: Path, prefix: str) -> bytes:
    """The folder's files as a tar whose members live under ``prefix`` (no solution/ folders)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
            if set(Path(info.name).parts) & HIDDEN_FOLDERS:
                return None
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mode |= 0o200   # the solver may change its copy (InterCode's shared assets are read-only)
            return info

        tar.add(str(folder), arcname=prefix, filter=keep)
    return out.getvalue()


def _copy_tree(source: Path, target: Path) -> None:
    shutil.copytree(source, target, symlinks=True,
                    ignore=lambda _dir, names: [n for n in names if n in HIDDEN_FOLDERS])


class CtfSandboxes:
    """Started sandboxes for CTF episodes, pooled by image and network (Docker containers
    recycled between episodes when they prove themselves pristine again)."""

    def __init__(self, kind: str = "docker", image: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 progress: Callable[[str], None] | None = None, spares: int = 1, recycle: bool = True):
        if kind not in ("docker", "bwrap"):
            raise SandboxError(f"unknown sandbox {kind!r} for ctf (docker or bwrap)")
        self.kind, self.image, self.timeout, self.progress = kind, image, timeout, progress
        self.spares, self.recycle = spares, recycle
        self._pools: dict[str, SandboxPool] = {}
        self._lock = threading.Lock()
        self._client = None
        self._template: Path | None = None

    def image_for(self, task: Task) -> str:
        return self.image or task.image or DEFAULT_IMAGE

    def _factory(self, task: Task) -> Callable[[], Sandbox]:
        if self.kind == "docker":
            from icplay.sandbox.docker import DockerSandbox
            from icplay.sandbox.images import docker_client, ensure_image

            if self._client is None:
                self._client = docker_client()
            image = self.image_for(task)
            if image == DEFAULT_IMAGE:
                from icplay.languages import get

                get("ctf")   # the spec registers its image (an env made without the spec, too)
                ensure_image(self._client, "ctf", self.progress or (lambda line: None))
            client, timeout, network, recycle = self._client, self.timeout, task.network, self.recycle
            return lambda: DockerSandbox(client, image, network=network, timeout=timeout, recycle=recycle)
        from icplay.sandbox.bwrap import BwrapSandbox, template_folder

        if self.image or task.image:
            raise SandboxError("a CTF task that needs its own image runs only on Docker: use --sandbox docker")
        if self._template is None:
            missing = missing_host_tools()
            if missing and self.progress is not None:
                self.progress(f"bwrap runs CTF tasks with this host's tools; missing here: {', '.join(missing)} "
                              "(the icplay-ctf image has them all: --sandbox docker)")
            template = template_folder() / "ctf-root"
            for folder in ("testbed", "root", "ctf"):
                (template / folder).mkdir(parents=True)
            (template / "root" / ".keep").write_text("")
            self._template = template
        template, timeout, network = self._template, self.timeout, task.network
        return lambda: BwrapSandbox(template, workdir=CTF_ROOT, timeout=timeout, network=network,
                                    binds=(("ctf", CTF_ROOT),))

    def pool(self, task: Task) -> SandboxPool:
        key = f"{self.image_for(task)}|{task.network}"
        with self._lock:
            if key not in self._pools:
                self._pools[key] = SandboxPool(self._factory(task), spares=self.spares, recycle=self.recycle)
            return self._pools[key]

    def place_files(self, sandbox: Sandbox, task: Task) -> None:
        """Copy the task's files to /ctf/<id> in the sandbox (an empty folder when it has none)."""
        source = assets_dir(task)
        if source is not None and not source.is_dir():
            raise SandboxError(f"task {task.key}: its files folder {source} is not there")
        if sandbox.kind == "docker":
            code, out = sandbox.exec(["sh", "-c", f"mkdir -p {CTF_ROOT} && readlink -f {CTF_ROOT}"])
            if code != 0:
                raise SandboxError(f"cannot make {CTF_ROOT} in the container: {out.strip()[-200:]}")
            real = out.strip().splitlines()[-1].lstrip("/")   # /ctf -> /opt/ctf on icplay's image
            prefix = f"{real}/{task.id}"
            if source is None:
                code, out = sandbox.exec(["mkdir", "-p", f"/{prefix}"])
                if code != 0:
                    raise SandboxError(f"cannot make /{prefix} in the container: {out.strip()[-200:]}")
            else:
                sandbox._fill(_tar_of(source, prefix))   # type: ignore[attr-defined]
            return
        target = sandbox.root / "ctf" / task.id          # type: ignore[attr-defined]
        if source is None:
            target.mkdir()
        else:
            _copy_tree(source, target)
        subprocess.run(["chmod", "-R", "u+w", str(target)], check=True)   # the solver's copy is its own
        uid = getattr(sandbox, "host_uid", None)
        if uid is not None:
            subprocess.run(["chown", "-R", "-h", f"{uid}:{uid}", str(target)], check=True)

    def stats(self) -> dict[str, int]:
        with self._lock:
            pools = list(self._pools.values())
        return {"started": sum(p.started for p in pools), "recycled": sum(p.recycled for p in pools)}

    def close(self) -> None:
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()
        if self._template is not None:
            shutil.rmtree(self._template.parent, ignore_errors=True)
            self._template = None


class CtfEnv:
    """One CTF episode at a time: reset copies the task's files in and runs its setup."""

    name = "ctf"
    capabilities = frozenset({STREAMS_OUTPUT, HAS_CWD})

    def __init__(self, sandboxes: CtfSandboxes, owns_sandboxes: bool = True, lazy: bool = False):
        self.sandboxes = sandboxes
        self.owns_sandboxes = owns_sandboxes
        self.lazy = lazy
        self.sandbox_kind = sandboxes.kind
        self.task: Task | None = None
        self.setup_output = ""      # what the task's setup printed (not shown to the solver)
        self._sandbox: Sandbox | None = None
        self._pending: Future | None = None
        self._taker: ThreadPoolExecutor | None = None
        self._pool: SandboxPool | None = None

    # -- episode ------------------------------------------------------------------------

    def reset(self, task: Task) -> str:
        self._release()
        self.task = task
        self.setup_output = ""
        self._pool = self.sandboxes.pool(task)
        if self.lazy:
            if self._taker is None:   # bwrap dies with the thread that started it: one thread per env
                self._taker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="icplay-take")
            self._pending = self._taker.submit(self._prepared, task)
        else:
            self._sandbox = self._prepared(task)
        return task.query

    def _prepared(self, task: Task) -> Sandbox:
        """A sandbox from the pool with the task's files in place, the shell at /ctf/<id>
        after the setup ran."""
        assert self._pool is not None
        pool = self._pool
        sandbox = pool.take()
        try:
            self._prepare(sandbox, task)
        except BaseException:
            pool.discard(sandbox)
            raise
        return sandbox

    def _prepare(self, sandbox: Sandbox, task: Task) -> None:
        self.sandboxes.place_files(sandbox, task)
        where = shlex.quote(mount_path(task))
        shell = getattr(sandbox, "shell", None)
        if shell is not None:   # a shell restarted mid-episode starts in the task's folder too
            shell.init_script = f"{shell.init_script}\ncd {where} 2>/dev/null"
        result = sandbox.run(f"cd {where}")
        if result.exit_code != 0:
            raise SandboxError(f"task {task.key}: cannot enter {mount_path(task)}: {result.output.strip()[-200:]}")
        setup = setup_of(task)
        if setup:
            self.setup_output = sandbox.run(setup, timeout=SETUP_TIMEOUT).output
            sandbox.run(f"cd {where}")

    @property
    def sandbox(self) -> Sandbox | None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self._sandbox = pending.result()
        return self._sandbox

    @property
    def cwd(self) -> str | None:
        shell = getattr(self._sandbox, "shell", None)
        return shell.cwd if shell is not None else None

    def step(self, action: str, on_output: Callable[[str], None] | None = None) -> StepResult:
        sandbox = self.sandbox
        if sandbox is None or self.task is None:
            raise RuntimeError("reset() the environment before step()")
        result = sandbox.run(action, on_output=on_output)
        info = result.info()
        if result.sandbox_replaced:
            # a new container replaced a dead one: it has no task files until they are copied again
            self._prepare(sandbox, self.task)
            info["files_restored"] = True
        return StepResult(result.output, result.exit_code, result.duration, info)   # notes: info["notes"]

    def interrupt(self) -> None:
        if self._sandbox is not None:
            self._sandbox.interrupt()

    def submit(self, arg: str | None = None) -> SubmitResult:
        if self.task is None:
            raise RuntimeError("reset() the environment before submit()")
        reward, breakdown = flag_reward(arg, self.task.gold)
        return SubmitResult(reward, breakdown, self.task.gold)

    # -- life cycle ---------------------------------------------------------------------

    def _release(self) -> None:
        pool, pending, sandbox = self._pool, self._pending, self._sandbox
        self._pending = self._sandbox = None
        if pool is None:
            return
        if pending is not None:
            pending.add_done_callback(lambda f: pool.discard(f.result()) if f.exception() is None else None)
        elif sandbox is not None:
            pool.discard(sandbox)

    def close(self) -> None:
        self._release()
        if self._taker is not None:
            self._taker.shutdown(wait=True)
            self._taker = None
        if self.owns_sandboxes:
            self.sandboxes.close()


def make_ctf_env(sandbox: str = "docker", image: str | None = None, timeout: float | None = None,
                 progress: Callable[[str], None] | None = None, recycle: bool = True, **_options) -> CtfEnv:
    return CtfEnv(CtfSandboxes(sandbox, image=image, timeout=timeout or DEFAULT_TIMEOUT, progress=progress,
                               recycle=recycle))


class CtfEnvFactory:
    """CTF envs for parallel workers sharing one set of pools (``icplay run -j N``)."""

    def __init__(self, sandbox: str = "docker", image: str | None = None, timeout: float | None = None,
                 progress: Callable[[str], None] | None = None, recycle: bool = True, **_options):
        self.sandbox = sandbox
        spares = 0 if recycle and sandbox == "docker" else 1
        self._shared = CtfSandboxes(sandbox, image=image, timeout=timeout or DEFAULT_TIMEOUT, progress=progress,
                                    recycle=recycle, spares=spares)

    def __call__(self) -> CtfEnv:
        return CtfEnv(self._shared, owns_sandboxes=False, lazy=True)

    def stats(self) -> dict[str, int]:
        return self._shared.stats()

    def close(self) -> None:
        self._shared.close()
