"""Concurrent episodes from one event loop with icplay's async API.

    python examples/async_episodes.py                                   # 64 SQL episodes on SQLite
    python examples/async_episodes.py --env bash --concurrency 16       # 16 Bash episodes (Docker or bwrap)

Each episode resets to a task of the bundled set, runs its gold query and submits;
a real trainer would ask its policy for the action instead (``await policy(query)``).
"""

from __future__ import annotations

import argparse
import asyncio
import time

from icplay.aio import AsyncEnvs


async def episode(envs: AsyncEnvs, task) -> float:
    env = envs.make()
    try:
        await env.reset(task)
        await env.step(task.gold)
        return (await env.step("submit")).reward
    finally:
        await env.close()


async def main(env_name: str, concurrency: int, sandbox: str | None) -> None:
    async with AsyncEnvs(env_name, sandbox=sandbox) as envs:
        tasks = [envs.tasks[i % len(envs.tasks)] for i in range(concurrency)]
        started = time.perf_counter()
        rewards = await asyncio.gather(*(episode(envs, task) for task in tasks))
        seconds = time.perf_counter() - started
    solved = sum(r == 1.0 for r in rewards)
    print(f"{len(rewards)} episodes, {solved} solved, {seconds:.2f} s ({len(rewards) / seconds:.1f} episodes/s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--env", default="sql", choices=("sql", "bash"))
    parser.add_argument("--sandbox", help="sqlite or mysql (SQL); docker or bwrap (Bash); default: icplay's")
    args = parser.parse_args()
    asyncio.run(main(args.env, args.concurrency, args.sandbox))
