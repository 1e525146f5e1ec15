"""`icplay run` with today's models on the local server (SQLite: no sandbox needed)."""

import json
import re

from fake_openai_server import (FakeOpenAIServer, Reply, Script, deployment_refusals, fenced,
                                openai_reasoning_refusals, reasoning_budget)

from icplay.cli import main
from icplay.store import load_trajectory
from icplay.tasks.registry import load_tasks

GOLD = {t.id: t.gold for t in load_tasks("sql")}


def run_cli(capsys, *argv):
    code = main(["run", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_reasoning_model_runs_with_its_own_parameters(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ICPLAY_PRICES", str(tmp_path / "none.json"))
    script = Script([Reply(fenced(GOLD["bookshop-01"]), reasoning="Filter by genre.", reasoning_tokens=30), "submit"])
    with FakeOpenAIServer(script, checks=[openai_reasoning_refusals]) as server:
        code, out, err = run_cli(capsys, "sql", "--tasks", "sql", "--task-id", "bookshop-01", "--model", "gpt-5-mini", "--base-url",
                                 server.url, "--api-key", "k", "--protocol", "agent", "--out", str(tmp_path / "r"),
                                 "--json", "--quiet")
        requests = list(server.requests)
    assert code == 0, err
    assert all(r["max_completion_tokens"] == 16000 and "temperature" not in r for r in requests)
    summary = json.loads(out)
    assert summary["solved"] == 1 and summary["truncated_replies"] == 0 and summary["reasoning_tokens"] == 30
    assert summary["cost"] is not None            # gpt-5-mini is in the built-in price table
    traj = load_trajectory(next((tmp_path / "r").rglob("bookshop-01.json")))
    assert traj.turns[0].reasoning == "Filter by genre."
    # exports: the reasoning is left out of chat data unless asked for
    for flags, kept in (([], False), (["--reasoning"], True)):
        target = tmp_path / f"chat{len(flags)}.jsonl"
        assert main(["export", "chat", str(tmp_path / "r"), "--out", str(target), *flags]) == 0
        messages = json.loads(target.read_text().splitlines()[0])["messages"]
        first = next(m for m in messages if m["role"] == "assistant")
        assert ("reasoning_content" in first) == kept and "Filter by genre." not in first["content"]
        if kept:
            assert first["reasoning_content"] == "Filter by genre."


def test_a_router_renamed_budget_is_counted_as_truncated_replies(tmp_path, capsys, monkeypatch):
    """The issue's report: every reply empty with finish_reason length used to read as 0% and no warning."""
    monkeypatch.setenv("ICPLAY_PRICES", str(tmp_path / "none.json"))
    with FakeOpenAIServer(Script(["submit"]), checks=[reasoning_budget(4000)]) as server:
        code, out, err = run_cli(capsys, "sql", "--tasks", "sql", "--limit", "2", "--model", "openai/gpt-5-mini", "--base-url",
                                 server.url, "--api-key", "k", "--max-tokens", "1024", "--turns", "2",
                                 "--out", str(tmp_path / "r"), "--quiet")
    assert code == 0, err
    assert "truncated replies" in out and "4" in out.split("truncated replies")[1].splitlines()[0]
    assert "icplay: 4 replies were cut at the token limit (finish_reason length); raise --max-tokens" in err
    code, out, err = run_cli(capsys, "sql", "--tasks", "sql", "--limit", "2", "--model", "openai/gpt-5-mini", "--base-url",
                             server.url, "--api-key", "k", "--max-tokens", "1024", "--turns", "2",
                             "--out", str(tmp_path / "r"), "--quiet", "--json")
    assert json.loads(out)["truncated_replies"] == 4          # the rerun reads the saved episodes


def test_an_unknown_deployment_learns_from_refusals_once_and_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ICPLAY_PRICES", str(tmp_path / "none.json"))
    with FakeOpenAIServer(Script([fenced("SELECT 1"), "submit"], then="submit"),
                          checks=[deployment_refusals("prod-reasoner")]) as server:
        code, out, err = run_cli(capsys, "sql", "--tasks", "sql", "--limit", "2", "--model", "prod-reasoner", "--base-url",
                                 server.url, "--api-key", "k", "--out", str(tmp_path / "r"), "--quiet")
        requests = list(server.requests)
    assert code == 0, err
    assert err.count("refused 'max_tokens'") == 1 and err.count("refused 'temperature'") == 1
    assert len([r for r in requests if "max_tokens" in r]) == 1          # remembered for the rest of the run
    traj = load_trajectory(sorted((tmp_path / "r").rglob("*.json"))[-1])
    assert any("max_completion_tokens" in note for note in traj.policy["learnt"])


def test_a_cost_limit_on_an_unpriced_model_counts_the_router_s_cost(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ICPLAY_PRICES", str(tmp_path / "none.json"))
    with FakeOpenAIServer(Script([Reply(fenced("SELECT 1"), usage_cost=0.1)], then=Reply(fenced("SELECT 1"),
                                                                                        usage_cost=0.1))) as server:
        code, out, err = run_cli(capsys, "sql", "--tasks", "sql", "--limit", "4", "--model", "my-routed-model",
                                 "--base-url", server.url, "--api-key", "k", "--turns", "10", "--run-cost", "0.25",
                                 "--out", str(tmp_path / "r"))
        calls = len(server.requests)
    assert code == 1 and "the run's cost limit ($0.25) is reached" in err and "needs the price" not in err
    assert "count the server's own cost" in err and 3 <= calls <= 4


def test_a_cost_limit_with_neither_price_nor_server_cost_stops_at_the_first_call(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ICPLAY_PRICES", str(tmp_path / "none.json"))
    for flag in ("--run-cost", "--episode-cost"):
        with FakeOpenAIServer(Script([fenced("SELECT 1")], then=fenced("SELECT 1"))) as server:
            code, out, err = run_cli(capsys, "sql", "--tasks", "sql", "--limit", "3", "--model", "my-local-model",
                                     "--base-url", server.url, "--api-key", "k", "--turns", "10", flag, "1",
                                     "--out", str(tmp_path / flag))
            calls = len(server.requests)
        assert code == 1 and calls == 1, (flag, err)
        assert ("the cost limit cannot hold: the server sent no cost (usage.cost) for a call and icplay has no price "
                "for 'my-local-model'; give it with --price my-local-model=IN,OUT") in err
    code, out, err = run_cli(capsys, "sql", "--tasks", "sql", "--limit", "1", "--model", "my-local-model", "--base-url",
                             "http://127.0.0.1:9/v1", "--out", str(tmp_path / "r"), "--episode-cost", "1",
                             "--price", "my-local-model=0.1,0.2")
    assert "no price known" not in err and "nothing is listening at http://127.0.0.1:9/v1" in err


def test_bad_request_options_are_one_sentence(tmp_path, capsys):
    for flag, value, message in (("--temperature", "hot", "--temperature 'hot': expected a number or 'default'"),
                                 ("--extra-body", "[1]", "--extra-body: expected a JSON object"),
                                 ("--max-tokens", "lots", "--max-tokens 'lots': expected a whole number"),
                                 ("--reasoning-effort", "max", "--reasoning-effort 'max': one of")):
        code, out, err = run_cli(capsys, "sql", "--tasks", "sql", "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                                 "--out", str(tmp_path / "r"), flag, value)
        assert code == 1 and message in err and "Traceback" not in err


def test_a_server_without_usage_shows_tokens_counted_here_as_an_estimate(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ICPLAY_PRICES", str(tmp_path / "none.json"))
    with FakeOpenAIServer(Script([Reply("submit", usage=False)])) as server:
        code, out, err = run_cli(capsys, "sql", "--tasks", "sql", "--limit", "1", "--model", "local", "--base-url",
                                 server.url, "--protocol", "agent", "--out", str(tmp_path / "r"), "--quiet")
    assert code == 0, err
    for label, cell in (("tokens", r"[\d,]+ \(estimate\)"), ("cost", "unpriced")):
        assert re.search(rf"^\s*{label}\s+{cell}$", out, re.M), out
