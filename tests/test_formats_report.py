"""``icplay report`` splits its tables by env and set, shows the author mix of watched
episodes and says that a SQL reward can be negative."""

from __future__ import annotations

import json
import re

from icplay.cli import main
from icplay.episode import AGENT, AGENT_EDITED, HUMAN, Trajectory, Turn
from icplay.store import TrajectoryStore


def episode(i, env, set_name, rewards, authors=None, final=None):
    authors = authors or [AGENT] * len(rewards)
    turns = [Turn(k, a, f"a{k}", "", reward=r, proposed="p" if a == AGENT_EDITED else None)
             for k, (r, a) in enumerate(zip(rewards, authors))]
    t = Trajectory(task={"id": str(i), "set": set_name, "env": env}, env=env, sandbox="x",
                   policy={"kind": "llm", "protocol": "intercode", "max_turns": 2}, turns=turns, status="submitted")
    t.reward = rewards[-1] if final is None else final
    t.best_reward = max(rewards)
    return t


def table_rows(text):
    """{row name: cell} of a one-column table."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^\s*(\S.*?)\s{2,}(\S.*)$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def test_tables_by_env_and_set_with_negative_sql_rewards_and_the_author_mix(tmp_path, capsys):
    store = TrajectoryStore(tmp_path / "mixed")
    store.save(episode(1, "sql", "spider", [0.0, 1.0]))
    store.save(episode(2, "sql", "spider", [-0.5, -0.5]))                   # rows right, order reversed
    store.save(episode(3, "sql", "bird", [1.0]))
    store.save(episode(4, "bash", "nl2bash", [0.2, 1.0], authors=[AGENT_EDITED, HUMAN]))
    assert main(["report", str(tmp_path / "mixed"), "--no-curve"]) == 0
    out = capsys.readouterr().out
    titles = [line for line in out.splitlines() if line.startswith("== ")]
    assert titles == ["== bash · nl2bash ==", "== sql · bird ==", "== sql · spider =="]
    spider = out.split("== sql · spider ==")[1]
    rows = table_rows(spider)
    assert rows["episodes"] == "2" and rows["final reward < 0"] == "1"
    assert rows["mean best reward"] == "0.250"                             # (1.0 + -0.5) / 2
    assert out.count("SQL rewards run from -1 to 1") == 2                  # under each SQL table, not bash's
    bash = out.split("== sql · bird ==")[0]
    assert "SQL rewards" not in bash
    bash_rows = table_rows(bash)
    assert bash_rows["turns: edited by a human"] == "1" and bash_rows["turns: human"] == "1"
    assert bash_rows["episodes with intervention"] == "1/1"
    assert main(["report", str(tmp_path / "mixed"), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [(r["env"], r["set"], r["episodes"]) for r in runs] == [("bash", "nl2bash", 1), ("sql", "bird", 1),
                                                                  ("sql", "spider", 2)]
    assert runs[2]["negative"] == 1 and runs[0]["authors"]["edited"] == 1
