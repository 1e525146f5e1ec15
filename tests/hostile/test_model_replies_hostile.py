"""Hostile model servers: a reply is input at a door. A server that streams forever, one that
sends a huge error page, and a model that names its tool calls with terminal control codes
and markup never steer icplay: nothing runs, the deadline holds, the sentence stays one line,
the viewer shows text."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))

from agent_helpers import TableEnv, make_task  # noqa: E402
from fake_openai_server import FakeOpenAIServer, Reply, Script  # noqa: E402

from icplay.agents.llm import AgentError, ChatModel, LLMPolicy  # noqa: E402
from icplay.agents.protocols import Limits, play  # noqa: E402
from icplay.episode import Turn  # noqa: E402


def model(server, **kw):
    return ChatModel("gpt-4o", base_url=server.url, api_key="k", backoff=0.001, **kw)


def test_a_stream_that_never_finishes_runs_nothing_and_holds_the_deadline():
    endless = Reply("```sql\nDELETE FROM singer WHERE 1" + " OR 1" * 50_000, chunk_size=1, chunk_delay=0.01)
    with FakeOpenAIServer(Script([endless])) as server:
        env = TableEnv()
        started = time.monotonic()
        with pytest.raises(AgentError, match=r"did not answer within 0.5 s \(2 tries\)"):
            play(env, make_task(1), LLMPolicy(model(server, timeout=0.5, retries=1), "tryagain", "agent"), "agent",
                 Limits(max_turns=2))
        assert time.monotonic() - started < 20 and env.steps == []


def test_a_huge_error_page_is_one_short_sentence():
    page = "<html>" + "<div>overloaded</div>" * 200_000 + "</html>"
    with FakeOpenAIServer(Script([Reply(None, 400, body=page, content_type="text/html")])) as server:
        with pytest.raises(AgentError) as err:
            model(server).complete([{"role": "user", "content": "x"}])
    message = str(err.value)
    assert len(message) < 400 and "\n" not in message and message.startswith("the model server at ")


def test_tool_call_names_and_ids_with_control_codes_show_as_text():
    from icplay.tui.screens.view_episode import turn_heading

    call = {"id": "\x1b]52;c;aGk=\x07id[/]", "name": "sql\x1b[2J[bold red]x", "arguments": "{}"}
    turn = Turn(0, "agent", "SELECT 1", "1", info={"tool_call": call, "actions": "tools"})
    heading = turn_heading([turn], 0).plain
    assert "\x1b" not in heading and "\x07" not in heading
    assert "[bold red]x" in heading and "id[/]" in heading          # markup shown, never applied
