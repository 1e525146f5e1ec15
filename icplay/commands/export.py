"""``icplay export FORMAT PATHS... --out FILE``: saved episodes as training data.

FORMAT is ``chat`` (chat fine-tuning JSONL: every assistant message weighted 1 or 0,
each record's metadata naming the task, episode and outcome; solved episodes by default),
``fewshot`` (demonstrations for ``icplay run --demos``), ``preference`` (chosen/rejected
pairs of branches whose outcomes differ, from ``icplay branch``), ``steps`` (labelled turns
in TRL's stepwise-supervision shape), ``intercode`` (InterCode's results file, readable by
``icplay rescore``), ``csv`` (one row per episode) or ``atif`` (one ATIF trajectory per line,
icplay/formats/atif.py). PATHS are run folders, sessions, trajectory files or InterCode files. The formats are in ``icplay.formats.export`` and docs/export.md. A file
that cannot be read is left out and named with its bad field on stderr (``2 files skipped:
...``); the others are exported.

``icplay export harbor --tasks SET --out DIR`` writes task sets (not episodes) as Harbor task
folders, one per task (icplay/harbor/export.py).
"""

from __future__ import annotations

import sys
from icplay.process import UserError
from icplay.formats.export import (ANY_OUTCOME, AUTHORS, DEFAULT_SOLVED, FORMATS, SOLVED_BY, ExportError,
                                   TrainingOptions, render, select)
from icplay.formats.native import Skipped, load_earlier_attempts, skipped_note
from icplay.store import TrajectoryFileError, atomic_write_text, escape_surrogates
from icplay.agents.strategies import strategy_name
from icplay.formats import load_logs
from icplay.sandbox.base import SandboxError
from icplay.tasks.model import TaskFileError
from icplay.tasks.registry import load_tasks


# What a command needs is imported inside the function that runs it (said here once for the
# module): `icplay --help` imports every command module and must start fast.


def register(sub) -> None:
    p = sub.add_parser("export", help="export saved episodes as fine-tuning, few-shot, preference, InterCode or CSV data",
                       description=__doc__.split("\n\n")[1] if __doc__ else None)
    p.add_argument("format", choices=(*FORMATS, "steps", "atif", "harbor"),
                   help="the output format (steps: labelled turns in TRL's stepwise-supervision shape; atif: JSON "
                        "Lines of ATIF trajectories, Harbor's format; harbor: --tasks as Harbor task folders; "
                        "docs/export.md)")
    p.add_argument("paths", nargs="*", help="run folders, session folders, trajectory files or InterCode files")
    p.add_argument("--out", required=True, help="the file to write ('-' for stdout); harbor: the folder")
    p.add_argument("--tasks", action="append", default=[], metavar="SET",
                   help="harbor: a task set or task file to export (repeatable)")
    p.add_argument("--env", default=None, help="harbor: the language of --tasks given as files (bash, sql, python, ctf)")
    p.add_argument("--check", action="store_true",
                   help="harbor: then run each task's oracle as Harbor does (build, solve.sh, verifier) on --sandbox "
                        "and report the tasks whose reward is not 1.0")
    p.add_argument("--sandbox", default="docker", metavar="ENGINE",
                   help="harbor: the image engine (docker or podman) that runs Bash tasks' gold at export and "
                        "the oracles of --check, these through its command-line program (default docker)")
    p.add_argument("--solved", choices=(*SOLVED_BY, ANY_OUTCOME), default=None,
                   help="which outcomes: intercode (best reward 1.0), strict (the strict verdict says solved; "
                        "episodes without a verdict are left out) or any. Default: intercode for chat and "
                        "fewshot (fine-tuning learns what it is shown), any for the others")
    p.add_argument("--solved-only", action="store_true", help="the same as --solved intercode")
    p.add_argument("--attempts", choices=["latest", "first", "best", "all"], default="latest",
                   help="which attempts of a task: its latest (the current file, the default), first, best, or all "
                        "(earlier attempts are read from the folder's attempts store)")
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
    p.add_argument("--no-rejected", action="store_true",
                   help="chat: leave rejected proposals out (by default they are kept with weight 0, with the "
                        "reviewer's comment after them; for trainers that ignore per-message weights)")
    p.add_argument("--by-authorship", action="store_true",
                   help="preference: also pair a human's edit or rejection against the agent's proposal where no "
                        "branch (icplay branch) scored them; each such record says it is paired by authorship")
    p.add_argument("--reasoning", action="store_true",
                   help="chat and preference: keep the model's reasoning on its messages (reasoning_content)")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.format == "harbor":
        return run_harbor(args)
    strategy = _checked_episode_export(args)
    skipped: list[Skipped] = []
    trajs = _episodes(args.paths, args.attempts, skipped)
    if not trajs:
        raise UserError(f"no episode to export; {skipped_note(skipped)}")
    solved = _solved_rule(args)
    chosen = select(trajs, author=args.author, min_reward=args.min_reward, solved=solved)
    if not chosen:
        raise UserError(_none_chosen(trajs, solved) + (f"; {skipped_note(skipped)}" if skipped else ""))
    text, count = _rendered(args, chosen, strategy)
    _write(args.out, text if args.format == "csv" else escape_surrogates(text))
    print(f"icplay: {count} {args.format} record(s) from {len(chosen)} of {len(trajs)} episodes"
          + ("" if args.out == "-" else f" written to {args.out}"), file=sys.stderr)
    if skipped:
        print(f"icplay: {skipped_note(skipped)}", file=sys.stderr)
    return 0


