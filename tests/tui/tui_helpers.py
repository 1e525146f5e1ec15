"""Helpers and fixtures for the playground's tests: real environments (bwrap for Bash,
SQLite for SQL). Test modules import helpers from here (``from tui_helpers import ...``);
conftest.py registers the fixtures.

Each test gets its own ICPLAY_HOME (sessions, history, config) under tmp_path, and every
app's environments are closed at the end, so no sandbox outlives a test.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from icplay.tui.app import PlayApp
from icplay.frontend.config import Config


from ci_rules import IN_CI, unavailable  # noqa: F401


@pytest.fixture
def sql_ready() -> None:
    """The SQL environment on SQLite and the bundled SQL set (no Docker needed)."""
    try:
        import icplay.envs.sql  # noqa: F401
    except ImportError as exc:
        unavailable(f"the SQL environment cannot be imported: {exc}")


class FakeClock:
    """A clock the test moves by hand (the work timer reads it)."""

    def __init__(self, start: float = 1000.0):
        self.now = start

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "icplay-home"
    path.mkdir()
    monkeypatch.setenv("ICPLAY_HOME", str(path))
    return path


@pytest.fixture
def make_app(home):
    yield from app_factory(PlayApp, home, sandbox="bwrap")


@pytest.fixture
def frozen_app(make_app):
    """make_app for snapshots: a frozen display and a clock that never moves."""
    def make(**kwargs):
        kwargs.setdefault("clock", FakeClock())
        return make_app(frozen=True, **kwargs)
    return make


def app_factory(app_class, home, record=None, **defaults):
    """The body of an app fixture: yields ``make(**kwargs)``, an ``app_class`` on ``home``
    (history off, ``defaults`` then ``kwargs`` applied; ``record(home)`` run first when given,
    as view_fixtures' recorders), and closes every app it made at teardown."""
    apps = []

    def make(**kwargs):
        recorder = kwargs.pop("record", record)
        if recorder is not None:
            recorder(home)
        app = app_class(**{"home": home, "config": Config(history=False), **defaults, **kwargs})
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.close_envs()


async def wait_for(pilot, predicate, timeout: float = 20.0, what: str = "condition") -> None:
    """Let the app run until ``predicate()`` holds (workers post their messages meanwhile)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            import faulthandler
            import sys

            faulthandler.dump_traceback(sys.__stderr__, all_threads=True)   # stuck or slow: every thread's stack
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await pilot.pause(0.05)
    await pilot.pause()   # what the change set going (a pushed screen's compose) runs before the test looks


def play_state(app) -> str | None:
    from icplay.tui.screens.live import LiveScreen

    for screen in reversed(app.screen_stack):
        if isinstance(screen, LiveScreen):
            return screen.state
    return None


def play_screen(app):
    from icplay.tui.screens.live import LiveScreen

    for screen in reversed(app.screen_stack):
        if isinstance(screen, LiveScreen):
            return screen
    raise AssertionError(f"no play screen in {app.screen_stack}")


async def wait_ready(pilot, timeout: float = 30.0) -> None:
    await wait_for(pilot, lambda: play_state(pilot.app) in ("ready", "submitted", "failed"), timeout,
                   "the play screen to be ready")
    assert play_state(pilot.app) != "failed", play_screen(pilot.app).query_one("#pane").query_one("#run-status" if play_screen(pilot.app).task_record.env == "bash" else "#result-info").render()


async def type_text(pilot, text: str) -> None:
    """Type like a human: one key per character (the input sees every key press)."""
    await pilot.press(*[KEY_NAMES.get(ch, ch) for ch in text])


KEY_NAMES = {" ": "space", "\n": "ctrl+j", "|": "|", ">": ">", "<": "<", "$": "$"}


def turn_count(app) -> int:
    screen = play_screen(app)
    return len(screen.trajectory.turns) if screen.trajectory is not None else 0


async def run_command(pilot, command: str, timeout: float = 30.0) -> None:
    """Type a command (or statement), press Enter, wait until its turn is recorded."""
    before = turn_count(pilot.app)
    await type_text(pilot, command)
    await pilot.press("enter")
    await wait_for(pilot, lambda: turn_count(pilot.app) > before and play_state(pilot.app) == "ready", timeout,
                   f"the turn of {command!r}")


def text_of(widget) -> str:
    """The plain text a Static (or Label) shows, whatever renderable it holds."""
    import io

    from rich.console import Console
    from textual.content import Content

    content = widget.content if hasattr(widget, "content") else widget.render()
    if isinstance(content, Content):
        return content.plain
    console = Console(width=200, record=True, file=io.StringIO(), color_system=None)
    console.print(content)
    return console.export_text()


SHOP_SQL = """\
CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(40), city VARCHAR(40));
INSERT INTO customers VALUES (1, 'Ada', 'London'), (2, 'Bob', 'Paris'), (3, 'Cy', 'London'), (4, 'Dee', 'Rome');
CREATE TABLE orders (id INT PRIMARY KEY, customer_id INT, total DECIMAL(8,2));
INSERT INTO orders VALUES (10, 1, 25.50), (11, 1, 10.00), (12, 2, 99.90), (13, 4, 5.25);
"""

SHOP_TASKS = [
    {"id": "s1", "db": "shop", "hardness": "easy",
     "query": "List the names of the customers who live in London, in alphabetical order.",
     "gold": "SELECT name FROM customers WHERE city = 'London' ORDER BY name"},
    {"id": "s2", "db": "shop", "hardness": "medium",
     "query": "How many orders did each customer place? Give name and count, most orders first.",
     "gold": "SELECT c.name, COUNT(o.id) AS n FROM customers c JOIN orders o ON o.customer_id = c.id "
             "GROUP BY c.name ORDER BY n DESC, c.name"},
]


@pytest.fixture
def shop_catalog(tmp_path, sql_ready):
    """A small SQL task set with its own database folder (real SQLite, converted by icplay)."""
    import json

    from icplay.tasks.registry import TaskSet
    from icplay.tui.app import Catalog

    folder = tmp_path / "shop-set"
    (folder / "databases").mkdir(parents=True)
    (folder / "databases" / "shop.sql").write_text(SHOP_SQL)
    (folder / "tasks.json").write_text(json.dumps(SHOP_TASKS))
    task_set = TaskSet("shop", "sql", folder / "tasks.json", "a tiny shop database", databases=folder / "databases")
    return lambda: Catalog.from_sets([task_set])


def post_keys(app, text: str, then: str | None = None) -> None:
    """Queue key presses all at once, as a fast typist or a terminal paste delivers them
    (``pilot.press`` waits after each key; this does not)."""
    from textual import events
    from textual.keys import _character_to_key

    for ch in text:
        app.post_message(events.Key(_character_to_key(ch), ch))
    if then is not None:
        app.post_message(events.Key(then, None))


def footer_keys(screen) -> tuple[set[str], set[str]]:
    """(the keys the footer should show: one per shown action of the active bindings, plus the
    palette's; the keys it shows laid out on screen)."""
    footers = screen.query(Footer)
    if not footers:                    # a modal without a footer of its own
        return set(), set()
    footer = footers.first()
    wanted: dict[str, str] = {}
    for _node, binding, _enabled, _tooltip in screen.active_bindings.values():
        if binding.show:
            wanted.setdefault(binding.action, binding.key)
    keys = set(wanted.values())
    app = screen.app
    if footer.show_command_palette and app.ENABLE_COMMAND_PALETTE and app.COMMAND_PALETTE_BINDING in screen.active_bindings:
        keys.add(screen.active_bindings[app.COMMAND_PALETTE_BINDING][1].key)
    shown = {key.key for key in footer.query(FooterKey) if key.region.width}
    return keys, shown


def unsettled(app) -> str | None:
    """Why the screen is not yet what a user would see, or None. The footer builds its keys
    on a later refresh after every bindings change (a recompose: remove, then mount, under a
    batch that holds back layout); a screenshot in between lacks them or shows them unplaced."""
    screen = app.screen
    if app._batch_count:
        return "an update batch is open"
    pending = [name for name in ("_layout_required", "_scroll_required", "_repaint_required", "_recompose_required",
                                 "_dirty_widgets", "_callbacks") if getattr(screen, name)]
    if pending:
        return "the screen has pending " + ", ".join(pending)
    wanted, shown = footer_keys(screen)
    # Keys not (all) placed: the footer is being rebuilt. (A blank footer used to last: Textual
    # left the keys of a footer rebuilt inside an update batch unplaced until another message
    # woke the screen; icplay/tui/widgets/footer.py lays them out at once.)
    if wanted != shown:
        return f"the footer shows {sorted(shown)}, the bindings are {sorted(wanted)}"
    return None


async def settled(pilot, timeout: float = 20.0) -> None:
    """Wait until the screen is settled (``unsettled`` says nothing) and two screenshots taken
    an idle apart are the same: what the snapshot then records is what stays on screen."""
    app = pilot.app
    deadline = time.monotonic() + timeout
    before = None
    while True:
        await pilot.pause()
        why = unsettled(app)
        if why is None:
            now = app.export_screenshot()
            if now == before:
                return
            before, why = now, "the screen changed since the last look"
        else:
            before = None
        if time.monotonic() > deadline:
            raise AssertionError(f"the screen did not settle in {timeout:.0f} s: {why}")


# -- the viewer ----------------------------------------------------------------------------------

def viewer_apps(home, record=None, **defaults):
    """``app_factory`` of the episode browser (ViewApp)."""
    from icplay.tui.screens.view import ViewApp

    yield from app_factory(ViewApp, home, record, **defaults)


async def viewer_loaded(pilot):
    """Wait until the episode browser has read every episode; returns its screen."""
    from icplay.tui.screens.view import ViewScreen

    await wait_for(pilot, lambda: isinstance(pilot.app.screen, ViewScreen) and not pilot.app.screen.reading, 20,
                   "the episodes")
    return pilot.app.screen


async def open_stepper(pilot) -> None:
    """From the viewer's list, open the top episode's stepper and step to its second turn."""
    from icplay.tui.screens.view_episode import EpisodeScreen

    await viewer_loaded(pilot)
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, EpisodeScreen), 10, "the stepper")
    await pilot.press("right", "right")
    await settled(pilot)
