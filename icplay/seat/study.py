"""A study as the seat server sees it: where its seats are kept, who its annotators are,
what each seat runs, which episodes a supervisor may follow."""

from __future__ import annotations

from pathlib import Path

from icplay.paths import home_dir
from icplay.seat.commands import SeatCommands
from icplay.study.seats import SEATS_FILE, Seats


def study_folder(study: str) -> Path:
    # TODO(i22-studies): icplay.study.model.study_dir once the study model lands
    return home_dir() / "studies" / study


def seats_of(study: str) -> Seats:
    return Seats(study_folder(study) / SEATS_FILE)


def annotators_of(study: str) -> list[str]:
    return []


def seat_commands(study: str) -> SeatCommands:
    return SeatCommands(study, play=("sql", "--session", study))


def episodes_of(study: str) -> dict[str, Path]:
    """The trajectory files a supervisor may follow, by a name relative to icplay's home,
    running episodes first."""
    from icplay.formats.summary import scan

    home = home_dir()
    roots = [p for p in (home / "trajectories",) if p.exists()]
    if not roots:
        return {}
    summaries = scan(roots, cache=False)
    summaries.sort(key=lambda s: s.status != "running")
    found: dict[str, Path] = {}
    for s in summaries:
        path = Path(s.ref.partition("#")[0])
        try:
            found[str(path.resolve().relative_to(home.resolve()))] = path
        except ValueError:
            continue
    return found