def _solved_rule(args) -> str:
    """The ``--solved`` rule in force (the format's default when none is given), said on stderr."""
    if args.solved_only and args.solved not in (None, "intercode"):
        raise UserError(f"--solved-only is --solved intercode; it contradicts --solved {args.solved}")
    given = args.solved or ("intercode" if args.solved_only else None)
    solved = given or DEFAULT_SOLVED.get(args.format, ANY_OUTCOME)
    words = {"intercode": "solved episodes only (best reward 1.0)", "strict": "strictly solved episodes only",
             ANY_OUTCOME: "episodes of every outcome"}[solved]
    how = "as asked" if given else f"the default for {args.format}; --solved any|intercode|strict to change it"
    print(f"icplay: exporting {words} ({how})", file=sys.stderr)
    return solved


def _checked_episode_export(args) -> str:
    """An export of episodes is asked for properly: PATHS, no --tasks, a known --strategy
    (returned by its full name)."""
    if args.tasks:
        raise UserError("--tasks is for `icplay export harbor`; other formats export saved episodes (PATHS)")
    if not args.paths:
        raise UserError(f"icplay export {args.format} needs PATHS: run folders, sessions, trajectory or InterCode files")
    try:
        return strategy_name(args.strategy)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def _episodes(paths: list, attempts: str, skipped: list) -> list:
    """The saved episodes under ``paths``, the attempts ``--attempts`` asks for; a path that
    cannot be read as a whole goes to ``skipped`` and the others are still exported."""
    from icplay.attempts import choose

    trajs = []
    for path in paths:
        try:
            current = load_logs(path, skipped)[0]
            if attempts != "latest":
                current = choose(current, load_earlier_attempts(path, skipped), attempts)
            trajs.extend(current)
        except TrajectoryFileError as exc:
            skipped.append(Skipped.of(path, exc))
    return trajs


def _rendered(args, chosen: list, strategy: str) -> tuple[str, int]:
    """The export's text and how many records it holds."""
    try:
        if args.format == "atif":
            from icplay.formats.atif import atif_lines

            return atif_lines(chosen), len(chosen)
        if args.format == "steps":
            import json

            from icplay.formats.steps import steps_records

            records = steps_records(chosen, strategy, args.protocol, args.actions)
            return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), len(records)
        options = TrainingOptions(rejected=not args.no_rejected, by_authorship=args.by_authorship)
        return render(args.format, chosen, strategy, args.protocol, args.actions, reasoning=args.reasoning,
                      options=options)
    except ExportError as exc:
        raise UserError(str(exc)) from None


