"""Pilot tests of the Python playground on a real interpreter in bwrap (no mocks)."""

from __future__ import annotations

import pytest

from icplay.tui.screens.modals import ConfirmScreen, ScoreScreen

from tui_helpers import play_screen, play_state, turn_count, type_text, wait_for, wait_ready

pytestmark = pytest.mark.usefixtures("bwrap_ready")


async def test_enter_runs_a_statement_a_block_on_an_empty_line_and_submit_names_the_function(make_app):
    app = make_app(env="python", tasks="python", task="py-01")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        screen = play_screen(app)
        editor = screen.query_one("#editor")
        assert editor.language == "python"

        # a block: Enter after the ':' and inside the block adds indented lines; Enter on
        # the empty line runs the whole def as one action
        await type_text(pilot, "def sq(n):")
        await pilot.press("enter")
        assert editor.text == "def sq(n):\n    " and turn_count(app) == 0
        await type_text(pilot, "return n * n")
        await pilot.press("enter")
        assert turn_count(app) == 0
        await pilot.press("enter")
        await wait_for(pilot, lambda: turn_count(app) == 1 and play_state(app) == "ready", 30, "the def")
        assert screen.episode.trajectory.turns[0].action == "def sq(n):\n    return n * n"

        # a complete one-line statement runs on Enter; its value is shown
        await type_text(pilot, "sq(12)")
        await pilot.press("enter")
        await wait_for(pilot, lambda: turn_count(app) == 2 and play_state(app) == "ready", 30, "sq(12)")
        assert screen.episode.trajectory.turns[1].observation == "144\n"
        assert "144" in "\n".join(screen.pane.output.plain_lines())

        # F5 runs everything in the editor (blank lines inside a def included)
        editor.load_text("def cube(n):\n    x = n\n\n    return x ** 3\nprint(cube(2))")
        await pilot.press("f5")
        await wait_for(pilot, lambda: turn_count(app) == 3 and play_state(app) == "ready", 30, "the F5 run")
        assert screen.episode.trajectory.turns[2].observation == "8\n"

        # `submit sq` scores sq under the gold's name (square)
        await type_text(pilot, "submit sq")
        await pilot.press("enter")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen), 60, "the score")
        assert app.screen.result.reward == 1.0
        assert app.screen.result.breakdown["function"] == "sq"
