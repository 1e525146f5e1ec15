"""The broker: who decides what runs next, and the decisions waiting for a human.

A driver asks the broker at three points: *may I go on* (``checkpoint``, before each
step: waits while paused), *what do we do with this proposal* (``decide``), and *what does
the human do* (``ask_action``, in human mode). The mode is read before the policy is
asked, so a human turn never costs a model call.

Modes (switchable at any moment, from any thread):

- ``auto``: proposals run as they come; ``pause_after_step()`` stops before the next
  step, ``step_one()`` lets exactly one more step through, ``resume()`` goes on;
- ``confirm``: each proposal (a submit too) waits for a ``Decision``;
- ``human``: the human types actions; the policy is not asked.

A decision that waits is a ``Request`` (id, kind, proposal, a future). A UI answers it
from its own thread with ``answer(id, decision)``; a stop withdraws every waiting request
(answered ``stop``). Switching mode answers what no longer needs answering: to ``auto``
a waiting proposal runs, to ``human`` it is dropped (the human takes over), and a waiting
human action is handed back when the mode goes to ``auto`` or ``confirm``.
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from enum import Enum
from typing import Callable

from icplay.episode import (EDIT, HAND_BACK, REJECT, RUN, STOP, SUBMIT, TAKE_OVER, Decision, Proposal,
                            Trajectory)

AUTO, CONFIRM, HUMAN_MODE = "auto", "confirm", "human"
MODES = (AUTO, CONFIRM, HUMAN_MODE)


class RequestKind(str, Enum):
    """What a request waits for (not an event, not a driver state: ``icplay.driver.events``)."""

    PROPOSAL = "proposal"   # an agent's action: run / edit / reject / take_over / submit / stop
    SUBMIT = "submit"       # the agent wants to submit: run (= submit) / edit / reject / take_over / stop
    ACTION = "action"       # human mode: run(action) / submit / hand_back / stop
    PAUSED = "paused"       # auto mode paused: run (= go on) / take_over / submit / stop
    INVALID = "invalid"     # a reply with no action: run (= ask again) / edit(action) / take_over / submit / stop
    FAILED = "failed"       # the model call failed: run (= try again) / take_over / submit / stop

    def __str__(self) -> str:    # its value, also in f-strings (Python 3.10 and 3.11 alike)
        return str(self.value)


# the request kinds by their short names (the names views and tests import)
PROPOSAL, SUBMIT_PROPOSAL, ACTION = RequestKind.PROPOSAL, RequestKind.SUBMIT, RequestKind.ACTION
PAUSED, INVALID, FAILED = RequestKind.PAUSED, RequestKind.INVALID, RequestKind.FAILED

ALLOWED = {
    PROPOSAL: {RUN, EDIT, REJECT, TAKE_OVER, SUBMIT, STOP},
    SUBMIT_PROPOSAL: {RUN, EDIT, REJECT, TAKE_OVER, SUBMIT, STOP},
    ACTION: {RUN, SUBMIT, HAND_BACK, STOP},
    PAUSED: {RUN, TAKE_OVER, SUBMIT, STOP},
    INVALID: {RUN, EDIT, TAKE_OVER, SUBMIT, STOP},
    FAILED: {RUN, TAKE_OVER, SUBMIT, STOP},
}


@dataclass
class Request:
    """A decision that waits for a human; ``future`` holds the answer."""

    id: int
    kind: RequestKind
    proposal: Proposal | None = None
    message: str | None = None       # FAILED: what went wrong; INVALID: the raw reply
    future: Future[Decision] = field(default_factory=Future)

    @property
    def allowed(self) -> set[str]:
        return ALLOWED[self.kind]

    @property
    def open(self) -> bool:
        return not self.future.done()


class Broker:
    """The gate between proposals and the env; thread-safe."""

    def __init__(self, mode: str = AUTO, agent_mode: str | None = None):
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r} (one of: {', '.join(MODES)})")
        self._cond = threading.Condition()
        self._mode = mode
        self.agent_mode = agent_mode or (mode if mode != HUMAN_MODE else CONFIRM)   # where hand_back returns
        self._steps_left: int | None = None     # auto: None = go on; 0 = pause at the next checkpoint
        self._pending: dict[int, Request] = {}
        self._ids = itertools.count(1)
        self._stopped = False
        self.listeners: list[Callable[[str, object], None]] = []   # (what, payload): "mode", "request", "withdrawn"

    # -- mode ---------------------------------------------------------------------------
    @property
    def mode(self) -> str:
        return self._mode

    @property
    def paused(self) -> bool:
        return self._steps_left == 0

    def set_mode(self, mode: str) -> None:
        """Switch mode now; waiting requests that the new mode answers are answered."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r} (one of: {', '.join(MODES)})")
        with self._cond:
            if mode == self._mode:
                return
            self._mode = mode
            self._steps_left = None           # a new mode starts unpaused
            if mode != HUMAN_MODE:
                self.agent_mode = mode
            for req in list(self._pending.values()):
                settled = self._settled(req.kind)
                if settled is not None:
                    self._resolve(req, settled)
            self._cond.notify_all()
        self._emit("mode", mode)

    def _settled(self, kind: RequestKind) -> Decision | None:
        """The answer the current mode gives a request of ``kind`` without asking anyone."""
        mode = self._mode
        if mode == AUTO and kind in (PROPOSAL, SUBMIT_PROPOSAL, INVALID):
            return Decision(RUN)
        if mode == HUMAN_MODE and kind in (PROPOSAL, SUBMIT_PROPOSAL, INVALID, PAUSED, FAILED):
            return Decision(TAKE_OVER)
        if mode != HUMAN_MODE and kind == ACTION:
            return Decision(HAND_BACK)
        if kind == PAUSED and self._steps_left != 0:
            return Decision(RUN)
        return None

    def take_over(self) -> None:
        self.set_mode(HUMAN_MODE)

    def hand_back(self, mode: str | None = None) -> None:
        self.set_mode(mode or self.agent_mode)

    # -- auto pacing --------------------------------------------------------------------
    def pause_after_step(self) -> None:
        """Auto mode: finish the step under way, then wait (``resume`` / ``step_one``)."""
        with self._cond:
            self._steps_left = 0
            self._cond.notify_all()

    def step_one(self) -> None:
        """Let exactly one more step through, then pause."""
        with self._cond:
            self._steps_left = 1
            for req in list(self._pending.values()):
                if req.kind == PAUSED:
                    self._steps_left = 0          # this request's answer is the one step
                    self._resolve(req, Decision(RUN))
            self._cond.notify_all()

    def resume(self) -> None:
        with self._cond:
            self._steps_left = None
            for req in list(self._pending.values()):
                if req.kind == PAUSED:
                    self._resolve(req, Decision(RUN))
            self._cond.notify_all()

    # -- requests -----------------------------------------------------------------------
    def pending(self) -> list[Request]:
        with self._cond:
            return [r for r in self._pending.values() if r.open]

    def answer(self, request_id: int, decision: Decision) -> bool:
        """Answer a waiting request; False when it is no longer waiting (answered, withdrawn)."""
        with self._cond:
            req = self._pending.get(request_id)
            if req is None or not req.open:
                return False
            if decision.kind not in req.allowed:
                raise ValueError(f"a {req.kind} request takes {', '.join(sorted(req.allowed))}, "
                                 f"not {decision.kind}")
            self._resolve(req, decision)
            return True

    def withdraw_all(self) -> None:
        """Answer every waiting request ``stop`` (the episode is stopping)."""
        with self._cond:
            self._stopped = True
            for req in list(self._pending.values()):
                self._resolve(req, Decision(STOP))
            self._cond.notify_all()

    def reopen(self) -> None:
        """After a stop, accept requests again (a resumed episode)."""
        with self._cond:
            self._stopped = False

    def _resolve(self, req: Request, decision: Decision) -> None:
        if req.open:
            req.future.set_result(decision)
        self._pending.pop(req.id, None)

    def wait(self, kind: RequestKind, proposal: Proposal | None = None, message: str | None = None) -> Decision:
        """Open a request and block until it is answered (or withdrawn: ``stop``)."""
        with self._cond:
            if self._stopped:
                return Decision(STOP)
            settled = self._settled(kind)     # the mode changed since the caller looked
            if settled is not None:
                return settled
            req = Request(next(self._ids), kind, proposal, message)
            self._pending[req.id] = req
        self._emit("request", req)
        decision = req.future.result()
        self._emit("answered", req)
        return decision

    def _emit(self, what: str, payload: object) -> None:
        for listener in list(self.listeners):
            listener(what, payload)

    # -- the driver's questions ---------------------------------------------------------
    def checkpoint(self) -> Decision | None:
        """Before a step: None to go on, or what the human said while the episode was paused."""
        with self._cond:
            if self._mode == HUMAN_MODE or self._steps_left is None:
                return None
            if self._steps_left > 0:
                self._steps_left -= 1
                return None
        decision = self.wait(PAUSED)
        return None if decision.kind == RUN else decision

    def decide(self, proposal: Proposal, trajectory: Trajectory | None = None) -> Decision:
        """The Gate protocol: what to do with ``proposal`` in the current mode."""
        kind = INVALID if proposal.info.get("invalid") else (SUBMIT_PROPOSAL if proposal.action is None else PROPOSAL)
        if self._mode == AUTO:
            return Decision(RUN)
        if self._mode == HUMAN_MODE:
            return Decision(TAKE_OVER)
        return self.wait(kind, proposal, proposal.raw if kind == INVALID else None)

    def ask_action(self) -> Decision:
        """Human mode: the human's next move."""
        return self.wait(ACTION)

    def ask_after_failure(self, message: str) -> Decision:
        return self.wait(FAILED, message=message)


__all__ = ["AUTO", "CONFIRM", "HUMAN_MODE", "MODES", "Broker", "Request", "RequestKind", "PROPOSAL", "SUBMIT_PROPOSAL", "ACTION",
           "PAUSED", "INVALID", "FAILED", "ALLOWED"]
