"""Environments: InterCode's reset / step / submit, one module per language.

``make_env`` is the one place that turns a language and a sandbox name into an Env, so
the CLI, the runner and the TUI all build environments the same way.
"""

from __future__ import annotations

from typing import Callable

from icplay.envs.base import Env, StepResult, SubmitResult, parse_submit

SANDBOXES = {"bash": ("docker", "bwrap"), "sql": ("sqlite", "mysql")}

__all__ = ["Env", "StepResult", "SubmitResult", "parse_submit", "make_env", "default_sandbox", "SANDBOXES",
           "EnvFactory"]


def docker_available() -> bool:
    try:
        from icplay.sandbox.images import docker_client

        docker_client()
        return True
    except Exception:
        return False


def default_sandbox(env_name: str) -> str:
    """Docker when a daemon answers (bash), else the local one; SQLite for SQL."""
    if env_name == "bash":
        return "docker" if docker_available() else "bwrap"
    if env_name == "sql":
        return "sqlite"
    raise ValueError(f"no environment {env_name!r} (known: {', '.join(SANDBOXES)})")


def _checked_sandbox(env_name: str, sandbox: str | None) -> str:
    from icplay.sandbox.base import SandboxError

    sandbox = sandbox or default_sandbox(env_name)
    if env_name not in SANDBOXES:
        raise SandboxError(f"no environment {env_name!r} (known: {', '.join(SANDBOXES)})")
    if sandbox not in SANDBOXES[env_name]:
        raise SandboxError(f"{env_name} runs on {' or '.join(SANDBOXES[env_name])}, not {sandbox!r}")
    return sandbox


def _bash_sandboxes(sandbox: str, image: str | None, timeout: float | None,
                    progress: Callable[[str], None] | None, recycle: bool, spares: int = 1):
    from icplay.envs.bash import BashSandboxes
    from icplay.sandbox.base import DEFAULT_TIMEOUT

    return BashSandboxes(sandbox, image=image, timeout=timeout or DEFAULT_TIMEOUT, progress=progress,
                         recycle=recycle, spares=spares)


def make_env(env_name: str, sandbox: str | None = None, image: str | None = None,
             timeout: float | None = None, progress: Callable[[str], None] | None = None,
             recycle: bool = True, **options) -> Env:
    """A ready Env for ``env_name`` on ``sandbox`` (default: see ``default_sandbox``).

    ``recycle=False`` gives every Bash episode on Docker a new container instead of a
    used one proved pristine again (see ``icplay/sandbox/recycle.py``).
    """
    sandbox = _checked_sandbox(env_name, sandbox)
    if env_name == "bash" and options.get("compat") == "intercode":
        return _intercode_bash(sandbox, image, timeout)
    if env_name == "bash":
        from icplay.envs.bash import BashEnv

        return BashEnv(_bash_sandboxes(sandbox, image, timeout, progress, recycle))
    from icplay.envs.sql import SqlEnv
    from icplay.sql import make_sql_backend

    return SqlEnv(make_sql_backend(sandbox, progress=progress, image=image, timeout=timeout, **options))


COMPAT_MODES = ("intercode",)


def _intercode_bash(sandbox: str, image: str | None, timeout: float | None) -> Env:
    """``compat="intercode"``: InterCode's own execution semantics (icplay/bash/compat.py)."""
    from icplay.bash.compat import IntercodeBashEnv
    from icplay.sandbox.base import SandboxError

    if sandbox != "docker":
        raise SandboxError("--compat intercode runs on Docker only (InterCode's containers)")
    return IntercodeBashEnv(image=image, timeout=timeout)


class EnvFactory:
    """Envs for parallel workers (``icplay run -j N``), one per call.

    Bash envs share one set of sandbox pools and gold runs: a container recycled after
    one worker's episode serves the next episode of any worker, and each task's gold
    runs once per run. They take their sandbox lazily (while the policy thinks about its
    first action). ``close()`` after the envs are closed.
    """

    def __init__(self, env_name: str, sandbox: str | None = None, image: str | None = None,
                 timeout: float | None = None, progress: Callable[[str], None] | None = None,
                 recycle: bool = True, **options):
        self.env_name = env_name
        self.sandbox = _checked_sandbox(env_name, sandbox)
        self.image, self.timeout, self.progress, self.recycle, self.options = image, timeout, progress, recycle, options
        self._shared = None

    def __call__(self) -> Env:
        if self.env_name == "bash" and self.options.get("compat") == "intercode":
            return _intercode_bash(self.sandbox, self.image, self.timeout)
        if self.env_name != "bash":
            return make_env(self.env_name, self.sandbox, self.image, self.timeout, self.progress, self.recycle,
                            **self.options)
        from icplay.envs.bash import BashEnv

        if self._shared is None:
            # No spare when containers are recycled: a used one comes back after every
            # episode, and a lazy env takes it while its policy thinks.
            spares = 0 if self.recycle and self.sandbox == "docker" else 1
            self._shared = _bash_sandboxes(self.sandbox, self.image, self.timeout, self.progress, self.recycle,
                                           spares)
        return BashEnv(self._shared, owns_sandboxes=False, lazy=True)

    def stats(self) -> dict[str, int]:
        return self._shared.stats() if self._shared is not None else {}

    def close(self) -> None:
        shared, self._shared = self._shared, None
        if shared is not None:
            shared.close()
