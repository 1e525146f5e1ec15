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

The screen is made of parts, one concern each (icplay.tui.live): the work pane and the human's
moves (``play``), the agent's panel and gate (``gate``), the submit and the end (``submit_flow``),
the clock (``clock``), the status bar (``bar``), the opening (``opening``) and the driver's
events (``driver_events``). It keeps what they share and routes its keys and messages to them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, cast

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen

from icplay.driver import ACTION, CONFIRM, HUMAN_MODE, MODES, Broker, Decision, Driver, Limits
from icplay.driver.broker import Request
from icplay.driver.events import Event, State
from icplay.envs.base import SubmitResult
from icplay.episode import Episode, Trajectory
from icplay.frontend.config import AgentChoice
from icplay.frontend.opening import EpisodeHost, HostEvent
from icplay.languages import get, resolve
from icplay.session import Session
from icplay.study.rules import FREE, PlayRules
from icplay.tasks.model import Task
from icplay.tui.keys import bindings, run_key_label
from icplay.tui.live.bar import StudyBar
from icplay.tui.live.clock import LiveClock
from icplay.tui.live.events import DriverEvents
from icplay.tui.live.gate import AGENT_ACTIONS, AgentGate
from icplay.tui.live.opening import HOST_HANDLERS, Opening
from icplay.tui.live.play import PlayPane
from icplay.tui.live.submit import SubmitFlow
from icplay.tui.shown import safe, shown
from icplay.tui.widgets.agent import AgentPanel
from icplay.tui.widgets.footer import KeysFooter
from icplay.tui.widgets.panels import QueryPanel, StatusBar, TurnList
from icplay.tui.widgets.panes import WorkPane

if TYPE_CHECKING:
    from icplay.languages import LanguageSpec
    from icplay.tui.app import PlayApp


