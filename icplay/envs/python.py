"""InterCode-Python (MBPP): a persistent interpreter per episode inside a sandbox.

The interpreter runs in the sandbox (Docker image ``icplay-python``, or bwrap over the
host's python3), driven through the sandbox's shell (``icplay.python.interpreter``), never
in icplay's own process. ``step(code)`` runs one input as Python's REPL would: state
persists, a multi-line ``def`` is one action, a bare expression's value is shown, the
observation is what it printed plus the traceback's last line. ``submit NAME`` scores
the solver's function ``NAME`` with :mod:`icplay.python.reward`.
"""

from __future__ import annotations

import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from icplay.envs.base import STREAMS_OUTPUT, StepResult, SubmitResult
from icplay.envs.bash import BashSandboxes
from icplay.python.interpreter import Interpreter, PyResult
from icplay.python.reward import CUT, Outcome, gold_function_name, python_reward
from icplay.sandbox.base import DEFAULT_TIMEOUT, Sandbox, SandboxError
from icplay.tasks.model import Task

DEFAULT_IMAGE = "icplay-python:latest"
TEST_TIMEOUT = 10.0      # seconds per test at submit: a test that hangs is cut
# The gold's outcomes are the reference every scoring of the task compares with: a gold
# test cut by a slow moment of the machine would wrong every solver, so it gets longer.
GOLD_TEST_TIMEOUT = 60.0
RESTART_NOTE = "a new Python interpreter was started: the definitions of earlier actions are gone"
DIED_NOTE = "the Python interpreter exited; the next action starts a new one"


def outcome_of(result: PyResult) -> Outcome:
    how = f"{result.status} (exit {result.exit_code})"
    if result.cut:
        return Outcome(CUT, result.output, how)
    return Outcome("ok" if result.status == "ok" else "error", result.output, how)


class PythonSandboxes(BashSandboxes):
    """Sandboxes for Python episodes: containers of ``icplay-python``, or bwrap folders.

    Containers are not recycled (a Python episode's state is in a process, and a new
    container is as quick as a check). Golds run one at a time in one kept gold sandbox,
    each in a pristine interpreter of its own, and are kept per task.
    """

    def __init__(self, kind: str = "docker", image: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 progress: Callable[[str], None] | None = None, spares: int = 1, recycle: bool = True):
        super().__init__(kind, image=image, timeout=timeout, progress=progress, spares=spares, recycle=False)
        self._gold_box: Sandbox | None = None
        self._gold_lock = threading.Lock()
        self._gold_outcomes: dict[tuple[str, str], list[Outcome]] = {}
        self._golds_run = 0
        self._keeper: ThreadPoolExecutor | None = None
        self._empty: tempfile.TemporaryDirectory | None = None

    def _image_for(self, task: Task) -> str:
        return self.image or DEFAULT_IMAGE

    def _make_factory(self, task: Task, role: str) -> Callable[[], Sandbox]:
        if self.kind == "docker":
            from icplay.sandbox.docker import DockerSandbox
            from icplay.sandbox.images import docker_client, ensure_image

            if self._client is None:
                self._client = docker_client()
            image = self._image_for(task)
            if image == DEFAULT_IMAGE:
                ensure_image(self._client, "python", self.progress or (lambda line: None))
            client, timeout = self._client, self.timeout
            return lambda: DockerSandbox(client, image, network=False, timeout=timeout, recycle=False,
                                         trusted=role == "gold", workdir="/root")
        from icplay.sandbox.bwrap import BwrapSandbox, make_root_template, template_folder

        if self.image:
            raise SandboxError("--image applies to Docker only: use --sandbox docker")
        if self._template is None:
            self._empty = tempfile.TemporaryDirectory(prefix="icplay-python-")
            self._template = make_root_template(Path(self._empty.name), None, template_folder())
        template, timeout = self._template, self.timeout
        return lambda: BwrapSandbox(template, timeout=timeout, network=False)

    def gold_outcomes(self, task: Task) -> list[Outcome]:
        """The outcomes of the task's tests against its gold, in a pristine interpreter (kept per task)."""
        key = (task.key, task.gold)
        with self._gold_lock:
            if key not in self._gold_outcomes:
                if self._gold_box is None:   # one kept sandbox (a pool would start a spare)
                    # started in a thread that lives as long as these sandboxes: bwrap dies
                    # with the thread that started it, and a run's worker threads end early
                    if self._keeper is None:
                        self._keeper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="icplay-python-gold")
                    box = self._make_factory(task, "gold")()
                    self._keeper.submit(box.start).result()
                    self._gold_box = box
                self._golds_run += 1
                interpreter = Interpreter(self._gold_box, session=f"gold{self._golds_run}")
                try:
                    self._gold_outcomes[key] = run_tests(interpreter, task, None, replay=None)
                finally:
                    interpreter.stop()
            return self._gold_outcomes[key]

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


