"""The LLM policy with the real openai client against the scripted local server."""

import json

import pytest
from agent_helpers import make_task
from fake_openai_server import ByTask, Reply, Script, fenced, rate_limited, server_error

from icplay.agents.context import ContextLimits
from icplay.agents.llm import AgentError, ChatModel, LLMPolicy, add_usage
from icplay.agents.pricing import PriceTable, PriceTableError, parse_price_option
from icplay.agents.protocols import play
from icplay.episode import Trajectory

MSGS = [{"role": "user", "content": "Task: count"}]


def model(server, name="gpt-4o", **kw):
    kw.setdefault("backoff", 0.001)
    return ChatModel(name, base_url=server.url, api_key="test-key", **kw)


def test_retries_rate_limits_server_errors_malformed_bodies_and_timeouts(fake_server):
    server = fake_server(Script([rate_limited(0.05), server_error(502), Reply(body="{not json"),
                                 Reply(body='{"id": "x", "choices": []}'), Reply("late", delay=2.0),
                                 fenced("SELECT 1")]))
    sleeps = []
    m = model(server, timeout=0.5, sleep=sleeps.append)
    done = m.complete(MSGS)
    assert done.text == "```sql\nSELECT 1\n```"
    assert done.attempts == 6
    assert sleeps[0] >= 0.05          # Retry-After honoured
    assert all(b <= a * 4 + 0.05 for a, b in zip(sleeps, sleeps[1:]))
    assert done.prompt_tokens and done.completion_tokens


def test_gives_up_after_the_retries_in_one_sentence(fake_server):
    server = fake_server(Script([rate_limited(None)]))
    with pytest.raises(AgentError, match="kept rate-limiting .*3 tries") as err:
        model(server, retries=2).complete(MSGS)
    assert err.value.fatal
    assert len(server.requests) == 3


def test_bad_key_unknown_model_and_no_server_are_one_clear_sentence(fake_server, monkeypatch):
    server = fake_server(Script(["x"]), api_key="right-key")
    with pytest.raises(AgentError) as err:
        ChatModel("gpt-4o", base_url=server.url, api_key="wrong", backoff=0.001).complete(MSGS)
    assert "rejected the API key" in str(err.value) and err.value.fatal
    assert len(server.requests) == 1                       # not retried

    server = fake_server(Script(["x"]), models=["llama3"])
    with pytest.raises(AgentError, match=r"model 'gpt-4o' is not served at .*check --model"):
        model(server).complete(MSGS)

    retries: list = []        # a refused connection is said at once: no retry cycle
    with pytest.raises(AgentError, match=r"^nothing is listening at http://127.0.0.1:9/v1 \(connection refused\); "
                                         r"is the model server running, and is --base-url right\?$") as err:
        ChatModel("m", base_url="http://127.0.0.1:9/v1").complete(MSGS, on_retry=lambda *a: retries.append(a))
    assert err.value.fatal and retries == []

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(AgentError, match="no API key: set OPENAI_API_KEY or pass --api-key"):
        ChatModel("m").client()
    ChatModel("m", base_url="http://127.0.0.1:9/v1").client()     # a local server needs no key


def test_quota_is_not_retried_and_a_refused_request_fails_only_the_episode(fake_server):
    quota = Reply(None, 429, error={"message": "You exceeded your current quota", "code": "insufficient_quota"})
    server = fake_server(Script([quota]))
    with pytest.raises(AgentError, match="no quota left"):
        model(server).complete(MSGS)
    assert len(server.requests) == 1
    server = fake_server(Script([Reply(None, 400, error={"message": "Invalid value for 'top_k'"})]))
    with pytest.raises(AgentError, match="refused the request") as err:
        model(server).complete(MSGS)
    assert not err.value.fatal


def test_a_timeout_every_time_says_so(fake_server):
    server = fake_server(Script([Reply("late", delay=1.0)]))
    with pytest.raises(AgentError, match=r"did not answer within 0.2 s \(2 tries\)"):
        model(server, timeout=0.2, retries=1).complete(MSGS)


