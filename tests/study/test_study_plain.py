"""``icplay play --study NAME --annotator A --plain`` on the bundled SQL set (SQLite, no Docker):
A's queue in her order, resumed across runs from the saved files, and the study's rules held:
no gold and no retry when they are off, counted attempts when retries are counted, the time
limit ending a task with its turns kept."""

from __future__ import annotations

import os
import subprocess
import sys

from study_helpers import ROOT, WRONG, gold, icplay, new_study, play, status

from icplay.store import load_trajectory
from icplay.study.model import load_study


def test_a_queue_played_to_the_end_over_two_runs_with_the_rules_off(tmp_path):
    home = tmp_path / "home"
    new_study(home)
    mine = load_study("pilot", home).assigned_to("ana")
    assert len(mine) == 4
    # day one: the first task solved; gold and retry refused after it; the second left half done
    first = play(home, "ana", [gold(mine[0]), "submit", ":gold", ":retry", "", WRONG])
    out = first.stdout
    assert f"=== task {mine[0]} (1 of 4 in ana's queue)" in out and "reward: 1.00" in out
    assert "(refused: this study does not show the gold (rules.gold_reveal = false in" in out
    assert "(refused: this task is done and this study allows no retries (rules.retries = \"off\" in" in out
    assert "gold solution" not in out
    assert "next: [enter] or :next the next task · :quit" in out         # the refused moves not offered
    assert f"=== task {mine[1]} (2 of 4 in ana's queue)" in out and "(stopped; saved in" in out
    assert status(home)["ana"] | {"time_worked": 0} == {
        "annotator": "ana", "assigned": 4, "done": 1, "left": 3, "in_progress": 1, "attempts": 2, "time_worked": 0}

    # a done task asked for by name: refused in one line, nothing opened
    again = play(home, "ana", [], "--task", mine[0], check=False)
    assert again.returncode == 1 and "allows no retries" in again.stderr and "=== task" not in again.stdout

    # day two: the half-done task resumes (its turn replayed), then the rest, to the end
    lines = [gold(mine[1]), "submit", ""] + [x for ref in mine[2:] for x in (gold(ref), "submit", "")]
    second = play(home, "ana", lines)
    out = second.stdout
    assert out.startswith("study pilot · ana: 1 done, 3 left of 4")
    assert f"=== task {mine[1]} (2 of 4 in ana's queue)" in out and "(resumed: 1 saved turn(s) replayed)" in out
    assert out.count("reward: 1.00") == 3 and "ana's queue is done: 4 of 4 tasks" in out
    row = status(home)["ana"]
    assert (row["done"], row["left"], row["in_progress"], row["attempts"]) == (4, 0, 0, 4)
    assert row["time_worked"] > 0
    assert status(home)["ben"]["done"] == 0

    saved = [load_trajectory(home / "studies/pilot/sessions/ana" / f"{ref}.json") for ref in mine]
    assert {(t.study, t.annotator, t.attempt, t.status, t.reward) for t in saved} == {("pilot", "ana", 1, "submitted",
                                                                                     1.0)}
    assert [t.turns[0].action for t in saved[1:2]] == [WRONG]       # day one's turn kept in the resumed episode


def test_counted_retries_after_a_gold_reveal_are_numbered_attempts(tmp_path):
    home = tmp_path / "home"
    new_study(home, "--gold-reveal", "--retries", "counted")
    ref = load_study("pilot", home).assigned_to("ben")[0]
    done = play(home, "ben", [WRONG, "submit", ":gold", ":retry", gold(ref), "submit", ":quit"])
    out = done.stdout
    assert "reward: 0.00" in out and "gold solution:" in out and gold(ref).rstrip(";") in out
    assert "next: [enter] or :next the next task · :gold show the gold · :retry try this task again · :quit" in out
    assert "(attempt 2, after the gold was seen)" in out and "reward: 1.00" in out
    session = home / "studies/pilot/sessions"
    first = load_trajectory(session / ".attempts/ben" / f"{ref}.1.json")
    second = load_trajectory(session / "ben" / f"{ref}.json")
    assert (first.attempt, first.reward, first.gold_seen_at is not None) == (1, 0.0, True)
    assert (second.attempt, second.reward, second.after_gold_seen, second.study) == (2, 1.0, True, "pilot")
    row = status(home)["ben"]
    assert (row["done"], row["attempts"]) == (1, 2)
    # asked for by name, the done task opens a third attempt (counted)
    third = play(home, "ben", [WRONG, "submit", ":quit"], "--task", ref)
    assert "(attempt 3, after the gold was seen)" in third.stdout
    assert status(home)["ben"]["attempts"] == 3


