"""The live screen's agent panel and the human's gate on the agent's moves: approve, edit or
reject a proposal, take over and hand back, the mode, pause, one step, go on, stop; a turn's label,
and after the end a branch of the episode."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from icplay.driver import (ACTION, AUTO, CONFIRM, FAILED, HUMAN_MODE, INVALID, PAUSED, PROPOSAL, SUBMIT_PROPOSAL,
                           Decision, Driver)
from icplay.driver.broker import Request
from icplay.driver.events import CallCancelled, Retrying, State
from icplay.envs.base import parse_submit
from icplay.episode import Proposal, label_turn
from icplay.languages.submitting import submit_preview
from icplay.review.labels import LABEL_PROMPT, LabelError, parse_label
from icplay.tui.live.ends import OVER_FAILED, OVER_STOPPED, OVER_SUBMITTED
from icplay.tui.screens.branching import ask_and_branch
from icplay.tui.screens.modals import CommentScreen
from icplay.tui.shown import safe
from icplay.tui.widgets.agent import AgentPanel

if TYPE_CHECKING:
    from icplay.tui.screens.live import LiveScreen

# the keys only an agent's episode has (the watch scope, and the branch after its end)
AGENT_ACTIONS = frozenset({"approve", "edit", "reject", "take_over", "hand_back", "toggle_reasoning", "cycle_mode",
                           "set_mode", "pause_agent", "step_one", "resume_agent", "stop", "branch_episode"})

# the answers to a request of the agent's, and the requests each can answer
ANSWERS = {
    "approve": (PROPOSAL, SUBMIT_PROPOSAL, INVALID, FAILED, PAUSED),
    "edit": (PROPOSAL, SUBMIT_PROPOSAL, INVALID),
    "reject": (PROPOSAL, SUBMIT_PROPOSAL),
}

HINTS = {
    PROPOSAL: "Ctrl+Y approve · Ctrl+E edit · Ctrl+X reject · F7 take over · F10 mode",
    SUBMIT_PROPOSAL: "the agent wants to submit · Ctrl+Y submit · Ctrl+X reject · F7 take over",
    INVALID: "no action in the reply · Ctrl+E edit it into one · Ctrl+Y ask again · F7 take over",
    FAILED: "the model call failed · Ctrl+Y try again · F7 take over · F12 stop",
    PAUSED: "paused · Alt+G go on · Alt+N one step · F7 take over",
    ACTION: "your turn: type an action, {run} runs it · F7 hands back · Ctrl+S submit",
}


def call_label(info: dict[str, Any]) -> str:
    """The tool a proposed call calls, and where it stands in a reply of several calls."""
    k, n = info.get("batch") or (1, len(info.get("tool_calls") or []))
    call = info.get("tool_call") or {}
    name = "".join(c for c in f"{call.get('name') or '?'} · id {call.get('id') or '?'}" if c.isprintable())[:120]
    return f"{name}  (call {k} of {n} in one reply)" if n > 1 else name


def invalid_reason(info: dict[str, Any]) -> str:
    """Why a reply holds no action that can run, in words."""
    return {"truncated": "the reply was cut at the token limit; what it held was not run",
            "reasoning_only": "the reply held only reasoning, no answer",
            "no_call": "the reply called no tool"}.get(info.get("invalid_reason") or "",
                                                       "the reply has no action" if info.get("tool_call") is None
                                                       else "the tool call cannot run")


def invalid_reply(proposal: Proposal) -> str:
    """A reply with no action, as the panel shows it: with tools, what the model is told too."""
    raw = proposal.raw or ""
    if proposal.info.get("actions") == "tools":
        raw = "\n".join(filter(None, [raw.strip(), str(proposal.info.get("retry_message") or "")]))
    return raw


def label_safe(driver: Driver) -> bool:
    """The driver's thread is not writing the trajectory: it waits for a human, or has ended."""
    return driver.ended or driver.state in (State.WAITING, State.PAUSED)


