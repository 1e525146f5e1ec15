"""Line mode's answers to the driver's requests, read from lines (see ``icplay.lines``).

After an agent's proposal one line decides (run, ``e`` edit, ``r`` reject, ``t`` take over,
``s`` submit, ``q`` stop); a human's own move is an action (as many lines as the language's
``input_mode`` says) or a command (``submit``, ``:skip``, ``:agent``, ``:label``, ``:quit``).
The ``:`` commands of ``CONTROL_LINES`` act whenever they are reached, also between requests.
"""

from __future__ import annotations

from typing import Callable, Protocol, cast

from icplay.driver import ACTION, FAILED, INVALID, PAUSED, PROPOSAL, SUBMIT_PROPOSAL, Driver, Request
from icplay.envs.base import HAS_CWD, capabilities_of, parse_submit
from icplay.episode import Decision, label_turn
from icplay.languages.spec import LanguageSpec
from icplay.lines.output import Terminal
from icplay.lines.stdin import EOF, StdinLines
from icplay.lines.text import (AGENT_HELP, CONTROL_HELP, FAILED_HELP, HUMAN_HELP, INVALID_HELP, INVALID_LINES,
                               LABEL_COMMAND, LABEL_HELP, NO_AGENT, PAUSED_HELP, WATCH_HUMAN_HELP)

# how an episode's line loop ended
SUBMITTED, SKIPPED, QUIT = "submitted", "skipped", "quit"
# lines that act whenever they are reached (see the package docstring)
MODE_LINES = {":auto": "auto", ":confirm": "confirm", ":human": "human"}
CONTROL_LINES = set(MODE_LINES) | {":pause", ":step", ":go", ":stop"}
# the decisions a single key gives at the decide> prompt
_PLAIN_DECISIONS: dict[str, Callable[[], Decision]] = {"t": Decision.take_over, "s": Decision.submit}


class _HasCwd(Protocol):
    """An env that declares HAS_CWD: its shell's working directory, for the prompt."""
    cwd: str | None


class _Answered(Exception):
    """The request was answered while its line was awaited (a mode switch, a stop)."""


def action_complete(lines: list[str], mode: str) -> bool:
    """Is the action read so far whole? ("line", "statement" up to ';', or Python's "block")."""
    if mode == "statement":
        return lines[-1].strip().endswith(";")
    if mode == "block":
        opened = lines[0].rstrip().endswith(":") or lines[0].lstrip().startswith("@")
        return not opened or (len(lines) > 1 and not lines[-1].strip())
    return True


