"""How fast ``icplay view`` opens and filters thousands of saved episodes.

Writes N synthetic trajectories (default 5 000; SQL and Bash, human and agent, a few turns
each with realistic observations) into a scratch ICPLAY_HOME, then measures:

- scan, cold: every file parsed, the summary index written;
- scan, warm: the index reused (what every later ``icplay view`` pays);
- filter + sort over the summaries (a search word, solved only, by reward);
- the app: ``icplay view`` mounted (Textual Pilot, headless) until the table shows every
  episode, then a search typed and applied;
- the app on a cold index (a first ``icplay view`` after N new files): the time until the
  first rows show (batches posted while the worker parses) and until all N do.

Prints the figures and the bar (open + filter under 1 s). Run:
    python bench/bench_view.py [N]
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import tempfile
import time
from pathlib import Path


def make_trajectories(home: Path, n: int) -> None:
    from icplay.episode import Trajectory, Turn
    from icplay.store import trajectory_json

    rng = random.Random(7)
    root = home / "trajectories"
    for i in range(n):
        env = "sql" if i % 2 else "bash"
        agent = i % 3 != 0
        policy = ({"kind": "llm", "model": rng.choice(["gpt-4o", "qwen2.5-coder", "llama3"]),
                   "strategy": rng.choice(["react", "try_again"])} if agent else {"kind": "human", "user": f"ann{i % 7}"})
        turns = []
        for t in range(rng.randint(1, 8)):
            obs = "\n".join(f"row {r} | value {rng.random():.6f}" for r in range(rng.randint(1, 30)))
            turns.append(Turn(index=t, author="agent" if agent else "human", action=f"SELECT * FROM t{t} LIMIT {t + 5};"
                              if env == "sql" else f"ls -la /testbed/dir{t}", observation=obs, exit_code=0,
                              started_at=1.7e9 + i, duration=0.01, reward=round(rng.random(), 2) if agent else None,
                              thought="look at the table" if agent else None))
        reward = rng.choice([1.0, 0.0, 0.33, 0.67])
        traj = Trajectory(task={"id": str(i % 400), "set": env, "env": env, "query": f"task number {i % 400} about "
                                f"{rng.choice(['orders', 'logs', 'users', 'files'])}", "gold": "x"},
                          env=env, sandbox="sqlite" if env == "sql" else "bwrap", policy=policy, turns=turns,
                          status="submitted", reward=reward, best_reward=reward, time_worked=rng.random() * 300,
                          started_at=1.7e9 + i, updated_at=1.7e9 + i)
        session = f"s{i // 400}"
        path = root / session / env / f"{i}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(trajectory_json(traj), encoding="utf-8")   # no fsync: a bench, not a store


CPU: dict[str, float] = {}


def timed(fn, name: str = ""):
    """(result, wall seconds); the CPU seconds this process spent go to CPU[name]: on a
    loaded machine the wall time mostly measures the others' load."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    CPU[name] = time.process_time() - c0
    return out, time.perf_counter() - t0


async def app_figures(home: Path, n: int) -> tuple[float, float, float]:
    """(open, one filter applied, a search typed key by key) in seconds."""
    from textual.widgets import Input

    from icplay.tui.screens.view import ViewApp, ViewScreen

    app = ViewApp(home=home, frozen=True)
    t0, c0 = time.perf_counter(), time.process_time()
    async with app.run_test(size=(140, 40)) as pilot:
        while not isinstance(app.screen, ViewScreen) or app.screen.loading or len(app.screen.shown) != n:
            await pilot.pause(0.005)
        await pilot.pause()                      # the table painted
        opened = time.perf_counter() - t0
        CPU[f"open{n}"] = time.process_time() - c0
        if n == 0:
            return opened, 0.0, 0.0
        screen = app.screen
        t1, c1 = time.perf_counter(), time.process_time()
        screen.query_one("#search", Input).value = "orders"
        while screen.filter.text != "orders":
            await pilot.pause(0.005)
        await pilot.pause()
        filtered = time.perf_counter() - t1
        CPU["app filter"] = time.process_time() - c1
        shown = len(screen.shown)
        screen.query_one("#search", Input).value = ""
        await pilot.pause()
        screen.query_one("#search", Input).focus()
        t2 = time.perf_counter()
        await pilot.press(*"orders")
        while screen.filter.text != "orders":
            await pilot.pause(0.005)
        await pilot.pause()
        typed = time.perf_counter() - t2
        await pilot.press("enter", "s")          # solved only, on top of the search
        await pilot.pause()
        print(f"  app: {shown} of {n} shown after the search, {len(screen.shown)} solved among them")
    return opened, filtered, typed