def test_tokens_from_the_api_and_cost_from_the_price_table(fake_server):
    server = fake_server(Script(["hello"]))
    done = model(server, "gpt-4o-2024-08-06").complete(MSGS)
    body = server.requests[0]
    assert body["model"] == "gpt-4o-2024-08-06" and body["temperature"] == 0.0
    assert done.cost == pytest.approx((done.prompt_tokens * 2.5 + done.completion_tokens * 10) / 1e6)
    done = model(server, "my-local-llama").complete(MSGS)
    assert done.cost is None and done.prompt_tokens > 0      # unpriced, still counted
    server = fake_server(Script([Reply("x", usage=False)]))
    done = model(server).complete(MSGS)       # no usage from the server: counted here, marked an estimate
    assert done.counted == "chars/4" and done.prompt_tokens == 3 + 4 + len("Task: count") // 4 + 1
    assert done.completion_tokens == 1 and done.cost == pytest.approx((done.prompt_tokens * 2.5 + 10) / 1e6)
    assert done.usage()["estimated_calls"] == 1 and done.response()["usage_counted"] == "chars/4"


def test_price_table_is_user_extendable(tmp_path, monkeypatch):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"my-finetune": {"input": 1, "output": 2}, "gpt-4o": [5, 5]}))
    monkeypatch.setenv("ICPLAY_PRICES", str(prices))
    table = PriceTable(dict([parse_price_option("llama3:8b=0.1,0.2")]))
    assert table.lookup("my-finetune") == (1.0, 2.0)
    assert table.lookup("openai/gpt-4o-2024-05-13") == (5.0, 5.0)   # user's entry wins, suffix and prefix fall back
    assert table.cost("llama3:8b", 1_000_000, 1_000_000) == pytest.approx(0.3)
    assert table.lookup("mystery") is None and table.cost("mystery", 10, 10) is None
    with pytest.raises(PriceTableError, match="MODEL=INPUT,OUTPUT"):
        parse_price_option("oops")
    prices.write_text(json.dumps({"x": "cheap"}))
    with pytest.raises(PriceTableError, match="price of 'x'"):
        PriceTable()


def test_usage_sums_known_and_counts_unknown():
    total = add_usage({}, {"prompt_tokens": 10, "completion_tokens": 2, "cost": 0.5, "calls": 1, "attempts": 2})
    total = add_usage(total, {"prompt_tokens": 5, "completion_tokens": 1, "cost": None, "calls": 1, "attempts": 1})
    assert total == {"prompt_tokens": 15, "completion_tokens": 3, "cost": 0.5, "cost_unknown": 1, "calls": 2,
                     "attempts": 3}
    assert add_usage(total, total)["cost_unknown"] == 2


def sent(server, i=-1):
    return server.requests[i]["messages"]


def test_tryagain_feeds_back_output_and_reward_under_intercode(fake_server, table_env):
    server = fake_server(Script([fenced("SELECT count(*) FROM singers"), "I think I need the tables.",
                                 fenced("SELECT count(*) FROM singer")]))
    policy = LLMPolicy(model(server), "tryagain", "intercode")
    traj = play(table_env, make_task(1), policy, "intercode")
    assert traj.solved and traj.status == "submitted" and traj.policy["ended_by"] == "solved"
    assert [t.action for t in traj.turns] == ["SELECT count(*) FROM singers", "", "SELECT count(*) FROM singer"]
    assert [t.reward for t in traj.turns] == [0.0, 0.0, 1.0]
    assert traj.turns[1].info["invalid"] and "No SQL command" in traj.turns[1].observation
    assert table_env.steps == ["SELECT count(*) FROM singers", "SELECT count(*) FROM singer"]   # prose never ran
    assert table_env.submits == 2          # one score per executed action, no extra final submit
    first, last = sent(server, 0), sent(server, -1)
    assert first[0]["role"] == "system" and "SQL" in first[0]["content"] and "reward" in first[0]["content"]
    assert first[1]["content"].startswith("Task: How many singers are there?") and "Database: concert" in first[1]["content"]
    assert last[2] == {"role": "assistant", "content": "```sql\nSELECT count(*) FROM singers\n```"}
    assert last[3]["content"] == "Output:\nError: no table\nReward: 0"
    assert last[4]["content"] == "I think I need the tables."
    assert last[5]["content"].startswith("[icplay] No SQL command was found")
    usage = traj.policy["usage"]
    assert usage["calls"] == 3 and usage["prompt_tokens"] > 0 and usage["cost"] > 0
    assert traj.turns[0].info["usage"]["calls"] == 1 and traj.turns[0].info["raw"].startswith("```sql")


