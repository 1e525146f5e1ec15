"""A Harbor task as an icplay episode: a shell in a container of the task's own image,
scored at submit by the task's own verifier (``verify.py``).

Each episode gets a new container (never recycled: the verifier runs in it). The shell
starts in the image's working directory, as Harbor's agents do. An action may run as long
as the task's ``[agent] timeout_sec`` (Harbor's budget for the whole agent, 600 s unless
task.toml says otherwise), or the ``timeout`` the env was made with. The verifier runs
once: after the submit the episode is over (a second submit gives the same result).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from icplay.driver.replay import Recorded, replay
from icplay.envs.base import HAS_CWD, STREAMS_OUTPUT, StepResult, SubmitResult
from icplay.envs.held import PooledShellEnv, SharedSandboxesFactory
from icplay.episode import Episode
from icplay.harbor.load import settings_of
from icplay.sandbox.base import SandboxError
from icplay.sandbox.pool import PoolsByKey, SandboxPool
from icplay.sandbox import registry
from icplay.sandbox.registry import HostRoot, SandboxRequest
from icplay.tasks.model import Task
from icplay.harbor.image import ensure_task_image
from icplay.harbor.verify import Verifier, carrier, system_artifacts


def limits_of(task: Task) -> dict[str, Any]:
    """task.toml's memory and CPUs as Docker limits (CPUs at most this machine's)."""
    import os

    settings = settings_of(task)
    memory = f"{int(settings['memory_mb'])}m"
    cpus = min(float(settings["cpus"]), float(os.cpu_count() or 1))
    return {"mem_limit": memory, "memswap_limit": memory, "nano_cpus": int(cpus * 1e9)}


def _no_host_root() -> Path:
    raise SandboxError("a Harbor task runs in its own image, never over the host's tools")


class HarborSandboxes:
    """Containers of Harbor tasks' images on an image-running kind of the sandbox registry
    (Docker, Podman), pooled by image, network and limits."""

    def __init__(self, kind: str = "docker", timeout: float | None = None,
                 progress: Callable[[str], None] | None = None):
        if not registry.capabilities(kind).runs_images:
            raise SandboxError(f"harbor tasks run in their own images, on {' or '.join(registry.image_kinds())}, "
                               f"not {kind!r}")
        self.kind, self.timeout, self.progress = kind, timeout, progress
        self._pools = PoolsByKey()
        self._client: Any = None

    def action_timeout(self, task: Task) -> float:
        return self.timeout if self.timeout is not None else float(settings_of(task)["agent_timeout"])

    def pool(self, task: Task) -> SandboxPool:
        if self._client is None:
            self._client = registry.image_engine(self.kind).client()
        image = ensure_task_image(self._client, task, self.progress)
        limits = limits_of(task)
        network, timeout = task.network, self.action_timeout(task)
        # faithful: the image's own bash as pid 1, nothing of icplay's inside; never recycled
        make = registry.sandbox_factory(self.kind, SandboxRequest(
            "harbor", image, HostRoot(_no_host_root), own_image="a Harbor task", network=network, timeout=timeout,
            recycle=False, limits=limits, faithful=True, progress=self.progress))
        key = f"{image}|{network}|{sorted(limits.items())}|{timeout}"
        return self._pools.get(key, lambda: SandboxPool(make, spares=0, recycle=False))

    def stats(self) -> dict[str, int]:
        return self._pools.stats()

    def close(self) -> None:
        self._pools.close()


class HarborEnv(PooledShellEnv):
    """One Harbor episode at a time."""

    name = "harbor"
    capabilities = frozenset({STREAMS_OUTPUT, HAS_CWD})
    sandboxes: HarborSandboxes

    def __init__(self, sandboxes: HarborSandboxes, owns_sandboxes: bool = True, lazy: bool = False):
        super().__init__(sandboxes, owns_sandboxes, lazy)
        self.result: SubmitResult | None = None

    def reset(self, task: Task) -> str:
        settings_of(task)   # a task of another language: one sentence now
        self.task, self.result = task, None
        self.held.take(self.sandboxes.pool(task))
        return task.query

    def step(self, action: str, on_output: Callable[[str], None] | None = None) -> StepResult:
        if self.task is None:
            raise RuntimeError("reset() the environment before step()")
        if self.result is not None:
            raise RuntimeError("this Harbor episode was verified at its submit: reset() for another")
        sandbox = self.sandbox
        assert sandbox is not None
        result = sandbox.run(action, timeout=self.sandboxes.action_timeout(self.task), on_output=on_output)
        return StepResult(result.output, result.exit_code, result.duration, result.info())

    def submit(self, arg: str | None = None) -> SubmitResult:
        """Run the task's verifier in this episode's container (once) and give its reward."""
        if self.task is None:
            raise RuntimeError("reset() the environment before submit()")
        if self.result is not None:
            return self.result
        settings = settings_of(self.task)
        tests = Path(settings["dir"]) / "tests"
        if not (tests / "test.sh").is_file():
            raise SandboxError(f"task {self.task.key}: {tests / 'test.sh'} is not there any more")
        timeout, env = float(settings["verifier_timeout"]), dict(settings["verifier_env"])
        if settings.get("verifier_mode") == "separate":
            self.result = self._verify_separately(settings, tests, timeout, env)
        else:
            self.result = Verifier(self.sandbox, tests, timeout, env).score()
        self.held.release()   # the container is removed: the verifier ran in it (or carried from it)
        return self.result

    def _verify_separately(self, settings: dict, tests: Path, timeout: float, env: dict[str, str]) -> SubmitResult:
        """In a fresh container of the task's image, given the artifacts (``verify.carrier``)."""
        pool = self.held.pool
        assert pool is not None and self.sandbox is not None
        agent = Verifier(self.sandbox, tests, timeout, env)
        fresh_sandbox = pool.take()
        try:
            fresh = Verifier(fresh_sandbox, tests, timeout, env, doubts=tuple(system_artifacts(settings["artifacts"])))
            return fresh.score(before=carrier(agent, fresh, list(settings["collect"]), list(settings["artifacts"])))
        finally:
            pool.discard(fresh_sandbox)


