"""A study with seats, for the seat tests (the study file is made with the study model)."""

from __future__ import annotations

from icplay.study.assign import assign
from icplay.study.model import Study, StudyRules, save_study

TASKS = ("sql/bookshop-01", "sql/bookshop-02")
ANNOTATORS = ("ada", "bo")


def make_study(name: str = "pilot") -> Study:
    study = Study(name, TASKS, ANNOTATORS, 1, 3, assign(TASKS, ANNOTATORS, 1, 3), StudyRules(),
                  "2026-01-01T00:00:00Z")
    save_study(study)
    return study
