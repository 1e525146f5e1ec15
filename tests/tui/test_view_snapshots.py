"""Snapshots of the viewer (pytest-textual-snapshot): the browser, the turn stepper, the
comparison. Deterministic: episodes recorded on SQLite with fixed ids and times (dates are
shown in UTC), a frozen display (no durations).
Update after an intended change: pytest tests/tui/test_view_snapshots.py --snapshot-update
"""

from __future__ import annotations

import pytest

from icplay.tui.screens.view_episode import CompareScreen

from tui_helpers import open_stepper, settled, viewer_apps, viewer_loaded, wait_for
from view_fixtures import record_sql


@pytest.fixture
def frozen_view(home):
    yield from viewer_apps(home, record_sql, frozen=True)


@pytest.mark.parametrize("size", [(120, 36), (80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_browser(snap_compare, frozen_view, size):
    async def work(pilot):
        await viewer_loaded(pilot)
        await pilot.press("down")
        await settled(pilot)

    assert snap_compare(frozen_view(), terminal_size=size, run_before=work)


def test_browser_filtered(snap_compare, frozen_view):
    async def work(pilot):
        await viewer_loaded(pilot)
        await pilot.press("s", "slash", *"poetry", "enter")
        await settled(pilot)

    assert snap_compare(frozen_view(), terminal_size=(120, 30), run_before=work)


def test_turn_stepper(snap_compare, frozen_view):
    async def work(pilot):
        await open_stepper(pilot)

    assert snap_compare(frozen_view(), terminal_size=(120, 40), run_before=work)


def test_comparison(snap_compare, frozen_view):
    async def work(pilot):
        await viewer_loaded(pilot)
        await pilot.press("space", "down", "down", "c")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, CompareScreen), 10, "the comparison")
        await settled(pilot)

    assert snap_compare(frozen_view(), terminal_size=(120, 40), run_before=work)
