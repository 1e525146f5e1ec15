"""The CTF environment: a shell over the task's files, scored by the submitted flag.

It reuses the Bash environment's sandboxes (``icplay.sandbox``: the persistent session,
Docker containers with recycling, bubblewrap) with two differences: the sandbox is the
same for every task (the ``icplay-ctf`` image, or bwrap over the host's tools) and the
task's files are copied in when the episode starts, to ``/ctf/<id>``; the shell then
``cd``s there and runs the task's ``setup``, as InterCode's reset did.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Callable

from icplay.ctf.reward import flag_reward
from icplay.tasks.ctf import CTF_ROOT, HIDDEN_FOLDERS, assets_dir, mount_path, setup_of
from icplay.envs.base import HAS_CWD, STREAMS_OUTPUT, StepResult, SubmitResult, strict_verdict
from icplay.envs.held import PooledShellEnv, SharedSandboxesFactory
from icplay.sandbox import registry as sandbox_kinds
from icplay.sandbox.base import DEFAULT_TIMEOUT, Sandbox, SandboxError
from icplay.sandbox.registry import HostRoot, SandboxRequest
from icplay.sandbox.pool import PoolsByKey, SandboxPool
from icplay.tasks.model import Task
from icplay.languages import get
from icplay.sandbox.bwrap import template_folder

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


class CtfSandboxes:
    """Started sandboxes for CTF episodes, pooled by image and network (Docker containers
    recycled between episodes when they prove themselves pristine again)."""

    def __init__(self, kind: str = "docker", image: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 progress: Callable[[str], None] | None = None, spares: int = 1, recycle: bool = True):
        sandbox_kinds.get(kind)   # UnknownSandbox names the known ones
        self.kind, self.image, self.timeout, self.progress = kind, image, timeout, progress
        self.spares, self.recycle = spares, recycle
        self._pools = PoolsByKey()
        self._template: Path | None = None

    def image_for(self, task: Task) -> str:
        return self.image or task.image or DEFAULT_IMAGE

    def _factory(self, task: Task) -> Callable[[], Sandbox]:
        image = self.image_for(task)
        if image == DEFAULT_IMAGE:
            get("ctf")   # the spec registers its image (an env made without the spec, too)
        request = SandboxRequest("ctf", image, HostRoot(self._host_root, workdir=CTF_ROOT, binds=(("ctf", CTF_ROOT),)),
                                 network=task.network, timeout=self.timeout, recycle=self.recycle,
                                 progress=self.progress,
                                 own_image="a CTF task that needs its own image" if self.image or task.image else "")
        return sandbox_kinds.sandbox_factory(self.kind, request)

    def _host_root(self) -> Path:
        """An empty /ctf, /testbed and /root as a folder tree (made once), for kinds that run
        the host's tools over one (bwrap), which may lack some of the tasks' tools."""
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
        return self._template

    def pool(self, task: Task) -> SandboxPool:
        return self._pools.get(f"{self.image_for(task)}|{task.network}",
                               lambda: SandboxPool(self._factory(task), spares=self.spares, recycle=self.recycle))

    def place_files(self, sandbox: Sandbox, task: Task) -> None:
        """Copy the task's files to /ctf/<id> in the sandbox (an empty folder when it has
        none), without its solution notes."""
        source = assets_dir(task)
        if source is not None and not source.is_dir():
            raise SandboxError(f"task {task.key}: its files folder {source} is not there")
        sandbox.put_files(source, mount_path(task), skip=HIDDEN_FOLDERS)

    def stats(self) -> dict[str, int]:
        return self._pools.stats()

    def close(self) -> None:
        self._pools.close()
        if self._template is not None:
            shutil.rmtree(self._template.parent, ignore_errors=True)
            self._template = None


class CtfEnv(PooledShellEnv):
    """One CTF episode at a time: reset copies the task's files in and runs its setup."""

    name = "ctf"
    capabilities = frozenset({STREAMS_OUTPUT, HAS_CWD})

    # -- episode ------------------------------------------------------------------------

    def reset(self, task: Task) -> str:
        self.task = task
        self.held.take(self.sandboxes.pool(task), lambda pool: self._prepared(pool, task))
        return task.query

    def _prepared(self, pool: SandboxPool, task: Task) -> Sandbox:
        """A sandbox from the pool with the task's files in place, the shell at /ctf/<id>
        after the setup ran."""
        sandbox = pool.take()
        try:
            self._prepare(sandbox, task)
        except BaseException:   # even Ctrl+C: the half-prepared sandbox goes back to be recycled, the error re-raised
            pool.discard(sandbox)
            raise
        if sandbox.capabilities.replaces_dead:
            # a new container in place of a dead one gets the files and setup before the
            # next command runs in it (recycled for another episode: that one's prepare)
            sandbox.on_replaced = lambda: self._prepare(sandbox, task)
        return sandbox

    def _prepare(self, sandbox: Sandbox, task: Task) -> None:
        self.sandboxes.place_files(sandbox, task)
        where = shlex.quote(mount_path(task))
        shell = sandbox.shell   # a shell restarted mid-episode starts in the task's folder too
        shell.init_script = f"{shell.init_script}\ncd {where} 2>/dev/null"
        result = sandbox.run(f"cd {where}")
        if result.exit_code != 0:
            raise SandboxError(f"task {task.key}: cannot enter {mount_path(task)}: {result.output.strip()[-200:]}")
        setup = setup_of(task)
        if setup:
            sandbox.run(setup, timeout=SETUP_TIMEOUT)   # what it printed is not the solver's to see
            sandbox.run(f"cd {where}")

    def step(self, action: str, on_output: Callable[[str], None] | None = None) -> StepResult:
        sandbox = self.sandbox
        if sandbox is None or self.task is None:
            raise RuntimeError("reset() the environment before step()")
        result = sandbox.run(action, on_output=on_output)
        # (a container that replaced a dead one got the files back before anything ran in it)
        return StepResult(result.output, result.exit_code, result.duration, result.info())   # notes: info["notes"]

    def submit(self, arg: str | None = None) -> SubmitResult:
        if self.task is None:
            raise RuntimeError("reset() the environment before submit()")
        reward, breakdown = flag_reward(arg, self.task.gold)
        # strict: the flag is the whole answer and is compared here, in icplay's process, with a
        # gold that never enters the sandbox: a match cannot be had without finding the flag
        reasons = [] if breakdown["correct"] else [breakdown["why"]]
        return SubmitResult(reward, breakdown, self.task.gold, strict=strict_verdict(reward, reasons))


def make_ctf_env(sandbox: str = "docker", image: str | None = None, timeout: float | None = None,
                 progress: Callable[[str], None] | None = None, recycle: bool = True, **_options) -> CtfEnv:
    return CtfEnv(CtfSandboxes(sandbox, image=image, timeout=timeout or DEFAULT_TIMEOUT, progress=progress,
                               recycle=recycle))


class CtfEnvFactory(SharedSandboxesFactory):
    """CTF envs for parallel workers sharing one set of pools (``icplay run -j N``)."""

    def __init__(self, sandbox: str = "docker", image: str | None = None, timeout: float | None = None,
                 progress: Callable[[str], None] | None = None, recycle: bool = True, **_options):
        self.sandbox = sandbox
        spares = 0 if recycle and sandbox_kinds.capabilities(sandbox).recyclable else 1
        self._shared = CtfSandboxes(sandbox, image=image, timeout=timeout or DEFAULT_TIMEOUT, progress=progress,
                                    recycle=recycle, spares=spares)

    def __call__(self) -> CtfEnv:
        return CtfEnv(self._shared, owns_sandboxes=False, lazy=True)