def run_harbor(args) -> int:
    """Task sets as Harbor task folders under --out."""
    from pathlib import Path

    from icplay.harbor.export import ExportError, export_tasks

    if args.paths or not args.tasks:
        raise UserError("icplay export harbor takes task sets, not episodes: --tasks SET [--tasks SET ...] --out DIR")
    tasks = _harbor_tasks(args.tasks, args.env)
    _check_harbor_engine(args.sandbox, args.check)
    try:
        result = export_tasks(tasks, Path(args.out), progress=lambda line: print(f"icplay: {line}", file=sys.stderr),
                              sandbox=args.sandbox)
    except (ExportError, SandboxError, OSError) as exc:
        raise UserError(f"harbor export to {args.out}: {exc}") from None
    _say_written(result, args.out)
    if args.check:
        return check_harbor([folder for _task, folder in result.written], args.sandbox)
    return 0 if result.written else 1


def _check_harbor_engine(sandbox: str, check: bool) -> None:
    """--sandbox runs images (the exported Dockerfiles build on icplay's), and with --check its
    program is installed: said once, before any work, in one sentence."""
    from icplay.harbor.oracle import OracleError, engine_cli
    from icplay.sandbox.registry import image_engine

    try:
        if check:
            engine_cli(sandbox)
        else:
            image_engine(sandbox)
    except (OracleError, SandboxError) as exc:
        raise UserError(f"--sandbox {sandbox}: {exc}") from None


def _harbor_tasks(names: list[str], env: str | None) -> list:
    tasks = []
    for name in names:
        try:
            tasks.extend(load_tasks(name, env))
        except TaskFileError as exc:
            raise UserError(str(exc)) from None
    return tasks


def _say_written(result, out: str) -> None:
    for task, reason in result.skipped:
        print(f"icplay: skipped {task.key}: {reason}", file=sys.stderr)
    print(f"icplay: {len(result.written)} Harbor task folder(s) written to {out}"
          + (f", {len(result.skipped)} skipped" if result.skipped else ""), file=sys.stderr)


def check_harbor(folders, sandbox: str = "docker") -> int:
    """Each exported task's oracle run on the image engine ``sandbox``; exit 1 if any does not score 1.0."""
    from icplay.harbor.oracle import OracleError, check

    failed = 0
    for folder in folders:
        try:
            verdict = check(folder, sandbox=sandbox)
            problem = None if verdict.reward == 1.0 else f"reward {verdict.reward}: {str(verdict.details)[:300]}"
        except OracleError as exc:
            problem = str(exc)
        if problem:
            failed += 1
            print(f"icplay: oracle {folder.name}: {problem}", file=sys.stderr)
    print(f"icplay: oracle runs scoring 1.0: {len(folders) - failed}/{len(folders)}", file=sys.stderr)
    return 1 if failed else 0


def _none_chosen(trajs: list, solved: str | None) -> str:
    """Why nothing is exported: no episode passes the filters (and how many were never judged)."""
    unjudged = sum(1 for t in trajs if t.strictly_solved is None)
    why = (f" ({unjudged} of them have no strict verdict: their env gives none, or they were recorded "
           "before strict verdicts existed)" if solved == "strict" and unjudged else "")
    return f"none of the {len(trajs)} episodes passes the filters{why}"


def _write(out: str, text: str) -> None:
    """The export to stdout ("-") or to a file written whole or not at all."""
    from pathlib import Path

    if out == "-":
        sys.stdout.write(text)
        return
    try:
        atomic_write_text(Path(out), text)
    except OSError as exc:
        raise UserError(f"cannot write {out}: {exc.strerror or exc}") from None
