"""``icplay run ENV --tasks SET --model M --strategy S``: evaluate a policy headless.

Episodes run in parallel (``-j``), each worker on its own sandbox; progress goes to
stderr; every episode is saved to ``--out`` after every turn, and a rerun with the same
``--out`` skips the finished ones. The success table goes to stdout (``--json`` for
scripts).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from icplay.agents.families import add_model_arguments
from icplay.languages import add_sandbox_argument, names
from icplay.process import UserError, skip_teardown
from icplay.store import TrajectoryFileError, TrajectoryStore, safe_name
from icplay.commands.play import env_from_tasks
from icplay.formats.native import runs_root
from icplay.agents.protocols import Budget, Limits
from icplay.languages import default_sandbox, sandboxes
from icplay.languages import get as get_language
from icplay.languages.spec import resolve
from icplay.tasks.registry import find_set
from icplay.formats.export import ExportError
from icplay.agents.families import model_options_of
from icplay.frontend.config import ConfigError, config_path, load_config


# What a command needs is imported inside the function that runs it (said here once for the
# module): `icplay --help` imports every command module and must start fast.


def register(sub) -> None:
    p = sub.add_parser("run", help="evaluate an LLM (or the gold / a replay policy) on a task set, headless",
                       description="Play every task of a set with a policy and print the success table.")
    p.add_argument("env", nargs="?", choices=names(),
                   help="the environment: " + ", ".join(names()) + " (default: what --tasks implies, e.g. harbor:PATH)")
    p.add_argument("--tasks", required=True, help="a task set name (icplay tasks) or a task file")
    p.add_argument("--policy", choices=["llm", "gold", "replay"], default=None,
                   help="who acts: an LLM (default), the gold solution, or a replay of --replay")
    p.add_argument("--model", default=os.environ.get("ICPLAY_MODEL"), help="model name ($ICPLAY_MODEL)")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint ($OPENAI_BASE_URL), e.g. "
                   "http://localhost:11434/v1 for Ollama")
    add_endpoint_arguments(p)
    p.add_argument("--strategy", default="tryagain", help="single, tryagain, react or plan (default tryagain)")
    p.add_argument("--protocol", choices=["intercode", "agent"], default="intercode",
                   help="intercode: scored after every action, reward shown (the paper's); agent: the model "
                        "submits and never sees a reward (default intercode)")
    p.add_argument("--actions", choices=["text", "tools"], default="text",
                   help="how the model acts: text (one fenced block per reply, InterCode's) or tools (native "
                        "tool calls: the environment's actions as typed tools; see docs/agents.md) (default text)")
    p.add_argument("--turns", type=int, default=10, help="turns per episode (default 10)")
    p.add_argument("-j", "--jobs", type=int, default=1, help="episodes in parallel (default 1)")
    p.add_argument("--limit", type=int, default=None, help="only the first K tasks")
    p.add_argument("--task-id", action="append", default=None, help="only this task (repeatable)")
    add_sandbox_argument(p)
    p.add_argument("--image", default=None, help="Docker image for the tasks (e.g. InterCode's)")
    p.add_argument("--compat", choices=["intercode"], default=None,
                   help="bash: InterCode's own execution semantics (per-action bash -c, cd emulation, git "
                        "reset, gold at submit; see docs/rewards.md) instead of icplay's persistent shell")
    p.add_argument("--no-recycle", action="store_true",
                   help="bash on Docker: a new container for every episode, instead of reusing one that "
                        "proves itself pristine again (slower; see docs/agents.md)")
    p.add_argument("--include-remote", action="store_true",
                   help="ctf: also play the tasks that need a remote server (with the network on); they are "
                        "skipped by default")
    p.add_argument("--out", default=None, help="folder for the trajectories (default ~/.icplay/runs/<run>)")
    p.add_argument("--fresh", action="store_true", help="discard the episodes already in --out")
    p.add_argument("--replay", default=None, help="a trajectory file or folder, or an InterCode results file")
    p.add_argument("--demos", default=None, metavar="FILE",
                   help="worked examples for the prompt: a file `icplay export fewshot` wrote")
    add_model_arguments(p)
    p.add_argument("--context", type=int, default=12000, help="prompt size kept under this many tokens "
                   "(estimated; long outputs and old turns are trimmed; default 12000)")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="wall-time seconds for each attempt of a model call, from the request to the reply's last "
                        "byte, whatever the server sends meanwhile (default 300)")
    p.add_argument("--retries", type=int, default=6, help="retries per model call on 429/5xx/timeouts")
    p.add_argument("--episode-tokens", type=int, default=None, help="token limit per episode")
    p.add_argument("--episode-cost", type=float, default=None, help="dollar limit per episode")
    p.add_argument("--episode-time", type=float, default=None, help="wall-time limit per episode (seconds)")
    p.add_argument("--run-tokens", type=int, default=None, help="token limit for the whole run")
    p.add_argument("--run-cost", type=float, default=None, help="dollar limit for the whole run")
    p.add_argument("--price", action="append", default=[], metavar="MODEL=IN,OUT",
                   help="price of a model in dollars per million tokens (adds to ~/.icplay/prices.json)")
    p.add_argument("--ray", nargs="?", const="auto", default=None, metavar="ADDRESS",
                   help="run the episodes on a Ray cluster (ADDRESS: auto, the default, ray://HOST:PORT, or "
                        "'local' for a one-machine Ray); -j actors spread over its nodes (pip install 'icplay[ray]')")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run)


def add_endpoint_arguments(p) -> None:
    """The key and Azure's deployment and version (beside --base-url)."""
    p.add_argument("--api-key", default=None, help="API key ($OPENAI_API_KEY; for Azure also $AZURE_OPENAI_API_KEY)")
    p.add_argument("--azure-deployment", default=None, metavar="NAME",
                   help="an Azure OpenAI deployment: --base-url names the resource (https://R.openai.azure.com); "
                        "or paste the deployment URL whole as --base-url (see docs/agents.md)")
    p.add_argument("--api-version", default=None, metavar="V", help="Azure OpenAI's api-version, e.g. 2024-10-21")


