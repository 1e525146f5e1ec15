"""The episode driver and its broker: one steppable loop for run, play, watch and the REPLs.

- ``Driver`` (``driver.py``): propose / decide / apply / score / finish over an existing
  ``Episode``; ``run()`` loops; events for views; ``stop()`` / ``interrupt()`` from any thread;
  built as ``Driver(episode, DriverSettings(...))`` (``settings.py``: policy, protocol, limits,
  broker, listeners; ``human_play(broker)`` for a human's own play);
- ``calls.py``, ``command.py``: the policy's calls (cancellable, usage summed) and the running
  command's interrupts, each usable from any thread;
- ``Broker`` (``broker.py``): the mode (auto / confirm / human), pause and single-step,
  and the decisions waiting for a human as request-id → future (``RequestKind``);
- the events (``events.py``): one frozen dataclass per kind, the states as ``State``;
- ``CallerLoop`` (``external.py``): the driver with the caller as its policy (library front ends).

See docs/driver.md. Nothing here imports textual, reads or writes the terminal, or names a
language (line mode is ``icplay.lines``; what differs by language is its spec's).
"""

from icplay.driver.broker import (ACTION, AUTO, CONFIRM, FAILED, HUMAN_MODE, INVALID, MODES, PAUSED, PROPOSAL,
                                  SUBMIT_PROPOSAL, Broker, Request, RequestKind)
from icplay.driver.driver import Driver
from icplay.driver.settings import PROTOCOLS, Budget, DriverSettings, Limits, human_play
from icplay.driver.events import (CallCancelled, Delta, Event, Failure, Finished, ModeChanged, Output, Proposed,
                                  Reasoning, RequestClosed, RequestOpened, Retrying, Scored, State, StateChanged,
                                  TurnRecorded)
from icplay.episode import (DECISION_KINDS, EDIT, HAND_BACK, REJECT, RUN, STOP, SUBMIT, TAKE_OVER, Cancelled,
                            Decision)

__all__ = ["Driver", "DriverSettings", "human_play", "Event", "Limits", "Budget", "PROTOCOLS", "Broker", "Request", "RequestKind", "State",
           "StateChanged", "Delta", "Reasoning", "Proposed", "RequestOpened", "RequestClosed", "ModeChanged", "Output",
           "TurnRecorded", "Scored", "Retrying", "Failure", "CallCancelled", "Finished", "AUTO", "CONFIRM", "HUMAN_MODE",
           "MODES", "PROPOSAL", "SUBMIT_PROPOSAL", "ACTION", "PAUSED", "INVALID", "FAILED", "Decision",
           "DECISION_KINDS", "RUN", "EDIT", "REJECT", "TAKE_OVER", "HAND_BACK", "SUBMIT", "STOP", "Cancelled"]
