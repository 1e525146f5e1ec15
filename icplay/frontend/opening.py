"""Opening a task's episode, for every front end; and one screen's episode on a leased sandbox.

``open_episode`` is how every front end (the TUI's screens, line mode, a study's queue in
line mode) opens a task's episode: resumed from its saved turns (replayed into the fresh
env) or new, with what could not be read set aside and said (``Opening``).

A screen (a page, a tab) owns one ``EpisodeHost``. On the host's own thread it leases an
env from the pool, opens the task's episode (resumed: saved turns replayed; a submitted
one only shown) and then runs the ``Driver`` the screen built for it until the episode
ends or the screen leaves; the sandbox goes back to the pool when both have happened.
Every step, submit and interrupt goes through that driver (its broker's requests answered
by the screen), so a human's play and an agent's watch are one loop. What the host does
before the driver runs is reported as plain events through ``emit``. No textual here.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable

from icplay.driver.driver import Driver
from icplay.envs.base import Env
from icplay.episode import Episode, Trajectory, Turn
from icplay.frontend.leases import Lease, SandboxPool
from icplay.session import Session
from icplay.store import TrajectoryFileError
from icplay.tasks.model import Task
from icplay.threads import Worker

# Python's cyclic garbage collector stops every thread while it walks the heap; with a
# 100 000-row result alive that walk takes 50-80 ms, enough to delay a key press. So it
# is paused while a step builds its result, and the objects that survive a big step are
# frozen (left out of later walks) until the task is left (see the screen). Refcounting
# frees the rows themselves either way.
BIG_RESULT = 10_000
_gc_lock = threading.Lock()
_gc_pauses = 0


@contextmanager
def gc_paused() -> Iterator[None]:
    global _gc_pauses
    with _gc_lock:
        _gc_pauses += 1
        if _gc_pauses == 1:
            gc.disable()
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0:
                gc.enable()


def is_big(turn: Turn) -> bool:
    rows = (turn.info or {}).get("rows")
    return (rows is not None and len(rows) >= BIG_RESULT) or len(turn.observation) > 1_000_000


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


@dataclass(frozen=True)
class Opening:
    """A task's episode as it was opened."""
    episode: Episode
    replayed: int                    # saved turns replayed into the env (0: a new episode)
    set_aside: tuple[str, ...] = ()  # one sentence per saved file that could not be read (moved aside)

    @property
    def resumed(self) -> str | None:
        """The line that says the episode was resumed, or None for a new one."""
        return f"(resumed: {self.replayed} saved turn(s) replayed)" if self.replayed else None


def open_episode(session: Session, env: Env, task: Task, policy: dict[str, Any] | None = None,
                 before_save: Callable[[Trajectory], None] | None = None,
                 on_replay: Callable[[int, int, Turn], None] | None = None) -> Opening:
    """``task``'s episode in ``session`` on ``env``: resumed (its saved turns replayed, each
    reported to ``on_replay``) or new (``policy``: what the trajectory says of who acts). The
    driver is built on it by the front end (``Driver(opening.episode, settings)``)."""
    episode, replayed = session.open_episode(env, task, policy=policy, on_replay=on_replay, before_save=before_save)
    set_aside = tuple(session.set_aside)
    del session.set_aside[:len(set_aside)]
    return Opening(episode, replayed, set_aside)


# -- what the host reports before its driver runs (posted from the host's thread) ----------

@dataclass(frozen=True)
class Progress:
    line: str


@dataclass(frozen=True)
class Replaying:
    n: int
    total: int
    action: str


@dataclass(frozen=True)
class Opened:
    episode: Episode
    replayed: int
    sandbox: str
    driver: Driver


@dataclass(frozen=True)
class Viewing:
    """The task was submitted before: its episode is shown read-only."""
    trajectory: Trajectory


@dataclass(frozen=True)
class Failed:
    error: str


HostEvent = Progress | Replaying | Opened | Viewing | Failed


