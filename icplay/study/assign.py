"""Who plays which task, in which order: balanced, seeded, reproducible.

Each task goes to ``per_task`` different annotators and every annotator gets the same number
of tasks, give or take one: the tasks are shuffled, then dealt round the (shuffled)
annotators in a cycle, ``per_task`` consecutive seats per task. Consecutive seats are distinct
while ``per_task`` is at most the number of annotators, and a cycle deals the seats evenly.
Each annotator's list is then shuffled on its own (seeded by the study seed and the name), so
the order effects (fatigue, learning) fall on different tasks for different people. The same
inputs give the same assignment on any machine (``random.Random`` seeded by text is stable).
"""

from __future__ import annotations

import random
from typing import Sequence

from icplay.study.model import StudyFileError


def assign(tasks: Sequence[str], annotators: Sequence[str], per_task: int, seed: int) -> dict[str, tuple[str, ...]]:
    """annotator -> task refs in that annotator's order; ``StudyFileError`` on impossible input."""
    check_assignable(tasks, annotators, per_task)
    rng = random.Random(f"icplay-study:{seed}")
    order, seats = list(tasks), list(annotators)
    rng.shuffle(order)
    rng.shuffle(seats)
    dealt: dict[str, list[str]] = {who: [] for who in annotators}
    for i, ref in enumerate(order):
        for j in range(per_task):
            dealt[seats[(i * per_task + j) % len(seats)]].append(ref)
    out = {}
    for who in annotators:
        mine = sorted(dealt[who])
        random.Random(f"icplay-study:{seed}:{who}").shuffle(mine)
        out[who] = tuple(mine)
    return out


def check_assignable(tasks: Sequence[str], annotators: Sequence[str], per_task: int) -> None:
    if not annotators:
        raise StudyFileError("--annotators: name at least one annotator")
    dup = next((a for i, a in enumerate(annotators) if a in annotators[:i]), None)
    if dup is not None:
        raise StudyFileError(f"--annotators: {dup!r} is named twice")
    if not tasks:
        raise StudyFileError("--tasks: the sets given hold no tasks")
    if not 1 <= per_task <= len(annotators):
        raise StudyFileError(f"--per-task: {per_task} annotators per task, but the study has {len(annotators)} "
                             f"(give 1 to {len(annotators)})")
