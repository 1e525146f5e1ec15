"""InterCode-Bash: reset / step / submit over a shell sandbox, scored as InterCode scores.

The agent works in one sandbox; the gold command runs in a second, pristine sandbox of the
same initial state (taken from a pool, so it is already started) the first time the task
is scored, and its result is kept for later scorings of the same task. The
reward compares the two: ``git status --short`` of each root, md5 of the paths both
added, and the TF-IDF cosine of the agent's last output with the gold's output.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

from icplay.bash.compat import IntercodeBashEnv
from icplay.envs.held import PooledShellEnv
from icplay.envs.base import HAS_CWD, STREAMS_OUTPUT, StepResult, SubmitResult, strict_verdict
from icplay.envs.bash_facts import Facts, gather
from icplay.envs.bash_reward import BashReward, bash_reward, paths_to_hash
from icplay.paths import data_dir
from icplay.sandbox.base import DEFAULT_TIMEOUT, Sandbox, SandboxError, ShellResult
from icplay.sandbox.faithful import advance_pids
from icplay.sandbox import registry as sandbox_kinds
from icplay.sandbox.pool import PoolsByKey, SandboxPool
from icplay.sandbox.registry import HostRoot, SandboxRequest
from icplay.tasks.model import Task
from icplay.sandbox.bwrap import make_root_template, template_folder

_R = TypeVar("_R")

DEFAULT_IMAGE = "icplay-bash:latest"

def sandbox_facts(sandbox: Sandbox) -> Facts:
    """The sandbox's listings and hashes (bash_facts.gather); a sandbox whose facts cannot
    be read at all (its listing beyond the output cap, git killed by the timeout) is
    scored as InterCode scored a failing ``git status``: its error is one unmatched change."""
    try:
        return gather(sandbox)
    except SandboxError as exc:
        error = [("error", str(exc)[:300])]
        return Facts(list(error), list(error), errors=[str(exc)[:300]])


def strict_reasons(agent: Facts, gold: "GoldRun") -> list[str]:
    """Why a run that may score 1.0 is not strictly solved: a change the gold's run did not
    make (or made and the solver did not), listed against the pristine index with ignored
    files included, or a changed path (modified files too) whose content, type or execute
    bit differs from the gold copy's."""
    reasons = list(agent.errors)
    mine, theirs = set(agent.strict_changes), set(gold.strict_changes)
    for status, path in sorted(mine - theirs):
        reasons.append(f"{path}: changed ({status}) where the gold's run did not change it so")
    for status, path in sorted(theirs - mine):
        reasons.append(f"{path}: the gold's run changed it ({status}), the solver did not")
    paths = {p.rstrip("/") for _s, p in (*gold.changes, *gold.strict_changes, *agent.changes, *agent.strict_changes)}
    for path in sorted(paths):
        if agent.strict_hashes.get(path, "unread") != gold.strict_hashes.get(path, "unread"):
            reasons.append(f"{path}: its content differs from the gold copy's")
    return reasons


@dataclass(frozen=True)
class GoldRun:
    """What the gold command does to a pristine sandbox: its output, changes and hashes.

    Most golds are deterministic (same initial state, same command), so one run per task
    serves every scoring of it: the ``intercode`` protocol scores after every action, and
    re-running the gold each time would cost a container per turn. A gold whose two runs
    at prefetch differ (``date``, ``$RANDOM``, a file's time in ``ls -l``) is marked
    ``nondeterministic`` and run again at every submit (see ``BashEnv.submit``).
    """

    output: str
    exit_code: int | None
    changes: tuple[tuple[str, str], ...]
    hashes: dict[str, str]
    # the strict verdict's facts: the listing against the pristine index (ignored files
    # too) and the content, type and execute bit of every path either listing names
    strict_changes: tuple[tuple[str, str], ...] = ()
    strict_hashes: dict[str, str] = dataclasses.field(default_factory=dict)
    nondeterministic: bool = False
    earlier: tuple["GoldRun", ...] = ()     # a nondeterministic gold's earlier prefetch run
    # faithful sandboxes: the pid namespace's last pid before and after the gold ran (0:
    # unknown); the gold's own processes were numbered between the two
    start_pid: int = 0
    end_pid: int = 0
    shell_pid: int = 0

    def shows_own_pids(self) -> bool:
        """Whether the output names a pid of the gold's own processes (``find /`` walking
        /proc, ``ps``): it then depends on how many processes ran before it."""
        if not self.start_pid or self.end_pid <= self.start_pid or self.end_pid - self.start_pid > 1000:
            return False
        numbers = set(re.findall(r"(?<![0-9])[0-9]+(?![0-9])", self.output))
        return any(str(pid) in numbers for pid in range(self.start_pid + 1, self.end_pid + 1))

    def same_as(self, other: "GoldRun") -> bool:
        return ((self.output, self.changes, self.hashes, self.strict_changes, self.strict_hashes)
                == (other.output, other.changes, other.hashes, other.strict_changes, other.strict_hashes))


