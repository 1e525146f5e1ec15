"""The asyncio executor: a run's episodes from one event loop, ``concurrency`` at a time.

    trajs = await run_episodes(tasks, spec, concurrency=8, store=TrajectoryStore(out))

Policies are synchronous (a model call blocks), so each episode in flight runs on a thread
of a pool of ``concurrency``; the envs are kept in a free list and reused, as the local
runner's workers keep theirs. For step-by-step control from a trainer (no policy; the
trainer's own async code decides each action), use ``icplay.aio.AsyncEnvs`` instead.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from concurrent.futures import ThreadPoolExecutor

from icplay.episode import Trajectory
from icplay.executors.episode import run_episode
from icplay.executors.specs import RunSpec
from icplay.tasks.model import Task

_log = logging.getLogger(__name__)


async def run_episodes(tasks: list[Task], spec: RunSpec, *, concurrency: int = 8, store=None) -> list[Trajectory]:
    """Every task's trajectory, in task order; each saved through ``store`` after every turn.
    A ``FatalEpisodeError`` (the run cannot go on) cancels the episodes not yet started and
    is raised."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    loop = asyncio.get_running_loop()
    factory = spec.env_factory()
    policy = spec.build_policy()
    free: list = []
    made: list = []
    gate = asyncio.Semaphore(concurrency)
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="icplay-aio-run")

    async def one(task: Task) -> Trajectory:
        async with gate:
            env = free.pop() if free else None
            if env is None:
                env = await loop.run_in_executor(pool, factory)
                made.append(env)
            try:
                return await loop.run_in_executor(pool, functools.partial(
                    run_episode, task, spec, env=env, policy=policy, save=store.save if store else None))
            finally:
                free.append(env)

    try:
        return list(await asyncio.gather(*(one(t) for t in tasks)))
    finally:
        def close_all() -> None:
            for env in made:
                try:
                    env.close()
                except Exception as exc:   # any language's env: one that fails must not keep the rest open
                    _log.warning("closing an env failed: %s: %s", type(exc).__name__, exc)
            factory.close()

        await loop.run_in_executor(pool, close_all)
        pool.shutdown(wait=True)
