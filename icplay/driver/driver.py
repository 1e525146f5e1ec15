"""The steppable episode driver: propose, decide, apply, score, finish — one loop for every front end.

``Driver(episode, settings)`` takes an existing ``Episode`` (new, or resumed with its turns
replayed) and one ``DriverSettings`` (``icplay/driver/settings.py``: the policy — None, the
human is the only source of actions —, the protocol, limits, broker, listeners). Each ``step()`` is: wait while
paused (``Broker.checkpoint``); in human mode ask the human (no model call); otherwise
``propose()`` (the policy, cancellable mid-request), ``decide()`` (the broker, or a plain
Gate), ``apply()`` (run / edit / reject / submit / stop / take over / hand back) and, under
the ``intercode`` protocol, ``score()``. ``finish()`` ends and scores the episode;
``run()`` loops until it ends.

Everything that happens is an event (``icplay.driver.events``: one frozen dataclass per
kind) passed to the ``on_event`` callbacks (from the driver's thread): state changes,
streamed text, proposals, waiting requests, command output, turns, scores, retries,
failures, the end. A UI keeps no episode state of its own and dispatches on their types.

Thread-safety: ``run()``/``step()`` belong to one thread (the driver's). ``stop()``,
``interrupt()`` and every ``Broker`` method may be called from any other thread.
"""

from __future__ import annotations

import threading
import time
import logging
from contextlib import nullcontext
from types import MappingProxyType
from typing import Any, Callable, Mapping, NamedTuple

from icplay.driver.broker import AUTO, HUMAN_MODE, Broker, Request, RequestKind
from icplay.driver.calls import PolicyCalls
from icplay.driver.command import CommandGuard
from icplay.driver.events import (Event, Failure, Finished, ModeChanged, Output, RequestClosed, RequestOpened,
                                  Scored, State, StateChanged, TurnRecorded)
from icplay.driver.settings import (AGENT_PROTOCOL, INTERCODE_PROTOCOL, PROTOCOLS, Budget, DriverSettings, Limits,
                                    protocol_name)
from icplay.envs.base import SubmitResult, parse_submit
from icplay.tasks.model import Task
from icplay.languages import intercode_turn
from icplay.store import StoreWriteError
from icplay.threads import Worker
from icplay.episode import (AGENT, AGENT_EDITED, EDIT, HAND_BACK, HUMAN, REJECT, RUN, STOP, SUBMIT, TAKE_OVER,
                            AgentError, Cancelled, Decision, Episode, Gate, Proposal, Trajectory, Turn)

log = logging.getLogger(__name__)