def run_tests(interpreter: Interpreter, task: Task, bind: str | None,
              replay: Callable[[], None] | None) -> list[Outcome]:
    """Each test's outcome in ``interpreter``: the gold (``bind`` None) is defined first;
    the solver's function ``bind`` is bound to the gold's name. ``replay`` restores the
    solver's interpreter after a test was cut (it killed the interpreter)."""
    tests = [str(t) for t in task.extra.get("tests") or []]
    name = gold_function_name(task.gold, tests)
    setup = str(task.extra.get("test_setup_code") or "")
    timeout = GOLD_TEST_TIMEOUT if bind is None else TEST_TIMEOUT

    def prepare() -> None:
        if bind is None:
            interpreter.run(task.gold.replace("\r\n", "\n"), timeout=timeout)
        elif replay is not None and not interpreter.alive:
            replay()
        if bind is not None and name and bind != name:
            interpreter.run(f"{name} = {bind}", timeout=timeout)
        if setup.strip():
            interpreter.run(setup, timeout=timeout)

    prepare()
    outcomes = []
    for test in tests:
        if not interpreter.alive:
            prepare()
        outcomes.append(outcome_of(interpreter.run(test, timeout=timeout)))
    return outcomes


class PythonEnv:
    """One Python episode at a time; ``reset`` starts the next in a new sandbox."""

    name = "python"
    capabilities = frozenset({STREAMS_OUTPUT})

    def __init__(self, sandboxes: PythonSandboxes, owns_sandboxes: bool = True):
        self.sandboxes = sandboxes
        self.owns_sandboxes = owns_sandboxes
        self.sandbox_kind = sandboxes.kind
        self.task: Task | None = None
        self._pool = None
        self._sandbox: Sandbox | None = None
        self.interpreter: Interpreter | None = None
        self.history: list[str] = []          # actions that ran to the end, to restore after a cut test

    def reset(self, task: Task) -> str:
        self._release()
        self.task = task
        self._pool = self.sandboxes.pool(task)
        self._sandbox = self._pool.take()
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

    def _replay(self) -> None:
        assert self.interpreter is not None
        for action in self.history:
            self.interpreter.run(action)

    def submit(self, arg: str | None = None) -> SubmitResult:
        """Score the solver's function ``arg`` (default: the gold's name) against the gold."""
        if self.interpreter is None or self.task is None:
            raise RuntimeError("reset() the environment before submit()")
        task = self.task
        tests = [str(t) for t in task.extra.get("tests") or []]
        name = gold_function_name(task.gold, tests)
        function = (arg or name or "").strip()
        gold = self.sandboxes.gold_outcomes(task)
        if not function.isidentifier():
            yours = [Outcome("error", f"icplay: {function!r} is not a function name") for _ in tests]
        else:
            yours = run_tests(self.interpreter, task, function, replay=self._replay)
        reward, breakdown = python_reward(tests, yours, gold)
        breakdown.update({"function": function, "gold_function": name})
        return SubmitResult(reward, breakdown, task.gold)

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
                    progress: Callable[[str], None] | None = None, recycle: bool = True, **options) -> PythonEnv:
    """A Python env with its own sandboxes (the language spec's ``env``)."""
    return PythonEnv(PythonSandboxes(sandbox, image=image, timeout=timeout or DEFAULT_TIMEOUT, progress=progress))


class SharedPythonEnvs:
    """Python envs for parallel workers sharing one set of pools and gold outcomes."""

    def __init__(self, sandbox: str, image: str | None = None, timeout: float | None = None,
                 progress: Callable[[str], None] | None = None, recycle: bool = True, **options):
        self.sandboxes = PythonSandboxes(sandbox, image=image, timeout=timeout or DEFAULT_TIMEOUT, progress=progress)

    def __call__(self) -> PythonEnv:
        return PythonEnv(self.sandboxes, owns_sandboxes=False)

    def stats(self) -> dict[str, int]:
        return self.sandboxes.stats()

    def close(self) -> None:
        self.sandboxes.close()
