"""The play screen: one task, its query, the work pane, the trajectory sidebar, the clock.

The screen is a view over an episode run by ``icplay.driver``: a human's play is the driver
in human mode with no policy (the watch screen adds one). Everything that blocks — leasing
a sandbox from the app's pool, the reset and the replay of saved turns, then the driver
itself — runs on the screen's ``EpisodeHost`` thread (icplay.frontend.opening); the host's
events arrive here as ``RunnerEvent`` Messages and the driver's as ``DriverEvent``s, and
only the UI thread changes the screen. Each command and the submit are answers to the
broker's ``action`` request. The sandbox is this screen's own lease
(icplay.frontend.leases): given back when the screen is left, never shared.
"""

from __future__ import annotations

import gc
import threading
import time
from typing import Callable

from rich.markup import escape
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen

from icplay.driver import ACTION, HUMAN_MODE, Broker, Decision, Driver, Limits
from icplay.driver.events import (CallCancelled, Delta, Event, Failure, Finished, ModeChanged, Output, Proposed,
                                  Reasoning, RequestClosed, RequestOpened, Retrying, Scored, State, StateChanged,
                                  TurnRecorded)
from icplay.envs.base import SubmitResult, parse_submit
from icplay.episode import Episode, Proposal, Trajectory, Turn
from icplay.session import format_duration
from icplay.tasks.model import Task
from icplay.frontend.clock import WorkClock
from icplay.tui.keys import bindings
from icplay.frontend.opening import (EpisodeHost, Failed, HostEvent, Opened, Progress, Replaying, Viewing, is_big,
                                     user_name)
from icplay.tui.screens.modals import (ConfirmScreen, HistoryScreen, PauseScreen, ScoreScreen, TurnScreen,
                                       result_from_trajectory, submit_question)
from icplay.tui.widgets.footer import KeysFooter
from icplay.tui.widgets.panels import QueryPanel, StatusBar, TurnList, short_duration
from icplay.tui.widgets.panes import BashPane, WorkPane

# what the screen shows (the driver's own states are icplay.driver.events.State)
LOADING, READY, RUNNING, SUBMITTING, SUBMITTED = "loading", "ready", "running", "submitting", "submitted"
BROKEN = "failed"     # the environment did not open, or the driver failed