def run(args) -> int:
    from icplay.agents.llm import AgentError
    from icplay.agents.pricing import PriceTableError

    env_from_tasks(args, "run")
    from icplay.agents.llm import preload_client

    if (args.policy or ("replay" if args.replay else "llm")) == "llm":
        preload_client()     # the openai package loads while the tasks load and the sandboxes start
    try:
        setup = build(args)
    except (PriceTableError, ValueError, TrajectoryFileError, AgentError) as exc:
        raise UserError(str(exc)) from None
    if setup["kind"] == "llm":   # its client made before the first episode asks; then what the first score loads
        warm = get_language(args.env).warm
        preload_client(setup["policy"].model, then=resolve(warm) if warm is not None else None)
    out = _run_folder(args, setup)
    runner = _runner(args, setup, out)
    try:
        result = runner.run()
    except AgentError as exc:
        raise UserError(str(exc)) from None
    except RuntimeError as exc:
        if args.ray and "Ray" in str(exc):
            raise UserError(str(exc)) from None
        raise
    code = _report(args, setup, out, runner, result)
    skip_teardown()      # every episode saved and every worker ended: no need to free each object at exit
    return code


def _run_folder(args, setup: dict) -> Path:
    """Where the run saves its episodes (checked against what an earlier run there was)."""
    from icplay.executors.local import RunConfigError, check_run_folder

    out = Path(args.out) if args.out else runs_root() / safe_name(setup["label"])
    identity = {"label": setup["label"], "env": args.env, "tasks": setup["set"], "policy": setup["info"],
                "protocol": args.protocol, "max_turns": setup["turns"], "sandbox": setup["sandbox"]}
    if args.compat:
        identity["compat"] = args.compat
    try:
        check_run_folder(out, identity, fresh=args.fresh)
    except RunConfigError as exc:
        raise UserError(str(exc)) from None
    return out


def _runner(args, setup: dict, out: Path):
    """The local runner (or Ray's) of the run's episodes."""
    from icplay.executors.local import Progress, Runner
    from icplay.executors.specs import EnvSpec, RunSpec, policy_spec_from_args

    tasks, label = setup["tasks"], setup["label"]
    limits = Limits(max_turns=setup["turns"], max_tokens=args.episode_tokens, max_cost=args.episode_cost,
                    max_seconds=args.episode_time)
    spec = RunSpec(EnvSpec(args.env, setup["sandbox"], args.image, recycle=not args.no_recycle, compat=args.compat),
                   policy_spec_from_args(args, setup["kind"], setup["set"]), args.protocol, limits, setup["info"])
    needs_cost = _needs_cost(args, setup)
    budget = Budget(args.run_tokens, args.run_cost, needs_cost) if (args.run_tokens or args.run_cost or needs_cost) \
        else None
    progress = None if args.quiet else Progress(len(tasks), sys.stderr)
    if not args.quiet:
        print(f"icplay: {label}: {len(tasks)} episodes, -j {args.jobs}, saving to {out}", file=sys.stderr)
    options = dict(jobs=args.jobs, budget=budget, progress=progress)
    if args.ray:
        from icplay.executors.ray import RayRunner   # Ray is an optional dependency

        return RayRunner(tasks, spec, TrajectoryStore(out), address=None if args.ray == "local" else args.ray,
                         **options)
    # the policy built while checking the options (a model client made, demos read) is used
    return Runner(tasks, spec.env_factory(), setup["policy"], setup["info"], TrajectoryStore(out),
                  protocol=args.protocol, limits=limits, spec=spec, **options)


