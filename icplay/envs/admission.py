"""Admission: how much of a family of envs executes at once, so that asking for more
episodes in flight than the machine can carry queues the extra ones instead of thrashing.

Two forms over one bound: the async API admits whole episodes (``icplay.aio.
EpisodeAdmission``: a reset waits while ``bound`` admitted episodes are working), and
every env an ``EnvFactory`` makes takes a slot around each call (reset, step, submit) for
the threaded executors and ``serve-env``. Measured on 2 cores (bench/bench_async.py, one
run each): Bash on Docker made 0.53x at 64 in flight what it made at 8 with calls
admitted 8 at a time, still 0.54x with 4 at a time, and 1.13x with episodes admitted
8 at a time: the thrash is 64 episodes holding and recycling containers at once, not
64 calls.

The bound: ``ICPLAY_MAX_ACTIVE`` if set, else a few per core for the sandbox kind
(``PER_CORE``: sandboxes whose work runs outside this process, in containers or bwrap,
overlap more than SQLite's, which runs in this process under its GIL).
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable

from icplay.envs.base import Env, StepResult, SubmitResult
from icplay.tasks.model import Task

PER_CORE = {"docker": 4, "bwrap": 4, "mysql": 4, "sqlite": 2}
DEFAULT_PER_CORE = 4
ENV_VARIABLE = "ICPLAY_MAX_ACTIVE"


def default_bound(sandbox_kind: str) -> int:
    """Env calls executing at once for ``sandbox_kind`` on this machine (see the module)."""
    told = os.environ.get(ENV_VARIABLE, "").strip()
    if told:
        try:
            value = int(told)
        except ValueError:
            value = 0
        if value < 1:
            raise ValueError(f"{ENV_VARIABLE}={told!r} is not a whole number of at least 1")
        return value
    return PER_CORE.get(sandbox_kind, DEFAULT_PER_CORE) * (os.cpu_count() or 1)


class Admission:
    """A bound on calls executing at once, shared by the envs of one family (threads wait)."""

    def __init__(self, bound: int):
        if bound < 1:
            raise ValueError("an admission bound is at least 1")
        self.bound = bound
        self._slots = threading.BoundedSemaphore(bound)

    def __enter__(self) -> "Admission":
        self._slots.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._slots.release()


class AdmittedEnv:
    """An env whose reset, step and submit wait for admission; everything else (interrupt,
    close, the sandbox, attributes) goes straight to the env."""

    def __init__(self, env: Env, admission: Admission):
        self.env = env
        self.admission = admission

    def reset(self, task: Task) -> str:
        with self.admission:
            return self.env.reset(task)

    def step(self, action: str, on_output: Callable[[str], None] | None = None) -> StepResult:
        with self.admission:
            return self.env.step(action, on_output=on_output)

    def submit(self, arg: str | None = None) -> SubmitResult:
        with self.admission:
            return self.env.submit(arg)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)
