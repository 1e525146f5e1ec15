"""Nothing lost, one sentence each (issue 22, item 6).

Every reader meets a trajectory of any shape: a file it cannot use is named with the field
that is wrong, counted and listed once ("N files skipped: ..."), and the rest is read;
huge and deeply nested files are refused before parsing. A full disk or a read-only home
stops an episode with one sentence and exit 1, the turns saved before intact, and the
next start marks the episode (left ``running``) stopped.

The disk tests mount a small tmpfs as the icplay home inside ``unshare --user
--map-root-user --mount``: real ENOSPC and EROFS from a real filesystem, as root or not.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ci_rules import unavailable
from icplay.episode import Trajectory, Turn
from icplay.formats.native import Skipped, load_logs, skipped_note
from icplay.formats.summary import scan
from icplay.json_shape import MAX_DEPTH, nesting_depth
from icplay.store import StoreWriteError, TrajectoryFileError, TrajectoryStore, load_trajectory

ROOT = Path(__file__).resolve().parents[1]


def icplay(*argv: str, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "icplay.cli", *argv], cwd=kwargs.pop("cwd", ROOT),
                          capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})}, **kwargs)


def episode(task_id: str, solved: bool, turns: int = 2) -> dict:
    traj = Trajectory(task={"id": task_id, "set": "sql", "env": "sql", "query": "q", "hardness": "easy"},
                      env="sql", sandbox="sqlite", status="submitted", reward=1.0 if solved else 0.0)
    traj.turns = [Turn(index=i, author="human", action=f"SELECT {i};", observation=str(i)) for i in range(turns)]
    return traj.to_dict()


def write(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def mistyped() -> dict:
    data = episode("m", True, turns=4)
    data["turns"][3]["reward"] = "1.0"
    return data


def missing() -> dict:
    data = episode("n", True)
    del data["turns"][1]["action"]
    return data


def bad_usage() -> dict:
    data = episode("u", True)
    data["policy"]["usage"] = {"prompt_tokens": "many"}
    return data


def huge(path: Path) -> Path:
    """A 50 MB trajectory-shaped file (written in chunks, never held whole)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        f.write('{"task": {"id": "h"}, "env": "sql", "sandbox": "sqlite", "turns": [], "error": "')
        chunk = "x" * (1 << 20)
        for _ in range(50):
            f.write(chunk)
        f.write('"}')
    return path


DEEP = "[" * 10_000 + "]" * 10_000

# each bad file, and the sentence it gets (after the file's name)
BAD = {
    "corrupt.json": (lambda: json.dumps(episode("c", True))[:-30], "not JSON or JSONL: "),
    "list.json": (lambda: [1, 2], "a list, neither an icplay trajectory nor an InterCode results or log file"),
    "mistyped.json": (mistyped, "turns[3].reward is a string, not a number or null"),
    "missing.json": (missing, "turns[1].action is missing"),
    "usage.json": (bad_usage, "policy.usage.prompt_tokens is a string, not a number or null"),
    "deep.json": (lambda: DEEP, f"nested more than {MAX_DEPTH} levels deep, over the limit"),
}


# -- one file, one sentence ---------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_file_is_one_error_naming_file_and_field(tmp_path, name):
    make, sentence = BAD[name]
    path = write(tmp_path / name, make())
    with pytest.raises(TrajectoryFileError) as caught:
        load_trajectory(path)
    text = str(caught.value)
    assert text.startswith(f"{path}: ")
    if name == "corrupt.json":
        assert "not a trajectory file, not JSON: " in text
    elif name == "list.json":
        assert text == f"{path}: not a trajectory file: its JSON is a list, not an object"
    else:
        assert text == f"{path}: {sentence}" or text.startswith(f"{path}: {sentence}"), text


def test_the_top_level_and_required_fields_are_checked(tmp_path):
    data = episode("t", True)
    del data["env"]
    with pytest.raises(TrajectoryFileError, match=r"t\.json: env is missing$"):
        load_trajectory(write(tmp_path / "t.json", data))
    data = episode("t", True)
    data["turns"] = {"0": {}}
    with pytest.raises(TrajectoryFileError, match=r"t\.json: turns is an object, not a list$"):
        load_trajectory(write(tmp_path / "t.json", data))
    data = episode("t", True)
    data["turns"][1] = "SELECT 1"
    with pytest.raises(TrajectoryFileError, match=r"t\.json: turns\[1\] is a string, not an object$"):
        load_trajectory(write(tmp_path / "t.json", data))
    data = episode("t", True)
    data["reward"] = True
    with pytest.raises(TrajectoryFileError, match=r"t\.json: reward is true or false, not a number or null$"):
        load_trajectory(write(tmp_path / "t.json", data))


