"""Podman against Docker, in one run: the same sandbox code (``icplay/sandbox/docker.py``)
through each engine's API. A start (container made, filled, shells ready), a trivial
step in the persistent session, a recycle, and a whole Bash episode (reset, one action,
submit with reward) on each; medians and the Podman/Docker ratio.

Run: .venv/bin/python bench/bench_podman.py [--starts 5] [--n 100] [--episodes 6] [--rounds 3]
(needs Docker, Podman, and icplay-bash in both: ``icplay images build bash [--sandbox podman]``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from icplay.languages import make_env
from icplay.sandbox.registry import get, image_engine
from icplay.tasks.model import Task


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def measure(engine: str, starts: int, n: int, episodes: int) -> dict[str, float]:
    kind: Any = get(engine)
    client = image_engine(engine).client()
    start, step, recycle = [], [], []
    for _ in range(starts):
        box = kind.sandbox_class(client, "icplay-bash:latest")
        t0 = time.perf_counter()
        box.start()
        start.append(time.perf_counter() - t0)
        try:
            for _ in range(n):
                t0 = time.perf_counter()
                box.run("true")
                step.append(time.perf_counter() - t0)
            box.run("echo x > /testbed/x")
            t0 = time.perf_counter()
            if box.recycle():
                recycle.append(time.perf_counter() - t0)
        finally:
            box.close()
    env = make_env("bash", sandbox=engine)
    episode = []
    try:
        for i in range(episodes + 1):
            task = Task(id=f"p{i}", set="bench", env="bash", query="list", gold=f"ls /testbed | head -{i + 1}")
            t0 = time.perf_counter()
            env.reset(task)
            env.step(task.gold)
            env.submit()
            if i:   # the first episode waits for the pools to fill
                episode.append(time.perf_counter() - t0)
    finally:
        env.close()
    return {"start": median_ms(start), "step": median_ms(step), "recycle": median_ms(recycle) if recycle else 0.0,
            "episode": median_ms(episode)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--n", type=int, default=100, help="trivial steps per started sandbox")
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per engine")
    args = parser.parse_args()
    # the engines alternate, round by round, so that a change in the machine's load falls on both
    rounds: dict[str, list[dict[str, float]]] = {"docker": [], "podman": []}
    for _ in range(args.rounds):
        for engine in rounds:
            rounds[engine].append(measure(engine, args.starts, args.n, args.episodes))
    docker, podman = ({key: statistics.median(r[key] for r in rounds[e]) for key in rounds[e][0]}
                      for e in ("docker", "podman"))
    print(f"{'median ms':<10} {'docker':>9} {'podman':>9} {'podman/docker':>14}")
    for key in ("start", "step", "recycle", "episode"):
        ratio = podman[key] / docker[key] if docker[key] else float("nan")
        print(f"{key:<10} {docker[key]:9.1f} {podman[key]:9.1f} {ratio:13.2f}x")


if __name__ == "__main__":
    main()
