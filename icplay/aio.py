"""An asyncio API for trainers: many episodes in flight from one event loop.

    async with AsyncEnvs("sql", sandbox="sqlite") as envs:
        env = envs.make()
        query = await env.reset("bookshop-01")          # a task id of the set, or a Task
        step = await env.step("SELECT title FROM books")
        step = await env.step("submit")                  # step.reward; the breakdown: env.trajectory
        await env.close()

How it scales: an idle episode (one waiting for its policy) holds no thread. The blocking
parts (a sandbox command, a query, a reset, scoring) run on one bounded thread pool
shared by every env of an ``AsyncEnvs`` (``max_workers``, default 16), so 1000 episodes
in flight cost 16 threads. At most ``max_active`` episodes execute at once (default: a
few per core for the sandbox kind, or $ICPLAY_MAX_ACTIVE; icplay/envs/admission.py): a
reset waits while that many are admitted and working (``EpisodeAdmission``); when all of
them are idle, waiting for their policy, the next is admitted anyway, so a trainer that
resets a whole batch before stepping any never deadlocks. The envs of one ``AsyncEnvs`` share icplay's warm sandbox
pools and gold runs (``icplay.languages.EnvFactory``): a Bash container recycled after one
episode serves the next. Each env is one episode at a time; its calls are serialised.
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

from icplay.languages import EnvFactory
from icplay.library import CallerLoop, find_task, load_task_list
from icplay.tasks.model import Task

DEFAULT_WORKERS = 16


class AsyncStep(NamedTuple):
    observation: str
    reward: float
    done: bool
    info: dict[str, Any]


class AsyncEnvs:
    """A family of async envs over one language, sandbox kind, thread pool and warm pool."""

    def __init__(self, env_name: str, sandbox: str | None = None, *, tasks: str | Path | list[Task] | None = None,
                 image: str | None = None, protocol: str = "agent", save_dir: str | Path | None = None,
                 max_workers: int = DEFAULT_WORKERS, max_active: int | None = None, **env_options: Any):
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self.env_name, self.protocol = env_name, protocol
        self.save_dir = save_dir
        self.factory = EnvFactory(env_name, sandbox, image=image, max_active=max_active, **env_options)
        self.executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=f"icplay-aio-{env_name}")
        self._tasks_source = tasks if tasks is not None else env_name
        self._tasks: list[Task] | None = None
        self._envs: set[AsyncEnv] = set()
        self.admission = EpisodeAdmission(self.factory.admission.bound)
        self._closed = False

    @property
    def tasks(self) -> list[Task]:
        """The default task set (loaded on first use)."""
        if self._tasks is None:
            self._tasks = load_task_list(self._tasks_source, self.env_name)
        return self._tasks

    def make(self) -> "AsyncEnv":
        if self._closed:
            raise RuntimeError("these AsyncEnvs are closed")
        env = AsyncEnv(self)
        self._envs.add(env)
        return env

    async def run(self, fn, *args, **kwargs):
        """Run a blocking call on the shared pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(fn, *args, **kwargs))

    async def aclose(self) -> None:
        """Close every env made here, the warm pool, then the thread pool."""
        if self._closed:
            return
        self._closed = True
        await asyncio.gather(*(env.close() for env in list(self._envs)))
        await self.run(self.factory.close)
        self.executor.shutdown(wait=True)

    async def __aenter__(self) -> "AsyncEnvs":
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.aclose()


class EpisodeAdmission:
    """At most ``bound`` episodes executing at once: a reset waits while ``bound`` episodes
    are admitted and one of them is working (a call in flight, or admitted and about to
    start one). When every admitted episode is idle (waiting for its policy, or for a
    trainer that resets a whole batch before stepping any) the next is admitted over the
    bound: nothing is executing, so nothing thrashes, and nothing can deadlock."""

    def __init__(self, bound: int):
        self.bound = bound
        self.active = 0      # admitted episodes (from reset to done, stop or close)
        self.busy = 0        # of those, the ones with a call in flight or about to start one
        self._changed: asyncio.Condition | None = None   # made in the running loop

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    async def admit(self) -> None:
        """Wait for a place; the admitted episode counts as working until ``idle()``.

        Each change wakes one waiter, not all (64 waiters woken at every call made the
        event loop's work grow with the episodes in flight); a waiter cancelled after its
        wake-up passes it on."""
        changed = self._condition()
        async with changed:
            try:
                await changed.wait_for(lambda: self.active < self.bound or self.busy == 0)
            except asyncio.CancelledError:
                changed.notify(1)
                raise
            self.active += 1
            self.busy += 1

    async def working(self) -> None:
        self.busy += 1

    async def idle(self) -> None:
        self.busy -= 1
        if self.busy == 0:
            async with self._condition():
                self._condition().notify(1)

    async def leave(self) -> None:
        changed = self._condition()
        async with changed:
            self.active -= 1
            changed.notify(1)


class AsyncEnv:
    """One async episode at a time; made by ``AsyncEnvs.make()``."""

    def __init__(self, family: AsyncEnvs):
        self.family = family
        self.episode_loop = CallerLoop(family.env_name, family.factory.sandbox, protocol=family.protocol,
                                       save_dir=family.save_dir, env_factory=family.factory)
        self._lock = asyncio.Lock()
        self._admitted = False
        self.task: Task | None = None

    @property
    def trajectory(self):
        return self.episode_loop.trajectory

    async def reset(self, task: Task | str) -> str:
        """A pristine sandbox for ``task`` (a Task, or an id in the family's task set); the query."""
        if not isinstance(task, Task):
            task = find_task(self.family.tasks, str(task))
        async with self._lock:
            self.task = task
            await self.family.run(self.episode_loop.stop)
            await self._leave()
            await self.family.admission.admit()
            self._admitted = True
            try:
                return await self.family.run(self.episode_loop.reset, task)
            finally:
                await self.family.admission.idle()

    async def step(self, action: str) -> AsyncStep:
        async with self._lock:
            admitted = self._admitted
            if admitted:
                await self.family.admission.working()
            try:
                outcome = await self.family.run(self.episode_loop.step, action)
            finally:
                if admitted:
                    await self.family.admission.idle()
            if outcome.terminated:
                await self._leave()
        return AsyncStep(outcome.observation, outcome.reward, outcome.terminated, outcome.info)

    async def _leave(self) -> None:
        if self._admitted:
            self._admitted = False
            await self.family.admission.leave()

    async def close(self) -> None:
        async with self._lock:
            await self.family.run(self.episode_loop.close)
            await self._leave()
        self.family._envs.discard(self)
