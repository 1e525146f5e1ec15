"""A study with seats, for the seat tests (the study file is made with the study model)."""

from __future__ import annotations

from icplay.study.assign import assign
from icplay.study.model import Study, StudyRules, save_study

TASKS = ("sql/bookshop-01",)
ANNOTATORS = ("ada", "bo")


def make_study(name: str = "pilot") -> Study:
    """Both annotators have bookshop-01 (the only task, two per task)."""
    study = Study(name, TASKS, ANNOTATORS, 2, 3, assign(TASKS, ANNOTATORS, 2, 3), StudyRules(),
                  "2026-01-01T00:00:00Z")
    save_study(study)
    return study
