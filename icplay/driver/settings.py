"""What a ``Driver`` is built from: one frozen ``DriverSettings``, with the protocol names,
the episode's ``Limits`` and the run's shared ``Budget``.

Every front end says how its episodes are driven in one value (``Driver(episode, settings)``);
variants are ``dataclasses.replace(settings, ...)``. The settings hold what is shared from
episode to episode (a broker whose mode carries over, a run's budget), never an episode's state.
"""

from __future__ import annotations

import threading
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Callable

from icplay.driver.broker import Broker
from icplay.driver.events import Event
from icplay.episode import Gate, Policy, Trajectory, usage_tokens
from icplay.languages import TurnRule

# The protocols, one vocabulary for every front end: ``agent`` ends an episode by its
# submit (reward 0 until then); ``intercode`` scores every action and ends when solved.
AGENT_PROTOCOL, INTERCODE_PROTOCOL = "agent", "intercode"
PROTOCOLS = (INTERCODE_PROTOCOL, AGENT_PROTOCOL)
_OLDER_NAMES = {"submit": AGENT_PROTOCOL}   # the library front ends' first name for ``agent``
ON_FAILURE = ("raise", "ask")


def protocol_name(name: str) -> str:
    """``name`` as one of PROTOCOLS (``submit``, the library's older name, is ``agent``);
    ValueError otherwise."""
    name = _OLDER_NAMES.get(name, name)
    if name not in PROTOCOLS:
        raise ValueError(f"unknown protocol {name!r} (one of: {', '.join(PROTOCOLS)})")
    return name


@dataclass
class Limits:
    max_turns: int | None = 10         # None: no limit (human play)
    max_tokens: int | None = None      # per episode, prompt + completion
    max_cost: float | None = None      # per episode, dollars
    max_seconds: float | None = None   # wall time per episode

    def spent(self, usage: dict[str, Any], started: float) -> str | None:
        """Which budget (tokens, cost, time) an episode begun at ``started`` (monotonic) with
        ``usage`` has spent, else None."""
        if self.max_tokens is not None and usage_tokens(usage) >= self.max_tokens:
            return "tokens"
        if self.max_cost is not None and (usage.get("cost") or 0) >= self.max_cost:
            return "cost"
        if self.max_seconds is not None and time.monotonic() - started >= self.max_seconds:
            return "time"
        return None

    def call_timer(self, started: float, cancel: threading.Event) -> threading.Timer | None:
        """A started timer that cancels a model call when the episode's wall time runs out in
        the middle of it (None without a time limit)."""
        if self.max_seconds is None:
            return None
        timer = threading.Timer(max(0.0, self.max_seconds - (time.monotonic() - started)), cancel.set)
        timer.daemon = True
        timer.start()
        return timer


class Budget:
    """Tokens and dollars for a whole run, shared by its episodes (thread-safe).

    ``needs_cost``: a cost limit is set (the run's or each episode's) for a model icplay has no
    price for, so the calls' costs must come from the server (a router's ``usage.cost``); the first
    call that comes back without one stops the run, as the limit could not hold."""

    def __init__(self, max_tokens: int | None = None, max_cost: float | None = None, needs_cost: str | None = None):
        self.max_tokens, self.max_cost = max_tokens, max_cost
        self.needs_cost = needs_cost       # the model's name, when its calls must bring their cost
        self.tokens = 0
        self.cost = 0.0
        self.uncosted = 0                  # calls that came back without a cost
        self._lock = threading.Lock()

    def add(self, usage: dict[str, Any]) -> None:
        with self._lock:
            self.tokens += usage_tokens(usage)
            self.cost += usage.get("cost") or 0.0
            if usage.get("cost") is None:
                self.uncosted += usage.get("cost_unknown") or usage.get("calls") or 0

    def exhausted(self) -> str | None:
        with self._lock:
            if self.max_tokens is not None and self.tokens >= self.max_tokens:
                return f"the run's token limit ({self.max_tokens:,}) is reached"
            if self.max_cost is not None and self.cost >= self.max_cost:
                return f"the run's cost limit (${self.max_cost:g}) is reached"
            if self.needs_cost and self.uncosted:
                return (f"the cost limit cannot hold: the server sent no cost (usage.cost) for a call and icplay "
                        f"has no price for {self.needs_cost!r}; give it with --price {self.needs_cost}=IN,OUT "
                        "(dollars per million tokens)")
        return None


@dataclass(frozen=True)
class DriverSettings:
    """How a ``Driver`` drives its episode.

    - ``policy``: where actions come from (None: the human is the only source);
    - ``protocol``: ``agent`` (ends by a submit) or ``intercode`` (every action scored);
    - ``limits`` per episode; ``budget``: the run's, shared by its episodes;
    - ``broker``: the mode, pauses and a human's decisions (a ``Broker``, one per screen or
      session so the mode carries over), or a plain ``Gate`` beside an auto broker; None: auto;
    - ``should_stop``: asked before each step (a runner's stop);
    - ``on_event``: listeners of the driver's events; ``on_turn``: after every turn;
    - ``on_failure``: ``raise`` (headless) or ``ask`` (a human decides after a failed call);
    - ``track_time``: the worked time is saved with the episode (human play);
    - ``turn_rule``: how ``intercode`` scores a turn (default: the task's language's rule);
    - ``run_blank``: a blank proposed action runs as a turn (the gym's contract);
    - ``around_action``: wraps each command (the TUI pauses the garbage collector).
    """

    policy: Policy | None = None
    protocol: str = AGENT_PROTOCOL
    limits: Limits = field(default_factory=Limits)
    broker: Broker | Gate | None = None
    budget: Budget | None = None
    should_stop: Callable[[], bool] | None = None
    on_event: tuple[Callable[[Event], None], ...] = ()
    on_turn: Callable[[Trajectory], None] | None = None
    on_failure: str = "raise"
    track_time: bool = False
    turn_rule: TurnRule | None = None
    run_blank: bool = False
    around_action: Callable[[], AbstractContextManager[object]] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "protocol", protocol_name(self.protocol))
        object.__setattr__(self, "on_event", tuple(self.on_event))
        if self.on_failure not in ON_FAILURE:
            raise ValueError("on_failure is 'raise' (headless) or 'ask' (a human decides)")


def human_play(broker: Broker) -> DriverSettings:
    """A human's own play (``play --plain``, a study's queue): no policy, no turn limit,
    failures told to her, the worked time kept."""
    return DriverSettings(limits=Limits(max_turns=None), broker=broker, on_failure="ask", track_time=True)


__all__ = ["DriverSettings", "Limits", "Budget", "PROTOCOLS", "AGENT_PROTOCOL", "INTERCODE_PROTOCOL",
           "protocol_name", "human_play"]
