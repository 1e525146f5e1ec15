"""Language specs: one registry, declared capabilities, notes in StepResult.info."""

from __future__ import annotations

import subprocess
import sys

import pytest

from icplay.envs.base import HAS_CWD, HAS_SCHEMA, STREAMS_OUTPUT, observation_parts, shown_observation
from icplay.languages import UnknownLanguage, checked_sandbox, get, make_env, names
from icplay.sandbox.base import SandboxError
from icplay.tasks.model import Task


def test_builtin_languages_are_registered_with_their_sandboxes():
    assert names()[:2] == ["bash", "sql"]
    assert get("bash").sandbox_names() == ("docker", "bwrap", "podman")
    assert get("sql").sandboxes == ("sqlite", "mysql")
    assert get("sql").pick_sandbox() == "sqlite"


def test_an_unknown_language_is_one_clear_sentence():
    with pytest.raises(UnknownLanguage, match=r"no environment 'cobol' \(known: bash, sql"):
        get("cobol")
    with pytest.raises(SandboxError, match="sql runs on sqlite or mysql, not 'docker'"):
        checked_sandbox("sql", "docker")


def test_the_cli_lists_the_languages_and_refuses_others():
    done = subprocess.run([sys.executable, "-m", "icplay.cli", "run", "cobol", "--tasks", "x"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "invalid choice: 'cobol'" in done.stderr


def test_score_rows_explain_each_reward():
    bash_rows = dict(get("bash").explain({"p1": 0.33, "p2": 0.0, "p3": 0.2, "cosine": 0.61, "missing": [["A", "x"]]}))
    assert bash_rows["p2 file contents"] == "0.00 / 0.33" and bash_rows["missing changes"] == "A x"
    sql_rows = dict(get("sql").explain({"agent_result": "error", "iou": 0.0}))
    assert sql_rows["your last result"] == "an error: no rows to compare (scores 0)"


def test_gold_actions_default_to_the_gold_then_submit():
    task = Task(id="1", query="q", gold="ls", env="bash", set="bash")
    assert get("bash").gold(task) == ["ls", "submit"]


def test_envs_declare_what_they_can_do(tmp_path):
    env = make_env("sql", "sqlite")
    try:
        assert env.capabilities == frozenset({HAS_SCHEMA})
    finally:
        env.close()
    from icplay.envs.bash import BashEnv

    assert BashEnv.capabilities == frozenset({STREAMS_OUTPUT, HAS_CWD})


def test_notes_travel_in_info_and_old_observations_read_the_same():
    info = {"notes": ["command timed out after 1 s and was stopped"]}
    assert observation_parts("partial\n", info) == ("partial\n", info["notes"])
    # a trajectory saved when notes were appended to the observation
    old = "partial\n[icplay: command timed out after 1 s and was stopped]"
    assert observation_parts(old, info) == ("partial\n", info["notes"])
    assert shown_observation("partial", info) == old
    assert shown_observation("x\n", {}) == "x\n"


@pytest.mark.usefixtures("bwrap_ready")
def test_a_timed_out_bash_action_keeps_its_note_out_of_the_observation():
    env = make_env("bash", "bwrap", timeout=1)
    try:
        env.reset(Task(id="t", query="q", gold="true", env="bash", set="bash"))
        step = env.step("echo start; sleep 5")
        assert step.observation.startswith("start\n") and "[icplay:" not in step.observation
        assert step.info["timed_out"] and any("timed out" in n for n in step.info["notes"])
    finally:
        env.close()
