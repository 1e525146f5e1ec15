"""A study as the seat server sees it: where its seats are kept, who its annotators are,
what each seat runs, which episodes a supervisor may follow."""

from __future__ import annotations

from pathlib import Path

from icplay.paths import home_dir
from icplay.seat.commands import SeatCommands
from icplay.study.model import load_study, sessions_dir, study_dir
from icplay.study.seats import SEATS_FILE, Seats
from icplay.formats.native import trajectory_folders
from icplay.formats.summary import scan

FOLLOWABLE = 200          # the supervisor's list: running episodes first, then the newest


def seats_of(study: str) -> Seats:
    """The seats of a study that exists (a StudyFileError, one sentence, if it does not)."""
    load_study(study)
    return Seats(study_dir(study) / SEATS_FILE)


def annotators_of(study: str) -> list[str]:
    return list(load_study(study).annotators)


def seat_commands(study: str) -> SeatCommands:
    """Each annotator plays their own queue: ``icplay play --study NAME --annotator A``."""
    return SeatCommands(study)


def episodes_of(study: str) -> dict[str, Path]:
    """The trajectory files a supervisor may follow, by their path under icplay's home: the
    study's annotators' sessions, and the other sessions and agents' runs of this home."""
    home = home_dir().resolve()
    roots = [p for p in (sessions_dir(load_study(study)), *trajectory_folders(home)) if p.is_dir()]
    if not roots:
        return {}
    summaries = sorted(scan(roots, cache=False), key=lambda s: (s.status != "running", -s.date))
    found: dict[str, Path] = {}
    for s in summaries[:FOLLOWABLE]:
        path = Path(s.ref.partition("#")[0]).resolve()
        if "#" not in s.ref and path.is_relative_to(home):
            found[str(path.relative_to(home))] = path
    return found