def make_harbor_env(sandbox: str = "docker", image: str | None = None, timeout: float | None = None,
                    progress: Callable[[str], None] | None = None, recycle: bool = True, **_options) -> HarborEnv:
    """``image`` does not apply: every Harbor task names its own environment."""
    return HarborEnv(HarborSandboxes(sandbox, timeout=timeout, progress=progress))


class HarborEnvFactory(SharedSandboxesFactory):
    """Harbor envs for parallel workers sharing one set of pools (``icplay run -j N``)."""

    def __init__(self, sandbox: str = "docker", image: str | None = None, timeout: float | None = None,
                 progress: Callable[[str], None] | None = None, recycle: bool = True, **_options):
        self.sandbox = sandbox
        self._shared = HarborSandboxes(sandbox, timeout=timeout, progress=progress)

    def __call__(self) -> HarborEnv:
        return HarborEnv(self._shared, owns_sandboxes=False, lazy=True)



def play_oracle(env: HarborEnv, task: Task) -> tuple[int | None, SubmitResult]:
    """The task's oracle (its solve.sh, the task's gold) played through the driver and
    submitted: solve.sh's exit code and the verifier's result."""
    done = replay(Episode(env, task), [Recorded(task.gold)], submit_at_end=True)
    if done.final is None:
        raise SandboxError(f"task {task.key}: the oracle's episode ended unscored")
    return done.turns[0].turn.exit_code, done.final


def check_oracles(tasks: list[Task], progress: Callable[[str], None] | None = None,
                  sandbox: str = "docker") -> list[tuple[Task, str]]:
    """Each task's oracle (solution/solve.sh) played and verified on the image engine
    ``sandbox``: the tasks it does not bring to 1.0, with why (``icplay tasks --check harbor:PATH``)."""
    found: list[tuple[Task, str]] = []
    env = make_harbor_env(sandbox, progress=progress)
    try:
        for task in tasks:
            if not task.gold:
                found.append((task, "no solution/solve.sh"))
                continue
            ran, result = play_oracle(env, task)
            if result.reward < 1.0:
                why = result.breakdown.get("not_scored") or (result.breakdown.get("verifier_output") or "").strip()
                found.append((task, f"reward {result.reward:g} (solve.sh exit {ran}): "
                                    f"{' '.join(str(why).split())[-200:]}"))
    finally:
        env.close()
    return found