def test_a_50_mb_file_is_refused_before_it_is_read(tmp_path, monkeypatch):
    path = huge(tmp_path / "huge.json")
    real_read_bytes = Path.read_bytes
    read: list[Path] = []
    monkeypatch.setattr(Path, "read_bytes", lambda self: read.append(self) or real_read_bytes(self))
    with pytest.raises(TrajectoryFileError) as caught:
        load_trajectory(path)
    assert str(caught.value) == (f"{path}: 50 MB, over the 32 MB limit for a trajectory file that "
                                 "ICPLAY_MAX_FILE_MB sets")
    assert read == []                      # refused on its size alone
    monkeypatch.setenv("ICPLAY_MAX_FILE_MB", "64")
    assert load_trajectory(path).error.startswith("xxx")     # the limit was the only reason


def test_10000_levels_of_nesting_are_refused_without_recursion(tmp_path):
    assert nesting_depth(DEEP.encode()) == 10_000
    assert nesting_depth(DEEP.encode(), MAX_DEPTH) == MAX_DEPTH + 1          # counting stops past the limit
    # brackets in strings do not count
    assert nesting_depth(b'{"a": "[[[[\\\\", "b": ["\\"]"], "c": {"d": [{}]}}') == 4
    assert nesting_depth(b"[" * 10_000 + b"}") == 10_000                     # unbalanced: still counted
    assert nesting_depth(json.dumps(episode("a", True)).encode()) == 4
    path = write(tmp_path / "deep.json", '{"task": {}, "env": "sql", "sandbox": "x", "turns": ' + DEEP + "}")
    with pytest.raises(TrajectoryFileError) as caught:
        load_trajectory(path)
    assert str(caught.value) == (f"{path}: nested more than {MAX_DEPTH} levels deep, over the limit for a "
                                 "trajectory file")


# -- a folder of good and bad files: counted, named, the rest read ------------------------------

def mixed_folder(root: Path) -> Path:
    folder = root / "run"
    write(folder / "sql" / "a.json", episode("a", True))
    write(folder / "sql" / "b.json", episode("b", True, turns=3))
    write(folder / "sql" / "c.json", episode("c", False))
    for name, (make, _) in BAD.items():
        write(folder / "sql" / name, make())
    huge(folder / "sql" / "huge.json")
    return folder


def check_note(line: str, folder: Path) -> None:
    """The one line that names the skipped files, exactly."""
    reasons = {name: sentence for name, (_, sentence) in BAD.items()}
    reasons["huge.json"] = "50 MB, over the 32 MB limit for a trajectory or results file that ICPLAY_MAX_FILE_MB sets"
    reasons["deep.json"] += " for a trajectory or results file"
    try:
        json.loads((folder / "sql" / "corrupt.json").read_text())
    except json.JSONDecodeError as exc:
        reasons["corrupt.json"] += f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    parts = [f"{folder / 'sql' / name} ({reasons[name]})" for name in sorted(reasons)]
    assert line == "icplay: 7 files skipped: " + "; ".join(parts)


def test_load_logs_counts_and_names_the_bad_files_and_reads_the_rest(tmp_path):
    folder = mixed_folder(tmp_path)
    skipped: list[Skipped] = []
    trajs, _ = load_logs(folder, skipped)
    assert sorted(t.task["id"] for t in trajs) == ["a", "b", "c"]
    assert [Path(s.path).name for s in skipped] == ["corrupt.json", "deep.json", "huge.json", "list.json",
                                                    "missing.json", "mistyped.json", "usage.json"]
    assert skipped_note(skipped).startswith("7 files skipped: ")
    with pytest.raises(TrajectoryFileError, match="corrupt.json: not JSON or JSONL"):
        load_logs(folder)                  # a caller that collects nothing hears of the first one


def test_report_counts_and_names_the_bad_files_and_reports_the_good_ones(tmp_path):
    folder = mixed_folder(tmp_path)
    done = icplay("report", str(folder), "--json")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    (run,) = json.loads(done.stdout)["runs"]
    assert (run["episodes"], run["solved"], run["mean_turns"]) == (3, 2, pytest.approx(7 / 3))
    skipped = json.loads(done.stdout)["skipped"]
    assert len(skipped) == 7
    assert {"path": str(folder / "sql" / "mistyped.json"),
            "reason": "turns[3].reward is a string, not a number or null"} in skipped
    (line,) = done.stderr.strip().splitlines()
    check_note(line, folder)

    table = icplay("report", str(folder), "--no-curve")
    assert table.returncode == 0
    lines = [" ".join(line.split()) for line in table.stdout.splitlines()]
    assert "episodes 3" in lines and "solved (InterCode) 2 (66.7%)" in lines, table.stdout
    assert table.stderr.strip().splitlines() == [line]


