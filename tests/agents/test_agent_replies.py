"""Model replies are input: only a finished reply runs, one deadline per attempt, every error
shape readable, cost limits that hold, Azure deployments. The real openai client against the
local fake server (tests/agents/fake_openai_server.py)."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest
from agent_helpers import TableEnv, make_task
from fake_openai_server import FakeOpenAIServer, Reply, Script, fenced

from icplay.agents.endpoints import azure_deployment, azure_url
from icplay.agents.llm import AgentError, ChatModel, LLMPolicy
from icplay.agents.protocols import Limits, play
from icplay.cli import main

MSGS = [{"role": "user", "content": "Task: count"}]
CUT_RM = "```bash\nrm -rf /tmp/build"          # what a cut stream leaves: half a command
WHOLE = fenced("SELECT count(*) FROM singer")


def model(server, name="gpt-4o", **kw):
    kw.setdefault("backoff", 0.001)
    return ChatModel(name, base_url=server.url, api_key="test-key", **kw)


def streamed(m):
    return m.complete(MSGS, on_delta=lambda t: None)


# --- 1. only a finished reply counts ---------------------------------------------------------

@pytest.mark.parametrize("cut", [Reply(CUT_RM + "\n```", cut_after=3), Reply(CUT_RM + "\n```", cut_after=3, done_marker=True),
                                 Reply(CUT_RM + "\n```", cut_after=3, abrupt=True),
                                 Reply(CUT_RM, finish_reason="error")],
                         ids=["no-finish-no-done", "done-without-finish", "dropped-connection", "finish-error"])
def test_a_stream_that_did_not_finish_is_a_failed_attempt_retried(fake_server, cut):
    server = fake_server(Script([cut, WHOLE]))
    retries: list = []
    done = model(server).complete(MSGS, on_delta=lambda t: None, on_retry=lambda *a: retries.append(a))
    assert done.text == WHOLE and done.attempts == 2 and done.finish_reason == "stop"
    why = "cannot reach the server" if cut.abrupt else "the reply failed"    # openai says a hang-up so
    assert len(retries) == 1 and why in retries[0][2]
    assert done.response()["failed_attempts"] == [retries[0][2]]


def test_a_whole_reply_with_an_error_finish_or_a_200_error_body_is_retried(fake_server):
    error_body = json.dumps({"error": {"message": "Provider returned error", "code": 502}})
    server = fake_server(Script([Reply("SELECT 1", finish_reason="error"), Reply(body=error_body), WHOLE]))
    done = model(server, stream=False).complete(MSGS)
    assert done.text == WHOLE and done.attempts == 3
    assert "Provider returned error" in done.response()["failed_attempts"][1]


def test_a_cut_stream_never_runs_its_half_command(fake_server):
    env = TableEnv()
    server = fake_server(Script([Reply(CUT_RM, cut_after=2)]))
    policy = LLMPolicy(model(server, retries=1), "tryagain", "agent")
    with pytest.raises(AgentError, match=r"sent no usable reply 2 times \(the stream ended before the reply finished"):
        play(env, make_task(1, env="bash"), policy, "agent", Limits(max_turns=2))
    assert env.steps == [] and len(server.requests) == 2


# --- 2. a reply cut at the token limit, or leaving a fence open, never runs -----------------------

def test_a_length_cut_never_runs_and_is_asked_again_with_a_raised_budget(fake_server):
    env = TableEnv({"SELECT count(*) FROM singer": "6"})
    server = fake_server(Script([Reply(fenced("SELECT count(*) FROM singer"), finish_reason="length"), WHOLE, "submit"]))
    traj = play(env, make_task(1), LLMPolicy(model(server), "tryagain", "agent"), "agent", Limits(max_turns=5))
    first = traj.turns[0]
    assert first.kind == "invalid" and first.info["invalid_reason"] == "truncated" and first.info["reply_truncated"]
    assert first.info["truncated"] == {"reason": "length", "budget": 1024, "next_budget": 2048}
    assert env.steps == ["SELECT count(*) FROM singer"]           # only the whole reply's command ran
    assert [r["max_tokens"] for r in server.requests] == [1024, 2048, 1024]
    told = server.requests[1]["messages"][-1]["content"]
    assert "cut off at the length limit (1024 tokens), so nothing of it was run" in told
    assert traj.status == "submitted" and traj.policy["ended_by"] == "submit"


def test_two_cuts_at_the_chosen_budget_end_the_episode_truncated(fake_server):
    env = TableEnv()
    server = fake_server(Script([Reply(fenced("SELECT 1"), finish_reason="length")]))
    traj = play(env, make_task(1), LLMPolicy(model(server, max_tokens=50), "tryagain", "intercode"), "intercode",
                Limits(max_turns=10))
    assert env.steps == [] and len(traj.turns) == 2 and traj.policy["ended_by"] == "truncated"
    assert [r["max_tokens"] for r in server.requests] == [50, 50]   # the user's own budget is a cap
    assert traj.turns[1].info["truncated"] == {"reason": "length", "budget": 50, "next_budget": None}
    assert traj.status == "submitted" and traj.reward == 0.0


def test_a_reply_leaving_a_fence_open_never_runs(fake_server):
    env = TableEnv()
    server = fake_server(Script(["Let me look:\n```sql\nDELETE FROM singer", "submit"]))
    traj = play(env, make_task(1), LLMPolicy(model(server), "tryagain", "agent"), "agent", Limits(max_turns=3))
    assert env.steps == [] and traj.turns[0].info["invalid_reason"] == "open_fence"
    assert "left a code block open" in server.requests[1]["messages"][-1]["content"]
    assert server.requests[1]["max_tokens"] == 1024                  # not a budget problem: asked as usual


def test_a_length_cut_reply_with_tool_calls_runs_none_of_them(fake_server):
    env = TableEnv()
    call = {"id": "c1", "name": "sql", "arguments": json.dumps({"query": "DELETE FROM singer"})}
    server = fake_server(Script([Reply("", tool_calls=[call], finish_reason="length"), "submit"]))
    traj = play(env, make_task(1), LLMPolicy(model(server), "tryagain", "agent", actions="tools"), "agent",
                Limits(max_turns=2))
    assert env.steps == [] and traj.turns[0].info["invalid_reason"] == "truncated"
    assert traj.turns[0].info["cut_tool_calls"][0]["id"] == "c1" and "tool_calls" not in traj.turns[0].info


# --- 3. one deadline per attempt, and the episode's, whatever keeps the connection open ---------

@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "plain"])
def test_keep_alive_comments_do_not_outlast_the_timeout(fake_server, streaming):
    server = fake_server(Script([Reply("late", keepalive=0.05, keepalive_for=60)]), streaming=streaming)
    started = time.monotonic()
    with pytest.raises(AgentError, match=r"did not answer within 0.5 s \(2 tries\)"):
        model(server, timeout=0.5, retries=1).complete(MSGS, on_delta=(lambda t: None) if streaming else None)
    assert time.monotonic() - started < 20          # far below the 60 s the server would have kept it open
    assert len(server.requests) == 2


def test_the_episode_time_limit_holds_during_a_call_and_keeps_its_tokens(fake_server):
    env = TableEnv()
    server = fake_server(Script([Reply("late", keepalive=0.05, keepalive_for=60)]))
    policy = LLMPolicy(model(server, timeout=120), "tryagain", "agent")
    started = time.monotonic()
    traj = play(env, make_task(1), policy, "agent", Limits(max_turns=3, max_seconds=1.0))
    assert time.monotonic() - started < 20 and traj.policy["ended_by"] == "time"
    usage = traj.policy["usage"]
    assert usage["prompt_tokens"] > 0 and usage["estimated_calls"] == 1 and not traj.turns


# --- 4. every error shape is read ---------------------------------------------------------------

ERROR_SHAPES = {
    "openai": ({"error": {"message": "Invalid value for top_k", "type": "invalid_request_error"}}, "Invalid value for top_k"),
    "gemini-list": ([{"error": {"code": 400, "message": "Invalid JSON payload received.", "status": "INVALID_ARGUMENT"}}],
                    "Invalid JSON payload received."),
    "anthropic": ({"type": "error", "error": {"type": "invalid_request_error", "message": "messages: at least one"}},
                  "messages: at least one"),
    "vllm": ({"object": "error", "message": "This model does not support tools", "type": "BadRequestError",
              "param": None, "code": 400}, "This model does not support tools"),
    "plain-text": ("upstream said no to this request", "upstream said no to this request"),
}


@pytest.mark.parametrize("shape", list(ERROR_SHAPES))
def test_every_error_shape_gives_its_message(fake_server, shape):
    body, message = ERROR_SHAPES[shape]
    raw = body if isinstance(body, str) else json.dumps(body)
    server = fake_server(Script([Reply(None, 400, body=raw, content_type="text/plain" if shape == "plain-text"
                                       else "application/json")]))
    with pytest.raises(AgentError) as err:
        model(server).complete(MSGS)
    assert re.fullmatch(rf"the model server at \S+ refused the request \(400: {re.escape(message)}\)", str(err.value))


@pytest.mark.parametrize("refusal", [
    [{"error": {"code": 400, "message": "Invalid JSON payload received. Unknown name \"seed\": Cannot find field.",
                "status": "INVALID_ARGUMENT"}}],
    {"type": "error", "error": {"type": "invalid_request_error", "message": "seed: Extra inputs are not permitted"}},
    {"object": "error", "message": "Unrecognized request argument supplied: seed", "type": "BadRequestError", "code": 400},
], ids=["gemini", "anthropic", "vllm"])
def test_a_parameter_refused_in_any_shape_is_learnt(fake_server, refusal):
    def refuse_seed(request):
        return Reply(None, 400, body=json.dumps(refusal)) if "seed" in request else None

    server = fake_server(Script(["ok"]), checks=[refuse_seed])
    m = model(server, seed=7)
    assert m.complete(MSGS).text == "ok" and m.complete(MSGS).text == "ok"
    assert ["seed" in r for r in server.requests] == [True, False, False]
    assert m.learnt() and "'seed'" in m.learnt()[0]


def test_a_bad_key_said_as_a_400_stops_the_run_at_its_first_episode(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ICPLAY_PRICES", str(tmp_path / "none.json"))
    gemini = [{"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                         "status": "INVALID_ARGUMENT", "details": [{"reason": "API_KEY_INVALID"}]}}]
    with FakeOpenAIServer(Script([Reply(None, 400, body=json.dumps(gemini))])) as server:
        code = main(["run", "sql", "--tasks", "sql", "--limit", "3", "--model", "gemini-2.5-flash", "--base-url",
                     server.url, "--api-key", "bad", "--out", str(tmp_path / "r"), "--quiet"])
        requests = len(server.requests)
    err = capsys.readouterr().err
    assert code == 1 and requests == 1
    assert "rejected the API key (400: API key not valid. Please pass a valid API key.)" in err


# --- 5. cost limits that hold -------------------------------------------------------------------

def test_a_router_s_own_cost_is_used(fake_server):
    server = fake_server(Script([Reply("hi", usage_cost=0.0123)]))
    done = model(server, "some/unpriced-model").complete(MSGS)
    assert done.cost == pytest.approx(0.0123) and done.counted is None


def test_a_run_cost_limit_holds_against_a_server_without_usage(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ICPLAY_PRICES", str(tmp_path / "none.json"))
    with FakeOpenAIServer(Script([Reply(fenced("SELECT 1"), usage=False)])) as server:
        code = main(["run", "sql", "--tasks", "sql", "--limit", "4", "--model", "local", "--base-url", server.url,
                     "--price", "local=1000,1000", "--run-cost", "0.3", "--turns", "10", "--out", str(tmp_path / "r")])
        calls = len(server.requests)
    out = capsys.readouterr()
    assert code == 1 and "the run's cost limit ($0.3) is reached" in out.err
    assert calls <= 3                     # each call is ~0.1 $ by the estimate (>100 prompt tokens at $1000/M)
    usage = json.loads(next((tmp_path / "r" / "sql").glob("*.json")).read_text())["policy"]["usage"]
    assert usage["estimated_calls"] == usage["calls"] == calls and usage["cost"] >= 0.3


def test_a_call_cancelled_at_a_limit_keeps_its_tokens(fake_server):
    hold = threading.Event()
    server = fake_server(Script([Reply("never", hold=hold)]))
    m = model(server)
    cancel = threading.Event()
    from icplay.episode import Cancelled

    threading.Timer(0.3, cancel.set).start()
    with pytest.raises(Cancelled) as stopped:
        m.complete(MSGS, cancel)
    hold.set()
    assert stopped.value.usage["prompt_tokens"] > 0 and stopped.value.usage["estimated_calls"] == 1


# --- 6. Azure deployments ------------------------------------------------------------------------

def test_an_azure_deployment_url_goes_through_the_azure_client(fake_server):
    server = fake_server(Script([WHOLE]), api_key="az-key", azure_deployment="my-gpt")
    base = f"http://127.0.0.1:{server.port}/openai/deployments/my-gpt/chat/completions?api-version=2024-10-21"
    for url in (base, azure_url(f"http://127.0.0.1:{server.port}", "my-gpt", "2024-10-21")):
        done = ChatModel("gpt-4o", base_url=url, api_key="az-key", backoff=0.001).complete(MSGS, on_delta=lambda t: None)
        assert done.text == WHOLE
    assert all(p.startswith("/openai/deployments/my-gpt/chat/completions?api-version=2024-10-21") for p in server.paths)
    assert server.headers[0]["api-key"] == "az-key" and "authorization" not in server.headers[0]


def test_azure_urls_are_read_and_written():
    found = azure_deployment("https://r.openai.azure.com/openai/deployments/d1?api-version=2024-10-21")
    assert (found.endpoint, found.deployment, found.api_version) == ("https://r.openai.azure.com", "d1", "2024-10-21")
    assert azure_deployment("https://r.openai.azure.com/openai/v1/") is None        # the v1 endpoint: plain client
    with pytest.raises(ValueError, match="has no api-version"):
        azure_deployment("https://r.openai.azure.com/openai/deployments/d1")
    with pytest.raises(ValueError, match="needs --api-version"):
        azure_url("https://r.openai.azure.com", "d1", None)
    assert azure_url("https://r.openai.azure.com/openai/", "d1", "v") == \
        "https://r.openai.azure.com/openai/deployments/d1?api-version=v"


def test_icplay_run_takes_azure_flags(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ICPLAY_PRICES", str(tmp_path / "none.json"))
    with FakeOpenAIServer(Script(["submit"]), api_key="az-key", azure_deployment="dep") as server:
        code = main(["run", "sql", "--tasks", "sql", "--limit", "1", "--model", "gpt-4o", "--base-url",
                     f"http://127.0.0.1:{server.port}", "--azure-deployment", "dep", "--api-version", "2024-10-21",
                     "--api-key", "az-key", "--protocol", "agent", "--out", str(tmp_path / "r"), "--quiet"])
        paths = list(server.paths)
    assert code == 0, capsys.readouterr().err
    assert paths == ["/openai/deployments/dep/chat/completions?api-version=2024-10-21"]
