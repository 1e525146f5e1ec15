"""The watch screen: an agent works the task live; the human approves, edits, rejects, takes over.

It is the play screen (query, live pane, trajectory sidebar, clock) plus the agent panel.
The episode is opened by the screen's host as in play, and run by the same driver, here
with the agent's policy and this screen's ``Broker`` (its mode) as its gate. The driver's
events arrive as ``DriverEvent`` Messages (command output goes straight into the pane's
thread-safe feed); the screen keeps no episode state of its own beyond what it shows, and
answers the broker's requests (request id → decision) from the UI thread.
"""

from __future__ import annotations

import threading
import time

from rich.text import Text
from textual.app import ComposeResult

from icplay.driver import (ACTION, AUTO, CONFIRM, FAILED, HUMAN_MODE, INVALID, MODES, PAUSED, PROPOSAL,
                           SUBMIT_PROPOSAL, Broker, Decision, Driver, Limits)
from icplay.driver.events import Failure, Retrying, State
from icplay.envs.base import parse_submit
from icplay.episode import Episode
from icplay.languages.submitting import submit_preview
from icplay.tasks.model import Task
from icplay.frontend.config import AgentChoice
from icplay.tui.keys import bindings, run_key_label
from icplay.frontend.policies import PolicyError, make_policy
from icplay.frontend.opening import Opened, user_name
from icplay.tui.screens.modals import CommentScreen, ConfirmScreen, submit_question
from icplay.tui.screens.play import (BROKEN, READY, RUNNING, SUBMITTED, SUBMITTING,
                                     PlayScreen)
from icplay.tui.widgets.agent import AgentPanel
from icplay.tui.widgets.panes import BashPane

STOPPED = "stopped"

def call_label(info: dict) -> str:
    """The tool a proposed call calls, and where it stands in a reply of several calls."""
    k, n = info.get("batch") or (1, len(info.get("tool_calls") or []))
    name = str((info.get("tool_call") or {}).get("name") or "?")
    return f"{name}  (call {k} of {n} in one reply)" if n > 1 else name


HINTS = {
    PROPOSAL: "Ctrl+Y approve · Ctrl+E edit · Ctrl+X reject · F7 take over · F10 mode",
    SUBMIT_PROPOSAL: "the agent wants to submit · Ctrl+Y submit · Ctrl+X reject · F7 take over",
    INVALID: "no action in the reply · Ctrl+E edit it into one · Ctrl+Y ask again · F7 take over",
    FAILED: "the model call failed · Ctrl+Y try again · F7 take over · F12 stop",
    PAUSED: "paused · Alt+G go on · Alt+N one step · F7 take over",
    ACTION: "your turn: type an action, {run} runs it · F7 hands back · Ctrl+S submit",
}


