"""The viewer's summary index (icplay.formats.summary): what a row says, that the index is
reused until a file changes, InterCode files as rows, filters, fork families."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from icplay.episode import Trajectory, Turn
from icplay.formats.summary import Filter, family, index_path, load_episode, scan, scan_batches, select, summarize
from icplay.review import fork
from icplay.store import TrajectoryFileError, save_trajectory, trajectory_json
from icplay.tasks.registry import load_tasks


def traj(task_id="bookshop-01", policy=None, turns=(), reward=None, at=1.7e9, **kw) -> Trajectory:
    return Trajectory(task={"id": task_id, "set": "sql", "env": "sql", "query": f"the query of {task_id}",
                            "gold": "SELECT 1"}, env="sql", sandbox="sqlite", policy=policy or {"kind": "human"},
                      turns=list(turns), status="submitted" if reward is not None else "stopped", reward=reward,
                      best_reward=reward, started_at=at, updated_at=at, **kw)


def test_a_row_says_who_and_the_author_mix():
    t = traj(policy={"kind": "llm", "model": "m1", "strategy": "react"}, reward=0.5, turns=[
        Turn(0, "agent", "SELECT 1", "(1,)"), Turn(1, "agent-edited-by-human", "SELECT 2", "(2,)", proposed="SELECT 3"),
        Turn(2, "human", "", "", proposed="DROP TABLE t", info={"rejected": True})])
    s = summarize(t, "x.json", "watch")
    assert (s.who, s.author, s.mix_text, s.turns, s.final, s.solved) == ("m1/react", "mixed", "A1 E1 R1", 2, 0.5, False)
    assert summarize(traj(annotator="ann"), "y", "s").who == "ann"
    # the OS account an older file recorded is never shown as who played
    assert summarize(traj(policy={"kind": "human", "user": "root"}), "y", "s").who == "(no annotator)"
    assert summarize(traj(policy={"kind": "gold"}, turns=[Turn(0, "agent", "x", "")]), "z", "r").author == "agent"


def test_the_index_is_reused_until_a_file_changes(tmp_path):
    home = tmp_path / "home"
    a = home / "trajectories" / "s1" / "sql" / "bookshop-01.json"
    b = home / "runs" / "r1" / "sql" / "bookshop-02.json"
    save_trajectory(traj(reward=1.0, at=1.7e9), a)
    save_trajectory(traj("bookshop-02", reward=0.0, at=1.8e9), b)
    (home / "runs" / "r1" / "run.json").write_text('{"label": "r1"}')
    rows = scan(home=home)
    assert [(r.task, r.source, r.solved) for r in rows] == [("bookshop-02", "r1", False), ("bookshop-01", "s1", True)]
    index = json.loads(index_path(home).read_text())
    assert set(index["files"]) == {str(a), str(b)}
    # the index is what the next scan reads: a row planted in it is returned as long as the file is unchanged
    entry = index["files"][str(a)]
    entry[2][0][3] = "planted"                  # the task field
    index_path(home).write_text(json.dumps(index))
    assert [r.task for r in scan(home=home)] == ["bookshop-02", "planted"]
    t = load_episode(str(a))
    t.reward = t.best_reward = 0.25
    save_trajectory(t, a)                        # changed: read again
    os.utime(a, ns=(1, 1))
    again = {r.task: r for r in scan(home=home)}
    assert set(again) == {"bookshop-01", "bookshop-02"} and again["bookshop-01"].final == 0.25
    b.unlink()                                   # gone: dropped from the index too
    assert [r.task for r in scan(home=home)] == ["bookshop-01"]
    assert set(json.loads(index_path(home).read_text())["files"]) == {str(a)}


def test_intercode_logs_are_rows_and_open(tmp_path):
    tasks = load_tasks("sql")
    logs = {"3": {"environment": "ic_sql", "query_idx": 3, "query": tasks[3].query, "gold": tasks[3].gold,
                  "reward": 1.0, "trajectory": [{"action": "SELECT 1", "observation": "(1,)"},
                                                {"action": tasks[3].gold, "observation": "..."}]}}
    path = tmp_path / "ic_logs.json"
    path.write_text(json.dumps(logs))
    (tmp_path / "junk.json").write_text("[1, 2")
    rows = scan([tmp_path], cache=False)
    assert len(rows) == 1 and rows[0].ref == f"{path}#0" and rows[0].final == 1.0 and rows[0].turns == 2
    assert [t.action for t in load_episode(rows[0].ref).turns] == ["SELECT 1", tasks[3].gold]
    with pytest.raises(TrajectoryFileError, match="no such file or folder"):
        scan([tmp_path / "missing"])


def test_filters_sort_and_families(tmp_path):
    original = traj(policy={"kind": "llm", "model": "gpt-4o"}, reward=1.0, at=1.0,
                    turns=[Turn(0, "agent", "SELECT 1", "(1,)", reward=0.0), Turn(1, "agent", "SELECT 2", "(2,)")])
    task = next(t for t in load_tasks("sql") if t.id == "bookshop-01")   # the fork runs this machine's task
    child = fork(original, 1, task=task)
    child.updated_at = 2.0
    grandchild = fork(child, 1, task=task)
    grandchild.updated_at = 3.0
    other = traj("bookshop-02", annotator="ann", reward=0.0, at=4.0)
    for n, t in enumerate((original, child, grandchild, other)):
        path = tmp_path / f"{n}.json"
        path.write_text(trajectory_json(t))
    rows = scan([tmp_path], cache=False)
    assert child.forked_from == {"id": original.id, "turn": 1} and child.turns[0].action == "SELECT 1"
    assert [s.id for s in family(rows, grandchild.id)] == [original.id, child.id, grandchild.id]
    assert [s.id for s in family(rows, other.id)] == [other.id]
    assert [s.id for s in select(rows, Filter(solved=True))] == [original.id]
    assert [s.id for s in select(rows, Filter(text="ANN bookshop"))] == [other.id]
    assert [s.id for s in select(rows, Filter(model="gpt"), sort="date", descending=False)] == [
        original.id, child.id, grandchild.id]
    assert [s.id for s in select(rows, Filter(author="human"))] == [other.id]


def test_view_without_a_terminal_or_with_a_missing_path_is_one_line(tmp_path):
    def run(*a: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "icplay.cli", "view", *a], capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
    missing = run(str(tmp_path / "nope"))
    assert missing.returncode == 1 and "no such file or folder" in missing.stderr and "Traceback" not in missing.stderr
    no_tty = run(str(tmp_path))
    assert no_tty.returncode == 1 and "needs a terminal" in no_tty.stderr


def test_scan_batches_come_as_the_files_are_read_and_the_index_is_saved_at_the_end(tmp_path):
    home = tmp_path / "home"
    for n in range(5):
        save_trajectory(traj(f"bookshop-0{n + 1}", reward=1.0, at=1.7e9 + n),
                        home / "trajectories" / "s1" / "sql" / f"bookshop-0{n + 1}.json")
    ticks = iter(range(1000))
    batches = scan_batches(home=home, every=1.5, clock=lambda: next(ticks))   # the clock ticks once a look
    first = next(batches)
    assert first and len(first) < 5 and not index_path(home).exists()         # rows before the end, no index yet
    rest = [s for b in batches for s in b]
    assert sorted(s.task for s in first + rest) == [f"bookshop-0{n}" for n in range(1, 6)]
    assert index_path(home).exists()
    assert [s.task for s in scan(home=home)] == [f"bookshop-0{n}" for n in range(5, 0, -1)]   # newest first
    warm = list(scan_batches(home=home, every=1.5, clock=lambda: next(ticks)))
    assert sum(len(b) for b in warm) == 5
