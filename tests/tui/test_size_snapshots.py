"""Every screen at the three sizes icplay is laid out for: 40x12 (the smallest it supports:
panels go or shrink to a few lines, the task panel says when its text is cut), 80x24 and
120x40; and the longest bundled task of each language on its play screen and whole in the
task dialog (Alt+T). Nothing crashes, what is left is usable. Snapshots as in
test_snapshots.py (deterministic: frozen display, fixed tasks).
Update after an intended change: pytest tests/tui/test_size_snapshots.py --snapshot-update
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from icplay.frontend.config import AgentChoice
from icplay.tui.screens.modals import (ConfirmScreen, HelpScreen, HistoryScreen, QueueDoneScreen, SaveScreen,
                                       ScoreScreen, TaskScreen, TurnScreen)
from icplay.tui.screens.view_episode import CompareScreen, EpisodeScreen
from icplay.tui.screens.view_fork import ForkScreen

sys.path.insert(0, str(Path(__file__).parent.parent / "agents"))

from fake_openai_server import FakeOpenAIServer, Script, fenced  # noqa: E402

from test_play_sql import run_sql  # noqa: E402
from tui_helpers import FakeClock, open_stepper, run_command, settled, viewer_apps, viewer_loaded, wait_for, wait_ready  # noqa: E402
from view_fixtures import record_bash, record_sql  # noqa: E402

SIZES = {"40x12": (40, 12), "80x24": (80, 24), "120x40": (120, 40)}
# the longest query of each bundled language's set (the task panel's hardest case)
LONGEST = {"bash": "b054", "sql": "transit-19", "python": "py-41", "ctf": "rsa-small-e"}


@pytest.fixture(params=list(SIZES), ids=list(SIZES))
def size(request) -> tuple[int, int]:
    return SIZES[request.param]


def sql_app(frozen_app, shop_catalog, **kwargs):
    return frozen_app(env="sql", catalog=shop_catalog(), task="s1", sandbox=None, **kwargs)


async def one_query(pilot) -> None:
    await wait_ready(pilot)
    await run_sql(pilot, "SELECT name, city FROM customers ORDER BY name")


async def open_dialog(pilot, key: str, screen: type, what: str) -> None:
    """Press ``key``, wait for its ``screen``, let it settle (the snapshot is of that dialog)."""
    await pilot.press(key)
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, screen), 10, what)
    await settled(pilot)


# -- the playground ------------------------------------------------------------------------------

@pytest.mark.usefixtures("bwrap_ready")
def test_picker(snap_compare, size, frozen_app):
    assert snap_compare(frozen_app(env="bash", tasks="bash"), terminal_size=size, run_before=settled)


def test_play_sql(snap_compare, size, frozen_app, shop_catalog):
    async def work(pilot):
        await one_query(pilot)
        await settled(pilot)

    assert snap_compare(sql_app(frozen_app, shop_catalog), terminal_size=size, run_before=work)


@pytest.mark.usefixtures("bwrap_ready")
def test_play_bash(snap_compare, size, frozen_app):
    async def work(pilot):
        await wait_ready(pilot)
        await run_command(pilot, "ls /testbed/logs")
        await settled(pilot)

    assert snap_compare(frozen_app(env="bash", tasks="bash", task="b001"), terminal_size=size, run_before=work)


@pytest.mark.usefixtures("bwrap_ready")
def test_play_python(snap_compare, size, frozen_app):
    async def work(pilot):
        await wait_ready(pilot)
        await run_command(pilot, "print(6 * 7)")
        await settled(pilot)

    assert snap_compare(frozen_app(env="python", tasks="python", task="py-01"), terminal_size=size,
                        run_before=work)


@pytest.mark.usefixtures("bwrap_ready")
def test_play_ctf(snap_compare, size, frozen_app):
    async def work(pilot):
        await wait_ready(pilot)
        await run_command(pilot, "ls")
        await settled(pilot)

    assert snap_compare(frozen_app(env="ctf", tasks="ctf", task="base64-note"), terminal_size=size,
                        run_before=work)


def test_help(snap_compare, size, frozen_app, shop_catalog):
    async def work(pilot):
        await wait_ready(pilot)
        await open_dialog(pilot, "f1", HelpScreen, "the help")

    assert snap_compare(sql_app(frozen_app, shop_catalog), terminal_size=size, run_before=work)


def test_submit_confirmation(snap_compare, size, frozen_app, shop_catalog):
    async def work(pilot):
        await one_query(pilot)
        await open_dialog(pilot, "ctrl+s", ConfirmScreen, "the confirmation")

    assert snap_compare(sql_app(frozen_app, shop_catalog), terminal_size=size, run_before=work)


def test_score(snap_compare, size, frozen_app, shop_catalog):
    async def work(pilot):
        await one_query(pilot)
        await pilot.press("ctrl+s", "enter")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ScoreScreen), 30, "the score")
        await settled(pilot)

    assert snap_compare(sql_app(frozen_app, shop_catalog), terminal_size=size, run_before=work)


def test_turn_details(snap_compare, size, frozen_app, shop_catalog):
    async def work(pilot):
        await one_query(pilot)
        pilot.app.screen.on_turn_list_show(type("Show", (), {"index": 0})())   # the sidebar is hidden here
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, TurnScreen), 10, "the turn")
        await settled(pilot)

    assert snap_compare(sql_app(frozen_app, shop_catalog), terminal_size=size, run_before=work)


def test_watch(snap_compare, size, frozen_app, shop_catalog, monkeypatch):
    """One approved agent turn, the next proposal waiting."""
    from icplay.tui.screens.live import LiveScreen

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fake = FakeOpenAIServer(Script([
        "Thought: first see who the customers are.\n" + fenced("SELECT name, city FROM customers"),
        "Thought: keep the London ones.\n" + fenced("SELECT name FROM customers WHERE city = 'London'")],
        then="submit")).start()

    def waiting(app, n):
        screen = next(s for s in app.screen_stack if isinstance(s, LiveScreen) and s.agent is not None)
        request = screen.request
        return request is not None and request.kind == "proposal" and request.open and len(fake.requests) == n \
            and len(screen.trajectory.turns) == n - 1

    async def work(pilot):
        await wait_for(pilot, lambda: waiting(pilot.app, 1), 30, "the first proposal")
        await pilot.press("ctrl+y")
        await wait_for(pilot, lambda: waiting(pilot.app, 2), 30, "the second proposal")
        await settled(pilot)

    try:
        app = sql_app(frozen_app, shop_catalog,
                      watch=AgentChoice(policy="llm", model="fake-model", base_url=fake.url, mode="confirm"))
        assert snap_compare(app, terminal_size=size, run_before=work)
    finally:
        fake.stop()


@pytest.mark.usefixtures("bwrap_ready")
@pytest.mark.parametrize("language", list(LONGEST))
def test_longest_task(snap_compare, size, frozen_app, language):
    """The longest task of each bundled language: whole on screen, or the panel says there is more."""
    async def work(pilot):
        await wait_ready(pilot)
        await settled(pilot)

    app = frozen_app(env=language, tasks=language, task=LONGEST[language],
                     **({"sandbox": None} if language == "sql" else {}))
    assert snap_compare(app, terminal_size=size, run_before=work)


@pytest.mark.usefixtures("bwrap_ready")
def test_whole_task(snap_compare, size, frozen_app):
    """Alt+T: the longest Bash task whole, in a dialog that scrolls."""
    async def work(pilot):
        await wait_ready(pilot)
        await open_dialog(pilot, "alt+t", TaskScreen, "the task dialog")

    assert snap_compare(frozen_app(env="bash", tasks="bash", task=LONGEST["bash"]), terminal_size=size,
                        run_before=work)


def test_sql_history_search(snap_compare, size, frozen_app, shop_catalog):
    async def work(pilot):
        await one_query(pilot)
        await open_dialog(pilot, "ctrl+r", HistoryScreen, "the history search")

    assert snap_compare(sql_app(frozen_app, shop_catalog), terminal_size=size, run_before=work)


def test_save_result(snap_compare, size, frozen_app, shop_catalog):
    async def work(pilot):
        await one_query(pilot)
        await open_dialog(pilot, "alt+s", SaveScreen, "the save dialog")

    assert snap_compare(sql_app(frozen_app, shop_catalog), terminal_size=size, run_before=work)


def test_annotator_notice(snap_compare, size, frozen_app, shop_catalog):
    """No annotator set: the notice fits and keeps its [human] (not markup)."""
    app = sql_app(frozen_app, shop_catalog, annotator_note=True)
    notify = app.notify
    app.notify = lambda *args, **kwargs: notify(*args, **{**kwargs, "timeout": 3600})   # up for the snapshot

    async def work(pilot):
        await wait_ready(pilot)
        await settled(pilot)

    assert snap_compare(app, terminal_size=size, run_before=work)


def test_queue_done(snap_compare, size, frozen_app, home):
    """A study's queue done: said in the app (a browser seat's page)."""
    from icplay.study.assign import assign
    from icplay.study.model import Study, StudyRules, load_study, save_study
    from icplay.study.queue import Queue

    one = ("sql/bookshop-01",)
    save_study(Study("solo", one, ("ana",), 1, 1, assign(one, ("ana",), 1, 1), StudyRules(), "2026-01-01"), home)
    queue = Queue(load_study("solo", home), "ana", home)

    async def work(pilot):
        await wait_ready(pilot)
        await run_sql(pilot, "SELECT title FROM books WHERE genre = 'Poetry' ORDER BY title")
        await pilot.press("ctrl+s", "enter")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ScoreScreen), 30, "the score")
        await open_dialog(pilot, "n", QueueDoneScreen, "the done screen")

    assert snap_compare(frozen_app(sandbox=None, annotator="ana", study=queue), terminal_size=size, run_before=work)


# -- the viewer ----------------------------------------------------------------------------------

@pytest.fixture
def frozen_view(home):
    yield from viewer_apps(home, record_sql, frozen=True, clock=FakeClock())


def test_view_browser(snap_compare, size, frozen_view):
    async def work(pilot):
        await viewer_loaded(pilot)
        await settled(pilot)

    assert snap_compare(frozen_view(), terminal_size=size, run_before=work)


def test_view_help(snap_compare, size, frozen_view):
    async def work(pilot):
        await viewer_loaded(pilot)
        await open_dialog(pilot, "f1", HelpScreen, "the help")

    assert snap_compare(frozen_view(), terminal_size=size, run_before=work)


def test_view_stepper(snap_compare, size, frozen_view):
    async def work(pilot):
        await open_stepper(pilot)

    assert snap_compare(frozen_view(), terminal_size=size, run_before=work)


def test_view_comparison(snap_compare, size, frozen_view):
    async def work(pilot):
        await viewer_loaded(pilot)
        await pilot.press("space", "down", "down", "c")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, CompareScreen), 10, "the comparison")
        await settled(pilot)

    assert snap_compare(frozen_view(), terminal_size=size, run_before=work)


@pytest.mark.usefixtures("bwrap_ready")
def test_view_fork(snap_compare, size, frozen_view):
    async def work(pilot):
        await viewer_loaded(pilot)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, EpisodeScreen), 10, "the stepper")
        await pilot.press("k")                                   # fork after turn 1, you go on
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ForkScreen) and pilot.app.screen.agent is None, 10, "the fork")
        await wait_ready(pilot)
        # the "Forked at turn 1" toast lasts 6 s: whether it is still up when the fork is ready
        # depends on the machine's load, so it is dismissed (the snapshot is of the fork screen)
        pilot.app.clear_notifications()
        await settled(pilot)

    assert snap_compare(frozen_view(record=record_bash), terminal_size=size, run_before=work)
