"""The async API: episodes per second at 1, 8 and 64 episodes in flight.

Run: .venv/bin/python bench/bench_async.py [--env sql|bash|both] [--sandbox S] [--episodes 256]
     [--levels 1,8,64] [--workers 16] [--max-active N]

Each episode: reset to a task of the bundled set, run its gold, submit (the reward is
checked to be 1.0). ``--episodes`` episodes run at each level with that many in flight at
once, all from one event loop over one ``AsyncEnvs`` (one thread pool of ``--workers``,
one warm pool); a warm-up round runs first. Printed: episodes/s per level and the ratio
to 1 in flight and of the most in flight to 8, all measured in this one run. Env calls are
admitted ``--max-active`` at a time (default: icplay's bound for the sandbox kind on this
machine, see icplay/envs/admission.py). Defaults: SQL on SQLite; Bash on Docker.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from icplay.aio import AsyncEnvs


async def episode(envs: AsyncEnvs, task) -> None:
    env = envs.make()
    try:
        await env.reset(task)
        await env.step(task.gold)
        step = await env.step("submit")
        if step.reward != 1.0:
            raise SystemExit(f"{task.key}: gold scored {step.reward}")
    finally:
        await env.close()


async def level(envs: AsyncEnvs, in_flight: int, episodes: int) -> float:
    tasks = envs.tasks
    gate = asyncio.Semaphore(in_flight)

    async def gated(i: int) -> None:
        async with gate:
            await episode(envs, tasks[i % len(tasks)])

    started = time.perf_counter()
    await asyncio.gather(*(gated(i) for i in range(episodes)))
    return episodes / (time.perf_counter() - started)


async def main(args) -> None:
    for env_name in (("sql", "bash") if args.env == "both" else (args.env,)):
        await measure(args, env_name)


async def measure(args, env_name: str) -> None:
    levels = [int(x) for x in args.levels.split(",")]
    sandbox = args.sandbox or ("sqlite" if env_name == "sql" else "docker")
    async with AsyncEnvs(env_name, sandbox=sandbox, max_workers=args.workers, max_active=args.max_active) as envs:
        await level(envs, max(levels), min(args.episodes, max(levels)))  # warm-up: caches, images, pools
        rates = {n: await level(envs, n, args.episodes) for n in levels}
        bound = envs.factory.admission.bound
    print(f"async API, {env_name} on {sandbox}, {args.episodes} episodes per level, {args.workers} worker threads, "
          f"at most {bound} episodes executing at once")
    print(f"{'in flight':>10} {'episodes/s':>11} {'vs 1':>6}")
    base = rates.get(1)
    for n, rate in rates.items():
        ratio = f"{rate / base:5.2f}x" if base else "  -"
        print(f"{n:>10} {rate:>11.1f} {ratio:>6}")
    most = max(rates)
    if 8 in rates and most > 8:
        print(f"{most} in flight against 8: {rates[most] / rates[8]:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="sql", choices=("sql", "bash", "both"), help="both: SQL then Bash, one run")
    parser.add_argument("--sandbox")
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--levels", default="1,8,64")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--max-active", type=int, help="episodes executing at once (default: icplay's bound)")
    asyncio.run(main(parser.parse_args()))
