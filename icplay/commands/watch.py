"""``icplay watch ENV``: an agent works tasks live; you approve, edit, reject, take over, hand back.

The agent is an LLM (``--model``/``--base-url``/``--strategy``), a replay of recorded
episodes (``--policy replay:FILE``: an icplay trajectory file or folder, or InterCode's
results file) or the gold solution (``--policy gold``) — the last two need no API key.
``--mode`` is where it starts: ``confirm`` (each proposal waits for you), ``auto``
(proposals run as they come), ``human`` (you act first). Every turn is saved in the
session (``--session``, default ``watch``) with its author; a stopped episode resumes
where it stopped, in any mode.

Without ``--plain`` the watch screen of the playground opens; ``--plain`` is the line
mode (``icplay.lines``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icplay.agents.families import add_model_arguments
from icplay.frontend.config import add_annotator_argument
from icplay.languages import add_sandbox_argument, names
from icplay.process import UserError
from icplay.commands.run import configured_model_options, load_replay
from icplay.agents.strategies import strategy_name
from icplay.frontend.config import ConfigError, load_config
from icplay.commands.play import cli_annotator, env_from_tasks, open_session, select_tasks
from icplay.driver import Broker, Driver, DriverSettings, Limits
from icplay.lines import first_unfinished, run_tasks
from icplay.languages import make_env

if TYPE_CHECKING:   # the types only: the modules themselves load when the command runs
    from icplay.episode import Policy
    from icplay.tasks.model import Task


# What a command needs is imported inside the function that runs it (said here once for the
# module): `icplay --help` imports every command module and must start fast.


def register(sub) -> None:
    p = sub.add_parser("watch", help="watch an agent work tasks live, and step in (or --plain line mode)",
                       description="An agent works a task step by step; approve, edit, reject with a comment, "
                                   "take over and hand back. Every turn is recorded with its author.")
    p.add_argument("env", nargs="?", choices=names(),
                   help=", ".join(names()) + " (default: what --tasks implies, e.g. harbor:PATH)")
    p.add_argument("--tasks", help="task set name or task file (default: the bundled set of ENV)")
    p.add_argument("--task", help="this task id only, then stop (default: every task, from the first the session "
                   "has not submitted)")
    p.add_argument("--policy", default=None, metavar="llm|gold|replay:FILE",
                   help="who proposes: an LLM (default when --model is set), the gold solution, or a replay "
                        "of recorded episodes (an icplay trajectory file/folder or an InterCode results file)")
    p.add_argument("--model", default=os.environ.get("ICPLAY_MODEL"), help="model name ($ICPLAY_MODEL)")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint ($OPENAI_BASE_URL)")
    p.add_argument("--api-key", default=None, help="API key ($OPENAI_API_KEY)")
    p.add_argument("--strategy", default="tryagain", help="single, tryagain, react or plan (default tryagain)")
    p.add_argument("--protocol", choices=["agent", "intercode"], default="agent",
                   help="agent: the model submits and sees no reward (default); intercode: scored after "
                        "every action, the reward shown")
    p.add_argument("--actions", choices=["text", "tools"], default=None,
                   help="how the model acts: text (one fenced block per reply, InterCode's) or tools (native "
                        "tool calls: the environment's actions as typed tools; see docs/agents.md) (default: "
                        "config.toml [agent] actions, else text)")
    p.add_argument("--mode", choices=["auto", "confirm", "human"], default="confirm",
                   help="confirm: each proposal waits for you (default); auto: proposals run; human: you act")
    p.add_argument("--limit", type=int, default=None, help="only the first K tasks (from where it starts)")
    p.add_argument("--turns", type=int, default=20, help="turns per episode, yours included (default 20)")
    add_sandbox_argument(p)
    p.add_argument("--image", help="Docker image for Bash tasks (e.g. InterCode's, for nl2bash sets)")
    p.add_argument("--session", default=None, help="session name (default: watch)")
    p.add_argument("--out", type=Path, help="folder for the session's trajectories")
    add_model_arguments(p)
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per model call (default 60)")
    p.add_argument("--retries", type=int, default=6, help="retries per model call on 429/5xx/timeouts")
    p.add_argument("--plain", action="store_true", help="line mode on stdin instead of the watch screen")
    p.add_argument("--study", metavar="NAME", help="supervise the study's agent on your queue of a study "
                   "(icplay study new; needs --annotator)")
    add_annotator_argument(p)
    p.set_defaults(func=run)


def build_policy(args: argparse.Namespace, tasks: list[Task]) -> tuple[Policy, dict[str, Any], list[Task]]:
    """The policy (from its PolicySpec), its description for the trajectory, and the tasks it can play."""
    from icplay.frontend.policies import PolicySpec

    spec = args.policy or ("llm" if args.model else None)
    if spec is None:
        raise UserError("say who proposes: --model NAME (or $ICPLAY_MODEL) for an LLM, or --policy gold, "
                        "or --policy replay:FILE")
    if spec == "gold":
        return PolicySpec("gold").build(args.env), {"kind": "gold"}, tasks
    if spec.startswith("replay:") or spec == "replay":
        return _replay_policy(spec, tasks)
    if spec != "llm":
        raise UserError(f"unknown --policy {spec!r} (llm, gold or replay:FILE)")
    return (*_llm_policy(args), tasks)


def _replay_policy(spec: str, tasks: list[Task]) -> tuple[Policy, dict[str, Any], list[Task]]:
    """--policy replay:FILE: the saved actions of FILE, and the tasks it has an episode of."""
    path = spec.partition(":")[2]
    if not path:
        raise UserError("--policy replay:FILE needs the file (a trajectory file or folder, or an InterCode "
                        "results file)")

    policy, covered = load_replay(path, tasks, "in this set (pick the set with --tasks)", "these tasks")
    return policy, policy.describe(), covered


def _llm_policy(args: argparse.Namespace) -> tuple[Policy, dict[str, Any]]:
    """The model of --model with the command line's options, its key checked now (a missing key
    is one sentence before any task starts; the client is made at the first call, the openai
    package loading meanwhile), and its description."""
    from icplay.agents.llm import AgentError, preload_client
    from icplay.frontend.policies import PolicySpec

    if not args.model:
        raise UserError("say which model: --model NAME (or $ICPLAY_MODEL), or --policy gold")
    try:
        policy = PolicySpec("llm", model=args.model, base_url=args.base_url, api_key=args.api_key,
                            options=configured_model_options(args), timeout=args.timeout, retries=args.retries,
                            strategy=strategy_name(args.strategy), protocol=args.protocol,
                            actions=actions_of(args)).build(args.env)
        policy.model.key()      # no key: one sentence now, at no import's cost
        preload_client()
    except (AgentError, ValueError) as exc:
        raise UserError(str(exc)) from None
    return policy, {k: v for k, v in policy.describe().items() if v is not None}


def actions_of(args) -> str:
    """--actions, else config.toml's ``[agent] actions``, else text."""
    if args.actions:
        return args.actions

    try:
        return load_config().agent.get("actions") or "text"
    except ConfigError as exc:
        raise UserError(str(exc)) from None


