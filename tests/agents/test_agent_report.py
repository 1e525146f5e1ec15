"""Summaries, the table, the success-by-turn curve, JSON, and `icplay report` over runs and InterCode results."""

import json
from pathlib import Path

import pytest

from icplay.cli import main
from icplay.episode import AGENT, HUMAN, Trajectory, Turn
from icplay.report import render_curve, render_table, solved_at, summarize
from icplay.store import TrajectoryStore

SHARED_RESULTS = (Path(__file__).resolve().parents[3] / "shared/intercode/results/sql/gpt-3.5/"
                  "ic_sql_multiturn_gpt-3.5_10_turns.json")


def traj(i, rewards, hardness="easy", usage=None, author=AGENT, final=None, invalid=(), protocol="intercode"):
    turns = []
    for k, r in enumerate(rewards):
        bad = k in invalid
        turns.append(Turn(k, author, "" if bad else f"a{k}", "", reward=r, info={"invalid": True} if bad else {}))
    scored = [r for r in rewards if r is not None]
    t = Trajectory(task={"id": str(i), "set": "s", "env": "sql", "hardness": hardness}, env="sql", sandbox="sqlite",
                   policy={"kind": "human" if author == HUMAN else "llm", "protocol": protocol, "max_turns": 3,
                           "usage": usage or {}},
                   turns=turns, status="submitted")
    t.reward = final if final is not None else (scored[-1] if scored else 0.0)
    t.best_reward = max(scored + [t.reward]) if scored else t.reward
    return t


def runs():
    u = {"prompt_tokens": 1000, "completion_tokens": 100, "cost": 0.01, "calls": 2}
    agent = [traj(0, [0.0, 1.0], "easy", u), traj(1, [1.0], "easy", u), traj(2, [0.0, 0.5, 0.0], "medium", u),
             traj(3, [0.0, 0.0, 1.0], "hard", u, invalid=(0,))]
    human = [traj(i, [None, None], h, author=HUMAN, final=f, protocol="agent")
             for i, (h, f) in enumerate([("easy", 1.0), ("easy", 1.0), ("medium", 1.0), ("hard", 0.2)])]
    for t in human:
        t.time_worked = 90
    # the agent's episodes were judged strictly (per scored turn, as under the intercode protocol):
    # 0 solved at its second turn, 1 reached 1.0 without solving (a gold with no rows), 2 and 3 not
    # solved at all; the human's were recorded without verdicts
    verdicts = {0: [False, True], 1: [False], 2: [False, False, False], 3: [False, False, False]}
    for t, solved in zip(agent, verdicts.values()):
        for turn, ok in zip(t.turns, solved):
            turn.info["strict"] = {"solved": ok, "reasons": [] if ok else ["the gold returns no rows"]}
    return agent, human


def test_solved_at_counts_turns_including_unparsable_replies():
    agent, human = runs()
    assert [solved_at(t) for t in agent] == [2, 1, None, 3]
    assert [solved_at(t) for t in human] == [2, 2, 2, None]


def test_the_table_side_by_side():
    agent, human = runs()
    text = render_table([summarize(agent, "gpt"), summarize(human, "human")])
    assert text == """\
                                gpt         human
episodes                          4             4
solved (InterCode)        3 (75.0%)     3 (75.0%)
  easy                 2/2 (100.0%)  2/2 (100.0%)
  medium                 0/1 (0.0%)  1/1 (100.0%)
  hard                 1/1 (100.0%)    0/1 (0.0%)
solved (strict)           1 (25.0%)             –
mean turns                     2.25          2.00
mean best reward              0.875         0.800
solved by turn 1              25.0%          0.0%
solved by turn 2              50.0%         75.0%
solved by turn 3              75.0%         75.0%
tokens                        4,400             -
  prompt / completion   4,000 / 400             -
cost                        $0.0400             -
time worked                       -       6.0 min"""


def test_strictly_solved_counts_only_the_episodes_judged():
    agent, human = runs()
    both = summarize(agent[:2] + human[:2], "mixed")
    assert (both.solved, both.strict_solved, both.strict_judged, both.strict_rate) == (4, 1, 2, 0.5)
    rows = {line[:20].strip(): line[20:].strip() for line in render_table([both]).splitlines()}
    assert rows["solved (strict)"] == "1/2 judged (50.0%)"     # the two unjudged count as neither
    agent[1].strict = {"solved": True, "reasons": []}             # a submit verdict counts too
    assert summarize(agent).strict_solved == 2
    data = summarize(human).to_dict()
    assert (data["strict_solved"], data["strict_judged"], data["strict_rate"]) == (0, 0, None)


