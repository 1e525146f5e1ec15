"""``icplay run --ray``: the bundled SQL set with the gold policy on a real local Ray
cluster of two nodes (``ray.cluster_utils.Cluster``) is solved 100%, with trajectories
from both nodes saved in the local --out folder, and a rerun resumes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def two_nodes():
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(ROOT)    # the nodes' workers import this checkout's icplay
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def icplay_run(address: str, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "icplay", "run", "sql", "--tasks", "sql", "--policy", "gold",
                           "--sandbox", "sqlite", "--ray", address, "-j", "2", "--out", str(out), "--json",
                           *extra], cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.slow
def test_gold_sql_on_two_ray_nodes(two_nodes, tmp_path):
    out = tmp_path / "out"
    done = icplay_run(two_nodes.address, out)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["episodes"] == summary["solved"] == summary["played"] == 44
    assert len(summary["nodes"]) == 2 and sum(summary["nodes"].values()) == 44
    saved = [json.loads(p.read_text()) for p in out.rglob("*.json") if p.name != "run.json"]
    trajectories = [t for t in saved if "turns" in t]
    assert len(trajectories) == 44 and all(t["reward"] == 1.0 for t in trajectories)
    assert {t["policy"]["node"] for t in trajectories} == set(summary["nodes"])
    assert "[44/44]" in done.stderr

    again = icplay_run(two_nodes.address, out)      # resumable as a local run
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["resumed"] == 44


def test_ray_without_a_cluster_says_so(tmp_path):
    done = icplay_run("127.0.0.1:1", tmp_path / "out")
    assert done.returncode != 0
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_async_api_in_ray_actors_on_two_nodes(two_nodes):
    """A trainer's rollout workers as Ray actors: each async actor plays many SQL episodes
    at once through icplay.aio (one event loop, the actor's own warm envs), one actor per
    node; every gold episode scores 1.0."""
    ray.init(address=two_nodes.address)
    try:
        @ray.remote(num_cpus=1)
        class Rollouts:
            """Defined here, so Ray ships the class itself (the test module is not importable
            on the nodes); icplay is, through PYTHONPATH."""

            def __init__(self):
                from icplay.aio import AsyncEnvs

                self.envs = AsyncEnvs("sql", sandbox="sqlite", tasks="sql", max_workers=4)

            async def play(self, task_ids: list[str]) -> tuple[str, list[tuple[str, float]]]:
                import asyncio

                by_id = {t.id: t for t in self.envs.tasks}

                async def episode(task_id: str) -> tuple[str, float]:
                    env = self.envs.make()
                    await env.reset(task_id)
                    await env.step(by_id[task_id].gold)
                    step = await env.step("submit")
                    await env.close()
                    return task_id, step.reward

                rewards = await asyncio.gather(*(episode(t) for t in task_ids))
                return ray.get_runtime_context().get_node_id(), list(rewards)

            async def close(self) -> None:
                await self.envs.aclose()

        from icplay.tasks.registry import load_tasks

        ids = [t.id for t in load_tasks("sql")]
        actors = [Rollouts.options(scheduling_strategy="SPREAD").remote() for _ in range(2)]
        results = ray.get([actor.play.remote(ids[i::2]) for i, actor in enumerate(actors)], timeout=600)
        ray.get([actor.close.remote() for actor in actors], timeout=120)
        assert len({node for node, _ in results}) == 2                  # one actor on each node
        played = [pair for _, pairs in results for pair in pairs]
        assert sorted(t for t, _ in played) == sorted(ids)
        assert all(reward == 1.0 for _, reward in played), [p for p in played if p[1] != 1.0]
    finally:
        ray.shutdown()
