"""Pilot tests of ``icplay watch --study NAME --annotator A`` in the app, on the bundled SQL set
(SQLite), the agent a real ``openai`` client against the local fake server: A's queue opens on
the watch screen, the model's name is nowhere on the screen (the trajectory keeps it), the
per-turn reward of InterCode's protocol is shown only when the study says so, a submit, the
study's rules on the score, Ctrl+N to her next task."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tui_helpers import FakeClock, play_screen, wait_for

from icplay.cli import build_parser
from icplay.commands.watch_study import study_agent_choice
from icplay.driver import FAILED, PROPOSAL, SUBMIT_PROPOSAL
from icplay.frontend.config import Config
from icplay.store import load_trajectory
from icplay.study.assign import assign
from icplay.study.model import Study, StudyRules, load_study, save_study
from icplay.study.queue import Queue
from icplay.tui.screens.live import LiveScreen
from icplay.tui.screens.modals import HelpScreen, ScoreScreen
from icplay.tui.widgets.panels import StatusBar

sys.path.insert(0, str(Path(__file__).parent.parent / "agents"))
from fake_openai_server import FakeOpenAIServer, Reply, Script, fenced  # noqa: E402

SIX = tuple(f"sql/bookshop-0{i}" for i in range(1, 7))
WHO = ("ana", "ben", "cho")
MODEL = "secret-model-x7"
WRONG = "SELECT 'no such answer'"


@pytest.fixture
def server():
    fake = FakeOpenAIServer(Script([fenced(WRONG), "submit"], then="submit"), streaming=True).start()
    yield fake
    fake.stop()


def watch_study(home: Path, server: FakeOpenAIServer, **rules) -> tuple[Queue, object]:
    """A study whose agent is the fake server's model (InterCode's protocol: every turn scored),
    and ana's queue and agent as ``icplay watch --study pilot --annotator ana`` makes them."""
    agent = {"policy": "llm", "model": MODEL, "base_url": server.url, "protocol": "intercode"}
    save_study(Study("pilot", SIX, WHO, 2, 1, assign(SIX, WHO, 2, 1), StudyRules(**rules), "2026-01-01",
                     agent=agent), home)
    study = load_study("pilot", home)
    args = build_parser().parse_args(["watch", "--study", "pilot", "--annotator", "ana", "--model", ""])
    return Queue(study, "ana", home), study_agent_choice(args, study)


