"""Re-execute a saved episode in a fresh sandbox and flag each turn that now differs.

A recording is only evidence if it can be reproduced. ``reexecute`` resets an env to the
episode's task (as this machine's task sets have it: ``icplay.tasks.trusted``) and replays
it through the driver (``icplay.driver.replay``): every recorded action runs again in order
(rejected proposals and unparsable replies ran nothing and run nothing), the turns that
were scored when recorded are scored again (InterCode's per-turn reward), then the final
submit (when the episode was submitted); each is compared with the
recording: the observation (exact text), the exit code and the reward. A turn that
differs carries a unified diff of the two observations.

Nothing here knows about screens: ``icplay view --reexecute`` prints the result and the
viewer shows it turn by turn.
"""

from __future__ import annotations

import difflib
import threading
from dataclasses import dataclass, field
from typing import Callable

from icplay.driver.replay import Recorded, Replayed, recorded_turn, replay
from icplay.envs.base import Env
from icplay.episode import Episode, Trajectory, Turn
from icplay.languages.turns import TurnPlan
from icplay.tasks.model import Task, TaskFileError
from icplay.tasks.trusted import machine_task

REWARD_TOLERANCE = 1e-6


@dataclass
class TurnCheck:
    """One recorded turn run again."""

    index: int
    action: str
    skipped: str | None = None              # why nothing ran ("rejected", "invalid")
    recorded_observation: str = ""
    observation: str = ""
    recorded_exit: int | None = None
    exit_code: int | None = None
    recorded_reward: float | None = None
    reward: float | None = None

    @property
    def observation_differs(self) -> bool:
        return self.skipped is None and self.observation != self.recorded_observation

    @property
    def exit_differs(self) -> bool:
        return self.skipped is None and self.exit_code != self.recorded_exit

    @property
    def reward_differs(self) -> bool:
        return _differs(self.recorded_reward, self.reward)

    @property
    def differs(self) -> bool:
        return self.observation_differs or self.exit_differs or self.reward_differs

    def what(self) -> list[str]:
        """What differs, in words."""
        out = []
        if self.observation_differs:
            out.append("observation")
        if self.exit_differs:
            out.append(f"exit code {self.recorded_exit} -> {self.exit_code}")
        if self.reward_differs:
            out.append(f"reward {_fmt(self.recorded_reward)} -> {_fmt(self.reward)}")
        return out

    def diff(self, context: int = 2) -> str:
        """The observations as a unified diff (recorded first), '' when they match."""
        if not self.observation_differs:
            return ""
        lines = difflib.unified_diff(self.recorded_observation.splitlines(), self.observation.splitlines(),
                                     "recorded", "re-executed", n=context, lineterm="")
        return "\n".join(lines)


@dataclass
class Reexecution:
    """Every turn checked, and the final reward recomputed (if the episode was submitted)."""

    episode_id: str
    checks: list[TurnCheck] = field(default_factory=list)
    recorded_final: float | None = None
    final: float | None = None
    sandbox: str = ""

    @property
    def final_differs(self) -> bool:
        return _differs(self.recorded_final, self.final)

    @property
    def diverged(self) -> list[TurnCheck]:
        return [c for c in self.checks if c.differs]

    @property
    def reproduced(self) -> bool:
        return not self.diverged and not self.final_differs

    def by_turn(self) -> dict[int, TurnCheck]:
        return {c.index: c for c in self.checks}

    def render(self) -> str:
        """A plain-text report: one line per turn, the diff under each that differs."""
        lines = [line for c in self.checks for line in _turn_lines(c)]
        if self.recorded_final is not None or self.final is not None:
            mark = "✗" if self.final_differs else "✓"
            lines.append(f"{mark} final reward: recorded {_fmt(self.recorded_final)}, now {_fmt(self.final)}")
        lines.append(self.verdict())
        return "\n".join(lines)

    def verdict(self) -> str:
        """One line: reproduced, or how many turns (and whether the final reward) diverged."""
        if self.reproduced:
            return "reproduced: every turn matches the recording"
        n = len(self.diverged)
        return (f"diverged: {n} turn{'s differ' if n != 1 else ' differs'}"
                + (" and the final reward" if self.final_differs else ""))


