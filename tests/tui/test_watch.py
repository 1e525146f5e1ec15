"""The watch screen: a real openai client against the local fake server, a real SQLite env
(and bwrap for Bash), every intervention driven by keys through Pilot."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "agents"))

from fake_openai_server import FakeOpenAIServer, Reply, Script, fenced  # noqa: E402

from icplay.session import Session  # noqa: E402
from icplay.frontend.config import AgentChoice  # noqa: E402
from icplay.tui.screens.modals import CommentScreen, ScoreScreen  # noqa: E402
from icplay.tui.screens.live import LiveScreen  # noqa: E402

from tui_helpers import type_text, wait_for  # noqa: E402

GOLD_S1 = "SELECT name FROM customers WHERE city = 'London' ORDER BY name"


@pytest.fixture
def server():
    servers: list[FakeOpenAIServer] = []

    def start(replies, streaming=True, **kw) -> FakeOpenAIServer:
        s = FakeOpenAIServer(Script(replies, then="submit"), streaming=streaming, **kw).start()
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()


@pytest.fixture
def watch_app(make_app, shop_catalog, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    def make(server=None, mode="confirm", task="s1", catalog=None, **kw):
        choice = AgentChoice(policy="llm", model="fake-model", base_url=server.url, mode=mode) if server else \
            AgentChoice(policy="gold", mode=mode)
        kw.setdefault("sandbox", None)
        return make_app(env="sql", catalog=catalog or shop_catalog(), task=task, watch=choice, **kw)

    return make


def watch(app) -> LiveScreen:
    for screen in reversed(app.screen_stack):
        if isinstance(screen, LiveScreen) and screen.agent is not None:
            return screen
    raise AssertionError(f"no watch screen in {app.screen_stack}")


async def wait_request(pilot, kind: str, timeout: float = 20) -> None:
    def waiting() -> bool:       # an open request: the one just answered may still be shown for a moment
        request = watch(pilot.app).request
        return request is not None and request.kind == kind and request.open

    await wait_for(pilot, waiting, timeout, f"a {kind} request")


def turns(app):
    return watch(app).trajectory.turns if watch(app).trajectory is not None else []


def prompt_text(request: dict) -> str:
    return "\n".join(str(m.get("content") or "") for m in request["messages"])


@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "plain"])
async def test_approve_edit_and_reject_with_the_comment_in_the_next_request(watch_app, server, streaming, home):
    fake = server(["I list them.\n" + fenced("SELECT name FROM customers"),
                   fenced("SELECT city FROM customers"),
                   fenced("DROP TABLE customers"),
                   "submit"], streaming=streaming)
    app = watch_app(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_request(pilot, "proposal")
        screen = watch(app)
        assert "SELECT name FROM customers" in str(screen.panel.action)
        await pilot.press("ctrl+y")                                          # approve
        await wait_for(pilot, lambda: len(turns(app)) == 1, 20, "the approved turn")
        assert (turns(app)[0].author, turns(app)[0].action) == ("agent", "SELECT name FROM customers")

        await wait_request(pilot, "proposal")
        await pilot.press("ctrl+e")                                          # edit in place
        editor = screen.pane.editor
        assert editor.text == "SELECT city FROM customers"
        editor.load_text(GOLD_S1)
        editor.move_cursor(editor.document.end)
        await pilot.press("f5")
        await wait_for(pilot, lambda: len(turns(app)) == 2, 20, "the edited turn")
        edited = turns(app)[1]
        assert (edited.author, edited.action, edited.proposed) == ("agent-edited-by-human", GOLD_S1,
                                                                   "SELECT city FROM customers")

        await wait_request(pilot, "proposal")
        await pilot.press("ctrl+x")                                          # reject with a comment
        await wait_for(pilot, lambda: isinstance(app.screen, CommentScreen), 5, "the comment box")
        await type_text(pilot, "never drop tables")
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(turns(app)) == 3, 20, "the rejected turn")
        rejected = turns(app)[2]
        assert rejected.info.get("rejected") and rejected.comment == "never drop tables" and not rejected.action

        await wait_request(pilot, "submit")
        assert "never drop tables" in prompt_text(fake.requests[3])          # the comment reached the model
        await pilot.press("ctrl+y")                                          # the agent's submit, approved
        await wait_for(pilot, lambda: screen.state == "submitted" and isinstance(app.screen, ScoreScreen), 30,
                       "the score")
        assert [screen.turn_list.get_option_at_index(i).prompt.plain.split()[1] for i in range(3)] == \
            ["agent", "edited", "rejected"]
    assert (fake.streamed > 0) == streaming
    saved = Session("watch", home).load(app.catalog.find("s1"))
    assert saved.status == "submitted" and saved.reward == 1.0
    assert [t.author for t in saved.turns] == ["agent", "agent-edited-by-human", "human"]
    assert saved.policy["model"] == "fake-model" and saved.policy["usage"]["prompt_tokens"] > 0


async def test_take_over_then_hand_back_shows_the_human_turn_in_the_next_request(watch_app, server, home):
    fake = server([fenced("SELECT 1"), fenced("SELECT name FROM customers")], streaming=True)
    app = watch_app(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_request(pilot, "proposal")
        await pilot.press("f7")                                              # take over
        await wait_request(pilot, "action")
        assert watch(app).broker.mode == "human"
        editor = watch(app).pane.editor
        editor.load_text("SELECT 42 AS answer")
        editor.move_cursor(editor.document.end)
        await pilot.press("f5")
        await wait_for(pilot, lambda: len(turns(app)) == 1, 20, "the human turn")
        assert (turns(app)[0].author, turns(app)[0].proposed) == ("human", None)
        await wait_request(pilot, "action")
        await pilot.press("f7")                                              # hand back
        await wait_request(pilot, "proposal")
        assert len(fake.requests) == 2 and "SELECT 42 AS answer" in prompt_text(fake.requests[1])
        await pilot.press("f12")                                             # stop
        await wait_for(pilot, lambda: watch(app).state == "stopped", 20, "the stop")
    saved = Session("watch", home).load(app.catalog.find("s1"))
    assert saved.status == "stopped" and [t.author for t in saved.turns] == ["human"]


async def test_taking_over_clears_the_agents_scored_proposal_from_the_panel(watch_app, server):
    """The agent's submit, with what it would score, is on offer; after F7 it is not, so the
    panel stops showing it (it showed the stale submit and its score until the next proposal)."""
    fake = server([fenced("SELECT name FROM customers"), "submit"], streaming=True)
    app = watch_app(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_request(pilot, "proposal")
        await pilot.press("ctrl+y")
        await wait_request(pilot, "submit")
        panel = watch(app).panel
        assert panel.action == "submit" and panel.scored
        assert "submit" in panel.body().renderables[-2].plain
        await pilot.press("f7")                                              # take over
        await wait_request(pilot, "action")
        assert (panel.action, panel.scored) == (None, [])
        shown = "\n".join(r.plain for r in panel.body().renderables)
        assert "submit" not in shown and "you have the turn" in shown


async def test_switching_mode_while_the_model_thinks(watch_app, server):
    first, second = threading.Event(), threading.Event()
    fake = server([Reply(fenced("SELECT name FROM customers"), hold=first),
                   Reply(fenced("SELECT city FROM customers"), hold=second)])
    app = watch_app(fake, mode="confirm")
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: len(fake.requests) == 1 and watch(app).agent_state == "thinking", 20,
                           "the model to think")
            await pilot.press("alt+1")                                       # confirm -> auto, mid-thought
            assert watch(app).broker.mode == "auto"
            first.set()
            await wait_for(pilot, lambda: len(turns(app)) == 1, 20, "the proposal to run unasked")
            assert turns(app)[0].author == "agent"
            await wait_for(pilot, lambda: len(fake.requests) == 2 and watch(app).agent_state == "thinking", 20,
                           "the second call")
            await pilot.press("f10", "f10")                                  # auto -> confirm -> human: cancelled
            await wait_request(pilot, "action")
            assert watch(app).broker.mode == "human" and len(turns(app)) == 1   # no turn for the cancelled call
            assert watch(app).cancelled_calls == 1 and "cancelled" in watch(app).panel.hint
    finally:
        first.set()
        second.set()


async def test_stop_mid_call_records_no_turn_and_the_stopped_episode_resumes(watch_app, server, home):
    hold = threading.Event()
    fake = server([fenced("SELECT name FROM customers"), Reply(fenced("SELECT 2"), hold=hold),
                   fenced(GOLD_S1)])
    app = watch_app(fake, mode="auto")
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: len(fake.requests) == 2 and watch(app).agent_state == "thinking", 20,
                           "the second call")
            started = time.monotonic()
            await pilot.press("f12")
            await wait_for(pilot, lambda: watch(app).state == "stopped", 10, "the stop")
            assert time.monotonic() - started < 5, "the held call was not cancelled"
            assert [t.action for t in turns(app)] == ["SELECT name FROM customers"]
    finally:
        hold.set()
    saved = Session("watch", home).load(app.catalog.find("s1"))
    assert saved.status == "stopped" and len(saved.turns) == 1

    app2 = watch_app(fake, mode="confirm")                                   # reopened in another mode
    async with app2.run_test(size=(120, 40)) as pilot:
        await wait_request(pilot, "proposal")
        screen = watch(app2)
        assert [t.action for t in turns(app2)] == ["SELECT name FROM customers"]   # replayed
        assert screen.turn_list.option_count == 1
        assert screen.request.proposal.action == GOLD_S1
        assert "SELECT name FROM customers" in prompt_text(fake.requests[-1])     # the model sees the old turn
        await pilot.press("ctrl+y")
        await wait_for(pilot, lambda: len(turns(app2)) == 2, 20, "the new turn")
    saved = Session("watch", home).load(app2.catalog.find("s1"))
    assert [t.action for t in saved.turns] == ["SELECT name FROM customers", GOLD_S1]


@pytest.mark.usefixtures("bwrap_ready")
async def test_stop_mid_command_interrupts_it(make_app, server, monkeypatch, home):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fake = server([fenced("echo started; sleep 30", "bash")])
    app = make_app(env="bash", tasks="bash", task="b001",
                   watch=AgentChoice(policy="llm", model="fake-model", base_url=fake.url, mode="auto"))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: watch(app).state == "running", 30, "the command to run")
        started = time.monotonic()
        await pilot.press("f12")
        await wait_for(pilot, lambda: watch(app).state == "stopped", 15, "the stop")
        assert time.monotonic() - started < 8, "sleep 30 was not interrupted"
        assert turns(app)[0].info.get("interrupted") is True
        await wait_for(pilot, lambda: "started" in "\n".join(watch(app).query_one("#output").plain_lines()), 5,
                       "the agent's command output in the pane")
    saved = Session("watch", home).load(app.catalog.find("b001"))
    assert saved.status == "stopped"


@pytest.mark.usefixtures("bwrap_ready")
async def test_gold_policy_on_bwrap_bash_needs_no_key(make_app, home):
    app = make_app(env="bash", tasks="bash", task="b001", watch=AgentChoice(policy="gold", mode="auto"))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: watch(app).state == "submitted" and isinstance(app.screen, ScoreScreen), 60,
                       "the gold episode and its score")
        screen = watch(app)
        assert screen.result.reward == 1.0 and turns(app)[0].author == "agent"
        assert screen.turn_list.get_option_at_index(0).prompt.plain.split()[1] == "agent"
        await wait_for(pilot, lambda: "250" in "\n".join(screen.query_one("#output").plain_lines()), 5,
                       "the gold command's output in the pane")


async def test_a_bad_key_is_shown_in_the_panel_and_the_human_can_take_over(watch_app, home):
    fake = FakeOpenAIServer(Script(["submit"]), api_key="the-right-key").start()
    try:
        app = watch_app(fake)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_request(pilot, "failed")
            panel = watch(app).panel
            assert panel.failure and "key" in panel.failure.lower()
            await pilot.press("f7")                                          # take over: no crash, no call
            await wait_request(pilot, "action")
            assert len(fake.requests) == 1
    finally:
        fake.stop()


async def test_no_key_at_all_is_said_in_the_panel_and_the_warmed_client_ends_quietly(make_app, shop_catalog,
                                                                                     monkeypatch, home):
    """No key and no base URL: the model's client, warmed while the sandbox starts, meets the
    missing key (an AgentError, caught: its worker ends in success, not error), and the first
    call says it in the panel."""
    from textual.worker import Worker, WorkerState

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    states: list[WorkerState] = []

    def seen(screen, event: Worker.StateChanged) -> None:
        if event.worker.name == "icplay-warm-model":
            states.append(event.state)

    monkeypatch.setattr(LiveScreen, "on_worker_state_changed", seen, raising=False)
    app = make_app(env="sql", catalog=shop_catalog(), task="s1", sandbox=None,
                   watch=AgentChoice(policy="llm", model="fake-model", mode="confirm"))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_request(pilot, "failed")
        assert "no API key" in watch(app).panel.failure
        await wait_for(pilot, lambda: WorkerState.SUCCESS in states, 10, "the warm worker's end")
        assert WorkerState.ERROR not in states


async def test_the_picker_key_lets_the_configured_agent_try_the_highlighted_task(make_app, shop_catalog, home):
    import json

    from icplay.frontend.config import Config

    app = make_app(env="sql", catalog=shop_catalog(), sandbox=None,
                   config=Config(history=False, agent={"policy": "gold", "mode": "auto"}))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("down")                                            # the second task, s2
        await pilot.press("ctrl+w")
        await wait_for(pilot, lambda: any(isinstance(s, LiveScreen) and s.agent is not None for s in app.screen_stack), 10, "the watch")
        await wait_for(pilot, lambda: watch(app).state == "submitted" and isinstance(app.screen, ScoreScreen), 30,
                       "the gold episode")
        assert watch(app).task_record.id == "s2" and watch(app).result.reward == 1.0
        await pilot.press("n")                                               # next: s1, watched too
        await wait_for(pilot, lambda: watch(app).task_record.id == "s1" and watch(app).state == "submitted", 30,
                       "the next watched task")
    assert json.loads((home / "watch-last.json").read_text())["policy"] == "gold"
    assert Session("watch", home).load(app.catalog.find("s2")).policy["kind"] == "gold"
    assert Session("default", home).load(app.catalog.find("s2")) is None     # the human's own session untouched


async def test_a_rate_limit_shows_its_countdown_and_a_reply_without_action_can_be_edited(watch_app, server):
    from fake_openai_server import rate_limited

    fake = server([rate_limited(retry_after=1.5), "I am not sure what to run here.", fenced("SELECT 1")])
    app = watch_app(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = watch(app)
        await wait_for(pilot, lambda: screen.panel.retry_at is not None, 20, "the retry countdown")
        assert "retrying in" in screen.panel.body().renderables[0].plain
        await wait_request(pilot, "invalid")                                # the retried call: no action in it
        assert "not sure" in screen.panel.thought and screen.panel.failure
        await pilot.press("ctrl+e")                                          # edit the raw reply into an action
        editor = screen.pane.editor
        assert "not sure" in editor.text
        editor.load_text("SELECT name FROM customers")
        editor.move_cursor(editor.document.end)
        await pilot.press("f5")
        await wait_for(pilot, lambda: len(turns(app)) == 1, 20, "the edited turn")
        assert turns(app)[0].action == "SELECT name FROM customers" and turns(app)[0].author == "agent-edited-by-human"
        await wait_request(pilot, "proposal")


async def test_watch_with_task_watches_that_task_only(watch_app, home):
    """``icplay watch --task s2`` (``only_task``): after its episode, Next opens no other task."""
    app = watch_app(mode="auto", task="s2")
    app.only_task = "s2"
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: watch(app).state == "submitted" and isinstance(app.screen, ScoreScreen), 30,
                       "the gold episode")
        await pilot.press("n")
        await wait_for(pilot, lambda: any(n.title == "No next task" for n in app._notifications), 10, "the notice")
        assert watch(app).task_record.id == "s2"
        assert [s.task_record.id for s in app.screen_stack if isinstance(s, LiveScreen)] == ["s2"]
