"""The tools protocol (``--actions tools``) with the real openai client against the scripted server."""

import json

import pytest
from agent_helpers import make_task
from fake_openai_server import Script
from fake_tool_server import ToolServer, call, calls_reply

from icplay.agents.llm import AgentError, ChatModel, LLMPolicy
from icplay.agents.protocols import Limits, play
from icplay.agents.strategies import build_messages
from icplay.agents.tools import action_protocol, tool_schemas, toolset
from icplay.episode import AGENT_EDITED, HUMAN, Decision, Trajectory, Turn

COUNT, TABLES, WRONG = "SELECT count(*) FROM singer", "SHOW TABLES", "SELECT count(*) FROM singers"


@pytest.fixture
def tool_server():
    servers = []

    def start(replies=None, **kw) -> ToolServer:
        server = ToolServer(Script(replies) if isinstance(replies, list) else replies, **kw).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def policy(server, strategy="tryagain", protocol="agent", **kw):
    model = ChatModel("gpt-4o", base_url=server.url, api_key="k", backoff=0.001, **kw)
    return LLMPolicy(model, strategy, protocol, actions="tools")


def sent(server, i=-1):
    return server.requests[i]["messages"]


def sql(query, ident=None):
    return call("sql", {"query": query}, ident)


class Gate:
    """Decides proposals from a list (Decision, or None to run as proposed); records what it saw."""

    def __init__(self, decisions):
        self.decisions, self.seen = list(decisions), []

    def decide(self, proposal, trajectory):
        self.seen.append(proposal)
        decision = self.decisions.pop(0) if self.decisions else None
        if decision is not None:
            return decision
        return Decision.submit() if proposal.action is None else Decision.run()


# --- the tools, from the language registry -------------------------------------------------


def test_each_language_offers_its_run_tool_and_submit_with_typed_parameters():
    by_lang = {lang: {t["function"]["name"]: t["function"] for t in tool_schemas(lang)}
               for lang in ("bash", "sql", "python", "ctf")}
    assert set(by_lang["bash"]) == {"bash", "submit"} and set(by_lang["sql"]) == {"sql", "submit"}
    assert set(by_lang["python"]) == {"python", "submit"} and set(by_lang["ctf"]) == {"bash", "submit"}
    params = {lang: tools[toolset(lang).run]["parameters"] for lang, tools in by_lang.items()}
    assert params["bash"]["properties"] == {"command": {"type": "string", "description": "The Bash command to run."}}
    assert params["sql"]["required"] == ["query"] and params["python"]["required"] == ["code"]
    assert "capture-the-flag" in by_lang["ctf"]["bash"]["description"]
    assert by_lang["sql"]["submit"]["parameters"]["properties"] == {}
    assert by_lang["python"]["submit"]["parameters"]["required"] == ["function_name"]
    assert by_lang["ctf"]["submit"]["parameters"]["required"] == ["flag"]
    for tools in by_lang.values():
        for fn in tools.values():
            json.dumps(fn)
            assert fn["parameters"]["type"] == "object" and fn["parameters"]["additionalProperties"] is False


def test_a_call_becomes_an_action_or_says_what_is_wrong_with_it():
    sqlt, py, ctf = toolset("sql"), toolset("python"), toolset("ctf")
    assert sqlt.action_of({"name": "sql", "arguments": '{"query": "SELECT 1"}'}) == ("SELECT 1", None)
    assert sqlt.action_of({"name": "sql", "arguments": '{"sql": "SELECT 1"}'}) == ("SELECT 1", None)  # one arg
    assert sqlt.action_of({"name": "submit", "arguments": "{}"}) == ("submit", None)
    assert py.action_of({"name": "submit", "arguments": '{"function_name": "add"}'}) == ("submit add", None)
    assert ctf.action_of({"name": "submit", "arguments": {"flag": "picoCTF{x}"}}) == ("submit picoCTF{x}", None)
    assert sqlt.action_of({"name": "bash", "arguments": "{}"}) == (None, "there is no tool `bash`")
    assert "not a JSON object" in sqlt.action_of({"name": "sql", "arguments": '{"query": "SEL'})[1]
    assert sqlt.action_of({"name": "sql", "arguments": '{"query": " "}'})[1] == 'the "query" of `sql` is empty'
    assert sqlt.action_of({"name": "sql", "arguments": '{"a": 1, "b": 2}'})[1] == \
        '`sql` needs the argument "query" (a string)'
    assert action_protocol(None) == "text" and action_protocol("TOOLS") == "tools"
    with pytest.raises(ValueError, match="text or tools"):
        action_protocol("json")


