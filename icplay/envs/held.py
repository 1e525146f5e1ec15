"""The sandbox an episode holds, for the envs over shell sandboxes (Bash, CTF).

It is taken from a pool at reset — at once, or (``lazy``) on a thread of the env's own
while the policy thinks about its first action — and given back to the pool when the
episode ends. A lazy take's error is raised where the sandbox is first needed.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

from icplay.sandbox.base import Sandbox
from icplay.sandbox.pool import SandboxPool
from icplay.tasks.model import Task


class HeldSandbox:
    def __init__(self, lazy: bool = False):
        self.lazy = lazy
        self.pool: SandboxPool | None = None
        self._sandbox: Sandbox | None = None
        self._pending: Future[Sandbox] | None = None
        self._taker: ThreadPoolExecutor | None = None

    def take(self, pool: SandboxPool, take: Callable[[SandboxPool], Sandbox] | None = None) -> None:
        """Give back the sandbox held so far and take the next from ``pool`` (``take(pool)``
        says how, e.g. taking it and copying files in; default ``pool.take()``)."""
        self.release()
        self.pool = pool

        def taking() -> Sandbox:
            return take(pool) if take is not None else pool.take()

        if self.lazy:
            # A thread that lives as long as the env: bwrap dies with the thread that
            # started it (--die-with-parent follows the thread, not the process).
            if self._taker is None:
                self._taker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="icplay-take")
            self._pending = self._taker.submit(taking)
        else:
            self._sandbox = taking()

    @property
    def sandbox(self) -> Sandbox | None:
        """The sandbox (waiting for it if it is still being taken)."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self._sandbox = pending.result()
        return self._sandbox

    @property
    def ready(self) -> Sandbox | None:
        """The sandbox if it is there already, without waiting (for a prompt's cwd, an interrupt)."""
        return self._sandbox

    def release(self) -> None:
        """Give the sandbox back to its pool (one still being taken, once it is there)."""
        pool, pending, sandbox = self.pool, self._pending, self._sandbox
        self._pending = self._sandbox = None
        if pool is None:
            return
        if pending is not None:   # never used: give it back once it is there
            pending.add_done_callback(lambda f: pool.discard(f.result()) if f.exception() is None else None)
        elif sandbox is not None:
            pool.discard(sandbox)

    def close(self) -> None:
        self.release()
        if self._taker is not None:
            self._taker.shutdown(wait=True)
            self._taker = None


class PooledShellEnv:
    """What an env over a held shell sandbox does the same way whatever its language (CTF,
    Harbor): the sandbox it holds, the shell's cwd for a prompt, interrupt, close. A
    subclass sets ``name`` and ``capabilities`` and writes reset / step / submit;
    ``sandboxes`` has ``kind`` and ``close()``."""

    def __init__(self, sandboxes: Any, owns_sandboxes: bool = True, lazy: bool = False):
        self.sandboxes = sandboxes
        self.owns_sandboxes = owns_sandboxes
        self.sandbox_kind = sandboxes.kind
        self.task: Task | None = None
        self.lazy = lazy            # the sandbox is taken while the policy thinks
        self.held = HeldSandbox(lazy)

    @property
    def sandbox(self) -> Sandbox | None:
        return self.held.sandbox

    @property
    def cwd(self) -> str | None:
        return self.held.ready.shell.cwd if self.held.ready is not None else None

    def interrupt(self) -> None:
        if self.held.ready is not None:
            self.held.ready.interrupt()

    def close(self) -> None:
        self.held.close()
        if self.owns_sandboxes:
            self.sandboxes.close()


class SharedSandboxesFactory:
    """Envs for parallel workers sharing one set of pools (``icplay run -j N``): a
    subclass makes ``self._shared`` and says in ``__call__`` how an env is made over it."""

    _shared: Any

    def stats(self) -> dict[str, int]:
        stats: dict[str, int] = self._shared.stats()
        return stats

    def close(self) -> None:
        self._shared.close()
