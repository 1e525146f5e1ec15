"""Today's models and servers, with the real openai client against the local server
reproducing each provider's documented behaviour (tests/agents/fake_openai_server.py)."""

import threading

import pytest
from agent_helpers import make_task
from fake_openai_server import (Reply, Script, context_limit, fenced, openai_reasoning_refusals, prompt_tokens_of,
                                reasoning_budget,
                                server_error)

from icplay.agents.context import ContextLimits
from icplay.agents.families import family_of, parse_extra_body, parse_temperature
from icplay.agents.llm import AgentError, ChatModel, LLMPolicy, sent_messages
from icplay.agents.protocols import play
from icplay.agents.replies import ThinkSplitter, split_think

MSGS = [{"role": "user", "content": "Task: count"}]


def model(server, name="gpt-4o", **kw):
    kw.setdefault("backoff", 0.001)
    return ChatModel(name, base_url=server.url, api_key="test-key", **kw)


# -- 1. parameters that fit the model -----------------------------------------------------

def test_openai_reasoning_models_get_a_reasoning_budget_and_no_temperature(fake_server):
    server = fake_server(Script([fenced("SELECT 1")]), checks=[openai_reasoning_refusals])
    for name in ("gpt-5-mini", "o3", "o4-mini", "openai/gpt-5", "azure/o1-2024-12-17"):
        done = model(server, name).complete(MSGS)
        assert done.text == fenced("SELECT 1") and done.attempts == 1
        sent = server.requests[-1]
        assert sent["max_completion_tokens"] >= 16000
        assert "max_tokens" not in sent and "temperature" not in sent and "stop" not in sent
    done = model(server, "gpt-4o").complete(MSGS)          # classic: as before
    assert server.requests[-1]["max_tokens"] == 1024 and server.requests[-1]["temperature"] == 0
    assert family_of("gpt-4.1-mini").name == "classic" and family_of("o3-mini").name == "openai-reasoning"


def test_a_refusal_renames_or_drops_the_parameter_retries_and_is_remembered(fake_server):
    """A deployment the table cannot know (Azure names its own): the documented 400s teach it."""
    server = fake_server(Script([fenced("SELECT 1")]), checks=[openai_reasoning_refusals])
    notes: list[str] = []
    m = model(server, "gpt-5-deployment", temperature=0.0, max_tokens=2000)
    m.family = family_of("gpt-4o")                  # pretend the table did not know it
    m.on_note = notes.append
    done = m.complete(MSGS)
    assert done.text == fenced("SELECT 1")
    assert [r.get("max_tokens") for r in server.requests] == [2000, None, None]
    assert server.requests[-1]["max_completion_tokens"] == 2000 and "temperature" not in server.requests[-1]
    assert notes == ["model 'gpt-5-deployment' refused 'max_tokens' (unsupported_parameter): icplay sends "
                     "'max_completion_tokens' instead of 'max_tokens' for the rest of the run",
                     "model 'gpt-5-deployment' refused 'temperature' (unsupported_value): icplay no longer sends "
                     "'temperature' (was 0.0) for the rest of the run"]
    m.complete(MSGS)                                 # remembered: one request, right the first time
    assert len(server.requests) == 4 and notes[2:] == []
    assert m.describe()["learnt"] == notes and m.describe()["params"] == {"max_completion_tokens": 2000}


def test_a_400_turns_streaming_off_only_when_it_names_streaming(fake_server):
    server = fake_server(Script([Reply(None, 400, error={"message": "Invalid value for 'top_k'", "param": "top_k",
                                                         "code": "invalid_value"}), fenced("SELECT 1")]))
    m = model(server)
    with pytest.raises(AgentError, match="refused the request"):
        m.complete(MSGS, on_delta=lambda t: None)
    assert m.streams_ok is None                      # still willing to stream
    done = m.complete(MSGS, on_delta=lambda t: None)
    assert server.requests[-1]["stream"] is True and done.text == fenced("SELECT 1")
    refusing = fake_server(Script([fenced("SELECT 2")]), streaming="refuse")
    m = model(refusing)
    assert m.complete(MSGS, on_delta=lambda t: None).text == fenced("SELECT 2")
    assert m.streams_ok is False and "stream" not in refusing.requests[-1]


