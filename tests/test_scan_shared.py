"""`icplay scan` on InterCode's recorded gpt-3.5 SQL episodes (../shared/intercode): the
counts per flag are those of the recording, every reward-hack suspect is a full reward for
an empty answer, and the gold check (`icplay tasks --check spider` on SQLite) finds most of
their tasks broken."""

from __future__ import annotations

import json

import pytest

from icplay.cli import main

pytestmark = pytest.mark.shared

RESULTS = "results/sql/gpt-3.5/ic_sql_multiturn_gpt-3.5_10_turns.json"

# (flags, episodes) per kind over the 1034 recorded episodes
COUNTS = {"reward-hack-suspect": (53, 53), "loop": (119, 115), "format-error": (234, 86), "error-run": (410, 401)}


def test_counts_per_flag_on_the_recorded_gpt35_sql_episodes(shared_intercode, capsys):
    assert main(["scan", str(shared_intercode / RESULTS), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["episodes"]) == 1034
    assert {k: (v["flags"], v["episodes"]) for k, v in data["counts"].items()} == COUNTS
    suspects = [(e, f) for e in data["episodes"] for f in e["flags"] if f["kind"] == "reward-hack-suspect"]
    assert all(e["reward"] == 1.0 and "empty answer" in f["evidence"] for e, f in suspects)
    # recorded without a strict verdict: nothing is called strictly solved or not
    assert {e["strict"] for e in data["episodes"]} == {None}


@pytest.mark.slow
def test_task_health_with_the_gold_check(shared_intercode, capsys):
    assert main(["scan", str(shared_intercode / RESULTS), "--json", "--check-golds"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["findings"] == {"nobody-solved": 545, "gold-broken": 80, "humans-agents-split": 0,
                                "solved-only-by-suspects": 53}
    health = {r["task"]: r for r in data["health"]}
    suspect_tasks = {e["task"] for e in data["episodes"] if any(f["kind"] == "reward-hack-suspect" for f in e["flags"])}
    # the gold returns no rows on SQLite for 49 of them (the other 4: on MariaDB, where they were recorded)
    assert sum("gold-broken" in health[t]["findings"] for t in suspect_tasks) == 49