def test_the_time_limit_ends_the_task_and_keeps_its_turns(tmp_path):
    home = tmp_path / "home"
    new_study(home, "--time-limit", "2")
    ref = load_study("pilot", home).assigned_to("cho")[0]
    env = {**os.environ, "ICPLAY_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    env.pop("ICPLAY_ANNOTATOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "icplay.cli", "play", "--study", "pilot", "--annotator", "cho",
                             "--plain", "--sandbox", "sqlite"], cwd=ROOT, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(WRONG + "\n")
    proc.stdin.flush()
    seen = ""
    while "next> " not in seen:           # the limit ends the task; stdin stays open meanwhile
        line = proc.stdout.readline()
        assert line, f"ended early:\n{seen}\n{proc.stderr.read() if proc.stderr else ''}"
        seen += line
        if "time is up" in line:
            break
    proc.stdin.write(":retry\n:quit\n")
    proc.stdin.close()
    rest = proc.stdout.read()
    err = proc.stderr.read() if proc.stderr else ""
    assert proc.wait(timeout=120) == 0 and "Traceback" not in err
    assert "(time is up: the study's time limit of 2 s per task was reached" in seen
    assert "allows no retries" in rest
    traj = load_trajectory(home / "studies/pilot/sessions/cho" / f"{ref}.json")
    assert traj.status == "stopped" and traj.time_worked >= 2 and [t.action for t in traj.turns] == [WRONG]
    assert "time limit" in (traj.error or "")
    row = status(home)["cho"]
    assert (row["done"], row["in_progress"]) == (1, 0)
    # the next run goes on with the next task: the timed-out one is done
    nxt = play(home, "cho", [":quit"])
    assert f"=== task {load_study('pilot', home).assigned_to('cho')[1]} (2 of 4" in nxt.stdout


def test_play_study_errors_are_one_sentence(tmp_path):
    home = tmp_path / "home"
    new_study(home)
    cases = {("--study", "pilot", "--plain"): "--annotator NAME",
             ("--study", "pilot", "--plain", "--annotator", "zed"): "'zed' is not an annotator of study 'pilot'",
             ("--study", "nope", "--plain", "--annotator", "ana"): "no such study file",
             ("--study", "pilot", "--plain", "--annotator", "ana", "--task", "bookshop-40"): "not in ana's queue",
             ("--study", "pilot", "--annotator", "ana"): "needs a terminal",
             ("sql", "--study", "pilot", "--annotator", "ana"): "leave out ENV, --tasks, --session and --out"}
    for argv, text in cases.items():
        done = icplay("play", *argv, home=home, check=False)
        assert done.returncode != 0 and text in done.stderr and len(done.stderr.strip().splitlines()) == 1, argv
    path = home / "studies/pilot/study.toml"
    path.write_text(path.read_text().replace("per_task = 2", "per_task = two"))
    done = icplay("play", "--study", "pilot", "--plain", "--annotator", "ana", home=home, check=False)
    assert done.returncode != 0 and str(path) in done.stderr and "not valid TOML" in done.stderr


def test_a_timed_out_task_retried_under_counted_retries_is_a_new_attempt(tmp_path):
    from icplay.episode import Trajectory
    from icplay.store import save_trajectory

    home = tmp_path / "home"
    new_study(home, "--time-limit", "60", "--retries", "counted")
    ref = load_study("pilot", home).assigned_to("cho")[0]
    set_name, task_id = ref.split("/")
    timed_out = Trajectory(task={"set": set_name, "id": task_id, "env": "sql"}, env="sql", sandbox="sqlite",
                           annotator="cho", attempt=1, study="pilot", status="stopped", time_worked=60.5,
                           error="the study's time limit of 1 min per task was reached")
    save_trajectory(timed_out, home / "studies/pilot/sessions/cho" / f"{ref}.json")
    assert status(home)["cho"]["done"] == 1
    done = play(home, "cho", [gold(ref), "submit", ":quit"], "--task", ref)
    assert "(attempt 2)" in done.stdout and "resumed" not in done.stdout and "reward: 1.00" in done.stdout
    kept = load_trajectory(home / "studies/pilot/sessions/.attempts/cho" / f"{ref}.1.json")
    now = load_trajectory(home / "studies/pilot/sessions/cho" / f"{ref}.json")
    assert (kept.id, kept.status, now.attempt, now.reward) == (timed_out.id, "stopped", 2, 1.0)
    assert status(home)["cho"]["attempts"] == 2


def test_a_study_that_hides_the_gold_shows_the_reward_without_its_breakdown(tmp_path):
    """The breakdown names the gold's rows (SQL), tests (Python) and files (Bash): with
    gold_reveal off the annotator sees the reward only, and the saved trajectory keeps it all."""
    home = tmp_path / "home"
    new_study(home)
    ref = load_study("pilot", home).assigned_to("ana")[0]
    out = play(home, "ana", [WRONG, "submit", ":quit"]).stdout
    assert "reward: 0.00" in out and "shows the reward only, not how it was computed" in out
    assert "gold_count" not in out and "iou" not in out
    saved = load_trajectory(home / "studies/pilot/sessions/ana" / f"{ref}.json")
    assert saved.breakdown and "gold_count" in saved.breakdown
