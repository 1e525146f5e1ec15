"""A solver's output never writes to the terminal (issue 28's fresh audit).

The output pane keeps an action's colours: its lines go through Rich's ANSI reader, which
drops the CSI sequences it knows and OSC links (dropped before it, ``shown.ansi_safe``), but
leaves any other ESC in the text, and Textual wrote that ESC to the terminal: ``printf
'\\033#8'`` (DECALN) filled the whole screen with E's, ``printf '\\033c'`` resets the terminal.
Now an ESC that does not begin a whole CSI sequence is shown as ``^[``."""

from __future__ import annotations

import pytest

from icplay.tui.shown import from_ansi

from .test_display_hostile import bash_playground, run_action

# RIS (reset), DECSC/DECRC, DECALN (screen of E's), a charset switch, DCS and APC strings, a lone ESC
SEQUENCES = ["\x1bc", "\x1b7\x1b8", "\x1b#8", "\x1b%G", "\x1bP1$r\x1b\\", "\x1b_apc\x1b\\", "\x1b"]


@pytest.mark.parametrize("sequence", SEQUENCES)
def test_no_escape_but_colour_reaches_a_widget(sequence):
    shown = from_ansi(f"a{sequence}b \x1b[31mred\x1b[0m")
    assert "\x1b" not in shown.plain and "^[" in shown.plain, repr(shown.plain)
    assert shown.plain.endswith(" red") and [str(span.style) for span in shown.spans] == ["color(1)"]


@pytest.mark.usefixtures("bwrap_ready")
async def test_an_actions_terminal_sequences_never_reach_the_terminal(make_app):
    async with bash_playground(make_app) as (pilot, screen):
        await run_action(pilot, "printf 'A\\033#8B \\033cC \\033Pq\\033\\\\D \\033[1mbold\\033[0m\\n'")
        await pilot.pause()
        output = screen.query_one("#output")
        assert output.plain_lines()[-1] == "A^[#8B ^[cC ^[Pq^[\\D bold"
        drawn = ["".join(segment.text for segment in output.render_line(y)) for y in range(output.size.height)]
        assert any("^[#8B" in line for line in drawn), drawn
        assert not any("\x1b" in line for line in drawn), drawn
