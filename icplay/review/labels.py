"""Label a turn of a saved episode good, bad or neutral (process supervision; ``icplay export
steps`` writes the labels out). The viewer's ``l`` key comes here; line mode's ``:label`` and
the live screens label the episode they hold (``icplay.episode.label_turn``).

The file is read again just before the label is written, so a label never carries back a
stale copy; an episode still being played (``running``) is not written from outside, and an
episode inside an InterCode file (``FILE#N``) has no turn records to hold a label.
"""

from __future__ import annotations

from pathlib import Path

from icplay.episode import STEP_LABELS, Trajectory, label_turn
from icplay.store import load_trajectory, save_trajectory

LABEL_PROMPT = f"{' | '.join(STEP_LABELS)}, then an optional note"


class LabelError(ValueError):
    """A label that cannot be saved (one sentence)."""


def parse_label(words: str) -> tuple[str, str | None]:
    """``"bad  deletes the table"`` -> ("bad", "deletes the table"); LabelError for another word."""
    label, _, note = words.strip().partition(" ")
    if label not in STEP_LABELS:
        raise LabelError(f"a turn is labelled {', '.join(STEP_LABELS)}, not {label!r}")
    return label, note.strip() or None


def label_saved_turn(ref: str, index: int, words: str, author: str | None) -> Trajectory:
    """Label turn ``index`` of the episode saved at ``ref`` and save it; the episode as saved."""
    label, note = parse_label(words)
    if "#" in ref:
        raise LabelError("an episode inside an InterCode file cannot hold labels; export it as icplay trajectories")
    trajectory = load_trajectory(ref)
    if trajectory.status == "running":
        raise LabelError("this episode is being played; label it from its own screen (or when it has ended)")
    if not 0 <= index < len(trajectory.turns):
        raise LabelError(f"the episode has no turn {index + 1}")
    label_turn(trajectory.turns[index], label, note, author)
    save_trajectory(trajectory, Path(ref))
    return trajectory
