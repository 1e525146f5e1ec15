"""The watch screen on a tool-calling agent (``actions = "tools"``): the proposed call shown with
its tool, approved, its code edited, rejected with a comment that reaches the model as the
call's tool result, taken over — a real openai client against the scripted server's tool
calls (streamed in pieces), a real SQLite env, keys through Pilot."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "agents"))

from fake_openai_server import Script  # noqa: E402
from fake_tool_server import ToolServer, call, calls_reply  # noqa: E402
from test_watch import GOLD_S1, turns, wait_request, watch  # noqa: E402

from icplay.session import Session  # noqa: E402
from icplay.frontend.config import AgentChoice  # noqa: E402
from icplay.tui.screens.modals import CommentScreen, ScoreScreen  # noqa: E402

from tui_helpers import type_text, wait_for  # noqa: E402


def sql(query, ident):
    return call("sql", {"query": query}, ident)


@pytest.fixture
def tool_app(make_app, shop_catalog, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    servers: list[ToolServer] = []

    def make(replies, streaming=True):
        server = ToolServer(Script(replies, then=calls_reply(call("submit", {}, "end"))), streaming=streaming).start()
        servers.append(server)
        choice = AgentChoice(policy="llm", model="fake-model", base_url=server.url, mode="confirm", actions="tools")
        return make_app(env="sql", catalog=shop_catalog(), task="s1", watch=choice, sandbox=None), server

    yield make
    for server in servers:
        server.stop()


def tool_results(request: dict) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request["messages"] if m["role"] == "tool"}


@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "plain"])
async def test_approve_edit_reject_and_take_over_a_tool_calling_agent(tool_app, home, streaming):
    app, fake = tool_app([calls_reply(sql("SELECT name FROM customers", "a1"), sql("SELECT city FROM customers", "a2"),
                                      content="Names first, then cities."),
                          calls_reply(sql("DROP TABLE customers", "b1")),
                          calls_reply(sql("SELECT 1", "c1")),
                          calls_reply(call("submit", {}, "d1"))], streaming=streaming)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_request(pilot, "proposal")
        screen = watch(app)
        assert screen.panel.tool == "sql · id a1  (call 1 of 2 in one reply)"
        assert screen.panel.action == "SELECT name FROM customers"
        assert "Names first, then cities." in screen.panel.thought
        await pilot.press("ctrl+y")                                          # approve the first call
        await wait_for(pilot, lambda: len(turns(app)) == 1, 20, "the approved call")

        await wait_request(pilot, "proposal")                                # the reply's second call
        assert screen.panel.action == "SELECT city FROM customers" and len(fake.requests) == 1
        assert screen.panel.tool == "sql · id a2  (call 2 of 2 in one reply)"
        await pilot.press("ctrl+e")                                          # edit its code
        editor = screen.pane.editor
        assert editor.text == "SELECT city FROM customers"
        editor.load_text(GOLD_S1)
        editor.move_cursor(editor.document.end)
        await pilot.press("f5")
        await wait_for(pilot, lambda: len(turns(app)) == 2, 20, "the edited call")
        assert (turns(app)[1].author, turns(app)[1].proposed) == ("agent-edited-by-human", "SELECT city FROM customers")

        await wait_request(pilot, "proposal")
        assert screen.panel.action == "DROP TABLE customers" and screen.panel.tool == "sql · id b1"
        await pilot.press("ctrl+x")                                          # reject with a comment
        await wait_for(pilot, lambda: isinstance(app.screen, CommentScreen), 5, "the comment box")
        await type_text(pilot, "never drop tables")
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(turns(app)) == 3, 20, "the rejected call")

        await wait_request(pilot, "proposal")
        results = tool_results(fake.requests[2])
        assert results["b1"] == ("A human reviewer rejected this call without running it. "
                                 "Their comment: never drop tables")
        assert results["a2"].startswith("A human reviewer replaced your query with:\n```sql\n" + GOLD_S1)
        await pilot.press("f7")                                              # take over
        await wait_request(pilot, "action")
        editor.load_text("SELECT 42 AS answer")
        editor.move_cursor(editor.document.end)
        await pilot.press("f5")
        await wait_for(pilot, lambda: len(turns(app)) == 4, 20, "the human turn")
        await wait_request(pilot, "action")
        await pilot.press("f7")                                              # hand back

        await wait_request(pilot, "submit")
        last = fake.requests[3]["messages"]
        assert last[-1]["role"] == "user" and "SELECT 42 AS answer" in last[-1]["content"]
        await pilot.press("ctrl+y")                                          # the agent's submit call, approved
        await wait_for(pilot, lambda: screen.state == "submitted" and isinstance(app.screen, ScoreScreen), 30,
                       "the score")
    saved = Session("watch", home).load(app.catalog.find("s1"))
    assert saved.policy["actions"] == "tools" and saved.status == "submitted"
    assert [t.kind for t in saved.turns] == ["agent", "edited", "rejected", "human"]
    assert [t.info.get("tool_call", {}).get("id") for t in saved.turns] == ["a1", "a2", "b1", None]
    assert (fake.streamed > 0) == streaming
