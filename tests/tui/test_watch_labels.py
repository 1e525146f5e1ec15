"""Alt+L on the watch screen labels the last turn (good, bad or neutral, a note), while the
agent waits for the reviewer: saved in the episode with the annotator and the time."""

from __future__ import annotations

import pytest

from icplay.frontend.config import AgentChoice
from icplay.session import Session
from icplay.tui.screens.live import LiveScreen
from icplay.tui.screens.modals import CommentScreen
from tui_helpers import type_text, wait_for


@pytest.fixture
def gold_watch(make_app, shop_catalog):
    def make(**kw):
        return make_app(env="sql", catalog=shop_catalog(), task="s1", sandbox=None,
                        watch=AgentChoice(policy="gold", mode="confirm"), **kw)
    return make


def watch(app) -> LiveScreen:
    return next(s for s in reversed(app.screen_stack) if isinstance(s, LiveScreen) and s.agent is not None)


def waiting(app, kind):
    request = watch(app).request
    return request is not None and request.kind == kind and request.open


async def test_alt_l_labels_the_last_turn_while_the_agent_waits(gold_watch, home):
    app = gold_watch(annotator="rev")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: waiting(app, "proposal"), 20, "the gold's proposal")
        await pilot.press("alt+l")                                  # no turn yet: nothing to label
        assert not isinstance(app.screen, CommentScreen)
        await pilot.press("ctrl+y")
        await wait_for(pilot, lambda: waiting(app, "submit"), 20, "the submit proposal")
        await pilot.press("alt+l")
        await wait_for(pilot, lambda: isinstance(app.screen, CommentScreen), 5, "the label box")
        await type_text(pilot, "good the gold")
        await pilot.press("enter")
        await wait_for(pilot, lambda: watch(app).trajectory.turns[0].label is not None, 5, "the label")
        saved = Session("watch", home).load(app.catalog.find("s1"))
        mark = saved.turns[0].info["label"]
        assert (mark["label"], mark["note"], mark["author"]) == ("good", "the gold", "rev")
