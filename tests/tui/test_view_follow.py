"""``icplay view --follow``: a live episode followed read-only (real SQLite, the Textual pilot)."""

from __future__ import annotations

from icplay.episode import Episode
from icplay.languages import make_env
from icplay.session import Session
from icplay.tui.screens.view_follow import FollowApp, FollowScreen

from tui_helpers import text_of, wait_for
from view_fixtures import SQL_TASK


async def test_follow_shows_new_turns_and_acts_on_nothing(home, sql_ready):
    env = make_env("sql", sandbox="sqlite")
    try:
        session = Session("live", home=home, annotator="ada")
        episode = Episode(env, SQL_TASK, save=session.save, policy={"kind": "human", "ui": "tui"}, annotator="ada")
        episode.act("SELECT title FROM books")
        path = session.path_for(SQL_TASK)
        app = FollowApp(path)
        async with app.run_test(size=(130, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, FollowScreen), 20, "the follow screen")
            screen = app.screen
            assert screen.query_one("#steps").option_count == 1
            assert "running" in text_of(screen.query_one("#status")) and "read-only" in text_of(screen.query_one("#status"))

            episode.act("SELECT title FROM books WHERE genre = 'Poetry'")       # the annotator's next turn
            await wait_for(pilot, lambda: screen.query_one("#steps").option_count == 2, 20, "the second turn")
            assert screen.index == 1 and "Poetry" in text_of(screen.query_one("#action"))

            before = path.read_bytes()
            for key in ("x", "k", "w", "c", "enter", "ctrl+s", "f8", "ctrl+p"):   # keys that act elsewhere
                await pilot.press(key)
                await pilot.pause()
                assert app.screen is screen, key
            assert not screen.reexecuting and path.read_bytes() == before

            episode.act(SQL_TASK.gold)
            episode.submit()
            await wait_for(pilot, lambda: "submitted" in text_of(screen.query_one("#status")), 20, "the submit")
            assert screen.query_one("#steps").option_count == 3
            await pilot.press("left")
            assert screen.index == 1
            await pilot.press("q")
        assert app.return_code in (0, None)
    finally:
        env.close()
