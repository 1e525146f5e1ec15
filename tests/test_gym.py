"""icplay's gymnasium envs: registered ids, gymnasium's env checker, episodes through
gym.make on SQLite, bwrap and Docker, rewards and close()."""

from __future__ import annotations

import json

import pytest

gym = pytest.importorskip("gymnasium")
from gymnasium.utils.env_checker import check_env  # noqa: E402

import icplay.gym  # noqa: E402,F401
from icplay.tasks.registry import load_tasks  # noqa: E402

SQL_TASKS = load_tasks("sql")
BASH_TASKS = load_tasks("bash")


def test_ids_are_registered():
    assert {"icplay/Bash-v0", "icplay/SQL-v0"} <= set(gym.registry)


def test_env_checker_sql():
    env = gym.make("icplay/SQL-v0", sandbox="sqlite")
    try:
        check_env(env.unwrapped)
    finally:
        env.close()


@pytest.mark.bwrap
def test_env_checker_bash_on_bwrap(bwrap_ready):
    env = gym.make("icplay/Bash-v0", sandbox="bwrap")
    try:
        check_env(env.unwrapped)
    finally:
        env.close()


def test_sql_gold_then_submit_scores_one_and_saves(tmp_path):
    env = gym.make("icplay/SQL-v0", sandbox="sqlite", save_dir=tmp_path)
    try:
        for task in SQL_TASKS[:5]:
            query, info = env.reset(options={"task": task.id})
            assert query == task.query and info["task_id"] == task.id
            observation, reward, terminated, truncated, info = env.step(task.gold)
            assert (reward, terminated, truncated) == (0.0, False, False)
            assert info["error"] is None
            observation, reward, terminated, truncated, info = env.step("submit")
            assert (reward, terminated, truncated) == (1.0, True, False)
            assert info["solved"] is True and "breakdown" not in info   # the breakdown: env.trajectory
            with pytest.raises(RuntimeError, match="ended"):
                env.step("SELECT 1")
    finally:
        env.close()
    saved = sorted(tmp_path.rglob("*.json"))
    assert len(saved) == 5
    assert json.loads(saved[0].read_text())["reward"] == 1.0


def test_sql_wrong_answer_scores_below_one():
    env = gym.make("icplay/SQL-v0", sandbox="sqlite")
    try:
        env.reset(options={"task": SQL_TASKS[0].id})
        observation, reward, *_ = env.step("SELECT 1")
        assert observation == "[(1,)]"
        _, reward, terminated, _, info = env.step("submit")
        assert terminated and reward < 1.0 and info["solved"] is False and "breakdown" not in info
        assert env.unwrapped.trajectory.breakdown["gold_count"] > 1     # kept for after the episode
    finally:
        env.close()


def test_intercode_protocol_rewards_every_turn_and_ends_when_solved():
    env = gym.make("icplay/SQL-v0", sandbox="sqlite", protocol="intercode")
    try:
        env.reset(options={"task": SQL_TASKS[1].id})
        _, reward, terminated, _, info = env.step("SELECT 1")
        assert not terminated and reward < 1.0 and "breakdown" not in info and "strict" not in info
        _, reward, terminated, _, info = env.step(SQL_TASKS[1].gold)
        assert reward == 1.0 and terminated
    finally:
        env.close()


def test_seeded_reset_picks_the_same_task_and_bad_options_say_so(tmp_path):
    env = gym.make("icplay/SQL-v0", sandbox="sqlite")
    try:
        first, _ = env.reset(seed=7)
        again, _ = env.reset(seed=7)
        assert first == again
        with pytest.raises(ValueError, match="no task 'nope'"):
            env.reset(options={"task": "nope"})
        task_file = tmp_path / "mine.json"
        task_file.write_text(json.dumps([{"id": "one", "query": "one row", "gold": "SELECT 1",
                                          "db": SQL_TASKS[0].db,
                                          "databases": SQL_TASKS[0].extra["databases"]}]))
        query, info = env.reset(options={"tasks": str(task_file)})
        assert (query, info["task_id"]) == ("one row", "one")
    finally:
        env.close()


def test_max_episode_steps_truncates():
    env = gym.make("icplay/SQL-v0", sandbox="sqlite", max_episode_steps=2)
    try:
        env.reset(options={"task": SQL_TASKS[0].id})
        assert env.step("SELECT 1")[3] is False
        assert env.step("SELECT 2")[3] is True
    finally:
        env.close()


@pytest.mark.bwrap
def test_bash_gold_on_bwrap_and_close_removes_the_sandbox(bwrap_ready):
    env = gym.make("icplay/Bash-v0", sandbox="bwrap")
    task = BASH_TASKS[0]
    env.reset(options={"task": task.id})
    sandbox = env.unwrapped.loop.env.sandbox
    folder = sandbox.episode_dir
    assert folder.is_dir()
    env.step(task.gold)
    _, reward, terminated, _, info = env.step("submit")
    assert (reward, terminated) == (1.0, True)
    env.close()
    assert not folder.exists()
    env.close()  # twice is fine


@pytest.mark.docker
def test_bash_on_docker_close_removes_the_container(bash_image, docker_client):
    env = gym.make("icplay/Bash-v0", sandbox="docker")
    task = BASH_TASKS[1]
    env.reset(options={"task": task.id})
    container_id = env.unwrapped.loop.env.sandbox.container.id
    env.step(task.gold)
    assert env.step("submit")[1] == 1.0
    env.close()
    import docker.errors

    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(container_id)
