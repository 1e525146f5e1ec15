"""``icplay rescore RESULTS --tasks TASKFILE``: replay InterCode's recorded SQL or Python episodes.

Re-executes every recorded action on pristine task databases, recomputes each turn's
reward, writes one JSON line per turn (``--out``) and prints how many turns and episodes
agree with the recorded numbers. The logic is in ``icplay.sql.rescore`` and, for Python
(MBPP) sets, ``icplay.python.rescore``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("rescore", help="replay InterCode's recorded SQL or Python episodes and recompute their rewards",
                       description=__doc__.split("\n\n")[1] if __doc__ else None)
    p.add_argument("results", help="an InterCode results file (turn_history), a per-episode log file (one "
                   "episode, a list, JSONL, or an object keyed by task index) or a folder of them")
    p.add_argument("--tasks", required=True, help="the task file the episodes index into (a set name or a path)")
    p.add_argument("--databases", help="the databases' MySQL dump (default: the set's, or the .sql beside the task file)")
    p.add_argument("--sandbox", choices=("mysql", "sqlite", "docker", "bwrap", "none"), default=None,
                   help="SQL: database backend (default mysql: InterCode recorded on MySQL); "
                        "Python: docker or bwrap (default docker when a daemon answers); CTF: docker or "
                        "bwrap, or none to score the submits without replaying the other actions")
    p.add_argument("--image", help="server image for --sandbox mysql (default icplay-sql:latest)")
    p.add_argument("--out", help="write one JSON line per turn here")
    p.add_argument("--jobs", type=int, default=1, help="episodes replayed in parallel, each on its own server")
    p.add_argument("--limit", type=int, help="replay only the first N episodes")
    p.set_defaults(func=run)


def run(args) -> int:
    from icplay.envs.sql import SqlEnv
    from icplay.sql import make_sql_backend
    from icplay.sql.rescore import check_databases, guess_databases, read_results, rescore
    from icplay.tasks.registry import find_set

    task_set = find_set(args.tasks)
    if task_set.env == "python":
        return run_python(args, task_set)
    if task_set.env == "ctf":
        from icplay.cli import UserError
        from icplay.ctf.rescore import run_command

        try:
            return run_command(args, task_set)
        except ValueError as exc:
            raise UserError(str(exc)) from None
    if task_set.env != "sql":
        from icplay.cli import UserError

        raise UserError(f"rescore replays SQL, Python and CTF sets; {task_set.name!r} is a {task_set.env} set")
    args.sandbox = args.sandbox or "mysql"
    if args.sandbox not in ("mysql", "sqlite"):
        from icplay.cli import UserError

        raise UserError(f"SQL episodes replay on mysql or sqlite, not {args.sandbox!r}")
    tasks = task_set.load()
    databases = args.databases or (None if task_set.databases else guess_databases(Path(task_set.path)))
    if databases:
        for task in tasks:
            task.extra["databases"] = str(databases)
    check_databases(tasks)
    episodes = read_results(args.results)
    if args.limit:
        episodes = episodes[:args.limit]

    def progress_line(message: str) -> None:
        print(f"  {message}", file=sys.stderr)

    def make_env():
        options = {"progress": progress_line}
        if args.image:
            options["image"] = args.image
        return SqlEnv(make_sql_backend(args.sandbox, **options))

    started = time.monotonic()
    last = [0.0]

    tty = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - last[0] > (0.5 if tty else 10):
            last[0] = now
            end = "\n" if done == total or not tty else ""
            print(f"\r  {done}/{total} episodes", end=end, file=sys.stderr, flush=True)

    print(f"replaying {len(episodes)} episodes on {args.sandbox}", file=sys.stderr)
    results, summary = rescore(episodes, tasks, make_env, jobs=max(1, args.jobs), progress=progress)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            for episode in episodes:
                for record in results.get(episode.key, []):
                    out.write(json.dumps(record.to_dict(), default=str) + "\n")
    for line in summary.lines():
        print(line)
    if summary.disagreeing_episodes:
        shown = ", ".join(summary.disagreeing_episodes[:20])
        more = len(summary.disagreeing_episodes) - 20
        print(f"episodes whose solved status differs: {shown}" + (f" (+{more} more)" if more > 0 else ""))
    print(f"({time.monotonic() - started:.1f} s)", file=sys.stderr)
    return 0


def run_python(args, task_set) -> int:
    """Replay recorded Python episodes in fresh interpreters (``icplay.python.rescore``)."""
    from icplay.cli import UserError
    from icplay.formats.intercode import read_results
    from icplay.languages import default_sandbox, make_env
    from icplay.python.rescore import rescore

    sandbox = args.sandbox or default_sandbox("python")
    if sandbox not in ("docker", "bwrap"):
        raise UserError(f"Python episodes replay on docker or bwrap, not {sandbox!r}")
    tasks = task_set.load()
    episodes = read_results(args.results)
    if args.limit:
        episodes = episodes[:args.limit]
    started = time.monotonic()
    print(f"replaying {len(episodes)} episodes on {sandbox}", file=sys.stderr)
    results, summary = rescore(episodes, tasks, lambda: make_env("python", sandbox, image=args.image))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            for episode in episodes:
                for record in results.get(episode.key, []):
                    out.write(json.dumps(record.to_dict(), default=str) + "\n")
    for line in summary.lines():
        print(line)
    if summary.disagreeing_episodes:
        print(f"episodes whose solved status differs: {', '.join(summary.disagreeing_episodes[:20])}")
    print(f"({time.monotonic() - started:.1f} s)", file=sys.stderr)
    return 0
