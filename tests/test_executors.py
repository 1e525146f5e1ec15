"""The executor seam (issue 13): plain specs that cross a process boundary, one unit of work
``run_episode(task, spec)``, and the local, async and Ray executors running it (Ray in
tests/test_ray.py). Real SQLite and a real Bash sandbox (bwrap)."""

from __future__ import annotations

import asyncio
import pickle
import subprocess
import sys

import pytest

from icplay.agents.protocols import Limits
from icplay.executors import EnvSpec, FatalEpisodeError, PolicySpec, RunSpec, run_episode
from icplay.executors.aio import run_episodes
from icplay.executors.local import Runner
from icplay.store import TrajectoryStore
from icplay.tasks.registry import load_tasks


def gold_sql() -> RunSpec:
    return RunSpec(EnvSpec("sql", "sqlite"), PolicySpec("gold"), "agent", Limits(max_turns=3), {"kind": "gold"})


def test_a_spec_survives_a_process_boundary():
    """What Ray and a process pool do to it: pickle in one interpreter, build in another."""
    spec = gold_sql()
    task = load_tasks("sql")[0]
    code = ("import pickle, sys; from icplay.executors import run_episode; "
            "spec, task = pickle.loads(sys.stdin.buffer.read()); "
            "t = run_episode(task, spec); print(t.status, t.reward, t.policy['kind'])")
    done = subprocess.run([sys.executable, "-c", code], input=pickle.dumps((spec, task)), capture_output=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.decode().split() == ["submitted", "1.0", "gold"]


def test_run_episode_builds_what_the_spec_says_and_saves_every_turn(tmp_path):
    task = load_tasks("sql")[1]
    saved = []
    traj = run_episode(task, gold_sql(), save=lambda t: saved.append(len(t.turns)))
    assert traj.status == "submitted" and traj.reward == 1.0
    assert saved and saved[-1] == len(traj.turns)


def test_a_model_server_that_is_not_there_is_fatal_for_the_run():
    """No episode of the run can get past it: the executor must stop the run, not record
    one error per task."""
    spec = RunSpec(EnvSpec("sql", "sqlite"), PolicySpec("llm", model="m", base_url="http://127.0.0.1:9/v1",
                                                        api_key="k", retries=0, timeout=5),
                   "agent", Limits(max_turns=2), {"kind": "llm"})
    with pytest.raises(FatalEpisodeError, match=r"nothing is listening at .* \(connection refused\)"):
        run_episode(load_tasks("sql")[0], spec)


@pytest.mark.docker
def test_a_missing_image_is_this_episodes_error(docker_client):
    """A per-task image may be missing for one task only: an error trajectory, the run goes on."""
    spec = RunSpec(EnvSpec("bash", "docker", image="icplay-no-such-image:never"), PolicySpec("gold"), "agent",
                   Limits(max_turns=2), {"kind": "gold"})
    traj = run_episode(load_tasks("bash")[0], spec)
    assert traj.status == "error" and "icplay-no-such-image" in traj.error


def test_an_unknown_policy_kind_is_one_clear_error():
    with pytest.raises(ValueError, match="unknown policy kind"):
        PolicySpec("oracle").build("sql")


def test_the_local_runner_from_a_spec_solves_the_bundled_sql_set(tmp_path):
    tasks = load_tasks("sql")
    result = Runner.from_spec(tasks, gold_sql(), TrajectoryStore(tmp_path), jobs=2).run()
    assert len(result.trajectories) == len(tasks) and all(t.reward == 1.0 for t in result.trajectories)


def test_the_async_executor_runs_a_set_in_task_order_and_reuses_its_envs(tmp_path):
    tasks = load_tasks("sql")
    store = TrajectoryStore(tmp_path)
    trajs = asyncio.run(run_episodes(tasks, gold_sql(), concurrency=8, store=store))
    assert [t.task["id"] for t in trajs] == [t.id for t in tasks]
    assert all(t.status == "submitted" and t.reward == 1.0 for t in trajs)
    assert len(list(tmp_path.rglob("*.json"))) >= len(tasks)


@pytest.mark.bwrap
def test_the_async_executor_on_bash(bwrap_ready, tmp_path):
    tasks = load_tasks("bash")[:6]
    spec = RunSpec(EnvSpec("bash", "bwrap"), PolicySpec("gold"), "agent", Limits(max_turns=3), {"kind": "gold"})
    trajs = asyncio.run(run_episodes(tasks, spec, concurrency=3))
    assert [t.reward for t in trajs] == [1.0] * len(tasks)
