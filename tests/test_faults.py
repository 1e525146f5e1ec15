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
