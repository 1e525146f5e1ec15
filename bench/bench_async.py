"""The async API: episodes per second at 1, 8 and 64 in flight, and what one episode costs.

Run: .venv/bin/python bench/bench_async.py [--env sql,bash] [--serve] [--episodes 256] [--levels 1,8,64]
     [--rounds 3] [--workers 16] [--max-active N] [--sandbox S]

Each episode, as a trainer plays it: a new env (``envs.make()``), reset to a task of the
bundled set, its gold, submit (the reward is checked to be 1.0), close. For each env
(default: SQL on SQLite, then Bash on Docker, one run), from one event loop over one
``AsyncEnvs`` (one thread pool of ``--workers``, one warm pool), after a warm-up round:

- ``--rounds`` rounds, each running ``--episodes`` episodes at every level with that many
  in flight at once; printed: the median episodes/s per level over the rounds (levels
  interleaved, so load from elsewhere hits them alike), its ratio to 1 in flight and of the
  most in flight to 8;
- the cost of one episode at 1 in flight, median over ``--episodes`` episodes: creation to
  close, and its parts (make + reset, the gold step, submit, close).

``--serve`` also serves the first env with ``icplay serve-env`` (its own process) and plays
the same episodes over OpenEnv's WebSocket client, one session per episode in flight.
The load average is printed with the figures: the machine may be shared.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time

from icplay.aio import AsyncEnvs
from icplay.languages import get

PARTS = ("make + reset", "gold step", "submit", "close")


async def episode(envs: AsyncEnvs, task, parts: dict[str, list[float]] | None = None) -> None:
    marks = [time.perf_counter()]
    env = envs.make()
    try:
        await env.reset(task)
        marks.append(time.perf_counter())
        for action in get(envs.env_name).gold(task)[:-1]:
            await env.step(action)
        marks.append(time.perf_counter())
        step = await env.step("submit")
        marks.append(time.perf_counter())
        if step.reward != 1.0:
            raise SystemExit(f"{task.key}: gold scored {step.reward}")
    finally:
        await env.close()
    marks.append(time.perf_counter())
    if parts is not None:
        for name, start, end in zip(PARTS, marks, marks[1:]):
            parts[name].append(end - start)
        parts["creation to close"].append(marks[-1] - marks[0])


async def level(envs: AsyncEnvs, in_flight: int, episodes: int) -> float:
    tasks = envs.tasks
    gate = asyncio.Semaphore(in_flight)

    async def gated(i: int) -> None:
        async with gate:
            await episode(envs, tasks[i % len(tasks)])

    started = time.perf_counter()
    await asyncio.gather(*(gated(i) for i in range(episodes)))
    return episodes / (time.perf_counter() - started)


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def report_rates(title: str, rounds: list[dict[int, float]]) -> None:
    print(title)
    print(f"{'in flight':>10} {'episodes/s':>11} {'vs 1':>6}   rounds")
    rates = {n: statistics.median(r[n] for r in rounds) for n in rounds[0]}
    base = rates.get(1)
    for n, rate in rates.items():
        ratio = f"{rate / base:5.2f}x" if base else "  -"
        each = " ".join(f"{r[n]:.1f}" for r in rounds)
        print(f"{n:>10} {rate:>11.1f} {ratio:>6}   {each}")
    most = max(rates)
    if 8 in rates and most > 8:
        print(f"{most} in flight against 8: {rates[most] / rates[8]:.2f}x")


async def measure(args, env_name: str, sandbox: str) -> None:
    levels = [int(x) for x in args.levels.split(",")]
    async with AsyncEnvs(env_name, sandbox=sandbox, max_workers=args.workers, max_active=args.max_active) as envs:
        await level(envs, max(levels), max(args.episodes, max(levels)))  # warm-up: caches, images, pools
        before = load()
        rounds = [{n: await level(envs, n, args.episodes) for n in levels} for _ in range(args.rounds)]
        parts: dict[str, list[float]] = {name: [] for name in (*PARTS, "creation to close")}
        for i in range(args.episodes):
            await episode(envs, envs.tasks[i % len(envs.tasks)], parts)
        bound = envs.factory.admission.bound
    report_rates(f"\nasync API, {env_name} on {sandbox}: {args.episodes} episodes per level and round, "
                 f"{args.workers} worker threads, at most {bound} episodes executing at once "
                 f"({before}; after: {load()})", rounds)
    print("one episode at 1 in flight (median, p90):")
    for name, samples in parts.items():
        ordered = sorted(samples)
        p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
        print(f"  {name:<18} {statistics.median(samples) * 1000:8.2f} ms  (p90 {p90 * 1000:.2f})")


# --- serve-env over OpenEnv's WebSocket -----------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(env_name: str, sandbox: str, sessions: int) -> tuple[subprocess.Popen, str]:
    import requests

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "icplay.cli", "serve-env", "--env", env_name, "--sandbox", sandbox,
                               "--port", str(port), "--max-envs", str(sessions)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and server.poll() is None:
        try:
            if requests.get(f"{url}/health", timeout=5).status_code == 200:
                return server, url
        except requests.ConnectionError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit(f"icplay serve-env did not come up at {url}")


async def served_level(url: str, env_name: str, tasks, sessions: int, episodes: int) -> float:
    from openenv.core.generic_client import GenericEnvClient

    spec = get(env_name)

    async def session(share) -> None:
        async with GenericEnvClient(base_url=url, message_timeout_s=300) as client:
            for task in share:
                await client.reset(task=task.id)
                for action in spec.gold(task):
                    result = await client.step({"code": action})
                if result.reward != 1.0:
                    raise SystemExit(f"{task.key}: gold scored {result.reward} over serve-env")

    chosen = [tasks[i % len(tasks)] for i in range(episodes)]
    started = time.perf_counter()
    await asyncio.gather(*(session(chosen[i::sessions]) for i in range(sessions)))
    return episodes / (time.perf_counter() - started)


async def measure_served(args, env_name: str, sandbox: str) -> None:
    from icplay.library import load_task_list

    levels = [n for n in (int(x) for x in args.levels.split(",")) if n <= args.serve_sessions]
    tasks = load_task_list(env_name, env_name)
    server, url = start_server(env_name, sandbox, max(levels))
    try:
        await served_level(url, env_name, tasks, max(levels), max(args.episodes // 4, max(levels)))   # warm-up
        before = load()
        rounds = [{n: await served_level(url, env_name, tasks, n, args.episodes // 4) for n in levels}
                  for _ in range(args.rounds)]
    finally:
        server.terminate()
        server.wait(60)
    report_rates(f"\nserve-env, {env_name} on {sandbox}, over OpenEnv's WebSocket client: {args.episodes // 4} "
                 f"episodes per level and round, one session per episode in flight ({before}; after: {load()})",
                 rounds)


async def main(args) -> None:
    envs = args.env.split(",") if args.env != "both" else ["sql", "bash"]
    for env_name in envs:
        await measure(args, env_name, args.sandbox or ("sqlite" if env_name == "sql" else "docker"))
    if args.serve:
        await measure_served(args, envs[0], args.sandbox or ("sqlite" if envs[0] == "sql" else "docker"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="sql,bash", help="envs to measure, in order (sql, bash; both = sql,bash)")
    parser.add_argument("--sandbox", help="default: sqlite for sql, docker for bash")
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--levels", default="1,8,64")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over all levels; the median is printed")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--max-active", type=int, help="episodes executing at once (default: icplay's bound)")
    parser.add_argument("--serve", action="store_true", help="also over serve-env's WebSocket (the first env)")
    parser.add_argument("--serve-sessions", type=int, default=8, help="most WebSocket sessions at once")
    asyncio.run(main(parser.parse_args()))