def test_options_reach_the_request(fake_server):
    server = fake_server(Script(["submit"]))
    model(server, "o3", reasoning_effort="low", seed=7, max_tokens=30000,
          extra_body={"top_k": 20, "chat_template_kwargs": {"enable_thinking": True}}).complete(MSGS)
    sent = server.requests[-1]
    assert sent["reasoning_effort"] == "low" and sent["seed"] == 7 and sent["max_completion_tokens"] == 30000
    assert sent["top_k"] == 20 and sent["chat_template_kwargs"] == {"enable_thinking": True}
    model(server, "gpt-4o", temperature="default").complete(MSGS)
    assert "temperature" not in server.requests[-1]
    model(server, "gpt-4o", temperature=0.7).complete(MSGS)
    assert server.requests[-1]["temperature"] == 0.7
    assert parse_temperature("default") == "default" and parse_temperature("0.2") == 0.2
    with pytest.raises(ValueError, match="expected a number or 'default'"):
        parse_temperature("hot")
    with pytest.raises(ValueError, match="expected a JSON object"):
        parse_extra_body("[1]")


# -- 2. truncation ------------------------------------------------------------------------------

def test_a_router_renamed_budget_is_truncation_not_no_command(fake_server, table_env):
    """Through a router, the reasoning model spends the budget thinking and answers nothing."""
    server = fake_server(Script([fenced("SELECT count(*) FROM singer"), "submit"]),
                         checks=[reasoning_budget(4000, thinking="The singer table... ```sql\nDROP TABLE singer\n```")])
    policy = LLMPolicy(model(server, "openrouter-reasoner", max_tokens=1024), "tryagain", "agent")
    proposal = policy.propose(make_task(1), play_traj(table_env))
    assert proposal.info["invalid"] and proposal.info["invalid_reason"] == "truncated"
    assert proposal.info["reply_truncated"] and proposal.info["finish_reason"] == "length"
    assert "cut off at the length limit (1024 tokens)" in proposal.info["retry_message"]
    assert "No SQL command was found" not in proposal.info["retry_message"]
    assert "DROP TABLE" in proposal.info["reasoning"] and proposal.action == ""
    assert proposal.info["usage"]["reasoning_tokens"] == 1024


def play_traj(env):
    from icplay.episode import Trajectory

    return Trajectory(task=make_task(1).to_dict(), env=env.name, sandbox=env.sandbox_kind)


def test_an_empty_reasoning_only_reply_is_not_called_no_command(fake_server, table_env):
    server = fake_server(Script([Reply("", reasoning="I should look at the tables.")]))
    proposal = LLMPolicy(model(server), "tryagain", "agent").propose(make_task(1), play_traj(table_env))
    assert proposal.info["invalid_reason"] == "reasoning_only"
    assert proposal.info["retry_message"].startswith("[icplay] Your last reply held only reasoning and no answer")


# -- 3. reasoning seen and kept ---------------------------------------------------------------

@pytest.mark.parametrize("streamed", [True, False])
@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_reasoning_fields_are_kept_apart_from_the_answer(fake_server, streamed, field):
    server = fake_server(Script([Reply(fenced("SELECT 1"), reasoning="Count the rows of singer.", reasoning_field=field,
                                       reasoning_tokens=12, cached_tokens=3)]))
    seen: dict[str, list[str]] = {"delta": [], "reasoning": []}
    kw = dict(on_delta=seen["delta"].append, on_reasoning=seen["reasoning"].append) if streamed else {}
    done = model(server).complete(MSGS, **kw)
    assert done.text == fenced("SELECT 1") and done.reasoning == "Count the rows of singer."
    assert done.reasoning_tokens == 12 and done.cached_tokens == 3
    if streamed:
        assert "".join(seen["reasoning"]) == "Count the rows of singer." and len(seen["reasoning"]) > 1
        assert "".join(seen["delta"]) == fenced("SELECT 1")
        assert done.ttft is not None and done.ttft <= done.latency