# --- the protocol, end to end --------------------------------------------------------------


@pytest.mark.parametrize("streaming", [True, False])
def test_tool_calls_run_in_order_each_a_turn_and_results_go_back_as_tool_messages(tool_server, table_env,
                                                                                   streaming):
    server = tool_server([calls_reply(sql(TABLES, "c1"), sql(COUNT, "c2"), content="Look, then count."),
                          calls_reply(call("submit", {}, "c3"))], streaming=streaming)
    traj = play(table_env, make_task(1), policy(server), "agent", Limits(max_turns=5))
    assert table_env.steps == [TABLES, COUNT] and traj.solved and traj.policy["ended_by"] == "submit"
    assert len(server.requests) == 2          # the second call of a reply costs no model call
    first, second = traj.turns
    assert first.info["tool_call"] == {"id": "c1", "name": "sql", "arguments": json.dumps({"query": TABLES})}
    assert [c["id"] for c in first.info["tool_calls"]] == ["c1", "c2"] and first.thought == "Look, then count."
    assert second.info["tool_call"]["id"] == "c2" and "tool_calls" not in second.info
    assert traj.policy["actions"] == "tools" and traj.policy["usage"]["calls"] == 2
    request = server.requests[-1]
    assert [t["function"]["name"] for t in request["tools"]] == ["sql", "submit"]
    msgs = request["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "tool"]
    assert msgs[2]["content"] == "Look, then count."
    assert [c["id"] for c in msgs[2]["tool_calls"]] == ["c1", "c2"]
    assert msgs[2]["tool_calls"][1]["function"] == {"name": "sql", "arguments": json.dumps({"query": COUNT})}
    assert msgs[3] == {"role": "tool", "tool_call_id": "c1", "content": "singer\nconcert"}
    assert msgs[4] == {"role": "tool", "tool_call_id": "c2", "content": "6"}
    assert "call the `submit` tool" in msgs[0]["content"] and "```sql" not in msgs[0]["content"]
    assert all(m.get("content") or m.get("tool_calls") for m in msgs)     # no empty assistant message


def test_intercode_protocol_puts_the_reward_in_the_tool_result(tool_server, table_env):
    server = tool_server([calls_reply(sql(WRONG, "a")), calls_reply(sql(COUNT, "b"))])
    traj = play(table_env, make_task(1), policy(server, protocol="intercode"), "intercode")
    assert traj.solved and [t.reward for t in traj.turns] == [0.0, 1.0]
    assert sent(server)[-1] == {"role": "tool", "tool_call_id": "a", "content": "Error: no table\nReward: 0"}


def test_a_reply_without_a_call_or_with_a_bad_call_runs_nothing_and_the_model_is_told(tool_server, table_env):
    server = tool_server(["I would count the singers.", calls_reply(call("sql", '{"query": "SEL', "x"),
                                                                    sql(COUNT, "y")),
                          calls_reply(call("shell", {"command": "ls"}, "z")), calls_reply(sql(COUNT, "w"))])
    traj = play(table_env, make_task(1), policy(server, protocol="intercode"), "intercode")
    assert table_env.steps == [COUNT] and traj.solved
    assert [t.kind for t in traj.turns] == ["invalid", "invalid", "invalid", "agent"]
    assert traj.turns[0].observation.startswith("[icplay] Your last reply called no tool, so nothing was run.")
    msgs = sent(server)
    assert msgs[2] == {"role": "assistant", "content": "I would count the singers."}
    assert msgs[3]["role"] == "user" and "called no tool" in msgs[3]["content"]
    assert msgs[4]["tool_calls"][0]["id"] == "x" and msgs[5]["tool_call_id"] == "x"
    assert "This call was not run: the arguments of `sql` are not a JSON object" in msgs[5]["content"]
    assert msgs[6] == {"role": "tool", "tool_call_id": "y", "content": "[icplay] Not run: an earlier call of the "
                       "same reply was not run, so the rest were skipped."}
    assert "there is no tool `shell`" in msgs[8]["content"] and "Reward: 0" in msgs[8]["content"]


def test_an_empty_reply_is_never_sent_back_as_an_empty_assistant_message(tool_server, table_env):
    server = tool_server(["", calls_reply(call("submit", {}, "s"))])
    traj = play(table_env, make_task(1), policy(server), "agent")
    assert traj.turns[0].kind == "invalid" and traj.status == "submitted"
    roles = [m["role"] for m in sent(server)]
    assert roles == ["system", "user"] and "called no tool" in sent(server)[1]["content"]


def test_watch_decisions_on_tool_calls_reach_the_model_as_tool_results(tool_server, table_env):
    server = tool_server([calls_reply(sql("DROP TABLE singer", "r1"), sql(TABLES, "r2")),
                          calls_reply(sql(WRONG, "e1"), sql(TABLES, "e2")),
                          calls_reply(call("submit", {}, "s"))])
    gate = Gate([Decision.reject("never drop tables"), Decision.edit(COUNT, "singer, not singers"), None])
    traj = play(table_env, make_task(1), policy(server), "agent", gate=gate)
    assert table_env.steps == [COUNT, TABLES] and traj.status == "submitted" and traj.policy["ended_by"] == "submit"
    assert [t.kind for t in traj.turns] == ["rejected", "edited", "agent"]
    assert [p.action for p in gate.seen] == ["DROP TABLE singer", WRONG, TABLES, None]
    assert traj.turns[0].info["tool_call"]["id"] == "r1" and traj.turns[1].proposed == WRONG
    msgs = sent(server)
    assert msgs[3] == {"role": "tool", "tool_call_id": "r1", "content": "A human reviewer rejected this call without "
                       "running it. Their comment: never drop tables"}
    assert msgs[4]["tool_call_id"] == "r2" and msgs[4]["content"].startswith("[icplay] Not run")
    assert msgs[5]["tool_calls"][0]["function"]["arguments"] == json.dumps({"query": WRONG})   # what it proposed
    assert msgs[6]["content"] == ("A human reviewer replaced your query with:\n```sql\n" + COUNT + "\n```\n"
                                  "Their comment: singer, not singers\nOutput:\n6")
    assert msgs[7] == {"role": "tool", "tool_call_id": "e2", "content": "singer\nconcert"}


def test_a_human_turn_in_the_middle_of_a_reply_answers_its_other_calls_as_not_run():
    traj = Trajectory(task=make_task(1).to_dict(), env="sql", sandbox="sqlite")
    calls = [{"id": "a", "name": "sql", "arguments": '{"query": "SHOW TABLES"}'},
             {"id": "b", "name": "sql", "arguments": '{"query": "SELECT 1"}'}]
    traj.turns = [Turn(0, "agent", TABLES, "singer", info={"tool_call": calls[0], "tool_calls": calls, "raw": ""}),
                  Turn(1, HUMAN, COUNT, "6"),
                  Turn(2, AGENT_EDITED, COUNT, "6", proposed=WRONG,
                       info={"tool_call": {"id": "c", "name": "sql", "arguments": "{}"},
                             "tool_calls": [{"id": "c", "name": "sql", "arguments": "{}"}]})]
    msgs = build_messages(make_task(1), traj, "tryagain", "agent", actions="tools")
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "tool", "user", "assistant", "tool"]
    assert msgs[2]["content"] is None
    assert msgs[4] == {"role": "tool", "tool_call_id": "b",
                       "content": "[icplay] Not run: the human at the keyboard took the turn instead."}
    assert msgs[5]["content"].startswith("The human at the keyboard ran:\n```sql\n" + COUNT)
    assert msgs[7]["content"].startswith("A human reviewer replaced your query with")