def run(args) -> int:
    if args.study is not None:
        from icplay.commands.watch_study import run_watch_study

        return run_watch_study(args)
    env_from_tasks(args, "watch")
    if args.turns < 1:
        raise UserError("--turns must be at least 1")
    # the policy sees the whole set: a recording names InterCode tasks by their index in it
    everything = select_tasks(args.env, args.tasks, None, args.image)
    policy, info, covered = build_policy(args, everything)
    tasks = covered
    if args.task is not None:
        start = select_tasks(args.env, args.tasks, args.task, args.image)[0]
        keys = [t.key for t in covered]
        if start.key not in keys:
            raise UserError(f"{args.policy} holds no episode of task {args.task}")
        tasks = covered[keys.index(start.key):][:1]      # that task only
    playable = len(covered)
    if not args.plain:
        from icplay.tui.launch import run_watch

        return run_watch(args, policy, info, tasks)

    session = open_session(args.session or "watch", args.out, cli_annotator(args))
    if args.task is None:
        tasks = tasks[first_unfinished(session, tasks):]
    first = [t.key for t in covered].index(tasks[0].key) + 1 if tasks else playable + 1   # its number in the set
    if args.limit is not None:
        tasks = tasks[:max(0, args.limit)]
    env = make_env(args.env, sandbox=args.sandbox, image=args.image,
                   progress=lambda line: print(line, file=sys.stderr))
    broker = Broker(args.mode)   # one broker for the session: the mode carries over from task to task

    def make_driver(episode):
        episode.trajectory.adopt_policy(info)
        return Driver(episode, DriverSettings(policy, args.protocol, Limits(max_turns=args.turns), broker=broker,
                                              on_failure="ask", track_time=True))

    try:
        return run_tasks(tasks, env, session, make_driver, policy_info=info, first=first, total=playable)
    finally:
        env.close()
