"""The live screen's work pane and turn list: the human's own moves (typed, run, their output as
it comes), the pane's status line, and when the pane takes input."""

from __future__ import annotations

import gc
import threading
import time
from typing import TYPE_CHECKING, Callable

from rich.text import Text

from icplay.driver import Decision
from icplay.driver.events import State
from icplay.envs.base import parse_submit
from icplay.episode import Turn
from icplay.frontend.opening import is_big
from icplay.tui.screens.modals import HistoryScreen, TurnScreen
from icplay.tui.shown import safe, shown
from icplay.tui.widgets.panels import short_duration
from icplay.tui.widgets.panes import BashPane

if TYPE_CHECKING:
    from icplay.tui.screens.live import LiveScreen


class PlayPane:
    """The pane's side of a turn. Command output comes on the driver's thread and goes straight
    into the pane's thread-safe feed (kept until the pane has made one for the command)."""

    def __init__(self, screen: LiveScreen) -> None:
        self.screen = screen
        self.turn_index = 0            # the index the human's command being run will have
        self.run_started = 0.0         # when the command under way started; 0 once its turn is in
        self.next_action = ""          # what the next command the driver runs will be
        self.froze = False             # a big turn froze the garbage collector's view of the heap
        self._feed: Callable[[str], None] | None = None   # the pane's output feed while a command runs
        self._out_lock = threading.Lock()
        self._early_output: list[str] = []

    def set_status(self, text: Text) -> None:
        setter = getattr(self.screen.pane, "set_status", None)
        if setter is not None:
            setter(text)

    def sync_input(self) -> None:
        """The pane takes input only when the human has the turn or edits a proposal."""
        screen = self.screen
        open_for_human = screen.editing is not None or screen.asks_human()
        screen.pane.set_busy(not open_for_human)

    # -- a command's output, from the driver's thread ------------------------------------------

    def output(self, text: str) -> None:
        """(On the driver's thread.) Into the feed of the command under way, or kept for it."""
        with self._out_lock:              # the pane's feed for this command may not exist yet
            if self._feed is None:
                self._early_output.append(text)
                return
            feed = self._feed
        feed(text)

    def attach_feed(self, feed: Callable[[str], None] | None) -> None:
        """A new feed per command: hand it what came already."""
        if feed is None:
            return
        with self._out_lock:
            self._feed = feed
            for text in self._early_output:
                feed(text)
            self._early_output.clear()

    def detach_feed(self) -> None:
        with self._out_lock:
            self._feed = None
            self._early_output.clear()

    # -- the human's own typing ------------------------------------------------------------------

    def run(self, action: str) -> None:
        """The pane's Run: an edited proposal, the human's move, or a typed ``submit``."""
        screen = self.screen
        if screen.editing is not None and screen.editing is screen.request:
            screen.answer(Decision.edit(action))
            return
        if not screen.asks_human():
            screen.app.bell()
            if screen.agent is not None and screen.over is None:
                screen.notify("The agent has the turn: F7 takes over, Ctrl+E edits a waiting proposal.",
                              severity="warning")
            else:
                screen.notify("Wait for the current step to finish." if screen.over is None
                              else "This task is over: retry it (F8) or go to the next one (Ctrl+N).",
                              severity="warning")
            return
        is_submit, arg = parse_submit(action)
        if is_submit:
            screen.submit_flow.arg = arg     # `submit NAME` (Python's function, CTF's flag): confirmed first
            screen.action_submit()
            return
        if screen.agent is not None:            # the agent's episode: the broker runs the human's move
            screen.answer(Decision.run(action))
            return
        self.start_turn(action)

    def start_turn(self, action: str) -> None:
        """The human runs ``action``: the pane shows it at once, its output as it comes."""
        screen = self.screen
        assert screen.episode is not None
        self.run_started = time.monotonic()
        self.turn_index = len(screen.episode.trajectory.turns)
        screen.pane.set_busy(True)
        screen.pane.turn_started(action)
        self.attach_feed(screen.pane.output_feed())
        if not screen.answer(Decision.run(action)):
            self.run_started = 0.0
            self.detach_feed()
        screen.bar.refresh()

    def interrupt(self) -> None:
        screen = self.screen
        if screen.state == "running" and screen.driver is not None:
            # repeated by the driver until the command ends
            screen.driver.interrupt(self.turn_index if screen.agent is None else None)
            self.set_status(Text("interrupting…", style="yellow"))

    def tick(self) -> None:
        """How long the command under way has run, on the pane's status line."""
        screen = self.screen
        if screen.state == "running" and self.run_started and not screen.frozen:
            self.set_status(Text(f"running · {short_duration(time.monotonic() - self.run_started)}"
                                 " · Ctrl+C interrupts", style="dim"))

    # -- the driver's side of a turn ---------------------------------------------------------------

    def on_state(self, state: State) -> None:
        """The driver runs a command: the agent's move, or one the broker let through."""
        if state == State.RUNNING and not self.run_started:
            self.run_started = time.monotonic()
            self.screen.pane.turn_started(self.next_action)
            self.attach_feed(self.screen.pane.output_feed())

    def turn_recorded(self, turn: Turn) -> None:
        screen = self.screen
        self.run_started = 0.0             # running until the driver asks again; the result stays shown
        self.detach_feed()
        if turn.action or screen.agent is None:
            screen.pane.turn_finished(turn)
        if screen.agent is None:
            screen.turn_list.add_turn(turn)
        else:
            self.refresh_turns()
        if is_big(turn):
            gc.freeze()
            self.froze = True

    def step_failed(self, message: str) -> None:
        """The human's command failed: said, and the pane takes the next one."""
        self.run_started = 0.0
        self.detach_feed()
        self.screen.pane.turn_finished(None)
        self.set_status(shown(message, style="bold red"))
        self.screen.notify(safe(message), title="The step failed", severity="error", markup=False)

    def refresh_turns(self) -> None:
        trajectory = self.screen.trajectory
        if trajectory is not None:
            self.screen.turn_list.set_turns(trajectory.turns)

    def show_turn(self, index: int) -> None:
        """The turn list's Enter: the turn whole, in a dialog."""
        screen = self.screen
        if screen.trajectory is None:
            return
        turns = screen.trajectory.turns
        if 0 <= index < len(turns):
            screen.app.push_screen(TurnScreen(turns[index], frozen=screen.frozen,
                                              turn_scores=screen.rules.show_turn_scores))

    def search_history(self) -> None:
        """The command line's history search (Bash's pane), in a dialog."""
        screen = self.screen
        pane = screen.pane
        if not isinstance(pane, BashPane):
            return
        command = pane.command
        history = list(reversed(command.command_history.items))

        def chosen(value: str | None) -> None:
            if value is not None:
                command.set_command(value)
            command.focus()

        screen.app.push_screen(HistoryScreen(history, command.text.strip()), chosen)

    def left(self) -> None:
        if self.froze:
            gc.unfreeze()
