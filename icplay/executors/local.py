"""Headless batch runs: episodes in parallel, live progress, one file per episode, resumable.

``Runner`` plays a list of tasks with one policy under one protocol. ``jobs`` worker
threads each own one Env (built on first use by ``env_factory``, so one sandbox per
episode slot) and take tasks from a shared queue. Every episode is saved to its own file
after every turn (``TrajectoryStore``); a rerun over the same folder skips the episodes
whose file says ``submitted`` and redoes the rest (stopped, errored, half-done).

Stopping: a run-wide budget (tokens, cost), Ctrl-C, or an error that no episode can
get past (bad API key, no model server, no sandbox) sets a stop flag; running episodes
stop before their next turn and are left for the rerun.

This module never imports textual: progress goes to a plain stream.
"""

from __future__ import annotations

import json
import logging
import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TextIO

from icplay.agents.protocols import Budget, Limits
from icplay.threads import Worker
from icplay.envs.base import Env
from icplay.executors.episode import FatalEpisodeError, run_episode
from icplay.executors.specs import EnvSpec, PolicySpec, RunSpec
from icplay.episode import Policy, Trajectory, strict_mark
from icplay.report import Summary, solved_at, summarize
from icplay.sandbox.base import SandboxError
from icplay.store import TrajectoryBusyError, TrajectoryFileError, TrajectoryStore, atomic_write_json
from icplay.json_shape import read_json_text
from icplay.tasks.model import Task

_log = logging.getLogger(__name__)

# run.json keys that must match for a folder to be resumed
IDENTITY_KEYS = ("env", "tasks", "policy", "protocol", "max_turns")


class RunConfigError(ValueError):
    """The output folder holds a different run; the message says what differs."""


@dataclass
class RunResult:
    trajectories: list[Trajectory]           # finished and failed episodes, in task order
    resumed: int = 0                         # episodes found finished on disk and not rerun
    played: int = 0                          # episodes played in this run
    stopped: str | None = None               # why the run stopped early, if it did
    errors: list[str] = field(default_factory=list)
    elapsed: float = 0.0

    def summary(self, label: str = "", max_turns: int | None = None) -> Summary:
        return summarize(self.trajectories, label, max_turns)


class Progress:
    """A one-line live status on a terminal; one line per finished episode otherwise."""

    def __init__(self, total: int, stream: TextIO | None = None, live: bool | None = None, resumed: int = 0,
                 interval: float = 0.5):
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.total = total
        self.resumed = resumed
        self.done = resumed
        self.solved = 0
        self.strict_solved = 0
        self.strict_judged = 0       # finished episodes with a strict verdict
        self.running = 0
        self.tokens = 0
        self.cost = 0.0
        self.unpriced = False
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._interval = interval
        self._thread: threading.Thread | None = None
        self._width = 0

    def start(self) -> "Progress":
        if self.live:
            self._thread = threading.Thread(target=self._tick, name="icplay-progress", daemon=True)
            self._thread.start()
        return self

    def _tick(self) -> None:
        while not self._stop.wait(self._interval):
            self.draw()

    def line(self) -> str:
        with self._lock:
            pct = f" ({100 * self.solved / self.done:.1f}%)" if self.done else ""
            elapsed = int(time.monotonic() - self.started)
            cost = "unpriced" if self.unpriced and not self.cost else f"${self.cost:.4f}"
            bar_w = 20
            filled = int(bar_w * self.done / self.total) if self.total else bar_w
            bar = "█" * filled + "░" * (bar_w - filled)
            usage = f"{self.tokens:,} tokens · {cost} · " if self.tokens or self.unpriced else ""
            strict = str(self.strict_solved) if self.strict_judged else strict_mark(None)
            return (f"{bar} {self.done}/{self.total} · solved {self.solved}{pct} · strict {strict} · "
                    f"running {self.running} · "
                    f"{usage}{elapsed // 60}:{elapsed % 60:02d}")

    def draw(self) -> None:
        if not self.live:
            return
        text = self.line()
        pad = max(0, self._width - len(text))
        self._width = len(text)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()

    def started_episode(self) -> None:
        with self._lock:
            self.running += 1

    def add_usage(self, tokens: int, cost: float | None) -> None:
        with self._lock:
            self.tokens += tokens
            if cost is None:
                self.unpriced = True
            else:
                self.cost += cost

    def finished(self, traj: Trajectory | None, note: str = "") -> None:
        with self._lock:
            self.running -= 1
            if traj is not None and traj.status == "submitted":
                self.done += 1
                self._count(traj)
        if self.live:
            self.draw()
        elif traj is not None:
            at = solved_at(traj)
            status = (f"solved at turn {at}" if at else f"reward {traj.best_reward if traj.best_reward is not None else traj.reward}"
                      ) if traj.status == "submitted" else traj.status + (f": {traj.error}" if traj.error else "")
            if traj.status == "submitted":
                status += f" (strict {strict_mark(traj.strictly_solved)})"
            self.stream.write(f"[{self.done}/{self.total}] {traj.task_key}: {status}{note}\n")
            self.stream.flush()

    def counted_resumed(self, trajs: list[Trajectory]) -> None:
        with self._lock:
            for t in trajs:
                self._count(t)
                self.tokens += t.tokens
                self.cost += t.usage.get("cost") or 0.0

    def _count(self, traj: Trajectory) -> None:
        """A finished episode in the solved counts (InterCode's and strict); the lock is held."""
        self.solved += int(traj.solved)
        verdict = traj.strictly_solved
        self.strict_judged += verdict is not None
        self.strict_solved += verdict is True

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self.live:
            self.draw()
            self.stream.write("\n")
            self.stream.flush()