class PlayScreen(Screen):
    BINDINGS = bindings("play")

    class RunnerEvent(Message):
        """An event of the screen's episode host (icplay.frontend.opening), posted from its thread."""

        def __init__(self, event: HostEvent) -> None:
            super().__init__()
            self.event = event

    class DriverEvent(Message):
        """An event of the screen's driver, posted from the driver's thread."""

        def __init__(self, event: Event) -> None:
            super().__init__()
            self.event = event

    def __init__(self, task: Task, retry: bool = False) -> None:
        super().__init__()
        self.task_record = task
        self.retry = retry
        self.episode: Episode | None = None
        self.viewed: Trajectory | None = None
        self.state = LOADING
        self.result: SubmitResult | None = None
        self.sandbox_name = ""
        self.clock: WorkClock | None = None
        self.host: EpisodeHost | None = None
        self.driver: Driver | None = None
        self.request = None                  # the broker's open request this screen shows
        self._turn_index = 0                 # the index the command being run will have
        self._run_started = 0.0             # when the command under way started; 0 once its turn is in
        self._froze = False
        self.submit_arg: str | None = None   # the argument of a typed `submit ARG`
        self._feed: Callable[[str], None] | None = None   # the pane's output feed while a command runs
        self._out_lock = threading.Lock()
        self._early_output: list[str] = []

    # -- layout ---------------------------------------------------------------------------

    @property
    def frozen(self) -> bool:
        return self.app.frozen

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        with Horizontal(id="body"):
            with Vertical(id="main"):
                query = QueryPanel(Text(self.task_record.query), id="query")
                query.border_title = f"Task {self.task_record.key}" + (f" · {self.task_record.hardness}" if self.task_record.hardness else "")
                yield query
                yield from self.compose_agent()
                yield self.make_pane()
            yield TurnList(frozen=self.frozen, language=self.task_record.env, id="turns")
        yield KeysFooter(compact=True)

    @property
    def language(self):
        """The spec of the task's language (its pane, key scope, score rows)."""
        from icplay.languages import get

        return get(self.task_record.env)

    def make_pane(self) -> WorkPane:
        """The language's work pane (``LanguageSpec.pane``), built from the app's settings."""
        from icplay.languages import resolve

        pane_class = resolve(self.language.pane)
        return pane_class.build(self.app, frozen=self.frozen, id="pane")

    def compose_agent(self) -> ComposeResult:
        """The watch screen's agent panel goes here; a human's play screen has none."""
        return iter(())

    @property
    def session(self):
        """The session this screen's episodes are saved in."""
        return self.app.session

    @property
    def trajectory(self) -> Trajectory | None:
        """The episode's trajectory, or the submitted one being viewed."""
        return self.episode.trajectory if self.episode is not None else self.viewed

    @property
    def pane(self) -> WorkPane:
        return self.query_one("#pane", WorkPane)

    @property
    def turn_list(self) -> TurnList:
        return self.query_one(TurnList)

    def on_mount(self) -> None:
        self.clock = WorkClock(now=self.app.clock)
        self.clock.hold("loading")
        self.pane.set_busy(True)
        self._set_pane_status(Text("starting the sandbox…", style="dim"))
        self.refresh_status()
        self.set_interval(0.5, self.tick)
        self.host = EpisodeHost(self.task_record, self.app.pool, self.session,
                                emit=lambda event: self.post_message(self.RunnerEvent(event)),
                                before_save=self._before_save)
        self.host.open(self.policy_info(), self.make_driver, retry=self.retry, set_base=self._set_clock_base)
        self.pane.focus_input()

    def make_driver(self, episode: Episode) -> Driver:
        """(On the host's thread.) A human's play: the driver in human mode, no policy, no turn limit."""
        assert self.host is not None
        return Driver(episode, None, limits=Limits(max_turns=None), broker=Broker(HUMAN_MODE),
                      on_event=self._from_driver, on_failure="ask", around_action=self.host.around_action)

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
        self.post_message(self.DriverEvent(event))

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

    def on_play_screen_driver_event(self, message: DriverEvent) -> None:
        """The driver's events, by type, each to its ``on_driver_*`` (the watch screen adds the agent's)."""
        message.stop()
        match message.event:
            case StateChanged(state=state):
                self.on_driver_state(state)
            case Delta(text=text):
                self.on_driver_delta(text)
            case Reasoning(text=text):
                self.on_driver_reasoning(text)
            case Proposed(proposal=proposal):
                self.on_driver_proposal(proposal)
            case RequestOpened(request=request):
                self.on_driver_request(request)
            case RequestClosed(request=request):
                self.on_driver_answered(request)
            case ModeChanged(mode=mode):
                self.on_driver_mode(mode)
            case TurnRecorded(turn=turn):
                self.on_driver_turn(turn)
            case Scored(result=result):
                self.on_driver_score(result)
            case Retrying() as retry:
                self.on_driver_retry(retry)
            case Failure() as failure:
                self.on_driver_error(failure)
            case CallCancelled():
                self.on_driver_cancelled()
            case Finished(trajectory=trajectory):
                self.on_driver_finished(trajectory)

    def policy_info(self) -> dict:
        """The trajectory's policy block for this screen's episodes."""
        policy = {"kind": "human", "ui": "tui", "user": user_name()}
        policy.update(self.pane.policy_info(self.app.config))
        return policy

    def _set_clock_base(self, seconds: float) -> None:
        if self.clock is not None:
            self.clock.set_base(seconds)

    def on_play_screen_runner_event(self, message: RunnerEvent) -> None:
        """The episode host's events, by type."""
        message.stop()
        match message.event:
            case Progress() as progress:
                self.on_runner_progress(progress)
            case Replaying() as replaying:
                self.on_runner_replaying(replaying)
            case Opened() as opened:
                self.on_runner_opened(opened)
            case Viewing() as viewing:
                self.on_runner_viewing(viewing)
            case Failed() as failed:
                self.on_runner_failed(failed)

    def tick(self) -> None:
        self.refresh_status()
        if self.state == RUNNING and self._run_started and not self.frozen:
            self._set_pane_status(Text(f"running · {short_duration(time.monotonic() - self._run_started)}"
                                       " · Ctrl+C interrupts", style="dim"))

    def refresh_status(self) -> None:
        task = self.task_record
        left = f"{task.key}" + (f" [{task.hardness}]" if task.hardness else "")
        turns = self.trajectory.turns_taken if self.trajectory else 0
        clock = self.clock
        elapsed = format_duration(clock.elapsed()) if clock else "00:00"
        paused = " ⏸" if clock is not None and clock.is_held("paused") else ""
        state = {LOADING: "starting", RUNNING: "running", SUBMITTING: "scoring", BROKEN: "error"}.get(self.state, "")
        if self.state == SUBMITTED and self.result is not None:
            state = f"reward {self.result.reward:.2f}"
        sandbox = self.sandbox_name or "…"
        parts = [f"turn {turns}", f"⏱ {elapsed}{paused}", f"{task.env} on {sandbox}",
                 f"session {self.session.name}"]
        if state:
            parts.insert(0, state)
        self.query_one(StatusBar).show(f"icplay · {left}", parts, keep=3 if state else 2)

    def _set_pane_status(self, text: Text) -> None:
        setter = getattr(self.pane, "set_status", None)
        if setter is not None:
            setter(text)

    # -- opening (reset + resume) ---------------------------------------------------------------

    def _before_save(self, trajectory: Trajectory) -> None:
        if self.clock is not None:
            trajectory.time_worked = round(self.clock.elapsed(), 3)

    def on_runner_progress(self, message: Progress) -> None:
        if self.state == LOADING:
            self._set_pane_status(Text(message.line.strip()[-200:], style="dim"))

    def on_runner_replaying(self, message: Replaying) -> None:
        first = message.action.splitlines()[0][:60] if message.action else ""
        self._set_pane_status(Text(f"resuming: replaying turn {message.n} of {message.total} · {first}", style="dim"))

    def on_runner_opened(self, message: Opened) -> None:
        self.episode = message.episode
        self.driver = message.driver
        self.sandbox_name = message.sandbox
        self.state = READY if self._asks_human() else LOADING   # READY when the driver asks
        self.pane.set_busy(self.state != READY)
        turns = self.episode.trajectory.turns
        self.turn_list.set_turns(turns)
        self.pane.env_ready(self.episode.env)
        if message.replayed:
            self.pane.show_turns(turns)
            where = self.language.fresh_state
            turns = "turn" if message.replayed == 1 else "turns"
            self._set_pane_status(Text(f"resumed: {message.replayed} saved {turns} replayed into {where}",
                                       style="green"))
        else:
            self._set_pane_status(Text("ready", style="dim"))
        if self.clock is not None:
            self.clock.release("loading")
        self.refresh_status()
        self.pane.focus_input()

    def on_runner_viewing(self, message: Viewing) -> None:
        self.viewed = message.trajectory
        self.sandbox_name = message.trajectory.sandbox
        self.result = result_from_trajectory(message.trajectory)
        self.state = SUBMITTED
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

    def on_runner_failed(self, message: Failed) -> None:
        self.state = BROKEN
        self._set_pane_status(Text(f"{message.error}\nF8 tries again · Ctrl+B back to the task list",
                                   style="bold red"))
        self.refresh_bindings()
        self.notify(escape(message.error), title="The environment failed", severity="error", timeout=10)
        self.refresh_status()

    # -- turns ----------------------------------------------------------------------------------

    def on_work_pane_run(self, message: WorkPane.Run) -> None:
        message.stop()
        action = message.action
        if self.state != READY or not self._asks_human():
            self.app.bell()
            self.notify("Wait for the current step to finish." if self.state in (RUNNING, LOADING, SUBMITTING)
                        else "This task is over: retry it (F8) or go to the next one (Ctrl+N).",
                        severity="warning")
            return
        is_submit, arg = parse_submit(action)
        if is_submit:
            self.submit_arg = arg     # `submit NAME` (Python's function, CTF's flag)
            self.action_submit()
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
            return self.driver.broker.answer(request.id, decision)
        except ValueError as exc:
            self.notify(str(exc), severity="warning")
            return False

    def start_turn(self, action: str) -> None:
        assert self.episode is not None
        self.state = RUNNING
        self._run_started = time.monotonic()
        self._turn_index = len(self.episode.trajectory.turns)
        self.pane.set_busy(True)
        self.pane.turn_started(action)
        self._attach_feed(self.pane.output_feed())
        if not self._answer(Decision.run(action)):
            self._detach_feed()
        self.refresh_status()

    # -- the driver's events (a human's play; the watch screen adds the agent's) ---------------

    def on_driver_state(self, state: State) -> None:
        pass

    def on_driver_delta(self, text: str) -> None:
        pass

    def on_driver_reasoning(self, text: str) -> None:
        pass

    def on_driver_proposal(self, proposal: Proposal) -> None:
        pass

    def on_driver_mode(self, mode: str) -> None:
        pass

    def on_driver_score(self, result: SubmitResult) -> None:
        pass

    def on_driver_retry(self, retry: Retrying) -> None:
        pass

    def on_driver_cancelled(self) -> None:
        pass

    def on_driver_request(self, request) -> None:
        self.request = request
        if request.kind == ACTION and self.state in (LOADING, READY, RUNNING) and self.episode is not None:
            self.state = READY
            self.pane.set_busy(False)
            self.refresh_status()
            self.refresh_bindings()

    def on_driver_answered(self, request) -> None:
        if self.request is request:
            self.request = None

    def on_driver_turn(self, turn: Turn) -> None:
        self._run_started = 0.0             # RUNNING until the driver asks again; the result stays shown
        self._detach_feed()
        self.pane.turn_finished(turn)
        self.turn_list.add_turn(turn)
        if is_big(turn):
            gc.freeze()
            self._froze = True
        self.refresh_status()

    def on_driver_error(self, failure: Failure) -> None:
        """A command or the submit failed (the human moves again), or the driver itself did."""
        message = failure.message
        if failure.during == "submit" or self.state == SUBMITTING:
            self.state = RUNNING          # READY again when the driver asks for the next move
            if self.clock is not None:
                self.clock.release("done")
            self._set_pane_status(Text(f"scoring failed: {message}", style="bold red"))
            self.notify(escape(message), title="Scoring failed", severity="error")
        else:
            self._run_started = 0.0
            self._detach_feed()
            self.pane.turn_finished(None)
            self._set_pane_status(Text(message, style="bold red"))
            self.notify(escape(message), title="The step failed", severity="error")
        if failure.fatal:
            self.state = BROKEN
            self.refresh_bindings()
        self.refresh_status()

    def on_driver_finished(self, trajectory: Trajectory) -> None:
        self.request = None
        if trajectory.status == "submitted":
            self.show_scored(result_from_trajectory(trajectory))

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        submitted = self.state == SUBMITTED
        if action == "interrupt":
            return self.state == RUNNING
        if action == "retry":
            return submitted or self.state == BROKEN
        if action in ("show_score", "reveal_gold", "next_task"):
            return submitted
        if action == "submit":
            return not submitted
        return True

    def action_interrupt(self) -> None:
        if self.state == RUNNING and self.driver is not None:
            self.driver.interrupt(self._turn_index)   # repeated by the driver until the command ends
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
            self.app.push_screen(TurnScreen(turns[message.index], frozen=self.frozen))

    # -- the command line's history ----------------------------------------------------------------

    def on_command_input_search_history(self, message) -> None:
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
        if self.state == SUBMITTED:
            self.action_show_score()
            return
        if self.state != READY or self.episode is None or not self._asks_human():
            self.app.bell()
            self.notify("Wait for the current step to finish before submitting.", severity="warning")
            return
        question = submit_question(self.task_record.key, self.task_record.env, self.episode.trajectory.turns,
                                   self.submit_arg)

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.start_submit()

        self.app.push_screen(ConfirmScreen(question, yes="Submit"), confirmed)

    def start_submit(self) -> None:
        if self.state != READY or self.episode is None or not self._asks_human():
            return
        self.state = SUBMITTING
        self.pane.set_busy(True)
        self._set_pane_status(Text("scoring: running the gold solution in a fresh sandbox…", style="dim"))
        if self.clock is not None:
            self.clock.hold("done")
        self._answer(Decision.submit(self.submit_arg))
        self.submit_arg = None
        self.refresh_status()

    def show_scored(self, result: SubmitResult) -> None:
        self.result = result
        self.state = SUBMITTED
        self.pane.set_done()
        self._set_pane_status(Text(f"submitted · reward {result.reward:.2f} · "
                                   "F9 score · Ctrl+G gold · Ctrl+N next · F8 retry", style="bold"))
        if self.episode is not None and self.episode.trajectory.turns:
            self.turn_list.set_turns(self.episode.trajectory.turns)
        self.refresh_status()
        self.refresh_bindings()
        self.action_show_score()

    def action_show_score(self, reveal: bool = False) -> None:
        if self.state != SUBMITTED or self.trajectory is None:
            return
        result = self.result or result_from_trajectory(self.trajectory)
        self.app.push_screen(ScoreScreen(self.trajectory, result, reveal=reveal), self._after_score)

    def action_reveal_gold(self) -> None:
        self.action_show_score(reveal=True)

    def _after_score(self, choice: str | None) -> None:
        if choice == "next":
            self.action_next_task()
        elif choice == "retry":
            self.action_retry()
        elif choice == "picker":
            self.action_back_to_picker()

    def action_next_task(self) -> None:
        self.app.open_next(self.task_record)

    def action_retry(self) -> None:
        self.app.open_task(self.task_record, retry=self.state == SUBMITTED)

    def action_back_to_picker(self) -> None:
        self.app.show_picker()

    # -- leaving ----------------------------------------------------------------------------

    def leave(self) -> None:
        """Stop the clock, stop a running command, save the time worked (the episode as it
        stands: resumed next time), give the sandbox back."""
        if self.clock is not None:
            self.clock.hold("left")
        if self.host is not None:
            self.host.leave()

    def on_unmount(self) -> None:
        self.leave()
        if self._froze:
            gc.unfreeze()
