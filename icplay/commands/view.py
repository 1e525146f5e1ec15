"""``icplay view``: browse, compare, re-execute and fork saved episodes.

Without options it opens the viewer (the Textual app, docs/view.md) over PATHS — run
folders, session folders, trajectory files, InterCode results or log files — or, by
default, everything under $ICPLAY_HOME (sessions, runs, replaced attempts).
``--reexecute FILE`` runs a saved episode again in a fresh sandbox and prints each turn,
flagging those whose observation, exit code or reward now differs (with a diff); it exits
1 when anything differs. Re-execution and forks run the episode's task as this machine's
task sets (or a ``--tasks`` set or file) have it, found by set and id; a file whose task is
not here, or differs from it, is refused in one line. ``--fork K FILE`` opens the viewer straight on a fork of that
episode keeping its first K turns: you go on (the play screen), or an agent does (the watch
screen) with ``--agent`` or watch's agent options (``--model``, ``--policy gold`` ...).
``--follow FILE|SESSION/SET/ID`` follows one episode as it is played, read-only (a
supervisor's view; ``icplay serve`` offers it to a supervisor's browser).
"""

from __future__ import annotations

import sys
from pathlib import Path
from icplay.frontend.config import AgentChoice, add_annotator_argument
from icplay.process import UserError

from icplay.languages import add_sandbox_argument


# What a command needs is imported inside the function that runs it (said here once for the
# module): `icplay --help` imports every command module and must start fast.


def register(sub) -> None:
    p = sub.add_parser("view", help="browse, compare, re-execute and fork saved episodes")
    p.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                   help="run or session folders, trajectory files, InterCode files (default: all of $ICPLAY_HOME)")
    p.add_argument("--reexecute", metavar="FILE",
                   help="replay this saved episode in a fresh sandbox and flag the turns that now differ")
    p.add_argument("--follow", metavar="FILE|SESSION/SET/ID",
                   help="follow one episode as it is played (any annotator's or agent's), read-only")
    add_sandbox_argument(p, " (re-execution and forks)")
    p.add_argument("--image", help="Docker image for Bash episodes (re-execution and forks)")
    p.add_argument("--session", default="forks", help="session forks are saved in (default: forks)")
    p.add_argument("--tasks", action="append", metavar="NAME|PATH",
                   help="a task set or task file of yours where re-execution and forks look the episode's task "
                        "up, beside the sets `icplay tasks` lists (a saved file's own copy of its task never runs)")
    fork = p.add_argument_group("forking from the command line (one PATH: a trajectory file, or FILE#N in an "
                                "InterCode file)")
    add_annotator_argument(fork)
    fork.add_argument("--fork", type=int, metavar="K",
                      help="open a fork of the episode keeping its first K turns (replayed into a fresh sandbox)")
    fork.add_argument("--agent", action="store_true",
                      help="an agent goes on (default: you do): the episode's own model, else the last one used")
    fork.add_argument("--policy", metavar="llm|gold|replay:FILE", help="the agent that goes on (implies --agent)")
    fork.add_argument("--model", help="the model that goes on (implies --agent)")
    fork.add_argument("--base-url", help="OpenAI-compatible endpoint of --model ($OPENAI_BASE_URL)")
    fork.add_argument("--strategy", help="single, tryagain, react or plan")
    fork.add_argument("--protocol", choices=["agent", "intercode"], help="how the model is prompted")
    fork.add_argument("--mode", choices=["auto", "confirm", "human"], help="auto, confirm (default) or human")
    p.set_defaults(func=run)


def fork_request(args):
    """(source trajectory, K, agent goes on, AgentChoice or None) from --fork's options, checked
    before the screen is taken over (a bad request is one line)."""
    agent_options = [args.policy, args.model, args.base_url, args.strategy, args.protocol, args.mode]
    if args.fork is None:
        if args.agent or any(v is not None for v in agent_options):
            raise UserError("--agent, --policy, --model, --base-url, --strategy, --protocol and --mode go with "
                            "--fork K")
        return None
    if len(args.paths) != 1:
        raise UserError("--fork K takes one episode: a trajectory file (or FILE#N for an episode of an "
                        "InterCode file)")
    source = _forkable_episode(args.paths[0], args.fork, args.tasks)
    choice = _fork_agent(args, agent_options)
    return source, args.fork, args.agent or choice is not None, choice


