"""Pilot test of the CTF playground on a real bwrap sandbox: the shell pane plus a flag field."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "tui"))
from tui_helpers import home, make_app, play_screen, run_command, text_of, type_text, wait_for, wait_ready  # noqa: E402,F401

from icplay.store import load_trajectory  # noqa: E402
from icplay.tui.screens.modals import ConfirmScreen, ScoreScreen  # noqa: E402

pytestmark = [pytest.mark.usefixtures("bwrap_ready"), pytest.mark.bwrap]


async def test_find_the_flag_and_submit_it_in_the_flag_field(make_app, home):  # noqa: F811 (fixtures imported above)
    app = make_app(env="ctf", tasks="ctf", task="base64-note")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        screen = play_screen(app)
        assert text_of(screen.query_one("#prompt")).startswith("/ctf/base64-note")
        await run_command(pilot, "base64 -d note.txt")
        shell = "\n".join(screen.query_one("#output").plain_lines())
        assert "icplay{b4s3_64_1s_n0t_encrypt10n}" in shell

        screen.query_one("#flag").focus()
        await type_text(pilot, "ICPLAY{B4S3_64_1S_N0T_ENCRYPT10N}")
        await pilot.press("enter")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen), 30, "the score")
        assert app.screen.result.reward == 1.0
        assert "correct" in text_of(app.screen.query_one("#breakdown"))

    saved = load_trajectory(home / "trajectories" / "default" / "ctf" / "base64-note.json")
    assert saved.status == "submitted" and saved.reward == 1.0
    assert saved.breakdown["submitted"] == "ICPLAY{B4S3_64_1S_N0T_ENCRYPT10N}"
    assert [t.action for t in saved.turns] == ["base64 -d note.txt"]
