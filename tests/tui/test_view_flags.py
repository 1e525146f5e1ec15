"""The viewer and the scanners (icplay.scan): `g` filters the episodes by flag, and an
episode's flags are shown on their turns (the episode's own in the final box), driven with
Pilot over episodes recorded on the real SQLite env."""

from __future__ import annotations

import pytest
from scan_helpers import sql_runs
from tui_helpers import text_of, viewer_apps, viewer_loaded, wait_for

from icplay.tui.screens.view import ViewScreen
from icplay.tui.screens.view_episode import EpisodeScreen


@pytest.fixture
def view_app(home):
    yield from viewer_apps(home)


def tasks(screen: ViewScreen) -> list[str]:
    return sorted(f"{s.source}/{s.task}" for s in screen.shown)


async def test_filter_by_flag_and_flags_on_their_turns(view_app, tmp_path):
    runs = sql_runs(tmp_path / "runs")
    app = view_app(paths=[runs / name for name in ("agent", "agent2", "ann", "ann2")])
    async with app.run_test(size=(130, 40)) as pilot:
        screen = await viewer_loaded(pilot)
        assert len(screen.shown) == 6
        await pilot.press("g")                                       # flagged at all
        assert tasks(screen) == ["agent/bookshop-empty", "agent2/bookshop-01", "agent2/bookshop-02",
                                 "agent2/bookshop-03", "ann/bookshop-empty"]
        assert "flag flagged" in text_of(screen.query_one("#filters"))
        await pilot.press("g")                                       # the kinds raised, by name
        assert screen.filter.flag == "error-run" and tasks(screen) == ["agent2/bookshop-02"]
        await pilot.press("g")
        assert screen.filter.flag == "loop" and tasks(screen) == ["agent2/bookshop-01"]

        await pilot.press("enter")                                   # the loop's episode
        await wait_for(pilot, lambda: isinstance(app.screen, EpisodeScreen), 10, "the stepper")
        stepper = app.screen
        assert "⚑ loop" in text_of(stepper.query_one("#turn-head"))
        assert "ran 3 times in a row (turns 1-3)" in text_of(stepper.query_one("#notes"))
        await pilot.press("right")                                   # turn 2: no flag of its own
        assert "⚑" not in text_of(stepper.query_one("#turn-head"))
        await pilot.press("escape", "g", "g")                        # reward-hack-suspect, then submit-without-looking
        assert screen.filter.flag == "submit-without-looking"
        blind = next(i for i, s in enumerate(screen.shown) if s.task == "bookshop-03")
        await pilot.press(*["down"] * blind, "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, EpisodeScreen), 10, "the stepper")
        final = text_of(app.screen.query_one("#final"))
        assert "⚑ submit-without-looking submitted without running an action" in final