def test_the_strategies_work_under_the_tools_protocol(tool_server, table_env):
    server = tool_server(["1. List the tables.\n2. Count the singers.", calls_reply(sql(TABLES, "p1")),
                          calls_reply(sql(COUNT, "p2")), calls_reply(call("submit", {}, "p3"))])
    traj = play(table_env, make_task(1), policy(server, "plan"), "agent")
    assert traj.solved and traj.turns[0].info["plan"] == ["List the tables.", "Count the singers."]
    assert "tools" not in server.requests[0]            # the plan is asked for as text
    assert sent(server, 2)[-2] == {"role": "tool", "tool_call_id": "p1", "content": "singer\nconcert"}
    assert sent(server, 2)[-1] == {"role": "user", "content": "Step 2 of the plan: Count the singers.\n"
                                                              "Reply with the SQL query for this step."}
    table_env.steps.clear()
    server = tool_server([calls_reply(sql(COUNT, "r"), content="The singer table has the rows."),
                          calls_reply(call("submit", {}, "s"))])
    traj = play(table_env, make_task(1), policy(server, "react"), "agent")
    assert traj.turns[0].thought == "The singer table has the rows." and traj.solved
    assert "reasoning (one to three sentences) as the\nmessage text" in sent(server, 0)[0]["content"]
    server = tool_server([calls_reply(sql(TABLES, "x"), sql(COUNT, "y"))])
    traj = play(table_env, make_task(1), policy(server, "single", "intercode"), "intercode")
    assert len(traj.turns) == 1 and traj.policy["max_turns"] == 1 and len(server.requests) == 1
    assert "exactly one call of the `sql` tool" in sent(server, 0)[0]["content"]


