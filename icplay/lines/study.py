"""``icplay play|watch --study NAME --annotator A --plain``: an annotator's queue in line mode.

Each task of the queue runs in line mode's loop (``icplay.lines.LineLoop``, as ``play
--plain`` and ``watch --plain``), saved in the annotator's session of the study. Who acts is
the ``Seat``: the annotator herself (``HumanSeat``, play), or an agent she supervises (watch:
icplay/commands/watch_study.py builds that seat, since the agent's policy is a front end's). After a task (submitted, or ended
by the time limit) one line says what next: an empty line or ``:next`` goes on, ``:gold``
shows the gold, ``:retry`` tries the task again, ``:quit`` (or the end of input) stops. What
is allowed is asked of the study's ``PlayRules`` (icplay/study/rules.py), never decided here.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable, Protocol

from icplay.driver import Broker, Driver, HUMAN_MODE, human_play
from icplay.envs.base import Env
from icplay.frontend.display import display
from icplay.frontend.opening import open_episode
from icplay.lines.answers import QUIT
from icplay.lines.loop import LineLoop
from icplay.lines.stdin import EOF, StdinLines
from icplay.lines.tasks import tell_opening
from icplay.episode import Episode, Trajectory
from icplay.session import format_duration
from icplay.study.queue import DONE, Entry, Queue, resolve
from icplay.study.rules import PlayRules
from icplay.tasks.model import Task


def after_help(gold: bool, retry: bool) -> str:
    """The moves after a task, those the study's rules refuse left out (typed anyway, they are
    refused with the rule's reason)."""
    moves = ["[enter] or :next the next task", *([":gold show the gold"] if gold else []),
             *([":retry try this task again"] if retry else []), ":quit"]
    return "next: " + " · ".join(moves)


class Seat(Protocol):
    """Who acts on each task of the queue, and what the trajectory says of it."""

    supervised: bool                      # an agent acts, the annotator supervises (the watch controls shown)
    model_names: tuple[str, ...]          # what would name the agent's model (hidden when the study says so)

    def policy_info(self, task: Task) -> dict[str, Any]: ...

    def driver(self, episode: Episode, task: Task) -> Driver: ...


class HumanSeat:
    """The annotator acts herself (``play --study``): human mode, no policy."""

    supervised = False
    model_names: tuple[str, ...] = ()

    def policy_info(self, task: Task) -> dict[str, Any]:
        return {"kind": "human", "ui": "plain-study"}

    def driver(self, episode: Episode, task: Task) -> Driver:
        return Driver(episode, human_play(Broker(HUMAN_MODE)))