async def app_cold(home: Path, n: int) -> tuple[float, int, float]:
    """A first ``icplay view`` after N new files (no index): (seconds until the first rows
    show, how many, seconds until all N) — rows come in batches while the worker parses."""
    from icplay.formats.summary import index_path
    from icplay.tui.screens.view import ViewApp, ViewScreen

    index_path(home).unlink(missing_ok=True)
    app = ViewApp(home=home, frozen=True)
    t0 = time.perf_counter()
    async with app.run_test(size=(140, 40)) as pilot:
        while not isinstance(app.screen, ViewScreen) or not app.screen.table.rows:
            await pilot.pause(0.005)
        first, first_rows = time.perf_counter() - t0, len(app.screen.table.rows)
        while app.screen.loading or len(app.screen.table.rows) != n:
            await pilot.pause(0.005)
        return first, first_rows, time.perf_counter() - t0


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        os.environ["ICPLAY_HOME"] = str(home)
        _, made = timed(lambda: make_trajectories(home, n))
        size = sum(f.stat().st_size for f in (home / "trajectories").rglob("*.json"))
        print(f"{n} episodes written in {made:.1f} s ({size / 1e6:.1f} MB)")
        from icplay.formats.summary import Filter, scan, select

        rows, cold = timed(lambda: scan(home=home), "cold")
        assert len(rows) == n, len(rows)
        rows, warm = timed(lambda: scan(home=home), "warm")
        picked, filt = timed(lambda: select(rows, Filter(text="orders", solved=True), sort="best"), "filter")
        print(f"scan, cold (parse every file, write the index): {cold * 1000:7.0f} ms wall, {CPU['cold'] * 1000:6.0f} ms CPU")
        print(f"scan, warm (index reused):                      {warm * 1000:7.0f} ms wall, {CPU['warm'] * 1000:6.0f} ms CPU")
        print(f"filter 'orders' + solved, sort by best:         {filt * 1000:7.1f} ms wall, {CPU['filter'] * 1000:6.1f} ms CPU"
              f"  ({len(picked)} rows)")
        empty = Path(tmp) / "empty"
        empty.mkdir()
        base, _, _ = asyncio.run(app_figures(empty, 0))
        opened, filtered, typed = asyncio.run(app_figures(home, n))
        print(f"app start, no episodes (baseline: Textual's boot): {base * 1000:4.0f} ms")
        print(f"app start until {n} rows shown (warm index):    {opened * 1000:7.0f} ms "
              f"(x{opened / base:.2f} the baseline, +{(opened - base) * 1000:.0f} ms)")
        print(f"   CPU: {CPU['open0'] * 1000:.0f} ms without episodes, {CPU[f'open{n}'] * 1000:.0f} ms with them "
              f"(+{(CPU[f'open{n}'] - CPU['open0']) * 1000:.0f} ms)")
        print(f"app filter applied (search 'orders'):           {filtered * 1000:7.0f} ms wall, "
              f"{CPU['app filter'] * 1000:.0f} ms CPU")
        print(f"app search typed key by key (6 keys, 6 filters): {typed * 1000:6.0f} ms")
        first, first_rows, full = asyncio.run(app_cold(home, n))
        print(f"app start, cold index (every file parsed): first {first_rows} rows after {first * 1000:.0f} ms, "
              f"all {n} after {full * 1000:.0f} ms")
        print(f"load average during the run: {' '.join(f'{x:.1f}' for x in os.getloadavg())} "
              f"({os.cpu_count()} cores)")
        total = opened - base + filtered
        cpu = CPU[f"open{n}"] - CPU["open0"] + CPU["app filter"]
        print(f"bar: opening {n} episodes (beyond the app's boot) + a filter = {total:.2f} s wall, {cpu:.2f} s CPU "
              f"{'<' if total < 1 else '>='} 1 s -> {'OK' if total < 1 else 'MISSED'} (wall)")


if __name__ == "__main__":
    main()