@pytest.mark.parametrize("streamed", [True, False])
def test_code_inside_think_tags_is_never_the_action(fake_server, table_env, streamed):
    draft = "<think>\nMaybe start over:\n```sql\nDROP TABLE singer\n```\nNo, just count.\n</think>\n"
    server = fake_server(Script([Reply(draft + fenced("SELECT count(*) FROM singer"), chunk_size=3),
                                 Reply("Hmm ```sql\nDROP TABLE singer\n``` no.</think>" + fenced("SELECT 2"))]))
    shown: dict[str, list[str]] = {"delta": [], "reasoning": []}
    notify = (lambda kind, data: shown.setdefault(kind, []).append(data.get("text", ""))) if streamed else None
    policy = LLMPolicy(model(server), "tryagain", "agent")
    proposal = policy.propose(make_task(1), play_traj(table_env), notify=notify)
    assert proposal.action == "SELECT count(*) FROM singer"
    assert "DROP TABLE" in proposal.info["reasoning"] and "DROP" not in proposal.raw
    if streamed:
        assert "DROP TABLE" in "".join(shown["reasoning"]) and "DROP" not in "".join(shown["delta"])
    lone = policy.propose(make_task(1), play_traj(table_env), notify=notify)     # a lone </think>
    assert lone.action == "SELECT 2" and "DROP TABLE" in lone.info["reasoning"]


def test_think_tags_split_as_they_stream_even_across_chunks():
    splitter = ThinkSplitter()
    out = []
    for piece in [" <thi", "nk>plan", " it</thi", "nk>\nSEL", "ECT 1"]:
        out += splitter.feed(piece)
    out += splitter.flush()
    joined = {k: "".join(t for kind, t in out if kind == k) for k in ("reasoning", "content")}
    assert joined == {"reasoning": "plan it", "content": "SELECT 1"}
    assert split_think("<think>cut off mid-thought") == ("", "cut off mid-thought")


@pytest.mark.parametrize("streamed", [True, False])
def test_list_content_and_thinking_parts_are_read(fake_server, streamed):
    parts = [{"type": "thinking", "thinking": [{"type": "text", "text": "Which table? singer."}]},
             {"type": "text", "text": "```sql\nSELECT "}, {"type": "text", "text": "1\n```"}]
    server = fake_server(Script([Reply(parts=parts)]))
    kw = dict(on_delta=lambda t: None, on_reasoning=lambda t: None) if streamed else {}
    done = model(server, "magistral-medium-latest").complete(MSGS, **kw)
    assert done.text == fenced("SELECT 1") and done.reasoning == "Which table? singer."


# -- tool calls (for the tools protocol) ------------------------------------------------------

@pytest.mark.parametrize("streamed", [True, False])
def test_tool_calls_are_passed_on_and_gathered_from_pieces(fake_server, streamed):
    calls = [{"id": "call_1", "name": "run_sql", "arguments": '{"query": "SELECT count(*) FROM singer"}'},
             {"id": "call_2", "name": "submit", "arguments": "{}"}]
    server = fake_server(Script([Reply(None, tool_calls=calls, finish_reason="tool_calls", chunk_size=5)]))
    tools = [{"type": "function", "function": {"name": "run_sql", "parameters": {"type": "object"}}}]
    kw = dict(on_delta=lambda t: None) if streamed else {}
    done = model(server).complete(MSGS, tools=tools, tool_choice="auto", **kw)
    assert done.tool_calls == calls and done.finish_reason == "tool_calls" and done.text == ""
    assert server.requests[-1]["tools"] == tools and server.requests[-1]["tool_choice"] == "auto"


# -- 5. what was sent ---------------------------------------------------------------------------

def test_each_turn_keeps_what_was_sent_without_repeating_the_history(fake_server, table_env):
    server = fake_server(Script([fenced("SHOW TABLES"), fenced("SELECT count(*) FROM singer"), "submit"]))
    m = model(server, prices=None)
    traj = play(table_env, make_task(1), LLMPolicy(m, "tryagain", "agent"), protocol="agent")
    turns = [t for t in traj.turns if t.info.get("request")]
    assert len(turns) == 2 == len(server.requests) - 1     # the submit's call is counted in the usage only
    for n, turn in enumerate(turns):
        assert sent_messages(traj, turn.index) == server.requests[n]["messages"]
        response = turn.info["response"]
        assert response["id"] == f"chatcmpl-{n + 1}" and response["finish_reason"] == "stop"
        assert response["latency"] >= 0 and response["usage"]["prompt_tokens"] > 0
        assert turn.info["request"]["params"] == {"max_tokens": 1024, "temperature": 0.0}
    later = turns[1].info["request"]
    assert later["ref"] == turns[0].index and later["keep"] == 2 and len(later["added"]) == 2


