"""Studies over a lead's own task file: ``icplay study new --tasks FILE`` with the environment
given by ``--env`` or read from the file's records; the study file keeps where the file is, so
``play --study`` and ``watch --study`` find its tasks; a bad ``[task_files]`` entry is one
sentence naming the file and field."""

from __future__ import annotations

import json

import pytest

from icplay.study.model import StudyFileError, load_study

from study_helpers import gold, icplay, play

MINE = [{"id": "m1", "db": "bookshop", "query": "List the titles of the Poetry books; break ties by title.",
         "gold": "SELECT title FROM books WHERE genre = 'Poetry' ORDER BY title"}]


def task_file(tmp_path, name="mine.json", env=None):
    path = tmp_path / "lead" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([{**r, **({"env": env} if env else {})} for r in MINE]))
    return path


@pytest.mark.parametrize("how", ["option", "records"])
def test_a_study_over_a_task_file_is_made_and_played(tmp_path, how):
    home = tmp_path / "home"
    path = task_file(tmp_path, env="sql" if how == "records" else None)
    env = ["--env", "sql"] if how == "option" else []
    icplay("study", "new", "own", "--tasks", str(path), "sql/bookshop-02", *env, "--annotators", "ana",
           "--per-task", "1", home=home)
    study = load_study("own", home)
    assert study.tasks == ("mine/m1", "sql/bookshop-02")
    assert study.task_files == {"mine": {"path": str(path.resolve()), "env": "sql"}}
    order = study.assigned_to("ana")
    lines = []
    for ref in order:
        lines += [gold(ref) if ref != "mine/m1" else MINE[0]["gold"] + ";", "submit", ""]
    done = play(home, "ana", lines, study="own")
    assert done.stdout.count("reward: 1.00") == 2, done.stdout


def test_a_task_file_without_its_environment_is_one_sentence_naming_the_option(tmp_path):
    done = icplay("study", "new", "own", "--tasks", str(task_file(tmp_path)), "--annotators", "ana", "--per-task",
                  "1", home=tmp_path / "home", check=False)
    assert done.returncode != 0 and "mine.json" in done.stderr and "--env" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    named = icplay("study", "new", "own", "--tasks", str(task_file(tmp_path, "sql.json", "sql")), "--annotators",
                   "ana", "--per-task", "1", home=tmp_path / "home", check=False)
    assert named.returncode != 0 and "rename the file" in named.stderr     # its name is a bundled set's
    assert "--env" in icplay("study", "new", "--help", home=tmp_path / "home").stdout


@pytest.mark.parametrize("entry, says", [
    ('mine = "x.json"', "field 'task_files.mine' must be a table"),
    ('mine = { path = "x.json" }', "field 'task_files.mine.env' must be non-empty text"),
    ('mine = { path = "x.json", env = "sql", db = "y" }', "field 'task_files.mine.db' is unknown"),
])
def test_a_bad_task_files_entry_is_one_sentence(tmp_path, entry, says):
    home = tmp_path / "home"
    icplay("study", "new", "own", "--tasks", str(task_file(tmp_path, env="sql")), "--annotators", "ana",
           "--per-task", "1", home=home)
    path = home / "studies" / "own" / "study.toml"
    text = path.read_text()
    start = text.index("[task_files]")
    path.write_text(text[:start] + "[task_files]\n" + entry + "\n")
    with pytest.raises(StudyFileError, match=r"study\.toml: " + says.replace("(", r"\(").replace(".", r"\.")):
        load_study("own", home)
