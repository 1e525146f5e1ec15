"""Hostile saved files: a trajectory from someone else's machine is input, never instructions.

Each probe is a file a hostile user could hand over (a shared run, a study merge, a file to
re-execute or fork), run through the door it would come in by, as root, on real sandboxes:
- a task id that climbs out of the sandbox's folder (re-execute of a CTF episode on bwrap,
  whose files folder /ctf/<id> is a host folder made and chowned as root), a set name
  ``..`` (a fork saved beside the session instead of in it);
- a task whose ``extra`` names a host folder (copied into the sandbox: Docker and bwrap),
  one that claims the network, or a forged gold that makes a forged reward "reproduce";
- a merged study file carrying such a task;
- a verdict that is not a boolean (``"yes"``, counted as strictly solved), a reward that is
  not a number in an InterCode log;
- a FIFO among the files (the readers must not block: run with a timeout), a link to
  /dev/zero and a huge sparse file (run with an address-space limit: no memory blow-up),
  10 000 levels of nesting (no RecursionError), fields of the wrong type.
Every probe failed on the code before ``icplay.tasks.trusted`` and the non-blocking reader.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from icplay.episode import Trajectory, Turn
from icplay.languages import make_env
from icplay.review import open_fork, reexecute
from icplay.session import Session
from icplay.store import TrajectoryFileError, load_trajectory, save_trajectory
from icplay.study.assign import assign
from icplay.study.merge import merge
from icplay.study.model import Study, StudyRules, load_study, save_study
from icplay.tasks.model import TaskFileError
from icplay.tasks.registry import load_tasks

ROOT = Path(__file__).resolve().parents[2]
SECRET = "HOST-SECRET-4c1d"
CLI_TIMEOUT = 120        # a reader that blocks on a FIFO would wait forever: this is the probe's bound
ADDRESS_SPACE = 3 << 30  # a reader that reads /dev/zero or a 4 GB sparse file whole hits this and fails


def machine_task(set_name: str, task_id: str):
    return next(t for t in load_tasks(set_name) if t.id == task_id)


def episode_file(path: Path, set_name: str, task_id: str, actions: list[str], task_changes: dict | None = None,
                 extra_changes: dict | None = None, **fields) -> Path:
    """A saved episode of a real task of this machine, its task block changed as a hostile user would."""
    task = machine_task(set_name, task_id).to_dict()
    task.update(task_changes or {})
    task["extra"] = {**task["extra"], **(extra_changes or {})}
    turns = [Turn(i, "human", action, "") for i, action in enumerate(actions)]
    fields.setdefault("status", "submitted" if "reward" in fields else "stopped")
    save_trajectory(Trajectory(task=task, env=task["env"], sandbox="bwrap", turns=turns, **fields), path)
    return path


def icplay(*args: str, limit_memory: bool = False, **kw) -> subprocess.CompletedProcess:
    """The CLI in a child process, bounded in time (and, with ``limit_memory``, in address space)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    return subprocess.run([sys.executable, "-m", "icplay.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=CLI_TIMEOUT, preexec_fn=limit if limit_memory else None, **kw)


def one_line(done: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


# -- ids and set names never become paths ---------------------------------------------------

@pytest.mark.usefixtures("bwrap_ready")
def test_a_task_id_that_climbs_out_never_makes_a_host_folder(tmp_path):
    """Re-execute (as root) of a CTF episode whose id climbs out of /ctf: bwrap made and chowned
    that host folder; now the file is refused in one line naming file and field."""
    target = tmp_path / "made-by-the-file"
    climb = "../" * 40 + str(target).lstrip("/")
    path = episode_file(tmp_path / "in" / "ep.json", "ctf", "base64-note", ["ls"], task_changes={"id": climb})
    done = icplay("view", "--reexecute", str(path), "--sandbox", "bwrap")
    assert not target.exists()
    assert done.returncode != 0
    line = one_line(done)
    assert line.startswith(f"icplay: {path}, field 'task.id': ") and "not a task set name or id" in line, line


# -- a task is never rebuilt from the file ----------------------------------------------------

@pytest.fixture(params=[pytest.param("docker", marks=pytest.mark.docker),
                        pytest.param("bwrap", marks=pytest.mark.bwrap)])
def ctf_sandbox(request) -> str:
    if request.param == "docker":
        from icplay.languages import get
        from icplay.sandbox.images import ensure_image

        get("ctf")
        ensure_image(request.getfixturevalue("docker_client"), "ctf", lambda line: None)
    else:
        request.getfixturevalue("bwrap_ready")
    return request.param


def test_extra_naming_host_files_never_brings_them_into_the_sandbox(ctf_sandbox, tmp_path):
    """A CTF episode whose extra.assets names a host folder: its files were copied into the
    sandbox; now the task's files are this machine's own, whatever the file says."""
    host = tmp_path / "host-folder"
    host.mkdir()
    (host / "secret.txt").write_text(SECRET + "\n")
    path = episode_file(tmp_path / "in" / "ep.json", "ctf", "base64-note", ["cat secret.txt; ls"],
                        extra_changes={"assets": str(host)})
    env = make_env("ctf", sandbox=ctf_sandbox)
    try:
        result = reexecute(load_trajectory(path), env)
    finally:
        env.close()
    assert result.checks and result.checks[0].skipped is None
    assert SECRET not in result.checks[0].observation
    assert "note" in result.checks[0].observation       # the machine's own files are there (note.txt)


@pytest.mark.docker
def test_the_cli_refuses_a_task_claiming_the_network_or_another_image_in_one_line(docker_client, tmp_path):
    for field, value in (("network", True), ("image", "debian:bookworm-slim")):
        path = episode_file(tmp_path / f"{field}.json", "bash", "b001", ["ls /sys/class/net"],
                            task_changes={field: value})
        done = icplay("view", "--reexecute", str(path), "--sandbox", "docker")
        assert done.returncode != 0 and "eth0" not in done.stdout, done.stdout
        assert one_line(done).startswith(f"icplay: {path}, field 'task.{field}': not what task bash/b001 "), done.stderr


@pytest.mark.parametrize("set_name, task_id, sandbox, change", [
    pytest.param("bash", "b001", "bwrap", {"network": True}, marks=pytest.mark.bwrap),
    ("sql", "bookshop-01", "sqlite", {"gold": "SELECT 1"}),
])
def test_a_task_of_the_files_own_is_never_re_executed(request, tmp_path, set_name, task_id, sandbox, change):
    """A task claiming the network ran with it on; a file carrying its own gold (the recorded
    action itself) and reward 1 'reproduced' that forged reward on re-execution."""
    if sandbox == "bwrap":
        request.getfixturevalue("bwrap_ready")
    path = episode_file(tmp_path / "ep.json", set_name, task_id, ["ls /sys/class/net" if set_name == "bash" else
                                                                 "SELECT 1"], task_changes=change, reward=1.0)
    field = next(iter(change))
    env = make_env(set_name, sandbox=sandbox)
    try:
        with pytest.raises(TaskFileError, match=rf"field 'task\.{field}': not what task {set_name}/{task_id} on this "):
            reexecute(load_trajectory(path), env)
    finally:
        env.close()


@pytest.mark.parametrize("change", [{"task_changes": {"set": ".."}},
                                    {"extra_changes": {"setup": "touch /tmp/ran-from-the-file"}},
                                    {"task_changes": {"id": "no-such-task"}},
                                    {"task_changes": {"set": "no-such-set"}}])
def test_a_task_that_is_not_this_machines_is_refused_for_a_fork(tmp_path, change):
    """Set '..' saved the fork one folder up, beside its session; a setup, id or set of the
    file's own was forked as the file said."""
    sessions = tmp_path / "sessions"
    path = episode_file(tmp_path / "in" / "ep.json", "sql", "bookshop-01", ["SELECT 1"], **change)
    env = make_env("sql", sandbox="sqlite")
    try:
        with pytest.raises(TaskFileError, match=r"field 'task\.(extra\.setup|id|set)'"):
            open_fork(env, load_trajectory(path), 1, Session("forks", root=sessions / "forks"))
    finally:
        env.close()
    assert list(sessions.rglob("*.json")) == []


# -- study merge ---------------------------------------------------------------------------------

TASKS = tuple(f"sql/bookshop-0{i}" for i in range(1, 5))


def study_and_ben(tmp_path) -> tuple[Path, Study, str]:
    home = tmp_path / "home"
    save_study(Study("pilot", TASKS, ("ana", "ben"), 1, 1, assign(TASKS, ("ana", "ben"), 1, 1), StudyRules(),
                     "2026-01-01"), home)
    study = load_study("pilot", home)
    return home, study, study.assigned_to("ben")[0]


def test_a_merged_file_never_brings_its_own_task(tmp_path):
    home, study, ref = study_and_ben(tmp_path)
    set_name, task_id = ref.split("/")
    laptop = tmp_path / "laptop"
    fine = episode_file(laptop / "fine.json", set_name, task_id, ["SELECT 1"], annotator="ben", study="pilot")
    network = episode_file(laptop / "network.json", set_name, task_id, ["SELECT 1"], annotator="ben", study="pilot",
                           task_changes={"network": True})
    gold = episode_file(laptop / "gold.json", set_name, task_id, ["SELECT 1"], annotator="ben", study="pilot",
                        task_changes={"gold": "SELECT 1"})
    result = merge(study, [laptop], home)
    assert [p.read_bytes() for p in result.added] == [fine.read_bytes()]
    assert sorted(p.name for p, _ in result.refused) == ["gold.json", "network.json"]
    assert {why for _, why in result.refused} == {
        f"{gold}, field 'task.gold': not what task {ref} on this machine has: a saved file never changes what a "
        "task runs (its image, network, files, setup or tests)",
        f"{network}, field 'task.network': not what task {ref} on this machine has: a saved file never changes what "
        "a task runs (its image, network, files, setup or tests)"}
    done = icplay("study", "merge", "pilot", str(laptop), env={**os.environ, "ICPLAY_HOME": str(home)})
    assert done.returncode == 1
    assert done.stdout.strip().endswith("2 refused (a task not as this machine has it)"), done.stdout
    assert sum(line.startswith("icplay: refused: ") for line in done.stderr.splitlines()) == 2, done.stderr


def test_a_fifo_and_a_link_to_dev_zero_among_merged_files_never_hang_or_fill_memory(tmp_path):
    home, study, ref = study_and_ben(tmp_path)
    set_name, task_id = ref.split("/")
    laptop = tmp_path / "laptop"
    episode_file(laptop / "fine.json", set_name, task_id, ["SELECT 1"], annotator="ben", study="pilot")
    os.mkfifo(laptop / "pipe.json")
    (laptop / "zero.json").symlink_to("/dev/zero")
    done = icplay("study", "merge", "pilot", str(laptop), env={**os.environ, "ICPLAY_HOME": str(home)},
                  limit_memory=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("merged: 1 added, 0 duplicate(s) left out, 0 conflict(s), 2 file(s) skipped")
    assert "Traceback" not in done.stderr
    assert f"icplay: skipped: {laptop / 'pipe.json'}: a named pipe (FIFO), not a trajectory file" in done.stderr
    assert f"icplay: skipped: {laptop / 'zero.json'}: a character device, not a trajectory file" in done.stderr


# -- report and the browser --------------------------------------------------------------------

def run_folder(tmp_path) -> Path:
    folder = tmp_path / "run"
    episode_file(folder / "sql" / "fine.json", "sql", "bookshop-01", ["SELECT 1"], reward=0.0,
                 strict={"solved": False, "reasons": ["wrong rows"]})
    return folder


def test_a_verdict_that_is_not_a_boolean_is_never_counted_as_solved(tmp_path):
    folder = run_folder(tmp_path)
    episode_file(folder / "sql" / "yes.json", "sql", "bookshop-02", ["SELECT 1"], reward=0.2,
                 strict={"solved": "yes", "reasons": []})
    (folder / "log.json").write_text(json.dumps({"environment": "ic_sql", "query_idx": 3, "reward": True,
                                                 "trajectory": [{"action": "SELECT 1", "observation": "1"}]}))
    done = icplay("report", str(folder))
    assert done.returncode == 0, done.stderr
    assert re.search(r"^episodes +1$", done.stdout, re.M), done.stdout
    assert re.search(r"^solved \(InterCode\) +0 \(0\.0%\)$", done.stdout, re.M), done.stdout
    assert re.search(r"^solved \(strict\) +0 \(0\.0%\)$", done.stdout, re.M), done.stdout
    assert "Traceback" not in done.stderr
    assert f"{folder / 'sql' / 'yes.json'} (strict.solved is a string, not true or false or null)" in done.stderr
    assert f"{folder / 'log.json'} (field 'log.reward': a reward must be a number, not true or false (true))" \
        in done.stderr, done.stderr


def test_a_fifo_in_a_run_folder_never_blocks_report_or_the_browser(tmp_path):
    folder = run_folder(tmp_path)
    os.mkfifo(folder / "sql" / "pipe.json")
    done = icplay("report", str(folder))
    assert done.returncode == 0 and re.search(r"^episodes +1$", done.stdout, re.M), done.stdout + done.stderr
    assert f"{folder / 'sql' / 'pipe.json'} (a named pipe (FIFO), not a trajectory or results file)" in done.stderr
    scan = subprocess.run([sys.executable, "-c", "import sys; from icplay.formats.summary import scan; "
                           "print(len(scan([sys.argv[1]], cache=False, skipped=[])))", str(folder)],
                          capture_output=True, text=True, timeout=CLI_TIMEOUT, cwd=ROOT)
    assert scan.stdout.strip() == "1", scan.stderr


@pytest.mark.parametrize("make", ["deep", "sparse"])
def test_a_hostile_run_json_never_costs_the_report(tmp_path, make):
    """run.json (a run's description) was read whole and parsed unguarded: 10 000 levels of
    nesting raised RecursionError, a 4 GB sparse file filled memory."""
    folder = run_folder(tmp_path)
    meta = folder / "run.json"
    if make == "deep":
        meta.write_text("[" * 10_000 + "]" * 10_000)
    else:
        with meta.open("wb") as f:
            f.truncate(4 << 30)
    done = icplay("report", str(folder), limit_memory=True)
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr, done.stderr[-2000:]
    assert done.returncode == 0 and re.search(r"^episodes +1$", done.stdout, re.M), done.stdout


# -- the one reader: types ---------------------------------------------------------------------

@pytest.mark.parametrize("where, value, message", [
    ("task.network", "yes", "task.network is a string, not true or false"),
    ("task.extra", ["/etc"], "task.extra is a list, not an object or null"),
    ("task.tags", 5, "task.tags is a number, not a list or null"),
    ("task.gold", 3, "task.gold is a number, not a string or null"),
    ("task.image", {"name": "x"}, "task.image is an object, not a string or null"),
    ("strict.solved", "yes", "strict.solved is a string, not true or false or null"),
    ("strict.reasons", "none", "strict.reasons is a string, not a list or null"),
    ("turns.0.info.strict.solved", 1, "turns[0].info.strict.solved is a number, not true or false or null"),
    ("turns.0.info.strict", "yes", "turns[0].info.strict is a string, not an object"),
])
def test_fields_of_the_wrong_type_are_refused_naming_file_and_field(tmp_path, where, value, message):
    path = episode_file(tmp_path / "ep.json", "sql", "bookshop-01", ["SELECT 1"], strict={"solved": False})
    data = json.loads(path.read_text())
    node = data
    *parents, last = where.split(".")
    for key in parents:
        node = node[int(key)] if key.isdigit() else node.setdefault(key, {})
    node[last] = value
    path.write_text(json.dumps(data))
    with pytest.raises(TrajectoryFileError) as caught:
        load_trajectory(path)
    assert str(caught.value) == f"{path}: {message}"
