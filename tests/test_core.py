"""Task files, trajectories and the layering rule, on real files and real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from icplay.episode import Trajectory, Turn
from icplay.store import TrajectoryFileError, load_trajectory, save_trajectory
from icplay.tasks.loaders import load_task_file
from icplay.tasks.model import TaskFileError
from icplay.tasks.registry import find_set, load_tasks, task_sets

ROOT = Path(__file__).resolve().parents[1]


def test_core_modules_import_without_textual():
    code = textwrap.dedent("""
        import sys, pkgutil, importlib, icplay
        for info in pkgutil.walk_packages(icplay.__path__, "icplay."):
            if info.name.startswith("icplay.tui"):
                continue
            importlib.import_module(info.name)
        import icplay.cli
        icplay.cli.build_parser()
        loaded = sorted(m for m in sys.modules if m == "textual" or m.startswith("textual."))
        print(len(loaded), loaded[:3])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("0 "), out


@pytest.mark.parametrize("content, message", [
    ("[{\"query\": \"q\"}]", "record 0, field 'gold': missing required field"),
    ("[{\"query\": \"q\", \"gold\": 5}]", "record 0, field 'gold': expected str, got int"),
    ("[{\"query\": \"q\", \"gold\": \"g\"}, 7]", "record 1: expected an object, got int"),
    ("[{\"query\": \"q\", \"gold\": \"g\", \"hardness\": \"trivial\"}]", "field 'hardness': unknown hardness"),
    ("[{\"query\": \"q\", \"gold\": \"g\", \"id\": \"a\"}, {\"query\": \"r\", \"gold\": \"g\", \"id\": \"a\"}]",
     "record 1, field 'id': duplicate id 'a'"),
    ("[{\"query\": \"q\", \"gold\": \"g\",}]", "invalid JSON at line 1"),
    ("{\"query\": \"q\", \"gold\": \"g\"}\n{\"query\": \"q\"\n", "invalid JSON on line 2"),
    ("[]", "holds no tasks"),
])
def test_bad_task_files_name_file_record_and_field(tmp_path, content, message):
    path = tmp_path / "mine.json"
    path.write_text(content)
    with pytest.raises(TaskFileError) as err:
        load_task_file(path, "bash")
    assert str(path) in str(err.value)
    assert message in str(err.value)


def test_jsonl_and_json_task_files_load(tmp_path):
    rows = [{"query": "count files", "gold": "ls | wc -l", "hardness": "easy", "tags": ["count"]},
            {"id": "x2", "query": "q2", "gold": "true"}]
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (tmp_path / "a.json").write_text(json.dumps(rows))
    for name in ("a.jsonl", "a.json"):
        tasks = load_task_file(tmp_path / name, "bash", "mine")
        assert [t.id for t in tasks] == ["0", "x2"]
        assert tasks[0].hardness == "easy" and tasks[0].tags == ("count",) and tasks[0].set == "mine"


def test_cli_reports_a_bad_task_file_in_one_line(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text('[{"query": "q"}]')
    done = subprocess.run([sys.executable, "-m", "icplay.cli", "tasks", str(bad), "--env", "bash"],
                          capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr.strip() == f"icplay: {bad}, record 0, field 'gold': missing required field"
    assert "Traceback" not in done.stderr


def test_intercode_files_load_as_they_are(shared_intercode):
    names = {s.name for s in task_sets()}
    assert {"spider", "wikisql", "nl2bash-1", "mbpp", "ctf", "intercode-ctf"} <= names
    spider = load_tasks("spider")
    assert len(spider) == 1034 and spider[0].db and spider[0].hardness in ("easy", "medium", "hard", "extra")
    assert spider[0].extra["databases"].endswith("ic_spider_dbs.sql")
    assert find_set("nl2bash-1").needs_image
    assert len(load_tasks("nl2bash-1")) == 60


def test_trajectory_round_trips(tmp_path):
    traj = Trajectory(task={"id": "1", "set": "s", "query": "q"}, env="bash", sandbox="bwrap")
    traj.turns.append(Turn(0, "human", "ls", "a\n", 0, time.time(), 0.01, info={"cwd": "/"}))
    traj.reward, traj.status, traj.time_worked = 0.5, "submitted", 12.5
    save_trajectory(traj, tmp_path / "t.json")
    back = load_trajectory(tmp_path / "t.json")
    assert back == traj


def test_unreadable_trajectory_gets_a_clear_error(tmp_path):
    (tmp_path / "t.json").write_text("{not json")
    with pytest.raises(TrajectoryFileError, match="t.json: not a trajectory file"):
        load_trajectory(tmp_path / "t.json")


WRITER = """
import sys, time
from icplay.episode import Episode
from icplay.languages import make_env
from icplay.store import TrajectoryStore
from icplay.tasks.model import Task
from icplay.envs.bash import BashEnv, BashSandboxes
from icplay.sandbox.bwrap import make_root_template
from pathlib import Path
sandboxes = BashSandboxes("bwrap")
src = Path(sys.argv[2]); (src / "tb").mkdir(exist_ok=True)
sandboxes._template = make_root_template(src / "tb", None, src)
env = BashEnv(sandboxes)
task = Task(id="k", set="killed", env="bash", query="q", gold="true")
episode = Episode(env, task, save=TrajectoryStore(sys.argv[1]).save)
for i in range(1000):
    episode.act(f"echo turn {i}")
    print(i, flush=True)
"""


def test_a_killed_process_loses_no_completed_turn(tmp_path, bwrap_ready):
    store = tmp_path / "store"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(store), str(tmp_path)], stdout=subprocess.PIPE, text=True)
    completed = -1
    for line in proc.stdout:
        completed = int(line)
        if completed >= 30:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    traj = load_trajectory(store / "killed" / "k.json")
    # Every turn the process reported done is on disk, whole; at most the one in flight is extra.
    assert completed + 1 <= len(traj.turns) <= completed + 2
    assert [t.observation for t in traj.turns] == [f"turn {i}\n" for i in range(len(traj.turns))]


def test_saved_sql_turns_keep_database_values_and_cap_their_rows(tmp_path):
    import datetime
    import decimal

    from icplay.store import SAVED_ROWS

    traj = Trajectory(task={"id": "1", "set": "s"}, env="sql", sandbox="sqlite")
    rows = [(decimal.Decimal("1.50"), datetime.date(2024, 1, 2), i) for i in range(SAVED_ROWS + 5)]
    traj.turns.append(Turn(0, "human", "SELECT ...", str(rows[:2]), info={"columns": ["a", "b", "c"], "rows": rows}))
    save_trajectory(traj, tmp_path / "t.json")
    back = load_trajectory(tmp_path / "t.json")
    saved = back.turns[0].info
    assert saved["rows"][0] == ["1.50", "2024-01-02", 0]
    assert len(saved["rows"]) == SAVED_ROWS and saved["rows_saved"] == SAVED_ROWS
    assert len(traj.turns[0].info["rows"]) == SAVED_ROWS + 5  # the in-memory turn is untouched
