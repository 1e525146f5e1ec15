"""``icplay study report NAME [--json] [--html FILE] [--agents FOLDER...] [--attempts first|best|all]``:
a study's figures per annotator, per task and per agent, the annotators' agreement, and humans
against agents on the same tasks (icplay/study/report.py); ``--html`` writes the page with its
plots (icplay/study/html.py). Files that cannot be read are named on stderr, once, after it.

A subcommand of ``icplay study`` (icplay/commands/study.py adds it to its registry); this
module has no ``register`` of its own, so it is not a top-level command.
"""

from __future__ import annotations

import json
from pathlib import Path

from icplay.process import UserError

# What the command needs is imported inside the function that runs it: `icplay --help`
# imports every command module and must start fast.


def add_parser(sub) -> None:
    p = sub.add_parser("report", help="a study's figures: per annotator and task, agreement, humans vs agents",
                       description="Solve rates with Wilson 95% intervals, median time and turns per annotator, "
                                   "task and agent; Fleiss' kappa and Krippendorff's alpha between annotators; "
                                   "humans against agents on the same tasks.")
    p.add_argument("name", help="the study's name (or its folder or study.toml)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--html", metavar="FILE", default=None, help="also write the report as one self-contained page")
    p.add_argument("--agents", nargs="+", metavar="FOLDER", default=[],
                   help="agent run folders (icplay run --out) to set against the annotators on the same tasks")
    p.add_argument("--attempts", choices=["first", "best", "all"], default="first",
                   help="which attempts of a task are counted: the first (pass@1, the default), the best, or all")
    p.set_defaults(func=run)


def run(args) -> int:
    from icplay.commands.report import say_skipped
    from icplay.formats.native import Skipped
    from icplay.study.html import render_html
    from icplay.study.model import StudyFileError, load_study, study_trajectories
    from icplay.study.report import build_report, load_agents, render_text

    try:
        study = load_study(args.name)
    except StudyFileError as exc:
        raise UserError(str(exc)) from None
    unreadable: list = []
    trajectories = list(study_trajectories(study, skipped=unreadable))
    skipped = [s if isinstance(s, Skipped) else Skipped.of(*s) for s in unreadable]     # (path, error) pairs
    agents = load_agents(args.agents, args.attempts, skipped)
    report = build_report(study, trajectories, agents, args.attempts, skipped)
    if args.html:
        _write(Path(args.html), render_html(report))
    if args.json:
        print(json.dumps(report.to_dict(), indent=1))
    else:
        print(render_text(report))
        if args.html:
            print(f"\npage written to {args.html}")
    say_skipped(skipped)
    return 0


def _write(path: Path, text: str) -> None:
    """The page, or one sentence on why it could not be written."""
    from icplay.store import atomic_write_text

    try:
        atomic_write_text(path, text)
    except OSError as exc:
        raise UserError(f"cannot write the report page {path}: {exc.strerror or exc}") from None