class EpisodeHost:
    """Opens one task's episode on a leased sandbox and runs its driver; see the module docstring.

    From the UI thread: ``open``, ``leave``; ``driver`` and ``episode`` once ``Opened`` came.
    """

    def __init__(self, task: Task, pool: SandboxPool, session: Session, emit: Callable[[HostEvent], None],
                 before_save: Callable[[Trajectory], None] | None = None) -> None:
        self.task = task
        self.pool = pool
        self.session = session
        self.emit = emit
        self.before_save = before_save
        self.lease: Lease | None = None
        self.driver: Driver | None = None
        self._thread: Worker | None = None
        self._lock = threading.Lock()
        self._leaving = False
        self._done = False                # the host's thread has ended (or never started)
        self._in_use = threading.Lock()   # held while a command runs (``hold`` holds it back)

    @property
    def episode(self) -> Episode | None:
        return self.driver.episode if self.driver is not None else None

    @property
    def env(self) -> Any:
        return self.lease.env if self.lease is not None else None

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Hold the next command back until the block ends (tests: a key that comes before it starts)."""
        with self._in_use:
            yield

    @contextmanager
    def around_action(self) -> Iterator[None]:
        """Wraps each command the driver runs (``Driver(around_action=...)``)."""
        with self._in_use, gc_paused():
            yield

    # -- the host's thread -----------------------------------------------------------------

    def open(self, policy: dict[str, Any], make_driver: Callable[[Episode], Driver], retry: bool = False,
             set_base: Callable[[float], None] | None = None) -> None:
        """Lease a sandbox, open the task's episode (resumed if it has saved turns), and run the
        driver ``make_driver`` builds for it. A submitted task is shown read-only (``Viewing``)
        unless ``retry``."""
        self._thread = Worker(lambda: self._host(policy, make_driver, retry, set_base),
                              name=f"episode {self.task.key}")
        self._thread.start()

    def _host(self, policy: dict[str, Any], make_driver: Callable[[Episode], Driver], retry: bool,
              set_base: Callable[[float], None] | None) -> None:
        try:
            driver = self._open(policy, make_driver, retry, set_base)
            if driver is not None:
                driver.run()
        finally:
            with self._lock:
                self._done = True
                leaving = self._leaving
            if leaving:
                self._give_back()

    def _prior(self) -> Trajectory | None:
        """The task's saved trajectory; None when there is none, or when it cannot be read
        (``open_episode`` then sets it aside and says so, as in every front end)."""
        try:
            return self.session.load(self.task)
        except TrajectoryFileError:
            return None

    def _open(self, policy: dict[str, Any], make_driver: Callable[[Episode], Driver], retry: bool,
              set_base: Callable[[float], None] | None) -> Driver | None:
        try:
            prior = self._prior()
            if prior is not None and prior.status == "submitted" and not retry:
                self.emit(Viewing(prior))
                return None
            if prior is not None and prior.status != "submitted" and set_base is not None:
                set_base(prior.time_worked)
            self.lease = self.pool.lease(self.task.env, progress=lambda line: self.emit(Progress(line)))
            try:
                with gc_paused():
                    opening = open_episode(self.session, self.lease.env, self.task, policy, self.before_save,
                                           lambda n, total, turn: self.emit(Replaying(n, total, turn.action)))
                for note in opening.set_aside:
                    self.emit(Progress(note))
            except BaseException:   # even Ctrl+C: the half-opened env is discarded, the error re-raised
                lease, self.lease = self.lease, None
                lease.discard()
                raise
            with self._lock:
                if self._leaving:        # left while it opened: saved as it stands
                    return None
                self.driver = make_driver(opening.episode)
            self.emit(Opened(opening.episode, opening.replayed, self.lease.env.sandbox_kind, self.driver))
            return self.driver
        except Exception as exc:    # whatever failed (a sandbox, a database, a plug-in's env): shown, the app stays usable
            self.emit(Failed(describe(exc)))
            return None

    # -- leaving ---------------------------------------------------------------------------

    def leave(self, stop: Callable[[Driver], None] | None = None) -> None:
        """The screen is leaving: end the driver (``stop``, else ``Driver.leave``: saved as it
        stands), and give the sandbox back once the command under way (if any) has ended."""
        with self._lock:
            self._leaving = True
            driver = self.driver
            done = self._done or self._thread is None
            if not done and self.lease is not None:
                self.pool.leaving(self.lease)
        if driver is not None and not driver.ended:
            (stop or Driver.leave)(driver)
        if done:
            self._give_back()

    def _give_back(self) -> None:
        lease, self.lease = self.lease, None
        if lease is not None:
            lease.give_back()


__all__ = ["open_episode", "Opening", "EpisodeHost", "HostEvent", "Progress", "Replaying", "Opened", "Viewing", "Failed", "gc_paused", "is_big",
           "describe", "BIG_RESULT"]
