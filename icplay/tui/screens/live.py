"""The live episode screen (play and watch): one task's query, the work pane, the trajectory sidebar, the clock, and
(when an agent works the task) the agent panel, where the human approves, edits, rejects, takes over.

A human's play and an agent's watch are one screen over one loop: the episode is run by
``icplay.driver``'s ``Driver``, in human mode with no policy for play, with the agent's
policy and this screen's ``Broker`` (its mode) for watch. Everything that blocks — leasing a
sandbox from the app's pool, the reset and the replay of saved turns, then the driver itself —
runs on the thread of the screen's ``EpisodeHost`` (icplay.frontend.opening: a daemon thread,
not a Textual worker, whose end the app waits for boundedly at exit); warming the model's
client is a Textual thread worker. The host's events arrive as ``HostMessage``s and the driver's as ``DriverMessage``s (command
output goes straight into the pane's thread-safe feed); only the UI thread changes the screen.
The screen keeps no state machine of its own: what it shows (``state``) is read from the
driver's ``State``, the broker's open request and the episode's end. Each command and the
submit are answers to the broker's requests. The sandbox is this screen's own lease
(icplay.frontend.leases): given back when the screen is left, never shared.
"""

from __future__ import annotations

import gc
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, ClassVar, cast

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen

from icplay.driver import (ACTION, AUTO, CONFIRM, FAILED, HUMAN_MODE, INVALID, MODES, PAUSED, PROPOSAL,
                           SUBMIT_PROPOSAL, Broker, Decision, Driver, Limits)
from icplay.driver.broker import Request
from icplay.driver.events import (CallCancelled, Delta, Event, Failure, Finished, ModeChanged, Output, Proposed,
                                  Reasoning, RequestClosed, RequestOpened, Retrying, Scored, State, StateChanged,
                                  TurnRecorded)
from icplay.envs.base import SubmitResult, parse_submit
from icplay.episode import Episode, Proposal, Trajectory, Turn, label_turn
from icplay.review.labels import LABEL_PROMPT, LabelError, parse_label
from icplay.frontend.clock import WorkClock
from icplay.frontend.config import AgentChoice
from icplay.frontend.opening import (EpisodeHost, Failed, HostEvent, Opened, Progress, Replaying, Viewing,
                                     is_big)
from icplay.frontend.policies import PolicyError, make_policy
from icplay.languages.submitting import submit_preview
from icplay.session import Session, format_duration
from icplay.study.rules import FREE, PlayRules
from icplay.tasks.model import Task
from icplay.tui.keys import bindings, run_key_label
from icplay.tui.shown import safe, shown
from icplay.tui.screens.branching import ask_and_branch
from icplay.tui.screens.modals import (CommentScreen, ConfirmScreen, HistoryScreen, PauseScreen, ScoreScreen,
                                       TurnScreen, result_from_trajectory, submit_question)
from icplay.tui.widgets.agent import AgentPanel
from icplay.tui.widgets.footer import KeysFooter
from icplay.tui.widgets.panels import QueryPanel, StatusBar, TurnList, short_duration
from icplay.tui.widgets.panes import BashPane, WorkPane
from icplay.languages import get, resolve

if TYPE_CHECKING:
    from icplay.languages import LanguageSpec
    from icplay.tui.app import PlayApp

# what the episode's end leaves the screen showing (``LiveScreen.state``; before it, the driver's State)
OVER_SUBMITTED, OVER_STOPPED, OVER_FAILED = "submitted", "stopped", "failed"

# the keys only an agent's episode has (the watch scope)
AGENT_ACTIONS = frozenset({"approve", "edit", "reject", "take_over", "hand_back", "toggle_reasoning", "cycle_mode",
                           "set_mode", "pause_agent", "step_one", "resume_agent", "stop"})

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