class LiveScreen(Screen[None]):
    """One task's episode; ``agent`` given: an agent works it (the agent panel shows)."""

    BINDINGS: ClassVar[list[BindingType]] = [*bindings("play"), *bindings("watch")]

    class HostMessage(Message):
        """An event of the screen's episode host (icplay.frontend.opening), posted from its thread."""

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
        self.limits = limits or (Limits(max_turns=30) if agent is not None else Limits(max_turns=None))
        self.broker = Broker(HUMAN_MODE if agent is None else (agent.mode if agent.mode in MODES else CONFIRM))
        # what the parts share
        self.episode: Episode | None = None
        self.viewed: Trajectory | None = None
        self.host: EpisodeHost | None = None     # made at mount (the opening)
        self.driver: Driver | None = None
        self.driver_state: State | None = None   # the driver's, as its last StateChanged said
        self.request: Request | None = None      # the broker's open request this screen shows
        self.editing: Request | None = None      # the request whose proposal is being edited in the pane
        self.over: str | None = None             # how the episode ended: OVER_SUBMITTED, OVER_STOPPED, OVER_FAILED
        self.result: SubmitResult | None = None
        self.sandbox_name = ""
        # the parts
        self.clock = LiveClock(self)
        self.bar = StudyBar(self)
        self.play = PlayPane(self)
        self.gate = AgentGate(self)
        self.submit_flow = SubmitFlow(self)
        self.opening = Opening(self, policy)
        self.driver_events = DriverEvents(self)

    # -- what the screen shows ------------------------------------------------------------------

    @property
    def state(self) -> str:
        """Read, never kept: ``loading``, ``ready`` (the human or the agent may move),
        ``running``, ``submitting``, or how the episode ended (``OVER_*``)."""
        if self.over is not None:
            return self.over
        if self.driver is None:
            return "loading"
        if self.submit_flow.submitting:
            return "submitting"
        if self.play.run_started or self.driver_state == State.RUNNING:
            return "running"
        if self.asks_human():
            return "ready"
        if self.agent is not None:
            return "ready" if self.driver_state in (None, State.THINKING, State.WAITING, State.PAUSED,
                                                   State.IDLE) else "running"
        return "loading" if self.driver_state in (None, State.IDLE) else "running"

    @property
    def agent_state(self) -> str:
        """The driver's state as the agent panel shows it."""
        return str(self.driver_state) if self.driver_state is not None else "starting"

    @property
    def submit_arg(self) -> str | None:
        """The argument of a typed ``submit ARG``, until the submit is confirmed or dropped."""
        return self.submit_flow.arg

    @property
    def cancelled_calls(self) -> int:
        return self.gate.cancelled_calls

    def asks_human(self) -> bool:
        """The driver waits for the human's own move (its ``action`` request is open)."""
        return self.request is not None and self.request.kind == ACTION and self.request.open

    def answer(self, decision: Decision) -> bool:
        """Answer the broker's open request (a move, an edit, a reject, the submit); False, with
        a bell or a warning, when there is none or it does not take this answer."""
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
            self.play.next_action = decision.action
        return done

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

    @property
    def language(self) -> LanguageSpec:
        """The spec of the task's language (its pane, key scope, score rows)."""
        return get(self.task_record.env)

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

    def make_pane(self) -> WorkPane:
        """The language's work pane (``LanguageSpec.pane``), built from the app's settings."""
        pane_class = resolve(self.language.pane)
        pane: WorkPane = pane_class.build(self.app, frozen=self.frozen, id="pane")
        return pane

    def on_mount(self) -> None:
        if self.agent is not None:
            self.panel.set_mode(self.broker.mode)
            self.play.sync_input()
        self.clock.start(self.playground.clock)
        self.pane.set_busy(True)
        self.play.set_status(Text("starting the sandbox…", style="dim"))
        self.bar.refresh()
        self.set_interval(0.5, self.tick)
        self.opening.open()
        self.pane.focus_input()

    def tick(self) -> None:
        self.bar.refresh()
        self.clock.check_time_limit()
        self.play.tick()

    # -- messages, by the part they are for ----------------------------------------------------

    @on(DriverMessage)
    def _driver_event(self, message: DriverMessage) -> None:
        """The driver's events, each to its handler by type (icplay.tui.live.events)."""
        message.stop()
        self.driver_events.handle(message.event)

    @on(HostMessage)
    def _host_event(self, message: HostMessage) -> None:
        """The episode host's events, each to its handler by type."""
        message.stop()
        handler = HOST_HANDLERS.get(type(message.event))
        if handler is not None:
            handler(self.opening, message.event)

    def on_work_pane_run(self, message: WorkPane.Run) -> None:
        message.stop()
        self.play.run(message.action)

    def on_turn_list_show(self, message: TurnList.Show) -> None:
        self.play.show_turn(message.index)

    def on_command_input_search_history(self, message: Message) -> None:
        self.play.search_history()

    def on_screen_suspend(self, event: events.ScreenSuspend) -> None:
        self.clock.suspended()

    def on_screen_resume(self, event: events.ScreenResume) -> None:
        self.clock.resumed()

    # -- keys ---------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Whether a key works now: the agent's gate and the submit flow each answer for their own."""
        if action in AGENT_ACTIONS:
            return self.agent is not None and self.gate.allows(action)
        if action == "interrupt":
            return self.state == "running"
        return self.submit_flow.allows(action)

    # the play scope's keys
    def action_interrupt(self) -> None:
        self.play.interrupt()

    def action_focus_turns(self) -> None:
        self.turn_list.focus()

    def action_focus_input(self) -> None:
        self.pane.focus_input()

    def action_pause(self) -> None:
        self.clock.pause()

    def action_submit(self) -> None:
        self.submit_flow.submit()

    def action_show_score(self, reveal: bool = False) -> None:
        self.submit_flow.show_score(reveal)

    def action_reveal_gold(self) -> None:
        self.submit_flow.reveal_gold()

    def action_next_task(self) -> None:
        self.submit_flow.next_task()

    def action_retry(self) -> None:
        self.submit_flow.retry()

    def action_back_to_picker(self) -> None:
        self.playground.show_picker()

    # the watch scope's keys (the agent's gate)
    def action_approve(self) -> None:
        self.gate.approve()

    def action_edit(self) -> None:
        self.gate.edit()

    def action_reject(self) -> None:
        self.gate.reject()

    def action_take_over(self) -> None:
        self.gate.take_over()

    def action_hand_back(self) -> None:
        self.gate.hand_back()

    def action_cycle_mode(self) -> None:
        self.gate.cycle_mode()

    def action_set_mode(self, mode: str) -> None:
        self.gate.set_mode(mode)

    def action_pause_agent(self) -> None:
        self.gate.pause_agent()

    def action_step_one(self) -> None:
        self.gate.step_one()

    def action_resume_agent(self) -> None:
        self.gate.resume_agent()

    def action_stop(self) -> None:
        self.gate.stop()

    def action_toggle_reasoning(self) -> None:
        self.gate.toggle_reasoning()

    def action_label_turn(self) -> None:
        self.gate.label_turn()

    def action_branch_episode(self) -> None:
        self.gate.branch_episode()

    # -- leaving ----------------------------------------------------------------------------

    def leave(self) -> None:
        """Stop the clock, end the driver (play: saved as it stands, resumed next time; an
        agent's: stopped), give the sandbox back once a command under way has ended."""
        self.clock.hold("left")
        if self.host is not None:
            if self.agent is None:
                self.host.leave()
            else:
                self.host.leave(stop=lambda driver: driver.stop("the screen was left"))

    def on_unmount(self) -> None:
        self.leave()
        self.play.left()