# The second prefetch run starts at least this long after the first ended, so that a gold
# printing the time to the second (``date``) differs between the two and is detected.
SECOND_RUN_GAP = 1.05


def last_pid(sandbox: Sandbox) -> int:
    """The sandbox's pid namespace's last pid as its shell last saw it (0: unknown)."""
    return sandbox.shell.last_pid or 0


def run_gold(sandbox: Sandbox, gold: str, isolated: bool = True, start_pid: int = 0) -> GoldRun:
    # ``isolated``: in a subshell, so that the gold's cd, variables and traps die with it
    # and a recycled gold sandbox can keep its shell. A faithful sandbox (a new container
    # per run, see docker.py) runs the gold as the agent's actions run, so that the two
    # containers hold the same processes (``find /`` walks /proc). ``start_pid``: first
    # hand out pids up to it, so that the gold's processes get the numbers the agent's
    # action got after its earlier actions (a faithful sandbox, see BashEnv.submit).
    return gold_facts(sandbox, *gold_command(sandbox, gold, isolated, start_pid))


def gold_command(sandbox: Sandbox, gold: str, isolated: bool = True, start_pid: int = 0) -> tuple[ShellResult, int, int]:
    """The gold's command run (its result and the pids around it), its facts not yet read."""
    if start_pid > last_pid(sandbox) > 0:
        sandbox.run(advance_pids(start_pid))   # one subshell a pid
    before = last_pid(sandbox)
    result = sandbox.run(f"(\n{gold}\n)" if isolated else gold)
    return result, before, last_pid(sandbox)


def gold_facts(sandbox: Sandbox, result: ShellResult, before: int, after: int) -> GoldRun:
    """The gold's run with what it changed, read from its sandbox."""
    facts = gather(sandbox)
    if facts.errors:
        raise SandboxError(f"the gold's changes could not be listed in the {sandbox.kind} sandbox: {facts.errors[0]}")
    return GoldRun(result.output, result.exit_code, tuple(facts.changes), facts.hashes,
                   strict_changes=tuple(facts.strict_changes), strict_hashes=facts.strict_hashes,
                   start_pid=before, end_pid=after, shell_pid=sandbox.shell.pid or 0)


