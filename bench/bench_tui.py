"""The playground stays responsive: key latency while output floods and while 100 000 rows show.

Run: .venv/bin/python bench/bench_tui.py [--sandbox bwrap|docker] [--keys 40]

The app runs headless (Textual's test driver: the compositor renders every frame as in a
terminal). A probe types one character into the focused input every 50 ms and measures
the time from posting the key event until the input's text holds it, so the figure
includes everything queued in front of the key (output batches being drawn, results
being laid out). Scenarios, each measured in this one run:

- idle: nothing running (the baseline);
- Bash floods: ``yes | head -c 50000000``, ``seq 1 2000000``, and a paced flood that
  keeps writing for several seconds; keys are pressed while the command runs;
- SQL: a real SQLite query returning 100 000 rows (a recursive CTE) shown in the results
  table, then keys typed in the editor and rows scrolled while the result is displayed.

Prints median / p95 / max latency in milliseconds and how many keys were measured.
The quality bar (DESIGN.md): keys handled within 100 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from textual import events

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from icplay.tui.app import PlayApp  # noqa: E402
from icplay.frontend.config import Config  # noqa: E402
from icplay.tui.screens.live import LiveScreen  # noqa: E402

FLOODS = [
    ("yes | head -c 50000000", "yes | head -c 50000000"),
    ("seq 1 2000000", "seq 1 2000000"),
    ("paced flood, ~4 s", "for i in $(seq 1 80); do seq -f 'line %g of a steady flood of output' 1 400; sleep 0.05; done"),
]
SQL_100K = ("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 100000) "
            "SELECT x AS id, x * 7 % 1000 AS score, 'customer ' || x AS name, x / 3.0 AS ratio FROM n")


def summary(name: str, samples: list[float]) -> str:
    if not samples:
        return f"{name:<34} no keys measured"
    ms = sorted(s * 1000 for s in samples)
    p95 = ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]
    return (f"{name:<34} median {statistics.median(ms):6.1f} ms   p95 {p95:6.1f} ms   max {ms[-1]:6.1f} ms"
            f"   ({len(ms)} keys)")


async def probe_key(app: PlayApp, widget, key: str = "x", timeout: float = 5.0) -> float:
    """Post one key press; return seconds until ``widget.text`` changed."""
    before = widget.text
    t0 = time.perf_counter()
    app.post_message(events.Key(key, key))
    while widget.text == before:
        if time.perf_counter() - t0 > timeout:
            return timeout
        await asyncio.sleep(0.001)
    return time.perf_counter() - t0


async def wait_until(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the app did not get there in time")
        await asyncio.sleep(0.02)


def screen_of(app) -> LiveScreen:
    return next(s for s in reversed(app.screen_stack) if isinstance(s, LiveScreen))


async def bench_bash(sandbox: str, keys: int, home: Path) -> list[str]:
    lines = []
    app = PlayApp(env="bash", tasks="bash", task="b001", sandbox=sandbox, home=home, config=Config(history=False))
    try:
        async with app.run_test(size=(120, 40)):
            await wait_until(lambda: any(isinstance(s, LiveScreen) and s.state == "ready" for s in app.screen_stack))
            screen = screen_of(app)
            command = screen.query_one("#command")
            idle = []
            for _ in range(keys):
                idle.append(await probe_key(app, command))
                await asyncio.sleep(0.05)
            lines.append(summary("bash: idle (baseline)", idle))
            for name, action in FLOODS:
                turns = len(screen.episode.trajectory.turns)
                drawn_before = screen.query_one("#output").chars_written
                command.load_text(action)
                started = time.perf_counter()
                app.post_message(events.Key("enter", "\r"))   # (pilot.press would wait for idle)
                samples = []
                # Keys while the command runs, and for at least 3 s (the pane drains its batches).
                while screen.state == "running" or time.perf_counter() - started < 3.0:
                    samples.append(await probe_key(app, command))
                    await asyncio.sleep(0.05)
                await wait_until(lambda turns=turns: screen.state == "ready" and len(screen.episode.trajectory.turns) > turns, 60)
                ran = screen.episode.trajectory.turns[-1].duration
                turn = screen.episode.trajectory.turns[-1]
                output = screen.query_one("#output")
                lines.append(summary(f"bash: {name}", samples)
                             + f"   ran {ran:.2f} s, {output.chars_written - drawn_before:,} chars drawn,"
                               f" {turn.info.get('truncated_bytes', 0):,} bytes past the cap")
                command.load_text("")
    finally:
        app.close_envs()
    return lines


async def bench_sql(keys: int, home: Path) -> list[str]:
    import json

    from icplay.tasks.registry import TaskSet
    from icplay.tui.app import Catalog

    folder = home / "bench-sql"
    (folder / "databases").mkdir(parents=True)
    (folder / "databases" / "bench.sql").write_text("CREATE TABLE t (x INT);\nINSERT INTO t VALUES (1);\n")
    (folder / "tasks.json").write_text(json.dumps([{"id": "1", "db": "bench", "query": "q", "gold": "SELECT x FROM t"}]))
    catalog = Catalog.from_sets([TaskSet("bench", "sql", folder / "tasks.json", "bench", databases=folder / "databases")])
    lines = []
    app = PlayApp(env="sql", catalog=catalog, task="1", home=home, config=Config(history=False))
    async with app.run_test(size=(120, 40)):
        await wait_until(lambda: any(isinstance(s, LiveScreen) and s.state == "ready" for s in app.screen_stack))
        screen = screen_of(app)
        editor = screen.query_one("#editor")
        results = screen.query_one("#results")
        idle = []
        for _ in range(keys):
            idle.append(await probe_key(app, editor))
            await asyncio.sleep(0.05)
        lines.append(summary("sql: idle (baseline)", idle))
        editor.load_text(SQL_100K)
        t0 = time.perf_counter()
        app.post_message(events.Key("f5", None))
        await wait_until(lambda: screen.state == "running", 10)
        running = []      # keys typed while the query runs and its 100 000 rows are laid out
        while screen.state == "running" or time.perf_counter() - t0 < 1.5:
            running.append(await probe_key(app, editor, "y"))
            await asyncio.sleep(0.02)
        await wait_until(lambda: screen.state == "ready", 60)
        await wait_until(lambda: len(results.rows) == 100_000, 30)
        shown = time.perf_counter() - t0
        editor.move_cursor(editor.document.end)
        typing = []
        for _ in range(keys):
            typing.append(await probe_key(app, editor, "z"))
            await asyncio.sleep(0.05)
        lines.append(summary("sql: typing while the query runs", running))
        lines.append(summary("sql: typing with 100 000 rows shown", typing)
                     + f"   query+display {shown:.2f} s")
        results.focus()
        await asyncio.sleep(0.1)
        scrolling = []
        for _ in range(keys):
            before = results.cursor_row
            t0 = time.perf_counter()
            app.post_message(events.Key("pagedown", None))
            while results.cursor_row == before:
                await asyncio.sleep(0.001)
            scrolling.append(time.perf_counter() - t0)
            await asyncio.sleep(0.05)
        lines.append(summary("sql: page down through 100 000 rows", scrolling))
    app.close_envs()
    return lines


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sandbox", default="bwrap")
    parser.add_argument("--keys", type=int, default=40, help="keys measured per idle/SQL scenario")
    parser.add_argument("--only", choices=["bash", "sql"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="icplay-bench-") as tmp:
        os.environ["ICPLAY_HOME"] = tmp
        lines = []
        if args.only in (None, "bash"):
            lines += await bench_bash(args.sandbox, args.keys, Path(tmp))
        if args.only in (None, "sql"):
            lines += await bench_sql(args.keys, Path(tmp))
    print("Key latency (post -> input updated), headless 120x40:")
    for line in lines:
        print("  " + line)


if __name__ == "__main__":
    asyncio.run(main())