def screen_text(app) -> str:
    """Every character the terminal shows now (the top screen over what it covers, toasts too)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def watching(app) -> LiveScreen:
    screen = play_screen(app)
    assert screen.agent is not None
    return screen


async def wait_request(pilot, kind) -> None:
    def waiting() -> bool:
        request = watching(pilot.app).request
        return request is not None and request.kind == kind and request.open

    await wait_for(pilot, waiting, 30, f"a {kind} request")


def assert_blind(app) -> None:
    text = screen_text(app)
    assert MODEL not in text and "secret" not in text, text
    assert not any(MODEL in str(n.message) or MODEL in str(n.title) for n in app._notifications)


@pytest.mark.parametrize("turn_scores", [False, True], ids=["turn-scores-hidden", "turn-scores-shown"])
async def test_the_queue_opens_on_the_watch_screen_with_the_model_hidden(make_app, home, server, turn_scores):
    queue, agent = watch_study(home, server, per_turn_scoring=turn_scores)
    mine = queue.study.assigned_to("ana")
    app = make_app(sandbox=None, annotator="ana", study=queue, watch=agent, config=Config(history=False))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_request(pilot, PROPOSAL)                    # the agent's first proposal waits for her
        screen = watching(app)
        assert screen.task_record.key == mine[0]
        assert screen.panel.border_title == "Agent"
        assert "study pilot · 0/4 done" in str(screen.query_one(StatusBar).render())
        assert " tok" in screen_text(app) and "$" not in screen_text(app)    # a price would name the model
        assert_blind(app)
        await pilot.press("ctrl+y")                                # approve: run, scored (InterCode's protocol)
        await wait_request(pilot, SUBMIT_PROPOSAL)
        assert screen.trajectory.turns[0].reward == 0.0
        assert ("r=0.00" in screen_text(app)) is turn_scores       # the turn list's per-turn reward
        assert_blind(app)
        await pilot.press("f1")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), 10, "the help")
        assert_blind(app)
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen), 10, "the watch screen again")
        await pilot.press("ctrl+y")                                # the agent's submit
        await wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen), 30, "the score")
        score = app.screen
        assert score.result.reward == 0.0
        assert not score.query("#reveal") and not score.query("#retry") and not score.query("#picker")
        assert_blind(app)
        await pilot.press("g")                                     # the study's rules: no gold, no retry
        await pilot.press("r")
        await pilot.pause()
        notes = [n.message for n in app._notifications]
        assert any("this study does not show the gold (rules.gold_reveal = false in" in n for n in notes)
        assert any("allows no retries" in n for n in notes)
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen), 10, "the task again")
        assert "study pilot · 1/4 done" in str(screen.query_one(StatusBar).render())
        await pilot.press("f8")                                    # retry: refused, the screen stays
        await pilot.pause()
        assert play_screen(app) is screen
        await pilot.press("ctrl+n")                                # her next task, on the watch screen
        await wait_for(pilot, lambda: play_screen(app).task_record.key == mine[1], 30, "her second task")
        await wait_request(pilot, SUBMIT_PROPOSAL)
        assert watching(app).panel.border_title == "Agent"
        assert_blind(app)
    app.close_envs()
    saved = load_trajectory(home / "studies/pilot/sessions/ana" / f"{mine[0]}.json")
    assert (saved.study, saved.annotator, saved.status, saved.reward) == ("pilot", "ana", "submitted", 0.0)
    assert saved.policy["model"] == MODEL and saved.policy["protocol"] == "intercode"
    assert [t.reward for t in saved.turns] == [0.0]
    assert Queue(load_study("pilot", home), "ana", home).entry(mine[0]).state == "done"


async def test_show_model_names_it(make_app, home, server):
    queue, agent = watch_study(home, server, hide_model=False)
    app = make_app(sandbox=None, annotator="ana", study=queue, watch=agent, config=Config(history=False))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_request(pilot, PROPOSAL)
        assert watching(app).panel.border_title == f"Agent · {MODEL}"
        assert MODEL in screen_text(app) and " tok  $" in screen_text(app)
    app.close_envs()


async def test_the_time_limit_ends_a_supervised_task(make_app, home, server):
    queue, agent = watch_study(home, server, time_limit_s=60)
    ref = queue.study.assigned_to("ana")[0]
    clock = FakeClock()
    app = make_app(sandbox=None, annotator="ana", study=queue, watch=agent, clock=clock, config=Config(history=False))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_request(pilot, PROPOSAL)
        screen = watching(app)
        assert "of 01:00" in str(screen.query_one(StatusBar).render())
        await pilot.press("ctrl+y")
        await wait_request(pilot, SUBMIT_PROPOSAL)
        clock.now += 61
        await wait_for(pilot, lambda: screen.state == "stopped", 20, "the time limit")
        assert any("Time is up: the study's time limit of 1 min per task was reached" in n.message
                   for n in app._notifications)
        await pilot.press("f8")                                    # no retry: retries are off
        await pilot.pause()
        assert play_screen(app) is screen
        await pilot.press("ctrl+n")                                # her next task
        await wait_for(pilot, lambda: play_screen(app).task_record.key == queue.study.assigned_to("ana")[1], 30,
                       "her second task")
    app.close_envs()
    saved = load_trajectory(home / "studies/pilot/sessions/ana" / f"{ref}.json")
    assert saved.status == "stopped" and saved.time_worked >= 60 and len(saved.turns) == 1
    assert Queue(load_study("pilot", home), "ana", home).entry(ref).state == "done"


async def test_a_server_error_naming_the_model_is_shown_without_its_name(make_app, home):
    missing = Reply(None, 404, error={"message": f"The model `{MODEL}` does not exist", "type": "invalid_request_error",
                                      "code": "model_not_found"})
    fake = FakeOpenAIServer(Script([missing], then=missing), streaming=True).start()
    try:
        queue, agent = watch_study(home, fake)
        app = make_app(sandbox=None, annotator="ana", study=queue, watch=agent, config=Config(history=False))
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_request(pilot, FAILED)
            await pilot.pause()
            text = screen_text(app)
            assert "model 'the model' is not served at the model (404" in text      # the server's words, blinded
            assert_blind(app)
        app.close_envs()
    finally:
        fake.stop()