def _forkable_episode(path: Path, keep: int, also: list[str] | None = None):
    """The saved episode at ``path``, checked to be one a fork can keep ``keep`` turns of, of
    a task this machine has (``machine_task``: refused in one line before the screen is taken)."""
    from icplay.formats.summary import load_episode
    from icplay.review.fork import fork_languages, forkable
    from icplay.tasks.trusted import machine_task

    try:
        source = load_episode(str(path))
    except (OSError, ValueError, KeyError, IndexError) as exc:
        raise UserError(f"{path}: cannot read the episode ({exc})") from None
    task = machine_task(source.task, str(path), also or ())
    if not forkable(task.env):
        raise UserError(f"{path}: forks run {fork_languages()} episodes, not {task.env}")
    if not 0 <= keep <= len(source.turns):
        raise UserError(f"cannot fork at turn {keep}: the episode has {len(source.turns)} turns "
                        f"(0 to {len(source.turns)} can be kept)")
    return source


def _fork_agent(args, agent_options: list):
    """The agent --policy or --model names to go on from the fork (None: the episode's own,
    or a human); the agent's other options without either are refused."""
    if args.policy is not None or args.model is not None:
        policy = args.policy or "llm"
        if policy == "llm" and not args.model:
            raise UserError("say which model goes on: --model NAME (or --policy gold)")
        return AgentChoice(policy=policy, model=args.model, base_url=args.base_url, strategy=args.strategy,
                           protocol=args.protocol or "agent", mode=args.mode or "confirm")
    if any(v is not None for v in agent_options):
        raise UserError("--base-url, --strategy, --protocol and --mode describe the agent: name it with --model "
                        "or --policy")
    return None


def run(args) -> int:
    if args.reexecute:
        return reexecute_file(args.reexecute, args.sandbox, args.image, args.tasks)
    if args.follow:
        return follow(args.follow)
    from icplay.formats.summary import scan
    from icplay.session import check_session_name

    check_session_name(args.session)
    fork = fork_request(args)
    if fork is not None:              # the browser behind the fork: the file it came from and the forks
        from icplay.session import Session

        forks = Session(args.session).root
        forks.mkdir(parents=True, exist_ok=True)
        args.paths = [Path(str(args.paths[0]).partition("#")[0]), forks]
    scan(args.paths or None)          # a missing path is one line before the screen is taken over
    from icplay.tui.launch import check_terminal, run_until_quit
    from icplay.tui.screens.view import ViewApp

    from icplay.commands.play import cli_annotator
    from icplay.frontend.config import resolve_annotator

    annotator = cli_annotator(args) if fork is not None else _quiet_annotator(args, resolve_annotator)
    check_terminal()
    app = ViewApp(paths=args.paths or None, sandbox=args.sandbox, image=args.image, fork_session=args.session,
                  fork=fork, annotator=annotator, annotator_note=fork is not None)
    return run_until_quit(app)


def follow_target(target: str) -> Path:
    """The trajectory file ``--follow`` names: a file, or SESSION/SET/ID of a session in $ICPLAY_HOME."""
    from icplay.paths import home_dir

    path = Path(target)
    if path.is_file():
        return path
    in_session = home_dir() / "trajectories" / f"{target}.json"
    if target.count("/") == 2 and ".." not in target.split("/") and in_session.is_file():
        return in_session
    raise UserError(f"--follow {target}: no such trajectory file, nor a SESSION/SET/ID in {home_dir() / 'trajectories'}")


def follow(target: str) -> int:
    from icplay.store import load_trajectory
    from icplay.tui.launch import run_until_quit
    from icplay.tui.screens.view_follow import FollowApp

    path = follow_target(target)
    load_trajectory(path)               # a file that cannot be read is one line, before the screen is taken
    return run_until_quit(FollowApp(path))


def _quiet_annotator(args, resolve) -> str | None:
    """The annotator a fork made from the browser records (said only when --fork starts one)."""
    from icplay.frontend.config import ConfigError, load_config

    try:
        return resolve(args.annotator, load_config())
    except ConfigError as exc:
        raise UserError(str(exc)) from None


def reexecute_file(ref: str, sandbox: str | None = None, image: str | None = None,
                   also: list[str] | None = None) -> int:
    """Re-execute a saved episode on the task this machine has under its set and id (never
    the file's own copy of the task: ``machine_task``)."""
    from icplay.languages import make_env, names
    from icplay.formats.summary import load_episode
    from icplay.review import reexecute
    from icplay.tasks.trusted import machine_task

    traj = load_episode(ref)
    task = machine_task(traj.task, ref.partition("#")[0], also or ())
    if task.env not in names():
        raise UserError(f"{ref}: no environment {task.env!r} here to re-execute it on ({', '.join(names())})")
    print(f"re-executing {task.key} ({len(traj.turns)} turns, episode {traj.id})", flush=True)
    env = make_env(task.env, sandbox=sandbox, image=image or task.image,
                   progress=lambda line: print(line, file=sys.stderr))
    try:
        result = reexecute(traj, env, task=task)
    finally:
        env.close()
    print(f"on a fresh {result.sandbox} sandbox:")
    print(result.render())
    return 0 if result.reproduced else 1
