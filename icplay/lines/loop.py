"""``LineLoop``: one episode in line mode, the driver on its own thread and this loop on the
main one (so Ctrl+C lands here), printing the driver's events as they come and answering its
requests from lines (``icplay/lines/answers.py``). See ``icplay.lines`` for the keys."""

from __future__ import annotations

import queue
import sys
from typing import Callable

from icplay.driver import (Delta, Driver, Event, Failure, Finished, Output, Proposed, Reasoning, RequestOpened,
                           Retrying, Scored, State, TurnRecorded)
from icplay.envs.base import STREAMS_OUTPUT, SubmitResult, capabilities_of, observation_parts, parse_submit, render_notes
from icplay.episode import Proposal, Trajectory, Turn
from icplay.frontend.display import display
from icplay.languages import find
from icplay.languages.submitting import submit_preview
from icplay.lines.answers import QUIT, SUBMITTED, Answers
from icplay.lines.output import Terminal
from icplay.lines.stdin import StdinLines, echoing_input
from icplay.lines.text import CONTROL_HELP, TRUNCATED_NOTE, describe_observation, describe_reward, invalid_note
from icplay.threads import Worker

LIMITS_ENDED = ("turns", "tokens", "cost", "time")


class LineLoop:
    """Prints one episode's events and answers its requests from lines; see ``icplay.lines``."""

    def __init__(self, driver: Driver, read_line: Callable[[str], str] | None = None,
                 write: Callable[[str], None] = print, write_raw: Callable[[str], None] | None = None,
                 live: bool | None = None, stdin: StdinLines | None = None, turn_scores: bool = True,
                 breakdown_refusal: str | None = None):
        """``read_line(prompt)``: lines are read only when a decision waits (``play --plain``,
        tests). Without it, an agent's episode reads stdin all the time (``stdin``, by default
        the process's ``StdinLines``), a human's alone reads it with ``input``. ``turn_scores``
        False: the reward of a turn scored before the submit is not printed (a study's rule);
        ``breakdown_refusal``: why the reward is printed without its breakdown (a study's rule)."""
        self.driver = driver
        self.turn_scores = turn_scores
        self.breakdown_refusal = breakdown_refusal
        if read_line is None and stdin is None:
            if driver.policy is not None:
                stdin = StdinLines.shared()
            else:
                read_line = echoing_input
        self.out = Terminal(write, write_raw)
        if stdin is not None and not stdin.told:
            stdin.told = True
            write(CONTROL_HELP)
        self.live = sys.stdout.isatty() if live is None else live   # stream the model's reply as it comes
        self._streaming: str | bool = False      # the label of what streams now ("agent", "thinking")
        self.env_name = driver.episode.env.name
        self.answers = Answers(driver, self.out, read_line, stdin, find(self.env_name))
        self.events: "queue.Queue[Event]" = queue.Queue()
        self._streamed = False          # this turn's output has been printed as it came
        driver.listeners.append(self.events.put)

    @property
    def outcome(self) -> str | None:
        return self.answers.outcome

    # -- the loop ---------------------------------------------------------------------
    def run(self) -> str:
        thread = self.driver.start()
        try:
            self._show_events(thread)
        finally:
            if thread.running():
                self.driver.stop()
            while thread.running():
                try:
                    thread.wait()
                except KeyboardInterrupt:
                    self.driver.interrupt()
        if self.driver.save_failure is not None:     # a full disk or a read-only home: one line, exit 1
            raise self.driver.save_failure
        if self.answers.outcome is None:
            self.answers.outcome = SUBMITTED if self.driver.trajectory.status == "submitted" else QUIT
        return self.answers.outcome

    def _show_events(self, thread: Worker) -> None:
        """The driver's events as they come (and the ``:`` lines between them), until the
        episode ends or the driver's thread has ended with every event shown."""
        while True:
            try:
                self.answers.control_lines()
                event = self.events.get(timeout=0.05)
            except queue.Empty:
                if not thread.running() and self.events.empty():
                    return
                continue
            except KeyboardInterrupt as exc:
                self._ctrl_c(exc)
                continue
            try:
                if self._handle(event):
                    return
            except KeyboardInterrupt as exc:
                self._ctrl_c(exc)

    def _ctrl_c(self, exc: KeyboardInterrupt) -> None:
        """Ctrl+C interrupts a running command, takes over from a thinking model, quits at a prompt."""
        self.answers.shutdown(exc)
        state = self.driver.state
        if state in (State.WAITING, State.PAUSED) and self.driver.broker.pending():   # at a prompt: quit
            self.answers.outcome = QUIT
            self.out.say("")
            self.driver.stop()
            return
        if state == State.RUNNING:
            self.driver.interrupt()
        elif state == State.THINKING:
            self.out.say("(Ctrl+C: the model's call is cancelled; you have the keyboard — :agent hands back)")
            self.driver.broker.take_over()

    # -- events -----------------------------------------------------------------------
    def _handle(self, event: Event) -> bool:
        """Show one event; True when the episode has ended."""
        if isinstance(event, (Delta, Reasoning)):
            self._stream(event)
            return False
        streamed, self._streaming = self._streaming, False
        if streamed and not self.out.at_line_start:
            self.out.raw("\n")
        match event:
            case Proposed(proposal=proposal):
                self._show_proposal(proposal, bool(streamed))
            case Output(text=text) if STREAMS_OUTPUT in capabilities_of(self.driver.episode.env):
                self._show_output(text)
            case TurnRecorded(turn=turn):
                self._on_turn(turn)
            case Scored(result=result) if self.turn_scores:
                self.out.say(f"reward: {result.reward:.2f}")
            case Retrying(message=message, delay=delay):
                self.out.say(f"(the model server: {message}; retrying in {delay:.0f} s)")
            case Failure(message=message):
                self.out.say(f"error: {message}")
            case RequestOpened(request=request):
                self.answers.answer(request)
            case Finished(trajectory=traj):
                self._show_end(traj)
                return True
        return False

    def _stream(self, event: Delta | Reasoning) -> None:
        """A piece of the model's reply (or of its thinking) as it comes, when live."""
        label = "agent" if isinstance(event, Delta) else "thinking"
        if self.live and event.text:
            if self._streaming != label:
                self._streaming = label
                self.out.raw(("" if self.out.at_line_start else "\n") + f"{label}: ")
            self.out.raw(display(event.text))

    def _show_output(self, text: str) -> None:
        shown = display(text)
        if shown:
            self._streamed = True
            self.out.raw(shown)

    def _show_proposal(self, p: Proposal, streamed: bool) -> None:
        reasoning = str(p.info.get("reasoning") or "").strip()
        if reasoning and not streamed:
            shown = reasoning if len(reasoning) <= 600 else reasoning[:300] + " […] " + reasoning[-200:]
            self.out.say(f"thinking: {shown}")
        if p.info.get("reply_truncated"):
            self.out.say(TRUNCATED_NOTE)
        if p.info.get("invalid"):
            return
        if p.thought and not streamed:
            self.out.say(f"agent thinks: {p.thought.strip()}")
        self._show_proposed_action(p)

    def _show_proposed_action(self, p: Proposal) -> None:
        """The action (or tool call) proposed, and for a submit what it will score."""
        call = p.info.get("tool_call")
        verb = f"agent calls {call.get('name')}" if call else "agent proposes"
        if p.action is None:
            self.out.say(f"{verb}: submit" if not call else verb)
        else:
            action = display(p.action.strip("\n"))
            self.out.say(f"{verb}: " + (action if "\n" not in action else "\n  " + action.replace("\n", "\n  ")))
        is_submit, arg = parse_submit(p.action or "submit")
        if is_submit:              # what it scores: maybe the human's last result (InterCode's rule)
            for line in submit_preview(self.env_name, self.driver.trajectory.turns, arg, "agent"):
                self.out.say(line)

    def _show_end(self, traj: Trajectory) -> None:
        ended_by = traj.policy.get("ended_by")
        if ended_by in LIMITS_ENDED:
            self.out.say(f"(the episode's {ended_by} limit is reached: scored as it stands)")
        if traj.status == "submitted" and traj.reward is not None and self.breakdown_refusal is not None:
            self.out.say(describe_reward(SubmitResult(traj.reward), self.env_name) + f"\n({self.breakdown_refusal})")
        elif traj.status == "submitted" and traj.reward is not None:
            self.out.say(describe_reward(SubmitResult(traj.reward, traj.breakdown or {}, traj.gold_output or "",
                                                      strict=traj.strict), self.env_name))
        elif traj.status == "error":
            self.out.say(f"the episode failed: {traj.error}")

    def _on_turn(self, turn: Turn) -> None:
        kind = turn.kind
        if kind == "rejected":
            self.out.say(f"(rejected{': ' + turn.comment if turn.comment else ''})")
        elif kind == "invalid" and turn.info.get("actions") == "tools":
            self.out.say(f"({turn.observation.removeprefix('[icplay] ').strip()[:300]})")
        elif kind == "invalid":
            self.out.say(invalid_note(turn))
        else:
            self._show_ran(turn)
        self._streamed = False

    def _show_ran(self, turn: Turn) -> None:
        """A turn that ran: what its streamed output has not shown yet (the notes, a failing
        exit code), or its whole observation when nothing streamed."""
        if self._streamed:
            self.out.end_line()
            notes = observation_parts(turn.observation, turn.info)[1]
            if notes:
                self.out.write(display(render_notes(notes)))
            if turn.exit_code not in (0, None):
                self.out.write(f"[exit {turn.exit_code}]")
        else:
            text = describe_observation(turn, self.env_name)
            if text:
                self.out.say(text)
        if turn.info.get("interrupted"):
            self.out.say("[interrupted]")


__all__ = ["LineLoop"]
