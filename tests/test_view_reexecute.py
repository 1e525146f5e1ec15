"""Re-execution of saved episodes on real sandboxes: a faithful recording is reproduced; a
turn tampered with in the file is flagged, with its diff; the CLI says the same."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from icplay.languages import make_env
from icplay.episode import Episode
from icplay.review import reexecute
from icplay.session import Session
from icplay.store import load_trajectory
from icplay.tasks.registry import load_tasks

SQL_TASK = next(t for t in load_tasks("sql") if t.id == "bookshop-01")
BASH_TASK = next(t for t in load_tasks("bash") if t.id == "b001")


def record_sql(tmp_path):
    env = make_env("sql", sandbox="sqlite")
    try:
        session = Session("rec", root=tmp_path / "rec")
        episode = Episode(env, SQL_TASK, save=session.save)
        episode.act("SELECT title FROM books WHERE genre = 'Poetry'")
        episode.score()
        episode.act(SQL_TASK.gold)
        episode.score()
        episode.submit()
        return session.path_for(SQL_TASK)
    finally:
        env.close()


def recorded(tmp_path, task, sandbox: str, actions: list[str]):
    """The file of a submitted episode of ``task`` that ran ``actions`` on ``sandbox``."""
    env = make_env(task.env, sandbox=sandbox)
    try:
        session = Session("rec", root=tmp_path / "rec")
        episode = Episode(env, task, save=session.save)
        for action in actions:
            episode.act(action)
        episode.submit()
    finally:
        env.close()
    return session.path_for(task)


def test_faithful_recording_is_reproduced(tmp_path):
    path = record_sql(tmp_path)
    env = make_env("sql", sandbox="sqlite")
    try:
        result = reexecute(load_trajectory(path), env)
    finally:
        env.close()
    assert result.reproduced, result.render()
    assert [c.differs for c in result.checks] == [False, False]
    assert result.final == result.recorded_final == 1.0


def test_tampered_turn_is_flagged(tmp_path):
    path = record_sql(tmp_path)
    data = json.loads(path.read_text())
    original = data["turns"][0]["observation"]
    lines = original.splitlines()
    data["turns"][0]["observation"] = "\n".join(lines[:-1] + ["A Forged Title"])
    data["turns"][1]["reward"] = 0.5
    path.write_text(json.dumps(data))
    env = make_env("sql", sandbox="sqlite")
    try:
        result = reexecute(load_trajectory(path), env)
    finally:
        env.close()
    first, second = result.checks
    assert first.observation_differs and not first.reward_differs
    assert first.observation == original
    assert "-A Forged Title" in first.diff() and f"+{lines[-1]}" in first.diff()
    assert second.reward_differs and not second.observation_differs and second.reward == 1.0
    assert [c.index for c in result.diverged] == [0, 1]
    assert not result.reproduced and not result.final_differs
    text = result.render()
    assert "✗ turn 1" in text and "reward 0.50 -> 1.00" in text and "diverged: 2 turns differ" in text


@pytest.mark.usefixtures("bwrap_ready")
def test_cli_reexecute_bash(tmp_path):
    """`icplay view --reexecute FILE` on a Bash episode: exit 0 when reproduced, 1 with the
    tampered turn named when not."""
    path = recorded(tmp_path, BASH_TASK, "bwrap", ["cd /testbed/logs && ls", "wc -l nginx/access.log"])
    cmd = [sys.executable, "-m", "icplay.cli", "view", "--reexecute", str(path), "--sandbox", "bwrap"]
    ok = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr + ok.stdout
    assert "reproduced" in ok.stdout
    data = json.loads(path.read_text())
    data["turns"][1]["observation"] = data["turns"][1]["observation"].replace("access.log", "tampered.log")
    path.write_text(json.dumps(data))
    bad = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1, bad.stderr + bad.stdout
    assert "✗ turn 2: wc -l nginx/access.log  — differs: observation" in bad.stdout
    assert "+" in bad.stdout and "tampered.log" in bad.stdout
    assert "✓ turn 1" in bad.stdout


def test_cli_reexecute_bad_file(tmp_path):
    bad = tmp_path / "nope.json"
    bad.write_text("[1, 2]")
    out = subprocess.run([sys.executable, "-m", "icplay.cli", "view", "--reexecute", str(bad)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and out.stderr.startswith("icplay: ") and "Traceback" not in out.stderr


@pytest.mark.usefixtures("bwrap_ready")
def test_cli_reexecute_python(tmp_path):
    """Re-execution is not Bash's and SQL's only: a Python episode (the gold agent's run, on
    bwrap) is reproduced, and a recorded final reward that was changed is flagged."""
    out = tmp_path / "run"
    run = subprocess.run([sys.executable, "-m", "icplay.cli", "run", "python", "--tasks", "python", "--policy", "gold",
                          "--limit", "1", "--sandbox", "bwrap", "--out", str(out), "--quiet"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr + run.stdout
    path = next((out / "python").glob("*.json"))
    cmd = [sys.executable, "-m", "icplay.cli", "view", "--reexecute", str(path), "--sandbox", "bwrap"]
    ok = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0 and "reproduced" in ok.stdout, ok.stderr + ok.stdout
    data = json.loads(path.read_text())
    assert data["reward"] == 1.0
    data["reward"] = 0.25
    path.write_text(json.dumps(data))
    bad = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1, bad.stderr + bad.stdout
    assert "final reward: recorded 0.25, now 1.00" in bad.stdout


def test_cli_reexecute_a_task_of_your_own_file_with_tasks(tmp_path):
    """A task set of one's own (a task file) is not one of this machine's named sets: its
    episode is refused in one line until ``--tasks FILE`` names it, then re-executed."""
    tasks = tmp_path / "mine.json"
    tasks.write_text(json.dumps([{"id": "poetry", "query": SQL_TASK.query, "gold": SQL_TASK.gold, "db": SQL_TASK.db}]))
    task = next(t for t in load_tasks(str(tasks), "sql") if t.id == "poetry")
    path = recorded(tmp_path, task, "sqlite", [SQL_TASK.gold])
    cmd = [sys.executable, "-m", "icplay.cli", "view", "--reexecute", str(path), "--sandbox", "sqlite"]
    refused = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and refused.stderr.strip() == (
        f"icplay: {path}, field 'task.set': task set 'mine' is not on this machine: its tasks are never rebuilt from "
        "a saved file (install the set, or name its task file with --tasks)")
    ok = subprocess.run([*cmd, "--tasks", str(tasks)], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "reproduced" in ok.stdout, ok.stderr + ok.stdout