class Driver:
    """Drives one episode step by step; see the module docstring."""

    def __init__(self, episode: Episode, settings: DriverSettings | None = None):
        if settings is not None and not isinstance(settings, DriverSettings):
            raise TypeError(f"Driver(episode, settings) takes a DriverSettings, not {type(settings).__name__} "
                            "(icplay.driver.DriverSettings: policy, protocol, limits, broker, ...)")
        self.settings = settings = settings or DriverSettings()
        self.episode = episode
        self.policy = policy = settings.policy
        self.protocol = settings.protocol
        self.limits = settings.limits
        self.broker, self._gate = _broker_and_gate(settings.broker)
        self.budget = settings.budget
        self.listeners: list[Callable[[Event], None]] = list(settings.on_event)
        self.on_failure = settings.on_failure
        self.save_failure: Exception | None = None     # the StoreWriteError that ended the episode
        # how an action is scored under ``intercode``: InterCode's loop for the task's language,
        # or (the library front ends) RUN_THEN_SUBMIT, every action scored as the state stands
        self.turn_rule = settings.turn_rule or intercode_turn(episode.task.env)
        self.around_action = settings.around_action or nullcontext
        self.max_turns = _turn_cap(self.limits.max_turns, getattr(policy, "max_turns", None))
        # a policy replaying a recording plays it out whole (``_replay_move``, icplay/driver/replay.py)
        self.replaying = bool(getattr(policy, "replays_recording", False))
        if policy is not None:
            episode.trajectory.policy.setdefault("usage", {})
            episode.trajectory.policy.update({"protocol": self.protocol, "max_turns": self.max_turns})
        self.state = State.IDLE
        self.last_score: SubmitResult | None = None
        self._scored_state = False     # last_score describes the current state (nothing ran since)
        self._stop = threading.Event()
        self._stop_reason: str | None = None
        self._stop_status = "stopped"
        self._lock = threading.Lock()
        self._command = CommandGuard(self._lock, lambda: self.episode.env.interrupt())
        self._started = time.monotonic()
        self._calls = (PolicyCalls(policy, self._lock, self.limits, self.budget, self._started, self._emit)
                       if policy is not None else None)
        self._worked_before = episode.trajectory.time_worked or 0.0
        self._ended = False
        if settings.track_time:
            episode.before_save = self._note_time
        self.broker.reopen()          # a broker may serve one episode after another
        self.broker.listeners.append(self._on_broker)

    # -- reading ------------------------------------------------------------------------
    @property
    def trajectory(self) -> Trajectory:
        return self.episode.trajectory

    @property
    def task(self) -> Task:
        return self.episode.task

    @property
    def mode(self) -> str:
        return self.broker.mode

    @property
    def ended(self) -> bool:
        return self._ended

    # -- events -------------------------------------------------------------------------
    def _emit(self, event: Event) -> None:
        for listener in list(self.listeners):
            try:
                listener(event)
            except Exception:   # a view's own bug (any kind): logged, and the episode goes on without it
                log.exception("a listener of the driver's events failed")

    def _set_state(self, state: State) -> None:
        self.state = state
        self._emit(StateChanged(state))

    def _on_broker(self, what: str, payload: object) -> None:
        if what == "mode":
            if payload == HUMAN_MODE:
                self.cancel_call()     # a human turn costs no model call
            self._emit(ModeChanged(str(payload)))
        elif what == "request" and isinstance(payload, Request):
            self._set_state(State.PAUSED if payload.kind == RequestKind.PAUSED else State.WAITING)
            self._emit(RequestOpened(payload))
        elif what == "answered" and isinstance(payload, Request):
            self._emit(RequestClosed(payload))

    def _note_time(self, traj: Trajectory) -> None:
        traj.time_worked = self._worked_before + (time.monotonic() - self._started)

    # -- control from any thread --------------------------------------------------------
    def stop(self, reason: str | None = None, status: str = "stopped") -> None:
        """End the episode unscored (``stopped``, resumable): cancels a model call, interrupts a
        command, withdraws waiting requests. The driver's thread saves it."""
        with self._lock:
            if self._stop_reason is None:
                self._stop_reason = reason
                self._stop_status = status
            self._stop.set()
            running = self._command.running
        self.cancel_call()
        self.broker.withdraw_all()
        if running:
            self.interrupt()

    def leave(self) -> None:
        """The front end goes away mid-episode: stop as ``stop`` does, but save the episode as
        it stands (``running``: the next opening resumes it as if it was never left)."""
        self.stop(status="running")

    def interrupt(self, turn: int | None = None) -> None:
        """Interrupt the running command (the turn is kept, marked interrupted), repeated until
        it has ended (``icplay/driver/command.py``). Without a running command it does nothing,
        unless ``turn`` (the index the human's answered command will have) names a command that
        has not started yet: that one is interrupted as it starts."""
        self._command.interrupt(turn, len(self.trajectory.turns))

    def cancel_call(self) -> None:
        if self._calls is not None:
            self._calls.cancel()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    # -- limits -------------------------------------------------------------------------
    def limit_reached(self) -> str | None:
        """Which episode limit is reached (turns, tokens, cost, time), else None."""
        traj = self.trajectory
        if self.max_turns is not None and traj.turns_taken >= self.max_turns:
            return "turns"
        spent = self.limits.spent(traj.usage, self._started)
        if spent is not None:
            return spent
        if traj.turns and (ends := traj.turns[-1].info.get("ends_episode")):
            return str(ends)       # the policy's own end (``truncated``: no budget left to ask again with)
        return None

    # -- the steps ----------------------------------------------------------------------
    def propose(self) -> Proposal | None:
        """Ask the policy (cancellable, ``icplay/driver/calls.py``); None when the call was
        cancelled. Usage is summed."""
        if self._calls is None:
            raise RuntimeError("this driver has no policy: the human is the only source of actions")
        skip = self.broker.mode == HUMAN_MODE     # taken over just before the call: no call
        self._set_state(State.THINKING)
        return self._calls.propose(self.task, self.trajectory, self._stop, skip)

    def decide(self, proposal: Proposal) -> Decision:
        """The gate's verdict on ``proposal`` in the current mode (may wait for a human)."""
        if self._gate is not None:
            if proposal.info.get("invalid"):
                return Decision(RUN)
            return self._gate.decide(proposal, self.trajectory)
        return self.broker.decide(proposal, self.trajectory)

    def apply(self, proposal: Proposal | None, decision: Decision) -> bool:
        """Carry out ``decision`` (on ``proposal``; None for a human's own move).
        Returns False when the episode has ended."""
        kind = decision.kind
        if kind in (STOP, TAKE_OVER, HAND_BACK, SUBMIT, REJECT):
            return self._apply_control(proposal, decision)
        # RUN or EDIT: find the action that will run
        if proposal is None:
            action = (decision.action or "").strip("\n")
            if not action.strip():
                return True
            return self._run_move(_Move(action, HUMAN), decision.comment)
        if kind != EDIT and proposal.info.get("invalid"):
            reward = 0.0 if self.protocol == "intercode" else None
            self._after_turn(self.episode.record_invalid(proposal, reward))
            return True
        if kind != EDIT and proposal.action is None:
            return self._submit(None)
        return self._run_move(_agent_move(proposal, decision), decision.comment)

    def _apply_control(self, proposal: Proposal | None, decision: Decision) -> bool:
        """The decisions that run no action: stop, take over, hand back, submit, reject."""
        kind = decision.kind
        if kind == STOP:
            self.stop_episode()
            return False
        if kind == TAKE_OVER:
            self.broker.take_over()
        elif kind == HAND_BACK:
            if self.policy is not None:
                self.broker.hand_back()
        elif kind == SUBMIT:
            return self._submit(decision.action)
        elif proposal is not None:   # REJECT
            self._after_turn(self.episode.reject(proposal, decision.comment))
        return True

    def _run_move(self, move: _Move, comment: str | None) -> bool:
        """Run the action a decision chose (a submit ends the episode); under InterCode's
        protocol a turn that scores 1.0 ends it too. False when the episode has ended."""
        if self.replaying:
            return _replay_move(self, move)
        is_submit, arg = parse_submit(move.action)
        if is_submit:          # what will run is a submit (also a human's edit to "submit")
            return self._submit(arg)
        if not move.action.strip() and not (self.settings.run_blank and move.author == AGENT):
            return True
        self.run_action(move.action, move.author, move.proposed, move.thought, comment, dict(move.info))
        if self._stop.is_set():
            return True
        if self.protocol == "intercode":
            result = self.score_turn()
            if result is not None and result.reward >= 1.0:
                self.finish("solved")
                return False
        return True

    def run_action(self, action: str, author: str = HUMAN, proposed: str | None = None,
                   thought: str | None = None, comment: str | None = None,
                   info: dict[str, Any] | None = None) -> Turn | None:
        """Run one action in the env (output streams as ``Output`` events); record and save the turn.
        None when the episode is stopping: a stop that came just before is not outrun by the command."""
        with self._lock:
            if self._stop.is_set():
                return None
            # from here a stop() sees the command and interrupts it
            over, asked = self._command.begin(len(self.trajectory.turns))
        self._set_state(State.RUNNING)
        if asked:
            self.interrupt()
        try:
            with self.around_action():
                turn = self.episode.act(action, author=author, proposed=proposed, thought=thought, comment=comment,
                                        on_output=lambda text: self._emit(Output(text)), info=info)
        finally:
            self._command.end(over)
        self._scored_state = False
        self._after_turn(turn)
        return turn

    def _after_turn(self, turn: Turn) -> None:
        self._emit(TurnRecorded(turn))
        if self.settings.on_turn is not None:
            self.settings.on_turn(self.trajectory)

    def score(self) -> SubmitResult:
        """Score the current state without ending the episode (InterCode's per-turn reward)."""
        self._set_state(State.SCORING)
        result = self.episode.score()
        self._scored(result)
        return result

    def score_turn(self) -> SubmitResult | None:
        """Score the turn just run as InterCode's experiment loop did for the task's language
        (``icplay/languages/turns.py``); None when the loop gave it 0 without a submit."""
        self._set_state(State.SCORING)
        result = self.episode.score_turn(self.turn_rule)
        if result is not None:
            self._scored(result)
        return result

    def _scored(self, result: SubmitResult) -> None:
        self.last_score, self._scored_state = result, True
        self._emit(Scored(result))

    def _submit(self, arg: str | None) -> bool:
        if self.protocol == "intercode" and arg is None:
            self.finish("submit")
        else:
            self._set_state(State.SCORING)
            if self.policy is not None:
                self.trajectory.policy["ended_by"] = "submit"
            self.episode.submit(arg)
            self._end()
        return False

    def finish(self, ended_by: str) -> Trajectory:
        """End the episode and score it as it stands (``ended_by``: submit, solved, turns, tokens, ...)."""
        traj = self.trajectory
        if self.policy is not None:
            traj.policy["ended_by"] = ended_by
        if self.protocol == "intercode" and self.last_score is not None and self._scored_state:
            # the last per-turn score is the submit reward of this very state: no second gold run
            last = self.last_score
            traj.reward, traj.breakdown, traj.gold_output = last.reward, last.breakdown, last.gold_output
            traj.status = "submitted"
            self.episode.save()
        elif (self.protocol == "intercode" and self.policy is not None and traj.turns_taken > 0
              and not any(t.action for t in traj.turns)):
            # every turn was an unparsable reply: nothing ran, InterCode scores that 0
            traj.reward, traj.breakdown = 0.0, {"note": "no action was run"}
            traj.best_reward = 0.0 if traj.best_reward is None else traj.best_reward
            traj.status = "submitted"
            self.episode.save()
        else:
            self._set_state(State.SCORING)
            self.episode.submit()
        self._end()
        return traj

    def stop_episode(self, status: str | None = None, error: str | None = None) -> Trajectory:
        """Save the episode unscored (``stopped``: resumable; ``error``; ``running`` when the
        front end left, ``leave``). By default the status ``stop`` was given."""
        self.episode.stop(status or self._stop_status, error if error is not None else self._stop_reason)
        self._end()
        return self.trajectory

    def _end(self) -> None:
        self._ended = True
        self.broker.withdraw_all()
        if self._on_broker in self.broker.listeners:
            self.broker.listeners.remove(self._on_broker)
        self._set_state(State.DONE)
        self._emit(Finished(self.trajectory))

    # -- one step, and the loop ---------------------------------------------------------
    def step(self) -> bool:
        """One step of the episode; False when it has ended."""
        if self._ended or self._ended_before_step():
            return False
        control = self.broker.checkpoint() if self.policy is not None else None
        if control is not None:
            return self.apply(None, control)
        if self.policy is None or self.broker.mode == HUMAN_MODE:
            self._set_state(State.WAITING)
            return self._human_move(self.broker.ask_action())
        return self._agent_step()

    def _ended_before_step(self) -> bool:
        """End the episode when a stop, the run's budget or the episode's limits say so."""
        if self._stop.is_set():
            self.stop_episode(error=self._stop_reason)
        elif self.settings.should_stop is not None and self.settings.should_stop():
            self.stop_episode(error="the run was stopped")
        elif self.budget is not None and (why := self.budget.exhausted()):
            self.stop_episode(error=why)
        elif self.policy is not None and (reason := self.limit_reached()):
            self.finish(reason)
        else:
            return False
        return True

    def _agent_step(self) -> bool:
        """The policy proposes, the gate decides, the decision is applied. A failed call is
        an error event and the human's choice (try again, take over, submit, stop)."""
        try:
            proposal = self.propose()
        except Cancelled:
            return True
        except AgentError as exc:
            if self.on_failure == "raise":
                raise
            self._emit(Failure(str(exc), fatal=exc.fatal))
            decision = self.broker.ask_after_failure(str(exc))
            return True if decision.kind == RUN else self.apply(None, decision)
        if proposal is None:
            return True
        return self.apply(proposal, self.decide(proposal))

    def _human_move(self, decision: Decision) -> bool:
        """Apply the human's own move. With a human to tell (``on_failure="ask"``) a command or
        a submit that fails is an ``error`` event and the human moves again, as in a shell; a
        save that fails (a full disk, a read-only home) ends the episode instead (``run``)."""
        if self.on_failure == "raise" or decision.kind not in (RUN, SUBMIT):
            return self.apply(None, decision)
        try:
            return self.apply(None, decision)
        except StoreWriteError:
            raise        # nothing more can be saved: the episode ends (run), no further action is taken
        except Exception as exc:   # the env's own failure, of whatever library (Docker, MariaDB, a plug-in's)
            self._emit(Failure(f"{type(exc).__name__}: {exc}", fatal=False, during=decision.kind))
            return True

    def start(self, name: str = "icplay-driver") -> Worker:
        """``run()`` on a new daemon thread, as a UI runs it; returns the thread (wait for its
        end with ``wait``/``running``, which survive a KeyboardInterrupt; ``join`` does not)."""
        thread = Worker(self.run, name=name)
        thread.start()
        return thread

    def run(self) -> Trajectory:
        """Step until the episode ends; on an unexpected error it is saved ``error`` (and raised
        when ``on_failure`` is 'raise')."""
        try:
            while self.step():
                pass
        except StoreWriteError as exc:
            # a full disk or a read-only home: no save can work now, so none is tried; the file
            # keeps its last complete save, and the next start marks it stopped (icplay/store.py)
            self.save_failure = exc
            self.trajectory.status, self.trajectory.error = "stopped", str(exc)
            self._emit(Failure(str(exc), fatal=True))
            self._end()
            if self.on_failure == "raise":
                raise
        except Exception as exc:   # anything else ends the episode: saved ``error`` with its message, said
            message = f"{type(exc).__name__}: {exc}"
            self.stop_episode("error", message)
            self._emit(Failure(message, fatal=True))
            if self.on_failure == "raise":
                raise
        return self.trajectory


