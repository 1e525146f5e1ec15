"""Sandbox leases: each screen borrows its own env from the app's pool and gives it back.

Starting a sandbox is slow (a container, a database copy), so an env given back is kept
and lent to the next screen of the same language; it is reset when that screen opens its
episode. A lease is exclusive: two screens never drive one env, so no lock is needed
around a step. An env whose screen failed with it is closed instead of kept.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from icplay.envs.base import Env

_log = logging.getLogger(__name__)

# (language, sandbox or None for the default, image or None, progress callback) -> Env
EnvFactory = Callable[[str, "str | None", "str | None", Callable[[str], None]], Env]


class Lease:
    """One env lent to one screen until ``give_back`` (or ``discard``)."""

    def __init__(self, pool: "SandboxPool", kind: str, env: Env):
        self.pool, self.kind, self.env = pool, kind, env
        self.returned = False

    def give_back(self) -> None:
        self.pool._return(self, keep=True)

    def discard(self) -> None:
        """The env may be broken (its reset failed): close it rather than lend it again."""
        self.pool._return(self, keep=False)


class SandboxPool:
    """Envs by language, lent one screen at a time; thread-safe (leases are taken in workers)."""

    def __init__(self, factory: EnvFactory, sandbox_for: Callable[[str], "str | None"], image: str | None = None):
        self.factory = factory
        self.sandbox_for = sandbox_for
        self.image = image
        self._idle: dict[str, list[Env]] = {}
        self._leased: set[Lease] = set()
        self._returning: dict[str, int] = {}     # leases of a language whose screen has left
        self._cond = threading.Condition()
        self._closed = False

    def lease(self, kind: str, progress: Callable[[str], None] | None = None, wait: float = 20.0) -> Lease:
        """An env of ``kind`` for one screen. Blocks (call from a worker): it may start a
        sandbox. If a screen that just left is still finishing a step on its env, that env
        is waited for (up to ``wait`` s) rather than starting a second sandbox."""
        with self._cond:
            if self._closed:
                raise RuntimeError("the playground is closing")
            self._cond.wait_for(lambda: self._idle.get(kind) or not self._returning.get(kind), timeout=wait)
            if self._idle.get(kind):
                lease = Lease(self, kind, self._idle[kind].pop())
                self._leased.add(lease)
                return lease
        env = self.factory(kind, self.sandbox_for(kind), self.image, progress or (lambda line: None))
        with self._cond:
            lease = Lease(self, kind, env)
            if self._closed:
                _close(env)
                raise RuntimeError("the playground is closing")
            self._leased.add(lease)
            return lease

    def leaving(self, lease: Lease) -> None:
        """The lease's screen has left; its env comes back once the step under way ends."""
        with self._cond:
            self._returning[lease.kind] = self._returning.get(lease.kind, 0) + 1

    def _return(self, lease: Lease, keep: bool) -> None:
        closing: Env | None = lease.env
        with self._cond:
            if lease.returned:
                return
            lease.returned = True
            self._leased.discard(lease)
            if self._returning.get(lease.kind):
                self._returning[lease.kind] -= 1
            if keep and not self._closed:
                self._idle.setdefault(lease.kind, []).append(lease.env)
                closing = None
            self._cond.notify_all()
        if closing is not None:
            _close(closing)

    @property
    def envs(self) -> list[Env]:
        """Every env the pool holds, lent or idle."""
        with self._cond:
            return [e for envs in self._idle.values() for e in envs] + [lease.env for lease in self._leased]

    def close(self, wait: float = 15.0) -> None:
        """After the app has exited: let running steps finish (they save their turn) and
        give their envs back, then close every env."""
        with self._cond:
            self._closed = True
            self._cond.wait_for(lambda: not self._leased, timeout=wait)
            envs = [e for envs in self._idle.values() for e in envs] + [lease.env for lease in self._leased]
            self._idle.clear()
            self._leased.clear()
        for env in envs:
            _close(env)


def _close(env: Env) -> None:
    try:
        env.close()
    except Exception as exc:   # any language's env (a plug-in's too): one that fails must not keep the rest open
        _log.warning("closing a %s env failed: %s: %s", getattr(env, "name", "?"), type(exc).__name__, exc)
