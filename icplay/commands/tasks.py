"""``icplay tasks [SET]``: list task sets, or the tasks of one set."""

from __future__ import annotations

from collections import Counter

from icplay.tasks.registry import find_set, task_sets


def register(sub) -> None:
    p = sub.add_parser("tasks", help="list task sets, or the tasks of one set")
    p.add_argument("set", nargs="?", help="a set name or a task file")
    p.add_argument("--env", help="environment of a task file given by path (bash, sql, python, ctf)")
    p.set_defaults(func=run)


def run(args) -> int:
    if not args.set:
        print(f"{'SET':<14} {'ENV':<7} {'TASKS':>6}  DESCRIPTION")
        for task_set in task_sets():
            count = len(task_set.load()) if task_set.available else 0
            print(f"{task_set.name:<14} {task_set.env:<7} {count:>6}  {task_set.description}")
        return 0
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
