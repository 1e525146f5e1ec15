"""The same runs against a real OpenAI-compatible server that icplay did not write:
``transformers serve`` on CPU, started here, with tiny models made here (``tiny_serve``):
the library's policy, ``icplay run`` (text and tools protocols) and ``icplay watch --plain``,
all through the real ``openai`` client.

A random model's text is garbage, so the tests assert the protocol, never the content:
streaming (the reply arrives in pieces, time to first token recorded), usage from the
server, finish reasons (``length`` at a small ``--max-tokens``, ``stop``, ``tool_calls``),
and tool calls parsed by transformers itself from the model's ``<tool_call>`` output
(its response parser for the ``qwen2`` model type), several in one reply, with the
server's own call ids; the tool results sent back are rendered by the model's chat
template (a request the server could not render would fail the episode).

Greedy decoding over fixed weights is deterministic, and the ``caller`` / ``stopper``
models are deterministic by construction (every logit equal), so nothing here is flaky.
Needs ``pip install -e '.[serve-test]'`` (CI's ci/test.sh installs it); under CI=true a
missing install fails the test instead of skipping it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from agent_helpers import TableEnv, make_task
from tiny_serve import TOOL_QUERY, CuttingProxy, TransformersServer, serve_command

from ci_rules import unavailable
from icplay.agents.llm import ChatModel, LLMPolicy
from icplay.agents.protocols import Limits, play
from icplay.cli import main
from icplay.store import load_trajectory

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    if serve_command() is None:
        unavailable("transformers serve is not installed here: pip install -e '.[serve-test]'")
    folder = tmp_path_factory.mktemp("tiny-serve")
    built = subprocess.run([sys.executable, str(Path(__file__).with_name("tiny_serve.py")), str(folder)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    models = json.loads(built.stdout.strip().splitlines()[-1])
    server = TransformersServer(folder / "serve.log").start()
    try:
        yield server, models
    finally:
        server.stop()


def chat(server, name: str, **kw) -> ChatModel:
    return ChatModel(name, base_url=server.url, api_key="none", temperature=0, backoff=0.01, timeout=120, **kw)


def test_streaming_usage_and_finish_reasons_from_the_real_server(serve):
    server, models = serve
    pieces: list[str] = []
    msgs = [{"role": "system", "content": "You write SQL."}, {"role": "user", "content": "Count the singers."}]
    streamed = chat(server, models["random"], max_tokens=5).complete(msgs, on_delta=pieces.append)
    assert streamed.finish_reason == "length" and streamed.truncated
    assert streamed.completion_tokens == 5 and streamed.prompt_tokens > 10
    assert pieces and "".join(pieces) == streamed.text and streamed.ttft is not None   # SSE pieces (the server
    # batches what the model wrote meanwhile into one event, so how many is up to timing)
    assert streamed.model == models["random"] and streamed.response_id
    plain = chat(server, models["random"], max_tokens=5, stream=False).complete(msgs)
    assert plain.ttft is None and plain.finish_reason == "length" and plain.completion_tokens == 5
    assert plain.text == streamed.text                       # greedy: the same garbage both ways
    stop = chat(server, models["stopper"], max_tokens=5).complete(msgs, on_delta=pieces.append)
    assert stop.finish_reason == "stop" and stop.text == "" and stop.completion_tokens == 1


def test_a_stream_from_the_real_server_cut_short_is_a_failed_attempt_retried(serve):
    server, models = serve
    proxy = CuttingProxy(server.port, cut=1)        # ends the first stream after its first event
    try:
        msgs = [{"role": "user", "content": "Count the singers."}]
        done = ChatModel(models["random"], base_url=proxy.url, api_key="none", temperature=0, backoff=0.01,
                         timeout=120, max_tokens=12).complete(msgs, on_delta=lambda t: None)
    finally:
        proxy.stop()
    assert proxy.cuts == 1 and done.attempts == 2
    assert done.response()["failed_attempts"] == ["the reply failed (the stream ended before the reply finished "
                                                  "(no finish_reason))"]
    assert done.finish_reason == "length" and done.completion_tokens == 12     # the whole second reply


@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "plain"])
def test_the_library_policy_runs_tool_calls_parsed_by_transformers(serve, streaming):
    server, models = serve
    env = TableEnv({TOOL_QUERY: "1"})
    policy = LLMPolicy(chat(server, models["caller"], max_tokens=2, stream=streaming), "tryagain", "agent",
                       actions="tools")
    traj = play(env, make_task(1), policy, "agent", Limits(max_turns=4))
    assert env.steps == [TOOL_QUERY] * 4 and traj.policy["ended_by"] == "turns" and traj.status == "submitted"
    assert traj.policy["usage"]["calls"] == 2                # two calls per reply: one model call per two turns
    first, second = traj.turns[0].info, traj.turns[1].info
    assert first["finish_reason"] == "tool_calls" and len(first["tool_calls"]) == 2
    assert first["tool_call"]["name"] == "sql" and json.loads(first["tool_call"]["arguments"]) == {"query": TOOL_QUERY}
    ids = [c["id"] for c in first["tool_calls"]]
    assert ids[0].endswith("_tool_call_0") and ids[1].endswith("_tool_call_1") and second["tool_call"]["id"] == ids[1]
    assert (first["response"]["ttft"] is not None) == streaming
    sent = traj.turns[2].info["request"]["added"]            # the second request: the calls answered by id
    assert [m["role"] for m in sent] == ["assistant", "tool", "tool"]
    assert [m["tool_call_id"] for m in sent[1:]] == ids and sent[1]["content"] == "1"


def test_an_empty_stop_reply_is_told_back_without_an_empty_assistant_message(serve):
    server, models = serve
    env = TableEnv()
    traj = play(env, make_task(1), LLMPolicy(chat(server, models["stopper"], max_tokens=4), "tryagain", "agent"),
                "agent", Limits(max_turns=2))
    assert [t.kind for t in traj.turns] == ["invalid", "invalid"] and env.steps == []
    assert all(t.info["finish_reason"] == "stop" for t in traj.turns)
    second = traj.turns[1].info["request"]["added"]
    assert all(m["role"] != "assistant" for m in second) and "nothing was run" in second[-1]["content"]


def run_cli(capsys, *argv):
    code = main(["run", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("actions", ["text", "tools"])
def test_icplay_run_against_transformers_serve(serve, tmp_path, capsys, monkeypatch, actions):
    server, models = serve
    monkeypatch.setenv("ICPLAY_PRICES", str(tmp_path / "none.json"))
    out = tmp_path / "run"
    model = models["random"] if actions == "text" else models["caller"]
    code, stdout, stderr = run_cli(
        capsys, "sql", "--tasks", "sql", "--sandbox", "sqlite", "--limit", "1", "--turns", "3", "--protocol", "agent",
        "--model", model, "--base-url", server.url, "--api-key", "none", "--max-tokens", "2", "--actions", actions,
        "--price", f"{model}=0,0", "--out", str(out), "--json", "--quiet")
    assert code == 0, stderr
    summary = json.loads(stdout)
    files = sorted((out / "sql").glob("*.json"))
    assert len(files) == 1 and summary["played"] == 1
    traj = load_trajectory(files[0])
    # text: every reply is cut at the token limit, so none runs; --max-tokens 2 is the user's cap, so the
    # second cut at it ends the episode (docs/agents.md)
    assert traj.status == "submitted" and traj.turns_taken == (2 if actions == "text" else 3)
    assert traj.policy["ended_by"] == ("truncated" if actions == "text" else "turns")
    assert traj.policy["actions"] == actions and traj.policy["model"] == model
    usage = traj.policy["usage"]
    assert usage["prompt_tokens"] > 0 and "prompt_tokens_unknown" not in usage
    if actions == "text":
        assert usage["calls"] == 2 and usage["completion_tokens"] == 4
        assert all(t.info["finish_reason"] == "length" and t.info.get("reply_truncated") for t in traj.turns)
        assert all(t.kind == "invalid" and not t.action and t.info["truncated"]["budget"] == 2 for t in traj.turns)
        assert summary["truncated_replies"] == 2
    else:
        assert usage["calls"] == 2 and [t.action for t in traj.turns] == [TOOL_QUERY] * 3
        assert [t.info["tool_call"]["id"].rsplit("_", 1)[1] for t in traj.turns] == ["0", "1", "0"]
        assert all(t.observation.strip() for t in traj.turns)     # SQLite answered each call
        assert traj.turns[0].info["response"]["ttft"] is not None   # the run streams too


def test_icplay_watch_plain_with_tool_calls_against_transformers_serve(serve, tmp_path):
    server, models = serve
    env = {**__import__("os").environ, "ICPLAY_HOME": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    script = "\n".join(["", "e SELECT 2", "r not again", ":stop", ""]) + "\n"
    done = subprocess.run([sys.executable, "-m", "icplay.cli", "watch", "sql", "--task", "bookshop-01", "--limit",
                           "1", "--plain", "--model", models["caller"], "--base-url", server.url, "--api-key", "none",
                           "--max-tokens", "2", "--actions", "tools", "--turns", "5"],
                          input=script, capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count(f"agent calls sql: {TOOL_QUERY}") >= 3
    traj = json.loads((tmp_path / "trajectories" / "watch" / "sql" / "bookshop-01.json").read_text())
    kinds = [(t["author"], t["action"], bool(t["info"].get("rejected"))) for t in traj["turns"]]
    assert kinds == [("agent", TOOL_QUERY, False), ("agent-edited-by-human", "SELECT 2", False),
                     ("human", "", True)]
    assert traj["policy"]["actions"] == "tools" and traj["status"] == "stopped"
    ids = [t["info"]["tool_call"]["id"] for t in traj["turns"]]
    assert ids[0].endswith("_tool_call_0") and ids[1].endswith("_tool_call_1") and ids[2].endswith("_tool_call_0")
