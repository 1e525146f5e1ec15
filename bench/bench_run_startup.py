"""Benchmark: `icplay run` wall time, start-up included, -j 8 against -j 1 on SQL (SQLite).

The model is the scripted local OpenAI-compatible server answering every request after a
fixed latency (300 ms by default, like a hosted API). Each episode: an exploring query,
then the gold (solved at turn 2 under the intercode protocol). Each run is a separate
`icplay run` process, timed from its start to its exit, so the fixed start (imports, task
loading, sandboxes, gold runs) counts as a user sees it. The bar (issue 29): -j 8 at
least 6x -j 1 in wall time on 40 episodes.

    python bench/bench_run_startup.py [--episodes 40] [--latency 0.3] [--jobs 8]

Prints both wall times, the time to the first model request of each run, and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "agents"))

from fake_openai_server import ByTask, FakeOpenAIServer, fenced  # noqa: E402

from icplay.tasks.registry import load_tasks  # noqa: E402


def rules(n: int) -> dict:
    tasks = load_tasks("sql")[:n]
    return {t.query: [fenced("SELECT 1"), fenced(t.gold), "submit"] for t in tasks}


def one_run(server: FakeOpenAIServer, jobs: int, episodes: int, out: Path) -> tuple[float, float, dict]:
    """(wall seconds, seconds to the first request, the run's JSON summary)."""
    argv = [sys.executable, "-m", "icplay", "run", "sql", "--tasks", "sql", "--sandbox", "sqlite", "--model",
            "scripted", "--base-url", server.url, "--api-key", "none", "--limit", str(episodes), "-j", str(jobs),
            "--out", str(out), "--fresh", "--json", "--quiet"]
    before = len(server.requests)
    started = time.monotonic()
    first: list[float] = []

    def watch_first() -> None:
        if server.wait_requests(before + 1, timeout=600):
            first.append(time.monotonic() - started)

    import threading

    watcher = threading.Thread(target=watch_first, daemon=True)
    watcher.start()
    # bytecode cached as an installed icplay has it (in the bench's own folder, not the tree), even where
    # PYTHONDONTWRITEBYTECODE is set: the warm-up run writes it
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(ICPLAY_PRICES=str(out.parent / "none.json"), PYTHONPYCACHEPREFIX=str(out.parent / "pycache"))
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env)
    elapsed = time.monotonic() - started
    watcher.join(5)
    if done.returncode != 0:
        raise SystemExit(f"icplay run -j {jobs} failed (exit {done.returncode}): {done.stderr[-800:]}")
    return elapsed, (first[0] if first else float("nan")), json.loads(done.stdout)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=40)
    p.add_argument("--latency", type=float, default=0.3)
    p.add_argument("--jobs", type=int, default=8)
    args = p.parse_args()
    if args.episodes > len(load_tasks("sql")):
        raise SystemExit(f"the bundled set has {len(load_tasks('sql'))} tasks; use --episodes <= that")
    with FakeOpenAIServer(ByTask(rules(args.episodes), default="submit"), latency=args.latency) as server, \
            tempfile.TemporaryDirectory(prefix="icplay-bench-") as tmp:
        one_run(server, 1, 1, Path(tmp) / "warm")         # warm-up: bytecode and caches, not timed
        t1, f1, s1 = one_run(server, 1, args.episodes, Path(tmp) / "j1")
        tn, fn, sn = one_run(server, args.jobs, args.episodes, Path(tmp) / f"j{args.jobs}")
    for jobs, t, f, s in ((1, t1, f1, s1), (args.jobs, tn, fn, sn)):
        print(f"-j {jobs:<2} {args.episodes} SQL episodes, model latency {args.latency * 1000:.0f} ms: {t:6.1f} s wall "
              f"(first request after {f:.2f} s; solved {s['solved']}/{s['episodes']}, {s['calls']} model calls)")
    print(f"speed-up -j {args.jobs} vs -j 1, wall time with start-up: {t1 / tn:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
