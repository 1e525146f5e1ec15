"""`icplay rescore` of InterCode-format Python results: actions re-run in real interpreters (bwrap)."""

from __future__ import annotations

import json
from pathlib import Path

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


EXCERPT = Path(__file__).parent / "data" / "intercode_python"


@pytest.mark.bwrap
def test_rescore_follows_intercodes_experiment_loop_on_its_recorded_gpt4_episodes(bwrap_ready, tmp_path, capsys):
    """Five of InterCode's recorded gpt-4 MBPP episodes (an excerpt: tests/data/intercode_python),
    replayed as eval_n_turn.py ran them: every turn agrees but the two kinds of InterCode
    reward differences docs/python.md explains."""
    out = tmp_path / "turns.jsonl"
    code = main(["rescore", str(EXCERPT / "gpt-4_7_turns_excerpt.json"), "--tasks",
                 str(EXCERPT / "mbpp_excerpt.json"), "--env", "python", "--sandbox", "bwrap", "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    turns = [json.loads(line) for line in out.read_text().splitlines()]
    got = [(t["episode"], t["turn"], t["recorded_reward"], round(t["reward"], 4)) for t in turns]
    assert got == [
        ("0", 0, 0.0, 0.0), ("0", 1, 1.0, 1.0),                     # retry message, then solved
        *[("9", i, 0.0, 0.0) for i in range(7)],                    # 3 defs failing; 4 non-def actions
        ("17", 0, 0.0, 1.0), ("17", 1, 0.0, 1.0),                   # InterCode bound the gold's first function
        ("35", 0, 1 / 3, 0.3333), ("35", 1, 1.0, 1.0),               # a partial reward
        ("70", 0, 0.0, 0.0), ("70", 1, 1.0, 0.0),                   # the gold left in InterCode's interpreter
    ]
    retry = "Test case did not pass. Please try again."
    assert turns[0]["observation"] == retry and turns[0]["observation_agrees"] is True
    assert turns[1]["observation"] == ""                            # solved: the def's own output
    assert all(t["observation"] == retry for t in turns[2:5])       # ep 9's defs fail their tests
    # its one-line "import ... def" actions ran (InterCode's loop: not a def) and were not scored
    assert [t["observation"] for t in turns[5:9]] == ["SyntaxError: invalid syntax\n"] * 4
    assert turns[14]["observation"] == retry and turns[14]["observation_agrees"] is False
