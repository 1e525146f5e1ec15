"""Benchmark: parallel episodes. -j 8 against -j 1 on the same Bash batch, same run.

The model is the scripted local OpenAI-compatible server answering every request after
a fixed latency (300 ms by default, like a hosted API). Each episode: a first exploring
command, then the gold command (solved at turn 2, intercode protocol: scored after each
action). Each task's gold runs once per run, in a sandbox of its own.

    python bench/bench_runner.py [--episodes 40] [--latency 0.3] [--sandbox docker] [--jobs 8]
                                 [--protocol intercode|agent] [--no-recycle]

Prints both wall times, the speed-up, and how many containers each run started and how
many episodes it served from recycled ones (Docker).

Prints both wall times and the speed-up; the issue's bar is >= 4x on Docker on a 2-core
machine. Both runs go through ``icplay run`` (CLI), with fresh output folders.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "agents"))

from fake_openai_server import ByTask, FakeOpenAIServer, fenced  # noqa: E402

import icplay.envs as envs  # noqa: E402
from icplay.cli import main as icplay  # noqa: E402
from icplay.tasks.registry import load_tasks  # noqa: E402

SANDBOX_STATS: list[dict] = []


def _record_stats(close):
    def close_and_record(self):
        SANDBOX_STATS.append(self.stats())
        close(self)
    return close_and_record


envs.EnvFactory.close = _record_stats(envs.EnvFactory.close)


def rules(n: int) -> dict:
    tasks = load_tasks("bash")
    chosen = [tasks[i % len(tasks)] for i in range(n)]
    return {t.query: [fenced("ls /testbed", "bash"), fenced(t.gold, "bash"), "submit"] for t in chosen}


def one_run(url: str, jobs: int, episodes: int, sandbox: str, out: Path, protocol: str,
            recycle: bool = True) -> tuple[float, dict]:
    argv = ["run", "bash", "--tasks", "bash", "--model", "scripted", "--base-url", url, "--sandbox", sandbox,
            "--protocol", protocol,
            "--limit", str(episodes), "-j", str(jobs), "--out", str(out), "--fresh", "--json", "--quiet"]
    if not recycle:
        argv.append("--no-recycle")
    buf = io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stdout(buf):
        code = icplay(argv)
    elapsed = time.monotonic() - started
    if code != 0:
        raise SystemExit(f"icplay run -j {jobs} failed (exit {code}): {buf.getvalue()[-500:]}")
    summary = json.loads(buf.getvalue())
    summary["sandboxes"] = SANDBOX_STATS[-1] if SANDBOX_STATS else {}
    return elapsed, summary


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=40)
    p.add_argument("--latency", type=float, default=0.3)
    p.add_argument("--sandbox", default="docker")
    p.add_argument("--jobs", type=int, default=8)
    p.add_argument("--protocol", default="intercode", choices=["intercode", "agent"],
                   help="intercode: scored after each action; agent: scored once, at the submit")
    p.add_argument("--no-recycle", action="store_true", help="a new container for every episode (Docker)")
    args = p.parse_args()
    if args.episodes > len(load_tasks("bash")):
        raise SystemExit(f"the bundled set has {len(load_tasks('bash'))} tasks; use --episodes <= that")
    with FakeOpenAIServer(ByTask(rules(args.episodes), default="submit"), latency=args.latency) as server, \
            tempfile.TemporaryDirectory(prefix="icplay-bench-") as tmp:
        # warm-up: image present, pools and caches, not timed
        recycle = not args.no_recycle
        one_run(server.url, 1, 1, args.sandbox, Path(tmp) / "warm", args.protocol, recycle)
        t1, s1 = one_run(server.url, 1, args.episodes, args.sandbox, Path(tmp) / "j1", args.protocol, recycle)
        tn, sn = one_run(server.url, args.jobs, args.episodes, args.sandbox, Path(tmp) / f"j{args.jobs}",
                         args.protocol, recycle)
    for jobs, t, s in ((1, t1, s1), (args.jobs, tn, sn)):
        print(f"-j {jobs:<2} {args.episodes} episodes on {args.sandbox} ({args.protocol}), model latency {args.latency * 1000:.0f} ms: "
              f"{t:6.1f} s  ({t / args.episodes:.2f} s/episode, solved {s['solved']}/{s['episodes']}, "
              f"{s['calls']} model calls; sandboxes started {s['sandboxes'].get('started', '?')}, "
              f"recycled {s['sandboxes'].get('recycled', '?')})")
    print(f"speed-up -j {args.jobs} vs -j 1: {t1 / tn:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
