"""The line mode of ``icplay play --plain`` and ``icplay watch --plain``: one loop over the driver.

The driver runs on its own thread; this loop (the main thread, so Ctrl+C lands here)
prints what happens and answers the broker's requests with lines read from stdin.

After an agent's proposal (thought and action printed) one line decides: empty — run it;
``e ACTION`` — run ACTION instead; ``r COMMENT`` — reject it with COMMENT; ``t`` — take
over; ``s`` — submit; ``q`` — stop. When the human acts (``play --plain``, or after ``t``)
each line is an action (SQL: up to a line ending with ``;``); ``submit`` scores the task,
``:agent`` hands back to the agent, ``:skip`` leaves the task for later, ``:quit`` stops.

Under ``watch`` stdin is read all the time (on a thread), so these work at any moment —
also while the model thinks, a command runs, or a decision waits: ``:auto``, ``:confirm``,
``:human`` switch mode (a waiting proposal runs, waits or is dropped accordingly);
``:pause`` stops before the next step, ``:step`` lets exactly one more step through,
``:go`` goes on; ``:stop`` ends the episode (saved, resumable). Lines are taken in order:
a decision waits for the next question, a ``:`` command acts when it is reached — so a
script reads like a session.

Ctrl+C interrupts a running command (the turn is kept), takes over from a model that is
thinking, and quits only at the prompt. Output, and every line quoting what others wrote,
is shown with control characters and bidirectional controls made visible (an action's
escape sequences cannot repaint the terminal, a right-to-left override cannot reorder a
name); the trajectory keeps the raw text.
"""

from __future__ import annotations

import os
import queue
import re
import sys
import threading
from typing import Any, Callable, Protocol, Sequence, cast

from icplay.driver.broker import ACTION, FAILED, INVALID, PAUSED, PROPOSAL, SUBMIT_PROPOSAL, Request
from icplay.driver.driver import Driver
from icplay.driver.events import (Delta, Event, Failure, Finished, Output, Proposed, Reasoning, RequestOpened,
                                  Retrying, Scored, State, TurnRecorded)
from icplay.envs.base import (HAS_CWD, STREAMS_OUTPUT, Env, SubmitResult, capabilities_of, observation_parts,
                              parse_submit, render_notes, shown_observation, strict_doubts)
from icplay.episode import STEP_LABELS, Decision, Episode, Proposal, Trajectory, Turn, label_turn
from icplay.languages import find
from icplay.languages.submitting import submit_preview
from icplay.session import IN_PROGRESS, NEW, Session
from icplay.tasks.model import Task
from icplay.threads import Worker


class _HasCwd(Protocol):
    """An env that declares HAS_CWD: its shell's working directory, for the prompt."""
    cwd: str | None

HUMAN_HELP = """commands: submit (score and go on), :skip (next task without scoring), :label, :quit, :help"""
LABEL_COMMAND = ":label"
LABEL_HELP = f":label {'|'.join(STEP_LABELS)} [NOTE] labels the last turn (process supervision: icplay export steps)"
AGENT_HELP = ("decide: [enter] run it · e ACTION run ACTION instead · r COMMENT reject · t take over · "
              "s submit · q (or :quit) stop · :label good|bad|neutral [NOTE] the last turn · ? help")
CONTROL_HELP = ("any time: :auto :confirm :human switch mode · :pause after this step · :step one step · "
                ":go go on · :stop")
PAUSED_HELP = "paused: [enter] go on · n one step · t take over · s submit · q stop"
# lines that act whenever they are reached (see the module docstring)
MODE_LINES = {":auto": "auto", ":confirm": "confirm", ":human": "human"}
CONTROL_LINES = set(MODE_LINES) | {":pause", ":step", ":go", ":stop"}
WATCH_HUMAN_HELP = HUMAN_HELP.replace(":quit", ":agent (hand back to the agent), :quit")

# how an episode's line loop ended
SUBMITTED, SKIPPED, QUIT = "submitted", "skipped", "quit"