class StudyPlain:
    """One annotator's queue in line mode (see the module docstring)."""

    def __init__(self, queue: Queue, make_env: Callable[[str], Env], write: Callable[[str], None] = print,
                 stdin: StdinLines | None = None, seat: Seat | None = None):
        self.queue = queue
        self.rules = PlayRules.of(queue.study)
        self.session = queue.session()
        self.make_env = make_env
        self.seat: Seat = seat or HumanSeat()
        self._write = write
        self.stdin = stdin or StdinLines.shared()
        if not self.seat.supervised:
            self.stdin.told = True        # a human's queue: the watch controls are not offered
        self._envs: dict[str, Env] = {}

    def write(self, text: str) -> None:
        """Every line goes out blinded: a study that hides the model never prints its name."""
        self._write(self.rules.blind(text, self.seat.model_names))

    def run(self, first: str | None = None) -> int:
        """Play the queue from ``first`` (a task ref or id; default: the next task not done);
        the exit code (1 when ``first`` is done and may not be tried again)."""
        for path, error in self.queue.skipped:
            print(f"icplay: skipped {path}: {error}", file=sys.stderr)
        self.write(self.queue.summary())
        ref = first
        try:
            while True:
                entry = self.queue.entry(ref) if ref is not None else self.queue.next_entry()
                if entry is None:
                    self.write(f"{self.queue.annotator}'s queue is done: {self.queue.done} of "
                               f"{len(self.queue.entries)} tasks, {format_duration(self.queue.time_worked)} worked")
                    return 0
                if entry.state == DONE:
                    study = self.queue.study
                    refusal = self.queue.start_again(resolve(entry.ref, str(study.path), study.task_files))
                    if refusal is not None:
                        print(f"icplay: {entry.ref}: {refusal}", file=sys.stderr)
                        return 1
                traj = self._play(entry)
                if traj is None:
                    return 0
                self.queue.refresh()
                ref = self._next(self.queue.entry(entry.ref), traj)
                if ref == "":
                    return 0
        finally:
            for env in self._envs.values():
                env.close()

    # -- one task -------------------------------------------------------------------------
    def _env(self, task: Task) -> Env:
        if task.env not in self._envs:
            self._envs[task.env] = self.make_env(task.env)
        return self._envs[task.env]

    def _play(self, entry: Entry) -> Trajectory | None:
        """One attempt at ``entry``'s task; the trajectory, or None when the human quit."""
        task = resolve(entry.ref, str(self.queue.study.path), self.queue.study.task_files)
        n, total = self.queue.position(entry.ref), len(self.queue.entries)
        self.write(display(f"\n=== task {task.key} ({n} of {total} in {self.queue.annotator}'s queue)"
                           + (f" [{task.hardness}]" if task.hardness else "") + " ==="))
        self.write(display(task.query))
        opening = open_episode(self.session, self._env(task), task, self.seat.policy_info(task))
        tell_opening(opening, self.write)
        episode = opening.episode
        traj = episode.trajectory
        if (traj.attempt or 1) > 1:
            self.write(f"(attempt {traj.attempt}{', after the gold was seen' if traj.after_gold_seen else ''})")
        driver = self.seat.driver(episode, task)
        timer = self._start_clock(driver, traj)
        try:
            outcome = LineLoop(driver, write=self.write, stdin=self.stdin, turn_scores=self.rules.show_turn_scores,
                               breakdown_refusal=self.rules.breakdown_refusal()).run()
        finally:
            if timer is not None:
                timer.cancel()
        if self.rules.timed_out(traj):
            self.write(f"(time is up: {self.rules.time_up_reason()}; {len(traj.turns)} turn(s) saved)")
            return traj
        if outcome == QUIT and traj.status != "submitted":
            self.write(f"(stopped; saved in {self.session.root} — the same command resumes it)")
            return None
        return traj

    def _start_clock(self, driver: Driver, traj: Trajectory) -> threading.Timer | None:
        """The study's time limit: when the worked time reaches it the episode is stopped (saved,
        every turn kept); the saved worked time then says it timed out."""
        left = self.rules.time_left(traj.time_worked)
        if left is None:
            return None
        timer = threading.Timer(left, lambda: driver.stop(self.rules.time_up_reason()))
        timer.daemon = True
        timer.start()
        return timer

    # -- between tasks --------------------------------------------------------------------
    def _next(self, entry: Entry, traj: Trajectory | None) -> str | None:
        """Ask what next: a ref to play again (a retry), None for the queue's next, "" to quit."""
        self.write(self.queue.summary())
        moves = after_help(self.rules.gold_refusal() is None, self.rules.retry_refusal(entry.attempts) is None)
        self.write(moves)
        while True:
            line = self._line("next> ")
            if line is None or line in (":quit", "q"):
                return ""
            if line in ("", ":next", "n"):
                return None
            if line == ":gold":
                self._gold(entry, traj)
            elif line == ":retry":
                refusal = self.rules.retry_refusal(entry.attempts)
                if refusal is None:
                    return entry.ref
                self.write(f"(refused: {refusal})")
            else:
                self.write(f"? {moves}")

    def _gold(self, entry: Entry, traj: Trajectory | None) -> None:
        refusal = self.rules.gold_refusal()
        if refusal is not None:
            self.write(f"(refused: {refusal})")
            return
        latest = traj or entry.latest
        if latest is None:
            return
        task: dict[str, Any] = latest.task
        self.write("gold solution:\n  " + display(str(task.get("gold", ""))).replace("\n", "\n  "))
        if latest.gold_output:
            self.write("gold output:\n  " + display(latest.gold_output.strip()).replace("\n", "\n  "))
        self.session.mark_gold_seen(latest)
        self.write("(the gold reveal is recorded: a later attempt of this task is marked as after it)")

    def _line(self, prompt: str) -> str | None:
        sys.stdout.write(prompt)
        sys.stdout.flush()
        got = self.stdin.peek(timeout=3600.0 * 24)
        while got is None:
            got = self.stdin.peek(timeout=3600.0 * 24)
        if self.stdin.take() is EOF:
            self.write("")
            return None
        assert isinstance(got, str)
        if self.stdin.echo:
            self.write(got)
        return got.strip()