def test_the_curve():
    agent, human = runs()
    text = render_curve([summarize(agent, "gpt"), summarize(human, "human")], height=4)
    assert text == """\
solved by turn
100% ┤
     │      o   =
 50% ┤      *
     │  *
  0% ┤  o
     └────────────
       1   2   3
      * gpt   o human   = overlap"""


def test_unpriced_and_unfinished_are_shown():
    agent, _ = runs()
    agent[0].policy["usage"] = {"prompt_tokens": 10, "completion_tokens": 1, "calls": 1, "cost_unknown": 1}
    for t in agent[1:]:
        t.policy["usage"] = {"prompt_tokens": 10, "completion_tokens": 1, "calls": 1, "cost_unknown": 1}
    agent[3].status = "error"
    s = summarize(agent, "x")
    assert s.cost is None and s.episodes == 3 and s.errors == 1
    text = render_table([s])
    lines = text.splitlines()
    assert any(line.startswith("cost") and line.endswith(" unpriced") for line in lines)
    assert lines[-1].split() == ["errors", "(not", "counted)", "1"]


def test_icplay_report_over_run_folders_with_json(tmp_path, capsys):
    agent, human = runs()
    for name, trajs in (("agent", agent), ("human", human)):
        store = TrajectoryStore(tmp_path / name)
        for t in trajs:
            store.save(t)
    (tmp_path / "agent" / "run.json").write_text(json.dumps({"label": "gpt-run"}))
    assert main(["report", str(tmp_path / "agent"), str(tmp_path / "human")]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("counting: first attempt per task")      # report's default: pass@1
    assert lines[1].split() == ["gpt-run", "human"] and "solved by turn" in out and "* gpt-run" in out
    assert main(["report", str(tmp_path / "agent"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["runs"][0]
    assert data["label"] == "gpt-run" and data["solved"] == 3 and data["by_turn"] == [0.25, 0.5, 0.75]
    assert data["by_hardness"]["easy"] == {"solved": 2, "episodes": 2, "rate": 1.0}
    assert (data["strict_solved"], data["strict_judged"], data["strict_rate"]) == (1, 4, 0.25)
    assert main(["report", str(tmp_path / "nothing")]) == 1
    assert "no such file or folder" in capsys.readouterr().err


@pytest.mark.shared
@pytest.mark.skipif(not SHARED_RESULTS.is_file(), reason="needs ../shared/intercode")
def test_report_reads_intercode_results_files(capsys):
    assert main(["report", str(SHARED_RESULTS), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["runs"][0]
    assert data["episodes"] == 1034 and data["solved"] == 489 and round(100 * data["rate"], 1) == 47.3
    assert data["max_turns"] == 10 and data["by_turn"][-1] == data["rate"]


def test_the_author_mix_counts_turns_by_author_and_episodes_with_an_intervention():
    from icplay.episode import AGENT_EDITED

    agent, human = runs()
    mixed = traj(9, [0.0, None, 1.0], usage={"calls": 2})
    mixed.turns[1] = Turn(1, HUMAN, "", "", proposed="a1", comment="no", info={"rejected": True})
    mixed.turns[2] = Turn(2, AGENT_EDITED, "fixed", "", proposed="a2", reward=1.0)
    took = traj(10, [0.0, 1.0])
    took.turns[1].author = HUMAN
    s = summarize(agent + [mixed, took], "watched")
    assert s.authors == {"agent": 8 + 1 + 1, "edited": 1, "human": 1, "rejected": 1, "invalid": 1}
    assert (s.intervened, s.agent_episodes) == (2, 6)
    assert s.mean_turns == pytest.approx((2 + 1 + 3 + 3 + 2 + 2) / 6)   # a rejected proposal is not a turn
    text = render_table([s, summarize(agent, "gpt")])
    rows = {line[:27].strip(): line[27:].split() for line in text.splitlines()}
    assert rows["episodes with intervention"] == ["2/6", "0/4"]
    assert rows["turns: edited by a human"] == ["1", "0"] and rows["turns: rejected"] == ["1", "0"]
    assert "turns:" not in render_table([summarize(agent, "gpt")])
    assert summarize(human).intervened == 0 and "intervention" not in render_table([summarize(human, "h")])
