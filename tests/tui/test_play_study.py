"""Pilot tests of ``icplay play --study NAME --annotator A`` in the app, on the bundled SQL set
(SQLite): A's queue opens at her first task, the study's rules are kept (no gold, no retry,
the schema hidden under strict), Ctrl+N goes on in her order, the time limit ends a task."""

from __future__ import annotations

from tui_helpers import FakeClock, play_screen, play_state, text_of, wait_for, wait_ready
from test_play_sql import run_sql

from icplay.frontend.config import Config
from icplay.store import load_trajectory
from icplay.study.assign import assign
from icplay.study.model import Study, StudyRules, load_study, save_study
from icplay.study.queue import Queue
from icplay.tui.screens.live import LiveScreen
from icplay.tui.screens.modals import ConfirmScreen, ScoreScreen
from icplay.tui.widgets.panels import StatusBar

SIX = tuple(f"sql/bookshop-0{i}" for i in range(1, 7))
WHO = ("ana", "ben", "cho")


def make_study(home, **rules) -> Queue:
    save_study(Study("pilot", SIX, WHO, 2, 1, assign(SIX, WHO, 2, 1), StudyRules(**rules), "2026-01-01"), home)
    return Queue(load_study("pilot", home), "ana", home)


def gold_of(ref: str) -> str:
    from icplay.study.queue import resolve

    return resolve(ref).gold.rstrip().rstrip(";") + ";"


async def test_the_queue_opens_in_her_order_and_refuses_the_gold_and_the_retry(make_app, home):
    queue = make_study(home, strict=True)
    mine = queue.study.assigned_to("ana")
    app = make_app(sandbox=None, annotator="ana", study=queue, config=Config(history=False, strict=True))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        screen = play_screen(app)
        assert screen.task_record.key == mine[0]
        assert not screen.query_one("#schema").display                 # strict: the schema is hidden
        status = str(screen.query_one(StatusBar).render())
        assert "study pilot · 0/4 done" in status
        await run_sql(pilot, gold_of(mine[0]))
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, ConfirmScreen)
        question = text_of(app.screen.query_one("#question"))
        assert "the score is shown next." in question and "gold" not in question     # no gold promised
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen), 30, "the score")
        score = app.screen
        assert score.result.reward == 1.0
        shown = text_of(score.query_one("#breakdown"))       # how it was computed: not in this study
        assert "shows the reward only, not how it was computed" in shown and "gold" not in shown.split("(")[0]
        assert not score.query("#strict-reasons") and "rows" not in shown
        assert "study pilot · 1/4 done" in str(screen.query_one(StatusBar).render())
        assert not score.query("#reveal") and not score.query("#retry")  # no gold button, no retry button
        assert not score.query("#picker")                                   # the queue chooses, not a list
        await pilot.press("g")
        await pilot.press("r")
        await pilot.pause()
        assert app.screen is score and not score.query("#gold-action")
        notes = [n.message for n in app._notifications]
        assert any("this study does not show the gold (rules.gold_reveal = false in" in n for n in notes)
        assert any("allows no retries" in n for n in notes)
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen), 10, "the task again")
        assert not app.screen.check_action("reveal_gold", ())              # Ctrl+G is off too
        await pilot.press("ctrl+g")
        await pilot.pause()
        assert isinstance(app.screen, LiveScreen)
        await pilot.press("ctrl+n")                                         # her next task
        await wait_for(pilot, lambda: play_screen(app).task_record.key == mine[1] and play_state(app) == "ready",
                       30, "the second task of her queue")
        assert "study pilot · 1/4 done" in str(play_screen(app).query_one(StatusBar).render())
    app.close_envs()
    saved = load_trajectory(home / "studies/pilot/sessions/ana" / f"{mine[0]}.json")
    assert (saved.study, saved.annotator, saved.reward, saved.gold_seen_at) == ("pilot", "ana", 1.0, None)


async def run_out_of_time(pilot, clock: FakeClock) -> None:
    """One statement, then the worked time goes past the limit (60 s): the episode is stopped."""
    await wait_ready(pilot)
    await run_sql(pilot, "SELECT 1;")
    clock.now += 61
    await wait_for(pilot, lambda: play_state(pilot.app) == "stopped", 20, "the time limit")


async def test_the_time_limit_ends_the_task_in_the_app(make_app, home):
    queue = make_study(home, time_limit_s=60)
    ref = queue.study.assigned_to("ana")[0]
    clock = FakeClock()
    app = make_app(sandbox=None, annotator="ana", study=queue, clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await run_out_of_time(pilot, clock)
        screen = play_screen(app)
        assert any("Time is up: the study's time limit of 1 min per task was reached" in n.message
                   for n in app._notifications)
        await pilot.press("f8")                                             # no retry: retries are off
        await pilot.pause()
        assert play_screen(app) is screen
        assert any("allows no retries" in n.message for n in app._notifications)
    app.close_envs()
    saved = load_trajectory(home / "studies/pilot/sessions/ana" / f"{ref}.json")
    assert saved.status == "stopped" and saved.time_worked >= 60
    assert [t.action.rstrip(";") for t in saved.turns] == ["SELECT 1"]
    assert Queue(load_study("pilot", home), "ana", home).entry(ref).state == "done"


async def test_a_timed_out_task_asked_for_by_name_is_not_resumed(make_app, home):
    queue = make_study(home, time_limit_s=60)
    mine = queue.study.assigned_to("ana")
    clock = FakeClock()
    app = make_app(sandbox=None, annotator="ana", study=queue, clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await run_out_of_time(pilot, clock)
    app.close_envs()
    again = make_app(sandbox=None, annotator="ana", study=Queue(load_study("pilot", home), "ana", home), task=mine[0])
    async with again.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        assert play_screen(again).task_record.key == mine[1]                # refused, her next task instead
        assert any("allows no retries" in n.message for n in again._notifications)
    again.close_envs()


async def test_a_finished_queue_says_so_in_the_app_and_at_exit(make_app, home):
    """Her last task submitted, Next shows that her queue is done, in the app (a browser seat's
    page is the app: a message printed at exit only reached the server's console)."""
    from icplay.tui.screens.modals import QueueDoneScreen

    one = ("sql/bookshop-01",)
    save_study(Study("solo", one, ("ana",), 1, 1, assign(one, ("ana",), 1, 1), StudyRules(), "2026-01-01"), home)
    queue = Queue(load_study("solo", home), "ana", home)
    app = make_app(sandbox=None, annotator="ana", study=queue)
    async with app.run_test(size=(40, 12)) as pilot:
        await wait_ready(pilot)
        await run_sql(pilot, gold_of(one[0]))
        await pilot.press("ctrl+s", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen), 30, "the score")
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, QueueDoneScreen), 10, "the done screen")
        shown = "\n".join(text_of(s) for s in app.screen.query("Static"))
        assert "ana's queue is done: 1 of 1 tasks" in shown and "close this page" in shown
        said = []
        app.exit = lambda *a, message=None, **kw: said.append(message)      # what quitting prints
        await pilot.press("enter")
        assert [str(m) for m in said] == [app.done_message]          # as text, never markup
        assert app.done_message.startswith("ana's queue is done: 1 of 1 tasks")
