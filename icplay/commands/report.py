"""``icplay report LOGS...``: success tables over saved trajectories, side by side.

Each LOG is a run folder (``icplay run --out``), a folder of human trajectories, one
trajectory file, or an InterCode results or per-episode log file (or a folder of
them); each becomes one column of the table, followed by the success-by-turn curve.
Episodes of several envs or sets get one table each. ``--json`` prints the figures for scripts.
A file that cannot be read is left out and named, with the field that is wrong, in one line
on stderr after the tables (``2 files skipped: ...``); the rest is reported.
Each task counts once, by its first attempt (pass@1; ``--attempts best|all`` to choose, said
in the table's header; earlier attempts are read from the folder's attempts store), and a
log holding several annotators' episodes gets a column per annotator beside its own.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from icplay.process import UserError
from icplay.formats.native import Skipped, load_earlier_attempts, skipped_note
from icplay.store import TrajectoryFileError
from icplay.episode import annotator_label


# What a command needs is imported inside the function that runs it (said here once for the
# module): `icplay --help` imports every command module and must start fast.


def register(sub) -> None:
    p = sub.add_parser("report", help="success tables and the success-by-turn curve over saved trajectories",
                       description="Tables over runs, human baselines or InterCode results files, side by side.")
    p.add_argument("logs", nargs="+", help="run folders, trajectory files or InterCode results files")
    p.add_argument("--label", action="append", default=None, help="column label, once per LOG, in order")
    p.add_argument("--turns", type=int, default=None, help="success by turn up to N (default: the runs' limit)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--no-curve", action="store_true", help="leave out the success-by-turn chart")
    p.add_argument("--attempts", choices=["first", "best", "all"], default="first",
                   help="which attempts of a task are counted: the first (pass@1, the default), the best, or all")
    p.set_defaults(func=run)


def _print_json(tables: list, split: bool, attempts: str, skipped: list) -> None:
    """The report as one JSON document: each run's figures (with its language and set when the
    logs hold more than one), the attempts counted and the files skipped."""
    runs = [{**s.to_dict(), **({"env": env, "set": set_name} if split else {})}
            for (env, set_name), summaries in tables for s in summaries]
    print(json.dumps({"runs": runs, "attempts": attempts,
                      "skipped": [{"path": s.path, "reason": s.reason} for s in skipped]}, indent=1))


def run(args) -> int:
    from icplay.attempts import counted_note
    from icplay.languages import find
    from icplay.report import render_curve, render_table

    if args.label and len(args.label) != len(args.logs):
        raise UserError(f"give one --label per log ({len(args.logs)} logs, {len(args.label)} labels)")
    skipped: list = []
    logs = _read_logs(args, skipped)
    if not logs:
        raise UserError(f"no trajectory to report; {skipped_note(skipped)}")
    tables = _tables(logs, args.turns)
    split = len(tables) > 1
    if args.json:
        _print_json(tables, split, args.attempts, skipped)
        say_skipped(skipped)
        return 0
    for n, ((env, set_name), summaries) in enumerate(tables):
        if n:
            print()
        print(render_table(summaries, title=(f"== {env} · {set_name} ==\n" if split else "") + counted_note(args.attempts)))
        if (spec := find(env)) is not None and spec.report_note:
            print(spec.report_note)
        if not args.no_curve:
            print()
            print(render_curve(summaries))
    say_skipped(skipped)
    return 0


def say_skipped(skipped) -> None:
    """The files left out, once, on stderr after the tables (so they are the last thing read)."""
    if skipped:
        sys.stdout.flush()
        print(f"icplay: {skipped_note(skipped)}", file=sys.stderr)


def _read_logs(args, skipped: list) -> list[tuple[str, str, dict]]:
    """(label, path, {(env, set): trajectories}) per log given; a file (or a whole LOG) that
    cannot be read goes to ``skipped`` and the others are still reported."""
    from icplay.attempts import choose
    from icplay.report import group_by_set, load_logs, run_label

    logs = []
    for i, log in enumerate(args.logs):
        try:
            trajs, meta = load_logs(log, skipped)
        except TrajectoryFileError as exc:      # this LOG as a whole: the others are still reported
            skipped.append(Skipped.of(log, exc))
            continue
        trajs = choose(trajs, load_earlier_attempts(log, skipped), getattr(args, "attempts", "first"))
        if not trajs:
            continue                            # every file of it was skipped (and named)
        label = args.label[i] if args.label else run_label(meta, Path(log).name or str(log))
        logs.append((label, str(log), group_by_set(trajs)))
        logs += _by_annotator(label, str(log), trajs)
    return logs


def _by_annotator(label: str, path: str, trajs: list) -> list[tuple[str, str, dict]]:
    """One more column per annotator when a log holds the episodes of more than one."""
    from icplay.report import group_by_set

    names = sorted({annotator_label(t.annotator) for t in trajs})
    if len(names) < 2:
        return []
    return [(f"{label} · {name}", path, group_by_set(t for t in trajs if annotator_label(t.annotator) == name))
            for name in names]


def _tables(logs: list[tuple[str, str, dict]], turns: int | None) -> list[tuple[tuple[str, str], list]]:
    """One table per (env, set) any log has, sorted: the summary of each log that has it."""
    from icplay.report import summarize

    keys = sorted({key for _, _, groups in logs for key in groups})
    tables = []
    for key in keys:
        summaries = []
        for label, path, groups in logs:
            if key in groups:
                summary = summarize(groups[key], label, turns)
                summary.info["path"] = path
                summaries.append(summary)
        tables.append((key, summaries))
    return tables
