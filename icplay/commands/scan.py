"""``icplay scan PATHS``: flags over saved episodes (reward-hack suspects, the environment
failing the solver, loops and other behaviour), counts per flag, and task health.

PATHS are what ``icplay report`` reads. The text output lists each flagged episode with its
flags (turn and evidence), then the counts per flag; ``--tasks-health`` adds the table of
tasks that look broken (``--check-golds`` first runs every gold of their sets, as ``icplay
tasks --check`` does); ``--json`` prints everything for scripts and ``--html FILE`` writes a
self-contained page. ``--ask`` adds the model scanner: a question with a rubric asked of a
model over each episode, within ``--max-calls`` and ``--max-cost``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from icplay.process import UserError

if TYPE_CHECKING:   # the type only: the module itself loads when the command runs
    from icplay.scan.report import ScanReport


# What a command needs is imported inside the function that runs it (said here once for the
# module): `icplay --help` imports every command module and must start fast.


def register(sub) -> None:
    p = sub.add_parser("scan", help="flags over saved episodes: reward-hack suspects, broken environments, loops; "
                                    "task health",
                       description="Scan saved episodes for flags (each with its turn and evidence) and the health "
                                   "of their tasks.")
    p.add_argument("paths", nargs="*", help="run folders, trajectory files or InterCode results files")
    p.add_argument("--json", action="store_true", help="print everything as JSON")
    p.add_argument("--html", metavar="FILE", help="write a self-contained HTML page")
    p.add_argument("--scanners", help="the scanners to run, by name, comma-separated (default: all; see --list)")
    p.add_argument("--list", action="store_true", help="list the scanners and the kinds of flag, then exit")
    p.add_argument("--only", help="list only these kinds of flag (comma-separated)")
    p.add_argument("--counts", action="store_true", help="print only the counts per flag")
    p.add_argument("--tasks-health", action="store_true", help="print the task health table")
    p.add_argument("--check-golds", action="store_true",
                   help="run every gold of the scanned sets (icplay tasks --check) and add what it finds to task health")
    p.add_argument("--sandbox", default="sqlite",
                   help="what --check-golds runs golds on, for the sets whose language has it: SQL's backend, "
                        "sqlite (default) or mysql; Harbor's image engine, docker or podman (else docker)")
    ask = p.add_argument_group("the model scanner (optional)")
    ask.add_argument("--ask", metavar="QUESTION", help="ask a model this question about each episode")
    ask.add_argument("--rubric", default="Answer flag true only when the trajectory clearly shows it.",
                     help="how to answer (text, or @FILE)")
    ask.add_argument("--model", help="the model to ask (with --ask)")
    ask.add_argument("--base-url", help="OpenAI-compatible endpoint ($OPENAI_BASE_URL)")
    ask.add_argument("--api-key", help="API key ($OPENAI_API_KEY)")
    ask.add_argument("--max-calls", type=int, default=20, help="at most this many model calls (default 20)")
    ask.add_argument("--max-cost", type=float, help="stop asking once this many dollars are spent (priced models)")
    p.set_defaults(func=run)


def _list() -> int:
    from icplay.scan.flags import KINDS
    from icplay.scan.registry import names

    print("scanners: " + ", ".join(names()) + " (and the model scanner with --ask)")
    for kind in KINDS.values():
        print(f"  {kind.name:<24} {kind.group:<12} {kind.meaning}")
    return 0


def _scanners(args) -> list:
    from icplay.scan.registry import UnknownScanner, chosen

    wanted = [n.strip() for n in args.scanners.split(",") if n.strip()] if args.scanners else None
    try:
        return chosen(wanted)
    except UnknownScanner as exc:
        raise UserError(str(exc)) from None


def _model_scanner(args):
    """The model scanner --ask describes, or None."""
    from icplay.agents.llm import ChatModel
    from icplay.scan.model import Budget, ModelScanner

    if not args.ask:
        if args.model:
            raise UserError("--model names the model the scanner asks: give the question with --ask")
        return None
    if not args.model:
        raise UserError("--ask needs --model (the model to ask)")
    if args.max_calls < 0 or (args.max_cost is not None and args.max_cost < 0):
        raise UserError("--max-calls and --max-cost cannot be negative")
    rubric = args.rubric
    if rubric.startswith("@"):
        try:
            rubric = Path(rubric[1:]).read_text(encoding="utf-8")[:20_000]
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"--rubric {rubric[1:]}: cannot read it ({exc})") from None
    model = ChatModel(args.model, base_url=args.base_url, api_key=args.api_key, stream=False)
    return ModelScanner(model, args.ask, rubric, Budget(args.max_calls, args.max_cost))


def gold_problems(sets: set[str], sandbox: str) -> tuple[dict[str, str], list[str]]:
    """``set/id`` -> why its gold cannot be trusted, over ``sets``; notes on sets not checked."""
    from icplay.languages import find, resolve
    from icplay.tasks.model import TaskFileError
    from icplay.tasks.registry import find_set

    problems: dict[str, str] = {}
    notes = []
    for name in sorted(sets):
        try:
            task_set = find_set(name)
        except TaskFileError as exc:             # an unknown set, a set whose files are gone
            notes.append(f"gold check: set {name!r} not checked ({exc})")
            continue
        spec = find(task_set.env)
        if spec is None or spec.gold_check is None:
            notes.append(f"gold check: no check for {task_set.env} tasks (set {name})")
            continue
        print(f"icplay scan: running every gold of {name}…", file=sys.stderr)
        check = resolve(spec.gold_check)
        kind = sandbox if sandbox in spec.sandboxes else spec.sandboxes[0]   # --sandbox names one language's
        for task, reason in check(task_set.load(), kind, lambda m: print(m, file=sys.stderr)):
            problems[f"{name}/{task.id}"] = reason
    return problems, notes


def run(args) -> int:
    if args.list:
        return _list()
    if not args.paths:
        raise UserError("name what to scan: run folders, trajectory files or InterCode results files")
    report = _scan(args)
    if args.html:
        _write_page(report, Path(args.html))
    _print_report(report, args)
    return 0


def _scan(args) -> ScanReport:
    """Every episode under ``args.paths`` scanned by the chosen scanners (and the model, and
    the golds, when asked for)."""
    from icplay.scan.report import scan_paths

    scanners = _scanners(args)
    asker = _model_scanner(args)
    if asker is not None:
        scanners.append(("model", asker))
    report = scan_paths(args.paths, scanners)
    if not report.episodes:
        raise UserError("no episode to scan" + (f": {report.skipped[0].path} ({report.skipped[0].reason})"
                                                 if report.skipped else ""))
    if asker is not None:
        report.notes.append(asker.note())
    if args.check_golds:
        problems, notes = gold_problems({r.set for r in report.health if r.set}, args.sandbox)
        report.add_gold_problems(problems)
        report.notes += notes
    return report


def _print_report(report: ScanReport, args) -> None:
    """The report on stdout (as JSON, or as text listings), its notes on stderr."""
    from icplay.scan.report import render_counts, render_episodes, render_health

    if args.json:
        print(json.dumps(report.to_dict(), indent=1))
    else:
        only = {k.strip() for k in args.only.split(",")} if args.only else None
        listing = "" if args.counts else render_episodes(report, only)
        print("\n\n".join(x for x in (listing, render_counts(report),
                                      render_health(report.health, 50) if args.tasks_health else "") if x))
    for note in report.notes:
        print(f"icplay scan: {note}", file=sys.stderr)
    if report.skipped:
        from icplay.formats.native import skipped_note

        print(f"icplay scan: {skipped_note(report.skipped)}", file=sys.stderr)


def _write_page(report, path: Path) -> None:
    from icplay.scan.page import render_page
    from icplay.store import atomic_write_text

    try:
        atomic_write_text(path, render_page(report))
    except OSError as exc:
        raise UserError(f"--html {path}: cannot write it ({exc.strerror or exc})") from None
    print(f"icplay scan: wrote {path}", file=sys.stderr)