class BashSandboxes:
    """Hands out started sandboxes for a task: Docker containers or bwrap folders, pooled.

    One instance may serve many envs at once (``icplay run -j N`` shares one), so that
    containers recycled by one episode serve the next episode of any worker, and each
    task's gold runs once per run. Gold runs get their own pool: a container that ran
    an agent's actions is never used to compute a gold.
    """

    def __init__(self, kind: str = "docker", image: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 progress: Callable[[str], None] | None = None, spares: int = 1, recycle: bool = True):
        self.capabilities = sandbox_kinds.capabilities(kind)   # UnknownSandbox names the known ones
        self.kind = kind
        self.image = image
        self.timeout = timeout
        self.progress = progress
        self.spares = spares
        self.recycle = recycle
        self._pools = PoolsByKey()
        self._lock = threading.Lock()
        self._template: Path | None = None
        self._gold_runs: dict[tuple[str, str, str], GoldRun] = {}
        self._first_runs: dict[tuple[str, str, str], GoldRun] = {}   # while the second run waits
        # Gold runs take milliseconds and are fetched ahead (``prefetch_gold``): one at a
        # time in one recycled sandbox keeps up with many workers, and every sandbox more
        # would cost a container start.
        self._gold_slots = threading.Semaphore(1)
        self._prefetch: ThreadPoolExecutor | None = None
        self._gold_locks: dict[tuple[str, str, str], threading.Lock] = {}

    def _gold_key(self, task: Task) -> tuple[str, str, str]:
        return (self._image_for(task), task.key, task.gold)

    def gold_run(self, task: Task) -> GoldRun:
        """The task's gold run, made in a pristine sandbox and kept: run twice (the second
        at least SECOND_RUN_GAP after the first) to tell a nondeterministic gold."""
        key = self._gold_key(task)
        with self._lock:
            lock = self._gold_locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._gold_runs:
                first = self.fresh_gold_run(task)
                self._first_runs[key] = first
                time.sleep(SECOND_RUN_GAP)   # after the first run ended: its command ran before
                second = self.fresh_gold_run(task)
                self._gold_runs[key] = (first if first.same_as(second)
                                        else dataclasses.replace(second, nondeterministic=True, earlier=(first,)))
                self._first_runs.pop(key, None)
            return self._gold_runs[key]

    def first_gold_run(self, task: Task) -> GoldRun | None:
        """The first of the task's two prefetch runs while the second is still to come (it
        waits SECOND_RUN_GAP), else None. A perfect score against it is final: scoring takes
        the best over every gold run, and 1.0 is the most there is (``BashEnv.submit``)."""
        return self._first_runs.get(self._gold_key(task))

    def fresh_gold_run(self, task: Task, start_pid: int = 0) -> GoldRun:
        """The gold run once more, now, in a pristine sandbox (not kept). ``start_pid``
        (faithful sandboxes): its processes numbered from the one after ``start_pid`` (see
        ``run_gold``); the shell has the same pid in every faithful container (faithful.py)."""
        pool = self.pool(task, role="gold")
        with self._gold_slots:
            box = pool.take()
            try:
                faithful = box.faithful
                if faithful and start_pid and last_pid(box) > start_pid:
                    start_pid = 0     # already past the agent's numbering: it cannot go back
                return run_gold(box, task.gold, isolated=not faithful, start_pid=start_pid if faithful else 0)
            finally:
                pool.discard(box)

    def should_bracket(self, task: Task, sandbox: Sandbox) -> bool:
        """Whether an action of this task runs between two gold runs (``bracket``): when its
        gold is known to be nondeterministic, or not known yet on a faithful (not recycled)
        sandbox; a recycled one would need a third container for it."""
        if not self.capabilities.runs_images:
            return False
        gold = self._gold_runs.get(self._gold_key(task))
        if gold is not None:
            return gold.nondeterministic
        return sandbox.faithful

    def bracket(self, task: Task, action: Callable[[], _R]) -> tuple[_R, list[GoldRun]]:
        """Run ``action`` between two gold runs in ready pristine sandboxes, one just before
        and one just after: a gold that prints the time (``date``) printed, in one of
        them, the second the action saw (when the three take less than a second)."""
        pool = self.pool(task, role="gold")
        boxes = [pool.take(), pool.take()]
        try:
            isolated = not boxes[0].faithful
            # the gold's commands as close to the action as they can be; their changes are
            # read afterwards (the reading takes longer than a `date`'s second allows)
            before = gold_command(boxes[0], task.gold, isolated)
            result = action()
            after = gold_command(boxes[1], task.gold, isolated)
            return result, [gold_facts(boxes[0], *before), gold_facts(boxes[1], *after)]
        finally:
            for box in boxes:
                pool.discard(box)

    def prefetch_gold(self, task: Task) -> None:
        """Start the task's gold run in the background, so that scoring does not wait for it.

        A failure here is dropped: scoring calls ``gold_run`` again and reports it.
        """
        with self._lock:
            if self._gold_key(task) in self._gold_runs:
                return
            if self._prefetch is None:   # one at a time, like every gold run (``_gold_slots``)
                self._prefetch = ThreadPoolExecutor(max_workers=1, thread_name_prefix="icplay-gold")
            prefetch = self._prefetch
        prefetch.submit(self._gold_quietly, task)

    def _gold_quietly(self, task: Task) -> None:
        try:
            self.gold_run(task)
        except Exception:   # a prefetch on a pool thread: scoring calls gold_run again and reports its error
            pass

    def _image_for(self, task: Task) -> str:
        return self.image or task.image or DEFAULT_IMAGE

    def _make_factory(self, task: Task, role: str) -> Callable[[], Sandbox]:
        request = SandboxRequest(
            "bash", self._image_for(task), HostRoot(self._host_root), network=task.network, timeout=self.timeout,
            recycle=self.recycle, trusted=role == "gold", progress=self.progress,
            own_image="a task that needs its own image" if self.image or task.image else "")
        return sandbox_kinds.sandbox_factory(self.kind, request)

    def _host_root(self) -> Path:
        """The testbed as a folder tree (made once), for kinds that run over one (bwrap)."""
        if self._template is None:
            folder = template_folder()   # reaped with this process's bwrap folder if icplay is killed
            self._template = make_root_template(data_dir() / "bash" / "testbed", data_dir() / "bash" / "setup.sh", folder)
        return self._template

    def pool(self, task: Task, role: str = "agent") -> SandboxPool:
        """The pool of sandboxes for the task's image and network; ``role`` agent or gold."""
        spares = 0 if role == "gold" and self.recycle else self.spares
        if role == "gold" and self.capabilities.runs_images and self._image_for(task) != DEFAULT_IMAGE:
            spares = 2   # faithful containers are not recycled: keep two ready (``bracket``)
        return self._pools.get(f"{role}|{self._image_for(task)}|{task.network}",
                               lambda: SandboxPool(self._make_factory(task, role), spares=spares,
                                                   recycle=self.recycle, urgent=role == "gold"))

    def stats(self) -> dict[str, int]:
        """Sandboxes started and recycled so far, over all pools."""
        return self._pools.stats()

    def close(self) -> None:
        with self._lock:
            prefetch, self._prefetch = self._prefetch, None
        if prefetch is not None:
            prefetch.shutdown(wait=True, cancel_futures=True)
        self._pools.close()
        if self._template is not None:
            shutil.rmtree(self._template.parent, ignore_errors=True)
            self._template = None


