"""``icplay export atif``: every episode becomes an ATIF trajectory that the ``atif``
package's own pydantic models accept, with tool calls, observations, token usage, cost,
authors and interventions where ATIF has room for them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

atif = pytest.importorskip("atif", reason="the atif package is not installed (ci/test.sh installs it)")

from icplay.episode import AGENT, AGENT_EDITED, HUMAN, Trajectory, Turn  # noqa: E402
from icplay.formats.atif import atif_document, atif_lines  # noqa: E402
from icplay.library import CallerLoop  # noqa: E402
from icplay.tasks.registry import load_tasks  # noqa: E402


def mixed_episode() -> Trajectory:
    usage = {"prompt_tokens": 120, "completion_tokens": 30, "cost": 0.0015, "calls": 1}
    traj = Trajectory(task={"set": "sql", "id": "bookshop-01", "query": "List the poetry titles."}, env="sql",
                      sandbox="sqlite", policy={"kind": "llm", "model": "gpt-x", "usage": {
                          "prompt_tokens": 240, "completion_tokens": 60, "cost": 0.003, "calls": 2}})
    traj.turns = [
        Turn(0, AGENT, "SELECT 1", "1", 0, 1_700_000_000.0, 0.01, proposed="SELECT 1", thought="check the db",
             info={"usage": usage, "model": "gpt-x"}),
        Turn(1, AGENT_EDITED, "SELECT title FROM books", "Leaves", 0, 1_700_000_001.0, proposed="SELECT *",
             comment="only titles", info={"usage": usage}),
        Turn(2, HUMAN, "SELECT 2", "2", 0, 1_700_000_002.0, info={"notes": ["output cut at 100 lines"],
                                                                 "label": {"label": "good", "note": None,
                                                                           "author": "ann", "at": 1.0}}),
        Turn(3, AGENT, "", "", None, 1_700_000_003.0, proposed="DROP TABLE books", comment="no",
             info={"rejected": True}),
    ]
    traj.status, traj.reward, traj.breakdown = "submitted", 0.5, {"rows": "partial"}
    traj.strict = {"solved": False, "reasons": ["rows differ"]}
    return traj


def test_a_mixed_episode_maps_to_valid_atif():
    document = atif_document(mixed_episode())
    model = atif.Trajectory.model_validate(json.loads(atif_lines([mixed_episode()])))
    assert model.schema_version.startswith("ATIF-v") and model.agent.model_name == "gpt-x"
    sources = [step.source for step in model.steps]
    assert sources == ["user", "agent", "agent", "agent", "agent", "system"]   # the human acted: an acting step
    first = model.steps[1]
    assert first.tool_calls[0].function_name == "run" and first.tool_calls[0].arguments == {"code": "SELECT 1"}
    assert first.observation.results[0].content == "1" and first.observation.results[0].source_call_id == "call_0"
    assert (first.metrics.prompt_tokens, first.metrics.completion_tokens, first.metrics.cost_usd) == (120, 30, 0.0015)
    assert first.reasoning_content == "check the db"
    edited = model.steps[2]
    assert edited.extra["author"] == AGENT_EDITED and edited.extra["proposed"] == "SELECT *"
    assert edited.extra["comment"] == "only titles"
    human = model.steps[3]       # the action and its output in ATIF's own fields, no model call
    assert human.tool_calls[0].function_name == "run" and human.tool_calls[0].arguments == {"code": "SELECT 2"}
    assert human.observation.results[0].content == "2" and human.observation.results[0].source_call_id == "call_2"
    assert human.llm_call_count == 0 and human.metrics is None and human.reasoning_content is None
    assert human.extra["author"] == HUMAN and human.observation.results[0].extra == {"notes": ["output cut at 100 lines"]}
    assert human.extra["label"]["label"] == "good"
    rejected = model.steps[4]
    assert rejected.tool_calls is None and rejected.extra["rejected"] and rejected.message == "DROP TABLE books"
    submit = model.steps[5]
    assert submit.extra["reward"] == 0.5 and submit.extra["strict"]["reasons"] == ["rows differ"]
    assert model.final_metrics.total_prompt_tokens == 240 and model.final_metrics.total_cost_usd == 0.003
    assert document["extra"]["task"] == "sql/bookshop-01"


def test_played_episodes_export_through_the_command(tmp_path):
    tasks = load_tasks("sql")[:3]
    runner = CallerLoop("sql", "sqlite", save_dir=tmp_path / "runs")
    try:
        for task in tasks:
            runner.reset(task)
            runner.step(task.gold)
            runner.step("submit")
    finally:
        runner.close()
    out = tmp_path / "atif.jsonl"
    done = subprocess.run([sys.executable, "-m", "icplay.cli", "export", "atif", str(tmp_path / "runs"),
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = out.read_text().splitlines()
    assert len(lines) == 3
    for line in lines:
        model = atif.Trajectory.model_validate(json.loads(line))
        assert model.steps[-1].source == "system" and model.steps[-1].extra["reward"] == 1.0
        assert model.steps[1].tool_calls[0].arguments["code"] in {t.gold for t in tasks}
