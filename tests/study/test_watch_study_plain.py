"""``icplay watch --study NAME --annotator A --plain`` on the bundled SQL set (SQLite), the agent
a real ``openai`` client against the local fake server: A's queue in her order, supervised;
the study's agent from its file; the model's name never printed when the study hides it (the
trajectory keeps it); per-turn rewards (protocol intercode) printed only when the study shows
them; the gold and retry rules as in ``play --study``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from study_helpers import WRONG, gold, icplay, new_study

from icplay.store import load_trajectory
from icplay.study.model import load_study

sys.path.insert(0, str(Path(__file__).parent.parent / "agents"))
from fake_openai_server import FakeOpenAIServer, Script, fenced  # noqa: E402

MODEL = "secret-model-x7"


@pytest.fixture
def fake():
    servers: list[FakeOpenAIServer] = []

    def start(replies) -> FakeOpenAIServer:
        server = FakeOpenAIServer(Script(replies, then="submit"), streaming=False).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def watch(home: Path, annotator: str, lines: list[str], *options: str, check: bool = True):
    return icplay("watch", "--study", "pilot", "--annotator", annotator, "--plain", "--sandbox", "sqlite", *options,
                  home=home, stdin="".join(line + "\n" for line in lines), check=check)


def sql(statement: str) -> str:
    return fenced(statement.rstrip(";"))


@pytest.mark.parametrize("shown", [False, True], ids=["hidden", "shown"])
def test_a_supervised_queue_hides_the_model_and_the_turn_scores(tmp_path, fake, shown):
    home = tmp_path / "home"
    server = fake([])
    new_study(home, "--agent-model", MODEL, "--agent-base-url", server.url, "--agent-protocol", "intercode",
              *(() if shown else ("--hide-turn-scores",)))
    mine = load_study("pilot", home).assigned_to("ana")
    server.responder = Script([sql(WRONG), sql(gold(mine[0])), "submit"], then="submit")
    # the annotator acts first (human mode), then lets the agent go on by itself
    done = watch(home, "ana", ["SELECT 1;", ":auto", ":quit"], "--mode", "human")
    out = done.stdout + done.stderr
    assert MODEL not in out and server.url not in out
    assert f"=== task {mine[0]} (1 of 4 in ana's queue)" in out
    assert "reward: 1.00" in out                                       # the submit's score is always shown
    assert ("reward: 0.00" in out) is shown                            # the agent's wrong turn, scored per turn
    saved = load_trajectory(home / "studies/pilot/sessions/ana" / f"{mine[0]}.json")
    assert saved.policy["model"] == MODEL and saved.policy["protocol"] == "intercode"
    assert (saved.study, saved.annotator, saved.status, saved.reward) == ("pilot", "ana", "submitted", 1.0)
    authors = [(t.author, t.info.get("annotator")) for t in saved.turns]
    assert authors[0] == ("human", "ana") and ("agent", None) in authors[1:]
    assert any(t.reward == 0.0 for t in saved.turns if t.author == "agent")   # recorded, shown or not
    status = icplay("study", "status", "pilot", home=home).stdout
    assert "ana        1/4" in status
    assert f"watch study: each annotator supervises {MODEL} (its name hidden from them)" in status
    report = icplay("study", "report", "pilot", home=home).stdout
    assert f"watch study: each annotator supervised an agent ({MODEL})" in report   # the lead sees it
    figures = json.loads(icplay("study", "report", "pilot", "--json", home=home).stdout)
    assert (figures["kind"], figures["agents_supervised"]) == ("watch", [MODEL])
    assert figures["annotators"][0]["label"] == "ana" and figures["annotators"][0]["episodes"] == 1


def test_the_study_names_the_agent_and_its_rules_hold(tmp_path):
    home = tmp_path / "home"
    new_study(home, "--agent-policy", "gold")
    mine = load_study("pilot", home).assigned_to("ben")
    done = watch(home, "ben", [":gold", ":retry", ":quit"], "--mode", "auto")
    out = done.stdout
    assert f"=== task {mine[0]} (1 of 4 in ben's queue)" in out and "reward: 1.00" in out
    assert "(refused: this study does not show the gold (rules.gold_reveal = false in" in out
    assert "allows no retries" in out and "gold solution:" not in out
    saved = load_trajectory(home / "studies/pilot/sessions/ben" / f"{mine[0]}.json")
    assert (saved.policy["kind"], saved.annotator, saved.study) == ("gold", "ben", "pilot")
    # every annotator supervises the study's agent: the command line may not name another
    other = watch(home, "ben", [], "--model", "another-model", check=False)
    assert other.returncode != 0 and "the study names the agent every annotator supervises; leave out --model" \
        in other.stderr
    again = watch(home, "ben", [], "--task", mine[0], check=False)     # done, no retries: refused, nothing opened
    assert again.returncode == 1 and "allows no retries" in again.stderr and "=== task" not in again.stdout


def test_counted_retries_and_the_gold_in_a_watch_study(tmp_path):
    home = tmp_path / "home"
    new_study(home, "--gold-reveal", "--retries", "counted", name="open")
    ref = load_study("open", home).assigned_to("cho")[0]
    none = icplay("watch", "--study", "open", "--annotator", "cho", "--plain", home=home, check=False)
    assert none.returncode != 0 and "the study names no agent ([agent] in" in none.stderr
    done = icplay("watch", "--study", "open", "--annotator", "cho", "--plain", "--sandbox", "sqlite", "--policy",
                  "gold", "--mode", "auto", home=home, stdin=":gold\n:retry\n:quit\n")
    out = done.stdout
    assert "gold solution:" in out and "(attempt 2, after the gold was seen)" in out
    first = load_trajectory(home / "studies/open/sessions/.attempts/cho" / f"{ref}.1.json")
    assert first.gold_seen_at is not None and first.policy["kind"] == "gold"
