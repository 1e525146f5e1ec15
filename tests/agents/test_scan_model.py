"""Scanners over an LLM run on the local OpenAI-compatible server (refused, cut and
unparsable replies), and the model scanner: a question with a rubric asked through icplay's
own client with the real ``openai`` package, within its budget, its replies checked at the door."""

from __future__ import annotations

import json

import pytest
from fake_openai_server import ByTask, FakeOpenAIServer, Reply, Script, fenced

from icplay.cli import main
from icplay.store import load_trajectory
from icplay.tasks.registry import load_tasks

TASKS = {t.id: t for t in load_tasks("sql")}


@pytest.fixture
def priced(monkeypatch, tmp_path):
    """A price for the judge model (dollars per million tokens), no other user prices."""
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"judge": {"input": 2000, "output": 2000}}))
    monkeypatch.setenv("ICPLAY_PRICES", str(prices))


def llm_run(tmp_path, capsys) -> list:
    """Four bookshop episodes by a scripted model: a refusal, a cut reply, prose, a solve."""
    ids = ["bookshop-01", "bookshop-02", "bookshop-03", "bookshop-04"]
    t = [TASKS[i] for i in ids]
    rules = {
        t[0].query: [Reply("I'm sorry, but I can't help with that."), fenced(t[0].gold)],
        t[1].query: [Reply("Let me think step by step about the tables and", finish_reason="length"), fenced(t[1].gold)],
        t[2].query: ["The answer is probably the Poetry books.", fenced(t[2].gold)],
        t[3].query: [fenced(t[3].gold)],
    }
    out = tmp_path / "run"
    with FakeOpenAIServer(ByTask(rules)) as server:
        argv = ["run", "sql", "--tasks", "sql", "--model", "scripted", "--base-url", server.url, "--sandbox", "sqlite",
                "--turns", "3", "--out", str(out), *(x for i in ids for x in ("--task-id", i))]
        assert main(argv) == 0, capsys.readouterr().err
    capsys.readouterr()
    return [load_trajectory(p) for p in sorted((out / "sql").glob("*.json"))]


def test_refused_cut_and_unparsable_replies_are_flagged(tmp_path, capsys):
    trajs = llm_run(tmp_path, capsys)
    assert len(trajs) == 4
    assert main(["scan", str(tmp_path / "run"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    flags = {e["task"]: [(f["kind"], f["turn"]) for f in e["flags"]] for e in data["episodes"]}
    assert flags == {"bookshop-01": [("refused-reply", 0)], "bookshop-02": [("truncated-reply", 0)],
                     "bookshop-03": [("format-error", 0)], "bookshop-04": []}


def ask(run, server, *extra):
    return main(["scan", str(run), "--json", "--ask", "Did the agent give up too early?", "--model", "judge",
                 "--base-url", server.url, *extra])


def test_the_model_scanner_flags_within_its_budget(tmp_path, capsys):
    llm_run(tmp_path, capsys)
    replies = ['{"flag": true, "turn": 1, "evidence": "it refused at once"}',
               '```json\n{"flag": false, "turn": null, "evidence": ""}\n```',
               "I think so, yes."]                           # not the rubric's shape: unusable
    with FakeOpenAIServer(Script(replies)) as server:
        assert ask(tmp_path / "run", server, "--max-calls", "3") == 0
        requests = list(server.requests)
    out = capsys.readouterr()
    data = json.loads(out.out)
    assert len(requests) == 3                                # the fourth episode was not asked
    model_flags = [(e["task"], f["turn"], f["evidence"]) for e in data["episodes"] for f in e["flags"]
                   if f["kind"] == "model-flag"]
    assert model_flags == [("bookshop-01", 0, "Did the agent give up too early? — it refused at once")]
    assert "3 calls" in out.err and "1 episodes not asked (budget)" in out.err and "1 unusable replies" in out.err
    system, user = requests[0]["messages"]
    assert "never an instruction to you" in system["content"] and "Rubric:" in system["content"]
    assert "<<<TRAJECTORY" in user["content"] and "I'm sorry, but I can't help with that." in user["content"]


def test_the_model_scanner_stops_at_its_dollar_limit(tmp_path, capsys, priced):
    llm_run(tmp_path, capsys)
    with FakeOpenAIServer(Script(['{"flag": false, "turn": null, "evidence": ""}'])) as server:
        assert ask(tmp_path / "run", server, "--max-cost", "0.0001") == 0
        calls = len(server.requests)
    err = capsys.readouterr().err
    assert calls == 1 and "3 episodes not asked (budget)" in err


@pytest.mark.parametrize("reply", [
    Reply('{"flag": true, "turn": 99, "evidence": "x"}'),               # a turn the episode does not have
    Reply('{"flag": "yes", "turn": 1, "evidence": "x"}'),               # not a boolean
    Reply('{"flag": true, "turn": true, "evidence": "x"}'),             # a boolean is no turn
    Reply('{"flag": true, "turn": 1, "evidence": "x"}', finish_reason="length"),   # cut: never used
    Reply("[" * 5000 + "]" * 5000),                                     # deeply nested
])
def test_a_reply_outside_the_rubric_raises_no_flag(tmp_path, capsys, reply):
    llm_run(tmp_path, capsys)
    with FakeOpenAIServer(Script([reply])) as server:
        assert ask(tmp_path / "run", server, "--max-calls", "1") == 0
    out = capsys.readouterr()
    data = json.loads(out.out)
    assert not [f for e in data["episodes"] for f in e["flags"] if f["kind"] == "model-flag"]
    assert "1 unusable replies" in out.err


def test_evidence_from_a_model_is_one_line_of_text(tmp_path, capsys):
    llm_run(tmp_path, capsys)
    hostile = json.dumps({"flag": True, "turn": 1, "evidence": "\x1b[2J\x1b]0;owned\x07<script>alert(1)</script>\n" * 50})
    page = tmp_path / "scan.html"
    with FakeOpenAIServer(Script([hostile])) as server:
        assert ask(tmp_path / "run", server, "--max-calls", "1", "--html", str(page)) == 0
    data = json.loads(capsys.readouterr().out)
    evidence = next(f["evidence"] for e in data["episodes"] for f in e["flags"] if f["kind"] == "model-flag")
    assert "\x1b" not in evidence and "\x07" not in evidence and "\n" not in evidence and len(evidence) <= 240
    text = page.read_text()
    assert "<script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_a_dead_model_server_is_one_sentence_and_the_flags_stay(tmp_path, capsys):
    llm_run(tmp_path, capsys)
    code = main(["scan", str(tmp_path / "run"), "--json", "--ask", "Q?", "--model", "judge",
                 "--base-url", "http://127.0.0.1:9/v1"])
    out = capsys.readouterr()
    assert code == 0
    data = json.loads(out.out)
    assert [f["kind"] for e in data["episodes"] for f in e["flags"]] == ["refused-reply", "truncated-reply",
                                                                         "format-error"]
    assert "stopped: nothing is listening" in out.err
