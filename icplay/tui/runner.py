"""The episode runner: the one place where a screen's episode is opened, stepped and scored.

A screen owns one ``EpisodeRunner``. Everything that blocks — leasing a sandbox, the
reset and the replay of saved turns, each step, the reward — runs on the runner's own
worker thread, one job at a time, and is reported back as a plain event through
``emit`` (the screen wraps it in a Textual Message). The worker never touches the
screen; the screen keeps its view state from the events it receives. No textual here.
"""

from __future__ import annotations

import gc
import getpass
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable

from icplay.envs.base import SubmitResult
from icplay.episode import HUMAN, Episode, Trajectory, Turn
from icplay.store import StoreError
from icplay.tasks.model import Task
from icplay.tui.sandbox import Lease, SandboxPool

# Python's cyclic garbage collector stops every thread while it walks the heap; with a
# 100 000-row result alive that walk takes 50-80 ms, enough to delay a key press. So it
# is paused while a step builds its result, and the objects that survive a big step are
# frozen (left out of later walks) until the task is left (see the screen). Refcounting
# frees the rows themselves either way.
BIG_RESULT = 10_000
_gc_lock = threading.Lock()
_gc_pauses = 0


@contextmanager
def gc_paused():
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


# -- events (posted from the worker thread) ------------------------------------------------

@dataclass
class Progress:
    line: str


@dataclass
class Replaying:
    n: int
    total: int
    action: str


@dataclass
class Opened:
    episode: Episode
    replayed: int
    sandbox: str


@dataclass
class Viewing:
    """The task was submitted before: its episode is shown read-only."""
    trajectory: Trajectory


@dataclass
class Failed:
    error: str


@dataclass
class StepDone:
    turn: Turn | None
    error: str | None = None


@dataclass
class Scored:
    result: SubmitResult | None
    error: str | None = None


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def user_name() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "unknown"


class EpisodeRunner:
    """Opens one task's episode on a leased sandbox and runs its jobs in order.

    Called from the UI thread: ``open``, ``step``, ``submit``, ``run`` (any job),
    ``interrupt``, ``close``. ``episode`` is set by the worker before ``Opened`` is
    emitted; the UI reads it only after that event.
    """

    def __init__(self, task: Task, pool: SandboxPool, session, emit: Callable[[object], None],
                 before_save: Callable[[Trajectory], None] | None = None):
        self.task = task
        self.pool = pool
        self.session = session
        self.emit = emit
        self.before_save = before_save
        self.lease: Lease | None = None
        self.episode: Episode | None = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"episode {task.key}")
        self._lock = threading.Lock()
        self._busy = 0                   # jobs queued or running
        self._closing = False
        self._in_use = threading.Lock()  # held while a job uses the env (``hold`` holds it back)
        self._step_over: threading.Event | None = None

    # -- jobs ------------------------------------------------------------------------------

    def run(self, job: Callable[[], Any], name: str = "job") -> Future:
        """Run ``job`` on the worker after the jobs before it; returns its future."""
        with self._lock:
            self._busy += 1

        def wrapped():
            try:
                with self._in_use:
                    return job()
            finally:
                with self._lock:
                    self._busy -= 1
                    last = self._busy == 0 and self._closing
                if last:
                    self._give_back()

        return self._executor.submit(wrapped)

    @contextmanager
    def hold(self):
        """Hold the next job back until the block ends (tests: a key that comes before the step starts)."""
        with self._in_use:
            yield

    @property
    def env(self):
        return self.lease.env if self.lease is not None else None

    # -- open ------------------------------------------------------------------------------

    def open(self, policy: dict[str, Any], retry: bool = False, view_submitted: bool = True,
             set_base: Callable[[float], None] | None = None) -> Future:
        """Lease a sandbox and open the task's episode (resumed if it has saved turns).
        A submitted task is shown read-only (``Viewing``) unless ``retry``."""

        def job() -> None:
            try:
                prior = self.session.load(self.task)
                if prior is not None and prior.status == "submitted" and not retry and view_submitted:
                    self.emit(Viewing(prior))
                    return
                if prior is not None and prior.status != "submitted" and set_base is not None:
                    set_base(prior.time_worked)
                self.lease = self.pool.lease(self.task.env, progress=lambda line: self.emit(Progress(line)))
                try:
                    with gc_paused():
                        episode, replayed = self.session.open_episode(
                            self.lease.env, self.task, policy=policy, before_save=self.before_save,
                            on_replay=lambda n, total, turn: self.emit(Replaying(n, total, turn.action)))
                except BaseException:
                    lease, self.lease = self.lease, None
                    lease.discard()
                    raise
                self.episode = episode
                self.emit(Opened(episode, replayed, self.lease.env.sandbox_kind))
            except Exception as exc:    # shown on the screen: the app stays usable
                self.emit(Failed(describe(exc)))

        return self.run(job, "open")

    # -- steps ----------------------------------------------------------------------------

    def step(self, action: str, on_output: Callable[[str], None] | None = None, author: str = HUMAN,
             **turn_fields: Any) -> Future:
        episode = self.episode
        assert episode is not None
        over = threading.Event()
        self._step_over = over

        def job() -> None:
            try:
                with gc_paused():
                    turn = episode.act(action, author, on_output=on_output, **turn_fields)
                over.set()
                self.emit(StepDone(turn))
            except Exception as exc:
                over.set()
                self.emit(StepDone(None, describe(exc)))

        return self.run(job, "step")

    def submit(self, arg: str | None = None) -> Future:
        episode = self.episode
        assert episode is not None

        def job() -> None:
            try:
                with gc_paused():
                    result = episode.submit(arg)
                self.emit(Scored(result))
            except Exception as exc:
                self.emit(Scored(None, describe(exc)))

        return self.run(job, "submit")

    def interrupt(self) -> None:
        """Stop the running step. The envs drop an interrupt that arrives before the command
        has started (they clear the flag when a step begins), so it is repeated until the
        step is over."""
        over, env = self._step_over, self.env
        if over is None or over.is_set() or env is None:
            return
        env.interrupt()

        def again() -> None:
            while not over.wait(0.25):
                env.interrupt()

        threading.Thread(target=again, name="interrupt", daemon=True).start()

    # -- leaving --------------------------------------------------------------------------

    def close(self, save: bool = True) -> None:
        """The screen is leaving: stop a running step, save, and give the sandbox back
        once the job under way (if any) has ended."""
        self.interrupt()
        if save and self.episode is not None and self.episode.trajectory.status == "running":
            try:
                self.episode.save()
            except (OSError, StoreError):    # a full disk: the file keeps its last save
                pass
        with self._lock:
            self._closing = True
            idle = self._busy == 0
            if not idle and self.lease is not None:
                self.pool.leaving(self.lease)
        if idle:
            self._give_back()
        self._executor.shutdown(wait=False)

    def _give_back(self) -> None:
        lease, self.lease = self.lease, None
        if lease is not None:
            lease.give_back()