class WatchScreen(PlayScreen):
    BINDINGS = bindings("watch")

    def __init__(self, task: Task, agent: AgentChoice, retry: bool = False, limits: Limits | None = None,
                 policy: tuple | None = None) -> None:
        super().__init__(task, retry=retry)
        self.agent = agent
        self.prebuilt = policy               # (policy, description) from icplay watch, else built here
        self.policy_error: str | None = None
        self.limits = limits or Limits(max_turns=30)
        self.broker = Broker(agent.mode if agent.mode in MODES else CONFIRM)
        self.agent_state = "starting"
        self.editing = None                  # the request whose proposal is being edited in the pane
        self._next_action = ""
        self._submit_when_asked = False
        self._note = ""                      # said once, before the next hint
        self.cancelled_calls = 0

    # -- layout ---------------------------------------------------------------------------------

    def compose_agent(self) -> ComposeResult:
        yield AgentPanel(self.task_record.env, model=self.agent.label, frozen=self.frozen, id="agent")

    @property
    def run_key(self) -> str:
        """The key that runs the typed action in this language's input (Enter, or F5 in an editor)."""
        return run_key_label(self.app, self.language.keys_scope)

    @property
    def panel(self) -> AgentPanel:
        return self.query_one(AgentPanel)

    @property
    def session(self):
        return self.app.watch_session

    def on_mount(self) -> None:
        # (Textual calls PlayScreen.on_mount after this one: it starts the episode host.)
        self.panel.set_mode(self.broker.mode)
        self._sync_input()

    def policy_info(self) -> dict:
        """Builds the policy (once): its description heads a new trajectory."""
        if self.prebuilt is None:
            try:
                self.prebuilt = make_policy(self.agent, self.task_record)
            except PolicyError as exc:
                self.policy_error = str(exc)
                return {"kind": "human", "ui": "tui-watch", "user": user_name()}
        policy, info = self.prebuilt
        self._warm_model(policy)
        return {**info, "protocol": self.agent.protocol, "ui": "tui-watch", "user": user_name()}

    @staticmethod
    def _warm_model(policy) -> None:
        """Open the model's client (importing the client library, loading the TLS
        certificates: seconds on a loaded machine) on a thread of its own while the sandbox
        starts, so the first proposal does not wait for it after the sandbox."""
        client = getattr(getattr(policy, "model", None), "client", None)
        if not callable(client):
            return

        def warm() -> None:
            try:
                client()
            except Exception:       # a missing key is said by the first call, in the panel
                pass

        threading.Thread(target=warm, name="icplay-warm-model", daemon=True).start()

    # -- the driver -----------------------------------------------------------------------------

    def make_driver(self, episode: Episode) -> Driver:
        """(On the host's thread.) The agent's policy and this screen's broker; without a
        policy (it could not be built) the human has the turn."""
        assert self.host is not None
        if self.prebuilt is None:
            self.broker.set_mode(HUMAN_MODE)
            policy = None
        else:
            policy, info = self.prebuilt
            episode.trajectory.adopt_policy({**info, "protocol": self.agent.protocol, "ui": "tui-watch",
                                             "user": user_name()})
        return Driver(episode, policy, protocol=self.agent.protocol, limits=self.limits, broker=self.broker,
                      on_event=self._from_driver, on_failure="ask", around_action=self.host.around_action)

    def on_runner_opened(self, message: Opened) -> None:
        super().on_runner_opened(message)
        if self.prebuilt is None:
            self.panel.show_failure(self.policy_error or "no policy")
            self.panel.set_hint("F7 take over and work the task yourself · Ctrl+B back to the task list")
        self._show_usage()

    def on_driver_state(self, state: State) -> None:
        self.agent_state = state
        self.panel.set_state(state)
        if state == State.RUNNING:
            self.state = RUNNING
            self._run_started = time.monotonic()
            self.pane.turn_started(self._next_action)
            self._attach_feed(self.pane.output_feed())
        elif state in (State.THINKING, State.WAITING, State.PAUSED, State.IDLE):
            self.state = READY
        elif state == State.SCORING:
            self.state = SUBMITTING if self.state == SUBMITTING else self.state
        if state == State.THINKING:
            self.panel.set_hint("the model is writing · F7 take over · F10 mode · F12 stop")
        self._sync_input()
        self.refresh_status()

    def on_driver_delta(self, text: str) -> None:
        self.panel.add_delta(text)

    def on_driver_reasoning(self, text: str) -> None:
        self.panel.add_reasoning(text)

    def action_toggle_reasoning(self) -> None:
        self.panel.toggle_reasoning()

    def on_driver_proposal(self, proposal) -> None:
        self._next_action = proposal.action or ""
        info = proposal.info
        call = info.get("tool_call")
        reasoning, truncated = info.get("reasoning"), bool(info.get("reply_truncated"))
        if info.get("invalid"):
            why = {"truncated": "the reply was cut at the token limit before it held an action",
                   "reasoning_only": "the reply held only reasoning, no answer",
                   "no_call": "the reply called no tool"}.get(info.get("invalid_reason"),
                                                              "the reply has no action" if call is None
                                                              else "the tool call cannot run")
            raw = proposal.raw or ""
            if info.get("actions") == "tools":     # what the model is told, with the reply
                raw = "\n".join(filter(None, [raw.strip(), str(info.get("retry_message") or "")]))
            self.panel.show_failure(why, raw=raw, reasoning=reasoning, truncated=truncated)
        else:
            is_submit, arg = parse_submit(proposal.action or "submit")
            self.panel.show_proposal(proposal.thought, proposal.action, submit=proposal.action is None,
                                     reasoning=reasoning, truncated=truncated,
                                     tool=call_label(info) if call else None,
                                     scored=submit_preview(self.task_record.env, self.trajectory.turns, arg, "agent")
                                     if is_submit and self.trajectory is not None else None)
        self._show_usage()

    def on_driver_request(self, request) -> None:
        self.request = request
        self.panel.set_hint(self._note + HINTS.get(request.kind, "").format(run=self.run_key))
        self._note = ""
        if request.kind == FAILED and request.message:
            self.panel.show_failure(request.message)
        if request.kind == ACTION and self._submit_when_asked:
            self._submit_when_asked = False
            self._answer(Decision.submit())
            return
        if request.kind == ACTION:
            self.pane.focus_input()
        self._sync_input()
        self.refresh_bindings()

    def on_driver_answered(self, request) -> None:
        if self.request is request:
            self.request = None
        if self.editing is request:
            self.editing = None
        self._sync_input()
        self.refresh_bindings()

    def on_driver_mode(self, mode: str) -> None:
        self.panel.set_mode(mode)
        self.refresh_bindings()

    def on_driver_turn(self, turn) -> None:
        self._detach_feed()
        if turn.action:
            self.pane.turn_finished(turn)
        self._refresh_turns()
        self._show_usage()
        if self.state == RUNNING:
            self.state = READY
        self.refresh_status()

    def on_driver_score(self, result) -> None:
        self._refresh_turns()

    def on_driver_retry(self, retry: Retrying) -> None:
        self.panel.reset_stream()
        self.panel.show_failure(f"{retry.message} (attempt {retry.attempt})", retry_in=retry.delay)

    def on_driver_error(self, failure: Failure) -> None:
        self.panel.show_failure(failure.message)

    def on_driver_cancelled(self) -> None:
        self.cancelled_calls += 1
        self._note = "the model call was cancelled (no turn recorded) · "
        self.panel.set_hint(self._note.rstrip(" ·"))

    def on_driver_finished(self, trajectory) -> None:
        self.request = None
        self.editing = None
        if trajectory.status == "submitted":
            from icplay.tui.screens.modals import result_from_trajectory

            self.state = SUBMITTING
            self.show_scored(result_from_trajectory(trajectory))
            self.panel.set_state("done")
            self.panel.set_hint(f"submitted · reward {trajectory.reward:.2f}")
        else:
            self.state = STOPPED if trajectory.status == "stopped" else BROKEN
            self.pane.set_busy(True)
            self.panel.set_state("done" if trajectory.status == "stopped" else "failed")
            why = f" ({trajectory.error})" if trajectory.error else ""
            self.panel.set_hint(f"{trajectory.status}{why} · F8 reopens it (saved turns replayed) · "
                                "Ctrl+B back to the task list")
            self._set_pane_status(Text(f"episode {trajectory.status}", style="yellow"))
        self._refresh_turns()
        self.refresh_bindings()
        self.refresh_status()

    def _refresh_turns(self) -> None:
        if self.trajectory is not None:
            self.turn_list.set_turns(self.trajectory.turns)

    def _show_usage(self) -> None:
        traj = self.trajectory
        if traj is not None:
            usage = traj.usage
            unknown = usage.get("calls") and (usage.get("completion_tokens_unknown") or 0) >= usage.get("calls", 0)
            self.panel.set_usage(None if unknown else traj.tokens, traj.cost)

    def _sync_input(self) -> None:
        """The pane takes input only when the human has the turn or edits a proposal."""
        open_for_human = self.editing is not None or (self.request is not None and self.request.kind == ACTION)
        self.pane.set_busy(not open_for_human)

    # -- answering the broker ---------------------------------------------------------------------

    def _answer(self, decision: Decision) -> bool:
        request = self.request
        if request is None or not request.open:
            self.app.bell()
            return False
        try:
            done = self.broker.answer(request.id, decision)
        except ValueError as exc:
            self.notify(str(exc), severity="warning")
            return False
        if done and decision.kind in ("run", "edit") and decision.action:
            self._next_action = decision.action
        return done

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        kind = self.request.kind if self.request is not None else None
        over = self.state in (SUBMITTED, STOPPED)
        if action == "approve":
            return kind in (PROPOSAL, SUBMIT_PROPOSAL, INVALID, FAILED, PAUSED)
        if action == "edit":
            return kind in (PROPOSAL, SUBMIT_PROPOSAL, INVALID)
        if action == "reject":
            return kind in (PROPOSAL, SUBMIT_PROPOSAL)
        if action == "take_over":
            return not over and self.broker.mode != HUMAN_MODE
        if action == "hand_back":
            return not over and self.broker.mode == HUMAN_MODE and self.driver is not None \
                and self.driver.policy is not None
        if action in ("cycle_mode", "set_mode", "pause_agent", "step_one", "resume_agent", "stop"):
            return not over
        if action == "retry":
            return over or self.state == BROKEN
        if action == "interrupt":
            return self.state == RUNNING
        return super().check_action(action, parameters)

    def action_approve(self) -> None:
        self._answer(Decision.run())

    def action_edit(self) -> None:
        request = self.request
        if request is None:
            return
        text = request.message if request.kind == INVALID else (
            request.proposal.action if request.proposal is not None and request.proposal.action else "submit")
        self.editing = request
        pane = self.pane
        if isinstance(pane, BashPane):
            pane.command.set_command(text or "")
        else:
            pane.editor.load_text(text or "")
            pane.editor.move_cursor(pane.editor.document.end)
        self._sync_input()
        pane.focus_input()
        self.panel.set_hint(f"editing the proposal · {self.run_key} runs it as edited · Ctrl+Y runs the original")

    def action_reject(self) -> None:
        request = self.request
        if request is None:
            return

        def send(comment: str | None) -> None:
            if comment is not None and self.request is request:
                self._answer(Decision.reject(comment or None))

        self.app.push_screen(CommentScreen("Reject the proposal. Your comment goes to the model:",
                                           "why not, and what to do instead"), send)

    def action_take_over(self) -> None:
        self.broker.take_over()

    def action_hand_back(self) -> None:
        self.broker.hand_back()

    def action_cycle_mode(self) -> None:
        order = [AUTO, CONFIRM, HUMAN_MODE]
        self.action_set_mode(order[(order.index(self.broker.mode) + 1) % len(order)])

    def action_set_mode(self, mode: str) -> None:
        if mode == HUMAN_MODE or self.driver is None or self.driver.policy is not None:
            self.broker.set_mode(mode)

    def action_pause_agent(self) -> None:
        self.broker.pause_after_step()
        self.panel.set_hint("pausing after this step · Alt+G go on · Alt+N one step")

    def action_step_one(self) -> None:
        self.broker.step_one()

    def action_resume_agent(self) -> None:
        self.broker.resume()

    def action_stop(self) -> None:
        if self.driver is not None:
            self.driver.stop("stopped by the human")
        self.panel.set_hint("stopping…")

    def action_interrupt(self) -> None:
        if self.state == RUNNING and self.driver is not None:
            self.driver.interrupt()          # repeated by the driver until the command ends
            self._set_pane_status(Text("interrupting…", style="yellow"))

    def action_submit(self) -> None:
        if self.state in (SUBMITTED, STOPPED):
            if self.state == SUBMITTED:
                self.action_show_score()
            return
        request = self.request
        if request is not None and "submit" in request.allowed:
            turns = self.trajectory.turns if self.trajectory is not None else []
            self.app.push_screen(ConfirmScreen(submit_question(self.task_record.key, self.task_record.env, turns),
                                               yes="Submit"),
                                 lambda yes: yes and self._answer(Decision.submit()))
            return
        # the model is thinking or a command runs: take the turn, then submit when asked
        self._submit_when_asked = True
        self.broker.take_over()
        self.panel.set_hint("submitting at the next step…")

    def action_next_task(self) -> None:
        self.app.open_next(self.task_record, session=self.session,
                           opener=lambda task: self.app.open_watch(task, self.agent))

    def action_retry(self) -> None:
        self.app.open_watch(self.task_record, self.agent, retry=self.state == SUBMITTED)

    # -- the human's own typing -------------------------------------------------------------------

    def on_work_pane_run(self, message) -> None:
        message.stop()
        message.prevent_default()          # not PlayScreen's handler: here the broker decides
        action = message.action
        if self.editing is not None and self.editing is self.request:
            self._answer(Decision.edit(action))
            return
        if self.request is not None and self.request.kind == ACTION:
            self._answer(Decision.run(action))
            return
        self.app.bell()
        self.notify("The agent has the turn: F7 takes over, Ctrl+E edits a waiting proposal.", severity="warning")

    # -- leaving ------------------------------------------------------------------------------------

    def leave(self) -> None:
        if self.clock is not None:
            self.clock.hold("left")
        if self.host is not None:
            self.host.leave(stop=lambda driver: driver.stop("the screen was left"))
