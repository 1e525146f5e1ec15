"""InterCode-Python (MBPP): a persistent interpreter per episode inside a sandbox.

The interpreter runs in the sandbox (Docker image ``icplay-python``, or bwrap over the
host's python3), driven through the sandbox's shell (``icplay.python.interpreter``), never
in icplay's own process. ``step(code)`` runs one input as Python's REPL would: state
persists, a multi-line ``def`` is one action, a bare expression's value is shown, the
observation is what it printed plus the traceback's last line. ``submit NAME`` scores
the solver's function ``NAME`` out of the solver's reach (``icplay.python.scoring``): its
actions replayed in a fresh sandbox, the tests' calls run there, their results judged as
plain data in the gold's sandbox. The episode's own interpreter never sees a test.
"""

from __future__ import annotations

import itertools
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from icplay.envs.base import STREAMS_OUTPUT, StepResult, SubmitResult, strict_verdict
from icplay.envs.bash import BashSandboxes
from icplay.python.calls import Split, split_test
from icplay.python.interpreter import Interpreter
from icplay.python.reward import Outcome, Scored, gold_function_name, python_reward
from icplay.python.scoring import CallResult, judge, run_calls
from icplay.sandbox import registry as sandbox_kinds
from icplay.sandbox.base import DEFAULT_TIMEOUT, Sandbox
from icplay.sandbox.pool import SandboxPool
from icplay.sandbox.registry import HostRoot, SandboxRequest
from icplay.tasks.model import Task
from icplay.sandbox.bwrap import make_root_template, template_folder

DEFAULT_IMAGE = "icplay-python:latest"
TEST_TIMEOUT = 10.0      # seconds per test call at submit: a call that hangs is cut
# The gold's outcomes are the reference every scoring of the task compares with: a gold
# test cut by a slow moment of the machine would wrong every solver, so it gets longer.
GOLD_TEST_TIMEOUT = 60.0
RESTART_NOTE = "a new Python interpreter was started: the definitions of earlier actions are gone"
DIED_NOTE = "the Python interpreter exited; the next action starts a new one"


def task_tests(task: Task) -> tuple[list[str], str | None, list[Split], str]:
    """(tests, the gold function's name, each test split into calls and a check, set-up code)."""
    tests = [str(t) for t in task.extra.get("tests") or []]
    name = gold_function_name(task.gold, tests)
    setup = str(task.extra.get("test_setup_code") or "")
    return tests, name, [split_test(t, name) for t in tests], setup


class PythonSandboxes(BashSandboxes):
    """Sandboxes for Python episodes: containers of ``icplay-python``, or bwrap folders.

    Three roles: the episode's (pooled; not recycled: a Python episode's state is in a
    process, and a new container is as quick as a check); a scoring sandbox per submit
    (pooled, used once: the episode's actions are replayed there and the tests' calls run,
    then it is thrown away); and one kept gold sandbox that never runs a solver's code,
    where each gold's calls run in a pristine interpreter of their own (kept per task) and
    every judge runs, one at a time.
    """

    def __init__(self, kind: str = "docker", image: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 progress: Callable[[str], None] | None = None, spares: int = 1, recycle: bool = True):
        super().__init__(kind, image=image, timeout=timeout, progress=progress, spares=spares, recycle=False)
        self._gold_box: Sandbox | None = None
        self._gold_lock = threading.Lock()
        self._gold_scored: dict[tuple[str, str], Scored] = {}
        self._sessions = itertools.count(1)
        self._keeper: ThreadPoolExecutor | None = None
        self._empty: tempfile.TemporaryDirectory[str] | None = None

    def _image_for(self, task: Task) -> str:
        return self.image or DEFAULT_IMAGE

    def _make_factory(self, task: Task, role: str) -> Callable[[], Sandbox]:
        request = SandboxRequest("python", self._image_for(task), HostRoot(self._host_root), network=False,
                                 timeout=self.timeout, recycle=False, trusted=role == "gold", workdir="/root",
                                 progress=self.progress, own_image="--image" if self.image else "")
        return sandbox_kinds.sandbox_factory(self.kind, request)

    def _host_root(self) -> Path:
        """An empty testbed as a folder tree (made once), for kinds that run over one (bwrap)."""
        if self._template is None:
            self._empty = tempfile.TemporaryDirectory(prefix="icplay-python-")
            self._template = make_root_template(Path(self._empty.name), None, template_folder())
        return self._template

    def _gold_sandbox(self, task: Task) -> Sandbox:
        """The kept gold sandbox (call with ``_gold_lock`` held): golds and judges only, never the solver's code."""
        if self._gold_box is None:   # one kept sandbox (a pool would start a spare)
            # started in a thread that lives as long as these sandboxes: bwrap dies
            # with the thread that started it, and a run's worker threads end early
            if self._keeper is None:
                self._keeper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="icplay-python-gold")
            box = self._make_factory(task, "gold")()
            self._keeper.submit(box.start).result()
            self._gold_box = box
        return self._gold_box

    def gold_scored(self, task: Task) -> Scored:
        """The task's tests scored against its gold as a solver's function is (kept per task):
        its calls in a pristine interpreter of the gold's sandbox, their results judged."""
        key = (task.key, task.gold)
        with self._gold_lock:
            if key not in self._gold_scored:
                _, _, splits, setup = task_tests(task)
                box = self._gold_sandbox(task)
                caller = Interpreter(box, session=f"gold{next(self._sessions)}")
                try:
                    results = run_calls(caller, splits, gold_inputs(task, setup), GOLD_TEST_TIMEOUT)
                finally:
                    caller.stop()
                self._gold_scored[key] = judge(box, gold_code(task), setup, splits, results, GOLD_TEST_TIMEOUT)
            return self._gold_scored[key]

    def judged(self, task: Task, results: list[list[CallResult] | Outcome]) -> Scored:
        """A solver's call results judged in the gold's sandbox, by a judge of their own."""
        _, _, splits, setup = task_tests(task)
        with self._gold_lock:
            return judge(self._gold_sandbox(task), gold_code(task), setup, splits, results, GOLD_TEST_TIMEOUT)

    def solver_calls(self, task: Task, actions: list[str], function: str) -> list[list[CallResult] | Outcome]:
        """The tests' calls of ``function`` in a fresh sandbox of its own where ``actions``
        (the episode's, in order) are replayed first; the sandbox is thrown away after."""
        _, name, splits, setup = task_tests(task)
        inputs = list(actions)
        if name and function != name:
            inputs.append(f"{name} = {function}")
        if setup.strip():
            inputs.append(setup)
        pool = self.pool(task, role="score")
        box = pool.take()
        try:
            return run_calls(Interpreter(box), splits, inputs, TEST_TIMEOUT)
        finally:
            pool.discard(box)

    def close(self) -> None:
        with self._gold_lock:
            box, self._gold_box = self._gold_box, None
        if box is not None:
            box.close()
        if self._keeper is not None:
            self._keeper.shutdown(wait=True)
            self._keeper = None
        super().close()
        if self._empty is not None:
            self._empty.cleanup()
            self._empty = None


