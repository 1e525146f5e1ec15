"""An outside audit's display probes (issue 28): characters that take no room on screen.

A zero-width space, a joiner, a word joiner, a BOM, a soft hyphen or a tag character (an
invisible copy of an ASCII letter) makes ``fl<ZWSP>ag`` read as ``flag``: two different file
names, commands or values look the same. They were shown raw in --plain and in the TUI's
panes (the bidirectional controls were escaped, these were not)."""

from __future__ import annotations

import pytest

from icplay.frontend.display import display

from .test_display_hostile import bash_playground, plain, run_action

INVISIBLE = {"\u200b": "\\u200b", "\u200c": "\\u200c", "\u200d": "\\u200d", "\u2060": "\\u2060",
             "\ufeff": "\\ufeff", "\u00ad": "\\xad", "\u2028": "\\u2028", "\U000e0041": "\\U000e0041"}


def test_display_shows_invisible_characters_as_escapes():
    for char, escape in INVISIBLE.items():
        assert display(f"fl{char}ag") == f"fl{escape}ag"
        assert display(f"fl{char}ag", keep_escape=True) == f"fl{escape}ag"
    assert display("emoji 🙂, 中文, é") == "emoji 🙂, 中文, é"


def test_plain_shows_zero_width_and_tag_characters_as_escapes_sql(tmp_path):
    out = plain(["play", "sql"], "SELECT 'fl' || char(8203) || 'ag' AS a, 'x' || char(917569) || 'y' AS b;\n"
                                 ":quit\n", tmp_path)
    assert "fl\\u200bag" in out and "x\\U000e0041y" in out, out
    assert "\u200b" not in out and "\U000e0041" not in out


@pytest.mark.usefixtures("bwrap_ready")
def test_plain_shows_zero_width_characters_as_escapes_bash(tmp_path):
    out = plain(["play", "bash", "--sandbox", "bwrap"],
                "touch /tmp/fl$'\\u200b'ag; ls /tmp; printf 'q\\xef\\xbb\\xbfz\\n'\n:quit\n", tmp_path)
    assert "fl\\u200bag" in out and "q\\ufeffz" in out, out
    assert "\u200b" not in out and "\ufeff" not in out


@pytest.mark.usefixtures("bwrap_ready")
async def test_zero_width_names_show_as_escapes_in_output_prompt_and_turn_list(make_app):
    async with bash_playground(make_app) as (pilot, screen):
        await run_action(pilot, "mkdir -p /tmp/d$'\\u200d'x && cd /tmp/d$'\\u200d'x && touch fl$'\\u200b'ag && ls "
                                "&& printf '%05000d\\n' 7")
        out = screen.query_one("#output").plain_lines()
        assert "fl\\u200bag" in out and not any("\u200b" in line or "\u200d" in line for line in out), out
        assert any(line.endswith("7") and len(line) >= 5000 for line in out)       # a 5000-wide line, whole
        from tui_helpers import text_of
        assert text_of(screen.query_one("#prompt")).strip() == "/tmp/d\\u200dx$"
        assert "\u200d" not in str(screen.turn_list.get_option_at_index(0).prompt)
        await pilot.pause()
        assert pilot.app.is_running
