"""A scripted model works the bundled Python set through `icplay run python` (the real
openai client against the local fake server, real interpreters in bwrap)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "agents"))
from fake_openai_server import ByTask, FakeOpenAIServer, fenced  # noqa: E402

from icplay.cli import main  # noqa: E402
from icplay.store import load_trajectory  # noqa: E402
from icplay.tasks.registry import load_tasks  # noqa: E402


@pytest.mark.bwrap
def test_a_scripted_model_on_the_bundled_python_set(bwrap_ready, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ICPLAY_PRICES", str(tmp_path / "none.json"))
    q = {t.id: t.query for t in load_tasks("python")}
    rules = {
        q["py-01"]: [fenced("def square(n):\n    return n * n", "python")],                 # solved at turn 1
        q["py-02"]: ["I would check the parity.",                                              # unparsable
                     fenced("def is_even(n):\n    return n % 2 == 0 if n > 0 else False", "python"),  # 0 fails: 3 of 4
                     fenced("def is_even(n):\n    return n % 2 == 0", "python")],                # turn 3
        q["py-03"]: ["submit reverse_string"],                                                 # nothing defined
    }
    out = tmp_path / "run"
    with FakeOpenAIServer(ByTask(rules)) as server:
        code = main(["run", "python", "--tasks", "python", "--model", "scripted", "--base-url", server.url,
                     "--sandbox", "bwrap", "--turns", "3", "--limit", "3", "--out", str(out), "--json", "--quiet"])
        printed = capsys.readouterr()
        assert code == 0, printed.err
    data = json.loads(printed.out)
    assert (data["episodes"], data["solved"]) == (3, 2)
    trajs = {p.stem: load_trajectory(p) for p in (out / "python").glob("*.json")}
    assert [t.reward for t in trajs["py-01"].turns] == [1.0]
    assert [t.reward for t in trajs["py-02"].turns] == [0.0, 0.75, 1.0]
    assert trajs["py-02"].turns[0].info["invalid"]
    assert trajs["py-03"].turns == [] and trajs["py-03"].reward == 0.0
    assert trajs["py-03"].breakdown["function"] == "reverse_string"
    # the system prompt speaks Python
    system = server.requests[0]["messages"][0]["content"]
    assert "Python 3 interpreter" in system and "submit <function_name>" in system


@pytest.mark.bwrap
def test_the_intercode_protocol_runs_intercodes_python_loop(bwrap_ready, tmp_path, capsys, monkeypatch):
    """InterCode's experiments/eval_n_turn.py for Python: only a `def` action is submitted, by the
    name of its first function; a test that raised shows InterCode's retry message instead of
    the output; any other action scores 0 without a submit (even one that defines the answer)."""
    monkeypatch.setenv("ICPLAY_PRICES", str(tmp_path / "none.json"))
    q = {t.id: t.query for t in load_tasks("python")}
    rules = {q["py-04"]: [
        fenced("count_vowels = lambda s: sum(1 for c in s.lower() if c in 'aeiou')", "python"),  # right, not a def
        fenced("def vowels_of(s):\n    return [c for c in s.lower() if c in 'aeiou']\n\n"
               "def count_vowels(s):\n    return len(vowels_of(s))", "python"),       # vowels_of is submitted
        fenced("def count_vowels(s):\n    return len(vowels_of(s))", "python"),        # solved
    ]}
    out = tmp_path / "run"
    with FakeOpenAIServer(ByTask(rules)) as server:
        code = main(["run", "python", "--tasks", "python", "--task-id", "py-04", "--model", "scripted",
                     "--base-url", server.url, "--sandbox", "bwrap", "--turns", "5", "--protocol", "intercode",
                     "--out", str(out), "--json", "--quiet"])
        printed = capsys.readouterr()
        assert code == 0, printed.err
    traj = load_trajectory(next((out / "python").glob("*.json")))
    assert [t.reward for t in traj.turns] == [0.0, 0.0, 1.0]
    assert traj.reward == 1.0 and traj.breakdown["function"] == "count_vowels"
    assert "feedback" not in traj.turns[0].info
    assert traj.turns[1].info["feedback"] == "Test case did not pass. Please try again."
    # the model saw the retry message in place of the second action's output
    last_user = server.requests[2]["messages"][-1]["content"]
    assert "Test case did not pass. Please try again." in last_user
    assert "Reward: 0" in last_user