def _report(args, setup: dict, out: Path, runner, result) -> int:
    """The run's table (or JSON) on stdout, what went wrong on stderr; the exit code."""
    from icplay.report import render_table

    label = setup["label"]
    summary = result.summary(label, setup["turns"])
    if args.json:
        print(json.dumps({"out": str(out), "resumed": result.resumed, "played": result.played,
                          "stopped": result.stopped, "elapsed": round(result.elapsed, 3), **summary.to_dict(),
                          **({"nodes": runner.nodes} if args.ray else {})},
                         indent=1))
    elif result.trajectories or not result.stopped:
        print(render_table([summary], title=f"{label}  ({out})"))
        if result.resumed:
            print(f"({result.resumed} episode(s) finished in an earlier run were not replayed)")
    if summary.truncated_replies:
        print(f"icplay: {summary.truncated_replies} repl{'y was' if summary.truncated_replies == 1 else 'ies were'} "
              "cut at the token limit (finish_reason length); raise --max-tokens", file=sys.stderr)
    if args.ray and not args.quiet:
        print(f"icplay: episodes per Ray node: {runner.nodes}", file=sys.stderr)
    return _exit_code(len(setup["tasks"]), result)


def _exit_code(planned: int, result) -> int:
    """0 when every episode ran; 130 interrupted, 1 stopped otherwise or failed (said on stderr)."""
    if result.stopped:
        missing = planned - len(result.trajectories)
        print(f"icplay: stopped: {result.stopped}; {missing} episode(s) left — rerun the same command to "
              "finish them", file=sys.stderr)
        return 130 if result.stopped == "interrupted" else 1
    if result.errors:
        print(f"icplay: {len(result.errors)} episode(s) failed (rerun to retry them); first: {result.errors[0]}",
              file=sys.stderr)
        return 1
    return 0


def build(args) -> dict:
    """Tasks, policy and the run's description from the command line."""
    task_set, tasks = _chosen_tasks(args)
    sandbox = _chosen_sandbox(args)
    kind = args.policy or ("replay" if args.replay else "llm")
    if args.turns < 1:
        raise UserError("--turns must be at least 1")
    if args.demos and kind != "llm":
        raise UserError("--demos is for an LLM policy (--model), not --policy " + kind)
    policy, info, label, tasks, turns = _chosen_policy(args, kind, task_set, tasks)
    if args.limit is not None:
        tasks = tasks[:max(0, args.limit)]
    label = f"{args.env}-{task_set.name}-{label}-{args.protocol}-{turns}t"
    info = {k: v for k, v in info.items() if v is not None}
    return {"tasks": tasks, "policy": policy, "info": info, "label": label, "set": task_set.name,
            "sandbox": sandbox, "turns": turns, "kind": kind}


def _chosen_sandbox(args) -> str:
    if args.sandbox and args.sandbox not in sandboxes(args.env):
        raise UserError(f"{args.env} runs on {' or '.join(sandboxes(args.env))}, not {args.sandbox!r}")
    return args.sandbox or default_sandbox(args.env)


def _chosen_tasks(args):
    """The task set and its tasks the command line names (--task-id picks some), the
    unplayable ones left out."""
    task_set = find_set(args.tasks, args.env)
    if task_set.env != args.env:
        raise UserError(f"task set {task_set.name!r} is for {task_set.env}, not {args.env}")
    tasks = task_set.load()
    if args.task_id:
        wanted = set(args.task_id)
        tasks = [t for t in tasks if t.id in wanted]
        if not tasks:
            raise UserError(f"no task with id {', '.join(sorted(wanted))} in {task_set.name}")
    return task_set, skip_unplayable(tasks, getattr(args, "include_remote", False), getattr(args, "quiet", False))