class LiveScreen(Screen[None]):
    """One task's episode; ``agent`` given: an agent works it (the agent panel shows)."""

    BINDINGS: ClassVar[list[BindingType]] = [*bindings("play"), *bindings("watch")]

    class HostMessage(Message):
        """An event of the screen's episode host (icplay.frontend.opening), posted from its worker."""

        def __init__(self, event: HostEvent) -> None:
            super().__init__()
            self.event = event

    class DriverMessage(Message):
        """An event of the screen's driver, posted from the driver's thread."""

        def __init__(self, event: Event) -> None:
            super().__init__()
            self.event = event

    def __init__(self, task: Task, agent: AgentChoice | None = None, retry: bool = False,
                 limits: Limits | None = None, policy: tuple[Any, dict[str, Any]] | None = None) -> None:
        super().__init__()
        self.task_record = task
        self.retry = retry
        self.agent = agent
        self.prebuilt = policy               # (policy, description) from icplay watch, else built here
        self.policy_error: str | None = None
        self.limits = limits or (Limits(max_turns=30) if agent is not None else Limits(max_turns=None))
        mode = HUMAN_MODE if agent is None else (agent.mode if agent.mode in MODES else CONFIRM)
        self.broker = Broker(mode)
        self.episode: Episode | None = None
        self.viewed: Trajectory | None = None
        self.driver_state: State | None = None   # the driver's, as its last StateChanged said
        self.over: str | None = None             # how the episode ended: OVER_SUBMITTED, OVER_STOPPED, OVER_FAILED
        self.result: SubmitResult | None = None
        self.sandbox_name = ""
        self.clock: WorkClock | None = None
        self.host: EpisodeHost | None = None
        self.driver: Driver | None = None
        self.request: Request | None = None  # the broker's open request this screen shows
        self.editing: Request | None = None  # the request whose proposal is being edited in the pane
        self._turn_index = 0                 # the index the human's command being run will have
        self._run_started = 0.0             # when the command under way started; 0 once its turn is in
        self._submitting = False             # the human's submit was sent; the score comes
        self._froze = False
        self.submit_arg: str | None = None   # the argument of a typed `submit ARG`
        self._next_action = ""               # what the next command the driver runs will be
        self._submit_when_asked = False
        self._note = ""                      # said once, before the next hint
        self.cancelled_calls = 0
        self._feed: Callable[[str], None] | None = None   # the pane's output feed while a command runs
        self._out_lock = threading.Lock()
        self._early_output: list[str] = []

    # -- what the screen shows ------------------------------------------------------------------

    @property
    def state(self) -> str:
        """Read, never kept: ``loading``, ``ready`` (the human or the agent may move),
        ``running``, ``submitting``, or how the episode ended (``OVER_*``)."""
        if self.over is not None:
            return self.over
        if self.driver is None:
            return "loading"
        if self._submitting:
            return "submitting"
        if self._run_started or self.driver_state == State.RUNNING:
            return "running"
        if self._asks_human():
            return "ready"
        if self.agent is not None:
            return "ready" if self.driver_state in (None, State.THINKING, State.WAITING, State.PAUSED,
                                                   State.IDLE) else "running"
        return "loading" if self.driver_state in (None, State.IDLE) else "running"

    @property
    def agent_state(self) -> str:
        """The driver's state as the agent panel shows it."""
        return str(self.driver_state) if self.driver_state is not None else "starting"

    # -- layout ---------------------------------------------------------------------------

    @property
    def playground(self) -> PlayApp:
        """The app this screen runs in (its pool, sessions, settings, navigation)."""
        return cast("PlayApp", self.app)

    @property
    def frozen(self) -> bool:
        return bool(self.playground.frozen)

    @property
    def rules(self) -> PlayRules:
        """What the human may do and see here: a study's rules (``icplay play|watch --study``),
        else ``FREE``."""
        rules: PlayRules = getattr(self.playground, "rules", FREE)
        return rules

    @property
    def in_study(self) -> bool:
        return getattr(self.playground, "queue", None) is not None

    def blind(self, text: str) -> str:
        """``text`` without the agent's model's name when the study hides it (a server's error
        often names the model)."""
        agent = self.agent
        return text if agent is None else self.rules.blind(text, (agent.model, agent.base_url))

    def _gold_refusal(self) -> str | None:
        return self.rules.gold_refusal()

    def _retry_refusal(self) -> str | None:
        if self.rules is FREE:
            return None
        return self.rules.retry_refusal(self.session.all_attempts(self.task_record))

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        with Horizontal(id="body"):
            with Vertical(id="main"):
                query = QueryPanel(shown(self.task_record.query), id="query")
                query.border_title = shown(f"Task {self.task_record.key}" + (f" · {self.task_record.hardness}" if self.task_record.hardness else ""))
                yield query
                if self.agent is not None:
                    yield AgentPanel(self.task_record.env, model=self.rules.model_label(self.agent.label),
                                     frozen=self.frozen, cost=not self.rules.hide_model, id="agent")
                yield self.make_pane()
            yield TurnList(frozen=self.frozen, language=self.task_record.env, id="turns",
                           turn_scores=self.rules.show_turn_scores)
        yield KeysFooter(compact=True)

    @property
    def language(self) -> LanguageSpec:
        """The spec of the task's language (its pane, key scope, score rows)."""
        return get(self.task_record.env)

    def make_pane(self) -> WorkPane:
        """The language's work pane (``LanguageSpec.pane``), built from the app's settings."""
        pane_class = resolve(self.language.pane)
        pane: WorkPane = pane_class.build(self.app, frozen=self.frozen, id="pane")
        return pane

    @property
    def session(self) -> Session:
        """The session this screen's episodes are saved in (an agent's apart from the human's)."""
        session: Session = self.playground.session if self.agent is None else self.playground.watch_session
        return session

    @property
    def trajectory(self) -> Trajectory | None:
        """The episode's trajectory, or the submitted one being viewed."""
        return self.episode.trajectory if self.episode is not None else self.viewed

    @property
    def pane(self) -> WorkPane:
        return self.query_one("#pane", WorkPane)

    @property
    def panel(self) -> AgentPanel:
        return self.query_one(AgentPanel)

    @property
    def turn_list(self) -> TurnList:
        return self.query_one(TurnList)

    @property
    def run_key(self) -> str:
        """The key that runs the typed action in this language's input (Enter, or F5 in an editor)."""
        return run_key_label(self.app, self.language.keys_scope)

    def on_mount(self) -> None:
        if self.agent is not None:
            self.panel.set_mode(self.broker.mode)
            self._sync_input()
        self.clock = WorkClock(now=self.playground.clock)
        self.clock.hold("loading")
        self.pane.set_busy(True)
        self._set_pane_status(Text("starting the sandbox…", style="dim"))
        self.refresh_status()
        self.set_interval(0.5, self.tick)
        self.host = EpisodeHost(self.task_record, self.playground.pool, self.session,
                                emit=self._from_host,
                                before_save=self._before_save)
        policy = self.policy_info()
        self.host.open(policy, self.make_driver, retry=self.retry, set_base=self._set_clock_base)
        self.pane.focus_input()

    # -- the policy and the driver --------------------------------------------------------------

    def policy_info(self) -> dict[str, Any]:
        """The trajectory's policy block; an agent's policy is built here (once)."""
        if self.agent is None:
            policy = {"kind": "human", "ui": "tui"}
            policy.update(self.pane.policy_info(self.playground.config))
            return policy
        if self.prebuilt is None:
            try:
                self.prebuilt = make_policy(self.agent, self.task_record)
            except PolicyError as exc:
                self.policy_error = str(exc)
                return {"kind": "human", "ui": "tui-watch"}
        policy_object, info = self.prebuilt
        self._warm_model(policy_object)
        return {**info, "protocol": self.agent.protocol, "ui": "tui-watch"}

    def _warm_model(self, policy: Any) -> None:
        """Open the model's client (importing the client library, loading the TLS
        certificates: seconds on a loaded machine) in a worker while the sandbox starts, so
        the first proposal does not wait for it after the sandbox."""
        client = getattr(getattr(policy, "model", None), "client", None)
        if not callable(client):
            return

        def warm() -> None:
            try:
                client()
            except Exception:       # a missing key is said by the first call, in the panel
                pass

        self.run_worker(warm, name="icplay-warm-model", group="warm", thread=True, exit_on_error=False)

    def make_driver(self, episode: Episode) -> Driver:
        """(In the host's worker.) Play: human mode, no policy; watch: the agent's policy and
        this screen's broker (without a policy, it could not be built, the human has the turn)."""
        assert self.host is not None
        policy = None
        protocol = "agent"
        if self.agent is not None:
            protocol = self.agent.protocol
            if self.prebuilt is None:
                self.broker.set_mode(HUMAN_MODE)
            else:
                policy, info = self.prebuilt
                episode.trajectory.adopt_policy({**info, "protocol": self.agent.protocol, "ui": "tui-watch"})
        return Driver(episode, policy, protocol=protocol, limits=self.limits, broker=self.broker,
                      on_event=self._from_driver, on_failure="ask", around_action=self.host.around_action)

    def _from_host(self, event: HostEvent) -> None:
        """On the host's thread: to the UI thread as a Message."""
        self.post_message(self.HostMessage(event))

    def _from_driver(self, event: Event) -> None:
        """On the driver's thread: output into the pane's feed, the rest as Messages."""
        if isinstance(event, Output):
            text = event.text
            with self._out_lock:              # the pane's feed for this command may not exist yet
                if self._feed is None:
                    self._early_output.append(text)
                    return
                feed = self._feed
            feed(text)
            return
        self.post_message(self.DriverMessage(event))

    def _attach_feed(self, feed: Callable[[str], None] | None) -> None:
        """A new feed per command: hand it what came already."""
        if feed is None:
            return
        with self._out_lock:
            self._feed = feed
            for text in self._early_output:
                feed(text)
            self._early_output.clear()

    def _detach_feed(self) -> None:
        with self._out_lock:
            self._feed = None
            self._early_output.clear()

    def _set_clock_base(self, seconds: float) -> None:
        if self.clock is not None:
            self.clock.set_base(seconds)

    @on(DriverMessage)
    def _driver_event(self, message: DriverMessage) -> None:
        """The driver's events, each to its handler by type."""
        message.stop()
        handler = DRIVER_HANDLERS.get(type(message.event))
        if handler is not None:
            handler(self, message.event)

    @on(HostMessage)
    def _host_event(self, message: HostMessage) -> None:
        """The episode host's events, each to its handler by type."""
        message.stop()
        handler = HOST_HANDLERS.get(type(message.event))
        if handler is not None:
            handler(self, message.event)

    def tick(self) -> None:
        self.refresh_status()
        self._check_time_limit()
        if self.state == "running" and self._run_started and not self.frozen:
            self._set_pane_status(Text(f"running · {short_duration(time.monotonic() - self._run_started)}"
                                       " · Ctrl+C interrupts", style="dim"))

    def _check_time_limit(self) -> None:
        """The study's time limit: reached, the episode is stopped (saved, every turn kept); the
        saved worked time then says it timed out (``PlayRules.timed_out``)."""
        left = self.rules.time_left(self.clock.elapsed()) if self.clock is not None else None
        if left is None or left > 0 or self.over is not None or self.driver is None or self.driver.stopping:
            return
        self.driver.stop(self.rules.time_up_reason())

    def refresh_status(self) -> None:
        task = self.task_record
        left = f"{task.key}" + (f" [{task.hardness}]" if task.hardness else "")
        turns = self.trajectory.turns_taken if self.trajectory else 0
        clock = self.clock
        elapsed = format_duration(clock.elapsed()) if clock else "00:00"
        paused = " ⏸" if clock is not None and clock.is_held("paused") else ""
        shown = self._state_word()
        sandbox = self.sandbox_name or "…"
        parts = [f"turn {turns}", f"⏱ {elapsed}{paused}", f"{task.env} on {sandbox}",
                 f"session {self.session.name}"]
        queue = getattr(self.playground, "queue", None)
        if queue is not None:
            limit = self.rules.time_limit
            parts[1] += f" of {format_duration(limit)}" if limit is not None else ""
            parts[3] = f"study {queue.study.name} · {queue.done}/{len(queue.entries)} done"
        if shown:
            parts.insert(0, shown)
        self.query_one(StatusBar).show(safe(f"icplay · {left}"), [safe(p) for p in parts], keep=3 if shown else 2)

    def _state_word(self) -> str:
        """The status bar's first word: what the episode is doing, or its reward once scored."""
        if self.state == OVER_SUBMITTED and self.result is not None:
            return f"reward {self.result.reward:.2f}"
        return {"loading": "starting", "running": "running", "submitting": "scoring",
                OVER_FAILED: "error"}.get(self.state, "")

    def _set_pane_status(self, text: Text) -> None:
        setter = getattr(self.pane, "set_status", None)
        if setter is not None:
            setter(text)

    # -- opening (reset + resume) ---------------------------------------------------------------

    def _before_save(self, trajectory: Trajectory) -> None:
        if self.clock is not None:
            trajectory.time_worked = round(self.clock.elapsed(), 3)

    def on_host_progress(self, message: Progress) -> None:
        if self.state == "loading":
            self._set_pane_status(shown(message.line.strip()[-200:], style="dim"))

    def on_host_replaying(self, message: Replaying) -> None:
        first = message.action.splitlines()[0][:60] if message.action else ""
        self._set_pane_status(shown(f"resuming: replaying turn {message.n} of {message.total} · {first}", style="dim"))

    def on_host_opened(self, message: Opened) -> None:
        self.episode = message.episode
        self.driver = message.driver
        self.sandbox_name = message.sandbox
        self.pane.set_busy(not self._asks_human())
        turns = self.episode.trajectory.turns
        self.turn_list.set_turns(turns)
        self.pane.env_ready(self.episode.env)
        if message.replayed:
            self.pane.show_turns(turns)
            where = self.language.fresh_state
            said = "turn" if message.replayed == 1 else "turns"
            self._set_pane_status(Text(f"resumed: {message.replayed} saved {said} replayed into {where}",
                                       style="green"))
        else:
            self._set_pane_status(Text("ready", style="dim"))
        if self.clock is not None:
            self.clock.release("loading")
        self.refresh_status()
        self.pane.focus_input()
        if self.agent is not None:
            if self.prebuilt is None:
                self.panel.show_failure(self.blind(self.policy_error or "no policy"))
                self.panel.set_hint("F7 take over and work the task yourself · Ctrl+B back to the task list")
            self._show_usage()

    def on_host_viewing(self, message: Viewing) -> None:
        self.viewed = message.trajectory
        self.sandbox_name = message.trajectory.sandbox
        self.result = result_from_trajectory(message.trajectory)
        self.over = OVER_SUBMITTED
        self.pane.set_done()
        turns = message.trajectory.turns
        self.turn_list.set_turns(turns)
        self.pane.show_turns(turns)
        self._set_pane_status(Text(f"submitted before · reward {self.result.reward:.2f} · F9 score · "
                                   "F8 retry · Ctrl+N next", style="bold"))
        if self.clock is not None:
            self.clock.set_base(message.trajectory.time_worked)
            self.clock.hold("done")
            self.clock.release("loading")
        self.refresh_status()
        self.refresh_bindings()

    def on_host_failed(self, message: Failed) -> None:
        self.over = OVER_FAILED
        self._set_pane_status(shown(f"{message.error}\nF8 tries again · Ctrl+B back to the task list",
                                   style="bold red"))
        self.refresh_bindings()
        self.notify(safe(message.error), title="The environment failed", severity="error", timeout=10, markup=False)
        self.refresh_status()

    # -- the human's own typing -------------------------------------------------------------------

    def on_work_pane_run(self, message: WorkPane.Run) -> None:
        message.stop()
        action = message.action
        if self.editing is not None and self.editing is self.request:
            self._answer(Decision.edit(action))
            return
        if not self._asks_human():
            self.app.bell()
            if self.agent is not None and self.over is None:
                self.notify("The agent has the turn: F7 takes over, Ctrl+E edits a waiting proposal.",
                            severity="warning")
            else:
                self.notify("Wait for the current step to finish." if self.over is None
                            else "This task is over: retry it (F8) or go to the next one (Ctrl+N).",
                            severity="warning")
            return
        is_submit, arg = parse_submit(action)
        if is_submit:
            self.submit_arg = arg     # `submit NAME` (Python's function, CTF's flag): confirmed first
            self.action_submit()
            return
        if self.agent is not None:            # the agent's episode: the broker runs the human's move
            self._answer(Decision.run(action))
            return
        self.start_turn(action)

    def _asks_human(self) -> bool:
        """The driver waits for the human's own move (its ``action`` request is open)."""
        return self.request is not None and self.request.kind == ACTION and self.request.open

    def _answer(self, decision: Decision) -> bool:
        request = self.request
        if request is None or not request.open or self.driver is None:
            self.app.bell()
            return False
        try:
            done = self.broker.answer(request.id, decision)
        except ValueError as exc:
            self.notify(safe(exc), severity="warning", markup=False)
            return False
        if done and decision.kind in ("run", "edit") and decision.action:
            self._next_action = decision.action
        return done

    def start_turn(self, action: str) -> None:
        """The human runs ``action``: the pane shows it at once, its output as it comes."""
        assert self.episode is not None
        self._run_started = time.monotonic()
        self._turn_index = len(self.episode.trajectory.turns)
        self.pane.set_busy(True)
        self.pane.turn_started(action)
        self._attach_feed(self.pane.output_feed())
        if not self._answer(Decision.run(action)):
            self._run_started = 0.0
            self._detach_feed()
        self.refresh_status()

    def _sync_input(self) -> None:
        """The pane takes input only when the human has the turn or edits a proposal."""
        open_for_human = self.editing is not None or self._asks_human()
        self.pane.set_busy(not open_for_human)

    # -- the driver's events ----------------------------------------------------------------------

    def on_driver_state(self, event: StateChanged) -> None:
        state = event.state
        self.driver_state = state
        if state == State.RUNNING and not self._run_started:     # the agent's move, or one the broker let through
            self._run_started = time.monotonic()
            self.pane.turn_started(self._next_action)
            self._attach_feed(self.pane.output_feed())
        if self.agent is not None:
            self.panel.set_state(state)
            if state == State.THINKING:
                self.panel.set_hint("the model is writing · F7 take over · F10 mode · F12 stop")
            self._sync_input()
        self.refresh_status()

    def on_driver_delta(self, event: Delta) -> None:
        if self.agent is not None:
            self.panel.add_delta(event.text)

    def on_driver_reasoning(self, event: Reasoning) -> None:
        if self.agent is not None:
            self.panel.add_reasoning(event.text)

    def on_driver_proposal(self, event: Proposed) -> None:
        proposal: Proposal = event.proposal
        self._next_action = proposal.action or ""
        if self.agent is None:
            return
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
                                     scored=submit_preview(self.task_record.env, self.trajectory.turns, arg, "agent")
                                     if is_submit and self.trajectory is not None else None)
        self._show_usage()

    def on_driver_request(self, event: RequestOpened) -> None:
        request = event.request
        self.request = request
        if self.agent is not None:
            self.panel.set_hint(self._note + HINTS.get(request.kind, "").format(run=self.run_key))
            self._note = ""
            if request.kind == FAILED and request.message:
                self.panel.show_failure(self.blind(request.message))
        if request.kind == ACTION and self._submit_when_asked:
            self._submit_when_asked = False
            self._answer(Decision.submit())
            return
        if request.kind == ACTION and self.agent is not None:
            self.pane.focus_input()
        self._sync_input()
        self.refresh_status()
        self.refresh_bindings()

    def on_driver_answered(self, event: RequestClosed) -> None:
        if self.request is event.request:
            self.request = None
        if self.editing is event.request:
            self.editing = None
        self._sync_input()
        self.refresh_bindings()

    def on_driver_mode(self, event: ModeChanged) -> None:
        if self.agent is not None:
            self.panel.set_mode(event.mode)
            if event.mode == HUMAN_MODE:
                self.panel.clear_proposal()
        self.refresh_bindings()

    def on_driver_turn(self, event: TurnRecorded) -> None:
        turn: Turn = event.turn
        self._run_started = 0.0             # running until the driver asks again; the result stays shown
        self._detach_feed()
        if turn.action or self.agent is None:
            self.pane.turn_finished(turn)
        if self.agent is None:
            self.turn_list.add_turn(turn)
        else:
            self._refresh_turns()
        if is_big(turn):
            gc.freeze()
            self._froze = True
        if self.agent is not None:
            self._show_usage()
        self.refresh_status()

    def on_driver_score(self, event: Scored) -> None:
        if self.agent is not None:
            self._refresh_turns()

    def on_driver_retry(self, event: Retrying) -> None:
        if self.agent is not None:
            self.panel.reset_stream()
            self.panel.show_failure(self.blind(f"{event.message} (attempt {event.attempt})"), retry_in=event.delay)

    def on_driver_error(self, failure: Failure) -> None:
        """A command or the submit failed (the human moves again), a model call failed, or the
        driver itself did."""
        message = self.blind(failure.message)
        if self.agent is not None:
            self.panel.show_failure(message)
        elif failure.during == "submit" or self._submitting:
            self._submitting = False      # ready again when the driver asks for the next move
            if self.clock is not None:
                self.clock.release("done")
            self._set_pane_status(shown(f"scoring failed: {message}", style="bold red"))
            self.notify(safe(message), title="Scoring failed", severity="error", markup=False)
        else:
            self._run_started = 0.0
            self._detach_feed()
            self.pane.turn_finished(None)
            self._set_pane_status(shown(message, style="bold red"))
            self.notify(safe(message), title="The step failed", severity="error", markup=False)
        if failure.fatal and self.agent is None:
            self.over = OVER_FAILED
            self.refresh_bindings()
        self.refresh_status()

    def on_driver_cancelled(self, event: CallCancelled) -> None:
        self.cancelled_calls += 1
        self._note = "the model call was cancelled (no turn recorded) · "
        if self.agent is not None:
            self.panel.set_hint(self._note.rstrip(" ·"))

    def on_driver_finished(self, event: Finished) -> None:
        trajectory = event.trajectory
        self.request = None
        self.editing = None
        queue = getattr(self.playground, "queue", None)
        if queue is not None:
            queue.refresh()          # the header's "done" counts this task now, not at the next one
        if trajectory.status == "submitted":
            self._submitting = False
            self.show_scored(result_from_trajectory(trajectory))
            if self.agent is not None:
                self.panel.set_state("done")
                self.panel.set_hint(f"submitted · reward {trajectory.reward:.2f}")
        elif self.rules.timed_out(trajectory):
            self.over = OVER_STOPPED
            self.pane.set_busy(True)
            if self.agent is not None:
                self.panel.set_state("done")
                self.panel.set_hint("time is up · Ctrl+N next")
            if self.clock is not None:
                self.clock.hold("done")
            self._set_pane_status(Text(f"time is up: {self.rules.time_up_reason()} · Ctrl+N next", style="yellow"))
            self.notify(f"Time is up: {self.rules.time_up_reason()}.", title="Time limit", severity="warning",
                        timeout=10, markup=False)
            self.refresh_bindings()
        elif self.agent is not None:
            self.over = OVER_STOPPED if trajectory.status == "stopped" else OVER_FAILED
            self.pane.set_busy(True)
            self.panel.set_state("done" if trajectory.status == "stopped" else "failed")
            why = f" ({trajectory.error})" if trajectory.error else ""
            self.panel.set_hint(f"{trajectory.status}{why} · F8 reopens it (saved turns replayed) · "
                                "Ctrl+B back to the task list")
            self._set_pane_status(Text(f"episode {trajectory.status}", style="yellow"))
        if self.agent is not None:
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

    # -- keys ---------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in AGENT_ACTIONS:
            return self.agent is not None and self._agent_action_on(action)
        state = self.state
        submitted = state == OVER_SUBMITTED
        if action == "interrupt":
            return state == "running"
        if action == "retry":
            return submitted or state in (OVER_FAILED, OVER_STOPPED)
        if action == "reveal_gold":
            return submitted and self._gold_refusal() is None
        if action == "next_task":        # in a study also after the time limit (the queue goes on)
            return submitted or (state == OVER_STOPPED and self.in_study)
        if action == "show_score":
            return submitted
        if action == "submit":
            return not submitted
        if action == "branch_episode":   # watch, once the episode has ended
            return self.agent is not None and state in (OVER_SUBMITTED, OVER_STOPPED, OVER_FAILED)
        return True

    def _agent_action_on(self, action: str) -> bool:
        kind = self.request.kind if self.request is not None else None
        over = self.state in (OVER_SUBMITTED, OVER_STOPPED)
        if action in ANSWERS:
            return kind in ANSWERS[action]
        if action == "take_over":
            return not over and self.broker.mode != HUMAN_MODE
        if action == "hand_back":
            return not over and self.broker.mode == HUMAN_MODE and self.driver is not None \
                and self.driver.policy is not None
        if action == "toggle_reasoning":
            return True
        return not over

    def action_interrupt(self) -> None:
        if self.state == "running" and self.driver is not None:
            # repeated by the driver until the command ends
            self.driver.interrupt(self._turn_index if self.agent is None else None)
            self._set_pane_status(Text("interrupting…", style="yellow"))

    def action_focus_turns(self) -> None:
        self.turn_list.focus()

    def action_focus_input(self) -> None:
        self.pane.focus_input()

    def on_turn_list_show(self, message: TurnList.Show) -> None:
        if self.trajectory is None:
            return
        turns = self.trajectory.turns
        if 0 <= message.index < len(turns):
            self.app.push_screen(TurnScreen(turns[message.index], frozen=self.frozen,
                                            turn_scores=self.rules.show_turn_scores))

    # -- the agent's keys ---------------------------------------------------------------------

    def action_toggle_reasoning(self) -> None:
        self.panel.toggle_reasoning()

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
        pane.set_input(text or "")
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

    def action_label_turn(self) -> None:
        """Label the last turn (a modal asks good, bad or neutral and a note). Only while the
        driver waits for a human or has ended: then nothing else writes the trajectory."""
        driver = self.driver
        if driver is None or not driver.trajectory.turns:
            self.notify("No turn to label yet.", severity="warning")
            return
        if not _label_safe(driver):
            self.notify("Label a turn while the agent waits (confirm mode, a pause) or after the end.",
                        severity="warning")
            return
        number = len(driver.trajectory.turns)

        def answered(words: str | None) -> None:
            if not words or not _label_safe(driver):
                return
            try:
                label, note = parse_label(words)
            except LabelError as exc:
                self.notify(safe(exc), severity="warning", markup=False)
                return
            turn = driver.trajectory.turns[number - 1]
            label_turn(turn, label, note, driver.episode.annotator or driver.trajectory.annotator)
            driver.episode.save()
            self.notify(f"Turn {number} labelled {label}.", markup=False)

        self.app.push_screen(CommentScreen(f"Label turn {number}: {LABEL_PROMPT}", "good"), answered)

    def action_branch_episode(self) -> None:
        """After the end: branch the episode at the highlighted turn (else the last), its N sampled
        continuations played by this screen's agent (``branching``)."""
        traj = self.trajectory
        if traj is None or not traj.turns or not self.check_action("branch_episode", ()):
            return
        at = self.turn_list.highlighted
        k = at if at is not None and 0 <= at < len(traj.turns) else len(traj.turns) - 1
        ask_and_branch(self, traj, k, self.agent)

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

    # -- the command line's history ----------------------------------------------------------------

    def on_command_input_search_history(self, message: Message) -> None:
        pane = self.pane
        if not isinstance(pane, BashPane):
            return
        command = pane.command
        history = list(reversed(command.command_history.items))

        def chosen(value: str | None) -> None:
            if value is not None:
                command.set_command(value)
            command.focus()

        self.app.push_screen(HistoryScreen(history, command.text.strip()), chosen)

    # -- clock ------------------------------------------------------------------------------

    def on_screen_suspend(self, event: events.ScreenSuspend) -> None:
        if self.clock is not None:
            self.clock.hold("modal")

    def on_screen_resume(self, event: events.ScreenResume) -> None:
        if self.clock is not None:
            self.clock.release("modal")
        self.refresh_status()

    def action_pause(self) -> None:
        if self.clock is None:
            return
        self.clock.hold("paused")
        self.refresh_status()

        def resumed(_: object) -> None:
            if self.clock is not None:
                self.clock.release("paused")
            self.refresh_status()

        self.app.push_screen(PauseScreen(), resumed)

    # -- submit -----------------------------------------------------------------------------

    def action_submit(self) -> None:
        if self.over is not None and self.over != OVER_FAILED:
            if self.over == OVER_SUBMITTED:
                self.action_show_score()
            return
        if self.agent is not None:
            self._agent_submit()
            return
        if self.state != "ready" or self.episode is None:
            self.app.bell()
            self.notify("Wait for the current step to finish before submitting.", severity="warning")
            return
        question = submit_question(self.task_record.key, self.task_record.env, self.episode.trajectory.turns,
                                   self.submit_arg, gold_shown=self._gold_refusal() is None)

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.start_submit()

        self.app.push_screen(ConfirmScreen(question, yes="Submit"), confirmed)

    def _agent_submit(self) -> None:
        """Ctrl+S while an agent works: submit now if a request allows it, else at the next step."""
        request = self.request
        if request is not None and "submit" in request.allowed:
            turns = self.trajectory.turns if self.trajectory is not None else []
            self.app.push_screen(ConfirmScreen(submit_question(self.task_record.key, self.task_record.env, turns,
                                                               self.submit_arg),
                                               yes="Submit"),
                                 self._submit_confirmed)
            return
        self.submit_arg = None     # a flag typed while the agent had the turn is not kept for later
        # the model is thinking or a command runs: take the turn, then submit when asked
        self._submit_when_asked = True
        self.broker.take_over()
        self.panel.set_hint("submitting at the next step…")

    def _submit_confirmed(self, yes: bool | None) -> None:
        arg, self.submit_arg = self.submit_arg, None
        if yes:
            self._answer(Decision.submit(arg))

    def start_submit(self) -> None:
        if self.state != "ready" or self.episode is None:
            return
        self.pane.set_busy(True)
        self._set_pane_status(Text("scoring: running the gold solution in a fresh sandbox…", style="dim"))
        if self.clock is not None:
            self.clock.hold("done")
        self._submitting = self._answer(Decision.submit(self.submit_arg))
        self.submit_arg = None
        self.refresh_status()

    def show_scored(self, result: SubmitResult) -> None:
        self.result = result
        self.over = OVER_SUBMITTED
        self.pane.set_done()
        keys = ["F9 score", "Ctrl+G gold" if self._gold_refusal() is None else "", "Ctrl+N next",
                "F8 retry" if self._retry_refusal() is None else ""]
        self._set_pane_status(Text(f"submitted · reward {result.reward:.2f} · " + " · ".join(k for k in keys if k),
                                   style="bold"))
        if self.episode is not None and self.episode.trajectory.turns:
            self.turn_list.set_turns(self.episode.trajectory.turns)
        self.refresh_status()
        self.refresh_bindings()
        self.action_show_score()

    def action_show_score(self, reveal: bool = False) -> None:
        if self.state != OVER_SUBMITTED or self.trajectory is None:
            return
        result = self.result or result_from_trajectory(self.trajectory)
        gold_refusal = self._gold_refusal()
        self.app.push_screen(ScoreScreen(self.trajectory, result, reveal=reveal and gold_refusal is None,
                                         gold_refusal=gold_refusal, retry_refusal=self._retry_refusal(),
                                         breakdown_refusal=self.rules.breakdown_refusal(),
                                         task_list=getattr(self.playground, "queue", None) is None),
                             self._after_score)

    def action_reveal_gold(self) -> None:
        refusal = self._gold_refusal()
        if refusal is not None:
            self.notify(refusal, title="No gold", severity="warning", markup=False)
            return
        self.action_show_score(reveal=True)

    def _after_score(self, choice: str | None) -> None:
        if choice == "next":
            self.action_next_task()
        elif choice == "retry":
            self.action_retry()
        elif choice == "picker":
            self.action_back_to_picker()

    def action_next_task(self) -> None:
        agent = self.agent
        if agent is None:
            self.playground.open_next(self.task_record)
        else:
            self.playground.open_next(self.task_record, session=self.session,
                               opener=lambda task: self.playground.open_watch(task, agent))

    def action_retry(self) -> None:
        trajectory = self.trajectory
        retry = self.state == OVER_SUBMITTED or (trajectory is not None and self.rules.timed_out(trajectory))
        if self.agent is None:
            self.playground.open_task(self.task_record, retry=retry)
        else:
            self.playground.open_watch(self.task_record, self.agent, retry=retry)

    def action_back_to_picker(self) -> None:
        self.playground.show_picker()

    # -- leaving ----------------------------------------------------------------------------

    def leave(self) -> None:
        """Stop the clock, end the driver (play: saved as it stands, resumed next time; an
        agent's: stopped), give the sandbox back once a command under way has ended."""
        if self.clock is not None:
            self.clock.hold("left")
        if self.host is not None:
            if self.agent is None:
                self.host.leave()
            else:
                self.host.leave(stop=lambda driver: driver.stop("the screen was left"))

    def on_unmount(self) -> None:
        self.leave()
        if self._froze:
            gc.unfreeze()