class BashEnv(PooledShellEnv):
    """One Bash episode at a time; ``reset`` starts the next.

    ``lazy``: reset returns at once and the sandbox is taken in the background, ready by
    the time the first action arrives (an agent's first model call hides a container
    start or recycle); an error taking it is raised by that first action.
    """

    name = "bash"
    capabilities = frozenset({STREAMS_OUTPUT, HAS_CWD})

    sandboxes: BashSandboxes

    def __init__(self, sandboxes: BashSandboxes, owns_sandboxes: bool = True, lazy: bool = False):
        super().__init__(sandboxes, owns_sandboxes, lazy)
        self._bracket: list[GoldRun] = []
        self.last_output = ""
        self._last_start_pid = 0     # the last pid before the agent's last action began
        self._shell_pid = 0          # and the pid of the shell that ran it

    def reset(self, task: Task) -> str:
        self._bracket = []
        self.task = task
        self.held.take(self.sandboxes.pool(task))
        self.last_output = ""
        self.sandboxes.prefetch_gold(task)
        return task.query

    def step(self, action: str, on_output: Callable[[str], None] | None = None) -> StepResult:
        if self.sandbox is None:
            raise RuntimeError("reset() the environment before step()")
        sandbox, task = self.sandbox, self.task
        assert task is not None, "reset() set the task with the sandbox"
        self._last_start_pid = last_pid(sandbox)
        self._shell_pid = sandbox.shell.pid or 0
        # A gold that may print the time runs just before and just after the action, each
        # in its own pristine sandbox: one of the two saw the agent's moment.
        self._bracket = []
        if self.sandboxes.should_bracket(task, sandbox):
            result, self._bracket = self.sandboxes.bracket(
                task, lambda: sandbox.run(action, on_output=on_output))
        else:
            result = sandbox.run(action, on_output=on_output)
        # InterCode compares the raw output; icplay's notes travel in info["notes"].
        self.last_output = result.output
        return StepResult(result.output, result.exit_code, result.duration, result.info())

    def submit(self, arg: str | None = None) -> SubmitResult:
        if self.sandbox is None or self.task is None:
            raise RuntimeError("reset() the environment before submit()")
        agent = sandbox_facts(self.sandbox)
        first = self.sandboxes.first_gold_run(self.task) if not self._bracket else None
        if first is not None:
            # Submitted within a second or so of reset: the second prefetch run (kept apart
            # from the first to tell a gold printing the time) is still to come. A perfect,
            # strictly solved score against the first needs no other run; anything less
            # waits for both.
            scored, gold, verdict = self._best([first], agent)
            if verdict["solved"]:
                return self._result(scored, gold, verdict, [first])
        gold = self.sandboxes.gold_run(self.task)
        golds = [gold]
        if gold.nondeterministic or any(not run.same_as(gold) for run in self._bracket):
            # Run it again next to the agent's final state; the agent's last output was
            # made between the prefetch runs and this one, so it is scored against each
            # and the best counts (a `date` gold: one of them printed the agent's second).
            golds = [*self._bracket, self.sandboxes.fresh_gold_run(self.task), gold, *gold.earlier]
        if (gold.shows_own_pids() and self._shell_pid
                and (self._last_start_pid, self._shell_pid) != (gold.start_pid, gold.shell_pid)):
            # The gold's output names its own processes (``find /`` over /proc, ``ps``) and
            # the agent's last action came after other actions (its processes got later
            # numbers) or from a restarted shell: run the gold once more, its processes
            # numbered as the agent's (a restarted shell's own pid cannot be matched).
            golds = [self.sandboxes.fresh_gold_run(self.task, self._last_start_pid), *golds]
        scored, gold, verdict = self._best(golds, agent)
        return self._result(scored, gold, verdict, golds)

    def _best(self, golds: list[GoldRun], agent: Facts) -> tuple[BashReward, GoldRun, dict[str, Any]]:
        """The agent's state scored against each gold run: (score, run, strict verdict) of the best."""
        best: tuple[BashReward, GoldRun, dict[str, Any], tuple[float, bool, bool]] | None = None
        for candidate in golds:
            paths = paths_to_hash(agent.changes, list(candidate.changes))
            agent_hashes = {path: agent.hashes.get(path.rstrip("/"), "missing") for path in paths}
            gold_hashes = {path: candidate.hashes.get(path.rstrip("/"), "missing") for path in paths}
            scored = bash_reward(agent.changes, list(candidate.changes), agent_hashes, gold_hashes,
                                 self.last_output, candidate.output)
            verdict = strict_verdict(scored.reward, strict_reasons(agent, candidate) if scored.reward >= 1.0 else [])
            # among equal rewards, the strictly solved one, then the run whose output is the
            # agent's own (reported as the gold's)
            rank = (scored.reward, verdict["solved"], candidate.output == self.last_output)
            if best is None or rank > best[3]:
                best = (scored, candidate, verdict, rank)
        assert best is not None, "at least one gold run"
        scored, gold, verdict, _rank = best
        return scored, gold, verdict

    def _result(self, scored: BashReward, gold: GoldRun, verdict: dict[str, Any], golds: list[GoldRun]) -> SubmitResult:
        breakdown = scored.to_dict()
        breakdown["gold_exit_code"] = gold.exit_code
        if len(golds) > 1:
            breakdown["gold_nondeterministic"] = True
            breakdown["gold_runs_compared"] = len(golds)
        return SubmitResult(scored.reward, breakdown, gold.output, strict=verdict)

    def close(self) -> None:
        self._bracket = []
        super().close()


