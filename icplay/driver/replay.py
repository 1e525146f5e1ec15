"""Replays are policies on the driver: recorded actions played again through ``Driver.step``.

Every replay of icplay — a resume or a fork (the saved turns run again into a fresh
sandbox), a re-execution (``icplay view --reexecute``), a rescore (InterCode's recorded
episodes, ``icplay rescore``) and a Harbor task's oracle (``icplay tasks --check``) — is a
``ReplayPolicy`` proposing the recorded actions one by one to the one driver loop. The
driver runs each as the turn rule's plan says (``icplay/languages/turns.py``: the language's
own ``intercode_turn`` for a rescore) and scores it when the plan says so; a replaying
policy plays the recording out whole (a 1.0 or a recorded ``submit NAME`` does not end
it). A recorded turn that ran nothing (an unparsable reply, InterCode's "no code" message)
is proposed as such: nothing runs, and under ``intercode`` it scores 0.

``replay`` is the one place a Driver is built for a replay; the env is only ever stepped
by the driver (tests/test_checks.py holds it).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from icplay.driver.driver import Driver
from icplay.driver.settings import AGENT_PROTOCOL, DriverSettings, Limits
from icplay.driver.events import Event, Scored, TurnRecorded
from icplay.envs.base import SubmitResult
from icplay.episode import Episode, Proposal, Trajectory, Turn
from icplay.languages.turns import TurnPlan, TurnRule
from icplay.tasks.model import Task

# a replay that only rebuilds the state (a resume, a fork's prefix): every action runs, none is scored
RUN_ONLY = TurnRule(lambda action: TurnPlan(score=False))
CUT_MARGIN = 1.0   # seconds a replayed action that was cut when recorded may run beyond its recorded time


@dataclass(frozen=True)
class Recorded:
    """One recorded turn to play again.

    ``ran`` False: the recording says nothing ran (recorded unrun; 0 under ``intercode``).
    ``plan``: how this very turn runs and is scored (None: the replay's turn rule decides).
    ``cut_after``: interrupt the action after that many seconds (it was interrupted or timed
    out when recorded)."""

    action: str
    ran: bool = True
    plan: TurnPlan | None = None
    cut_after: float | None = None
    info: dict[str, Any] = field(default_factory=dict)


def recorded_turn(turn: Turn, plan: TurnPlan | None = None) -> Recorded:
    """A saved turn as a replay plays it: one that was cut the first time is cut again after
    the time it ran then (plus a second)."""
    cut = turn.info.get("interrupted") or turn.info.get("timed_out")
    return Recorded(turn.action, ran=bool(turn.action), plan=plan,
                    cut_after=max(0.1, turn.duration) + CUT_MARGIN if cut else None)


@dataclass
class Replayed:
    """One replayed turn: the turn the driver recorded and its score, if it was scored."""

    turn: Turn
    result: SubmitResult | None = None


class ReplayPolicy:
    """Proposes the recorded actions in order (then a submit, when ``submit_at_end``)."""

    replays_recording = True     # the driver plays the recording out whole (icplay/driver/driver.py)

    def __init__(self, turns: Sequence[Recorded], submit_at_end: bool = False):
        self.turns = list(turns)
        self.submit_at_end = submit_at_end
        self.position = -1       # the recorded turn being played

    @property
    def current(self) -> Recorded | None:
        return self.turns[self.position] if 0 <= self.position < len(self.turns) else None

    @property
    def steps(self) -> int:
        """The driver steps the whole replay takes."""
        return len(self.turns) + (1 if self.submit_at_end else 0)

    def describe(self) -> dict[str, Any]:
        return {"kind": "replay"}

    def propose(self, task: Task, trajectory: Trajectory, cancel: threading.Event | None = None,
                notify: Callable[[str, dict[str, Any]], None] | None = None) -> Proposal:
        self.position += 1
        turn = self.current
        if turn is None:
            return Proposal(None, info={"replays": "submit"})
        info = {**turn.info, "replays": self.position}
        if not turn.ran:
            return Proposal(None, info={**info, "invalid": True})
        return Proposal(turn.action, info=info)

    def rule(self, base: TurnRule) -> TurnRule:
        """``base``, except for a recorded turn that carries its own plan."""
        def plan(action: str) -> TurnPlan:
            turn = self.current
            return turn.plan if turn is not None and turn.plan is not None else base.plan(action)
        return TurnRule(plan, base.feedback)


@dataclass
class Replay:
    """What a replay gave: each replayed turn, in order, and the final submit's result."""

    turns: list[Replayed] = field(default_factory=list)
    final: SubmitResult | None = None
    cancelled: bool = False


def replay(episode: Episode, turns: Sequence[Recorded], protocol: str = AGENT_PROTOCOL,
           turn_rule: TurnRule = RUN_ONLY, submit_at_end: bool = False,
           on_turn: Callable[[int, Replayed], None] | None = None,
           cancel: threading.Event | None = None) -> Replay:
    """Play ``turns`` on ``episode`` (its env reset to its task) through the driver.

    ``turn_rule`` plans each turn (run? scored? with which submit argument?); a turn is only
    scored when its plan says so. ``on_turn(i, replayed)`` sees each turn as soon as it ran
    (the env still holds its state); ``cancel`` stops between turns."""
    policy = ReplayPolicy(turns, submit_at_end)
    out = Replay()

    def listen(event: Event) -> None:
        if isinstance(event, TurnRecorded):
            out.turns.append(Replayed(event.turn))
        elif isinstance(event, Scored) and out.turns:
            out.turns[-1].result = event.result

    settings = DriverSettings(policy=policy, protocol=protocol, limits=Limits(max_turns=None), on_event=(listen,),
                              turn_rule=policy.rule(turn_rule), around_action=lambda: _cut(episode, policy))
    driver = Driver(episode, settings)
    for n in range(policy.steps):
        if cancel is not None and cancel.is_set():
            out.cancelled = True
            return out
        before = len(out.turns)
        driver.step()
        if len(out.turns) > before and on_turn is not None:
            on_turn(n, out.turns[-1])
    final = episode.trajectory
    if submit_at_end and final.status == "submitted" and final.reward is not None:
        out.final = SubmitResult(final.reward, final.breakdown or {}, final.gold_output or "", final.strict)
    return out


@contextmanager
def _cut(episode: Episode, policy: ReplayPolicy) -> Iterator[None]:
    """Interrupt the running action after the recorded turn's ``cut_after`` seconds."""
    turn = policy.current
    timer = None
    if turn is not None and turn.cut_after is not None:
        timer = threading.Timer(turn.cut_after, episode.env.interrupt)
        timer.daemon = True
        timer.start()
    try:
        yield
    finally:
        if timer is not None:
            timer.cancel()


__all__ = ["RUN_ONLY", "Recorded", "Replay", "ReplayPolicy", "Replayed", "recorded_turn", "replay"]
