"""The InterCode drop-in: a script written for InterCode's API (reset(i), step(gold),
step("submit")) scores 1.0 on icplay through ``icplay.compat.intercode``."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

import pytest

from icplay.compat.intercode import ACTION_EXEC, BashEnv, SqlEnv
from icplay.paths import data_dir


def preprocess_sql(record: Dict) -> str:  # InterCode's experiments pass this one
    return f"use {record['db']}"


def intercode_script(env) -> list[tuple[int, float]]:
    """What InterCode's gold-check scripts do; returns the tasks not scoring 1.0."""
    missed = []
    for index in range(len(env.data_loader)):
        env.reset(index)
        assert env.query == env.data_loader.get(index)["query"]
        observation, reward, done, info = env.step(env.gold)
        assert (reward, done) == (0, False) and info[ACTION_EXEC] is True
        observation, reward, done, info = env.step("submit")
        assert done
        if reward != 1.0:
            missed.append((index, reward))
    return missed


def test_bundled_sql_set_scores_one():
    env = SqlEnv("docker-env-sql", data_path=str(data_dir() / "sql/tasks.json"), preprocess=preprocess_sql,
                 verbose=False)
    try:
        assert len(env.data_loader) > 10
        assert intercode_script(env) == []
    finally:
        env.close()


@pytest.mark.shared
@pytest.mark.slow
def test_spider_scores_one(shared_intercode: Path):
    env = SqlEnv("docker-env-sql", data_path=str(shared_intercode / "sql/spider/ic_spider_dev.json"),
                 preprocess=preprocess_sql)
    try:
        assert len(env.data_loader) == 1034
        assert intercode_script(env) == []
    finally:
        env.close()


def test_sql_observations_are_intercodes():
    env = SqlEnv("docker-env-sql", data_path=str(data_dir() / "sql/tasks.json"), preprocess=preprocess_sql)
    try:
        observation, info = env.reset(0)
        assert observation is None and info[ACTION_EXEC]   # "use db" returns no result set, as in InterCode
        observation, reward, done, info = env.step("SELECT 1, 'a'")
        assert observation == [(1, "a")] and env.observation == observation
        observation, _, _, info = env.step("SELEC nonsense")
        assert observation.startswith("Error executing query: ") and info[ACTION_EXEC] is False
        assert env.trajectory[0] == ("SELECT 1, 'a'", [(1, "a")])
        observation, reward, done, info = env.step("submit")
        assert done and reward == 0.0 and info["reward"] == 0.0 and info["eval_obs"]
        assert env.get_available_actions() is None
    finally:
        env.close()


def test_bad_input_says_what_is_wrong(tmp_path):
    with pytest.raises(OSError, match="Invalid file path"):
        SqlEnv("docker-env-sql", data_path=str(tmp_path / "nope.json"))
    bad = tmp_path / "bad.json"
    bad.write_text('[{"query": "q"}]')
    with pytest.raises(ValueError, match="'gold' and 'query'"):
        SqlEnv("docker-env-sql", data_path=str(bad))
    env = SqlEnv("docker-env-sql", data_path=str(data_dir() / "sql/tasks.json"))
    with pytest.raises(IndexError, match="out of range"):
        env.reset(10_000)
    env.close()


@pytest.mark.bwrap
def test_bash_golds_score_one_on_bwrap(bwrap_ready, tmp_path):
    env = BashEnv("intercode-bash", data_path=str(data_dir() / "bash/tasks.json"), sandbox="bwrap",
                  traj_dir=str(tmp_path))
    try:
        for index in (0, 5, 40):
            env.reset(index)
            observation, reward, done, info = env.step(env.gold)
            assert isinstance(observation, str) and not done
            observation, reward, done, info = env.step("submit")
            assert (reward, done) == (1.0, True), info
        env.reset(1)
        observation, *_ = env.step("echo wrong")
        assert observation == "wrong\n"
        assert env.step("submit")[1] < 1.0
    finally:
        env.close()
    assert len(list(tmp_path.rglob("*.json"))) == 4
