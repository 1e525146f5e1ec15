"""Python submit: the scoring out of the solver's reach against the old in-interpreter scoring, same run.

Run: .venv/bin/python bench/bench_python_scoring.py [--sandbox bwrap|docker] [--tasks python] [--n 20]

For each of the first N tasks: a new episode, the gold defined as the solver's action, the
gold's own scoring made once (kept per task, as in a run), then the two submits timed
alternately on the same episode, three times each:

- old: the path icplay had before (reconstructed here, it no longer exists in icplay): the
  set-up code and each test run in the episode's own interpreter, one request a test;
- new: ``PythonEnv.submit``: a fresh scoring sandbox from the pool, the episode's actions
  replayed there, the tests' calls in one request, the judge in the gold's sandbox.

The old path's rewards are not computed (its gold side is the same kept work); both submits
must see the gold's function pass every test, which the bench checks.
"""

from __future__ import annotations

import argparse
import statistics
import time

from icplay.envs.python import TEST_TIMEOUT, PythonEnv, PythonSandboxes, task_tests
from icplay.languages import get as language
from icplay.python.scoring import outcome_of
from icplay.tasks.registry import load_tasks


def old_submit(env: PythonEnv) -> bool:
    """InterCode's way as icplay did it before: the tests in the solver's own interpreter."""
    assert env.task is not None and env.interpreter is not None
    tests, _, _, setup = task_tests(env.task)
    if setup.strip():
        env.interpreter.run(setup, timeout=TEST_TIMEOUT)
    outcomes = [outcome_of(env.interpreter.run(test, timeout=TEST_TIMEOUT)) for test in tests]
    return all(o.status == "ok" for o in outcomes)


def new_submit(env: PythonEnv) -> bool:
    return env.submit().reward == 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sandbox", default="bwrap", choices=["bwrap", "docker"])
    parser.add_argument("--tasks", default="python")
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tasks = load_tasks(args.tasks)[:args.n]
    language("python")     # registers the icplay-python image (built on first use)
    sandboxes = PythonSandboxes(args.sandbox)
    env = PythonEnv(sandboxes)
    times: dict[str, list[float]] = {"old": [], "new": []}
    first: list[float] = []
    wrong = 0
    try:
        for task in tasks:
            env.reset(task)
            env.step(task.gold.replace("\r\n", "\n"))
            t0 = time.perf_counter()
            sandboxes.gold_scored(task)
            first.append(time.perf_counter() - t0)
            for _ in range(args.repeat):
                for name, submit in (("old", old_submit), ("new", new_submit)):
                    t0 = time.perf_counter()
                    ok = submit(env)
                    times[name].append(time.perf_counter() - t0)
                    wrong += not ok
    finally:
        env.close()
    old, new = statistics.median(times["old"]), statistics.median(times["new"])
    print(f"{args.sandbox}, {len(tasks)} tasks of {args.tasks!r}, {args.repeat} submits each way per task")
    print(f"submit median, old (tests in the solver's interpreter): {old * 1000:8.1f} ms")
    print(f"submit median, new (out of the solver's reach):          {new * 1000:8.1f} ms  ({new / old:.1f}x old)")
    print(f"the gold's own scoring, once per task (median):          {statistics.median(first) * 1000:8.1f} ms")
    if wrong:
        print(f"WARNING: {wrong} submits of a gold did not pass every test")


if __name__ == "__main__":
    main()