# each event of the driver and of the host to its handler (a registry, by the event's type)
DRIVER_HANDLERS: dict[type[Event], Callable[[LiveScreen, Any], None]] = {
    StateChanged: LiveScreen.on_driver_state, Delta: LiveScreen.on_driver_delta,
    Reasoning: LiveScreen.on_driver_reasoning, Proposed: LiveScreen.on_driver_proposal,
    RequestOpened: LiveScreen.on_driver_request, RequestClosed: LiveScreen.on_driver_answered,
    ModeChanged: LiveScreen.on_driver_mode, TurnRecorded: LiveScreen.on_driver_turn,
    Scored: LiveScreen.on_driver_score, Retrying: LiveScreen.on_driver_retry,
    Failure: LiveScreen.on_driver_error, CallCancelled: LiveScreen.on_driver_cancelled,
    Finished: LiveScreen.on_driver_finished,
}
HOST_HANDLERS: dict[type, Callable[[LiveScreen, Any], None]] = {
    Progress: LiveScreen.on_host_progress, Replaying: LiveScreen.on_host_replaying,
    Opened: LiveScreen.on_host_opened, Viewing: LiveScreen.on_host_viewing, Failed: LiveScreen.on_host_failed,
}


def _label_safe(driver: Driver) -> bool:
    """The driver's thread is not writing the trajectory: it waits for a human, or has ended."""
    return driver.ended or driver.state in (State.WAITING, State.PAUSED)
