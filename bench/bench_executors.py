"""The three executors on the same batch: local threads (-j N), asyncio, and Ray (a local
cluster of two nodes, N actors), each running ``run_episode`` over one ``RunSpec``.

Run: .venv/bin/python bench/bench_executors.py [--env sql|bash] [--sandbox S] [--jobs 2]
     [--repeat 2] [--no-ray]

The batch: the bundled set's tasks ``--repeat`` times, gold policy (every episode must
score 1.0), agent protocol. A warm-up episode per executor is not timed; Ray's cluster
start and actor creation are timed separately from its batch. Printed: seconds and
episodes/s per executor and each one's ratio to the local runner, all in this one run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from icplay.agents.protocols import Limits  # noqa: E402
from icplay.executors import EnvSpec, PolicySpec, RunSpec  # noqa: E402
from icplay.executors.aio import run_episodes  # noqa: E402
from icplay.executors.local import Runner  # noqa: E402
from icplay.store import TrajectoryStore  # noqa: E402
from icplay.tasks.registry import load_tasks  # noqa: E402


def batch(env: str, repeat: int) -> list:
    tasks = load_tasks(env)
    out = []
    for r in range(repeat):   # distinct ids, so a store keeps every episode
        for t in tasks:
            copy = type(t).from_dict({**t.to_dict(), "id": f"{t.id}-r{r}"})
            out.append(copy)
    return out


def check(trajs: list, n: int, who: str) -> None:
    good = [t for t in trajs if t.status == "submitted" and t.reward == 1.0]
    if len(good) != n:
        bad = next((t for t in trajs if t not in good), None)
        raise SystemExit(f"{who}: {len(good)}/{n} golds scored 1.0; e.g. {bad and (bad.status, bad.error)}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="sql", choices=("sql", "bash"))
    p.add_argument("--sandbox")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--no-ray", action="store_true")
    args = p.parse_args()
    sandbox = args.sandbox or {"sql": "sqlite", "bash": "docker"}[args.env]
    spec = RunSpec(EnvSpec(args.env, sandbox), PolicySpec("gold"), "agent", Limits(max_turns=3), {"kind": "gold"})
    tasks = batch(args.env, args.repeat)
    n = len(tasks)
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="icplay-bench-exec-") as tmp:
        Runner.from_spec(tasks[:1], spec, TrajectoryStore(Path(tmp) / "warm")).run()
        started = time.monotonic()
        result = Runner.from_spec(tasks, spec, TrajectoryStore(Path(tmp) / "local"), jobs=args.jobs).run()
        results[f"local -j {args.jobs}"] = time.monotonic() - started
        check(result.trajectories, n, "local")

        asyncio.run(run_episodes(tasks[:1], spec, concurrency=1))
        started = time.monotonic()
        trajs = asyncio.run(run_episodes(tasks, spec, concurrency=args.jobs,
                                         store=TrajectoryStore(Path(tmp) / "aio")))
        results[f"asyncio, {args.jobs} in flight"] = time.monotonic() - started
        check(trajs, n, "asyncio")

        if not args.no_ray:
            import ray
            from ray.cluster_utils import Cluster

            from icplay.executors.ray import RayRunner

            os.environ["PYTHONPATH"] = str(ROOT)
            started = time.monotonic()
            cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
            cluster.add_node(num_cpus=1)
            cluster.wait_for_nodes()
            setup = time.monotonic() - started
            try:
                runner = RayRunner(tasks[:1], spec, TrajectoryStore(Path(tmp) / "ray-warm"),
                                   address=cluster.address, jobs=args.jobs)
                runner.run()
                started = time.monotonic()
                runner = RayRunner(tasks, spec, TrajectoryStore(Path(tmp) / "ray"), address=cluster.address,
                                   jobs=args.jobs)
                result = runner.run()
                results[f"ray, 2 nodes, {args.jobs} actors"] = time.monotonic() - started
                check(result.trajectories, n, "ray")
                print(f"ray: cluster start {setup:.1f} s (not counted); episodes per node {runner.nodes}")
            finally:
                ray.shutdown()
                cluster.shutdown()
    base = next(iter(results.values()))
    print(f"{n} gold episodes of {args.env} on {sandbox}, {os.cpu_count()} cores")
    for name, secs in results.items():
        print(f"  {name:<28} {secs:7.2f} s  {n / secs:7.1f} episodes/s  {base / secs:5.2f}x local")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
