"""``icplay rescore RESULTS --tasks TASKFILE``: replay InterCode's recorded episodes.

Re-executes every recorded action (SQL: on pristine task databases; Bash: in a new
container of ``--image`` per episode in icplay's shell, or with ``--compat intercode`` in
order in one container pair reset by git, as InterCode ran them; Python and CTF: in
fresh sandboxes), recomputes each turn's
reward, writes one JSON line per turn (``--out``) and prints how many turns and episodes
agree with the recorded numbers. The logic is in ``icplay.rescore.sql``,
``icplay.rescore.bash``, ``icplay.rescore.python`` and ``icplay.rescore.ctf``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from icplay.process import UserError

from icplay.languages import shell_sandboxes
from icplay.tasks.registry import find_set, task_sets
from icplay.formats.intercode import read_results
from icplay.languages import default_sandbox, make_env


# What a command needs is imported inside the function that runs it (said here once for the
# module): `icplay --help` imports every command module and must start fast.


def register(sub) -> None:
    p = sub.add_parser("rescore", help="replay InterCode's recorded SQL, Bash, Python or CTF episodes and recompute their rewards",
                       description=__doc__.split("\n\n")[1] if __doc__ else None)
    p.add_argument("results", help="an InterCode results file (turn_history), a per-episode log file (one "
                   "episode, a list, JSONL, or an object keyed by task index) or a folder of them")
    p.add_argument("--tasks", required=True, help="the task file the episodes index into (a set name or a path)")
    p.add_argument("--databases", help="the databases' MySQL dump (default: the set's, or the .sql beside the task file)")
    p.add_argument("--env", choices=("sql", "bash", "python", "ctf"), default=None,
                   help="the environment (default: the task set's; sql for a task file)")
    shell = " or ".join(shell_sandboxes())
    p.add_argument("--sandbox", choices=("mysql", "sqlite", *shell_sandboxes(), "none"), default=None,
                   help="SQL: database backend (default mysql: InterCode recorded on MySQL); "
                        f"Python: {shell} (default docker when a daemon answers); Bash: docker (default) or podman; "
                        f"CTF: {shell}, or none to score the submits without replaying the other actions")
    p.add_argument("--image", help="SQL: server image for --sandbox mysql (default icplay-sql:latest); "
                                   "Bash: the task image (e.g. intercode-nl2bash-fs1)")
    p.add_argument("--compat", choices=("intercode",), default=None,
                   help="Bash: replay with InterCode's own execution semantics (see docs/rewards.md)")
    p.add_argument("--fresh-containers", action="store_true",
                   help="Bash --compat intercode: a new container pair per episode (--jobs apply) instead of "
                        "InterCode's one pair for every episode in task order")
    p.add_argument("--out", help="write one JSON line per turn here")
    p.add_argument("--jobs", type=int, default=1, help="episodes replayed in parallel, each on its own server")
    p.add_argument("--limit", type=int, help="replay only the first N episodes")
    p.set_defaults(func=run)


def run(args) -> int:
    env_name = args.env or next((s.env for s in task_sets() if s.name == args.tasks), None)
    if env_name == "bash":
        return run_bash(args)
    task_set = find_set(args.tasks, env=env_name) if env_name else find_set(args.tasks)
    replay = {"python": run_python, "ctf": run_ctf, "sql": run_sql}.get(task_set.env)
    if replay is None:
        raise UserError(f"rescore replays SQL, Bash, Python and CTF sets; {task_set.name!r} is a {task_set.env} set")
    return replay(args, task_set)


def _episode_counter():
    """A progress callback that counts replayed episodes on stderr: in place on a terminal
    (twice a second at most), else a line every ten seconds, and always the last."""
    last = [0.0]
    tty = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - last[0] > (0.5 if tty else 10):
            last[0] = now
            end = "\n" if done == total or not tty else ""
            print(f"\r  {done}/{total} episodes", end=end, file=sys.stderr, flush=True)

    return progress


def run_sql(args, task_set) -> int:
    from icplay.envs.sql import SqlEnv
    from icplay.sql import make_sql_backend
    from icplay.rescore.sql import check_databases, guess_databases, read_results, rescore

    args.sandbox = args.sandbox or "mysql"
    if args.sandbox not in ("mysql", "sqlite"):
        raise UserError(f"SQL episodes replay on mysql or sqlite, not {args.sandbox!r}")
    tasks = task_set.load()
    databases = args.databases or (None if task_set.databases else guess_databases(Path(task_set.path)))
    if databases:
        for task in tasks:
            task.extra["databases"] = str(databases)
    check_databases(tasks)
    episodes = _read_episodes(args, read_results)

    def progress_line(message: str) -> None:
        print(f"  {message}", file=sys.stderr)

    def make_env():
        options = {"progress": progress_line}
        if args.image:
            options["image"] = args.image
        return SqlEnv(make_sql_backend(args.sandbox, **options))

    started = time.monotonic()
    print(f"replaying {len(episodes)} episodes on {args.sandbox}", file=sys.stderr)
    results, summary = rescore(episodes, tasks, make_env, jobs=max(1, args.jobs), progress=_episode_counter())
    return report(args, episodes, results, summary, started)


def run_python(args, task_set) -> int:
    """Replay recorded Python episodes in fresh interpreters (``icplay.rescore.python``)."""
    from icplay.rescore.python import rescore

    sandbox = args.sandbox or default_sandbox("python")
    if sandbox not in shell_sandboxes():
        raise UserError(f"Python episodes replay on {' or '.join(shell_sandboxes())}, not {sandbox!r}")
    tasks = task_set.load()
    episodes = _read_episodes(args, read_results)
    started = time.monotonic()
    print(f"replaying {len(episodes)} episodes on {sandbox}", file=sys.stderr)
    results, summary = rescore(episodes, tasks, lambda: make_env("python", sandbox, image=args.image))
    return report(args, episodes, results, summary, started)


def run_ctf(args, task_set) -> int:
    """``icplay rescore RESULTS --tasks intercode-ctf [--sandbox docker|bwrap|none]``
    (``icplay.rescore.ctf``); ``none`` scores the submits without replaying anything."""
    from icplay.rescore.ctf import rescore

    sandbox = args.sandbox
    if sandbox not in (None, *shell_sandboxes(), "none"):
        raise UserError(f"ctf rescores on {', '.join(shell_sandboxes())} or none (score the submits only), "
                        f"not {sandbox!r}")
    tasks = task_set.load()
    episodes = _read_episodes(args, read_results)
    replay_env = None
    if sandbox != "none":
        kind = sandbox or default_sandbox("ctf")
        replay_env = lambda: make_env("ctf", kind)   # noqa: E731
    started = time.monotonic()
    print(f"replaying {len(episodes)} CTF episodes" + ("" if replay_env else " (submits only)"), file=sys.stderr)
    results, summary = rescore(episodes, tasks, replay_env)
    report(args, episodes, results, summary, started)
    _print_differing_turns(results)
    return 0


def _print_differing_turns(results) -> None:
    """The first 20 turns whose replayed reward differs from the recorded one."""
    differing = [r for records in results.values() for r in records if r.agrees is False]
    if differing:
        print("turns whose reward differs: " + ", ".join(f"{r.episode}#{r.turn} ({r.observation})"
                                                        for r in differing[:20]))


def run_bash(args) -> int:
    """Replay recorded Bash episodes on their image (``icplay.rescore.bash``)."""
    from icplay.rescore.bash import rescore

    tasks = find_set(args.tasks, env="bash").load()
    if not (args.image or all(t.image for t in tasks)):
        raise UserError("Bash episodes replay on the image they were recorded on: pass --image "
                        "(e.g. intercode-nl2bash-fs1; icplay images build nl2bash builds them)")
    episodes = _read_episodes(args, read_results)
    options = {"compat": args.compat} if args.compat else {}
    jobs = max(1, args.jobs)
    if args.compat and not args.fresh_containers:
        episodes, jobs = _in_one_container_pair(episodes, jobs, options)
    started = time.monotonic()

    def progress(done: int, total: int) -> None:
        if done == total or done % 10 == 0:
            print(f"  {done}/{total} episodes", file=sys.stderr, flush=True)

    mode = f"--compat {args.compat}" if args.compat else "icplay's shell"
    where = args.image or "the tasks' images"
    print(f"replaying {len(episodes)} Bash episodes on {where} ({mode})", file=sys.stderr)
    results, summary = rescore(episodes, tasks, lambda: make_env("bash", sandbox=args.sandbox or "docker", image=args.image,
                                                                 **options),
                               jobs=jobs, progress=progress)
    return report(args, episodes, results, summary, started)


def _in_one_container_pair(episodes: list, jobs: int, options: dict) -> tuple[list, int]:
    """InterCode's experiments ran a file system's tasks in order in one agent and one eval
    container, reset by git only: what git leaves carries over (docs/rewards.md). The episodes
    in task order, one job, and the env told to reuse its containers."""
    options["reuse_containers"] = True
    if jobs > 1:
        print("--compat intercode replays the episodes in order in one container pair, as InterCode "
              "did: --jobs is ignored (--fresh-containers for a pair per episode)", file=sys.stderr)
    return sorted(episodes, key=lambda e: e.task_index), 1


def _read_episodes(args, read_results) -> list:
    """The recorded episodes of ``args.results`` (the first ``--limit`` of them)."""
    episodes = read_results(args.results)
    if args.limit:
        episodes = episodes[:args.limit]
    return episodes


def report(args, episodes, results, summary, started: float) -> int:
    """What every language's rescore prints: per-turn records to ``--out``, the agreement
    summary, the episodes whose solved status differs, the time taken."""
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
