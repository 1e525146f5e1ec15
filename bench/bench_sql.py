"""SQL backends: query round trip and per-episode reset, SQLite against MariaDB in Docker.

Run: .venv/bin/python bench/bench_sql.py [--n 300] [--episodes 60] [--source sql|spider] [--parity]

Everything is measured in this one run and printed with ratios:
- round trip: a trivial ``SELECT 1`` and a small GROUP BY, through ``backend.execute``;
- reset, clean: a new episode after a read-only one (the common case);
- reset, dirty: a new episode after one that dropped a table (the database is reloaded);
- baseline: rebuilding the episode's database from its SQL text at every reset (MariaDB:
  DROP/CREATE/replay; SQLite: convert with sqlglot and load), i.e. the naive way to get a
  pristine database;
- env reset: ``SqlEnv.reset`` (backend reset plus the gold query on the pristine copy);
- new backend: a backend made, reset and closed, as a trainer's env per episode does
  (SQLite: a warm worker borrowed from its pool; MariaDB: a container started);
- sqlite in icplay's process: the round trips and the clean reset as the SQLite backend
  did them before its worker process (a backup-API copy per reset, statements on it
  here), so the worker's cost is measured in the same run.
``--parity`` also runs the 1034 Spider golds on both backends and counts how many run on
SQLite and how many return the same rows as on MariaDB (the figures in docs/sql.md).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import time

from icplay.envs.sql import SqlEnv
from icplay.sql import make_sql_backend
from icplay.sql.convert import convert_statements
from icplay.sql.dump import load_catalog
from icplay.sql.sqlite import prepare_connection
from icplay.tasks.registry import load_tasks

QUERIES = {"sql": ("bookshop", "SELECT genre, COUNT(*) FROM books GROUP BY genre ORDER BY genre", "order_items"),
           "spider": ("car_1", "SELECT Maker, COUNT(*) FROM model_list GROUP BY Maker ORDER BY Maker", "model_list")}


def ms(samples: list[float]) -> str:
    if not samples:
        return "-"
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"{statistics.median(samples) * 1000:9.3f} ms (p90 {p90 * 1000:.3f})"


def timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def bench_backend(kind: str, source: str, n: int, episodes: int) -> dict[str, list[float]]:
    tasks = load_tasks(source)
    databases = tasks[0].extra["databases"]
    db, query, drop = QUERIES[source]
    backend = make_sql_backend(kind)
    t0 = time.perf_counter()
    backend.reset(db, databases)
    first = time.perf_counter() - t0
    results: dict[str, list[float]] = {"first reset (start, load)": [first]}
    for _ in range(20):
        backend.execute("SELECT 1")
    results["round trip SELECT 1"] = timed(lambda: backend.execute("SELECT 1"), n)
    results["round trip GROUP BY"] = timed(lambda: backend.execute(query), n)
    clean = []
    for _ in range(episodes):
        backend.execute(query)
        t0 = time.perf_counter()
        backend.reset(db, databases)
        clean.append(time.perf_counter() - t0)
    results["reset, clean episode"] = clean
    dirty = []
    for _ in range(max(10, episodes // 3)):
        backend.execute(f"DROP TABLE {drop}")
        t0 = time.perf_counter()
        backend.reset(db, databases)
        dirty.append(time.perf_counter() - t0)
    results["reset, dirty episode"] = dirty
    results["baseline: rebuild db"] = baseline(kind, backend, databases, db, max(10, episodes // 3))
    env = SqlEnv(backend)
    sample = [t for t in tasks if t.db == db][:episodes] or tasks[:episodes]
    results["env reset (+ gold)"] = [timed(lambda t=t: env.reset(t), 1)[0] for t in sample]
    backend.close()
    results["new backend: reset, close"] = timed(lambda: fresh_episode(kind, db, databases),
                                                 max(10, episodes // 3) if kind == "sqlite" else 3)
    return results


def fresh_episode(kind: str, db: str, databases: str) -> None:
    """What a trainer's env per episode costs: a new backend, its first reset, its close
    (SQLite: a warm worker borrowed from the pool and given back)."""
    backend = make_sql_backend(kind)
    backend.reset(db, databases)
    backend.close()


def bench_in_process(source: str, n: int, episodes: int) -> dict[str, list[float]]:
    """SQLite as the backend ran it before the worker: copies and statements in this process."""
    from icplay.sql.sqlite import TEMPLATES, SqliteBackend
    from icplay.sql.sqlite_guard import Deadline, confine, episode_connection

    tasks = load_tasks(source)
    databases = tasks[0].extra["databases"]
    db, query, _ = QUERIES[source]
    backend = SqliteBackend()
    catalog = load_catalog(databases)
    template = prepare_connection(sqlite3.connect(":memory:"))
    template.deserialize(TEMPLATES.image(backend.template_file(catalog, db)))
    deadline = Deadline()

    def copy():
        conn = episode_connection()
        template.backup(conn)
        confine(conn, deadline)
        return conn

    conn = copy()

    def run(sql):
        deadline.start(10.0)
        cursor = conn.execute(sql)
        cursor.fetchmany(100_001)
        cursor.close()
    results = {"round trip SELECT 1": timed(lambda: run("SELECT 1"), n),
               "round trip GROUP BY": timed(lambda: run(query), n)}
    clean = []
    for _ in range(episodes):
        run(query)
        t0 = time.perf_counter()
        conn.close()
        conn = copy()
        clean.append(time.perf_counter() - t0)
    results["reset, clean episode"] = clean
    conn.close()
    template.close()
    backend.close()
    return results


def baseline(kind: str, backend, databases: str, db: str, n: int) -> list[float]:
    """The naive pristine reset: build the database from its text every time."""
    catalog = load_catalog(databases)
    entry = catalog.get(db)
    if kind == "mysql":
        from icplay.sql.mysql_admin import load_database

        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            with backend._admin_lock:
                cursor = backend._admin.cursor(buffered=True)
                load_database(cursor, entry.name, entry)
                cursor.close()
            out.append(time.perf_counter() - t0)
        return out

    def build():
        conn = prepare_connection(sqlite3.connect(":memory:"))
        for statement in convert_statements(entry.statements):
            conn.execute(statement)
        conn.close()
    return timed(build, n)


def parity() -> None:
    tasks = load_tasks("spider")
    databases = tasks[0].extra["databases"]
    mysql, sqlite, sqlite_asis = (make_sql_backend("mysql"), make_sql_backend("sqlite"),
                                  make_sql_backend("sqlite", gold_dialect="sqlite"))
    counts = {"mariadb runs": 0, "sqlite runs": 0, "sqlite runs (gold as written)": 0,
              "same rows, same order": 0, "same rows, any order": 0, "same rows (gold as written)": 0}
    for task in tasks:
        results = {}
        for name, backend in (("m", mysql), ("s", sqlite), ("a", sqlite_asis)):
            backend.reset(task.db, databases)
            results[name] = backend.gold(task.gold)
        m, s, a = results["m"], results["s"], results["a"]
        counts["mariadb runs"] += m.is_result
        counts["sqlite runs"] += s.is_result
        counts["sqlite runs (gold as written)"] += a.is_result
        if m.is_result and s.is_result:
            keys_m, keys_s = [str(r) for r in m.rows], [str(r) for r in s.rows]
            counts["same rows, same order"] += keys_m == keys_s
            counts["same rows, any order"] += sorted(keys_m) == sorted(keys_s)
        if m.is_result and a.is_result:
            counts["same rows (gold as written)"] += [str(r) for r in m.rows] == [str(r) for r in a.rows]
    mysql.close()
    print(f"\nSpider golds ({len(tasks)}), rows compared as str(tuple(row)):")
    for key, value in counts.items():
        print(f"  {key:<32} {value:5d} / {len(tasks)}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=300, help="queries per round-trip measurement")
    parser.add_argument("--episodes", type=int, default=60, help="resets per measurement")
    parser.add_argument("--source", choices=tuple(QUERIES), default="sql", help="bundled set or Spider")
    parser.add_argument("--parity", action="store_true", help="also compare the Spider golds on both backends")
    args = parser.parse_args()
    measured = {kind: bench_backend(kind, args.source, args.n, args.episodes) for kind in ("sqlite", "mysql")}
    print(f"\nSQL backends on the '{args.source}' set (median, p90; one run)")
    print(f"{'':28} {'sqlite':>28} {'mysql (MariaDB)':>28} {'mysql/sqlite':>13}")
    for key in measured["sqlite"]:
        s, m = measured["sqlite"][key], measured["mysql"][key]
        ratio = statistics.median(m) / statistics.median(s) if s and statistics.median(s) else float("nan")
        print(f"{key:28} {ms(s):>28} {ms(m):>28} {ratio:12.1f}x")
    before = bench_in_process(args.source, args.n, args.episodes)
    print("\nSQLite in its worker process against SQLite in icplay's process (before the worker)")
    for key, samples in before.items():
        worker = measured["sqlite"][key]
        print(f"{key:28} {ms(worker):>28} {ms(samples):>28} "
              f"{statistics.median(worker) / statistics.median(samples):12.1f}x")
    for kind in ("sqlite", "mysql"):
        r = measured[kind]
        gain = statistics.median(r["baseline: rebuild db"]) / statistics.median(r["reset, clean episode"])
        print(f"{kind}: a clean reset is {gain:.0f}x faster than rebuilding the database")
    if args.parity:
        parity()


if __name__ == "__main__":
    main()
