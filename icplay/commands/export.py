"""``icplay export FORMAT PATHS... --out FILE``: saved episodes as training data.

FORMAT is ``chat`` (OpenAI chat fine-tuning JSONL), ``fewshot`` (demonstrations for
``icplay run --demos``), ``preference`` (chosen/rejected pairs from human edits and
rejections), ``intercode`` (InterCode's results file, readable by ``icplay rescore``) or
``csv`` (one row per episode) or ``atif`` (one ATIF trajectory per line, icplay/formats/atif.py). PATHS are run folders, sessions, trajectory files or
InterCode files. The formats are in ``icplay.formats.export`` and docs/export.md.
"""

from __future__ import annotations

import sys
from icplay.process import UserError


# What a command needs is imported inside the function that runs it (said here once for the
# module): `icplay --help` imports every command module and must start fast.


def register(sub) -> None:
    from icplay.formats.export import AUTHORS, FORMATS, SOLVED_BY

    p = sub.add_parser("export", help="export saved episodes as fine-tuning, few-shot, preference, InterCode or CSV data",
                       description=__doc__.split("\n\n")[1] if __doc__ else None)
    p.add_argument("format", choices=(*FORMATS, "atif"), help="the output format (atif: JSON Lines of ATIF "
                   "trajectories, Harbor's format; docs/export.md)")
    p.add_argument("paths", nargs="+", help="run folders, session folders, trajectory files or InterCode files")
    p.add_argument("--out", required=True, help="the file to write ('-' for stdout)")
    p.add_argument("--solved", choices=tuple(SOLVED_BY), default=None,
                   help="only solved episodes: intercode (best reward 1.0) or strict (the strict verdict says "
                        "solved; episodes without a verdict are left out)")
    p.add_argument("--solved-only", action="store_true", help="the same as --solved intercode")
    p.add_argument("--author", choices=AUTHORS, default="any",
                   help="human: no agent turn; agent: no human step-in; mixed: both (default any)")
    p.add_argument("--min-reward", type=float, default=None, help="only episodes whose best reward is at least X")
    p.add_argument("--strategy", default="tryagain",
                   help="prompt format of chat, fewshot and preference data: tryagain, react, plan or single")
    p.add_argument("--protocol", choices=["intercode", "agent"], default=None,
                   help="system prompt's protocol (default: each episode's own)")
    p.add_argument("--actions", choices=["text", "tools"], default=None,
                   help="chat and preference data as text replies (fenced blocks) or as OpenAI tool calls with "
                        "tool messages (default: each episode's own --actions)")
    p.add_argument("--reasoning", action="store_true",
                   help="chat and preference: keep the model's reasoning on its messages (reasoning_content)")
    p.set_defaults(func=run)


def run(args) -> int:
    from icplay.agents.strategies import strategy_name
    from icplay.formats import load_logs
    from icplay.formats.export import ExportError, render, select
    from icplay.store import TrajectoryFileError, escape_surrogates

    try:
        strategy = strategy_name(args.strategy)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    trajs = []
    for path in args.paths:
        try:
            trajs.extend(load_logs(path)[0])
        except TrajectoryFileError as exc:
            raise UserError(str(exc)) from None
    chosen = select(trajs, solved_only=args.solved_only, author=args.author, min_reward=args.min_reward,
                    solved=args.solved)
    if not chosen:
        raise UserError(_none_chosen(trajs, args.solved))
    try:
        if args.format == "atif":
            from icplay.formats.atif import atif_lines

            text, count = atif_lines(chosen), len(chosen)
        else:
            text, count = render(args.format, chosen, strategy, args.protocol, args.actions, reasoning=args.reasoning)
    except ExportError as exc:
        raise UserError(str(exc)) from None
    _write(args.out, text if args.format == "csv" else escape_surrogates(text))
    print(f"icplay: {count} {args.format} record(s) from {len(chosen)} of {len(trajs)} episodes"
          + ("" if args.out == "-" else f" written to {args.out}"), file=sys.stderr)
    return 0


def _none_chosen(trajs: list, solved: str | None) -> str:
    """Why nothing is exported: no episode passes the filters (and how many were never judged)."""
    unjudged = sum(1 for t in trajs if t.strictly_solved is None)
    why = (f" ({unjudged} of them have no strict verdict: their env gives none, or they were recorded "
           "before strict verdicts existed)" if solved == "strict" and unjudged else "")
    return f"none of the {len(trajs)} episodes passes the filters{why}"


def _write(out: str, text: str) -> None:
    """The export to stdout ("-") or to a file written whole or not at all."""
    from pathlib import Path

    from icplay.store import atomic_write_text

    if out == "-":
        sys.stdout.write(text)
        return
    try:
        atomic_write_text(Path(out), text)
    except OSError as exc:
        raise UserError(f"cannot write {out}: {exc.strerror or exc}") from None
