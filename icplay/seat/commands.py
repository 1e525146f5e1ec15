"""What a seat runs: the command line of the app process textual-serve starts for it.

The seat comes from the token, so the annotator's name here never comes from the browser.
textual-serve starts the command through a shell: every part is quoted.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from icplay.study.seats import ANNOTATOR, Seat


@dataclass(frozen=True)
class SeatCommands:
    """The commands of one study's seats: an annotator plays their queue, a supervisor
    follows one running episode, read-only."""

    study: str
    play: tuple[str, ...] = ()          # play's arguments before --annotator; default: --study STUDY

    def for_seat(self, seat: Seat) -> str:
        if seat.role != ANNOTATOR:
            raise ValueError(f"seat {seat.name!r} is a {seat.role}'s: it follows an episode, it does not play")
        return _shell([sys.executable, "-m", "icplay", "play", *self.play_arguments(), "--annotator", seat.name])

    def play_arguments(self) -> tuple[str, ...]:
        return self.play or ("--study", self.study)

    def follow(self, trajectory: Path) -> str:
        return _shell([sys.executable, "-m", "icplay", "view", "--follow", str(trajectory)])


def _shell(argv: list[str]) -> str:
    return " ".join(shlex.quote(part) for part in argv)
