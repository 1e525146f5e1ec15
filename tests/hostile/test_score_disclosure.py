"""During an episode the solver learns the reward and nothing of how it was computed, whatever
the door: gymnasium, async, CallerLoop, the InterCode drop-in, serve-env, TRL.

The hack this guards against: under InterCode's per-turn protocol a turn's info carried the
breakdown, so a solver read Python's hidden tests from it and answered with a lookup table
(1.0, strictly solved, without solving). Here a solver that reads every string of every info
it gets finds no test, and the SQL and Bash golds' row counts and file names are not sent."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, Iterator

import pytest

from icplay.driver.external import CallerLoop
from icplay.tasks.registry import load_tasks, task_sets

# what tells how a reward was computed: never a key of what a caller receives
SCORING_KEYS = {"breakdown", "gold_output", "strict", "reasons", "tests", "gold_count", "gold_rows", "rows_matched",
                "shared", "iou", "missing", "extra", "different_content", "eval_obs", "p1", "p2", "p3", "cosine",
                "gold_function", "gold_exit_code"}


def strings_and_keys(value: Any) -> Iterator[tuple[str, str]]:
    """Every (key, string) pair inside ``value``, the way a solver combing its info sees them."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield "key", str(key)
            yield from strings_and_keys(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from strings_and_keys(item)
    elif isinstance(value, str):
        yield "text", value


def assert_nothing_of_the_score(info: Any, task) -> None:
    found = list(strings_and_keys(info))
    keys = {text for kind, text in found if kind == "key"}
    assert not keys & SCORING_KEYS, (keys & SCORING_KEYS, info)
    texts = [text for kind, text in found if kind == "text"]
    for secret in [task.gold, *[str(t) for t in task.extra.get("tests") or []]]:
        assert not any(secret.strip() in text for text in texts if secret.strip()), (secret, info)


def harvested_tests(infos: list[Any], function: str) -> dict[str, str]:
    """A lookup table, args -> expected, from every ``assert f(ARGS) == EXPECTED`` in the infos."""
    table = {}
    for info in infos:
        for _, text in strings_and_keys(info):
            for args, expected in re.findall(rf"assert {function}\((.*)\) == (.+)", text):
                table[args] = expected.strip()
    return table


def lookup_solver(env, task) -> tuple[float, dict[str, str]]:
    """Probe once, read the info, answer with a table of what the tests expect."""
    name = re.match(r"def (\w+)\(", task.gold).group(1)
    env.reset(options={"task": task.id})
    _, _, _, _, info = env.step(f"def {name}(*args):\n    return None")
    table = harvested_tests([info], name)
    entries = ", ".join(f"repr(({args},)): ({expected})" for args, expected in table.items())
    _, reward, terminated, _, _ = env.step(f"def {name}(*args):\n    return {{{entries}}}.get(repr(args))")
    return reward, table


@pytest.mark.bwrap
def test_a_lookup_table_read_from_the_info_does_not_solve_python(bwrap_ready, tmp_path):
    gym = pytest.importorskip("icplay.gym.env")
    task = next(t for t in load_tasks("python") if t.id == "py-01")
    env = gym.IcplayEnv("python", sandbox="bwrap", protocol="intercode", save_dir=tmp_path)
    try:
        reward, table = lookup_solver(env, task)
        assert table == {} and reward < 1.0, (table, reward)
        traj = env.trajectory
        assert traj.turns[0].info.get("strict") is not None       # the breakdown is kept for after
    finally:
        env.close()
    saved = json.loads(next(tmp_path.rglob("*.json")).read_text())
    assert saved["turns"][0]["reward"] is not None


def _sql_task():
    return next(t for t in load_tasks("sql") if t.id == "bookshop-01")


@pytest.mark.parametrize("protocol", ["intercode", "agent"])
def test_caller_loop_and_gym_say_the_reward_only(protocol):
    gym = pytest.importorskip("icplay.gym.env")
    task = _sql_task()
    env = gym.IcplayEnv("sql", sandbox="sqlite", protocol=protocol)
    try:
        _, info = env.reset(options={"task": task.id})
        infos = [env.step("SELECT title FROM books LIMIT 1")[4]]
        observation, reward, terminated, _, info = env.step(task.gold)
        infos.append(info)
        if not terminated:
            observation, reward, terminated, _, info = env.step("submit")
            infos.append(info)
        assert terminated and reward == 1.0
        assert info["solved"] is True and info["reward"] == 1.0 and "strictly_solved" in info
        for info in infos:
            assert_nothing_of_the_score(info, task)
        assert env.trajectory.breakdown and env.trajectory.gold_output   # kept for after the episode
    finally:
        env.close()


def test_async_says_the_reward_only():
    from icplay.aio import AsyncEnvs

    task = _sql_task()

    async def episode() -> list[Any]:
        async with AsyncEnvs("sql", sandbox="sqlite", protocol="intercode") as envs:
            env = envs.make()
            await env.reset(task.id)
            first = await env.step("SELECT COUNT(*) FROM books")
            last = await env.step(task.gold)
            assert last.done and last.reward == 1.0
            return [first.info, last.info]

    for info in asyncio.run(episode()):
        assert_nothing_of_the_score(info, task)


def test_the_intercode_drop_in_says_the_reward_only():
    from icplay.compat.intercode import SqlEnv

    path = next(s.path for s in task_sets() if s.env == "sql" and s.name == "sql")
    env = SqlEnv("docker-env-sql", data_path=str(path), sandbox="sqlite")
    try:
        index = next(i for i in range(len(env.data_loader)) if env.data_loader.get(i).get("id") == "bookshop-01")
        env.reset(index)
        _, _, _, step_info = env.step(env.gold)
        _, reward, done, info = env.step("submit")
        assert done and reward == 1.0 and info["reward"] == 1.0
        task = _sql_task()
        for given in (step_info, info):
            assert_nothing_of_the_score(given, task)
        assert env.loop.trajectory.breakdown   # kept for after the episode
    finally:
        env.close()


def test_serve_env_says_the_reward_only():
    pytest.importorskip("openenv.core")
    from starlette.testclient import TestClient

    from icplay.serve.openenv import make_app

    task = _sql_task()
    with TestClient(make_app("sql", "sqlite", protocol="intercode"), base_url="http://127.0.0.1") as client:
        with client.websocket_connect("ws://127.0.0.1/ws") as ws:
            ws.send_text(json.dumps({"type": "reset", "data": {"task": task.id}}))
            ws.receive_text()
            answers = []
            for code in ("SELECT COUNT(*) FROM books", task.gold):
                ws.send_text(json.dumps({"type": "step", "data": {"code": code}}))
                answers.append(json.loads(ws.receive_text()))
        assert answers[-1]["data"]["done"] and answers[-1]["data"]["reward"] == 1.0
        assert answers[-1]["data"]["observation"]["solved"] is True
        http = client.post("/step", json={"action": {"task": task.id, "code": task.gold, "then": ["submit"]}}).json()
    for answer in [*answers, http]:
        assert_nothing_of_the_score(answer, task)


def test_trl_tools_say_the_reward_only():
    from icplay.trl import environment_class

    task = _sql_task()
    cls = environment_class("sql", sandbox="sqlite")
    env = cls()
    try:
        texts = [env.reset(task=task.id), env.run(task.gold), env.submit()]
        assert env.get_reward() == 1.0
        for text in texts:
            assert_nothing_of_the_score(text, task)
    finally:
        env._close()
        cls.shared.close()


def test_a_watched_agents_prompt_never_holds_the_strict_reasons():
    """The model reads its turns' outputs and rewards; the strict verdict's reasons (a gold's
    changed file names, its empty result) stay out of its prompt."""
    from icplay.agents.context import ContextLimits
    from icplay.agents.strategies import exchanges
    from icplay.episode import Trajectory, Turn

    task = _sql_task()
    reasons = ["testbed/gold-only-file.txt: the gold's run changed it (??), the solver did not"]
    turn = Turn(index=0, author="agent", action="SELECT 1", observation="[(1,)]", reward=0.2,
                info={"strict": {"solved": False, "reasons": reasons}})
    traj = Trajectory(task=task.to_dict() if hasattr(task, "to_dict") else {}, env="sql", sandbox="sqlite",
                      turns=[turn])
    text = json.dumps([ex.messages() for ex in exchanges(traj, task, "tryagain", ContextLimits())])
    assert "Reward: 0.2" in text and "gold-only-file" not in text


def test_caller_loop_itself_says_the_reward_only():
    """The loop every library door stands on: its per-turn and final info."""
    task = _sql_task()
    loop = CallerLoop("sql", "sqlite", protocol="intercode")
    try:
        loop.reset(task)
        infos = [loop.step("SELECT COUNT(*) FROM books").info]
        last = loop.step(task.gold)
        assert last.terminated and last.reward == 1.0 and last.info["solved"] is True
        for info in [*infos, last.info]:
            assert_nothing_of_the_score(info, task)
        assert loop.trajectory.turns[-1].info["strict"]["solved"] is True   # kept in the trajectory
    finally:
        loop.close()
