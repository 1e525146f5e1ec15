"""The study file and the assignment: balance, determinism, and one sentence per bad input."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from icplay.study.assign import assign
from icplay.study.model import (Study, StudyFileError, StudyRules, load_study, save_study, study_dir,
                                study_trajectories)

TASKS = tuple(f"sql/{i}" for i in range(6))
WHO = ("ana", "ben", "cho")


def make(tmp_path: Path, **rules) -> Study:
    return Study("pilot", TASKS, WHO, 2, 7, assign(TASKS, WHO, 2, 7), StudyRules(**rules), "2026-01-01T00:00:00Z")


@pytest.mark.parametrize("n_tasks,annotators,k", [(6, 3, 2), (7, 3, 2), (5, 4, 3), (10, 3, 1), (4, 4, 4), (1, 5, 2)])
def test_each_task_k_times_by_different_people_and_balanced(n_tasks, annotators, k):
    tasks = [f"s/{i}" for i in range(n_tasks)]
    who = [f"a{i}" for i in range(annotators)]
    out = assign(tasks, who, k, seed=3)
    counts = Counter(ref for refs in out.values() for ref in refs)
    assert counts == {ref: k for ref in tasks}
    assert all(len(set(refs)) == len(refs) for refs in out.values())       # never twice to one person
    sizes = [len(out[a]) for a in who]
    assert max(sizes) - min(sizes) <= 1


def test_same_seed_same_assignment_other_seed_other_order():
    one, two = assign(TASKS, WHO, 2, 7), assign(TASKS, WHO, 2, 7)
    assert one == two
    others = [assign(TASKS, WHO, 2, s) for s in range(8, 14)]
    assert any(o != one for o in others)
    # the order is each annotator's own: not all the same sequence of their common tasks
    big = assign([f"s/{i}" for i in range(30)], WHO, 3, 1)
    assert len({refs for refs in big.values()}) == 3 and all(len(r) == 30 for r in big.values())


@pytest.mark.parametrize("tasks,who,k,field", [
    (TASKS, WHO, 4, "--per-task"), (TASKS, ("a", "b", "a"), 2, "--annotators"), ((), WHO, 1, "--tasks"),
    (TASKS, WHO, 0, "--per-task")])
def test_impossible_assignments_are_one_sentence(tasks, who, k, field):
    with pytest.raises(StudyFileError) as err:
        assign(tasks, who, k, 1)
    assert str(err.value).startswith(field) and "\n" not in str(err.value)


def test_saved_file_reads_back_and_is_human_editable(tmp_path):
    study = make(tmp_path, time_limit_s=600, retries="counted")
    path = save_study(study, home=tmp_path)
    assert path == study_dir("pilot", tmp_path) / "study.toml"
    back = load_study("pilot", home=tmp_path)
    assert (back.tasks, back.annotators, back.per_task, back.seed, back.assignments, back.rules) == \
        (study.tasks, study.annotators, study.per_task, study.seed, study.assignments, study.rules)
    assert back.path == path
    assert load_study(str(path)).assignments == study.assignments          # by path too
    # the lead moves one of ana's tasks to whoever lacks it: still each task twice, accepted
    ref = study.assignments["ana"][0]
    taker = next(w for w in WHO if ref not in study.assignments[w])
    text = path.read_text()
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("ana = "):
            lines[i] = line.replace(f'"{ref}", ', "").replace(f', "{ref}"', "").replace(f'"{ref}"', "")
        if line.startswith(f"{taker} = "):
            lines[i] = line.replace("[", f'["{ref}", ', 1)
    path.write_text("\n".join(lines) + "\n")
    edited = load_study("pilot", home=tmp_path)
    assert edited.assignments[taker][0] == ref and ref not in edited.assignments["ana"]


def test_no_time_limit_reads_back_as_none(tmp_path):
    save_study(make(tmp_path), home=tmp_path)
    assert load_study("pilot", home=tmp_path).rules == StudyRules()


@pytest.mark.parametrize("edit,field", [
    (("per_task = 2", "per_task = 5"), "'per_task'"),
    (('annotators = ["ana", "ben", "cho"]', 'annotators = ["ana", "ben", "ana"]'), "'annotators'"),
    (('retries = "off"', 'retries = "sometimes"'), "'rules.retries'"),
    (("gold_reveal = false", 'gold_reveal = "no"'), "'rules.gold_reveal'"),
    (("strict = false", "strict = false\nsecret = 1"), "'rules.secret'"),
    (("seed = 7", "seed = seven"), "not valid TOML"),
    (('name = "pilot"', 'name = "../x"'), "'name'"),
    (("[assignments]", "[assignments]\ndan = []"), "'assignments.dan'"),
])
def test_a_bad_edit_is_one_sentence_naming_file_and_field(tmp_path, edit, field):
    path = save_study(make(tmp_path), home=tmp_path)
    text = path.read_text()
    assert edit[0] in text
    path.write_text(text.replace(edit[0], edit[1], 1))
    with pytest.raises(StudyFileError) as err:
        load_study("pilot", home=tmp_path)
    message = str(err.value)
    assert str(path) in message and field in message and "\n" not in message


def test_a_task_assigned_once_too_few_names_the_task(tmp_path):
    study = make(tmp_path)
    path = save_study(study, home=tmp_path)
    ref = study.assignments["ben"][-1]
    lines = [line.replace(f', "{ref}"]', "]") if line.startswith("ben = ") else line
             for line in path.read_text().splitlines()]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(StudyFileError, match=f"'assignments': task '{ref}' is assigned to 1"):
        load_study("pilot", home=tmp_path)


def test_missing_study_says_how_to_make_one(tmp_path):
    with pytest.raises(StudyFileError, match="icplay study new"):
        load_study("nope", home=tmp_path)


def test_study_trajectories_reads_sessions_attempts_merged_and_names_bad_files(tmp_path):
    from icplay.episode import Trajectory
    from icplay.store import save_trajectory

    study = make(tmp_path)
    save_study(study, home=tmp_path)
    root = study_dir("pilot", tmp_path)

    def traj(who, ref, attempt):
        s, i = ref.split("/")
        return Trajectory(task={"set": s, "id": i}, env="sql", sandbox="local", annotator=who, attempt=attempt,
                          study="pilot", status="submitted", reward=1.0)

    save_trajectory(traj("ana", "sql/0", 2), root / "sessions/ana/sql/0.json")
    save_trajectory(traj("ana", "sql/0", 1), root / "sessions/.attempts/ana/sql/0.1.json")
    save_trajectory(traj("ben", "sql/1", 1), root / "merged/ben/sql/1.abc.json")
    (root / "sessions/ana/.locks/sql").mkdir(parents=True)
    (root / "sessions/ana/.locks/sql/0.json.lock").write_text("1")
    (root / "sessions/cho/sql").mkdir(parents=True)
    (root / "sessions/cho/sql/2.json").write_text("{not json")
    (root / "sessions/zed/sql").mkdir(parents=True)      # not an annotator of the study: not read
    save_trajectory(traj("zed", "sql/0", 1), root / "sessions/zed/sql/0.json")
    skipped: list = []
    found = list(study_trajectories(study, home=tmp_path, skipped=skipped))
    assert sorted((t.annotator, t.task_key, t.attempt) for t in found) == [
        ("ana", "sql/0", 1), ("ana", "sql/0", 2), ("ben", "sql/1", 1)]
    assert len(skipped) == 1 and skipped[0][0].name == "2.json" and "not JSON" in str(skipped[0][1])
