"""Pilot tests of honest attempts in the playground (issue 22's scenario) on a real bwrap
sandbox: a wrong CTF flag scores 0.00, the gold is revealed (``g``), the retry (``r``) with
the right flag scores 1.00 — and the record says so: two numbered attempt files, the first
marked ``gold_seen_at``, the second ``after_gold_seen``, by the named annotator; report counts
the first attempt (0%) unless told ``--attempts best`` (100%, after the gold); the task list
shows both attempts."""

from __future__ import annotations

import json

import pytest
from textual.widgets import DataTable, Static

from tui_helpers import play_screen, play_state, text_of, type_text, wait_for, wait_ready

from icplay.cli import main
from icplay.store import load_trajectory
from icplay.tui.screens.modals import ConfirmScreen, ScoreScreen
from icplay.tui.screens.picker import PickerScreen

pytestmark = [pytest.mark.usefixtures("bwrap_ready"), pytest.mark.bwrap]

RIGHT = "ICPLAY{B4S3_64_1S_N0T_ENCRYPT10N}"


async def submit_flag(pilot, flag: str) -> ScoreScreen:
    app = pilot.app
    play_screen(app).query_one("#flag").focus()
    await type_text(pilot, flag)
    await pilot.press("enter")
    assert isinstance(app.screen, ConfirmScreen)
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen), 30, "the score")
    return app.screen


async def test_a_retry_after_the_gold_is_a_second_attempt_marked_after_it(make_app, home, capsys):
    app = make_app(env="ctf", tasks="ctf", task="base64-note", annotator="ada")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        first_screen = play_screen(app)
        score = await submit_flag(pilot, "icplay{wrong}")
        assert score.result.reward == 0.0
        await pilot.press("g")                                           # the gold is shown...
        await wait_for(pilot, lambda: bool(score.query("#gold-action")), 10, "the gold")
        path = home / "trajectories" / "default" / "ctf" / "base64-note.json"
        assert load_trajectory(path).gold_seen_at is not None            # ...and recorded at once
        await pilot.press("r")                                           # retry
        await wait_for(pilot, lambda: play_screen(app) is not first_screen and play_state(app) == "ready", 30,
                       "the retry")
        score = await submit_flag(pilot, RIGHT)
        assert score.result.reward == 1.0
        await pilot.press("t")                                           # the task list
        await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen), 10, "the task list")
        picker = app.screen
        table = picker.query_one("#tasks", DataTable)
        await wait_for(pilot, lambda: any(str(k.value).endswith("base64-note") for k in table.rows), 10, "the tasks")
        row = next(i for i, key in enumerate(table.rows) if str(key.value).endswith("base64-note"))
        assert str(table.get_row_at(row)[2]) == "✓ 1.00 ×2"
        table.move_cursor(row=row)
        await pilot.pause()
        preview = text_of(picker.query_one("#preview", Static))
        assert "2 attempts: ✗ 0.00 (attempt 1) · ✓ 1.00 (attempt 2, after gold)" in preview

    kept = sorted((home / "attempts" / "default" / "ctf").glob("base64-note.*.json"))
    assert [p.name for p in kept] == ["base64-note.1.json"]                # both attempt files exist
    first, second = load_trajectory(kept[0]), load_trajectory(path)
    assert (first.attempt, first.reward, first.annotator, first.after_gold_seen) == (1, 0.0, "ada", False)
    assert first.gold_seen_at is not None and second.gold_seen_at is None
    assert (second.attempt, second.reward, second.annotator, second.after_gold_seen) == (2, 1.0, "ada", True)
    assert "user" not in second.policy

    folder = str(home / "trajectories" / "default")
    assert main(["report", folder, "--json"]) == 0
    run = json.loads(capsys.readouterr().out)["runs"][0]
    assert (run["episodes"], run["solved"], run["rate"]) == (1, 0, 0.0)   # pass@1: the first attempt
    assert main(["report", folder, "--no-curve", "--attempts", "best"]) == 0
    table = capsys.readouterr().out
    assert table.startswith("counting: best attempt per task")
    assert "1 (100.0%)" in table and "after the gold was shown" in table


async def test_the_app_says_when_no_annotator_is_set(make_app, home):
    app = make_app(env="ctf", tasks="ctf", annotator_note=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        notes = [(n.title, n.message) for n in app._notifications]
        # said whole: "[human]" is config.toml's table, not markup to swallow
        assert ("No annotator set", "Episodes record none. Name yourself: --annotator NAME, $ICPLAY_ANNOTATOR or "
                "config.toml [human].") in notes, notes
        assert all(not n.markup for n in app._notifications)
    named = make_app(env="ctf", tasks="ctf", annotator="ada", annotator_note=True)
    async with named.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert not [n for n in named._notifications if "annotator" in n.title + n.message]


def test_every_session_the_app_opens_records_its_annotator(make_app, home):
    """The play session, the watch session (an agent a human supervises) and the forks'."""
    from icplay.tui.screens.view import ViewApp

    app = make_app(env="ctf", tasks="ctf", annotator="ada")
    assert (app.session.annotator, app.watch_session.annotator) == ("ada", "ada")
    viewer = ViewApp(home=home, annotator="bob")
    try:
        assert viewer.fork_session.annotator == "bob"
    finally:
        viewer.close_envs()
