"""`icplay rescore` of InterCode-format Python results: actions re-run in real interpreters (bwrap)."""

from __future__ import annotations

import json

import pytest

from icplay.cli import main


@pytest.mark.bwrap
def test_rescore_recomputes_each_turn_and_says_which_disagree(bwrap_ready, tmp_path, capsys):
    results = {
        "0": {"task_id": 0, "turn_history": {                    # py-01 square: solved at turn 1
            "actions": ["def square(n):\n    return n * n", "submit square"],
            "observations": ["", ""], "rewards": [1.0, 1.0]}},
        "1": {"task_id": 1, "turn_history": {                    # py-02 is_even: 3 of 4 tests, recorded wrong
            "actions": ["print('x')", "def is_even(n):\n    return n % 2 == 0 if n > 0 else False", "submit is_even"],
            "observations": ["x", "", ""], "rewards": [0.0, 0.75, 1.0]}},
    }
    path = tmp_path / "ic_python_results.json"
    path.write_text(json.dumps(results))
    out = tmp_path / "turns.jsonl"
    code = main(["rescore", str(path), "--tasks", "python", "--sandbox", "bwrap", "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    turns = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(t["episode"], t["reward"], t["agrees"]) for t in turns] == [
        ("0", 1.0, True), ("0", 1.0, True), ("1", 0.0, True), ("1", 0.75, True), ("1", 0.75, False)]
    assert turns[2]["observation"] == "x\n" and turns[2]["observation_agrees"] is True
    assert "episodes whose solved status differs: 1" in printed.out
