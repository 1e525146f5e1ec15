"""``icplay study new|status|merge|report``: run a human baseline study (docs/studies.md).

``new`` writes the study file (tasks, annotators, who plays what in which order, the rules);
annotators then play their queue with ``icplay play --study NAME --annotator A``; ``status``
shows how far each is; ``merge`` brings in trajectories made on other machines; ``report``
is the study's figures and page (icplay/commands/study_report.py). Each step is
one entry of ``STUDY_COMMANDS`` (name -> the function that adds its parser), so a new step
(``report``) is one more entry.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from icplay.commands import study_report
from icplay.languages import names
from icplay.process import UserError

if TYPE_CHECKING:   # the type only: the module itself loads when the command runs
    from icplay.tasks.registry import TaskSet

# What a command needs is imported inside the function that runs it (said here once for the
# module): `icplay --help` imports every command module and must start fast.


@contextlib.contextmanager
def study_errors() -> Iterator[None]:
    """A bad study file or option is one line (the CLI's user error), never a traceback."""
    from icplay.study.model import StudyFileError

    try:
        yield
    except StudyFileError as exc:
        raise UserError(str(exc)) from None


def _add_new(sub) -> None:
    p = sub.add_parser("new", help="write a study file: tasks, annotators, K annotators per task, the rules")
    p.add_argument("name", help="the study's name (its folder: ~/.icplay/studies/NAME)")
    p.add_argument("--tasks", nargs="+", required=True, metavar="SET",
                   help="task sets (every task of each), single tasks SET/ID, or your own task files (JSON or "
                        "JSONL; their environment from --env or from the records' env field)")
    p.add_argument("--env", choices=names(), default=None,
                   help="the environment of the task files in --tasks (default: the env their records name)")
    p.add_argument("--sample", type=int, default=None, metavar="N", help="take N of those tasks at random (seeded)")
    p.add_argument("--annotators", required=True, help="the annotators, comma-separated: a,b,c")
    p.add_argument("--per-task", type=int, required=True, metavar="K", help="annotators per task")
    p.add_argument("--seed", type=int, default=0, help="seed of the assignment and the orders (default 0)")
    p.add_argument("--gold-reveal", action="store_true", help="let annotators see the gold after a submit")
    p.add_argument("--retries", choices=["off", "counted"], default="off",
                   help="off: a submitted task is final; counted: retries allowed, every attempt kept and counted")
    p.add_argument("--time-limit", type=int, default=None, metavar="SECONDS", help="worked time per task")
    p.add_argument("--strict", action="store_true", help="strict mode: the schema is hidden (SQL)")
    p.add_argument("--no-query-history", action="store_true",
                   help="SQL: the editor does not recall the queries run before (Ctrl+Up, Ctrl+R)")
    p.add_argument("--hide-turn-scores", action="store_true",
                   help="watch studies: hide the reward an agent's turn gets before the submit (--agent-protocol "
                        "intercode scores every turn); a human's play has none")
    p.add_argument("--show-model", action="store_true", help="watch studies: show which model plays")
    p.add_argument("--agent-policy", metavar="llm|gold|replay:FILE",
                   help="watch studies: the agent every annotator supervises (default llm with --agent-model)")
    p.add_argument("--agent-model", metavar="MODEL", help="watch studies: the agent's model")
    p.add_argument("--agent-base-url", metavar="URL", help="watch studies: the model's OpenAI-compatible endpoint")
    p.add_argument("--agent-protocol", choices=["agent", "intercode"],
                   help="watch studies: agent (the model submits) or intercode (every turn scored)")
    p.add_argument("--force", action="store_true", help="replace an existing study file of that name")
    p.set_defaults(func=run_new)


def _add_status(sub) -> None:
    p = sub.add_parser("status", help="per annotator: done, left, attempts, time worked")
    p.add_argument("name", help="the study's name (or its study.toml)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.set_defaults(func=run_status)


def _add_merge(sub) -> None:
    p = sub.add_parser("merge", help="bring in trajectories made on other machines")
    p.add_argument("name", help="the study's name (or its study.toml)")
    p.add_argument("folders", nargs="+", type=Path, help="folders (or files) of trajectories")
    p.set_defaults(func=run_merge)


# the study's steps: name -> the function that adds its parser (icplay study STEP ...)
STUDY_COMMANDS: dict[str, Callable] = {"new": _add_new, "status": _add_status, "merge": _add_merge,
                                       "report": study_report.add_parser}


def register(sub) -> None:
    p = sub.add_parser("study", help="human baseline studies: new, status, merge, report",
                       description="Run a human baseline study: docs/studies.md walks through it.")
    steps = p.add_subparsers(dest="study_command", metavar="STEP", required=True)
    for add in STUDY_COMMANDS.values():
        add(steps)


def study_tasks(items: list[str], env: str | None = None,
                task_files: dict[str, dict[str, str]] | None = None) -> list[str]:
    """The task refs ``--tasks`` names: every task of a set or of a task file, or one ``SET/ID``,
    in order, once each. A task file's set (its name, path and environment: ``env``, else the
    one its records name) is added to ``task_files``, for the study to find its tasks again."""
    from icplay.study.model import StudyFileError
    from icplay.study.queue import resolve
    from icplay.tasks.model import TaskFileError
    from icplay.tasks.registry import find_set

    refs: list[str] = []
    for item in items:
        path = Path(item)
        if "/" in item and not path.exists():
            found = [resolve(item, "--tasks", task_files).key]
        else:
            try:
                task_set = _task_file_set(item, env, task_files) if path.is_file() else find_set(item, env)
                found = [t.key for t in task_set.load()]
            except TaskFileError as exc:
                raise StudyFileError(f"--tasks: {exc}") from None
        refs += [r for r in found if r not in refs]
    return refs


def _task_file_set(item: str, env: str | None, task_files: dict[str, dict[str, str]] | None) -> TaskSet:
    """The set the task file ``item`` holds, noted in ``task_files``; a TaskFileError when its
    name is a known set's (the study's refs would name two sets)."""
    from icplay.tasks.model import TaskFileError
    from icplay.tasks.registry import find_set, task_sets

    path = Path(item)
    task_set = find_set(item, env or env_of_file(path))
    if any(s.name == task_set.name for s in task_sets()):
        raise TaskFileError(path, f"its name {task_set.name!r} is a known set's: rename the file, "
                            "so that the study's refs name one set")
    if task_files is not None:
        task_files[task_set.name] = {"path": str(path.resolve()), "env": task_set.env}
    return task_set


def env_of_file(path: Path) -> str:
    """The environment every record of a task file names (its ``env`` field); else one sentence
    saying to give it with --env."""
    from icplay.tasks.loaders import read_records
    from icplay.tasks.model import TaskFileError

    records = read_records(path)
    envs = {r.get("env") for r in records if isinstance(r, dict)} if isinstance(records, list) else set()
    if len(envs) == 1 and None not in envs and isinstance(next(iter(envs)), str):
        return str(next(iter(envs)))
    said = "its records name no environment" if envs <= {None} else "its records name several environments"
    raise TaskFileError(path, f"{said}: give it with --env ({', '.join(names())})")


def run_new(args) -> int:
    import datetime
    import random

    from icplay.study.assign import assign
    from icplay.study.model import STUDY_FILE, Study, StudyRules, check_name, save_study, study_dir

    with study_errors():
        name = check_name(args.name)
        path = study_dir(name) / STUDY_FILE
        if path.exists() and not args.force:
            raise UserError(f"{path} exists: choose another name, or --force to replace it")
        annotators = [a.strip() for a in args.annotators.split(",") if a.strip()]
        for who in annotators:
            check_name(who, "annotator name", "--annotators")
        task_files: dict[str, dict[str, str]] = {}
        refs = study_tasks(args.tasks, args.env, task_files)
        if args.sample is not None:
            if not 1 <= args.sample <= len(refs):
                raise UserError(f"--sample: {args.sample} of {len(refs)} tasks (give 1 to {len(refs)})")
            refs = random.Random(f"icplay-sample:{args.seed}").sample(refs, args.sample)
        if args.time_limit is not None and args.time_limit <= 0:
            raise UserError("--time-limit: give a positive number of seconds")
        rules = StudyRules(gold_reveal=args.gold_reveal, retries=args.retries, time_limit_s=args.time_limit,
                           strict=args.strict, per_turn_scoring=not args.hide_turn_scores,
                           hide_model=not args.show_model, query_history=not args.no_query_history)
        created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        study = Study(name, tuple(refs), tuple(annotators), args.per_task, args.seed,
                      assign(refs, annotators, args.per_task, args.seed), rules, created, agent=study_agent(args),
                      task_files={n: f for n, f in task_files.items() if any(r.startswith(n + "/") for r in refs)})
        saved = save_study(study)
    sizes = ", ".join(f"{who} {len(study.assigned_to(who))}" for who in annotators)
    print(f"wrote {saved}: {len(refs)} tasks × {args.per_task} annotators each ({sizes})")
    print(f"each annotator plays: icplay play --study {name} --annotator NAME"
          + (f"\n(or supervises the study's agent: icplay watch --study {name} --annotator NAME)" if study.agent else ""))
    return 0


def study_agent(args) -> dict[str, str]:
    """The study's ``[agent]`` from ``--agent-*`` (empty when none is given)."""
    agent = {"policy": args.agent_policy or ("llm" if args.agent_model else None), "model": args.agent_model,
             "base_url": args.agent_base_url, "protocol": args.agent_protocol}
    if agent["policy"] is None and (args.agent_base_url or args.agent_protocol):
        raise UserError("--agent-base-url and --agent-protocol describe an agent: name it with --agent-model "
                        "(or --agent-policy gold)")
    if agent["policy"] == "llm" and not args.agent_model:
        raise UserError("--agent-policy llm: name the model with --agent-model")
    return {k: v for k, v in agent.items() if v}


def run_status(args) -> int:
    from icplay.study.model import load_study
    from icplay.study.status import render_status, study_status

    with study_errors():
        study = load_study(args.name)
        skipped: list = []
        rows = study_status(study, skipped=skipped)
    if args.json:
        print(json.dumps({"study": study.name, "annotators": [r.to_dict() for r in rows],
                          "skipped": [{"path": str(p), "reason": str(e)} for p, e in skipped]}, indent=1))
    else:
        print(render_status(study, rows))
    if skipped:
        print(f"icplay: {len(skipped)} file(s) skipped: " + "; ".join(str(e) for _, e in skipped), file=sys.stderr)
    return 0


def run_merge(args) -> int:
    from icplay.study.merge import merge
    from icplay.study.model import load_study

    with study_errors():
        study = load_study(args.name)
        result = merge(study, args.folders)
    lines = result.lines()
    print(lines[0])
    for line in lines[1:]:
        print(f"icplay: {line}", file=sys.stderr)
    return 1 if result.conflicts or result.refused else 0
