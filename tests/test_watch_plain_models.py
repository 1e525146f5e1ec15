"""``icplay watch --plain`` with a reasoning model (OpenAI's reasoning family, as the local
server reproduces it): the right parameters, its thinking shown and kept, a reply cut at the
token limit said as such, a draft inside <think> never run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "agents"))

from fake_openai_server import FakeOpenAIServer, Reply, Script, fenced, openai_reasoning_refusals  # noqa: E402

from test_watch_plain import GOLD, Proc, saved  # noqa: E402


def test_watch_plain_with_a_reasoning_model(tmp_path):
    replies = [Reply(fenced("SELECT count(*) FROM books"), reasoning="Count the books first.",
                     reasoning_field="reasoning_content", reasoning_tokens=40),
               Reply("<think>Maybe\n```sql\nDELETE FROM books\n```\nhmm", finish_reason="length"),
               Reply("<think>The genre column.</think>\n" + fenced(GOLD)),
               "submit"]
    with FakeOpenAIServer(Script(replies), checks=[openai_reasoning_refusals]) as server:
        proc = Proc(["watch", "sql", "--task", "bookshop-01", "--limit", "1", "--plain", "--model", "gpt-5-mini",
                     "--base-url", server.url, "--api-key", "k", "--reasoning-effort", "low"], tmp_path)
        proc.expect("thinking: Count the books first.")
        proc.expect("agent proposes: SELECT count(*) FROM books")
        proc.expect("decide> ")
        proc.send("")
        proc.expect("thinking: Maybe")
        proc.expect("(truncated: the reply was cut at the token limit, finish_reason length; raise --max-tokens)")
        proc.expect("the model's reply was cut at the token limit; what it held was not run")
        proc.expect("decide> ")
        proc.send("")                                       # ask again
        proc.expect("(the reply was cut at the token limit; what it held was not run)")
        proc.expect("thinking: The genre column.")
        proc.expect(f"agent proposes: {GOLD}")
        proc.expect("decide> ")
        proc.send("")
        proc.expect("agent proposes: submit")
        proc.expect("decide> ")
        proc.send("")
        proc.expect("reward: 1.00  (solved)")
        code, out, err = proc.finish()
        requests = list(server.requests)
    assert code == 0, err
    assert len(requests) == 4 and all(r["reasoning_effort"] == "low" and "temperature" not in r
                                      and "max_tokens" not in r for r in requests)
    # the reply cut at the token limit is asked again with a raised budget (docs/agents.md)
    assert [r["max_completion_tokens"] for r in requests] == [16000, 16000, 32000, 16000]
    traj = saved(tmp_path, "watch", "sql", "bookshop-01")
    turns = traj["turns"]
    assert turns[0]["reasoning"] == "Count the books first." and turns[0]["info"]["usage"]["reasoning_tokens"] == 40
    assert turns[1]["info"]["invalid_reason"] == "truncated" and "DELETE FROM books" in turns[1]["reasoning"]
    assert turns[2]["reasoning"] == "The genre column." and turns[2]["action"] == GOLD
    assert not any("DELETE" in (t["action"] or "") for t in turns)
    assert traj["policy"]["family"] == "openai-reasoning"
    assert traj["policy"]["params"] == {"max_completion_tokens": 16000, "reasoning_effort": "low"}


def test_watch_checks_the_key_at_once_and_makes_the_client_at_the_first_call(tmp_path, monkeypatch):
    from icplay.cli import build_parser
    from icplay.commands.watch import _llm_policy
    from icplay.process import UserError

    monkeypatch.setenv("ICPLAY_HOME", str(tmp_path))
    args = build_parser().parse_args(["watch", "sql", "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                                      "--api-key", "k"])
    policy, info = _llm_policy(args)
    assert policy.model._client is None and info["model"] == "m"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    args = build_parser().parse_args(["watch", "sql", "--model", "gpt-4o"])
    with pytest.raises(UserError, match="^no API key: set OPENAI_API_KEY or pass --api-key"):
        _llm_policy(args)