def _chosen_policy(args, kind: str, task_set, tasks: list):
    """(policy, its description, its label, the tasks it plays, the turn limit): a replay
    plays the tasks it has recordings of; the single strategy takes one turn."""
    from icplay.executors.specs import policy_spec_from_args

    turns = args.turns
    if kind == "gold":
        return policy_spec_from_args(args, kind).build(args.env), {"kind": "gold"}, "gold", tasks, turns
    if kind == "replay":
        if not args.replay:
            raise UserError("--policy replay needs --replay FILE_OR_FOLDER")
        policy, tasks = load_replay(args.replay, tasks, f"in {task_set.name}", task_set.name)
        return policy, policy.describe(), f"replay-{Path(args.replay).stem}", tasks, turns
    if not args.model:
        raise UserError("say which model: --model NAME (or $ICPLAY_MODEL), or --policy gold")
    from icplay.agents.endpoints import azure_url

    try:
        args.base_url = azure_url(args.base_url, args.azure_deployment, args.api_version)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    args.model_options = configured_model_options(args)
    policy = build_llm(args)
    info = policy.describe()
    if args.demos:
        info["demos"] = {"file": str(args.demos), "count": len(policy.demos)}
    if policy.strategy == "single":
        turns = 1
    label = f"{args.model}-{policy.strategy}" + ("-tools" if args.actions == "tools" else "")
    return policy, info, label, tasks, turns


def build_llm(args):
    """``icplay run``'s LLM policy from its PolicySpec; a missing key or unreadable demos are one
    sentence each; a cost limit on an unpriced model is said to count the server's cost."""
    from icplay.executors.specs import policy_spec_from_args

    spec = policy_spec_from_args(args, "llm")
    try:
        policy = spec.build(args.env)
    except ExportError as exc:      # the demos
        raise UserError(str(exc)) from None
    model = policy.model
    model.key()      # fails now, in one sentence, when there is no key (the client is made at the first call)
    model.on_note = lambda note: print(f"icplay: {note}", file=sys.stderr)   # what a refusal taught, once
    limited = [option for option, value in (("--run-cost", args.run_cost), ("--episode-cost", args.episode_cost))
               if value is not None]
    if limited and model.prices.lookup(args.model) is None and not args.quiet:
        print(f"icplay: no price known for {args.model!r}: {' and '.join(limited)} count the server's own cost "
              f"(usage.cost, as routers send it); a call without one stops the run (--price {args.model}=IN,OUT "
              "gives a price)", file=sys.stderr)
    return policy


def _needs_cost(args, setup: dict) -> str | None:
    """The model's name when a cost limit is set and icplay has no price for it: its calls must
    then bring their cost from the server, or the run stops (a limit is never silently off)."""
    if (args.run_cost is None and args.episode_cost is None) or setup["kind"] != "llm":
        return None
    return args.model if setup["policy"].model.prices.lookup(args.model) is None else None


def configured_model_options(args) -> dict:
    """The request's parameters: the options over config.toml's ``[agent]`` (one sentence when bad)."""
    try:
        return model_options_of(args, load_config().agent, str(config_path()))
    except (ConfigError, ValueError) as exc:
        raise UserError(str(exc)) from None


def _say_skipped_tasks(left: list, include_remote: bool) -> None:
    shown = "; ".join(f"{t.id}: {t.extra['skip']}" for t in left[:5])
    more = f"; and {len(left) - 5} more" if len(left) > 5 else ""
    hint = " (--include-remote plays those that need a server)" if not include_remote else ""
    print(f"icplay: skipping {len(left)} task(s){hint}: {shown}{more}", file=sys.stderr)


def skip_unplayable(tasks: list, include_remote: bool, quiet: bool) -> list:
    """The tasks without a reason to be skipped (``extra["skip"]``: CTF tasks that need a
    server or whose files are absent), saying on stderr which were left out and why."""
    kept = [t for t in tasks if not t.extra.get("skip") or (include_remote and t.extra.get("remote"))]
    left = [t for t in tasks if t not in kept]
    if left and not quiet:
        _say_skipped_tasks(left, include_remote)
    if not kept:
        raise UserError(f"every selected task is skipped: {left[0].extra['skip']}")
    return kept


def load_replay(path, tasks: list, none_of: str, mismatch: str):
    """The replay policy of a recording and the tasks it covers; one sentence when it covers
    none of ``tasks`` (``none_of`` says where) or does not match them (``mismatch``)."""
    from icplay.frontend.policies import PolicySpec

    try:
        policy = PolicySpec("replay", replay=str(path)).build(tasks[0].env if tasks else "", tasks)
    except (TrajectoryFileError, OSError, ValueError) as exc:
        raise UserError(str(exc)) from None
    covered = [t for t in tasks if policy.covers(t)]
    if not covered:
        raise UserError(f"{path} holds no episode of a task {none_of}")
    bad = [why for t in covered if (why := policy.check(t))]
    if bad:
        raise UserError(f"{path} does not match {mismatch}: {bad[0]}")
    return policy, covered
