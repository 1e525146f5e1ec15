"""``icplay play``: solve tasks yourself — the Textual app, or ``--plain`` line mode.

The plain mode is for plain terminals and scripts: the driver's line loop
(``icplay.lines``) with the human as the only source of actions. It reads actions
from stdin (SQL statements may span lines and end with ``;``), prints each observation,
and on ``submit`` prints the reward with its breakdown and moves on to the next task.
Every turn is saved as it happens in a session (``icplay.session``): a task left
unfinished is resumed where it stopped (its turns replayed), a submitted one is kept in
``attempts/`` when it is tried again, and without ``--task`` play starts at the first
task the session has not submitted. Ctrl+C interrupts a running command; at the prompt it
quits.
"""

from __future__ import annotations

import sys
from pathlib import Path

from icplay.lines import HUMAN_HELP as REPL_HELP  # noqa: F401  (kept for importers)
from icplay.lines import describe_reward, format_table  # noqa: F401
from icplay.frontend.config import add_annotator_argument
from icplay.languages import add_sandbox_argument, make_env, names
from icplay.tasks.model import Task, TaskFileError
from icplay.tasks.registry import find_set


# What a command needs is imported inside the function that runs it (said here once for the
# module): `icplay --help` imports every command module and must start fast.


def register(sub) -> None:
    p = sub.add_parser("play", help="solve tasks yourself in the playground (or --plain line mode)")
    p.add_argument("env", nargs="?", choices=names(), help=f"{', '.join(names())} (default: pick in the app)")
    p.add_argument("--tasks", help="task set name or task file (default: the bundled set of ENV); harbor:PATH "
                   "for a Harbor task folder or a folder of them")
    p.add_argument("--task", help="open this task id (--plain: this task only, then stop)")
    add_sandbox_argument(p)
    p.add_argument("--image", help="Docker image to run the tasks on (e.g. InterCode's, for nl2bash sets)")
    p.add_argument("--compat", choices=["intercode"], default=None,
                   help="bash, --plain: InterCode's own execution semantics (see docs/rewards.md)")
    p.add_argument("--session", help="a named baseline session: one trajectory per task, resumable")
    p.add_argument("--out", type=Path, help="folder for trajectories (default: ~/.icplay/trajectories)")
    p.add_argument("--plain", action="store_true", help="line-mode REPL instead of the app")
    p.add_argument("--study", metavar="NAME", help="play your queue of a study (icplay study new; needs --annotator)")
    add_annotator_argument(p)
    p.set_defaults(func=run)


def select_tasks(env_name: str, tasks_arg: str | None, start_id: str | None, image: str | None = None) -> list[Task]:
    task_set = find_set(tasks_arg or env_name, env_name)
    if task_set.env != env_name:
        raise TaskFileError(task_set.path, f"this is a {task_set.env} task set, not {env_name}")
    if task_set.needs_image and not image:
        raise TaskFileError(task_set.path, "these tasks assume InterCode's own /testbed: "
                            "name the image to run them on with --image (and --sandbox docker)")
    tasks = task_set.load()
    if start_id is not None:
        ids = [t.id for t in tasks]
        if start_id not in ids:
            raise TaskFileError(task_set.path, f"no task with id {start_id!r}")
        tasks = tasks[ids.index(start_id):]
    return tasks


def env_from_tasks(args, command: str) -> str:
    """``args.env``, else the environment ``--tasks`` names by itself (``harbor:PATH``, a
    Harbor folder), set on ``args``; a UserError when neither says."""
    from icplay.tasks.registry import implied_env

    args.env = args.env or implied_env(args.tasks)
    if args.env is None:
        from icplay.process import UserError

        raise UserError(f"icplay {command}: name the environment ({', '.join(names())}), or tasks that imply it "
                        "(--tasks harbor:PATH)")
    return args.env


