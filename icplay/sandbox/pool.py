"""Keep started sandboxes ready, so an episode's reset does not wait for a container.

``take()`` hands over a started sandbox (a spare or a recycled one if ready) and starts
the next spare in the background; ``discard()`` gives a used sandbox back: one that can
``recycle()`` itself (a Docker container that proves itself pristine again) joins the
ready list, any other is closed in the background. Starting a container and its shell
costs a few hundred milliseconds; done ahead of time, reset is a hand-over, and a
recycled container spares Docker the start altogether.
"""

from __future__ import annotations

import logging
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable

from icplay.sandbox.base import Sandbox

_log = logging.getLogger(__name__)

# Starting a sandbox is CPU work (for Docker, mostly the daemon's): a burst of starts, as
# when eight workers begin at once, finishes sooner one per core at a time, and the first
# ones are ready early instead of all of them late.
_START_SLOTS = threading.BoundedSemaphore(max(1, os.cpu_count() or 1))


class SandboxPool:
    def __init__(self, make: Callable[[], Sandbox], spares: int = 1, recycle: bool = True, urgent: bool = False):
        self._make = make
        self._urgent = urgent   # starts skip the queue for start slots (the gold pool: everyone waits on it)
        self._spares = spares
        self._recycle = recycle
        # futures of sandboxes: spares being started and used ones being recycled; a
        # recycling future resolves to None when the sandbox could not be made pristine
        self._ready: list[Future[Sandbox | None]] = []
        self._lock = threading.Lock()
        self._workers = ThreadPoolExecutor(max_workers=4, thread_name_prefix="icplay-pool")
        self._closed = False
        self._in_use = 0
        self._peak = 0
        self.started = 0      # sandboxes this pool started (for benchmarks and tests)
        self.recycled = 0     # sandboxes handed out again after a recycle

    def _started(self) -> Sandbox:
        sandbox = self._make()
        try:
            if self._urgent:
                sandbox.start()
            else:
                with _START_SLOTS:
                    sandbox.start()
        except BaseException:   # even Ctrl+C: the half-started sandbox is closed, the error re-raised
            try:
                sandbox.close()
            except Exception:   # any kind's close (a plug-in's too): the start error is the one to report
                pass
            raise
        with self._lock:
            self.started += 1
        return sandbox

    def _refill(self) -> None:
        with self._lock:
            while not self._closed and len(self._ready) < self._spares:
                self._ready.append(self._workers.submit(self._started))

    def take(self) -> Sandbox:
        """A started sandbox; raises the start error (e.g. SandboxError) if one fails."""
        while True:
            with self._lock:
                future = self._ready.pop(0) if self._ready else None
            if future is None:
                sandbox = self._started()
                break
            recycled = future.result()
            if recycled is not None:
                sandbox = recycled
                break
        with self._lock:
            self._in_use += 1
            self._peak = max(self._peak, self._in_use)
        self._refill()
        return sandbox

    def discard(self, sandbox: Sandbox | None) -> None:
        """Give a used sandbox back: recycled if it can be, else closed (in the background)."""
        if sandbox is None:
            return
        with self._lock:
            self._in_use = max(0, self._in_use - 1)
            keep = (self._recycle and not self._closed and sandbox.capabilities.recyclable
                    and len(self._ready) < self._spares + self._peak)
            if keep:
                self._ready.append(self._workers.submit(self._recycled, sandbox))
                return
            closed = self._closed
        if closed:
            sandbox.close()
        else:
            self._workers.submit(sandbox.close)

    def _recycled(self, sandbox: Sandbox) -> Sandbox | None:
        try:
            ok = sandbox.recycle()
        except Exception as exc:   # any kind's recycle (a plug-in's too): not pristine, so not handed out
            _log.warning("a %s sandbox could not be recycled: %s: %s", type(sandbox).__name__,
                         type(exc).__name__, exc)
            ok = False
        if not ok:
            try:
                sandbox.close()
            except Exception as exc:   # a pool worker: a failed close must not end the pool
                _log.warning("a %s sandbox could not be closed: %s: %s", type(sandbox).__name__,
                             type(exc).__name__, exc)
            return None
        with self._lock:
            self.recycled += 1
        return sandbox

    def close(self) -> None:
        with self._lock:
            self._closed = True
            ready, self._ready = self._ready, []
        def close_when_ready(future: Future[Sandbox | None]) -> None:
            try:
                sandbox = future.result()
            except Exception:   # a spare that failed to start: nothing to close, nobody took it
                return
            if sandbox is not None:
                sandbox.close()

        # in parallel: removing a container takes Docker a good fraction of a second
        closing = [threading.Thread(target=close_when_ready, args=(f,), daemon=True) for f in ready]
        for thread in closing:
            thread.start()
        for thread in closing:
            thread.join()
        self._workers.shutdown(wait=True)


class PoolsByKey:
    """The pools of one env's sandboxes, one per key (image, network, role), made on first
    use and closed together."""

    def __init__(self) -> None:
        self._pools: dict[str, SandboxPool] = {}
        self._lock = threading.Lock()

    def get(self, key: str, make: Callable[[], SandboxPool]) -> SandboxPool:
        with self._lock:
            if key not in self._pools:
                self._pools[key] = make()
            return self._pools[key]

    def stats(self) -> dict[str, int]:
        """Sandboxes started and recycled so far, over all pools."""
        with self._lock:
            pools = list(self._pools.values())
        return {"started": sum(p.started for p in pools), "recycled": sum(p.recycled for p in pools)}

    def close(self) -> None:
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()
