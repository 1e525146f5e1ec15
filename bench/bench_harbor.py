"""Exported Harbor tasks, all of them: `harbor lint` and the oracle's semantics per language.

Run: .venv/bin/python bench/bench_harbor.py [--tasks bash --tasks sql ...] [--out DIR]
     [--harbor .venv-harbor/bin/harbor] [--mode separate|shared] [--wrong]

Exports every task of the bundled sets (default: bash, sql, python, ctf) as Harbor task
folders, runs `harbor lint` (the real package, in its own Python 3.12 venv) on all of them,
then for each task builds its environment on Docker, runs solution/solve.sh, verifies as
task.toml says (Harbor's separate verifier: the collect hook, the artifacts carried into
a fresh container, tests/test.sh there) and reads /logs/verifier/reward.txt. Prints, per
language, how many tasks lint clean and how many oracle runs score 1.0, and lists every
task that does not. ``--wrong``: also a wrong answer per task (an empty /app), which
must score below 1.0.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from icplay.harbor.export import export_tasks
from icplay.harbor.oracle import OracleError, check
from icplay.tasks.registry import load_tasks

ROOT = Path(__file__).resolve().parents[1]


def lint(harbor: Path, folders: list[Path]) -> tuple[int, dict[Path, str]]:
    """`harbor lint` over every folder at once: its exit status, and each folder's findings."""
    done = subprocess.run([str(harbor), "lint", *map(str, folders)], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "HOME": str(Path.home())})
    found: dict[Path, str] = {}
    for line in done.stdout.splitlines():
        for folder in folders:
            if f"/{folder.name}/" in line:
                found[folder] = (found.get(folder, "") + line + "\n")
    return done.returncode, found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", action="append", default=[])
    parser.add_argument("--out", default=None, help="where to export (default: a temporary folder)")
    parser.add_argument("--harbor", default=str(ROOT / ".venv-harbor/bin/harbor"))
    parser.add_argument("--mode", choices=("separate", "shared"), default=None)
    parser.add_argument("--wrong", action="store_true")
    parser.add_argument("--jobs", type=int, default=1, help="tasks checked at once (Docker calls mostly wait)")
    args = parser.parse_args()
    sets = args.tasks or ["bash", "sql", "python", "ctf"]
    out = Path(args.out or tempfile.mkdtemp(prefix="icplay-harbor-bench-"))
    tasks = [task for name in sets for task in load_tasks(name)]
    started = time.monotonic()
    result = export_tasks(tasks, out)
    print(f"exported {len(result.written)} tasks to {out} in {time.monotonic() - started:.0f} s"
          f" ({len(result.skipped)} skipped)", flush=True)
    folders = [folder for _task, folder in result.written]
    language = {folder: task.env for task, folder in result.written}
    totals = Counter(language.values())
    harbor = Path(args.harbor)
    if harbor.exists():
        status, findings = lint(harbor, folders)
        print(f"harbor lint: exit status {status} over {len(folders)} folders", flush=True)
        clean = Counter(language[f] for f in folders if f not in findings)
        for lang in totals:
            print(f"harbor lint {lang}: {clean[lang]}/{totals[lang]} clean", flush=True)
        for folder, text in findings.items():
            print(f"  lint {folder.name}: {text}")
    else:
        print(f"harbor lint: not run ({harbor} is missing)")
    passed: Counter[str] = Counter()
    wrong_below: Counter[str] = Counter()

    def one(folder: Path) -> tuple[Path, str | None, str | None]:
        """(folder, why the oracle did not score 1.0, why doing nothing did not score below 1.0)."""
        try:
            verdict = check(folder, mode=args.mode)
            oracle = None if verdict.reward == 1.0 else f"reward {verdict.reward} {str(verdict.details)[:400]}"
            nothing = None
            if args.wrong:
                wrong = check(folder, act=lambda box: box.sh("true"), mode=args.mode)
                nothing = None if wrong.reward is not None and wrong.reward < 1.0 else f"reward {wrong.reward}"
        except (OracleError, subprocess.TimeoutExpired) as exc:
            return folder, f"failed to run: {exc}", None
        return folder, oracle, nothing

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for n, (folder, oracle, nothing) in enumerate(pool.map(one, folders), 1):
            if oracle is None:
                passed[language[folder]] += 1
            else:
                print(f"  oracle {folder.name}: {oracle}", flush=True)
            if args.wrong and nothing is None and oracle is None:
                wrong_below[language[folder]] += 1
            elif args.wrong and nothing:
                print(f"  nothing done {folder.name}: {nothing}", flush=True)
            if n % 10 == 0:
                print(f"  {n}/{len(folders)} checked ({time.monotonic() - started:.0f} s)", flush=True)
    for lang in totals:
        line = f"oracle {lang}: {passed[lang]}/{totals[lang]} score 1.0"
        if args.wrong:
            line += f"; doing nothing scores below 1.0 on {wrong_below[lang]}/{totals[lang]}"
        print(line)
    print(f"total time {time.monotonic() - started:.0f} s")
    return 0 if sum(passed.values()) == len(folders) else 1


if __name__ == "__main__":
    sys.exit(main())