def _sandboxes(sandbox: str, image: str | None, timeout: float | None, progress: Callable[[str], None] | None,
               recycle: bool, spares: int = 1) -> BashSandboxes:
    return BashSandboxes(sandbox, image=image, timeout=timeout or DEFAULT_TIMEOUT, progress=progress,
                         recycle=recycle, spares=spares)


def make_bash_env(sandbox: str, image: str | None = None, timeout: float | None = None,
                  progress: Callable[[str], None] | None = None, recycle: bool = True,
                  **options: Any) -> BashEnv | IntercodeBashEnv:
    """One Bash env with its own sandbox pools (the language spec's ``env``); with
    ``compat="intercode"``, InterCode's own execution semantics (icplay/bash/compat.py)."""
    if options.get("compat") == "intercode":
        return intercode_bash(sandbox, image, timeout, options.get("reuse_containers", False))
    return BashEnv(_sandboxes(sandbox, image, timeout, progress, recycle))


def intercode_bash(sandbox: str, image: str | None, timeout: float | None,
                   reuse_containers: bool = False) -> IntercodeBashEnv:
    """``compat="intercode"``: a new InterCode-style env (its own gold and agent containers;
    ``reuse_containers``: one pair for all its episodes, as InterCode's experiments ran)."""
    return IntercodeBashEnv(image=image, timeout=timeout, reuse_containers=reuse_containers, sandbox=sandbox)


class SharedBashEnvs:
    """Bash envs for parallel workers (the language spec's ``env_factory``).

    They share one set of sandbox pools and gold runs: a container recycled after one
    worker's episode serves the next episode of any worker, and each task's gold runs
    once per run. They take their sandbox lazily (while the policy thinks about its
    first action). ``close()`` after the envs are closed.
    """

    def __init__(self, sandbox: str, image: str | None = None, timeout: float | None = None,
                 progress: Callable[[str], None] | None = None, recycle: bool = True, **options: Any) -> None:
        # No spare when containers are recycled: a used one comes back after every
        # episode, and a lazy env takes it while its policy thinks.
        spares = 0 if recycle and sandbox_kinds.capabilities(sandbox).recyclable else 1
        self.compat = options.get("compat")
        self.sandbox, self.image, self.timeout = sandbox, image, timeout
        self.sandboxes = None if self.compat == "intercode" else \
            _sandboxes(sandbox, image, timeout, progress, recycle, spares)

    def __call__(self) -> BashEnv | IntercodeBashEnv:
        if self.sandboxes is None:     # compat="intercode"
            return intercode_bash(self.sandbox, self.image, self.timeout)
        return BashEnv(self.sandboxes, owns_sandboxes=False, lazy=True)

    def stats(self) -> dict[str, int]:
        return self.sandboxes.stats() if self.sandboxes is not None else {}

    def close(self) -> None:
        if self.sandboxes is not None:
            self.sandboxes.close()