__all__ = ["Driver", "DriverSettings", "Event", "Limits", "Budget", "PROTOCOLS", "AGENT_PROTOCOL", "INTERCODE_PROTOCOL",
           "protocol_name", "State"]


def _broker_and_gate(broker: Broker | Gate | None) -> tuple[Broker, Gate | None]:
    """A Broker as it is (or a new auto one); a plain Gate decides proposals beside an auto broker."""
    if isinstance(broker, Broker) or broker is None:
        return broker or Broker(AUTO), None
    return Broker(AUTO), broker


def _turn_cap(limit: int | None, policy_cap: int | None) -> int | None:
    """The episode's turn limit: the smaller of the run's and the policy's own (a replay's)."""
    if not policy_cap:
        return limit
    return policy_cap if limit is None else min(limit, policy_cap)


class _Move(NamedTuple):
    """What a decision will run, and the proposal it came from (for the turn's record)."""
    action: str
    author: str
    proposed: str | None = None
    thought: str | None = None
    info: Mapping[str, Any] = MappingProxyType({})


def _agent_move(proposal: Proposal, decision: Decision) -> _Move:
    """The action a RUN or EDIT of ``proposal`` runs; an edit of a submit or of an invalid
    reply is recorded as the edited action (no proposal of its own)."""
    info = dict(proposal.info)
    if proposal.raw is not None:
        info.setdefault("raw", proposal.raw)
    if decision.kind != EDIT:
        assert proposal.action is not None, "apply() submits a proposal with no action"
        return _Move(proposal.action, AGENT, proposal.action, proposal.thought, info)
    action = decision.action or ""
    author = AGENT if action == proposal.action else AGENT_EDITED
    proposed: str | None = "submit" if proposal.action is None else proposal.action
    if proposal.info.get("invalid"):
        proposed = None
        for key in ("invalid", "retry_message"):
            info.pop(key, None)
    return _Move(action, author, proposed, proposal.thought, info)


def _replay_move(driver: Driver, move: _Move) -> bool:
    """One recorded action played out: it runs when the turn rule's plan says so (else it is
    recorded unrun: Python's ``submit NAME``), then it is scored when the plan says so; neither
    a 1.0 nor a recorded submit ends the episode (the recording goes on after them)."""
    plan = driver.turn_rule.plan(move.action)
    if plan.run:
        if driver.run_action(move.action, move.author, move.proposed, move.thought, None, dict(move.info)) is None:
            return True
    else:
        driver._after_turn(driver.episode.record_unrun(move.action, move.author, info=dict(move.info)))
    if plan.score:
        driver.score_turn()
    return True
