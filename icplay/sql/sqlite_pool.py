"""Warm SQLite worker processes, lent to one backend at a time.

Trainers make and drop environments by the thousand; a worker process costs a Python
start (~100 ms) where an episode costs a millisecond. So every SQLite backend of icplay's
process borrows its worker here at its first reset and gives it back at ``close``:

- between two borrowers the worker is reset (every connection closed: the episode's
  copies, pragmas, temporary tables and limits go with them) and checked: a worker whose
  process-wide SQLite settings moved, whose memory ever passed ``RECYCLE_PEAK`` beyond
  its images (and a copy of each), that died or stopped answering, is stopped, never
  lent again;
- ``SPARES`` workers are started ahead of demand, in a thread, so a borrower rarely waits
  for a start; at most ``MAX_IDLE`` wait idle, the rest are stopped when given back;
- a borrower's lease is new each time: an interrupt meant for the previous borrower never
  reaches the next one's statement (``WorkerClient.interrupt``);
- thread-safe; after ``fork`` the child starts with an empty pool of its own (the
  parent's workers are the parent's); idle workers are stopped at exit (a lent one ends
  when icplay's end of its pipe closes).
"""

from __future__ import annotations

import atexit
import os
import threading

from icplay.sql.sqlite_worker import RECYCLE_PEAK, START_TIMEOUT, WorkerClient, WorkerLost

SPARES = 2       # idle workers kept started ahead of demand
MAX_IDLE = 16    # idle workers kept at most (each ~20 MB plus its images)


class WorkerPool:
    """Idle, reset workers; see the module docstring."""

    def __init__(self, spares: int = SPARES, max_idle: int = MAX_IDLE, recycle_peak: int = RECYCLE_PEAK) -> None:
        self.spares, self.max_idle, self.recycle_peak = spares, max_idle, recycle_peak
        self._fresh()

    def _fresh(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[WorkerClient] = []
        self._starting = 0
        self._pid = os.getpid()
        self._closed = False

    def acquire(self) -> WorkerClient:
        """A started worker holding no episode (a new one if none is idle)."""
        with self._lock:
            self._check_fork()
            client = self._idle.pop() if self._idle else None
            self._top_up()
        if client is None:
            client = WorkerClient()
            client.start()
        client.next_lease()
        return client

    def release(self, client: WorkerClient) -> None:
        """Take a worker back: reset and kept if it is sound and there is room, else stopped."""
        client.next_lease()
        if not client.alive:
            client.stop()
            return
        try:
            reply = client.request({"op": "reset"}, timeout=START_TIMEOUT)
        except WorkerLost:
            return      # already stopped by the client
        # the images it holds and an episode's copy of each are its due; beyond that, a bomb
        allowed = self.recycle_peak + 2 * sum(client.images.values())
        if reply.get("replace") or reply.get("error") or int(reply.get("peak", 0)) > allowed:
            client.stop()
            return
        with self._lock:
            if not self._closed and self._pid == os.getpid() and len(self._idle) < self.max_idle:
                self._idle.append(client)
                return
        client.stop()

    def _top_up(self) -> None:
        """Start workers in a thread until ``spares`` are idle or starting (lock held)."""
        missing = self.spares - len(self._idle) - self._starting
        if missing <= 0 or self._closed:
            return
        self._starting += missing
        threading.Thread(target=self._start_spares, args=(missing, self._pid), name="icplay-sqlite-spares",
                         daemon=True).start()

    def _start_spares(self, count: int, pid: int) -> None:
        for _ in range(count):
            client = _started()
            with self._lock:
                if self._pid != pid:    # forked meanwhile: this thread's pool is the parent's
                    return
                self._starting -= 1
                kept = client is not None and not self._closed and len(self._idle) < self.max_idle
                if kept and client is not None:
                    self._idle.append(client)
            if client is not None and not kept:
                client.stop()

    def _check_fork(self) -> None:
        if self._pid != os.getpid():
            self._forget()

    def _forget(self) -> None:
        """In a forked child: drop the parent's workers without touching them."""
        idle = self._idle
        self._fresh()
        for client in idle:
            client.stop()      # a client made in another process only closes its pipes

    def close(self) -> None:
        """Stop the idle workers; workers given back later are stopped too."""
        with self._lock:
            self._check_fork()
            idle, self._idle = self._idle, []
            self._closed = True
        for client in idle:
            client.stop()

    def idle(self) -> int:
        with self._lock:
            return len(self._idle)


def _started() -> WorkerClient | None:
    client = WorkerClient()
    try:
        client.start()
    except WorkerLost:
        return None
    return client


POOL = WorkerPool()
atexit.register(POOL.close)
os.register_at_fork(after_in_child=POOL._forget)
