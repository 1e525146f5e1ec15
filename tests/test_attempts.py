"""Annotators and honest attempts (issue 22, items 1 and 3) without a sandbox: the store numbers
every attempt and keeps it, a gold reveal marks the later attempts of the same annotator, report
counts the first attempt unless told otherwise, the exports and the viewer's rows carry the
annotator, and older files still load."""

from __future__ import annotations

import csv
import io
import json

import pytest

from icplay.attempts import choose
from icplay.cli import main
from icplay.episode import Episode, Trajectory, Turn
from icplay.formats.atif import atif_document
from icplay.formats.export import chat_record, csv_text
from icplay.formats.summary import summarize
from icplay.frontend.config import ConfigError, NO_ANNOTATOR_NOTE, load_config, resolve_annotator
from icplay.session import Session
from icplay.store import load_trajectory, trajectory_json
from icplay.tasks.model import Task
from icplay.envs.base import StepResult, SubmitResult

TASK = Task(id="flag-1", set="ctf", env="ctf", query="find the flag", gold="icplay{right}")


class FlagEnv:
    """An env whose submit is the flag compared with the gold (CTF's rule), and whose step echoes."""

    name, sandbox_kind = "ctf", "fake"

    def reset(self, task):
        self.task = task
        return task.query

    def step(self, action, on_output=None):
        return StepResult(observation=f"ran {action}", exit_code=0, duration=0.0)

    def submit(self, arg=None):
        right = (arg or "").strip() == self.task.gold
        return SubmitResult(1.0 if right else 0.0, {"submitted": arg, "correct": right}, self.task.gold)

    def interrupt(self):
        pass


def play(session: Session, flag: str, see_gold: bool = False) -> Trajectory:
    episode, _ = session.open_episode(FlagEnv(), TASK, policy={"kind": "human", "ui": "plain", "user": "root"})
    episode.act("cat note.txt")
    episode.submit(flag)
    if see_gold:
        assert session.mark_gold_seen(episode.trajectory, when=1234.5)
    return episode.trajectory


