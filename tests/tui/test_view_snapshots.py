"""Snapshots of the viewer (pytest-textual-snapshot): the browser, the turn stepper, the
comparison. Deterministic: episodes recorded on SQLite with fixed ids and times (dates are
shown in UTC), a frozen display (no durations).
Update after an intended change: pytest tests/tui/test_view_snapshots.py --snapshot-update
"""

from __future__ import annotations

import time

import pytest
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from icplay.tui.config import Config
from icplay.tui.screens.view import ViewApp, ViewScreen
from icplay.tui.screens.view_episode import CompareScreen, EpisodeScreen

from tui_helpers import wait_for
from view_fixtures import record_sql


@pytest.fixture
def frozen_view(home):
    apps = []

    def make() -> ViewApp:
        record_sql(home)
        app = ViewApp(home=home, config=Config(history=False), frozen=True)
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.close_envs()


async def loaded(pilot) -> None:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, ViewScreen) and not pilot.app.screen.loading, 20,
                   "the episodes")


def footer_keys(screen) -> tuple[set[str], set[str]]:
    """(the keys the footer should show: one per shown action of the active bindings, plus the
    palette's; the keys it shows laid out on screen)."""
    footer = screen.query_one(Footer)
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


@pytest.mark.parametrize("size", [(120, 36), (80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_browser(snap_compare, frozen_view, size):
    async def work(pilot):
        await loaded(pilot)
        await pilot.press("down")
        await settled(pilot)

    assert snap_compare(frozen_view(), terminal_size=size, run_before=work)


def test_browser_filtered(snap_compare, frozen_view):
    async def work(pilot):
        await loaded(pilot)
        await pilot.press("s", "slash", *"poetry", "enter")
        await settled(pilot)

    assert snap_compare(frozen_view(), terminal_size=(120, 30), run_before=work)


def test_turn_stepper(snap_compare, frozen_view):
    async def work(pilot):
        await loaded(pilot)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, EpisodeScreen), 10, "the stepper")
        await pilot.press("right", "right")
        await settled(pilot)

    assert snap_compare(frozen_view(), terminal_size=(120, 40), run_before=work)


def test_comparison(snap_compare, frozen_view):
    async def work(pilot):
        await loaded(pilot)
        await pilot.press("space", "down", "down", "c")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, CompareScreen), 10, "the comparison")
        await settled(pilot)

    assert snap_compare(frozen_view(), terminal_size=(120, 40), run_before=work)
