"""The live screen's submit and the episode's end: the confirmation, the scoring, the score
dialog and what it leads to (the next task, a retry, the task list), a study's time limit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from icplay.driver import ACTION, Decision
from icplay.driver.broker import Request
from icplay.envs.base import SubmitResult
from icplay.episode import Trajectory
from icplay.tui.live.ends import OVER_FAILED, OVER_STOPPED, OVER_SUBMITTED
from icplay.tui.screens.modals import ConfirmScreen, ScoreScreen, result_from_trajectory, submit_question
from icplay.tui.shown import safe, shown

if TYPE_CHECKING:
    from icplay.tui.screens.live import LiveScreen


class SubmitFlow:
    """The submit is an answer to the broker's request like any move; the score comes as the
    driver's end (``finished``)."""

    def __init__(self, screen: LiveScreen) -> None:
        self.screen = screen
        self.submitting = False        # the human's submit was sent; the score comes
        self.arg: str | None = None    # the argument of a typed `submit ARG`
        self.when_asked = False        # Ctrl+S while the agent had the turn: submit at the next request

    def allows(self, action: str) -> bool:
        """Whether a play key of the submit and what follows it does something now (the rest do)."""
        screen = self.screen
        state = screen.state
        submitted = state == OVER_SUBMITTED
        if action == "retry":
            return submitted or state in (OVER_FAILED, OVER_STOPPED)
        if action == "reveal_gold":
            return submitted and screen.bar.gold_refusal() is None
        if action == "next_task":        # in a study also after the time limit (the queue goes on)
            return submitted or (state == OVER_STOPPED and screen.in_study)
        if action == "show_score":
            return submitted
        if action == "submit":
            return not submitted
        return True

    # -- asking, then sending ----------------------------------------------------------------------

    def submit(self) -> None:
        """Ctrl+S (or a typed ``submit``): confirmed first; after the end, the score again."""
        screen = self.screen
        if screen.over is not None and screen.over != OVER_FAILED:
            if screen.over == OVER_SUBMITTED:
                screen.action_show_score()
            return
        if screen.agent is not None:
            self.agent_submit()
            return
        if screen.state != "ready" or screen.episode is None:
            screen.app.bell()
            screen.notify("Wait for the current step to finish before submitting.", severity="warning")
            return
        question = submit_question(screen.task_record.key, screen.task_record.env, screen.episode.trajectory.turns,
                                   self.arg, gold_shown=screen.bar.gold_refusal() is None)

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.start()

        screen.app.push_screen(ConfirmScreen(question, yes="Submit"), confirmed)

    def agent_submit(self) -> None:
        """Ctrl+S while an agent works: submit now if a request allows it, else at the next step."""
        screen = self.screen
        request = screen.request
        if request is not None and "submit" in request.allowed:
            turns = screen.trajectory.turns if screen.trajectory is not None else []
            screen.app.push_screen(ConfirmScreen(submit_question(screen.task_record.key, screen.task_record.env,
                                                                 turns, self.arg),
                                                 yes="Submit"),
                                   self.confirmed)
            return
        self.arg = None     # a flag typed while the agent had the turn is not kept for later
        # the model is thinking or a command runs: take the turn, then submit when asked
        self.when_asked = True
        screen.broker.take_over()
        screen.panel.set_hint("submitting at the next step…")

    def confirmed(self, yes: bool | None) -> None:
        arg, self.arg = self.arg, None
        if yes:
            self.screen.answer(Decision.submit(arg))

    def answer_when_asked(self, request: Request) -> bool:
        """The driver asks for the human's move after Ctrl+S took the turn: the submit is the
        answer (True: sent)."""
        if request.kind != ACTION or not self.when_asked:
            return False
        self.when_asked = False
        self.screen.answer(Decision.submit())
        return True

    def start(self) -> None:
        """The human's confirmed submit: the clock stops, the gold runs in a fresh sandbox."""
        screen = self.screen
        if screen.state != "ready" or screen.episode is None:
            return
        screen.pane.set_busy(True)
        screen.play.set_status(Text("scoring: running the gold solution in a fresh sandbox…", style="dim"))
        screen.clock.hold("done")
        self.submitting = screen.answer(Decision.submit(self.arg))
        self.arg = None
        screen.bar.refresh()

    def failed(self, message: str) -> None:
        """Scoring failed: said; the human is asked for a move again."""
        screen = self.screen
        self.submitting = False      # ready again when the driver asks for the next move
        screen.clock.release("done")
        screen.play.set_status(shown(f"scoring failed: {message}", style="bold red"))
        screen.notify(safe(message), title="Scoring failed", severity="error", markup=False)

    # -- the end ---------------------------------------------------------------------------------

    def finished(self, trajectory: Trajectory) -> None:
        """The driver's end: scored, stopped by the study's time limit, or (an agent's) stopped or
        failed."""
        screen = self.screen
        agent = screen.agent
        screen.request = None
        screen.editing = None
        queue = getattr(screen.playground, "queue", None)
        if queue is not None:
            queue.refresh()          # the header's "done" counts this task now, not at the next one
        if trajectory.status == "submitted":
            self.submitting = False
            self.show_scored(result_from_trajectory(trajectory))
            if agent is not None:
                screen.gate.ended("done", f"submitted · reward {trajectory.reward:.2f}")
        elif screen.rules.timed_out(trajectory):
            self.time_up()
        elif agent is not None:
            self.agent_ended(trajectory)
        if agent is not None:
            screen.play.refresh_turns()
            screen.refresh_bindings()
            screen.bar.refresh()

    def time_up(self) -> None:
        screen = self.screen
        reason = screen.rules.time_up_reason()
        screen.over = OVER_STOPPED
        screen.pane.set_busy(True)
        if screen.agent is not None:
            screen.gate.ended("done", "time is up · Ctrl+N next")
        screen.clock.hold("done")
        screen.play.set_status(Text(f"time is up: {reason} · Ctrl+N next", style="yellow"))
        screen.notify(f"Time is up: {reason}.", title="Time limit", severity="warning", timeout=10, markup=False)
        screen.refresh_bindings()

    def agent_ended(self, trajectory: Trajectory) -> None:
        """The agent's episode stopped (by the human, a limit) or failed: it can be reopened."""
        screen = self.screen
        screen.over = OVER_STOPPED if trajectory.status == "stopped" else OVER_FAILED
        screen.pane.set_busy(True)
        why = f" ({trajectory.error})" if trajectory.error else ""
        screen.gate.ended("done" if trajectory.status == "stopped" else "failed",
                          f"{trajectory.status}{why} · F8 reopens it (saved turns replayed) · "
                          "Ctrl+B back to the task list")
        screen.play.set_status(Text(f"episode {trajectory.status}", style="yellow"))

    def show_scored(self, result: SubmitResult) -> None:
        screen = self.screen
        screen.result = result
        screen.over = OVER_SUBMITTED
        screen.pane.set_done()
        keys = ["F9 score", "Ctrl+G gold" if screen.bar.gold_refusal() is None else "", "Ctrl+N next",
                "F8 retry" if screen.bar.retry_refusal() is None else ""]
        screen.play.set_status(Text(f"submitted · reward {result.reward:.2f} · " + " · ".join(k for k in keys if k),
                                    style="bold"))
        if screen.episode is not None and screen.episode.trajectory.turns:
            screen.turn_list.set_turns(screen.episode.trajectory.turns)
        screen.bar.refresh()
        screen.refresh_bindings()
        screen.action_show_score()

    # -- the score and what follows it ----------------------------------------------------------------

    def show_score(self, reveal: bool = False) -> None:
        screen = self.screen
        if screen.state != OVER_SUBMITTED or screen.trajectory is None:
            return
        result = screen.result or result_from_trajectory(screen.trajectory)
        gold_refusal = screen.bar.gold_refusal()
        screen.app.push_screen(ScoreScreen(screen.trajectory, result, reveal=reveal and gold_refusal is None,
                                           gold_refusal=gold_refusal, retry_refusal=screen.bar.retry_refusal(),
                                           breakdown_refusal=screen.rules.breakdown_refusal(),
                                           task_list=getattr(screen.playground, "queue", None) is None),
                               self.after_score)

    def reveal_gold(self) -> None:
        refusal = self.screen.bar.gold_refusal()
        if refusal is not None:
            self.screen.notify(refusal, title="No gold", severity="warning", markup=False)
            return
        self.screen.action_show_score(reveal=True)

    def after_score(self, choice: str | None) -> None:
        """The score dialog's choice, by the screen's own keys (a fork's retry is its own)."""
        screen = self.screen
        if choice == "next":
            screen.action_next_task()
        elif choice == "retry":
            screen.action_retry()
        elif choice == "picker":
            screen.action_back_to_picker()

    def next_task(self) -> None:
        screen = self.screen
        agent = screen.agent
        if agent is None:
            screen.playground.open_next(screen.task_record)
        else:
            screen.playground.open_next(screen.task_record, session=screen.session,
                                        opener=lambda task: screen.playground.open_watch(task, agent))

    def retry(self) -> None:
        """The task again: started over after a submit or the time limit, else resumed."""
        screen = self.screen
        trajectory = screen.trajectory
        retry = screen.state == OVER_SUBMITTED or (trajectory is not None and screen.rules.timed_out(trajectory))
        if screen.agent is None:
            screen.playground.open_task(screen.task_record, retry=retry)
        else:
            screen.playground.open_watch(screen.task_record, screen.agent, retry=retry)