def test_a_wrong_flag_the_gold_then_the_right_flag_stay_two_attempts(tmp_path, capsys):
    """The issue's scenario, at the session layer: 0.00, the gold shown, 1.00 on the retry."""
    session = Session("study", home=tmp_path, annotator="ada")
    first = play(session, "icplay{wrong}", see_gold=True)
    second = play(session, "icplay{right}")
    kept = session.store.attempt_paths("ctf", "flag-1")
    assert len(kept) == 1 and session.path_for(TASK).exists()          # both files exist
    old, new = load_trajectory(kept[0]), load_trajectory(session.path_for(TASK))
    assert (old.id, old.attempt, old.reward, old.gold_seen_at, old.after_gold_seen) == (first.id, 1, 0.0, 1234.5, False)
    assert (new.id, new.attempt, new.reward, new.gold_seen_at, new.after_gold_seen) == (second.id, 2, 1.0, None, True)
    assert new.annotator == old.annotator == "ada" and "user" not in new.policy     # never the OS account
    assert [t.info.get("annotator") for t in new.turns] == ["ada"]

    folder = str(session.root)
    assert main(["report", folder, "--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert default["attempts"] == "first"
    assert (default["runs"][0]["episodes"], default["runs"][0]["solved"], default["runs"][0]["after_gold"]) == (1, 0, 0)
    assert main(["report", folder, "--json", "--attempts", "best"]) == 0
    best = json.loads(capsys.readouterr().out)["runs"][0]
    assert (best["episodes"], best["solved"], best["after_gold"]) == (1, 1, 1)
    assert main(["report", folder, "--json", "--attempts", "all"]) == 0
    every = json.loads(capsys.readouterr().out)["runs"][0]
    assert (every["episodes"], every["solved"], every["after_gold"]) == (2, 1, 1)

    assert main(["report", folder, "--no-curve"]) == 0
    table = capsys.readouterr().out
    assert "counting: first attempt per task (pass@1)" in table and "0 (0.0%)" in table
    assert main(["report", folder, "--no-curve", "--attempts", "best"]) == 0
    table = capsys.readouterr().out
    assert "counting: best attempt per task" in table and "1 (100.0%)" in table
    assert "after the gold was shown" in table


def test_the_task_list_shows_every_attempt(tmp_path):
    session = Session("study", home=tmp_path, annotator="ada")
    play(session, "icplay{wrong}", see_gold=True)
    play(session, "icplay{right}")
    status = session.progress([TASK]).by_task[TASK.key]
    from icplay.session import attempts_line

    assert attempts_line(status.attempts) == "✗ 0.00 (attempt 1) · ✓ 1.00 (attempt 2, after gold)"


def test_the_gold_marks_only_the_same_annotators_later_attempts(tmp_path):
    home = tmp_path / "home"
    play(Session("shared", home=home, annotator="ada"), "icplay{wrong}", see_gold=True)
    bob = play(Session("shared", home=home, annotator="bob"), "icplay{right}")
    assert bob.attempt == 2 and not bob.after_gold_seen
    ada = play(Session("shared", home=home, annotator="ada"), "icplay{right}")
    assert ada.attempt == 3 and ada.after_gold_seen


def test_no_annotator_records_none_and_is_shown_as_such(tmp_path):
    session = Session("anon", home=tmp_path)
    traj = play(session, "icplay{right}")
    saved = load_trajectory(session.path_for(TASK))
    assert saved.annotator is None and "user" not in saved.policy and "annotator" not in saved.turns[0].info
    assert summarize(traj, "x.json", "anon").who == "(no annotator)"


def test_only_a_current_attempt_is_marked_gold_seen(tmp_path):
    session = Session("study", home=tmp_path, annotator="ada")
    first = play(session, "icplay{wrong}")
    play(session, "icplay{right}")
    assert not session.mark_gold_seen(first)          # an earlier attempt's dialog: left as it is
    assert load_trajectory(session.store.attempt_paths("ctf", "flag-1")[0]).gold_seen_at is None


def test_older_files_load_and_are_numbered_by_their_place(tmp_path):
    """Files written before attempts were recorded: no annotator, attempt, gold fields; the
    kept one is attempt n of its name, the current one comes after them."""
    def old(reward):
        d = Trajectory(task=TASK.to_dict(), env="ctf", sandbox="fake", status="submitted", reward=reward,
                       best_reward=reward, policy={"kind": "human", "user": "root"}).to_dict()
        for key in ("annotator", "attempt", "gold_seen_at", "after_gold_seen"):
            d.pop(key)
        return json.dumps(d)

    session = Session("old", home=tmp_path)
    (tmp_path / "attempts" / "old" / "ctf").mkdir(parents=True)
    (tmp_path / "attempts" / "old" / "ctf" / "flag-1.1.json").write_text(old(0.0))
    session.path_for(TASK).parent.mkdir(parents=True)
    session.path_for(TASK).write_text(old(1.0))
    attempts = session.all_attempts(TASK)
    assert [(t.attempt, t.reward, t.annotator) for t in attempts] == [(1, 0.0, None), (2, 1.0, None)]
    assert [t.reward for t in choose([attempts[1]], [attempts[0]], "first")] == [0.0]
    assert [t.reward for t in choose([attempts[1]], [attempts[0]], "best")] == [1.0]


def test_several_current_files_of_one_task_are_all_counted():
    """Not attempts of one another (an InterCode log, a merged folder): nothing is dropped."""
    a, b = (Trajectory(task=TASK.to_dict(), env="ctf", sandbox="x", status="submitted", reward=r) for r in (0.0, 1.0))
    assert len(choose([a, b], [], "first")) == 2


def test_report_splits_by_annotator(tmp_path, capsys):
    root = tmp_path / "merged"
    for name, reward in (("ada", 1.0), ("bob", 0.0)):
        task = {**TASK.to_dict(), "id": f"t-{name}"}
        t = Trajectory(task=task, env="ctf", sandbox="x", status="submitted", reward=reward, annotator=name)
        (root / "ctf").mkdir(parents=True, exist_ok=True)
        (root / "ctf" / f"t-{name}.json").write_text(trajectory_json(t))
    assert main(["report", str(root), "--no-curve"]) == 0
    head = capsys.readouterr().out.splitlines()[1]
    assert "merged · ada" in head and "merged · bob" in head


def test_exports_carry_the_annotator_and_the_attempt():
    t = Trajectory(task=TASK.to_dict(), env="ctf", sandbox="x", status="submitted", reward=1.0, annotator="ada",
                   attempt=2, after_gold_seen=True, gold_seen_at=None,
                   turns=[Turn(0, "human", "cat note.txt", "ran", info={"annotator": "ada"})])
    row = next(csv.DictReader(io.StringIO(csv_text([t]))))
    assert (row["annotator"], row["attempt"], row["after_gold_seen"]) == ("ada", "2", "1")
    doc = atif_document(t)
    assert doc["agent"]["extra"]["annotator"] == "ada" and doc["extra"]["attempt"] == 2
    assert doc["extra"]["after_gold_seen"] is True and doc["steps"][1]["extra"]["annotator"] == "ada"
    meta = chat_record(t)["metadata"]
    assert {k: meta[k] for k in ("episode", "annotator", "attempt", "after_gold_seen")} == \
        {"episode": t.id, "annotator": "ada", "attempt": 2, "after_gold_seen": True}
    bare = Trajectory(task=TASK.to_dict(), env="ctf", sandbox="x")
    meta = chat_record(bare)["metadata"]
    assert meta["annotator"] is None and meta["attempt"] is None    # older episodes: nothing is guessed
    assert next(csv.DictReader(io.StringIO(csv_text([bare]))))["annotator"] == ""


def test_the_annotator_comes_from_the_option_the_environment_or_config(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('[human]\nannotator = "cfg"\n')
    assert resolve_annotator(None, load_config(path, environ={})) == "cfg"
    assert resolve_annotator(None, load_config(path, environ={"ICPLAY_ANNOTATOR": "env"})) == "env"
    assert resolve_annotator("cli", load_config(path, environ={"ICPLAY_ANNOTATOR": "env"})) == "cli"
    assert resolve_annotator(None, load_config(tmp_path / "none.toml", environ={})) is None
    path.write_text('[human]\nannotator = ""\n')
    with pytest.raises(ConfigError, match="human.annotator"):
        load_config(path, environ={})
    path.write_text('[human]\nname = "x"\n')
    with pytest.raises(ConfigError, match="'human.name' is unknown"):
        load_config(path, environ={})
    assert "no annotator set" in NO_ANNOTATOR_NOTE


def test_a_bad_attempt_field_is_named():
    from icplay.store import TrajectoryFileError, trajectory_from_json

    d = Trajectory(task=TASK.to_dict(), env="ctf", sandbox="x").to_dict()
    d["attempt"] = "two"
    with pytest.raises(TrajectoryFileError, match="attempt"):
        trajectory_from_json(d, "x.json")


def test_an_agents_episode_signs_only_the_humans_turns(tmp_path):
    session = Session("watch", home=tmp_path, annotator="ada")
    episode, _ = session.open_episode(FlagEnv(), TASK, policy={"kind": "gold"})
    episode.act("ls", author="agent")
    episode.act("cat x", author="agent-edited-by-human", proposed="cat y")
    episode.act("echo", author="human")
    assert [t.info.get("annotator") for t in episode.trajectory.turns] == [None, "ada", "ada"]
    assert isinstance(Episode, type)


def test_the_browser_lists_every_attempt(tmp_path, monkeypatch):
    from icplay.formats.native import trajectory_folders
    from icplay.formats.summary import scan

    monkeypatch.setenv("ICPLAY_HOME", str(tmp_path))
    session = Session("study", home=tmp_path, annotator="ada")
    play(session, "icplay{wrong}", see_gold=True)
    play(session, "icplay{right}")
    assert trajectory_folders(tmp_path) == [tmp_path / "trajectories" / "study", tmp_path / "attempts" / "study"]
    rows = scan(trajectory_folders(tmp_path), cache=False)
    assert sorted((r.attempt, r.final, r.after_gold_seen, r.who) for r in rows) == [
        (1, 0.0, False, "ada"), (2, 1.0, True, "ada")]


def test_export_reads_every_attempt_when_asked(tmp_path, capsys):
    session = Session("study", home=tmp_path, annotator="ada")
    play(session, "icplay{wrong}", see_gold=True)
    play(session, "icplay{right}")
    out = tmp_path / "rows.csv"
    assert main(["export", "csv", str(session.root), "--out", str(out)]) == 0
    assert [r["attempt"] for r in csv.DictReader(out.open())] == ["2"]            # the latest, as before
    assert main(["export", "csv", str(session.root), "--out", str(out), "--attempts", "all"]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [(r["attempt"], r["final_reward"], r["after_gold_seen"], r["annotator"]) for r in rows] == [
        ("1", "0.0", "0", "ada"), ("2", "1.0", "1", "ada")]
    assert main(["export", "csv", str(session.root), "--out", str(out), "--attempts", "first"]) == 0
    assert [r["attempt"] for r in csv.DictReader(out.open())] == ["1"]


def test_a_task_whose_id_looks_like_an_attempt_is_not_numbered_by_its_name(tmp_path):
    task = Task(id="t.7", set="ctf", env="ctf", query="q", gold="icplay{right}")
    session = Session("dots", home=tmp_path)
    d = Trajectory(task=task.to_dict(), env="ctf", sandbox="x", status="submitted", reward=1.0).to_dict()
    d.pop("attempt")
    session.path_for(task).parent.mkdir(parents=True)
    session.path_for(task).write_text(json.dumps(d))
    assert [t.attempt for t in session.all_attempts(task)] == [1]
