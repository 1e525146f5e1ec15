"""Exports filtered on either verdict: ``--solved intercode`` (InterCode's, the best reward
1.0; ``--solved-only`` is the same) or ``--solved strict`` (the strict verdict says solved;
an episode without a verdict is left out, never guessed), in every format, and the CSV's
strict columns. The episodes are saved trajectories of a bundled SQL task, each with a
chosen verdict, so that every filter has something to let through and something to stop."""

from __future__ import annotations

import csv
import io
import json

import pytest

from icplay.cli import main
from icplay.episode import AGENT, AGENT_EDITED, Trajectory, Turn
from icplay.store import TrajectoryStore
from icplay.tasks.registry import load_tasks

TASKS = load_tasks("sql")[:4]


def episode(name: str, best: float, strict: dict | None, n: int = 0) -> Trajectory:
    """An agent's episode of the n-th bundled SQL task: a human edit (one preference pair), then the gold."""
    task = TASKS[n]
    first = Turn(0, AGENT_EDITED, "SELECT title FROM books", "title\n...", proposed="SELECT 1",
                 reward=0.0)
    last = Turn(1, AGENT, task.gold, "title\n...", reward=best)
    return Trajectory(task=task.to_dict(), env="sql", sandbox="sqlite", id=name,
                      policy={"kind": "llm", "model": "m", "strategy": "tryagain", "protocol": "agent"},
                      turns=[first, last], status="submitted", reward=best, best_reward=best, strict=strict)


SOLVED = {"solved": True, "reasons": []}
HOLLOW = {"solved": False, "reasons": ["the gold returns no rows on this backend"]}


@pytest.fixture
def saved(tmp_path):
    """Four episodes: solved both ways, solved by InterCode only, solved with no verdict, not solved."""
    store = TrajectoryStore(tmp_path / "run")
    not_solved = {"solved": False, "reasons": ["reward 0 is below 1.0"]}
    for traj in (episode("both", 1.0, SOLVED, 0), episode("intercode-only", 1.0, HOLLOW, 1),
                 episode("unjudged", 1.0, None, 2), episode("unsolved", 0.0, not_solved, 3)):
        store.save(traj)
    return tmp_path / "run"


def export(capsys, *args) -> tuple[int, str]:
    code = main(["export", *args])
    return code, capsys.readouterr().err


def ids(capsys, saved, tmp_path, *flags) -> list[str]:
    out = tmp_path / "eps.csv"
    code, err = export(capsys, "csv", str(saved), "--out", str(out), *flags)
    assert code == 0, err
    return sorted(r["episode"] for r in csv.DictReader(io.StringIO(out.read_text())))


def test_the_solved_filters_pick_by_either_verdict(saved, tmp_path, capsys):
    assert ids(capsys, saved, tmp_path) == ["both", "intercode-only", "unjudged", "unsolved"]
    assert ids(capsys, saved, tmp_path, "--solved", "intercode") == ["both", "intercode-only", "unjudged"]
    assert ids(capsys, saved, tmp_path, "--solved-only") == ["both", "intercode-only", "unjudged"]
    assert ids(capsys, saved, tmp_path, "--solved", "strict") == ["both"]


def test_the_csv_has_the_strict_verdict_and_its_reasons(saved, tmp_path, capsys):
    out = tmp_path / "eps.csv"
    assert export(capsys, "csv", str(saved), "--out", str(out))[0] == 0
    rows = {r["episode"]: r for r in csv.DictReader(io.StringIO(out.read_text()))}
    got = {k: (r["solved"], r["strict"], r["strict_reasons"]) for k, r in rows.items()}
    assert got == {"both": ("1", "1", ""),
                   "intercode-only": ("1", "0", "the gold returns no rows on this backend"),
                   "unjudged": ("1", "", ""),                       # no verdict: neither 1 nor 0
                   "unsolved": ("0", "0", "reward 0 is below 1.0")}
    header = out.read_text().splitlines()[0].split(",")
    assert header[header.index("solved") + 1:header.index("solved") + 3] == ["strict", "strict_reasons"]


@pytest.mark.parametrize("fmt, intercode, strict", [
    ("chat", 3, 1),          # one conversation per episode
    ("fewshot", 3, 1),       # one demonstration per episode
    ("preference", 3, 1),    # one pair per edited proposal (--by-authorship: no branch scored them)
    ("intercode", 3, 1),     # one record per episode
])
def test_every_format_follows_the_filter(saved, tmp_path, capsys, fmt, intercode, strict):
    out = tmp_path / f"out.{fmt}"

    def records() -> int:
        text = out.read_text()
        if fmt == "fewshot":
            return len(json.loads(text)["demos"])
        if fmt == "intercode":
            return len(json.loads(text))
        return len(text.splitlines())

    flags = ["--by-authorship"] if fmt == "preference" else []
    assert export(capsys, fmt, str(saved), "--out", str(out), "--solved", "intercode", *flags)[0] == 0
    assert records() == intercode
    assert export(capsys, fmt, str(saved), "--out", str(out), "--solved", "strict", *flags)[0] == 0
    assert records() == strict
    if fmt == "intercode":
        (record,) = json.loads(out.read_text()).values()
        assert record["icplay_id"] == "both" and record["icplay_strict"] is True


def test_no_strict_verdict_anywhere_is_said_in_one_sentence(tmp_path, capsys):
    store = TrajectoryStore(tmp_path / "old")
    store.save(episode("old", 1.0, None))
    code, err = export(capsys, "chat", str(tmp_path / "old"), "--out", str(tmp_path / "x"), "--solved", "strict")
    assert code == 1 and "Traceback" not in err
    assert "none of the 1 episodes passes the filters (1 of them have no strict verdict" in err
    with pytest.raises(SystemExit):
        main(["export", "chat", str(tmp_path / "old"), "--out", str(tmp_path / "x"), "--solved", "bogus"])
    assert "invalid choice: 'bogus'" in capsys.readouterr().err