def _identity(run: dict[str, Any], key: str) -> Any:
    value = run.get(key)
    if key == "policy" and isinstance(value, dict):   # the endpoint or sampling may change between reruns
        return {k: value.get(k) for k in ("kind", "model", "strategy", "source")}
    return value


def check_run_folder(out: Path, identity: dict[str, Any], fresh: bool = False) -> None:
    """Refuse to mix two different runs in one folder; write ``run.json``."""
    run_file = out / "run.json"
    if run_file.is_file() and not fresh:
        try:
            old = json.loads(read_json_text(run_file, "a run's description"))
        except (OSError, ValueError):      # unreadable, huge, too deep, not JSON: it describes no run
            old = {}
        old = old if isinstance(old, dict) else {}
        diff = [k for k in IDENTITY_KEYS if k in old and _identity(old, k) != _identity(identity, k)]
        if diff:
            k = diff[0]
            raise RunConfigError(f"{out} holds another run ({k}: {old.get(k)!r}, not {identity.get(k)!r}); "
                                 "use another --out, or --fresh to start over")
    if fresh and out.exists():
        for path in out.rglob("*.json"):
            path.unlink()
    atomic_write_json(run_file, {**identity, "updated_at": time.time()})


class Runner:
    """The local executor: ``jobs`` worker threads, each with its own env, run the tasks'
    episodes (``run_episode``) with one shared policy.

    Built from live objects (``env_factory``, ``policy``: what a library caller or a test
    has at hand) or from a ``RunSpec`` with ``Runner.from_spec`` (what ``icplay run`` does,
    as the other executors)."""

    def __init__(self, tasks: list[Task], env_factory: Callable[[], Env] | None, policy: Policy | None,
                 policy_info: dict[str, Any], store: TrajectoryStore, protocol: str = "intercode",
                 limits: Limits | None = None, jobs: int = 1, budget: Budget | None = None,
                 progress: Progress | None = None, resume: bool = True, spec: RunSpec | None = None):
        self.tasks = tasks
        self.env_factory = env_factory
        self.policy = policy
        self.policy_info = policy_info
        self.store = store
        self.protocol = protocol
        self.limits = limits or Limits()
        # what run_episode reads of the run (the live env and policy above are passed with it)
        self.spec = spec or RunSpec(EnvSpec(getattr(env_factory, "env_name", "") or ""), PolicySpec("live"),
                                    protocol, self.limits, dict(policy_info))
        self.jobs = max(1, jobs)
        self.budget = budget
        self.progress = progress
        self.resume = resume
        self._stop = threading.Event()
        self._stop_reason: str | None = None
        self._lock = threading.Lock()
        self._envs: list[Env] = []
        self._drivers: set = set()       # episodes under way, stopped mid-call by stop()
        self._local = threading.local()

    @classmethod
    def from_spec(cls, tasks: list[Task], spec: RunSpec, store: TrajectoryStore, **options: Any) -> "Runner":
        """A runner whose env factory and policy are built here from ``spec``."""
        return cls(tasks, spec.env_factory(), spec.build_policy(), dict(spec.policy_info), store,
                   protocol=spec.protocol, limits=spec.limits, spec=spec, **options)

    # -- stopping -------------------------------------------------------------
    def stop(self, reason: str) -> None:
        with self._lock:
            if self._stop_reason is None:
                self._stop_reason = reason
            drivers = list(self._drivers)
        self._stop.set()
        for driver in drivers:    # cancel model calls under way (a command runs to its end)
            driver.cancel_call()

    def _should_stop(self) -> bool:
        if self._stop.is_set():
            return True
        if self.budget is not None and (why := self.budget.exhausted()):
            self.stop(why)
            return True
        return False

    # -- resume ---------------------------------------------------------------
    def finished_before(self, task: Task) -> Trajectory | None:
        if not self.resume:
            return None
        try:
            traj = self.store.load_for(task.set, task.id)
        except TrajectoryFileError:
            return None
        if traj is not None and traj.status == "submitted":
            return traj
        return None

    # -- workers --------------------------------------------------------------
    def _env(self) -> Env:
        env = getattr(self._local, "env", None)
        if env is None:
            assert self.env_factory is not None, "only Ray's runner has none, and its nodes make the envs"
            env = self.env_factory()
            self._local.env = env
            with self._lock:
                self._envs.append(env)
        return env

    def _play(self, task: Task) -> Trajectory | None:
        env = self._env()
        progress = self.progress
        seen: dict[str, Any] = {"tokens": 0, "cost": 0.0}   # what the progress line has counted

        def on_turn(traj: Trajectory) -> None:
            if progress is None:
                return
            usage = traj.usage
            tokens = traj.tokens
            cost = usage.get("cost")
            progress.add_usage(tokens - seen["tokens"], None if cost is None and usage.get("calls") else
                               (cost or 0.0) - seen["cost"])
            seen["tokens"], seen["cost"] = tokens, cost or 0.0

        mine: list = []

        def register(driver) -> None:
            mine.append(driver)
            with self._lock:
                self._drivers.add(driver)
            if self._stop.is_set():
                driver.cancel_call()

        try:
            traj = run_episode(task, self.spec, env=env, policy=self.policy, save=self.store.save,
                               budget=self.budget, should_stop=self._should_stop, on_turn=on_turn,
                               on_driver=register)
        except FatalEpisodeError as exc:
            self.stop(str(exc))
            if exc.trajectory is not None:
                exc.trajectory.status, exc.trajectory.error = "stopped", str(exc)
                self.store.save(exc.trajectory)
            return None
        finally:
            with self._lock:
                self._drivers.difference_update(mine)
        on_turn(traj)
        if traj.status == "error" and self._stop.is_set():
            # failing while the run stops (a fatal error elsewhere, Ctrl-C reaching the
            # sandboxes' processes) is not the episode's fault: leave it for the rerun
            traj.status = "stopped"
            self.store.save(traj)
            return None
        return traj

    def _worker(self, tasks: "queue.Queue[tuple[int, Task]]", results: dict[int, Trajectory],
                errors: list[str]) -> None:
        while not self._should_stop():
            try:
                index, task = tasks.get_nowait()
            except queue.Empty:
                return
            if self.progress:
                self.progress.started_episode()
            traj = None
            try:
                self.store.claim(task.set, task.id)
            except TrajectoryBusyError as exc:
                # another icplay process is running this task into the same folder: leave it
                # to that one (a rerun picks up what it did not finish)
                if self.progress:
                    self.progress.finished(None)
                    self.progress.stream.write(f"skipped {task.set}/{task.id}: {exc}\n")
                continue
            try:
                traj = self._play(task)
            except Exception as exc:   # building the env failed (any language's, a plug-in's too): the run stops, said
                self.stop(f"{type(exc).__name__}: {exc}" if not isinstance(exc, SandboxError) else str(exc))
            finally:
                if self.progress:
                    self.progress.finished(traj)
            if traj is not None:
                if traj.status == "error":
                    with self._lock:
                        errors.append(f"{traj.task_key}: {traj.error}")
                        all_failed = len(errors) >= 3 and not any(r.status == "submitted" for r in results.values())
                    if all_failed:   # outside the lock: stop() takes it (a Lock, not re-entrant)
                        self.stop(f"the first episodes all failed; last error: {traj.error}")
                if traj.status in ("submitted", "error"):
                    with self._lock:
                        results[index] = traj

    def split_finished(self) -> tuple[dict[int, Trajectory], list[Trajectory], list[tuple[int, Task]]]:
        """Results already on disk (by task position), those trajectories, and the tasks to play."""
        results: dict[int, Trajectory] = {}
        resumed: list[Trajectory] = []
        todo: list[tuple[int, Task]] = []
        for i, task in enumerate(self.tasks):
            before = self.finished_before(task)
            if before is not None:
                results[i] = before
                resumed.append(before)
            else:
                todo.append((i, task))
        return results, resumed, todo

    def run(self) -> RunResult:
        started = time.monotonic()
        try:
            self.store.stop_abandoned()      # episodes an earlier run left running when it died
        except OSError:
            pass
        results, resumed, pending = self.split_finished()
        todo: "queue.Queue[tuple[int, Task]]" = queue.Queue()
        for item in pending:
            todo.put(item)
        to_play = todo.qsize()
        self._start_progress(resumed)
        errors: list[str] = []
        # The main thread waits on the workers' ``ended`` events, not on join (icplay/threads.py:
        # an interrupted join marks a running worker stopped, and icplay then exited under a
        # running episode, its exit hook refusing the episode's next container).
        workers = [Worker(self._worker, (todo, results, errors), name=f"icplay-run-{n}")
                   for n in range(min(self.jobs, max(1, to_play)))]
        try:
            for w in workers:
                w.start()
            for w in workers:
                while not w.wait(timeout=0.2):
                    pass
        except KeyboardInterrupt:
            self._interrupt_workers(workers)
        finally:
            self._close_envs()
        return self._result(results, resumed, errors, started)

    def _start_progress(self, resumed: list[Trajectory]) -> None:
        """The progress line counts the episodes an earlier run finished, then starts."""
        if self.progress:
            self.progress.resumed = len(resumed)
            self.progress.done = len(resumed)
            self.progress.counted_resumed(resumed)
            self.progress.start()

    def _interrupt_workers(self, workers: list[Worker]) -> None:
        """Ctrl+C: stop taking tasks, interrupt the running actions, give the workers 30 s."""
        self.stop("interrupted")
        for env in list(self._envs):
            try:
                env.interrupt()
            except Exception as exc:   # any language's env: Ctrl+C must reach the others; the 30 s wait bounds it
                _log.warning("interrupting an env failed: %s: %s", type(exc).__name__, exc)
        deadline = time.monotonic() + 30
        for w in workers:
            w.wait(timeout=max(0.0, deadline - time.monotonic()))

    def _close_envs(self) -> None:
        """The progress line ended, every env closed, then the factory (errors on the way ignored)."""
        if self.progress:
            self.progress.close()
        for env in self._envs:
            try:
                env.close()
            except Exception as exc:   # any language's env: one that fails must not keep the rest open
                _log.warning("closing an env failed: %s: %s", type(exc).__name__, exc)
        close_factory = getattr(self.env_factory, "close", None)
        if close_factory is not None:
            try:
                close_factory()
            except Exception as exc:   # the run's results are made; a factory that fails to close is said only
                _log.warning("closing the env factory failed: %s: %s", type(exc).__name__, exc)

    def _result(self, results: dict[int, Trajectory], resumed: list[Trajectory], errors: list[str],
                started: float) -> RunResult:
        """The run's episodes in task order, with how many were played now and how it ended."""
        trajs = [results[i] for i in sorted(results)]
        old = {id(t) for t in resumed}
        played = sum(1 for t in trajs if id(t) not in old)
        return RunResult(trajs, resumed=len(resumed), played=played, stopped=self._stop_reason,
                         errors=errors, elapsed=time.monotonic() - started)