def gold_code(task: Task) -> str:
    return task.gold.replace("\r\n", "\n")


def gold_inputs(task: Task, setup: str) -> list[str]:
    """What defines the gold's side: the gold, then the set-up code."""
    return [gold_code(task), *([setup] if setup.strip() else [])]


class PythonEnv:
    """One Python episode at a time; ``reset`` starts the next in a new sandbox."""

    name = "python"
    capabilities = frozenset({STREAMS_OUTPUT})

    def __init__(self, sandboxes: PythonSandboxes, owns_sandboxes: bool = True):
        self.sandboxes = sandboxes
        self.owns_sandboxes = owns_sandboxes
        self.sandbox_kind = sandboxes.kind
        self.task: Task | None = None
        self._pool: SandboxPool | None = None
        self._sandbox: Sandbox | None = None
        self.interpreter: Interpreter | None = None
        self.history: list[str] = []          # actions that ran to the end: replayed in each scoring sandbox

    def reset(self, task: Task) -> str:
        self._release()
        self.task = task
        self._pool = pool = self.sandboxes.pool(task)
        self._sandbox = pool.take()
        self.interpreter = Interpreter(self._sandbox)
        self.history = []
        return task.query

    def step(self, action: str, on_output: Callable[[str], None] | None = None) -> StepResult:
        if self.interpreter is None:
            raise RuntimeError("reset() the environment before step()")
        had_state = bool(self.history) and not self.interpreter.alive
        result = self.interpreter.run(action, on_output=on_output)
        notes = list(result.info.get("notes") or [])
        if had_state and result.info.get("fresh_interpreter"):
            notes.insert(0, RESTART_NOTE)
            self.history = []
        if result.status == "died":
            notes.append(DIED_NOTE)
        if result.status in ("ok", "error"):
            self.history.append(action)
        info = {**result.info, "notes": notes}
        return StepResult(result.output, result.exit_code, result.duration, info)

    def submit(self, arg: str | None = None) -> SubmitResult:
        """Score the solver's function ``arg`` (default: the gold's name) against the gold,
        out of the solver's reach: nothing here runs in the episode's interpreter."""
        if self.interpreter is None or self.task is None:
            raise RuntimeError("reset() the environment before submit()")
        task = self.task
        tests, name, _, _ = task_tests(task)
        function = (arg or name or "").strip()
        gold = self.sandboxes.gold_scored(task)
        if not function.isidentifier():
            refused = Outcome("error", f"icplay: {function!r} is not a function name")
            yours = Scored([refused for _ in tests], [[] for _ in tests], [False for _ in tests])
        else:
            yours = self.sandboxes.judged(task, self.sandboxes.solver_calls(task, list(self.history), function))
        reward, breakdown, reasons = python_reward(tests, yours, gold)
        breakdown.update({"function": function, "gold_function": name})
        return SubmitResult(reward, breakdown, task.gold, strict_verdict(reward, reasons))

    def interrupt(self) -> None:
        if self._sandbox is not None:
            self._sandbox.interrupt()

    def _release(self) -> None:
        sandbox, self._sandbox, self.interpreter = self._sandbox, None, None
        if sandbox is not None and self._pool is not None:
            self._pool.discard(sandbox)

    def close(self) -> None:
        self._release()
        if self.owns_sandboxes:
            self.sandboxes.close()


def make_python_env(sandbox: str, image: str | None = None, timeout: float | None = None,
                    progress: Callable[[str], None] | None = None, recycle: bool = True, **options: Any) -> PythonEnv:
    """A Python env with its own sandboxes (the language spec's ``env``)."""
    return PythonEnv(PythonSandboxes(sandbox, image=image, timeout=timeout or DEFAULT_TIMEOUT, progress=progress))


class SharedPythonEnvs:
    """Python envs for parallel workers sharing one set of pools and gold outcomes."""

    def __init__(self, sandbox: str, image: str | None = None, timeout: float | None = None,
                 progress: Callable[[str], None] | None = None, recycle: bool = True, **options: Any) -> None:
        self.sandboxes = PythonSandboxes(sandbox, image=image, timeout=timeout or DEFAULT_TIMEOUT, progress=progress)

    def __call__(self) -> PythonEnv:
        return PythonEnv(self.sandboxes, owns_sandboxes=False)

    def stats(self) -> dict[str, int]:
        return self.sandboxes.stats()

    def close(self) -> None:
        self.sandboxes.close()
