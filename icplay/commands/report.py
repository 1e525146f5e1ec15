"""``icplay report LOGS...``: success tables over saved trajectories, side by side.

Each LOG is a run folder (``icplay run --out``), a folder of human trajectories, one
trajectory file, or an InterCode results or per-episode log file (or a folder of
them); each becomes one column of the table,
followed by the success-by-turn curve. ``--json`` prints the figures for scripts.
"""

from __future__ import annotations

import json
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("report", help="success tables and the success-by-turn curve over saved trajectories",
                       description="Tables over runs, human baselines or InterCode results files, side by side.")
    p.add_argument("logs", nargs="+", help="run folders, trajectory files or InterCode results files")
    p.add_argument("--label", action="append", default=None, help="column label, once per LOG, in order")
    p.add_argument("--turns", type=int, default=None, help="success by turn up to N (default: the runs' limit)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--no-curve", action="store_true", help="leave out the success-by-turn chart")
    p.set_defaults(func=run)


def run(args) -> int:
    from icplay.cli import UserError
    from icplay.report import load_logs, render_curve, render_table, run_label, summarize
    from icplay.store import TrajectoryFileError

    if args.label and len(args.label) != len(args.logs):
        raise UserError(f"give one --label per log ({len(args.logs)} logs, {len(args.label)} labels)")
    summaries = []
    for i, log in enumerate(args.logs):
        try:
            trajs, meta = load_logs(log)
        except TrajectoryFileError as exc:
            raise UserError(str(exc)) from None
        label = args.label[i] if args.label else run_label(meta, Path(log).name or str(log))
        summary = summarize(trajs, label, args.turns)
        summary.info["path"] = str(log)
        summaries.append(summary)
    if args.json:
        print(json.dumps({"runs": [s.to_dict() for s in summaries]}, indent=1))
        return 0
    print(render_table(summaries))
    if not args.no_curve:
        print()
        print(render_curve(summaries))
    return 0
