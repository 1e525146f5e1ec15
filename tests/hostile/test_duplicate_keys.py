"""Saved files that state a key twice (issue 28's audit, item (b)).

JSON leaves it to each reader which of two equal keys counts: Python's ``json.loads`` takes
the last, other readers the first. A file whose two ``reward`` or ``task`` fields differ
would read one way in icplay and another way elsewhere, so the one reader
(``icplay.json_shape.loads``) refuses it, naming file, record and field, in every door
that reads saved files. Each test failed before (the last value was read)."""

from __future__ import annotations

import json
import os
import random
import re

import pytest
from test_saved_files import episode_file, icplay, study_and_ben

from icplay.formats.intercode import read_results
from icplay.json_shape import DuplicateKeyError, loads
from icplay.store import TrajectoryFileError, load_trajectory
from icplay.study.merge import merge
from icplay.tasks.model import TaskFileError


def stated_twice(path, field: str, first_value: str) -> str:
    """Write ``"field": first_value`` once more, before the first ``"field":`` of the file."""
    text = path.read_text()
    mark = f'"{field}": '
    at = text.index(mark)
    path.write_text(text[:at] + mark + first_value + ", " + text[at:])
    return text


def test_a_turns_reward_stated_twice_is_refused_naming_the_turn(tmp_path):
    path = episode_file(tmp_path / "ep.json", "sql", "bookshop-01", ["SELECT 1", "SELECT 2"], reward=0.0)
    text = path.read_text()
    second_turn = text.index('"index": 1')
    path.write_text(text[:second_turn] + '"reward": 1.0, ' + text[second_turn:])
    with pytest.raises(TrajectoryFileError) as refused:
        load_trajectory(path)
    assert str(refused.value).startswith(f"{path}: turns[1].reward is stated twice"), refused.value


def test_report_skips_a_file_with_two_rewards_and_names_it(tmp_path):
    folder = tmp_path / "run"
    episode_file(folder / "sql" / "fine.json", "sql", "bookshop-01", ["SELECT 1"], reward=0.0)
    two = episode_file(folder / "sql" / "two.json", "sql", "bookshop-02", ["SELECT 1"], reward=0.0)
    stated_twice(two, "reward", "1.0")          # a first-wins reader counts this one solved
    done = icplay("report", str(folder))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert re.search(r"^episodes +1$", done.stdout, re.M), done.stdout
    assert f"{two} (turns[0].reward is stated twice: " in done.stderr, done.stderr


def test_a_merged_file_with_two_task_blocks_is_not_added(tmp_path):
    home, study, ref = study_and_ben(tmp_path)
    set_name, task_id = ref.split("/")
    laptop = tmp_path / "laptop"
    two = episode_file(laptop / "two.json", set_name, task_id, ["SELECT 1"], annotator="ben", study="pilot")
    stated_twice(two, "task", json.dumps({"set": "bash", "id": "b001", "env": "bash", "network": True}))
    result = merge(study, [laptop], home)
    assert result.added == []
    done = icplay("study", "merge", "pilot", str(laptop), env={**os.environ, "ICPLAY_HOME": str(home)})
    assert "Traceback" not in done.stderr
    assert f"{two}: task is stated twice" in done.stderr, done.stderr


def test_an_intercode_log_line_with_two_rewards_is_refused_naming_the_line(tmp_path):
    log = tmp_path / "log.jsonl"
    record = '{"environment": "ic_sql", "query_idx": %d, "reward": 0.0, %s"trajectory": []}'
    log.write_text(record % (1, "") + "\n" + record % (2, '"reward": 1.0, ') + "\n")
    with pytest.raises(TaskFileError, match=r"line 2: reward is stated twice"):
        read_results(log)


def _value(rng: random.Random, depth: int):
    """A JSON value whose strings hold what the reader's outline must see past: quotes,
    backslashes, brackets, commas, colons, escapes, non-ASCII."""
    pieces = ['"', "\\", "\\\\", '\\"', "[", "]", "{", "}", ",", ":", " ", "\n", "é", "\u202e", "x", "{}", "[]", "\\u0022"]
    kind = rng.randrange(7 if depth < 5 else 4)
    if kind == 0:
        return "".join(rng.choice(pieces) for _ in range(rng.randrange(6)))
    if kind == 1:
        return rng.choice([0, -1, 2.5, 1e300, True, False, None])
    if kind == 2:
        return rng.random()
    if kind == 3:
        return rng.choice([[], {}])
    if kind == 4:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 4))) + str(i): _value(rng, depth + 1)
            for i in range(rng.randrange(4))}


def test_the_reader_agrees_with_json_loads_and_refuses_every_key_stated_twice():
    """No file without a duplicate is refused (strings full of brackets, commas, escaped
    quotes and backslashes, empty containers, any indentation); a key stated twice anywhere
    is found, by path."""
    rng = random.Random(28)
    for n in range(400):
        value = {"top": _value(rng, 0), "list": [_value(rng, 1) for _ in range(3)]}
        text = json.dumps(value, ensure_ascii=n % 2 == 0, indent=rng.choice([None, 1, "\t"]))
        assert loads(text) == json.loads(text) and loads(text.encode()) == json.loads(text)
        doubled = text.replace('"top": ', '"top": [], "top": ', 1)
        with pytest.raises(DuplicateKeyError, match=r"^top is stated twice"):
            loads(doubled)
        inner = text.replace('"list": [', '"list": [{"a": 1, "a": 1}, ', 1)
        with pytest.raises(DuplicateKeyError, match=r"^list\[0\]\.a is stated twice"):
            loads(inner)
