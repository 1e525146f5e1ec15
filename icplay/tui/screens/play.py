"""The play screen: one task, its query, the work pane, the trajectory sidebar, the clock.

The screen is a view over an ``Episode`` (icplay.episode). Everything that blocks — the
env's reset and the replay of saved turns, each step, the reward — runs in a Textual
thread worker of group ``"env"`` and reports back with a Message. The worker holds the
app's lock for this environment, so two episodes never drive one env at once. Ctrl+C
calls ``env.interrupt()`` directly from the UI thread (it only sets a flag).
"""

from __future__ import annotations

import gc
import getpass
import threading
import time
from contextlib import contextmanager

from rich.markup import escape
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer

from icplay.envs.base import SubmitResult, parse_submit
from icplay.episode import HUMAN, Episode, Trajectory, Turn
from icplay.session import format_duration
from icplay.tasks.model import Task
from icplay.tui.clock import WorkClock
from icplay.tui.keys import bindings
from icplay.tui.screens.modals import (ConfirmScreen, HistoryScreen, PauseScreen, ScoreScreen, TurnScreen,
                                       result_from_trajectory)
from icplay.tui.widgets.panels import QueryPanel, StatusBar, TurnList, short_duration
from icplay.tui.widgets.panes import BashPane, SqlPane, WorkPane

LOADING, READY, RUNNING, SUBMITTING, SUBMITTED, FAILED = "loading", "ready", "running", "submitting", "submitted", "failed"

# Python's cyclic garbage collector stops every thread while it walks the heap; with a
# 100 000-row result alive that walk takes 50-80 ms, enough to delay a key press. So it
# is paused while a step builds its result, and the objects that survive a big step are
# frozen (left out of later walks) until the task is left. Refcounting frees the rows
# themselves either way.
BIG_RESULT = 10_000
_gc_lock = threading.Lock()
_gc_pauses = 0


@contextmanager
def gc_paused():
    global _gc_pauses
    with _gc_lock:
        _gc_pauses += 1
        if _gc_pauses == 1:
            gc.disable()
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0:
                gc.enable()


