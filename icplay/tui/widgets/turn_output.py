"""How a work pane writes turns into its output pane and says how the last one went:
shared by the Bash (and CTF) pane and the Python pane, which differ only in how an action
is echoed and in the word for an action that went well or not."""

from __future__ import annotations

from typing import Callable

from rich.text import Text

from icplay.envs.base import observation_parts
from icplay.episode import Turn
from icplay.tui.widgets.output import OutputPane
from icplay.tui.widgets.panels import short_duration

SHOWN_TURNS = 50   # saved turns written back after a resume


def write_saved_turns(output: OutputPane, turns: list[Turn], echo: Callable[[str], None]) -> None:
    """Write saved turns into the output (after a resume), newest last; ``echo`` writes an action."""
    for turn in turns[-SHOWN_TURNS:]:
        if not turn.action:
            continue
        echo(turn.action)
        text, notes = observation_parts(turn.observation, turn.info)
        output.write_ansi(text.rstrip("\n"))
        for note in notes:
            output.write_note(f"[{note}]")


def finish_turn(output: OutputPane, turn: Turn | None) -> None:
    """End the turn's streamed output and write icplay's notes about it."""
    output.end_stream()
    if turn is not None:
        for note in observation_parts(turn.observation, turn.info)[1]:
            output.write_note(f"[{note}]")


def turn_status(turn: Turn, verdict: tuple[str, str], frozen: bool) -> Text:
    """The status line: interrupted, timed out, else the pane's ``(words, style)``; then the
    duration (left out in frozen snapshots)."""
    status = Text()
    if turn.info.get("interrupted"):
        status.append("interrupted", style="yellow")
    elif turn.info.get("timed_out"):
        status.append("timed out", style="yellow")
    else:
        status.append(*verdict)
    if not frozen:
        status.append(f" · {short_duration(turn.duration)}")
    return status