def test_agent_protocol_never_shows_a_reward_and_the_model_submits(fake_server, table_env):
    server = fake_server(Script([fenced("SHOW TABLES"), fenced("SELECT count(*) FROM singer"), "submit"]))
    traj = play(table_env, make_task(1), LLMPolicy(model(server), "tryagain", "agent"), "agent")
    assert traj.solved and traj.policy["ended_by"] == "submit"
    assert [t.reward for t in traj.turns] == [None, None]
    assert table_env.submits == 1
    assert all("Reward" not in m["content"] for m in sent(server))
    system = sent(server, 0)[0]["content"]
    assert "`submit`" in system and "reward" not in system.lower()


def test_react_keeps_the_thought(fake_server, table_env):
    server = fake_server(Script(["Thought: count the singer rows.\nAction: ```sql\nSELECT count(*) FROM singer\n```"]))
    traj = play(table_env, make_task(1), LLMPolicy(model(server), "react", "intercode"), "intercode")
    assert traj.turns[0].thought == "count the singer rows." and traj.solved
    assert "Thought:" in sent(server, 0)[0]["content"]


def test_plan_and_solve_plans_once_then_one_action_per_step(fake_server, table_env):
    server = fake_server(Script(["1. List the tables.\n2. Count the singers.", fenced("SHOW TABLES"),
                                 fenced("SELECT count(*) FROM singer"), "submit"]))
    traj = play(table_env, make_task(1), LLMPolicy(model(server), "plan", "agent"), "agent")
    assert traj.turns[0].info["plan"] == ["List the tables.", "Count the singers."]
    assert "numbered plan" in sent(server, 0)[-1]["content"]
    assert sent(server, 1)[-1]["content"].startswith("Step 1 of the plan: List the tables.")
    assert sent(server, 2)[-1]["content"].endswith("Step 2 of the plan: Count the singers.\nReply with the SQL query for this step.")
    assert "The plan is done" in sent(server, 3)[-1]["content"]
    assert traj.solved and len(server.requests) == 4 and traj.policy["usage"]["calls"] == 4


def test_single_turn_gets_one_action(fake_server, table_env):
    server = fake_server(Script([fenced("SHOW TABLES"), fenced("SELECT count(*) FROM singer")]))
    traj = play(table_env, make_task(1), LLMPolicy(model(server), "single", "intercode"), "intercode")
    assert len(traj.turns) == 1 and not traj.solved and traj.policy["max_turns"] == 1
    assert "exactly one query" in sent(server, 0)[0]["content"]


def test_by_task_script_is_stateless_across_parallel_episodes(fake_server, table_env):
    server = fake_server(ByTask({"singers": [fenced("SHOW TABLES"), fenced("SELECT count(*) FROM singer")],
                                 "*": ["submit"]}))
    traj = play(table_env, make_task(1), LLMPolicy(model(server), "tryagain", "intercode"), "intercode")
    assert traj.solved and len(traj.turns) == 2
    other = play(table_env, make_task(2, query="Name the bands"), LLMPolicy(model(server), "tryagain", "agent"), "agent")
    assert other.turns == [] and other.status == "submitted"