def test_a_server_that_refuses_tools_says_so_in_one_sentence_naming_actions_text(tool_server, table_env):
    server = tool_server(refuse_tools=True)
    with pytest.raises(AgentError) as caught:
        play(table_env, make_task(1), policy(server), "agent")
    message = str(caught.value)
    assert "--actions text" in message and "tool" in message and "\n" not in message and caught.value.fatal
    assert len(server.requests) == 1                      # not retried


def test_the_option_reaches_the_policy_from_the_library_spec_and_config_toml(tmp_path):
    from icplay.executors.specs import PolicySpec
    from icplay.frontend.config import ConfigError, agent_choice, load_config
    from icplay.frontend.policies import PolicyError, make_policy

    built = PolicySpec("llm", model="m", base_url="http://127.0.0.1:9/v1", actions="tools").build("sql")
    assert built.actions == "tools" and built.describe()["actions"] == "tools"
    assert PolicySpec("llm", model="m", base_url="http://127.0.0.1:9/v1").build("sql").actions == "text"
    path = tmp_path / "config.toml"
    path.write_text('[agent]\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\nactions = "tools"\n')
    choice = agent_choice(load_config(path, environ={}), home=tmp_path)
    policy, info = make_policy(choice, make_task(1))
    assert choice.actions == "tools" and policy.actions == "tools" and info["actions"] == "tools"
    path.write_text('[agent]\nactions = 1\n')
    with pytest.raises(ConfigError, match="agent.actions"):
        load_config(path, environ={})
    choice.actions = "json"
    with pytest.raises(PolicyError, match="unknown actions 'json' \\(text or tools\\)"):
        make_policy(choice, make_task(1))
