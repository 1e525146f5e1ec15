"""What the driver tells its views: one frozen dataclass per event, its states as an Enum.

A view dispatches on the event's type (``match event: case TurnRecorded(turn=turn): ...``
or ``functools.singledispatchmethod``), never on a string. Each name means one thing: the
driver's *states* (``State``) are not the broker's *request kinds*
(``icplay.driver.broker.RequestKind``), and neither is an event. ``kind`` is each event's
short stable name, for logs and the line mode's traces.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, ClassVar

from icplay.envs.base import SubmitResult
from icplay.episode import Proposal, Trajectory, Turn

if TYPE_CHECKING:
    from icplay.driver.broker import Request


class State(str, Enum):
    """Where the driver is (a ``str``: compares, prints and hashes as its value)."""

    IDLE = "idle"
    THINKING = "thinking"      # the policy is asked
    WAITING = "waiting"        # a request waits for a human
    RUNNING = "running"        # a command runs
    SCORING = "scoring"
    PAUSED = "paused"          # auto mode, paused between steps
    DONE = "done"

    def __str__(self) -> str:    # its value, also in f-strings (Python 3.10 and 3.11 alike)
        return str(self.value)


@dataclass(frozen=True)
class Event:
    """The base of every driver event."""

    kind: ClassVar[str] = "event"


@dataclass(frozen=True)
class StateChanged(Event):
    kind: ClassVar[str] = "state"
    state: State


@dataclass(frozen=True)
class Delta(Event):
    """A piece of the model's reply as it streams (from the model call's helper thread)."""
    kind: ClassVar[str] = "delta"
    text: str


@dataclass(frozen=True)
class Reasoning(Event):
    """A piece of the model's thinking as it streams (never executed)."""
    kind: ClassVar[str] = "reasoning"
    text: str


@dataclass(frozen=True)
class Proposed(Event):
    """The policy's proposal (``proposal.action`` None: it wants to submit)."""
    kind: ClassVar[str] = "proposal"
    proposal: Proposal


@dataclass(frozen=True)
class RequestOpened(Event):
    """A decision waits for a human (``request.kind``, ``request.id``)."""
    kind: ClassVar[str] = "request"
    request: Request


@dataclass(frozen=True)
class RequestClosed(Event):
    """A waiting request was answered or withdrawn."""
    kind: ClassVar[str] = "answered"
    request: Request


@dataclass(frozen=True)
class ModeChanged(Event):
    """The broker's mode (auto, confirm, human), from the thread that switched it."""
    kind: ClassVar[str] = "mode"
    mode: str


@dataclass(frozen=True)
class Output(Event):
    """A command's output as it comes (possibly from the sandbox's reader thread)."""
    kind: ClassVar[str] = "output"
    text: str


@dataclass(frozen=True)
class TurnRecorded(Event):
    """A turn, recorded and saved."""
    kind: ClassVar[str] = "turn"
    turn: Turn


@dataclass(frozen=True)
class Scored(Event):
    kind: ClassVar[str] = "score"
    result: SubmitResult


@dataclass(frozen=True)
class Retrying(Event):
    """The model call is retried after ``delay`` seconds."""
    kind: ClassVar[str] = "retry"
    attempt: int = 0
    delay: float = 0.0
    message: str = ""


@dataclass(frozen=True)
class Failure(Event):
    """Something failed: the episode goes on unless ``fatal``. ``during``: ``run`` or ``submit``
    for a human's own move that failed (they move again)."""
    kind: ClassVar[str] = "error"
    message: str
    fatal: bool = False
    during: str | None = None


@dataclass(frozen=True)
class CallCancelled(Event):
    """A model call was cancelled; no turn is recorded."""
    kind: ClassVar[str] = "cancelled"


@dataclass(frozen=True)
class Finished(Event):
    """The episode ended: submitted, stopped, left (``running``) or errored."""
    kind: ClassVar[str] = "finished"
    trajectory: Trajectory


__all__ = ["State", "Event", "StateChanged", "Delta", "Reasoning", "Proposed", "RequestOpened", "RequestClosed",
           "ModeChanged", "Output", "TurnRecorded", "Scored", "Retrying", "Failure", "CallCancelled", "Finished"]
