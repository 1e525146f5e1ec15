"""``icplay study status``: per annotator, how far along the queue is (read from the files)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from icplay.session import format_duration
from icplay.study.model import Study
from icplay.study.queue import IN_PROGRESS, Queue


@dataclass(frozen=True)
class AnnotatorStatus:
    annotator: str
    assigned: int
    done: int
    left: int
    in_progress: int
    attempts: int
    time_worked: float

    def to_dict(self) -> dict:
        return asdict(self)


def study_status(study: Study, home: Path | None = None, skipped: list | None = None) -> list[AnnotatorStatus]:
    """One row per annotator, in the study's order; unreadable files go to ``skipped``."""
    rows = []
    for who in study.annotators:
        queue = Queue(study, who, home)
        if skipped is not None:
            skipped.extend(queue.skipped)
        rows.append(AnnotatorStatus(who, len(queue.entries), queue.done, queue.left,
                                    sum(1 for e in queue.entries if e.state == IN_PROGRESS), queue.attempts,
                                    round(queue.time_worked, 3)))
    return rows


def render_status(study: Study, rows: list[AnnotatorStatus]) -> str:
    rules = study.rules
    limit = f"{rules.time_limit_s} s per task" if rules.time_limit_s is not None else "no time limit"
    head = (f"study {study.name}: {len(study.tasks)} tasks × {study.per_task} annotators each; gold reveal "
            f"{'on' if rules.gold_reveal else 'off'}, retries {rules.retries}, {limit}")
    table = [("annotator", "done", "left", "in progress", "attempts", "worked")]
    table += [(r.annotator, f"{r.done}/{r.assigned}", str(r.left), str(r.in_progress), str(r.attempts),
               format_duration(r.time_worked)) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    agent = study.agent.get("model") or study.agent.get("policy")
    if agent:      # a watch study: the lead's view names the agent even when the annotators may not see it
        head += (f"\nwatch study: each annotator supervises {agent}"
                 + (" (its name hidden from them)" if rules.hide_model else ""))
    lines = [head, ""] + ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in table]
    return "\n".join(lines)
