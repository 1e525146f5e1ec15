"""What each of the driver's events changes on the live screen, part by part (a registry, by
the event's type). The events come on the UI thread, as the screen's ``DriverMessage``s; the
driver's command output never does (it goes straight into the pane's feed)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from icplay.driver import ACTION
from icplay.driver.events import (CallCancelled, Delta, Event, Failure, Finished, ModeChanged, Proposed, Reasoning,
                                  RequestClosed, RequestOpened, Retrying, Scored, StateChanged, TurnRecorded)
from icplay.tui.live.ends import OVER_FAILED

if TYPE_CHECKING:
    from icplay.tui.screens.live import LiveScreen


class DriverEvents:
    """The screen keeps no state machine of its own: the driver's state, its open request and
    the episode's end are kept as they come, and the parts show them."""

    def __init__(self, screen: LiveScreen) -> None:
        self.screen = screen

    def handle(self, event: Event) -> None:
        handler = DRIVER_HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def state_changed(self, event: StateChanged) -> None:
        screen = self.screen
        screen.driver_state = event.state
        screen.play.on_state(event.state)
        if screen.agent is not None:
            screen.gate.on_state(event.state)
            screen.play.sync_input()
        screen.bar.refresh()

    def delta(self, event: Delta) -> None:
        if self.screen.agent is not None:
            self.screen.panel.add_delta(event.text)

    def reasoning(self, event: Reasoning) -> None:
        if self.screen.agent is not None:
            self.screen.panel.add_reasoning(event.text)

    def proposed(self, event: Proposed) -> None:
        screen = self.screen
        screen.play.next_action = event.proposal.action or ""
        if screen.agent is not None:
            screen.gate.show_proposal(event.proposal)

    def request_opened(self, event: RequestOpened) -> None:
        """The driver asks (the human, or the agent's gate): shown, unless a submit waited for it."""
        screen = self.screen
        request = event.request
        screen.request = request
        if screen.agent is not None:
            screen.gate.on_request(request)
        if screen.submit_flow.answer_when_asked(request):
            return
        if request.kind == ACTION and screen.agent is not None:
            screen.pane.focus_input()
        screen.play.sync_input()
        screen.bar.refresh()
        screen.refresh_bindings()

    def request_closed(self, event: RequestClosed) -> None:
        screen = self.screen
        if screen.request is event.request:
            screen.request = None
        if screen.editing is event.request:
            screen.editing = None
        screen.play.sync_input()
        screen.refresh_bindings()

    def mode_changed(self, event: ModeChanged) -> None:
        if self.screen.agent is not None:
            self.screen.gate.on_mode(event.mode)
        self.screen.refresh_bindings()

    def turn_recorded(self, event: TurnRecorded) -> None:
        screen = self.screen
        screen.play.turn_recorded(event.turn)
        if screen.agent is not None:
            screen.gate.show_usage()
        screen.bar.refresh()

    def scored(self, event: Scored) -> None:
        if self.screen.agent is not None:
            self.screen.play.refresh_turns()

    def retrying(self, event: Retrying) -> None:
        if self.screen.agent is not None:
            self.screen.gate.on_retry(event)

    def failure(self, failure: Failure) -> None:
        """A command or the submit failed (the human moves again), a model call failed, or the
        driver itself did."""
        screen = self.screen
        message = screen.bar.blind(failure.message)
        if screen.agent is not None:
            screen.panel.show_failure(message)
        elif failure.during == "submit" or screen.submit_flow.submitting:
            screen.submit_flow.failed(message)
        else:
            screen.play.step_failed(message)
        if failure.fatal and screen.agent is None:
            screen.over = OVER_FAILED
            screen.refresh_bindings()
        screen.bar.refresh()

    def cancelled(self, event: CallCancelled) -> None:
        self.screen.gate.on_cancelled(event)

    def finished(self, event: Finished) -> None:
        self.screen.submit_flow.finished(event.trajectory)


DRIVER_HANDLERS: dict[type[Event], Callable[[DriverEvents, Any], None]] = {
    StateChanged: DriverEvents.state_changed, Delta: DriverEvents.delta, Reasoning: DriverEvents.reasoning,
    Proposed: DriverEvents.proposed, RequestOpened: DriverEvents.request_opened,
    RequestClosed: DriverEvents.request_closed, ModeChanged: DriverEvents.mode_changed,
    TurnRecorded: DriverEvents.turn_recorded, Scored: DriverEvents.scored, Retrying: DriverEvents.retrying,
    Failure: DriverEvents.failure, CallCancelled: DriverEvents.cancelled, Finished: DriverEvents.finished,
}