class AgentGate:
    """What the human does about the agent (the watch scope's keys), and what the agent panel
    shows of the driver's events. Only an agent's episode has the panel."""

    def __init__(self, screen: LiveScreen) -> None:
        self.screen = screen
        self.note = ""                 # said once, before the next hint
        self.cancelled_calls = 0

    @property
    def panel(self) -> AgentPanel:
        return self.screen.panel

    def allows(self, action: str) -> bool:
        """Whether a watch key does something now (its ``check_action``)."""
        screen = self.screen
        if action == "branch_episode":     # once the episode has ended
            return screen.state in (OVER_SUBMITTED, OVER_STOPPED, OVER_FAILED)
        kind = screen.request.kind if screen.request is not None else None
        over = screen.state in (OVER_SUBMITTED, OVER_STOPPED)
        if action in ANSWERS:
            return kind in ANSWERS[action]
        if action == "take_over":
            return not over and screen.broker.mode != HUMAN_MODE
        if action == "hand_back":
            return not over and screen.broker.mode == HUMAN_MODE and screen.driver is not None \
                and screen.driver.policy is not None
        if action == "toggle_reasoning":
            return True
        return not over

    # -- the answers to a proposal ------------------------------------------------------------

    def approve(self) -> None:
        self.screen.answer(Decision.run())

    def edit(self) -> None:
        """The proposal (or the reply with no action) into the pane, to be run as edited."""
        screen = self.screen
        request = screen.request
        if request is None:
            return
        text = request.message if request.kind == INVALID else (
            request.proposal.action if request.proposal is not None and request.proposal.action else "submit")
        screen.editing = request
        pane = screen.pane
        pane.set_input(text or "")
        screen.play.sync_input()
        pane.focus_input()
        self.panel.set_hint(f"editing the proposal · {screen.run_key} runs it as edited · Ctrl+Y runs the original")

    def reject(self) -> None:
        screen = self.screen
        request = screen.request
        if request is None:
            return

        def send(comment: str | None) -> None:
            if comment is not None and screen.request is request:
                screen.answer(Decision.reject(comment or None))

        screen.app.push_screen(CommentScreen("Reject the proposal. Your comment goes to the model:",
                                             "why not, and what to do instead"), send)

    # -- who has the turn, and how the agent goes on ----------------------------------------------

    def take_over(self) -> None:
        self.screen.broker.take_over()

    def hand_back(self) -> None:
        self.screen.broker.hand_back()

    def cycle_mode(self) -> None:
        order = [AUTO, CONFIRM, HUMAN_MODE]
        self.set_mode(order[(order.index(self.screen.broker.mode) + 1) % len(order)])

    def set_mode(self, mode: str) -> None:
        screen = self.screen
        if mode == HUMAN_MODE or screen.driver is None or screen.driver.policy is not None:
            screen.broker.set_mode(mode)

    def pause_agent(self) -> None:
        self.screen.broker.pause_after_step()
        self.panel.set_hint("pausing after this step · Alt+G go on · Alt+N one step")

    def step_one(self) -> None:
        self.screen.broker.step_one()

    def resume_agent(self) -> None:
        self.screen.broker.resume()

    def stop(self) -> None:
        if self.screen.driver is not None:
            self.screen.driver.stop("stopped by the human")
        self.panel.set_hint("stopping…")

    def toggle_reasoning(self) -> None:
        self.panel.toggle_reasoning()

    # -- labels and branches ---------------------------------------------------------------------

    def label_turn(self) -> None:
        """Label the last turn (a modal asks good, bad or neutral and a note). Only while the
        driver waits for a human or has ended: then nothing else writes the trajectory."""
        screen = self.screen
        driver = screen.driver
        if driver is None or not driver.trajectory.turns:
            screen.notify("No turn to label yet.", severity="warning")
            return
        if not label_safe(driver):
            screen.notify("Label a turn while the agent waits (confirm mode, a pause) or after the end.",
                          severity="warning")
            return
        number = len(driver.trajectory.turns)

        def answered(words: str | None) -> None:
            if not words or not label_safe(driver):
                return
            try:
                label, note = parse_label(words)
            except LabelError as exc:
                screen.notify(safe(exc), severity="warning", markup=False)
                return
            turn = driver.trajectory.turns[number - 1]
            label_turn(turn, label, note, driver.episode.annotator or driver.trajectory.annotator)
            driver.episode.save()
            screen.notify(f"Turn {number} labelled {label}.", markup=False)

        screen.app.push_screen(CommentScreen(f"Label turn {number}: {LABEL_PROMPT}", "good"), answered)

    def branch_episode(self) -> None:
        """After the end: branch the episode at the highlighted turn (else the last), its N sampled
        continuations played by this screen's agent (``branching``)."""
        screen = self.screen
        traj = screen.trajectory
        if traj is None or not traj.turns or not screen.check_action("branch_episode", ()):
            return
        at = screen.turn_list.highlighted
        k = at if at is not None and 0 <= at < len(traj.turns) else len(traj.turns) - 1
        ask_and_branch(screen, traj, k, screen.agent)

    # -- what the panel shows of the driver's events ---------------------------------------------

    def on_state(self, state: State) -> None:
        self.panel.set_state(state)
        if state == State.THINKING:
            self.panel.set_hint("the model is writing · F7 take over · F10 mode · F12 stop")

    def show_proposal(self, proposal: Proposal) -> None:
        """A proposal, a submit (with what it would score), or a reply with no action."""
        screen = self.screen
        info = proposal.info
        call = info.get("tool_call")
        reasoning, truncated = info.get("reasoning"), bool(info.get("reply_truncated"))
        if info.get("invalid"):
            self.panel.show_failure(invalid_reason(info), raw=invalid_reply(proposal), reasoning=reasoning,
                                    truncated=truncated)
        else:
            is_submit, arg = parse_submit(proposal.action or "submit")
            self.panel.show_proposal(proposal.thought, proposal.action, submit=proposal.action is None,
                                     reasoning=reasoning, truncated=truncated,
                                     tool=call_label(info) if call else None,
                                     scored=submit_preview(screen.task_record.env, screen.trajectory.turns, arg,
                                                           "agent")
                                     if is_submit and screen.trajectory is not None else None)
        self.show_usage()

    def on_request(self, request: Request) -> None:
        """The hint for what the driver asks (after a note kept for it), and a failed call's error."""
        self.panel.set_hint(self.note + HINTS.get(request.kind, "").format(run=self.screen.run_key))
        self.note = ""
        if request.kind == FAILED and request.message:
            self.panel.show_failure(self.screen.bar.blind(request.message))

    def on_mode(self, mode: str) -> None:
        self.panel.set_mode(mode)
        if mode == HUMAN_MODE:
            self.panel.clear_proposal()

    def on_retry(self, event: Retrying) -> None:
        self.panel.reset_stream()
        self.panel.show_failure(self.screen.bar.blind(f"{event.message} (attempt {event.attempt})"),
                                retry_in=event.delay)

    def on_cancelled(self, event: CallCancelled) -> None:
        self.cancelled_calls += 1
        self.note = "the model call was cancelled (no turn recorded) · "
        if self.screen.agent is not None:
            self.panel.set_hint(self.note.rstrip(" ·"))

    def ended(self, status: str, hint: str) -> None:
        self.panel.set_state(status)
        self.panel.set_hint(hint)

    def show_usage(self) -> None:
        traj = self.screen.trajectory
        if traj is not None:
            usage = traj.usage
            unknown = usage.get("calls") and (usage.get("completion_tokens_unknown") or 0) >= usage.get("calls", 0)
            self.panel.set_usage(None if unknown else traj.tokens, traj.cost)