# Characters a display shows as escapes, never as themselves: C0 and C1 controls (but
# newline and tab) and DEL, which move the cursor or start terminal sequences; and the
# bidirectional controls (embeddings, overrides, isolates, marks), which reorder what
# follows them on screen, so that a command or a file name would read otherwise than it is.
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
# Characters that take no room on screen (zero-width space, joiners, word joiner, BOM, soft
# hyphen, Mongolian vowel separator), the line and paragraph separators, and the tag
# characters (invisible ASCII lookalikes): ``fl\u200bag`` would read as ``flag``.
INVISIBLE = "\u00ad\u180e\u200b-\u200d\u2028\u2029\u2060-\u2064\ufeff\U000e0000-\U000e007f"
_UNSAFE = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{BIDI_CONTROLS}{INVISIBLE}]")
_UNSAFE_BUT_ESCAPE = re.compile(f"[\\x00-\\x08\\x0b-\\x1a\\x1c-\\x1f\\x7f-\\x9f{BIDI_CONTROLS}{INVISIBLE}]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 32:
        return "^" + chr(code + 64)
    if code == 127:
        return "^?"
    if code > 0xffff:
        return f"\\U{code:08x}"
    return f"\\x{code:02x}" if code <= 0xff else f"\\u{code:04x}"


def display(text: str, keep_escape: bool = False) -> str:
    """``text`` safe to show: control characters other than newline and tab as ^X / \\xNN,
    bidirectional controls and invisible characters as \\uNNNN (U+202E reads ``\\u202e``).
    ``keep_escape``: ESC is left for a view that parses its colour sequences itself (and drops
    the rest)."""
    text = text.replace("\r\n", "\n")
    return (_UNSAFE_BUT_ESCAPE if keep_escape else _UNSAFE).sub(_visible, text)


def format_table(columns: list[str], rows: Sequence[Sequence[Any]], limit: int = 50) -> str:
    """A plain text table of the first ``limit`` rows."""
    shown = [tuple("NULL" if v is None else str(v) for v in row) for row in rows[:limit]]
    widths = [len(c) for c in columns]
    for row in shown:
        widths = [max(w, len(v)) for w, v in zip(widths, row)]

    def line(values: Sequence[str]) -> str:
        return " | ".join(v.ljust(w) for v, w in zip(values, widths))

    out = [line(columns), "-+-".join("-" * w for w in widths)] + [line(r) for r in shown]
    if len(rows) > limit:
        out.append(f"... {len(rows) - limit} more rows")
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out)


def describe_observation(turn: Turn, env_name: str) -> str:
    info = turn.info
    if info.get("columns") is not None and info.get("rows") is not None:
        text = format_table(info["columns"], info["rows"])
        notes = observation_parts(turn.observation, info)[1]
        if info.get("truncated") and not notes:
            notes = ["result truncated at the row limit"]
        return text + ("\n" + render_notes(notes) if notes else "")
    text = shown_observation(turn.observation, info).rstrip("\n")
    if turn.exit_code not in (0, None):
        text += f"\n[exit {turn.exit_code}]"
    return text


def describe_reward(result: SubmitResult, env_name: str | None = None) -> str:
    lines = [f"reward: {result.reward:.2f}" + ("  (solved)" if result.solved else "")]
    if isinstance(result.strict, dict) and result.solved:
        lines[0] += "  strictly solved" if result.strict.get("solved") else "  NOT strictly solved"
        lines += [f"  {doubt}" for doubt in strict_doubts(result)]
    return "\n".join(lines + _breakdown_lines(result.breakdown or {}, env_name))


def _breakdown_lines(b: dict[str, Any], env_name: str | None) -> list[str]:
    """The reward's parts as its language explains them (Bash's and SQL's here)."""
    spec = find(env_name) if env_name else None
    if spec is not None and spec.name not in ("bash", "sql"):
        return [f"  {label}: " + value.replace("\n", "\n    ") for label, value in spec.explain(b)]
    if "p1" in b:
        return _bash_breakdown(b)
    if "iou" in b:
        return ["  " + "   ".join(f"{k} {v}" for k, v in b.items() if k != "reward" and not isinstance(v, (list, dict)))]
    return []


