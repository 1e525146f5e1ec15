"""``icplay rescore RESULTS --tasks TASKFILE``: replay InterCode's recorded episodes.

Re-executes every recorded action (SQL: on pristine task databases; Bash: in a new
container of ``--image`` per episode in icplay's shell, or with ``--compat intercode`` in
order in one container pair reset by git, as InterCode ran them; Python and CTF: in
fresh sandboxes), recomputes each turn's
reward, writes one JSON line per turn (``--out``) and prints how many turns and episodes
agree with the recorded numbers. The languages are those whose spec names a rescore entry
(``LanguageSpec.rescore``: ``icplay.rescore.sql``, ``.bash``, ``.python``, ``.ctf``); every
replay runs through the driver with the language's turn rule (``icplay.driver.replay``).
"""

from __future__ import annotations

import json
import sys
import time
from icplay.process import UserError

from icplay.languages import names as language_names, sandbox_choices, shell_sandboxes
from icplay.tasks.registry import find_set, task_sets
from icplay.formats.intercode import read_results


# What a command needs is imported inside the function that runs it (said here once for the
# module): `icplay --help` imports every command module and must start fast.


def register(sub) -> None:
    p = sub.add_parser("rescore", help="replay InterCode's recorded SQL, Bash, Python or CTF episodes and recompute their rewards",
                       description=__doc__.split("\n\n")[1] if __doc__ else None)
    p.add_argument("results", help="an InterCode results file (turn_history), a per-episode log file (one "
                   "episode, a list, JSONL, or an object keyed by task index) or a folder of them")
    p.add_argument("--tasks", required=True, help="the task file the episodes index into (a set name or a path)")
    p.add_argument("--databases", help="the databases' MySQL dump (default: the set's, or the .sql beside the task file)")
    p.add_argument("--env", choices=language_names(), default=None,
                   help="the language, one with a rescore entry (default: the task set's; sql for a task file)")
    shell = " or ".join(shell_sandboxes())
    p.add_argument("--sandbox", choices=(*sandbox_choices(), "none"), default=None,
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
    """The task set's language's rescore entry (``LanguageSpec.rescore``), replayed and reported."""
    from icplay.languages import all_specs, find, resolve
    from icplay.rescore import replay_all
    from icplay.rescore.engine import RescoreError

    env_name = args.env or next((s.env for s in task_sets() if s.name == args.tasks), None)
    task_set = find_set(args.tasks, env=env_name) if env_name else find_set(args.tasks)
    spec = find(task_set.env)
    if spec is None or spec.rescore is None:
        titles = [s.title for s in all_specs() if s.rescore is not None]
        raise UserError(f"rescore replays {', '.join(titles[:-1])} and {titles[-1]} sets; {task_set.name!r} is a "
                        f"{task_set.env} set")
    try:
        plan = resolve(spec.rescore)(args, task_set, lambda: _read_episodes(args, read_results))
    except RescoreError as exc:
        raise UserError(str(exc)) from None
    started = time.monotonic()
    print(plan.banner, file=sys.stderr)
    results, summary = replay_all(plan.episodes, plan.tasks, plan.make_env, plan.replay_one, jobs=plan.jobs,
                                  progress=plan.progress)
    report(args, plan.episodes, results, summary, started)
    if plan.after is not None:
        plan.after(results)
    return 0


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