def test_context_is_trimmed_long_outputs_first_then_old_turns(fake_server, table_env):
    table_env.answers["SELECT * FROM big"] = "row\n" * 5000
    replies = [fenced("SELECT * FROM big")] * 7 + [fenced("SELECT count(*) FROM singer")]
    server = fake_server(Script(replies))
    policy = LLMPolicy(model(server), "tryagain", "intercode",
                       ContextLimits(max_tokens=2500, max_observation_chars=2000, keep_recent=2))
    play(table_env, make_task(1), policy, "intercode")
    second = sent(server, 1)
    assert "[... 18000 characters cut ...]" in second[3]["content"]        # one long output, cut in the middle
    last = sent(server, -1)
    text = "\n".join(m["content"] for m in last)
    assert sum(4 + len(m["content"]) // 4 for m in last) <= 2500
    assert last[0]["role"] == "system" and last[1]["content"].startswith("Task:")
    assert "omitted" in text or "left out" in text
    assert last[-1]["content"].count("characters cut") == 1                 # the latest output is kept (cut only)


def test_human_edits_rejections_and_takeovers_read_back_to_the_model(fake_server, table_env):
    from icplay.agents.strategies import build_messages
    from icplay.episode import AGENT_EDITED, HUMAN, Turn

    traj = Trajectory(task=make_task(1).to_dict(), env="sql", sandbox="sqlite")
    traj.turns = [
        Turn(0, HUMAN, "", "", proposed="DROP TABLE singer", comment="never drop tables",
             info={"rejected": True, "raw": fenced("DROP TABLE singer")}),
        Turn(1, AGENT_EDITED, "SHOW TABLES", "singer", proposed="SHOW TABLE", info={"raw": fenced("SHOW TABLE")}),
        Turn(2, HUMAN, "SELECT name FROM singer", "Joe\nAnn"),
    ]
    msgs = build_messages(make_task(1), traj, "tryagain", "agent")
    roles = [m["role"] for m in msgs]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    assert "rejected this query without running it. Their comment: never drop tables" in msgs[3]["content"]
    assert "replaced your query with:\n```sql\nSHOW TABLES\n```" in msgs[5]["content"]
    assert "The human at the keyboard ran:\n```sql\nSELECT name FROM singer\n```\nOutput:\nJoe\nAnn" in msgs[5]["content"]


def test_streaming_passes_deltas_and_falls_back_quietly_where_the_server_does_not_stream(fake_server):
    import threading

    reply = "Thought: count them\n```sql\nSELECT count(*) FROM singer\n```"
    for streaming, streamed in ((True, True), (False, False), ("refuse", False)):
        server = fake_server(Script([reply]), streaming=streaming)
        m = model(server)
        deltas = []
        done = m.complete(MSGS, threading.Event(), deltas.append)
        assert done.text == reply and done.prompt_tokens and done.completion_tokens
        assert ("".join(deltas) == reply) == streamed and (len(deltas) > 1) == streamed
        assert m.streams_ok is streamed
        done = m.complete(MSGS, threading.Event(), deltas.append)   # what was learnt holds: no second refusal
        assert done.text == reply
        assert len(server.requests) == (2 if streaming != "refuse" else 3)
        assert [bool(r.get("stream")) for r in server.requests][-1] == streamed


def test_cancel_ends_a_wait_between_retries_at_once(fake_server):
    import threading

    from icplay.episode import Cancelled

    server = fake_server(Script([rate_limited(30)]))
    m = ChatModel("gpt-4o", base_url=server.url, api_key="k", max_backoff=30)
    cancel, waiting = threading.Event(), threading.Event()
    notes, outcome = [], []

    def on_retry(attempt, delay, why):
        notes.append((attempt, delay, why))
        waiting.set()

    def call():
        try:
            m.complete(MSGS, cancel, None, on_retry)
        except Cancelled:
            outcome.append("cancelled")

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    assert waiting.wait(10)
    cancel.set()                         # the human stops during the 30 s countdown
    thread.join(timeout=10)
    assert not thread.is_alive() and outcome == ["cancelled"]
    assert notes == [(1, 30.0, "rate-limited (429)")] and len(server.requests) == 1
