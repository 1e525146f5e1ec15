"""``icplay.trl``: classes for TRL's ``environment_factory``. Their tools are exactly what
TRL would offer the model (every public method but reset and get_reward), each with a
schema transformers' ``get_json_schema`` derives; a gold episode through the tools earns
get_reward() 1.0; an instance dropped gives its sandbox back."""

from __future__ import annotations

import gc
import inspect

import pytest

from icplay.trl import environment_class
from icplay.tasks.registry import load_tasks

LANGUAGES = ("bash", "sql", "python", "ctf")


def tool_names(cls) -> set[str]:
    """The methods TRL turns into tools (its rule: public functions of the class, but
    reset and get_reward)."""
    return {name for name, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
            if not name.startswith("_") and name not in ("reset", "get_reward")}


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_tool_has_a_schema_transformers_derives(language):
    get_json_schema = pytest.importorskip("transformers.utils", reason="transformers is not installed").get_json_schema
    cls = environment_class(language)
    assert tool_names(cls) == {"run", "submit"}
    instance = cls()
    run = get_json_schema(instance.run)["function"]
    assert run["name"] == "run" and run["parameters"]["required"] == ["code"]
    assert run["parameters"]["properties"]["code"]["type"] == "string"
    assert run["parameters"]["properties"]["code"]["description"] and run["description"]
    submit = get_json_schema(instance.submit)["function"]
    assert submit["parameters"]["properties"]["answer"]["type"] == "string"
    assert "answer" not in submit["parameters"].get("required", [])
    assert cls.__name__.endswith("Environment") and callable(instance.get_reward)


def test_a_gold_episode_through_the_tools_earns_reward_one():
    cls = environment_class("sql", sandbox="sqlite")
    task = load_tasks("sql")[0]
    env = cls()
    assert env.get_reward() == 0.0
    prompt = env.reset(prompt=[{"role": "user", "content": "solve"}], task=task.id)
    assert prompt.startswith(task.query) and "submit" in prompt
    assert env.run(task.gold)
    assert env.submit().startswith("Submitted. Reward: 1.00")
    assert env.get_reward() == 1.0
    with pytest.raises(ValueError, match="the episode was already submitted"):
        env.submit()
    env.reset(task=task.id)                 # TRL reuses instances: a reset starts over
    assert env.get_reward() == 0.0
    env.run("SELECT 1")
    env.submit()
    assert env.get_reward() < 1.0
    with pytest.raises(ValueError, match="no 'task' column"):
        cls().reset(prompt="x")
    with pytest.raises(ValueError, match="no task 'nope'"):
        cls().reset(task="nope")
    cls.shared.close()


def test_a_dropped_instance_gives_its_sandbox_back(bwrap_ready):
    cls = environment_class("bash", sandbox="bwrap")
    task = load_tasks("bash")[0]
    try:
        env = cls()
        env.reset(task=task.id)
        env.run("true")
        pool = cls.shared.factory._shared.sandboxes.pool(task)
        assert pool._in_use == 1
        del env
        gc.collect()
        assert pool._in_use == 0
    finally:
        cls.shared.close()