def test_report_of_several_logs_goes_on_past_a_bad_one(tmp_path):
    good = write(tmp_path / "good.json", episode("g", True))
    bad = write(tmp_path / "bad.json", mistyped())
    done = icplay("report", str(bad), str(good), "--json")
    assert done.returncode == 0, done.stderr
    assert [r["episodes"] for r in json.loads(done.stdout)["runs"]] == [1]
    assert done.stderr.strip() == f"icplay: 1 file skipped: {bad} (turns[3].reward is a string, not a number or null)"
    only_bad = icplay("report", str(bad))
    assert only_bad.returncode == 1
    assert only_bad.stderr.strip() == (f"icplay: no trajectory to report; 1 file skipped: {bad} "
                                       "(turns[3].reward is a string, not a number or null)")


def test_export_counts_and_names_the_bad_files_and_exports_the_good_ones(tmp_path):
    folder = mixed_folder(tmp_path)
    out = tmp_path / "episodes.csv"
    done = icplay("export", "csv", str(folder), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert len(out.read_text().strip().splitlines()) == 1 + 3
    rule, count, note = done.stderr.strip().splitlines()
    assert rule.startswith("icplay: exporting episodes of every outcome")   # which episodes go in, said
    assert count == f"icplay: 3 csv record(s) from 3 of 3 episodes written to {out}"
    check_note(note, folder)
    solved = icplay("export", "chat", str(folder), "--solved", "intercode", "--out", str(tmp_path / "chat.jsonl"))
    assert solved.returncode == 0, solved.stderr
    assert len((tmp_path / "chat.jsonl").read_text().strip().splitlines()) == 2


def test_the_browser_scan_names_the_bad_files_warm_and_cold(tmp_path):
    folder = mixed_folder(tmp_path)
    cache = tmp_path / "index.json"
    for _ in ("cold", "warm"):
        skipped: list[Skipped] = []
        rows = scan([folder], cache=cache, skipped=skipped)
        assert sorted(r.task for r in rows) == ["a", "b", "c"]
        assert sorted(Path(s.path).name for s in skipped) == ["corrupt.json", "deep.json", "huge.json", "list.json",
                                                             "missing.json", "mistyped.json", "usage.json"]
        assert Skipped(str(folder / "sql" / "missing.json"), "turns[1].action is missing") in skipped


# -- saving: a failed write stops the episode, the file keeps its last save ---------------------

def test_a_failed_save_is_a_store_error_and_the_file_keeps_the_last_save(tmp_path, monkeypatch):
    store = TrajectoryStore(tmp_path / "s")
    traj = Trajectory.from_dict(episode("f", False))
    traj.status = "running"
    store.save(traj)
    traj.turns.append(Turn(index=2, author="human", action="SELECT 9;", observation="9"))
    real_fsync = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(StoreWriteError) as caught:
        store.save(traj)
    monkeypatch.setattr(os, "fsync", real_fsync)
    path = store.path_for(traj)
    assert str(caught.value) == (f"cannot save {path}: No space left on device; the episode is stopped and its 2 "
                                 "turn(s) saved before are kept (free some space or make the folder writable, then "
                                 "play the task again to resume)")
    assert len(load_trajectory(path).turns) == 2
    assert [p.name for p in path.parent.iterdir()] == [path.name]      # no temporary file left


ABANDON = """
import os, sys
from icplay.episode import Trajectory
from icplay.store import TrajectoryStore
traj = Trajectory.from_dict({"task": {"id": sys.argv[2], "set": "sql"}, "env": "sql", "sandbox": "sqlite"})
TrajectoryStore(sys.argv[1]).save(traj)            # claimed and saved "running"
print("saved", flush=True)
if sys.argv[3] == "die":
    os._exit(9)                                     # no final save: the claim's lock file stays
sys.stdin.read()                                    # alive: holds the claim until stdin closes
"""


def test_the_next_start_stops_episodes_whose_process_is_gone_and_leaves_live_ones(tmp_path):
    root = tmp_path / "s"
    dead = subprocess.run([sys.executable, "-c", ABANDON, str(root), "dead", "die"], capture_output=True, text=True,
                          timeout=60)
    assert dead.returncode == 9 and dead.stdout == "saved\n"
    live = subprocess.Popen([sys.executable, "-c", ABANDON, str(root), "live", "wait"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert live.stdout.readline() == "saved\n"
        fixed = TrajectoryStore(root).stop_abandoned()
        assert fixed == [root / "sql" / "dead.json"]
        back = load_trajectory(root / "sql" / "dead.json")
        assert back.status == "stopped"
        assert back.error.startswith("icplay ended without closing this episode (pid ")
        assert load_trajectory(root / "sql" / "live.json").status == "running"     # its process is alive
        assert not (root / ".locks" / "sql" / "dead.json.lock").exists()
        assert TrajectoryStore(root).stop_abandoned() == []                        # once
    finally:
        live.stdin.close()
        live.wait(timeout=60)


# -- a real full disk and a real read-only home, under a private tmpfs --------------------------

@pytest.fixture(scope="module")
def private_mounts() -> None:
    if shutil.which("unshare") is None:
        unavailable("unshare (util-linux) is not installed")
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                            "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True, text=True)
    if probe.returncode != 0:
        unavailable(f"cannot mount a private tmpfs: {probe.stderr.strip()}")


DRIVE = r"""
import json, os, subprocess, sys, time
from pathlib import Path
home, how, out = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(home)], check=True)
env = {**os.environ, "ICPLAY_HOME": str(home)}
cmd = [sys.executable, "-m", "icplay.cli", "play", "sql", "--plain", "--sandbox", "sqlite", "--session", "s"]
file = home / "trajectories" / "s" / "sql" / "bookshop-01.json"
big = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 60000) "
       "SELECT x, hex(randomblob(40)) FROM c;")


def saved_turns():
    try:
        return len(json.loads(file.read_text())["turns"])
    except (OSError, ValueError):
        return -1


p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
p.stdin.write("SELECT 1;\n"); p.stdin.flush()
while saved_turns() < 1 and p.poll() is None:      # the first turn is on disk
    time.sleep(0.05)
if how == "read-only":
    # a read-only bind over the home (a remount would be refused: icplay has files open there)
    subprocess.run(["mount", "--bind", str(home), str(home)], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", str(home)], check=True)
    p.stdin.write("SELECT 2;\n")                   # its save meets a read-only home
else:
    p.stdin.write(big + "\n")                      # a 1 MB observation: its save fills the disk
p.stdin.write("SELECT 3;\n:quit\n"); p.stdin.close()
first = {"rc": p.wait(timeout=120), "stdout": p.stdout.read(), "stderr": p.stderr.read(),
         "file": json.loads(file.read_text()),
         "lock": (home / "trajectories/s/.locks/sql/bookshop-01.json.lock").exists()}
if how == "read-only":
    subprocess.run(["umount", str(home)], check=True)                        # writable again
else:
    subprocess.run(["mount", "-o", "remount,size=16m", str(home)], check=True)    # space again
# the next start: a session opened (as play opens it), before any episode is
probe = subprocess.run([sys.executable, "-c", "from icplay.session import Session; "
                        "print([str(p) for p in Session('s').stopped_abandoned])"], env=env, capture_output=True,
                       text=True)
after = json.loads(file.read_text())
again = subprocess.run(cmd, input="SELECT 4;\n:quit\n", env=env, capture_output=True, text=True, timeout=120)
out.write_text(json.dumps({"first": first, "probe": probe.stdout + probe.stderr, "after": after,
                           "again": {"rc": again.returncode, "stdout": again.stdout, "stderr": again.stderr,
                                     "file": json.loads(file.read_text())}}))
"""


@pytest.mark.parametrize("how,why", [("full", "No space left on device"), ("read-only", "Read-only file system")])
def test_a_full_disk_or_read_only_home_stops_the_episode_in_one_sentence(private_mounts, tmp_path, how, why):
    home, out = tmp_path / "home", tmp_path / "out.json"
    home.mkdir()
    script = tmp_path / "drive.py"
    script.write_text(DRIVE)
    done = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", sys.executable, str(script), str(home),
                           how, str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    first = result["first"]
    file = home / "trajectories" / "s" / "sql" / "bookshop-01.json"
    assert first["rc"] == 1, first
    assert "Traceback" not in first["stderr"], first["stderr"]
    line = first["stderr"].strip().splitlines()[-1]
    assert line == (f"icplay: cannot save {file}: {why}; the episode is stopped and its 1 turn(s) saved before "
                    "are kept (free some space or make the folder writable, then play the task again to resume)")
    # the finished turn is intact; the file still says running (no write could say otherwise)
    assert [t["action"] for t in first["file"]["turns"]] == ["SELECT 1;"]
    assert first["file"]["status"] == "running" and first["lock"]
    # the next start marks it stopped, with a note
    assert str(file) in result["probe"], result["probe"]
    assert result["after"]["status"] == "stopped"
    assert result["after"]["error"].startswith("icplay ended without closing this episode (pid ")
    assert [t["action"] for t in result["after"]["turns"]] == ["SELECT 1;"]
    # and play resumes it: the saved turn replayed, the new one added
    again = result["again"]
    assert again["rc"] == 0, again["stderr"]
    assert "(resumed: 1 saved turn(s) replayed)" in again["stdout"]
    assert [t["action"] for t in again["file"]["turns"]] == ["SELECT 1;", "SELECT 4;"]


# -- resume: an unreadable file is set aside whole, named, and the task starts afresh -----------

def test_resume_sets_an_unreadable_file_aside_names_it_and_plays_on(tmp_path):
    home = tmp_path / "home"
    file = home / "trajectories" / "s" / "sql" / "bookshop-01.json"
    bad = mistyped()
    bad["task"] = {"id": "bookshop-01", "set": "sql"}
    write(file, bad)
    original = file.read_bytes()
    done = icplay("play", "sql", "--plain", "--sandbox", "sqlite", "--session", "s", input="SELECT 1;\n:quit\n",
                  env={"ICPLAY_HOME": str(home)})
    assert done.returncode == 0, done.stderr
    kept = home / "attempts" / "s" / "sql" / "bookshop-01.1.json"
    assert [line for line in done.stderr.splitlines() if line.startswith("icplay:")] == [
        f"icplay: {file}: turns[3].reward is a string, not a number or null; kept as {kept}, the task starts afresh"]
    assert kept.read_bytes() == original                     # moved, not rewritten
    assert [t.action for t in load_trajectory(file).turns] == ["SELECT 1;"]


RUN_FULL = r"""
import json, os, shutil, subprocess, sys
from pathlib import Path
home, out = Path(sys.argv[1]), Path(sys.argv[2])
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(home)], check=True)
env = {**os.environ, "ICPLAY_HOME": str(home)}
cmd = [sys.executable, "-m", "icplay.cli", "run", "sql", "--tasks", "sql", "--policy", "gold", "--sandbox", "sqlite",
       "--out", str(home / "run"), "--limit", "6", "--quiet"]
warm = cmd[:cmd.index("--out") + 1] + [str(home / "warm"), "--limit", "1"]
subprocess.run(warm, env=env, capture_output=True, check=True)          # the SQLite template is made once
shutil.rmtree(home / "warm")
free = shutil.disk_usage(home).free
with open(home / "filler", "wb") as f:          # leave 16 KB: a few episodes fit, then the disk is full
    f.write(b"\0" * (free - 16384))
first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
files = {p.name: json.loads(p.read_text()) for p in sorted((home / "run").rglob("*.json")) if p.name != "run.json"}
(home / "filler").unlink()
again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
attempts = [json.loads(p.read_text()) for p in sorted((home / ".attempts").rglob("*.json"))]
final = {p.name: json.loads(p.read_text())["status"] for p in sorted((home / "run").rglob("*.json"))
         if p.name != "run.json"}
out.write_text(json.dumps({"rc": first.returncode, "stderr": first.stderr, "files": files,
                           "again": [again.returncode, again.stderr], "attempts": attempts, "final": final}))
"""


def test_a_full_disk_stops_a_run_in_one_sentence_and_the_rerun_finishes_it(private_mounts, tmp_path):
    home, out = tmp_path / "home", tmp_path / "out.json"
    home.mkdir()
    script = tmp_path / "run_full.py"
    script.write_text(RUN_FULL)
    done = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", sys.executable, str(script), str(home),
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["rc"] == 1 and "Traceback" not in result["stderr"], result["stderr"]
    (line,) = [x for x in result["stderr"].splitlines() if x.startswith("icplay:")]
    assert line.startswith(f"icplay: stopped: cannot save {home}/run/sql/") and ": No space left on device; the " \
        "episode is stopped and its " in line, line
    assert line.endswith("rerun the same command to finish them"), line
    # every file on disk is a complete save; the one that could not be saved says running
    statuses = sorted(f["status"] for f in result["files"].values())
    assert statuses.count("running") == 1 and set(statuses) <= {"running", "submitted"}, statuses
    # the rerun marks it stopped (kept in attempts with the note) and finishes the run
    assert result["again"][0] == 0, result["again"][1]
    (left,) = result["attempts"]
    assert left["status"] == "stopped" and left["error"].startswith("icplay ended without closing this episode")
    assert list(result["final"].values()) == ["submitted"] * 6