class Answers:
    """Answers one driver's requests from lines (``read_line``, or the shared ``stdin``) and
    carries out the ``:`` commands; ``outcome`` says how the human ended the episode."""

    def __init__(self, driver: Driver, out: Terminal, read_line: Callable[[str], str] | None,
                 stdin: StdinLines | None, spec: LanguageSpec | None):
        self.driver = driver
        self.out = out
        self.read_line = read_line
        self.stdin = stdin
        self.spec = spec
        self.input_mode = spec.input_mode if spec is not None else "line"
        self.outcome: str | None = None

    def answer(self, request: Request) -> None:
        """Read lines until ``request`` is answered (or answered meanwhile by another thread)."""
        while request.open:
            try:
                decision = self._read_decision(request)
            except _Answered:
                return
            except (EOFError, KeyboardInterrupt) as exc:     # at the prompt: quit
                if isinstance(exc, KeyboardInterrupt):
                    self.shutdown(exc)
                self.outcome = QUIT
                decision = Decision.stop()
                self.out.say("")
            if decision is None:
                continue
            try:
                self.driver.broker.answer(request.id, decision)
            except ValueError as exc:     # not a decision this request takes: said, and asked again
                self.out.say(str(exc))
                continue
            return

    def shutdown(self, exc: KeyboardInterrupt) -> None:
        """A shutdown signal (SIGTERM, SIGHUP: icplay.cli raises KeyboardInterrupt carrying its
        name) ends the episode with the signal on record, then unwinds; a bare Ctrl+C does not."""
        if exc.args:
            self.driver.stop(f"icplay was stopped ({exc.args[0]})")
            raise exc

    # -- lines that act at any moment ---------------------------------------------------
    def control_lines(self) -> None:
        """Between events: take the ``:`` commands at the head of stdin's lines (others wait
        for the question they answer)."""
        if self.stdin is None:
            return
        while True:
            line = self.stdin.peek()
            if not isinstance(line, str) or line.strip() not in CONTROL_LINES:
                return
            self.stdin.take()
            if self.stdin.echo:
                self.out.say(f"> {line.strip()}")
            self.control(line.strip())

    def control(self, text: str) -> bool:
        """Carry out a ``:`` command that acts at any moment; False when ``text`` is not one."""
        broker = self.driver.broker
        if text in MODE_LINES:
            self._switch_mode(MODE_LINES[text])
        elif text == ":pause":
            broker.pause_after_step()
            self.out.say("(pausing before the next step: :go goes on, :step takes one step)")
        elif text == ":step":
            broker.step_one()
            self.out.say("(one step, then paused)")
        elif text == ":go":
            broker.resume()
            self.out.say("(going on)")
        elif text == ":stop":
            self.outcome = QUIT
            self.driver.stop("stopped by the human")
        else:
            return False
        return True

    def _switch_mode(self, mode: str) -> None:
        broker = self.driver.broker
        if self.driver.policy is None and mode != "human":
            self.out.say(NO_AGENT)
        elif broker.mode == mode:
            self.out.say(f"(already in {mode} mode)")
        else:
            broker.set_mode(mode)
            self.out.say(f"(mode: {mode})")

    # -- reading one line -----------------------------------------------------------------
    def _read(self, prompt: str, request: Request) -> str:
        """One line for ``request`` (EOFError at the end of stdin). ``:`` commands that act at
        any moment are carried out on the way; they raise ``_Answered`` when the request no
        longer waits."""
        if self.stdin is None:
            assert self.read_line is not None, "a human's loop reads with read_line"
            while True:
                line = self.read_line(prompt)
                if line.strip() in CONTROL_LINES and self.control(line.strip()):
                    if not request.open:
                        raise _Answered()
                    continue
                return line
        return self._read_stdin(self.stdin, prompt, request)

    def _read_stdin(self, stdin: StdinLines, prompt: str, request: Request) -> str:
        """``_read`` from the shared stdin reader: it gives up when the request is answered
        meanwhile (a stop from another thread) instead of blocking in a read."""
        self.out.raw(prompt)
        while True:
            got = stdin.peek(timeout=0.1)
            if got is None:
                if not request.open:          # answered meanwhile (a stop)
                    self.out.raw("\n")
                    raise _Answered()
                continue
            if stdin.take() is EOF:
                raise EOFError()
            assert isinstance(got, str)
            if stdin.echo:
                self.out.raw(got + "\n")
            else:
                self.out.at_line_start = True
            if got.strip() in CONTROL_LINES and self.control(got.strip()):
                if not request.open:
                    raise _Answered()
                self.out.raw(prompt)
                continue
            return got

    # -- a decision on a proposal, a failure or a pause -----------------------------------
    def _read_decision(self, request: Request) -> Decision | None:
        if request.kind == ACTION:
            return self._read_human(request)
        if request.kind in (PROPOSAL, SUBMIT_PROPOSAL):
            self.out.help_once("agent", AGENT_HELP)
        elif request.kind == INVALID:
            why = (request.proposal.info.get("invalid_reason") if request.proposal is not None else None)
            if why in INVALID_LINES:
                self.out.say(INVALID_LINES[why])
            else:
                self.out.say(f"the model's reply held no action:\n{(request.message or '').strip()}")
            self.out.help_once("invalid", INVALID_HELP)
        elif request.kind == FAILED:
            self.out.help_once("failed", FAILED_HELP)
        elif request.kind == PAUSED:
            self.out.say(PAUSED_HELP)
        line = self._read("paused> " if request.kind == PAUSED else "decide> ", request)
        return self._parse_decision(line, request)

    def _parse_decision(self, line: str, request: Request) -> Decision | None:
        text = line.strip()
        head, _, rest = text.partition(" ")
        rest = rest.strip()
        if request.kind == PAUSED and text in ("", "n"):
            self._go_on(step_only=text == "n")
            return None
        if text == "":
            return Decision.run()
        if head == "e":
            if not rest:
                self.out.say("e ACTION: say what to run instead")
                return None
            return Decision.edit(rest)
        if head == "r" and request.kind in (PROPOSAL, SUBMIT_PROPOSAL):
            return Decision.reject(rest or None)
        if text in _PLAIN_DECISIONS:
            return _PLAIN_DECISIONS[text]()
        if text in ("q", ":quit"):     # :quit ends here as at the human's prompt
            self.outcome = QUIT
            return Decision.stop()
        if head == LABEL_COMMAND:
            self._label_last_turn(rest)
            return None
        if text in ("?", "h", ":help"):
            self.out.say(PAUSED_HELP if request.kind == PAUSED else AGENT_HELP)
            self.out.say(CONTROL_HELP)
            return None
        self.out.say(f"? {PAUSED_HELP if request.kind == PAUSED else AGENT_HELP}")
        return None

    def _label_last_turn(self, words: str) -> None:
        """``:label good|bad|neutral [NOTE]``: the last turn labelled, signed and saved (asked
        only while the driver waits for this prompt, so nothing else writes the trajectory)."""
        label, _, note = words.strip().partition(" ")
        episode = self.driver.episode
        turns = episode.trajectory.turns
        if not turns:
            self.out.say("no turn to label yet")
            return
        try:
            label_turn(turns[-1], label, note, episode.annotator or episode.trajectory.annotator)
        except ValueError:     # not one of the labels: the command's form, said
            self.out.say(LABEL_HELP)
            return
        episode.save()
        self.out.say(f"(turn {len(turns)} labelled {label}{': ' + note.strip() if note.strip() else ''})")

    def _go_on(self, step_only: bool) -> None:
        """At the pause: go on (enter) or take one step (n); either answers the request."""
        if step_only:
            self.driver.broker.step_one()
        else:
            self.driver.broker.resume()

    # -- a human's own move -----------------------------------------------------------------
    def _prompt(self) -> str:
        if self.spec is not None and self.spec.prompt is not None:
            return self.spec.prompt
        env = self.driver.episode.env
        return f"icplay:{(cast(_HasCwd, env).cwd if HAS_CWD in capabilities_of(env) else None) or '?'}$ "

    def _human_help(self, agent: bool) -> str:
        text = WATCH_HUMAN_HELP if agent else HUMAN_HELP
        extra = self.spec.input_help if self.spec is not None else ""
        return f"{text}\n{extra}" if extra else text

    def _read_human(self, request: Request) -> Decision | None:
        """One human move: an action (as many lines as the language's input mode takes) or a command."""
        agent = self.driver.policy is not None
        if agent:
            self.out.help_once("watch-human", self._human_help(agent))
        lines: list[str] = []
        while True:
            try:
                line = self._read(self._prompt() if not lines else "...> ", request)
            except EOFError:
                if not lines:
                    raise
                break
            stripped = line.strip()
            if not lines:
                handled, decision = self._first_line(stripped, agent)
                if handled:
                    return decision
                if not stripped:
                    continue
            lines.append(line)
            if action_complete(lines, self.input_mode):
                break
        return Decision.run("\n".join(lines))

    def _first_line(self, stripped: str, agent: bool) -> tuple[bool, Decision | None]:
        """A command on the action's first line (:help, :quit, :skip, :agent, submit):
        (True, its decision, None for none); (False, None) for the start of an action."""
        if stripped == ":help":
            self.out.say(self._human_help(agent))
            if agent:
                self.out.say(CONTROL_HELP)
            return True, None
        if stripped.partition(" ")[0] == LABEL_COMMAND:
            self._label_last_turn(stripped.partition(" ")[2])
            return True, None
        if stripped in (":quit", ":skip"):
            self.outcome = QUIT if stripped == ":quit" else SKIPPED
            return True, Decision.stop()
        if stripped == ":agent":
            if not agent:
                self.out.say(NO_AGENT)
                return True, None
            return True, Decision.hand_back()
        is_submit, arg = parse_submit(stripped)
        return (True, Decision.submit(arg)) if is_submit else (False, None)


__all__ = ["Answers", "action_complete", "CONTROL_LINES", "MODE_LINES", "SUBMITTED", "SKIPPED", "QUIT"]
