"""The async API: many concurrent episodes from one event loop on a bounded thread pool,
with the right reward for each."""

from __future__ import annotations

import asyncio
import threading

import pytest

from icplay.aio import AsyncEnvs

WORKERS = 4


def aio_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith("icplay-aio-"))


async def one_episode(envs: AsyncEnvs, task, right: bool, ready: asyncio.Event, waiting: list) -> tuple:
    env = envs.make()
    try:
        query = await env.reset(task)
        assert query == task.query
        waiting.append(env)
        await ready.wait()     # every episode idle at once: none may hold a thread
        step = await env.step(task.gold if right else "SELECT 'certainly not the answer'")
        assert step.done is False and step.reward == 0.0
        submitted = await env.step("submit")
        assert submitted.done
        assert "breakdown" not in submitted.info
        return task.id, right, submitted.reward, env.trajectory.breakdown
    finally:
        await env.close()


async def run_64(tmp_path):
    async with AsyncEnvs("sql", sandbox="sqlite", max_workers=WORKERS, save_dir=tmp_path) as envs:
        tasks = [envs.tasks[i % len(envs.tasks)] for i in range(64)]
        ready, waiting = asyncio.Event(), []
        runs = [asyncio.create_task(one_episode(envs, task, i % 4 != 3, ready, waiting))
                for i, task in enumerate(tasks)]
        while len(waiting) < 64 and not any(r.done() for r in runs):
            await asyncio.sleep(0.01)
        in_flight_threads = aio_threads()
        ready.set()
        results = await asyncio.gather(*runs)
    return results, in_flight_threads


def test_64_concurrent_sql_episodes_get_their_rewards(tmp_path):
    results, in_flight_threads = asyncio.run(run_64(tmp_path))
    assert len(results) == 64
    assert 1 <= in_flight_threads <= WORKERS          # 64 idle episodes, at most 4 threads
    for task_id, right, reward, breakdown in results:
        if right:
            assert reward == 1.0, (task_id, breakdown)
        else:
            assert reward == 0.0 and breakdown["rows_matched"] == 0, (task_id, breakdown)
    assert len(list(tmp_path.rglob("*.json"))) == len({r[0] for r in results})
    assert aio_threads() == 0                          # the pool is shut down with the family


async def gold_episode(envs: AsyncEnvs, task) -> float:
    """One episode made, reset, played with the gold, submitted and closed: its reward."""
    env = envs.make()
    await env.reset(task)
    await env.step(task.gold)
    step = await env.step("submit")
    await env.close()
    return step.reward


@pytest.mark.bwrap
def test_concurrent_bash_episodes_share_one_warm_pool(bwrap_ready):
    async def main():
        async with AsyncEnvs("bash", sandbox="bwrap", max_workers=WORKERS) as envs:
            tasks = envs.tasks[:8]
            rewards = await asyncio.gather(*(gold_episode(envs, t) for t in tasks))
            stats = envs.factory.stats()
        return rewards, stats

    rewards, stats = asyncio.run(main())
    assert rewards == [1.0] * 8
    assert stats  # one shared set of pools served every env


def test_calls_on_a_closed_family_or_unknown_task_say_so():
    async def main():
        envs = AsyncEnvs("sql", sandbox="sqlite", max_workers=1)
        env = envs.make()
        with pytest.raises(ValueError, match="no task 'nope'"):
            await env.reset("nope")
        with pytest.raises(RuntimeError, match="reset"):
            await env.step("SELECT 1")
        await envs.aclose()
        with pytest.raises(RuntimeError, match="closed"):
            envs.make()

    asyncio.run(main())
