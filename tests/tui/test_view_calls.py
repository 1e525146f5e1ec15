"""The viewer shows what each agent turn sent and got back: the stepper (reasoning, parameters,
finish reason, tokens, latency, cost, the messages added) and compare (how two episodes'
calls differ) — episodes recorded with the real openai client against the local server."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))

from fake_openai_server import FakeOpenAIServer, Reply, Script, fenced  # noqa: E402

from icplay.agents.llm import ChatModel, LLMPolicy  # noqa: E402
from icplay.agents.pricing import PriceTable  # noqa: E402
from icplay.agents.protocols import play  # noqa: E402
from icplay.languages import make_env  # noqa: E402
from icplay.session import Session  # noqa: E402
from icplay.tui.screens.view_episode import ChooseEpisode, CompareScreen, EpisodeScreen  # noqa: E402

from test_view import loaded, view_app  # noqa: E402,F401
from tui_helpers import text_of, wait_for  # noqa: E402
from view_fixtures import SQL_TASK  # noqa: E402


def record(home: Path, session: str, model: str, replies: list, actions: str = "text", **options) -> None:
    env = make_env("sql", sandbox="sqlite")
    try:
        with FakeOpenAIServer(Script(replies, then="submit")) as server:
            chat = ChatModel(model, base_url=server.url, api_key="k", prices=PriceTable({"fake-cheap": (1.0, 2.0)}),
                             **options)
            policy = LLMPolicy(chat, "tryagain", "agent", actions=actions)
            play(env, SQL_TASK, policy, protocol="agent", save=Session(session, home=home).save,
                 policy_info=policy.describe())
    finally:
        env.close()


async def test_the_stepper_shows_the_call_and_compare_shows_the_differences(view_app, home):  # noqa: F811
    record(home, "thinker", "o4-mini", [
        Reply(fenced("SELECT title FROM books"), reasoning="List the titles first.", reasoning_tokens=21,
              cached_tokens=8),
        Reply("<think>too long", finish_reason="length"),
        Reply(fenced(SQL_TASK.gold)), "submit"], reasoning_effort="high")
    record(home, "classic", "fake-cheap", [Reply(fenced(SQL_TASK.gold), usage=False), "submit"])
    app = view_app()
    async with app.run_test(size=(130, 60)) as pilot:
        screen = await loaded(pilot)
        index = next(i for i, s in enumerate(screen.shown) if s.source == "thinker")
        for _ in range(index):
            await pilot.press("down")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, EpisodeScreen), 10, "the stepper")
        stepper = app.screen
        call = text_of(stepper.query_one("#call"))
        assert "Reasoning" in call and "List the titles first." in call
        assert "sent" in call and "max_completion_tokens=16000 · reasoning_effort=high" in call
        assert "finish" in call and "stop" in call
        assert "(cached 8)" in call and "(reasoning 21)" in call
        assert "first token after" in call and "cost" in call and "$" in call
        assert "Prompt · 2 messages sent, 2 new since the previous call" in call
        assert "system: " in call and "user: " in call
        await pilot.press("right")
        call = text_of(stepper.query_one("#call"))
        assert "length (truncated: raise --max-tokens)" in call and "too long" in call
        assert "truncated" in text_of(stepper.query_one("#turn-head"))
        assert "2 new since the previous call" in call      # the reply and the next user message, not the history
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ChooseEpisode), 10, "the list of episodes")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen), 10, "the comparison")
        differences = text_of(app.screen.query_one("#compare-calls"))
        assert "model" in differences and "o4-mini" in differences and "fake-cheap" in differences
        assert "max_completion_tokens=16000 reasoning_effort=high" in differences
        assert "max_tokens=1024 temperature=0.0" in differences
        assert "truncated replies" in differences and "calls without usage" in differences
        rows = list(app.screen.query(".compare-row"))
        assert "(21 reasoning)" in text_of(rows[0].query(".half")[0])
        assert "~" in text_of(rows[0].query(".half")[1])        # no usage from the server: icplay's estimate


async def test_the_stepper_shows_each_tool_call_s_name_and_id(view_app, home):  # noqa: F811
    calls = [{"id": "call_a1", "name": "sql", "arguments": '{"query": "SELECT title FROM books"}'},
             {"id": "call_a2", "name": "sql", "arguments": '{"query": "SELECT 1"}'}]
    record(home, "tools", "fake-cheap", [Reply("", tool_calls=calls, finish_reason="tool_calls"),
                                         Reply("", tool_calls=[{"id": "call_b1", "name": "submit", "arguments": "{}"}],
                                               finish_reason="tool_calls")], actions="tools")
    app = view_app()
    async with app.run_test(size=(130, 60)) as pilot:
        await loaded(pilot)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, EpisodeScreen), 10, "the stepper")
        stepper = app.screen
        assert "sql call call_a1" in text_of(stepper.query_one("#turn-head"))
        assert "tool call" in text_of(stepper.query_one("#call")) and "sql · id call_a1 · 1 of 2 in the reply" in \
            text_of(stepper.query_one("#call"))
        await pilot.press("right")
        await wait_for(pilot, lambda: "call_a2" in text_of(stepper.query_one("#turn-head")), 10, "the second call")
        assert "sql call call_a2" in text_of(stepper.query_one("#turn-head"))
