"""SQLite's warm worker pool: a worker serves one backend after another, and nothing of one
episode reaches the next (its changes, pragmas, temporary tables, memory, interrupts); a
worker that is unsound is stopped, never lent again; the pool is bounded and fork-safe.

Each test makes its own pool (no spares, so which worker comes back is known), real
worker processes and real SQLite."""

from __future__ import annotations

import os
import threading

import pytest

from icplay.sql.sqlite import SqliteBackend
from icplay.sql.sqlite_pool import WorkerPool
from test_sql_support import BUNDLED

COUNT = "SELECT COUNT(*) FROM authors"
SLOW = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3000000) SELECT COUNT(*) FROM r"


@pytest.fixture
def pool():
    made = WorkerPool(spares=0)
    yield made
    made.close()


def backend_on(pool: WorkerPool, **options) -> SqliteBackend:
    backend = SqliteBackend(pool=pool, **options)
    backend.reset("bookshop", BUNDLED)
    return backend


def pid_of(backend: SqliteBackend) -> int:
    assert backend._worker is not None and backend._worker.proc is not None
    return backend._worker.proc.pid


def test_the_next_backend_gets_the_same_worker_and_a_pristine_episode(pool):
    first = backend_on(pool)
    worker = pid_of(first)
    for statement in ("DROP TABLE authors", "CREATE TABLE mine (x INT)", "CREATE TEMP TABLE scratch AS SELECT 1 AS x",
                      "CREATE TEMP VIEW v AS SELECT 2", "PRAGMA query_only = 1", "PRAGMA cache_size = 7",
                      "PRAGMA foreign_keys = ON", "PRAGMA recursive_triggers = ON"):
        assert first.execute(statement).error is None, statement
    first.close()
    assert first._worker is None and pool.idle() == 1

    second = backend_on(pool)
    assert pid_of(second) == worker                       # reused: no process start
    assert second.execute(COUNT).rows == [(12,)]          # the table the first one dropped
    for probe in ("SELECT * FROM mine", "SELECT * FROM scratch", "SELECT * FROM v"):
        assert second.execute(probe).error, probe
    assert second.execute("PRAGMA cache_size").rows == [(-2000,)]
    assert second.execute("PRAGMA foreign_keys").rows == [(0,)]
    assert second.execute("PRAGMA recursive_triggers").rows == [(0,)]
    assert second.execute("CREATE TABLE t (x INT)").error is None       # query_only is off again
    second.close()


def test_refused_process_wide_statements_leave_a_worker_that_is_lent_again(pool):
    first = backend_on(pool)
    worker = pid_of(first)
    for statement in ("PRAGMA hard_heap_limit = 1", "PRAGMA temp_store_directory = '/etc'",
                      "ATTACH DATABASE '/tmp/x.db' AS x", "SELECT load_extension('/tmp/x.so')"):
        assert "refused" in first.execute(statement).error, statement
    first.close()
    second = backend_on(pool)
    assert pid_of(second) == worker
    assert [row[1] for row in second.execute("PRAGMA database_list").rows] == ["main"]    # nothing attached
    second.close()


def test_a_worker_whose_memory_peaked_is_stopped_not_lent(pool):
    first = backend_on(pool, timeout=60)
    worker = first._worker
    grown = first.execute("CREATE TEMP TABLE big AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r "
                          "WHERE n < 180) SELECT randomblob(1000000) AS b FROM r")
    assert grown.error is None, grown.error
    first.close()
    assert pool.idle() == 0 and worker is not None and not worker.alive
    second = backend_on(pool)
    assert second._worker is not worker and second.execute(COUNT).rows == [(12,)]
    second.close()


def test_a_worker_killed_while_lent_is_not_given_back(pool):
    first = backend_on(pool)
    worker = first._worker
    assert worker is not None and worker.proc is not None
    worker.proc.kill()
    worker.proc.wait()
    first.close()
    assert pool.idle() == 0


def test_an_interrupt_for_the_last_borrower_never_stops_the_next_ones_statement(pool):
    first = backend_on(pool)
    first.close()
    second = backend_on(pool, timeout=60)
    assert second._worker is not None
    late = threading.Timer(0.2, first.interrupt)       # the first episode's stop button, pressed late
    late.start()
    result = second.execute(SLOW)
    late.join()
    assert result.error is None and not result.interrupted and result.rows == [(3000000,)]
    stop = threading.Timer(0.2, second.interrupt)      # its own interrupt still works
    stop.start()
    assert second.execute(SLOW).interrupted
    stop.join()
    second.close()


def test_idle_workers_are_bounded_and_stopped_at_close():
    pool = WorkerPool(spares=0, max_idle=1)
    backends = [backend_on(pool) for _ in range(3)]
    workers = [b._worker for b in backends]
    for backend in backends:
        backend.close()
    assert pool.idle() == 1
    assert sum(w is not None and w.alive for w in workers) == 1
    pool.close()
    assert not any(w is not None and w.alive for w in workers)
    late = backend_on(pool)               # a pool closed at exit still serves; what comes back is stopped
    worker = late._worker
    late.close()
    assert worker is not None and not worker.alive and pool.idle() == 0


def test_spares_are_started_ahead_of_demand():
    pool = WorkerPool(spares=2)
    try:
        backend = backend_on(pool)         # the first borrower starts its own; two spares start behind it
        backend.close()
        spare_started = threading.Event()
        for _ in range(600):
            if pool.idle() >= 3:
                spare_started.set()
                break
            spare_started.wait(0.1)
        assert pool.idle() == 3
    finally:
        pool.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_uses_workers_of_its_own_and_leaves_the_parents_alone(pool):
    parent = backend_on(pool)
    idle = backend_on(pool)
    idle.close()
    parent_workers = {pid_of(parent), *(w.proc.pid for w in pool._idle if w.proc)}
    read, write = os.pipe()
    child = os.fork()
    if child == 0:     # the child: its own worker, a clean exit that touches no parent's worker
        code = 1
        try:
            os.close(read)
            backend = SqliteBackend(pool=pool)
            backend.reset("bookshop", BUNDLED)
            ok = backend.execute(COUNT).rows == [(12,)] and pid_of(backend) not in parent_workers
            backend.close()
            os.write(write, b"ok" if ok else b"no")
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as reply:
        said = reply.read()
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and said == b"ok"
    assert parent.execute(COUNT).rows == [(12,)]          # the parent's lent worker still answers
    assert pool.idle() == 1 and pool._idle[0].alive        # and its idle one is still there
    parent.close()