class PlayScreen(Screen):
    BINDINGS = bindings("play")

    class Opened(Message):
        def __init__(self, episode: Episode, replayed: int) -> None:
            super().__init__()
            self.episode, self.replayed = episode, replayed

    class Replaying(Message):
        def __init__(self, n: int, total: int, action: str) -> None:
            super().__init__()
            self.n, self.total, self.action = n, total, action

    class StepDone(Message):
        def __init__(self, turn: Turn | None, error: str | None = None) -> None:
            super().__init__()
            self.turn, self.error = turn, error

    class Scored(Message):
        def __init__(self, result: SubmitResult | None, error: str | None = None) -> None:
            super().__init__()
            self.result, self.error = result, error

    class Failed(Message):
        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    class Viewing(Message):
        """The task was submitted before: show that episode, read-only (F8 retries)."""

        def __init__(self, trajectory: Trajectory) -> None:
            super().__init__()
            self.trajectory = trajectory

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
        self._run_started = 0.0
        self._reinterrupt = None
        self._froze = False

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
                if self.task_record.env == "sql":
                    config = self.app.config
                    yield SqlPane(show_schema=config.show_schema, schema_allowed=not config.strict,
                                  frozen=self.frozen, id="pane")
                else:
                    yield BashPane(self.app.history_for("bash"), frozen=self.frozen, id="pane")
            yield TurnList(frozen=self.frozen, id="turns")
        yield Footer(compact=True)

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
        self.run_worker(self._open_worker, thread=True, group="env", name=f"open {self.task_record.key}",
                        exit_on_error=False)
        self.pane.focus_input()

    def tick(self) -> None:
        self.refresh_status()
        if self.state == RUNNING and not self.frozen:
            self._set_pane_status(Text(f"running · {short_duration(time.monotonic() - self._run_started)}"
                                       " · Ctrl+C interrupts", style="dim"))

    def refresh_status(self) -> None:
        task = self.task_record
        left = f"{task.key}" + (f" [{task.hardness}]" if task.hardness else "")
        turns = len([t for t in self.trajectory.turns if t.action]) if self.trajectory else 0
        clock = self.clock
        elapsed = format_duration(clock.elapsed()) if clock else "00:00"
        paused = " ⏸" if clock is not None and clock.is_held("paused") else ""
        state = {LOADING: "starting", RUNNING: "running", SUBMITTING: "scoring", FAILED: "error"}.get(self.state, "")
        if self.state == SUBMITTED and self.result is not None:
            state = f"reward {self.result.reward:.2f}"
        sandbox = self.sandbox_name or "…"
        parts = [f"turn {turns}", f"⏱ {elapsed}{paused}", f"{task.env} on {sandbox}",
                 f"session {self.app.session.name}"]
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

    def _open_worker(self) -> None:
        app = self.app
        task = self.task_record
        try:
            prior = app.session.load(task)
            if prior is not None and prior.status == "submitted" and not self.retry:
                self.sandbox_name = prior.sandbox
                self.post_message(self.Viewing(prior))
                return
            env = app.get_env(task.env)
            self.sandbox_name = env.sandbox_kind
            if prior is not None and prior.status != "submitted" and self.clock is not None:
                self.clock.set_base(prior.time_worked)
            policy = {"kind": "human", "ui": "tui", "user": _user()}
            if task.env == "sql":
                policy["schema_browser"] = not app.config.strict
            with app.env_lock(task.env), gc_paused():
                episode, replayed = app.session.open_episode(
                    env, task, policy=policy, before_save=self._before_save,
                    on_replay=lambda n, total, turn: self.post_message(self.Replaying(n, total, turn.action)))
            self.post_message(self.Opened(episode, replayed))
        except Exception as exc:  # shown in the pane: the app stays usable
            self.post_message(self.Failed(f"{type(exc).__name__}: {exc}"))

    def show_progress(self, line: str) -> None:
        if self.state == LOADING:
            self._set_pane_status(Text(line.strip()[-200:], style="dim"))

    def on_play_screen_replaying(self, message: Replaying) -> None:
        first = message.action.splitlines()[0][:60] if message.action else ""
        self._set_pane_status(Text(f"resuming: replaying turn {message.n} of {message.total} · {first}", style="dim"))

    def on_play_screen_opened(self, message: Opened) -> None:
        self.episode = message.episode
        self.state = READY
        self.pane.set_busy(False)
        turns = self.episode.trajectory.turns
        self.turn_list.set_turns(turns)
        self.pane.env_ready(self.episode.env)
        if message.replayed:
            self.pane.show_turns(turns)
            where = "a pristine database" if self.task_record.env == "sql" else "a fresh sandbox"
            turns = "turn" if message.replayed == 1 else "turns"
            self._set_pane_status(Text(f"resumed: {message.replayed} saved {turns} replayed into {where}",
                                       style="green"))
        else:
            self._set_pane_status(Text("ready", style="dim"))
        if self.clock is not None:
            self.clock.release("loading")
        self.refresh_status()
        self.pane.focus_input()

    def on_play_screen_viewing(self, message: Viewing) -> None:
        self.viewed = message.trajectory
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

    def on_play_screen_failed(self, message: Failed) -> None:
        self.state = FAILED
        self._set_pane_status(Text(f"{message.error}\nF8 tries again · Ctrl+B back to the task list",
                                   style="bold red"))
        self.refresh_bindings()
        self.notify(escape(message.error), title="The environment failed", severity="error", timeout=10)
        self.refresh_status()

    # -- turns ----------------------------------------------------------------------------------

    def on_work_pane_run(self, message: WorkPane.Run) -> None:
        message.stop()
        action = message.action
        if self.state != READY:
            self.app.bell()
            self.notify("Wait for the current step to finish." if self.state in (RUNNING, LOADING, SUBMITTING)
                        else "This task is over: retry it (F8) or go to the next one (Ctrl+N).",
                        severity="warning")
            return
        if parse_submit(action)[0]:
            self.action_submit()
            return
        self.start_turn(action)

    def start_turn(self, action: str) -> None:
        assert self.episode is not None
        self.state = RUNNING
        self._run_started = time.monotonic()
        self.pane.set_busy(True)
        self.pane.turn_started(action)
        feed = self.pane.output.feed.feed if isinstance(self.pane, BashPane) else None
        episode = self.episode

        def work() -> None:
            try:
                with self.app.env_lock(self.task_record.env), gc_paused():
                    turn = episode.act(action, HUMAN, on_output=feed)
                self.post_message(self.StepDone(turn))
            except Exception as exc:
                self.post_message(self.StepDone(None, f"{type(exc).__name__}: {exc}"))

        self.run_worker(work, thread=True, group="env", name="step", exit_on_error=False)
        self.refresh_status()

    def on_play_screen_step_done(self, message: StepDone) -> None:
        if self._reinterrupt is not None:
            self._reinterrupt.stop()
            self._reinterrupt = None
        self.pane.turn_finished(message.turn)
        if message.error:
            self._set_pane_status(Text(message.error, style="bold red"))
            self.notify(escape(message.error), title="The step failed", severity="error")
        if message.turn is not None:
            self.turn_list.add_turn(message.turn)
            rows = (message.turn.info or {}).get("rows")
            if (rows is not None and len(rows) >= BIG_RESULT) or len(message.turn.observation) > 1_000_000:
                gc.freeze()
                self._froze = True
        if self.state == RUNNING:
            self.state = READY
            self.pane.set_busy(False)
        self.refresh_status()

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        submitted = self.state == SUBMITTED
        if action == "interrupt":
            return self.state == RUNNING
        if action == "retry":
            return submitted or self.state == FAILED
        if action in ("show_score", "reveal_gold", "next_task"):
            return submitted
        if action == "submit":
            return not submitted
        return True

    def action_interrupt(self) -> None:
        if self.state == RUNNING and self.episode is not None:
            self.episode.env.interrupt()
            self._set_pane_status(Text("interrupting…", style="yellow"))
            # The envs drop an interrupt that arrives before the command has started (they
            # clear the flag when a step begins), so repeat it until the step is over.
            if self._reinterrupt is None:
                self._reinterrupt = self.set_interval(0.25, self._interrupt_again)

    def _interrupt_again(self) -> None:
        if self.state == RUNNING and self.episode is not None:
            self.episode.env.interrupt()
        elif self._reinterrupt is not None:
            self._reinterrupt.stop()
            self._reinterrupt = None

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
        if self.state != READY or self.episode is None:
            self.app.bell()
            self.notify("Wait for the current step to finish before submitting.", severity="warning")
            return
        turns = len([t for t in self.episode.trajectory.turns if t.action])
        question = (f"Submit {self.task_record.key} for scoring after {turns} turn{'s' if turns != 1 else ''}?\n"
                    "The episode ends; the score and the gold solution are shown next.")

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.start_submit()

        self.app.push_screen(ConfirmScreen(question, yes="Submit"), confirmed)

    def start_submit(self) -> None:
        if self.state != READY or self.episode is None:
            return
        self.state = SUBMITTING
        self.pane.set_busy(True)
        self._set_pane_status(Text("scoring: running the gold solution in a fresh sandbox…", style="dim"))
        if self.clock is not None:
            self.clock.hold("done")
        episode = self.episode

        def work() -> None:
            try:
                with self.app.env_lock(self.task_record.env), gc_paused():
                    result = episode.submit()
                self.post_message(self.Scored(result))
            except Exception as exc:
                self.post_message(self.Scored(None, f"{type(exc).__name__}: {exc}"))

        self.run_worker(work, thread=True, group="env", name="submit", exit_on_error=False)
        self.refresh_status()

    def on_play_screen_scored(self, message: Scored) -> None:
        if message.result is None:
            self.state = READY
            self.pane.set_busy(False)
            if self.clock is not None:
                self.clock.release("done")
            self._set_pane_status(Text(f"scoring failed: {message.error}", style="bold red"))
            self.notify(escape(message.error or ""), title="Scoring failed", severity="error")
            self.refresh_status()
            return
        self.result = message.result
        self.state = SUBMITTED
        self.pane.set_done()
        self._set_pane_status(Text(f"submitted · reward {message.result.reward:.2f} · "
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
        """Stop the clock, stop a running command, save the time worked."""
        if self.clock is not None:
            self.clock.hold("left")
        if self.state == RUNNING and self.episode is not None:
            self.episode.env.interrupt()
        if self.episode is not None and self.state in (READY, RUNNING, FAILED):
            trajectory = self.episode.trajectory
            self._before_save(trajectory)
            try:
                self.app.session.save(trajectory)
            except OSError as exc:
                self.notify(f"could not save: {exc}", severity="error")

    def on_unmount(self) -> None:
        self.leave()
        if self._froze:
            gc.unfreeze()


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "unknown"
