"""The driver's calls to its policy: one at a time, cancellable from any thread, cut short when
the episode's wall time runs out, their usage summed on the trajectory and the run's budget,
and what the policy tells meanwhile (streamed text, retries) passed on as events."""

from __future__ import annotations

import threading
from typing import Any, Callable

from icplay.driver.events import CallCancelled, Delta, Event, Proposed, Reasoning, Retrying
from icplay.driver.settings import Budget, Limits
from icplay.episode import Cancelled, Policy, Proposal, Trajectory, add_usage
from icplay.tasks.model import Task


def note_event(kind: str, data: dict[str, Any]) -> Event | None:
    """The event for one of the policy's notes (``delta``, ``reasoning``, ``retry``), else None."""
    if kind == "delta":
        return Delta(str(data.get("text", "")))
    if kind == "reasoning":
        return Reasoning(str(data.get("text", "")))
    if kind == "retry":
        return Retrying(attempt=int(data.get("attempt") or 0), delay=float(data.get("delay") or 0.0),
                        message=str(data.get("message") or ""))
    return None


class PolicyCalls:
    """A driver's policy calls. ``lock`` is the driver's: a stop and the start of a call see
    each other (``stopping`` is read under it)."""

    def __init__(self, policy: Policy, lock: threading.Lock, limits: Limits, budget: Budget | None,
                 started: float, emit: Callable[[Event], None]):
        self.policy = policy
        self._lock = lock
        self._limits, self._budget, self._started = limits, budget, started
        self._emit = emit
        self._cancel: threading.Event | None = None

    def cancel(self) -> None:
        """Cancel the call under way, if any (any thread)."""
        with self._lock:
            cancel = self._cancel
        if cancel is not None:
            cancel.set()

    def propose(self, task: Task, trajectory: Trajectory, stopping: threading.Event, skip: bool) -> Proposal | None:
        """Ask the policy; None when the call was cancelled (``skip``: cancelled before it starts)."""
        cancel = threading.Event()
        with self._lock:
            self._cancel = cancel
            if stopping.is_set():
                cancel.set()
        if skip:
            cancel.set()
        timer = self._limits.call_timer(self._started, cancel)
        try:
            proposal = self.policy.propose(task, trajectory, cancel=cancel, notify=self._note)
        except Cancelled as exc:
            self._add_usage(trajectory, exc.usage)     # a call cut short still cost its tokens
            self._emit(CallCancelled())
            return None
        finally:
            if timer is not None:
                timer.cancel()
            with self._lock:
                self._cancel = None
        self._add_usage(trajectory, proposal.info.get("usage") or {})
        if cancel.is_set():    # stopped or taken over as the reply arrived: drop it
            self._emit(CallCancelled())
            return None
        self._emit(Proposed(proposal))
        return proposal

    def _add_usage(self, trajectory: Trajectory, usage: dict[str, Any]) -> None:
        if not usage:
            return
        trajectory.policy["usage"] = add_usage(trajectory.usage, usage)
        if self._budget is not None:
            self._budget.add(usage)

    def _note(self, kind: str, data: dict[str, Any]) -> None:
        event = note_event(kind, data)
        if event is not None:
            self._emit(event)


__all__ = ["PolicyCalls", "note_event"]
