"""Concurrent episodes from one event loop with icplay's async API.

    python examples/async_episodes.py                        # 64 SQL and 16 Bash episodes at once
    python examples/async_episodes.py --sql 64 --bash 0      # SQL only (SQLite)
    python examples/async_episodes.py --bash-sandbox bwrap   # Bash on bubblewrap (default: Docker if it answers)

Each episode resets to a task of the bundled set, runs its gold and submits; a real
trainer would ask its policy for the action instead (``await policy(query)``). Both
families run in the same event loop: an idle episode holds no thread, each family has
its own bounded thread pool and warm sandbox pool.
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


async def family(env_name: str, count: int, sandbox: str | None) -> tuple[str, list[float], float]:
    async with AsyncEnvs(env_name, sandbox=sandbox) as envs:
        tasks = [envs.tasks[i % len(envs.tasks)] for i in range(count)]
        started = time.perf_counter()
        rewards = await asyncio.gather(*(episode(envs, task) for task in tasks))
        return env_name, list(rewards), time.perf_counter() - started


async def main(sql: int, bash: int, sql_sandbox: str | None, bash_sandbox: str | None) -> None:
    runs = [family(name, count, sandbox) for name, count, sandbox in
            (("sql", sql, sql_sandbox), ("bash", bash, bash_sandbox)) if count > 0]
    started = time.perf_counter()
    for name, rewards, seconds in await asyncio.gather(*runs):
        solved = sum(r == 1.0 for r in rewards)
        print(f"{name}: {len(rewards)} episodes, {solved} solved, {seconds:.2f} s "
              f"({len(rewards) / seconds:.1f} episodes/s)")
    print(f"all in {time.perf_counter() - started:.2f} s from one event loop")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sql", type=int, default=64, help="concurrent SQL episodes (default 64)")
    parser.add_argument("--bash", type=int, default=16, help="concurrent Bash episodes (default 16)")
    parser.add_argument("--sql-sandbox", help="sqlite or mysql (default sqlite)")
    parser.add_argument("--bash-sandbox", help="docker or bwrap (default: docker when a daemon answers)")
    args = parser.parse_args()
    asyncio.run(main(args.sql, args.bash, args.sql_sandbox, args.bash_sandbox))