def _turn_lines(c: TurnCheck) -> list[str]:
    """A turn's line in the report (✓ matches, ✗ differs, blank skipped), and its diff."""
    head = f"turn {c.index + 1}: {c.action.splitlines()[0][:70] if c.action else '(' + str(c.skipped) + ')'}"
    if c.skipped:
        return [f"  {head}  — skipped ({c.skipped}: nothing ran)"]
    if not c.differs:
        return [f"✓ {head}"]
    diff = c.diff()
    return [f"✗ {head}  — differs: {', '.join(c.what())}", *("    " + line for line in diff.splitlines())]


def _differs(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is not b and a is not None    # a recorded reward that could not be recomputed differs
    return abs(a - b) > REWARD_TOLERANCE


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def _recorded(turn: Turn) -> Recorded:
    """A recorded turn as the re-execution plays it: scored (a submit with no argument) when it
    was scored when recorded; cut again after its recorded time when it was cut."""
    return recorded_turn(turn, TurnPlan(score=turn.reward is not None))


def _check_turn(turn: Turn, replayed: Replayed) -> TurnCheck:
    """One recorded turn and what it gave again (a reply with no action is skipped: nothing ran)."""
    check = TurnCheck(turn.index, turn.action, recorded_observation=turn.observation,
                      recorded_exit=turn.exit_code, recorded_reward=turn.reward)
    if not turn.action:
        check.skipped = "rejected" if turn.info.get("rejected") else "invalid"
        check.reward = turn.reward    # an unparsable reply scores what it scored: nothing ran
    else:
        check.observation, check.exit_code = replayed.turn.observation, replayed.turn.exit_code
        if turn.reward is not None and replayed.result is not None:
            check.reward = replayed.result.reward
    return check


def _task_to_run(trajectory: Trajectory, env: Env, task: Task | None) -> Task:
    """The machine's task of the episode, checked to be of ``env``'s kind and the episode's."""
    if task is None:
        task = machine_task(trajectory.task, f"episode {trajectory.id}")
    if env.name != task.env or trajectory.env != task.env:
        raise TaskFileError(f"episode {trajectory.id}", f"a {trajectory.env} episode of a {task.env} task cannot be "
                                                        f"re-executed on a {env.name} environment", field="env")
    return task


def reexecute(trajectory: Trajectory, env: Env, on_turn: Callable[[TurnCheck], None] | None = None,
              cancel: threading.Event | None = None, task: Task | None = None) -> Reexecution:
    """Run ``trajectory``'s actions again on ``env`` (reset to its task first) and compare
    each turn with the recording. ``on_turn`` sees each check as it is made; ``cancel``
    stops between turns.

    ``task``: the episode's task as this machine has it (``machine_task``); by default it is
    looked up here. The file's own task block is never what runs (``TaskFileError`` when
    this machine lacks the task or has another one under its name)."""
    task = _task_to_run(trajectory, env, task)
    out = Reexecution(trajectory.id, sandbox=env.sandbox_kind)
    submitted = trajectory.status == "submitted" and trajectory.reward is not None

    def checked(n: int, replayed: Replayed) -> None:
        check = _check_turn(trajectory.turns[n], replayed)
        out.checks.append(check)
        if on_turn is not None:
            on_turn(check)

    done = replay(Episode(env, task), [_recorded(t) for t in trajectory.turns], submit_at_end=submitted,
                  on_turn=checked, cancel=cancel)
    if submitted and not done.cancelled:
        out.recorded_final = trajectory.reward
        out.final = done.final.reward if done.final is not None else None
    return out
