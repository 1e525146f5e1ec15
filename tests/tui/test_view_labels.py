"""The viewer's ``l`` key labels the turn on screen (good, bad or neutral, with a note): saved
in the episode's file with who and when, shown under the turn; a word that is not a label is
refused with a sentence and nothing is written."""

from __future__ import annotations

from icplay.store import load_trajectory
from icplay.tui.screens.view_episode import EpisodeScreen
from tui_helpers import text_of, viewer_apps, viewer_loaded, wait_for
from view_fixtures import record_sql

import pytest


@pytest.fixture
def view_app(home):
    yield from viewer_apps(home, sandbox="bwrap")


async def test_l_labels_the_turn_on_screen(view_app, home):
    paths = record_sql(home)
    app = view_app(annotator="rita")
    async with app.run_test(size=(120, 40)) as pilot:
        await viewer_loaded(pilot)
        await pilot.press("enter")                                                  # the agent's episode
        await wait_for(pilot, lambda: isinstance(app.screen, EpisodeScreen), 10, "the stepper")
        screen = app.screen
        await pilot.press("l", *"nice", "enter")                                    # not a label: refused
        await pilot.pause()
        assert load_trajectory(paths["agent"]).turns[0].label is None
        await pilot.press("l", *"bad reads every title", "enter")
        await wait_for(pilot, lambda: load_trajectory(paths["agent"]).turns[0].label is not None, 10, "the label")
        mark = load_trajectory(paths["agent"]).turns[0].label
        assert (mark["label"], mark["note"], mark["author"]) == ("bad", "reads every title", "rita") and mark["at"] > 0
        await wait_for(pilot, lambda: "Label bad (rita): reads every title" in text_of(screen.query_one("#notes")),
                       10, "the label under the turn")
        await pilot.press("escape", "escape")
