"""``icplay tasks [SET]``: list task sets, or the tasks of one set; ``--check SET`` runs
every gold and lists the tasks whose gold cannot tell a solution from a guess."""

from __future__ import annotations

import sys
from collections import Counter

from icplay.tasks.registry import find_set, task_sets


# What a command needs is imported inside the function that runs it (said here once for the
# module): `icplay --help` imports every command module and must start fast.


def register(sub) -> None:
    p = sub.add_parser("tasks", help="list task sets, or the tasks of one set")
    p.add_argument("set", nargs="?", help="a set name or a task file")
    p.add_argument("--env", help="environment of a task file given by path (bash, sql, python, ctf)")
    p.add_argument("--check", action="store_true",
                   help="run every gold of SET and list the tasks it cannot be strictly solved on "
                        "(SQL: a gold returning no rows or failing on the backend)")
    p.add_argument("--sandbox", default=None,
                   help="what --check runs the golds on: SQL's backend, sqlite (default) or mysql; Harbor's image "
                        "engine, docker (default) or podman")
    p.set_defaults(func=run)


def check(args) -> int:
    """The set's language's gold check (``LanguageSpec.gold_check``), its findings listed."""
    from icplay.languages import all_specs, find, resolve

    task_set = find_set(args.set, args.env)
    spec = find(task_set.env)
    if spec is None or spec.gold_check is None:
        known = sorted(s.name for s in all_specs() if s.gold_check is not None)
        print(f"icplay tasks --check: no gold check for {task_set.env} tasks yet "
              f"(known: {', '.join(known)})", file=sys.stderr)
        return 2
    sandbox = args.sandbox or spec.sandboxes[0]
    if sandbox not in spec.sandboxes:
        print(f"icplay tasks --check: {task_set.env} golds run on {' or '.join(spec.sandboxes)}, not {sandbox!r}",
              file=sys.stderr)
        return 2
    tasks = task_set.load()
    found = resolve(spec.gold_check)(tasks, sandbox, lambda m: print(m, file=sys.stderr))
    print(f"{task_set.name}: {len(found)} of {len(tasks)} tasks {spec.gold_check_finds.format(sandbox=sandbox)}")
    for task, reason in found:
        print(f"  {task.id:>6}  {reason}")
    return 0


def run(args) -> int:
    if args.check:
        if not args.set:
            print("icplay tasks --check: name a task set (icplay tasks --check spider)", file=sys.stderr)
            return 2
        return check(args)
    if not args.set:
        return _list_sets()
    return _list_tasks(args)


def _list_sets() -> int:
    print(f"{'SET':<14} {'ENV':<7} {'TASKS':>6}  DESCRIPTION")
    for task_set in task_sets():
        count = len(task_set.load()) if task_set.available else 0
        print(f"{task_set.name:<14} {task_set.env:<7} {count:>6}  {task_set.description}")
    return 0


def _list_tasks(args) -> int:
    task_set = find_set(args.set, args.env)
    tasks = task_set.load()
    by_hardness = Counter(t.hardness or "-" for t in tasks)
    print(f"{task_set.name}: {len(tasks)} {task_set.env} tasks ({task_set.path})"
          + ("; " + ", ".join(f"{k} {v}" for k, v in sorted(by_hardness.items())) if len(by_hardness) > 1 else ""))
    skipped = 0
    for task in tasks:
        query = " ".join(task.query.split())
        label = f"[{task.hardness}] " if task.hardness else ""
        print(f"  {task.id:>6}  {label}{query[:100]}")
        if task.extra.get("skip"):   # CTF tasks that need a server or whose files are absent
            skipped += 1
            print(f"  {'':>6}  (skipped by run: {task.extra['skip']})")
    if skipped:
        print(f"{skipped} task(s) are skipped by `icplay run` (--include-remote plays those that need a server)")
    return 0