def run(args) -> int:
    from icplay.tasks.registry import SCHEMES, implied_env

    if args.study is not None:
        return run_study(args)
    args.env = args.env or implied_env(args.tasks)
    if not args.tasks and args.env in {scheme.env for scheme in SCHEMES.values()}:
        find_set(args.env, args.env)   # no bundled set: one sentence on the --tasks it needs
    if not args.plain:
        from icplay.tui.launch import run_app

        return run_app(args)
    if args.env is None:
        print(f"icplay: --plain needs an environment: icplay play ENV --plain, ENV one of {', '.join(names())}",
              file=sys.stderr)
        return 2
    from icplay.driver import Broker, Driver, HUMAN_MODE, human_play
    from icplay.lines import first_unfinished, run_tasks

    all_tasks = select_tasks(args.env, args.tasks, None, args.image)
    tasks = select_tasks(args.env, args.tasks, args.task, args.image)
    session = open_session(args.session or "plain", args.out, cli_annotator(args))
    if args.task is None:
        tasks = tasks[first_unfinished(session, tasks):]
    else:
        tasks = tasks[:1]               # --task: that task only
    env = make_env(args.env, sandbox=args.sandbox, image=args.image, progress=lambda line: print(line, file=sys.stderr),
                   **({"compat": args.compat} if args.compat else {}))
    try:
        return run_tasks(tasks, env, session, lambda episode: Driver(episode, human_play(Broker(HUMAN_MODE))),
                         first=len(all_tasks) - len(tasks) + 1, total=len(all_tasks))
    finally:
        env.close()


def run_study(args) -> int:
    """``--study NAME --annotator A``: A's queue of the study, in the app or ``--plain``."""
    queue = study_queue(args, "play")
    if not args.plain:
        from icplay.tui.launch import run_study_app

        return run_study_app(args, queue)
    from icplay.commands.study import study_errors
    from icplay.lines.study import StudyPlain

    with study_errors():
        return StudyPlain(queue, study_env_factory(args)).run(args.task)


def study_queue(args, command: str):
    """The queue ``--study NAME --annotator A`` names (``play`` and ``watch``), every option
    checked first: one sentence each, never a traceback."""
    from icplay.commands.study import study_errors
    from icplay.frontend.config import ConfigError, check_annotator
    from icplay.process import UserError
    from icplay.study.model import load_study
    from icplay.study.queue import Queue

    if args.annotator is None:
        raise UserError(f"icplay {command} --study: name yourself with --annotator NAME (one of the study's "
                        "annotators)")
    if args.env or args.tasks or args.session or args.out:
        raise UserError(f"icplay {command} --study: the study names the tasks and keeps the trajectories; "
                        "leave out ENV, --tasks, --session and --out")
    try:
        annotator = check_annotator(args.annotator)
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    with study_errors():
        queue = Queue(load_study(args.study), annotator)
        if args.task is not None:
            queue.entry(args.task)                 # one of her tasks, or one sentence
    return queue


def study_env_factory(args):
    """An env of a language for a study's tasks (they may be of several): ``--sandbox`` where
    that language has it, else its default."""
    def study_env(kind: str):
        from icplay.languages import get

        sandbox = args.sandbox if args.sandbox in get(kind).sandbox_names() else None
        return make_env(kind, sandbox=sandbox, image=args.image, progress=lambda line: print(line, file=sys.stderr))

    return study_env


def open_session(name: str, out: Path | None = None, annotator: str | None = None):
    """The session (``--session``; ``--out`` puts its trajectories in another folder) of ``annotator``."""
    from icplay.session import Session

    return Session(name, root=out, annotator=annotator) if out is not None else Session(name, annotator=annotator)


def cli_annotator(args, say=None) -> str | None:
    """``--annotator`` / $ICPLAY_ANNOTATOR / config.toml of a human front end; when none is set
    it says so in one line (``say``, default stderr)."""
    from icplay.frontend.config import ConfigError, annotator_of_args
    from icplay.process import UserError

    try:
        return annotator_of_args(args, say=say)
    except ConfigError as exc:
        raise UserError(str(exc)) from None
