"""What a study's rules let an annotator do, asked in one place by every front end.

``PlayRules`` answers the questions a front end has while a human plays: may the gold be
shown now, may this task be tried again (and as which attempt), how long is left, has the
time run out, is the schema hidden, may the SQL editor recall earlier queries, are per-turn
scores shown. The Textual app
(icplay/tui) and ``--plain`` (icplay/lines/study.py) both hold one and ask it; neither
decides a rule itself. Outside a study ``FREE`` answers as icplay always has (everything
allowed, no limit). A refusal is one sentence that names the study file and the rule, so
an annotator (or the lead) knows where it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from icplay.episode import Trajectory
from icplay.study.model import Study, StudyRules

HIDDEN_MODEL = "the model"           # what a study that hides the model calls it
TIMED_OUT_NOTE = "the study's time limit of {limit} per task was reached: the episode is ended and kept as timed out"


@dataclass(frozen=True)
class PlayRules:
    """The rules one annotator plays under (``FREE`` outside a study)."""

    rules: StudyRules = StudyRules(gold_reveal=True, retries="counted", per_turn_scoring=True, hide_model=False)
    study: str | None = None          # the study's name, None outside a study
    where: str = ""                   # the study file, for refusals

    @classmethod
    def of(cls, study: Study) -> "PlayRules":
        return cls(study.rules, study.name, str(study.path or f"study {study.name!r}"))

    # -- the gold -------------------------------------------------------------------------
    def gold_refusal(self) -> str | None:
        """None when the gold may be shown after a submit, else why not."""
        if self.rules.gold_reveal:
            return None
        return f"this study does not show the gold (rules.gold_reveal = false in {self.where})"

    def breakdown_refusal(self) -> str | None:
        """None when how a reward was computed may be shown after a submit, else why not: the
        breakdown names tests, gold rows and gold files, so it is shown where the gold is."""
        if self.rules.gold_reveal:
            return None
        return f"this study shows the reward only, not how it was computed (rules.gold_reveal = false in {self.where})"

    # -- attempts -------------------------------------------------------------------------
    def retry_refusal(self, attempts: Iterable[Trajectory]) -> str | None:
        """None when the task (whose ``attempts`` so far are given) may be tried again, else why not."""
        if not any(ended(t, self.rules) for t in attempts):
            return None
        if self.rules.retries == "counted":
            return None
        return f"this task is done and this study allows no retries (rules.retries = \"off\" in {self.where})"

    # -- time -----------------------------------------------------------------------------
    @property
    def time_limit(self) -> float | None:
        return float(self.rules.time_limit_s) if self.rules.time_limit_s is not None else None

    def time_left(self, worked: float) -> float | None:
        """Seconds left of the task's limit after ``worked`` seconds (None: no limit)."""
        limit = self.time_limit
        return None if limit is None else max(0.0, limit - worked)

    def timed_out(self, trajectory: Trajectory) -> bool:
        return timed_out(trajectory, self.rules)

    def time_up_reason(self) -> str:
        return TIMED_OUT_NOTE.format(limit=_seconds(self.rules.time_limit_s or 0))

    # -- what is shown --------------------------------------------------------------------
    @property
    def query_history(self) -> bool:
        """May the SQL editor recall the queries run before (this episode's, earlier sessions')?"""
        return self.rules.query_history

    @property
    def show_turn_scores(self) -> bool:
        return self.rules.per_turn_scoring

    @property
    def hide_model(self) -> bool:
        return self.study is not None and self.rules.hide_model

    def model_label(self, label: str) -> str:
        """The name a front end may show for the agent's model: none when the study hides it."""
        return "" if self.hide_model else label

    def blind(self, text: str, names: Iterable[str | None]) -> str:
        """``text`` with the model's ``names`` (its name, its endpoint) said as "the model" when
        the study hides which model plays: a server's error message often names it."""
        if not self.hide_model:
            return text
        for name in sorted((n for n in names if n), key=len, reverse=True):
            text = text.replace(name, HIDDEN_MODEL)
        return text


FREE = PlayRules()


def timed_out(trajectory: Trajectory, rules: StudyRules) -> bool:
    """An episode the time limit ended: not submitted, its worked time at or over the limit."""
    limit = rules.time_limit_s
    return limit is not None and trajectory.status != "submitted" and trajectory.time_worked >= limit


def ended(trajectory: Trajectory, rules: StudyRules) -> bool:
    """The attempt is over: submitted, or ended by the time limit."""
    return trajectory.status == "submitted" or timed_out(trajectory, rules)


def _seconds(n: int) -> str:
    return f"{n // 60} min" if n % 60 == 0 and n >= 60 else f"{n} s"