# -- 6. costs and errors ------------------------------------------------------------------------

def test_an_error_chunk_mid_stream_is_retried_like_a_5xx(fake_server):
    server = fake_server(Script([Reply("```sql\nSELECT 1\n```", stream_error_after=2), fenced("SELECT 2")]))
    retries: list = []
    done = model(server).complete(MSGS, on_delta=lambda t: None, on_retry=lambda *a: retries.append(a))
    assert done.text == fenced("SELECT 2") and done.attempts == 2
    assert "the reply failed (an error in the stream: Provider returned error)" in retries[0][2]


def test_a_stream_without_usage_counts_the_tokens_here_marked_an_estimate(fake_server):
    server = fake_server(Script([Reply(fenced("SELECT 1"), usage=False)]))
    done = model(server).complete(MSGS, on_delta=lambda t: None)
    assert done.counted == "chars/4" and done.completion_tokens == (len(fenced("SELECT 1")) + 3) // 4
    assert done.prompt_tokens and done.cost == pytest.approx((done.prompt_tokens * 2.5 + done.completion_tokens * 10)
                                                             / 1e6)


def test_a_context_length_400_trims_the_history_and_retries(fake_server, table_env):
    table_env.answers["SELECT name FROM singer"] = "Joe " * 950
    script = Script([fenced("SELECT name FROM singer")] * 3 + [fenced("SELECT count(*) FROM singer"), "submit"])
    server = fake_server(script, checks=[context_limit(4000)])
    policy = LLMPolicy(model(server), "tryagain", "agent", ContextLimits(max_tokens=100_000, keep_recent=1))
    traj = play(table_env, make_task(1), policy, protocol="agent")
    assert traj.status == "submitted" and table_env.steps[-1] == "SELECT count(*) FROM singer"
    refused = [r for r in server.requests if prompt_tokens_of(r) + 1024 > 4000]
    assert refused and len(server.requests) > 5      # it was too long, and the trimmed retry fitted
    assert all(t.action for t in traj.turns)


def test_a_context_that_cannot_fit_says_which_context_would(fake_server, table_env):
    server = fake_server(Script(["submit"]), checks=[context_limit(1200)])
    policy = LLMPolicy(model(server), "tryagain", "agent")
    with pytest.raises(AgentError, match=r"trimming the history does not make it fit; try --context \d+ \(the model "
                                         r"takes 1,200 tokens in all, --max-tokens included\)"):
        policy.propose(make_task(1), play_traj(table_env))
    server = fake_server(Script(["submit"]), checks=[context_limit(1000)])
    with pytest.raises(AgentError, match=r"the reply's budget \(1,024 tokens\) leaves no room for a prompt in the "
                                         r"model's 1,000; lower --max-tokens"):
        LLMPolicy(model(server), "tryagain", "agent").propose(make_task(1), play_traj(table_env))


def test_server_errors_are_still_retried(fake_server):
    server = fake_server(Script([server_error(503), fenced("SELECT 1")]))
    assert model(server).complete(MSGS, cancel=threading.Event()).attempts == 2


def test_an_empty_reply_is_not_sent_back_and_the_next_turn_goes_on(fake_server, table_env):
    """An empty truncated reply: no assistant message goes back (its retry note joins the user's
    turn), and a per-turn scripted server still knows which turn is asked for."""
    from fake_openai_server import ByTask

    server = fake_server(ByTask({"*": [fenced("SHOW TABLES"), Reply("", finish_reason="length"),
                                       Reply("", reasoning="hmm"), fenced("SELECT count(*) FROM singer"), "submit"]}))
    traj = play(table_env, make_task(1), LLMPolicy(model(server), "tryagain", "agent"), protocol="agent")
    assert table_env.steps == ["SHOW TABLES", "SELECT count(*) FROM singer"] and traj.status == "submitted"
    assert [t.info.get("invalid_reason") for t in traj.turns] == [None, "truncated", "reasoning_only", None]
    for request in server.requests:
        assert all(m["content"] for m in request["messages"]), request["messages"]
    assert "[icplay] Your last reply held only reasoning" in server.requests[3]["messages"][-1]["content"]