def _invalid_note(turn: Turn) -> str:
    """Why a reply ran nothing, as the transcript says it."""
    why = turn.info.get("invalid_reason")
    if why == "truncated":
        return "(the reply was cut at the token limit; what it held was not run)"
    if why == "reasoning_only":
        return "(the reply held only reasoning, no answer)"
    return display(f"(the reply held no action: {str(turn.info.get('raw') or '').strip()[:300]})")


# the decisions a single key gives at the decide> prompt
_PLAIN_DECISIONS: dict[str, Callable[[], Decision]] = {"t": Decision.take_over, "s": Decision.submit}


def _bash_breakdown(b: dict[str, Any]) -> list[str]:
    """The Bash reward's three parts and the changes that cost it."""
    lines = [f"  p1 file system {b['p1']:.2f}   p2 contents {b['p2']:.2f}   p3 answer {b['p3']:.2f}"]
    for key, label in (("missing", "changes you did not make"), ("extra", "changes the gold did not make"),
                       ("different_content", "files with different content")):
        if b.get(key):
            lines.append(f"  {label}: " + ", ".join(" ".join(x) if isinstance(x, (list, tuple)) else str(x)
                                                    for x in b[key]))
    return lines


def _stdout_raw(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


EOF = object()     # stdin has ended


INVALID_LINES = {"truncated": "the model's reply was cut at the token limit; what it held was not run",
                 "reasoning_only": "the model's reply held only reasoning, no answer"}
TRUNCATED_NOTE = "(truncated: the reply was cut at the token limit, finish_reason length; raise --max-tokens)"


class _Answered(Exception):
    """The request was answered while its line was awaited (a mode switch, a stop)."""


class StdinLines:
    """stdin's lines, read on a daemon thread so that a line typed while the agent works is
    seen at once. Raw reads of the file descriptor: a thread blocked in a read holds no
    Python lock (a buffered ``sys.stdin`` would make the interpreter's exit fail). One per
    process (``shared()``): a second reader would take the next task's lines."""

    _shared: "StdinLines | None" = None
    told = False    # the control keys were shown (once per process)

    def __init__(self, fd: int = 0):
        self.fd = fd
        self.lines: "queue.Queue[object]" = queue.Queue()
        self._head: list[object] = []
        self.echo = not os.isatty(fd)   # a script's transcript shows what was read
        threading.Thread(target=self._read, name="icplay-stdin", daemon=True).start()

    @classmethod
    def shared(cls) -> "StdinLines":
        if cls._shared is None:
            cls._shared = cls()
        return cls._shared

    def _read(self) -> None:
        pending = b""
        while True:
            try:
                chunk = os.read(self.fd, 4096)
            except InterruptedError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                if pending:
                    self.lines.put(pending.decode(errors="replace"))
                self.lines.put(EOF)
                return
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                self.lines.put(line.rstrip(b"\r").decode(errors="replace"))

    def peek(self, timeout: float = 0.0) -> object | None:
        """The next line (or EOF) without taking it; None when none came within ``timeout``."""
        if not self._head:
            try:
                self._head.append(self.lines.get(timeout=timeout) if timeout > 0 else self.lines.get_nowait())
            except queue.Empty:
                return None
        return self._head[0]

    def take(self) -> object:
        return self._head.pop(0)


class LineLoop:
    """Prints one episode's events and answers its requests from lines; see the module docstring."""

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
        self.stdin = stdin
        if stdin is not None and not stdin.told:
            stdin.told = True
            write(CONTROL_HELP)
        self.live = sys.stdout.isatty() if live is None else live   # stream the model's reply as it comes
        self._streaming: str | bool = False      # the label of what streams now ("agent", "thinking")
        self.read_line = read_line
        self.write = write
        self._write_raw = write_raw or _stdout_raw
        self.env_name = driver.episode.env.name
        self.spec = find(self.env_name)
        self.input_mode = self.spec.input_mode if self.spec is not None else "line"
        self.events: "queue.Queue[Event]" = queue.Queue()
        self.outcome: str | None = None
        self._streamed = False          # this turn's output has been printed as it came
        self._at_line_start = True
        self._helped: set[str] = set()
        driver.listeners.append(self.events.put)

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
        traj = self.driver.trajectory
        if self.outcome is None:
            self.outcome = SUBMITTED if traj.status == "submitted" else QUIT
        return self.outcome

    def _show_events(self, thread: Worker) -> None:
        """The driver's events as they come (and the ``:`` lines between them), until the
        episode ends or the driver's thread has ended with every event shown."""
        while True:
            try:
                self._control_lines()
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

    def _shutdown(self, exc: KeyboardInterrupt) -> None:
        """A shutdown signal (SIGTERM, SIGHUP: icplay.cli raises KeyboardInterrupt carrying its
        name) ends the episode with the signal on record, then unwinds; a bare Ctrl+C does not."""
        if exc.args:
            self.driver.stop(f"icplay was stopped ({exc.args[0]})")
            raise exc

    def _ctrl_c(self, exc: KeyboardInterrupt) -> None:
        self._shutdown(exc)
        state = self.driver.state
        if state in (State.WAITING, State.PAUSED) and self.driver.broker.pending():   # at a prompt: quit
            self.outcome = QUIT
            self._say("")
            self.driver.stop()
            return
        if state == State.RUNNING:
            self.driver.interrupt()
        elif state == State.THINKING:
            self._say("(Ctrl+C: the model's call is cancelled; you have the keyboard — :agent hands back)")
            self.driver.broker.take_over()

    def _say(self, text: str) -> None:
        """One line of icplay's, whatever it quotes (a model's, a server's, a file's words) made
        safe to print."""
        if not self._at_line_start:
            self.write("")
            self._at_line_start = True
        self.write(display(text))

    # -- lines that act at any moment ---------------------------------------------------
    def _control_lines(self) -> None:
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
                self._say(f"> {line.strip()}")
            self._control(line.strip())

    def _control(self, text: str) -> bool:
        """Carry out a ``:`` command that acts at any moment; False when ``text`` is not one."""
        broker = self.driver.broker
        agent = self.driver.policy is not None
        if text in MODE_LINES:
            mode = MODE_LINES[text]
            if not agent and mode != "human":
                self._say("there is no agent here (icplay watch lets one work)")
            elif broker.mode == mode:
                self._say(f"(already in {mode} mode)")
            else:
                broker.set_mode(mode)
                self._say(f"(mode: {mode})")
        elif text == ":pause":
            broker.pause_after_step()
            self._say("(pausing before the next step: :go goes on, :step takes one step)")
        elif text == ":step":
            broker.step_one()
            self._say("(one step, then paused)")
        elif text == ":go":
            broker.resume()
            self._say("(going on)")
        elif text == ":stop":
            self.outcome = QUIT
            self.driver.stop("stopped by the human")
        else:
            return False
        return True

    # -- events -----------------------------------------------------------------------
    def _handle(self, event: Event) -> bool:
        """Show one event; True when the episode has ended."""
        if isinstance(event, (Delta, Reasoning)):
            self._stream(event)
            return False
        streamed, self._streaming = self._streaming, False
        if streamed and not self._at_line_start:
            self.write_raw("\n")
        match event:
            case Proposed(proposal=proposal):
                self._show_proposal(proposal, bool(streamed))
            case Output(text=text) if STREAMS_OUTPUT in capabilities_of(self.driver.episode.env):
                self._show_output(text)
            case TurnRecorded(turn=turn):
                self._on_turn(turn)
            case Scored(result=result) if self.turn_scores:
                self._say(f"reward: {result.reward:.2f}")
            case Retrying(message=message, delay=delay):
                self._say(f"(the model server: {message}; retrying in {delay:.0f} s)")
            case Failure(message=message):
                self._say(display(f"error: {message}"))
            case RequestOpened(request=request):
                self._answer(request)
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
                self.write_raw(("" if self._at_line_start else "\n") + f"{label}: ")
            self.write_raw(display(event.text))

    def _show_output(self, text: str) -> None:
        shown = display(text)
        if shown:
            self._streamed = True
            self.write_raw(shown)

    def _show_proposal(self, p: Proposal, streamed: bool) -> None:
        reasoning = str(p.info.get("reasoning") or "").strip()
        if reasoning and not streamed:
            shown = reasoning if len(reasoning) <= 600 else reasoning[:300] + " […] " + reasoning[-200:]
            self._say(display(f"thinking: {shown}"))
        if p.info.get("reply_truncated"):
            self._say(TRUNCATED_NOTE)
        if p.info.get("invalid"):
            return
        if p.thought and not streamed:
            self._say(display(f"agent thinks: {p.thought.strip()}"))
        self._show_proposed_action(p)

    def _show_proposed_action(self, p: Proposal) -> None:
        """The action (or tool call) proposed, and for a submit what it will score."""
        call = p.info.get("tool_call")
        verb = f"agent calls {call.get('name')}" if call else "agent proposes"
        if p.action is None:
            self._say(f"{verb}: submit" if not call else verb)
        else:
            action = display(p.action.strip("\n"))
            self._say(f"{verb}: " + (action if "\n" not in action else "\n  " + action.replace("\n", "\n  ")))
        is_submit, arg = parse_submit(p.action or "submit")
        if is_submit:              # what it scores: maybe the human's last result (InterCode's rule)
            for line in submit_preview(self.env_name, self.driver.trajectory.turns, arg, "agent"):
                self._say(display(line))

    def _show_end(self, traj: Trajectory) -> None:
        ended_by = traj.policy.get("ended_by")
        if ended_by in ("turns", "tokens", "cost", "time"):
            self._say(f"(the episode's {ended_by} limit is reached: scored as it stands)")
        if traj.status == "submitted" and traj.reward is not None and self.breakdown_refusal is not None:
            self._say(describe_reward(SubmitResult(traj.reward), self.env_name) + f"\n({self.breakdown_refusal})")
        elif traj.status == "submitted" and traj.reward is not None:
            self._say(describe_reward(SubmitResult(traj.reward, traj.breakdown or {}, traj.gold_output or "",
                                                   strict=traj.strict), self.env_name))
        elif traj.status == "error":
            self._say(display(f"the episode failed: {traj.error}"))

    def write_raw(self, text: str) -> None:
        """Output as it streams (no newline added)."""
        self._write_raw(text)
        self._at_line_start = text.endswith("\n")

    def _on_turn(self, turn: Turn) -> None:
        kind = turn.kind
        if kind == "rejected":
            self._say(display(f"(rejected{': ' + turn.comment if turn.comment else ''})"))
        elif kind == "invalid" and turn.info.get("actions") == "tools":
            self._say(display(f"({turn.observation.removeprefix('[icplay] ').strip()[:300]})"))
        elif kind == "invalid":
            self._say(_invalid_note(turn))
        else:
            self._show_ran(turn)
        self._streamed = False

    def _show_ran(self, turn: Turn) -> None:
        """A turn that ran: what its streamed output has not shown yet (the notes, a failing
        exit code), or its whole observation when nothing streamed."""
        if self._streamed:
            if not self._at_line_start:
                self.write("")
                self._at_line_start = True
            notes = observation_parts(turn.observation, turn.info)[1]
            if notes:
                self.write(display(render_notes(notes)))
            if turn.exit_code not in (0, None):
                self.write(f"[exit {turn.exit_code}]")
        else:
            text = describe_observation(turn, self.env_name)
            if text:
                self._say(display(text))
        if turn.info.get("interrupted"):
            self._say("[interrupted]")

    # -- requests ---------------------------------------------------------------------
    def _help_once(self, key: str, text: str) -> None:
        if key not in self._helped:
            self._helped.add(key)
            self._say(text)

    def _answer(self, request: Request) -> None:
        broker = self.driver.broker
        while request.open:
            try:
                decision = self._read_decision(request)
            except _Answered:
                return
            except (EOFError, KeyboardInterrupt) as exc:     # at the prompt: quit
                if isinstance(exc, KeyboardInterrupt):
                    self._shutdown(exc)
                self.outcome = QUIT
                decision = Decision.stop()
                self._say("")
            if decision is None:
                continue
            try:
                if broker.answer(request.id, decision):
                    return
            except ValueError as exc:
                self._say(str(exc))
                continue
            return

    def _read(self, prompt: str, request: Request) -> str:
        """One line for ``request`` (EOFError at the end of stdin). ``:`` commands that act at
        any moment are carried out on the way; None-like "" is never returned for them:
        they raise ``_Answered`` when the request no longer waits."""
        if self.stdin is None:
            assert self.read_line is not None, "a human's loop reads with read_line"
            while True:
                line = self.read_line(prompt)
                if line.strip() in CONTROL_LINES and self._control(line.strip()):
                    if not request.open:
                        raise _Answered()
                    continue
                return line
        return self._read_stdin(self.stdin, prompt, request)

    def _read_stdin(self, stdin: StdinLines, prompt: str, request: Request) -> str:
        """``_read`` from the shared stdin reader: it gives up when the request is answered
        meanwhile (a stop from another thread) instead of blocking in a read."""
        self.write_raw(prompt)
        while True:
            got = stdin.peek(timeout=0.1)
            if got is None:
                if not request.open:          # answered meanwhile (a stop)
                    self.write_raw("\n")
                    raise _Answered()
                continue
            stdin.take()
            if got is EOF:
                stdin._head.insert(0, EOF)    # stays: every later question ends too
                raise EOFError()
            assert isinstance(got, str)
            line = got
            if stdin.echo:
                self.write_raw(line + "\n")
            else:
                self._at_line_start = True
            if line.strip() in CONTROL_LINES and self._control(line.strip()):
                if not request.open:
                    raise _Answered()
                self.write_raw(prompt)
                continue
            return line

    def _read_decision(self, request: Request) -> Decision | None:
        if request.kind == ACTION:
            return self._read_human(request)
        if request.kind in (PROPOSAL, SUBMIT_PROPOSAL):
            self._help_once("agent", AGENT_HELP)
        elif request.kind == INVALID:
            why = (request.proposal.info.get("invalid_reason") if request.proposal is not None else None)
            if why in INVALID_LINES:
                self._say(INVALID_LINES[why])
            else:
                self._say(display(f"the model's reply held no action:\n{(request.message or '').strip()}"))
            self._help_once("invalid", "decide: [enter] ask again · e ACTION run ACTION · t take over · "
                                       "s submit · q stop")
        elif request.kind == FAILED:
            self._help_once("failed", "decide: [enter] try again · t take over · s submit · q stop")
        elif request.kind == PAUSED:
            self._say(PAUSED_HELP)
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
                self._say("e ACTION: say what to run instead")
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
            self._say(PAUSED_HELP if request.kind == PAUSED else AGENT_HELP)
            self._say(CONTROL_HELP)
            return None
        self._say(f"? {PAUSED_HELP if request.kind == PAUSED else AGENT_HELP}")
        return None

    def _label_last_turn(self, words: str) -> None:
        """``:label good|bad|neutral [NOTE]``: the last turn labelled, signed and saved (asked
        only while the driver waits for this prompt, so nothing else writes the trajectory)."""
        label, _, note = words.strip().partition(" ")
        episode = self.driver.episode
        turns = episode.trajectory.turns
        if not turns:
            self._say("no turn to label yet")
            return
        try:
            label_turn(turns[-1], label, note, episode.annotator or episode.trajectory.annotator)
        except ValueError:
            self._say(LABEL_HELP)
            return
        episode.save()
        self._say(f"(turn {len(turns)} labelled {label}{': ' + note.strip() if note.strip() else ''})")

    def _go_on(self, step_only: bool) -> None:
        """At the pause: go on (enter) or take one step (n); either answers the request."""
        if step_only:
            self.driver.broker.step_one()
        else:
            self.driver.broker.resume()

    def _prompt(self) -> str:
        if self.spec is not None and self.spec.prompt is not None:
            return self.spec.prompt
        env = self.driver.episode.env
        return f"icplay:{(cast(_HasCwd, env).cwd if HAS_CWD in capabilities_of(env) else None) or '?'}$ "

    def _human_help(self, agent: bool) -> str:
        text = WATCH_HUMAN_HELP if agent else HUMAN_HELP
        extra = self.spec.input_help if self.spec is not None else ""
        return f"{text}\n{extra}" if extra else text

    def _action_complete(self, lines: list[str]) -> bool:
        return action_complete(lines, self.input_mode)

    def _read_human(self, request: Request) -> Decision | None:
        """One human move: an action (SQL: lines up to one ending with ';') or a command."""
        agent = self.driver.policy is not None
        if agent:
            self._help_once("watch-human", self._human_help(agent))
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
            if self._action_complete(lines):
                break
        return Decision.run("\n".join(lines))

    def _first_line(self, stripped: str, agent: bool) -> tuple[bool, Decision | None]:
        """A command on the action's first line (:help, :quit, :skip, :agent, submit):
        (True, its decision, None for none); (False, None) for the start of an action."""
        if stripped == ":help":
            self._say(self._human_help(agent))
            if agent:
                self._say(CONTROL_HELP)
            return True, None
        if stripped.partition(" ")[0] == LABEL_COMMAND:
            self._label_last_turn(stripped.partition(" ")[2])
            return True, None
        if stripped in (":quit", ":skip"):
            self.outcome = QUIT if stripped == ":quit" else SKIPPED
            return True, Decision.stop()
        if stripped == ":agent":
            if not agent:
                self._say("there is no agent here (icplay watch lets one work)")
                return True, None
            return True, Decision.hand_back()
        is_submit, arg = parse_submit(stripped)
        return (True, Decision.submit(arg)) if is_submit else (False, None)


def action_complete(lines: list[str], mode: str) -> bool:
    """Is the action read so far whole? ("line", "statement" up to ';', or Python's "block")."""
    if mode == "statement":
        return lines[-1].strip().endswith(";")
    if mode == "block":
        opened = lines[0].rstrip().endswith(":") or lines[0].lstrip().startswith("@")
        return not opened or (len(lines) > 1 and not lines[-1].strip())
    return True


def first_unfinished(session: Session, tasks: list[Task]) -> int:
    """Where a session stopped: the first task not submitted (0 when all are)."""
    progress = session.progress(tasks)
    for i, task in enumerate(tasks):
        status = progress.by_task.get(task.key)
        if status is None or status.state in (NEW, IN_PROGRESS):
            return i
    return 0


def echoing_input(prompt: str) -> str:
    """``input``, echoing the line when stdin is not a terminal (a script's transcript reads right)."""
    line = input(prompt)
    if not sys.stdin.isatty():
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    return line


def run_tasks(tasks: list[Task], env: Env, session: Session, make_driver: Callable[[Episode], Driver],
              read_line: Callable[[str], str] | None = None,
              write: Callable[[str], None] = print, policy_info: dict[str, Any] | None = None, first: int = 1,
              total: int | None = None) -> int:
    """Play ``tasks`` in order in ``session`` (each resumed if it was left unfinished), one
    line loop each; ``make_driver(episode)`` builds the driver. ``first`` / ``total``: the
    first task's number in its set, and the set's size. Returns the exit code."""
    total = total or len(tasks)
    for path in session.stopped_abandoned:
        print(f"icplay: {path} was left running by an icplay that ended; it is marked stopped (and resumes)",
              file=sys.stderr)
    for number, task in enumerate(tasks, start=first):
        write(display(f"\n=== task {task.set}/{task.id} ({number} of {total})"
                      + (f" [{task.hardness}]" if task.hardness else "") + " ==="))
        write(display(task.query))
        episode, replayed = session.open_episode(env, task, policy=policy_info)
        while session.set_aside:
            print(f"icplay: {session.set_aside.pop(0)}", file=sys.stderr)
        if replayed:
            write(f"(resumed: {replayed} saved turn(s) replayed)")
        outcome = LineLoop(make_driver(episode), read_line, write).run()
        if outcome == QUIT:
            if episode.trajectory.status == "stopped":
                write(f"(stopped; saved in {session.root} — the same command resumes it)")
            return 0
    return 0


__all__ = ["LineLoop", "run_tasks", "first_unfinished", "display", "format_table", "describe_observation",
           "describe_reward", "SUBMITTED", "SKIPPED",
           "QUIT", "HUMAN_HELP", "AGENT_HELP"]
