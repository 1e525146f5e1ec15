"""Faults found by the issue-11 audit that are not about sandboxes: each test failed before
its fix. Replay of an empty recorded action, a TUI without a terminal, a read-only home,
``report`` on JSON that is not an object."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from icplay.store import load_trajectory
from icplay.tasks.registry import load_tasks

ROOT = Path(__file__).resolve().parents[1]


def icplay(*argv: str, timeout: float = 60, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "icplay.cli", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, **kwargs)


def test_replay_of_an_empty_recorded_action_counts_it_and_ends(tmp_path):
    """It looped forever (an empty action left no counted turn, so it was proposed again)."""
    task = load_tasks("sql")[0]
    results = tmp_path / "results.json"
    results.write_text(json.dumps({task.id: {"task_id": task.id, "query": task.query, "turn_history": {
        "actions": ["", "", "SELECT 1", "SELECT 2"], "observations": ["", "", "[(1,)]", "[(2,)]"],
        "rewards": [0, 0, 0, 0]}}}))
    out = tmp_path / "run"
    done = icplay("run", "sql", "--tasks", "sql", "--task-id", task.id, "--replay", str(results),
                  "--sandbox", "sqlite", "--turns", "3", "--out", str(out), "--quiet", timeout=60)
    assert done.returncode == 0, done.stderr
    (path,) = [p for p in out.rglob("*.json") if p.name != "run.json"]
    traj = load_trajectory(path)
    assert traj.status == "submitted"
    assert [t.action for t in traj.turns] == ["", "", "SELECT 1"]            # --turns 3 held
    assert [bool(t.info.get("invalid")) for t in traj.turns] == [True, True, False]


def test_the_app_without_a_terminal_exits_at_once_with_one_line(tmp_path):
    """It spun a core forever waiting for a terminal."""
    done = icplay("play", "sql", timeout=30, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs a terminal" in lines[0] and "--plain" in lines[0], done.stderr


def test_a_session_name_that_is_a_path_is_refused_in_one_line(tmp_path):
    home = tmp_path / "home"
    done = icplay("play", "sql", "--session", "../../x", timeout=30, stdin=subprocess.DEVNULL,
                  env={"ICPLAY_HOME": str(home)})
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "session name '../../x' is not allowed" in lines[0], done.stderr
    assert not (tmp_path / "x").exists()


def read_only(folder: Path, *argv: str, stdin: str = "") -> subprocess.CompletedProcess:
    """icplay with ``folder`` mounted read-only (bwrap: read-only even for root)."""
    return subprocess.run(["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(folder), str(folder),
                           sys.executable, "-m", "icplay.cli", *argv], cwd=ROOT, input=stdin, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "ICPLAY_HOME": str(folder)})


@pytest.mark.bwrap
def test_a_read_only_home_is_one_line_and_doctor_says_so(bwrap_ready, tmp_path):
    home = tmp_path / "ro-home"
    home.mkdir()
    done = read_only(home, "play", "sql", "--plain", "--sandbox", "sqlite", stdin="SELECT 1;\n:quit\n")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"icplay: cannot write {home}") and "ICPLAY_HOME" in last, done.stderr
    doctor = read_only(home, "doctor")
    assert doctor.returncode == 1
    assert f"XX  icplay home: {home} is not writable" in doctor.stdout, doctor.stdout
    writable = icplay("doctor", env={"ICPLAY_HOME": str(tmp_path / "rw-home")})
    assert f"ok  icplay home: {tmp_path / 'rw-home'} is writable" in writable.stdout


@pytest.mark.parametrize("text,reason", [("[1, 2]", "not a trajectory file: its JSON is a list, not an object"),
                                         ("\"text\"", "not a trajectory file: its JSON is a string, not an object"),
                                         ("null", "not a trajectory file: its JSON is null, not an object"),
                                         ("{\"turns\": 5, \"task\": 1}", "env is missing")])
def test_report_on_json_that_is_not_a_trajectory_object_names_the_file(tmp_path, text, reason):
    file = tmp_path / "odd.json"
    file.write_text(text)
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "odd.json").write_text("{\"turns\": 5, \"task\": {\"id\": 1}, \"env\": \"sql\", \"sandbox\": \"x\"}")
    for target, why in ((file, reason), (folder / "odd.json", "turns is a number, not a list")):
        done = icplay("report", str(target.parent if target.parent == folder else target), timeout=30)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 1 and len(lines) == 1, done.stderr
        assert lines[0] == f"icplay: no trajectory to report; 1 file skipped: {target} ({why})"
