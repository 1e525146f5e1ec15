"""The viewer's episode screens: step through one episode's turns, compare two side by side.

``EpisodeScreen`` shows one turn at a time — the action (a diff against the proposal when a
human edited it), the thought and the comment, the model's reasoning and the call behind the
turn (model and response id, parameters sent, finish reason, tokens, latency, cost, and the
messages it added to the previous call's), the observation as the play screen shows it
(the shell's output, or the SQL grid), the reward by turn as a small curve, and the final
breakdown with the gold. From there ``x`` re-executes the episode in a fresh sandbox
(``icplay.review.reexecute``, on a worker thread, each turn flagged as it comes) and ``k`` /
``w`` fork it at the current turn, continued by you (the play screen) or an agent (the
watch screen) — see ``view_fork`` — and ``c`` compares it with another episode of the same
task, picked from a short list (``ChooseEpisode``), with how their model calls differ; ``l``
labels the turn on screen good, bad or neutral with a note (``icplay.review.labels``); ``b``
branches the episode at the turn on screen (``branching``: ``icplay branch`` on a worker).
"""

from __future__ import annotations

import threading
from typing import cast

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from icplay.agents.records import call_differences, call_lines, new_messages, sent_messages
from icplay.episode import Trajectory, Turn, strict_mark
from icplay.formats.summary import EpisodeSummary, load_episode
from icplay.review.labels import LABEL_PROMPT, LabelError, label_saved_turn
from icplay.review.reexecute import Reexecution, TurnCheck, reexecute
from icplay.scan.flags import Flag
from icplay.scan.registry import flags_of
from icplay.tui.widgets.episodes import action_text, date_text, reward_curve, reward_text
from icplay.tui.app import PlayApp
from icplay.tui.widgets.footer import KeysFooter
from icplay.tui.widgets.output import OutputPane
from icplay.tui.highlight import highlighted
from icplay.tui.widgets.panels import QueryPanel, StatusBar, TurnList, taken_numbers, turn_status
from icplay.tui.shown import safe, shown
from icplay.tui.widgets.results import ResultsTable
from icplay.languages import find as find_language, names
from icplay.tui.screens.modals import CommentScreen
from icplay.tui.screens.view_fork import start_fork
from icplay.tui.screens.branching import ask_and_branch
from icplay.frontend.config import agent_choice

OBSERVATION_LIMIT = 200_000


def sql_grid(turn: Turn) -> tuple[list, list] | None:
    """(columns, rows) of a SQL turn that returned rows, else None."""
    info = turn.info or {}
    if info.get("columns") and isinstance(info.get("rows"), list):
        return info["columns"], info["rows"]
    return None


def turn_notes(turn: Turn) -> Text:
    """The turn's thought and the annotator's comment, each labelled."""
    notes = Text()
    if turn.thought:
        notes.append("Thought ", style="bold")
        notes.append(safe(turn.thought.strip()), style="italic")
    if turn.comment:
        notes.append("\n" if notes else "")
        notes.append("Comment ", style="bold")
        notes.append(safe(turn.comment.strip()))
    if turn.label:
        mark = turn.label
        notes.append("\n" if notes else "")
        notes.append(f"Label {mark['label']}", style="bold " + {"good": "green", "bad": "red"}.get(mark["label"], ""))
        notes.append(safe(f" ({mark.get('author') or 'no annotator'})" + (f": {mark['note']}" if mark.get("note") else "")))
    return notes


def turn_position(turns: list[Turn], position: int) -> Text:
    """"Turn n of N", or where a rejected proposal falls ("after turn n of N")."""
    numbers = taken_numbers(turns)
    total = sum(1 for n in numbers if n is not None)
    number = numbers[position]
    text = Text()
    if number is not None:
        text.append(f"Turn {number} of {total}", style="bold")
    else:
        before = max((n for n in numbers[:position] if n is not None), default=0)
        text.append("Proposal, not a turn", style="bold")
        text.append(f" (after turn {before} of {total})")
    return text


def turn_heading(turns: list[Turn], position: int) -> Text:
    """The stepper's line over one turn, counted as the header counts (``turns_taken``): a
    rejected proposal is no turn, so it is placed after the turn before it."""
    turn = turns[position]
    status, style = turn_status(turn)
    text = turn_position(turns, position)
    text.append(f" · {safe(turn.author)}")
    if turn.info.get("rejected"):
        text.append(" · rejected", style="magenta")
    if status:
        text.append(" · ")
        text.append(status, style=style)
    if turn.info.get("reply_truncated"):
        text.append(" · truncated", style="bold yellow")
    call = turn.info.get("tool_call")
    if isinstance(call, dict):          # tools mode: which call of the reply this turn ran
        text.append(f" · {_shown(call.get('name'), 40)} call {_shown(call.get('id'), 60)}", style="cyan")
    if turn.reward is not None:
        text.append(f" · reward {turn.reward:.2f}")
    verdict = turn.info.get("strict")
    if isinstance(verdict, dict):
        text.append(f" · strict {strict_mark(bool(verdict.get('solved')))}")
    return text


FLAG_STYLE = "bold red"


def flag_text(flags: list[Flag]) -> Text:
    """The scanners' flags (icplay.scan), one a line: the kind, then its evidence (as text)."""
    text = Text()
    for n, flag in enumerate(flags):
        text.append("\n" if n else "")
        text.append(f"⚑ {flag.kind} ", style=FLAG_STYLE)
        text.append(flag.evidence, style="")
    return text


def _shown(value: object, limit: int) -> str:
    """A name the model chose, as one line of plain characters (no control codes)."""
    return "".join(c for c in safe(str(value or "?")) if c.isprintable())[:limit] or "?"


def solved_text(traj: Trajectory) -> Text:
    """Solved as InterCode counts it beside the strict verdict, and why the strict one says no."""
    strict = traj.strictly_solved
    text = Text()
    text.append("Solved ", style="bold")
    text.append(f"InterCode {strict_mark(traj.solved)}", style="green" if traj.solved else "")
    text.append("  ")
    text.append(f"strict {strict_mark(strict)}" + (" (no verdict)" if strict is None else ""),
                style="green" if strict else ("dim" if strict is None else "yellow"))
    text.append("\n")
    for reason in traj.strict_reasons:
        text.append(f"  {safe(reason)[:200]}\n", style="yellow")
    return text


REASONING_STYLE = "italic #8787af"
MESSAGE_CHARS = 400


def call_text(traj: Trajectory, turn: Turn) -> Text:
    """The model's reasoning and the call behind ``turn`` (empty for a turn no model proposed)."""
    text = Text()
    if turn.reasoning:
        text.append("Reasoning\n", style="bold")
        text.append(safe(turn.reasoning.strip()), style=REASONING_STYLE)
    rows = call_lines(turn)
    if rows:
        text.append("\n\n" if text else "")
        text.append("Call\n", style="bold")
        width = max(len(label) for label, _ in rows)
        for label, value in rows:
            text.append(f"  {label:<{width}}  ", style="dim")
            text.append(safe(value) + "\n", style="bold yellow" if "truncated" in value else "")
        added = new_messages(turn)
        total = len(sent_messages(traj, turn.index))
        text.append(f"Prompt · {total} messages sent, {len(added)} new since the previous call\n", style="bold")
        for message in added:
            content = str(message.get("content") or "")
            if len(content) > MESSAGE_CHARS:
                content = content[:MESSAGE_CHARS] + f" … ({len(content) - MESSAGE_CHARS:,} more characters)"
            text.append(safe(f"  {message.get('role', '?')}: "), style="cyan")
            text.append(safe(content) + "\n")
    return text


def check_text(check: TurnCheck | None, running: bool) -> Text:
    if check is None:
        return Text("re-executing…" if running else "", style="dim")
    if check.skipped:
        return Text(f"re-executed: skipped ({check.skipped}: nothing ran)", style="dim")
    if not check.differs:
        return Text("re-executed: ✓ same observation, exit code and reward", style="green")
    text = Text()
    text.append(f"re-executed: ✗ differs — {', '.join(check.what())}", style="bold red")
    for line in check.diff().splitlines():
        text.append("\n" + safe(line), style="red" if line.startswith("-") else
                    "green" if line.startswith("+") else "dim")
    return text


def final_text(traj: Trajectory) -> Text:
    text = Text()
    text.append("Final ", style="bold")
    text.append(f"{reward_text(traj.reward)}  best {reward_text(traj.best_reward)}  ({traj.status})\n")
    text.append_text(solved_text(traj))
    if traj.reward is not None and traj.reward < 0:
        text.append("negative: the right rows in the wrong order (Kendall's tau-b)\n", style="yellow")
    for key, value in (traj.breakdown or {}).items():
        if isinstance(value, (int, float, str, bool)) and len(str(value)) < 40:
            text.append(safe(f"  {key}: {value}") + "\n", style="dim")
    gold = str(traj.task.get("gold") or "")
    if gold:
        text.append("Gold\n", style="bold")
        text.append(safe(gold.strip()[:600]) + "\n", style="italic")
    if traj.gold_output:
        text.append(safe(traj.gold_output.strip()[:400]), style="dim")
    return text


class EpisodeScreen(Screen):
    """One saved episode, turn by turn (see the module docstring)."""

    DEFAULT_CSS = """
    EpisodeScreen #body { height: 1fr; }
    EpisodeScreen #main { width: 1fr; }
    EpisodeScreen #query { height: auto; max-height: 6; }
    EpisodeScreen #turn-head { height: 1; padding: 0 1; }
    EpisodeScreen #turn-text { height: auto; max-height: 45%; }
    EpisodeScreen #action { border: round $primary; padding: 0 1; height: auto; }
    EpisodeScreen #notes { height: auto; padding: 0 1; }
    EpisodeScreen #call { height: auto; padding: 0 1; }
    EpisodeScreen #check { height: auto; padding: 0 1; }
    EpisodeScreen #output { height: 1fr; border: round $secondary; }
    EpisodeScreen #grid { height: 1fr; border: round $secondary; }
    EpisodeScreen #sql-note { height: auto; max-height: 12; padding: 0 1; }
    EpisodeScreen #side { width: 38; }
    EpisodeScreen.-narrow #side { width: 30; }
    EpisodeScreen #steps { height: 1fr; width: 100%; }
    EpisodeScreen #curve { height: 1; padding: 0 1; }
    EpisodeScreen #final-box { height: auto; max-height: 40%; border: round $primary; padding: 0 1; }
    """

    BINDINGS = [
        Binding("escape,q", "back", "Back"),
        Binding("right,n", "step(1)", "Next turn"),
        Binding("left,p", "step(-1)", "Prev turn"),
        Binding("home", "edge(0)", "First", show=False),
        Binding("end", "edge(1)", "Last", show=False),
        Binding("x", "reexecute", "Re-execute"),
        Binding("k", "fork(False)", "Fork: you go on"),
        Binding("w", "fork(True)", "Fork: agent goes on"),
        Binding("c", "compare", "Compare"),
        Binding("l", "label", "Label turn", show=False),    # in docs/view.md; the footer is full
        Binding("b", "branch", "Branch", show=False,
                tooltip="Branch from the turn on screen: recorded, correction, proposal and N model samples, "
                        "each played in a fresh sandbox and scored (icplay branch)"),
    ]

    class Checked(Message):
        def __init__(self, check: TurnCheck | None, result: Reexecution | None = None, error: str | None = None):
            super().__init__()
            self.check, self.result, self.error = check, result, error

    def __init__(self, summary: EpisodeSummary, family: list[EpisodeSummary] | None = None,
                 trajectory: Trajectory | None = None, same_task: list[EpisodeSummary] | None = None) -> None:
        super().__init__()
        self.summary = summary
        self.family = family or []
        self.same_task = [s for s in same_task or [] if s.ref != summary.ref]   # what ``c`` offers to compare with
        self.trajectory = trajectory or load_episode(summary.ref)
        self.flags = flags_of(self.trajectory)      # shown on their turns (icplay.scan)
        self.index = 0
        self.checks: dict[int, TurnCheck] = {}
        self.reexecution: Reexecution | None = None
        self.reexecuting = False
        self._cancel = threading.Event()
        spec = find_language(self.trajectory.env)
        # what the language's spec says a turn's result is shown as: a result grid, or text
        self.shows_rows = spec is not None and spec.result_view == "rows"

    @property
    def frozen(self) -> bool:
        return getattr(self.app, "frozen", False)

    def compose(self) -> ComposeResult:
        traj = self.trajectory
        yield StatusBar(id="status")
        with Horizontal(id="body"):
            with Vertical(id="main"):
                query = QueryPanel(shown(traj.task.get("query") or ""), id="query")
                query.border_title = shown(f"Task {traj.task_key} · {self.summary.who or traj.policy.get('kind', '')}")
                yield query
                yield Static(id="turn-head")
                with VerticalScroll(id="turn-text"):
                    yield Static(id="action", classes="code")
                    yield Static(id="notes")
                    yield Static(id="call")
                    yield Static(id="check")
                if self.shows_rows:
                    yield ResultsTable(id="grid")
                    yield Static(id="sql-note")
                else:
                    output = OutputPane(id="output")
                    output.border_title = "Observation"
                    yield output
            with Vertical(id="side"):
                yield TurnList(frozen=self.frozen, language=traj.env, id="steps")
                yield Static(id="curve")
                with VerticalScroll(id="final-box"):
                    whole = [f for f in self.flags if f.turn is None]
                    yield Static(final_text(traj) + (Text("\n") + flag_text(whole) if whole else Text()), id="final")
        yield KeysFooter(compact=True)

    def on_mount(self) -> None:
        self.query_one(TurnList).set_turns(self.trajectory.turns)
        self.show_turn()

    # -- stepping --------------------------------------------------------------------------

    def _status_parts(self) -> list[str]:
        """The status bar's facts about the episode: its turns, reward and verdicts, and (first)
        its attempt, where it was forked from and how its re-execution went."""
        traj = self.trajectory
        parts = [*self._status_lead(), f"{traj.turns_taken} turns", f"final {reward_text(traj.reward)}",
                 f"solved {strict_mark(traj.solved)} strict {strict_mark(traj.strictly_solved)}",
                 self.summary.source or traj.env]
        if traj.annotator and traj.policy.get("kind", "human") != "human":
            parts.append(f"annotator {traj.annotator}")
        return parts

    def _status_lead(self) -> list[str]:
        """How the re-execution went, where the episode was forked from, which attempt it is."""
        traj = self.trajectory
        lead = []
        if self.reexecution is not None:
            n = len(self.reexecution.diverged)
            lead.append("reproduced" if self.reexecution.reproduced else f"{n} turn{'s differ' if n != 1 else ' differs'}")
        if traj.forked_from:
            lead.append(f"fork of {traj.forked_from.get('id')} at turn {traj.forked_from.get('turn')}")
        if (traj.attempt or 1) > 1 or traj.after_gold_seen:
            lead.append(f"attempt {traj.attempt or '?'}" + (", after the gold was shown" if traj.after_gold_seen
                                                            else ""))
        return lead

    def _show_action(self, turn: Turn) -> None:
        """The turn's action (the proposal alone when it was rejected; a diff when edited)."""
        env = self.trajectory.env
        action = self.query_one("#action", Static)
        if turn.info.get("rejected"):
            action.update(Text("proposed (not run): ", style="magenta") + highlighted(turn.proposed or "", env))
        else:
            action.update(action_text(turn.proposed, turn.action, env))
        action.border_title = "Action" + (" (edited: - proposed, + ran)" if turn.proposed not in (None, turn.action)
                                          and turn.action else "")

    def show_turn(self) -> None:
        traj = self.trajectory
        turns = traj.turns
        self.query_one(StatusBar).show(safe(f"icplay view · {traj.task_key}"), [safe(p) for p in self._status_parts()],
                                       keep=2)
        self.query_one("#curve", Static).update(Text("reward by turn  ", style="dim") +
                                                reward_curve([t.reward for t in turns], self.index))
        if not turns:
            self.query_one("#turn-head", Static).update(Text("no turns were recorded", style="dim"))
            return
        turn = turns[self.index]
        here = [f for f in self.flags if f.turn == turn.index]
        heading = turn_heading(turns, self.index)
        if here:
            heading.append(" · ⚑ " + ", ".join(f.kind for f in here), style=FLAG_STYLE)
        self.query_one("#turn-head", Static).update(heading)
        self._show_action(turn)
        notes = turn_notes(turn)
        if here:
            notes.append("\n" if notes else "")
            notes.append_text(flag_text(here))
        self.query_one("#notes", Static).update(notes)
        self.query_one("#notes", Static).display = bool(notes.plain)
        call = call_text(traj, turn)
        self.query_one("#call", Static).update(call)
        self.query_one("#call", Static).display = bool(call.plain)
        check = check_text(self.checks.get(turn.index), self.reexecuting) if (self.reexecuting or self.checks) else Text()
        self.query_one("#check", Static).update(check)
        self.query_one("#check", Static).display = bool(check.plain)
        self._show_observation(turn)
        turn_list = self.query_one(TurnList)
        if turn_list.highlighted != self.index:
            turn_list.highlighted = self.index

    def _show_sql_result(self, turn: Turn, observation: str) -> None:
        """A SQL turn's rows in the grid (with how many were saved), else its message."""
        grid = self.query_one("#grid", ResultsTable)
        note = self.query_one("#sql-note", Static)
        table = sql_grid(turn)
        if table is not None:
            grid.set_results(*table)
            grid.display = True
            rows = len(table[1])
            note.update(Text(f"{rows:,} row{'s' if rows != 1 else ''}" +
                             (f" (first {rows:,} saved)" if turn.info.get("rows_saved") else ""), style="dim"))
        else:
            grid.clear()
            grid.display = False
            error = turn.info.get("error")
            note.update(shown(observation or "(no output)", style="red" if error else ""))

    def _show_observation(self, turn: Turn) -> None:
        observation = safe(turn.observation or "")
        if len(observation) > OBSERVATION_LIMIT:
            observation = observation[:OBSERVATION_LIMIT] + f"\n… ({len(turn.observation) - OBSERVATION_LIMIT:,} more)"
        if self.shows_rows:
            self._show_sql_result(turn, observation)
            return
        output = self.query_one("#output", OutputPane)
        output.clear()
        if turn.action:
            output.write_command("$", turn.action)
            output.write_ansi(observation.rstrip("\n"))
            if turn.exit_code not in (0, None):
                output.write_note(f"[exit {turn.exit_code}]", style="red")
        else:
            output.write_note(observation or "(nothing ran)", style="dim")

    def action_step(self, delta: int) -> None:
        if self.trajectory.turns:
            self.index = max(0, min(len(self.trajectory.turns) - 1, self.index + delta))
            self.show_turn()

    def action_edge(self, end: int) -> None:
        if self.trajectory.turns:
            self.index = len(self.trajectory.turns) - 1 if end else 0
            self.show_turn()

    def on_option_list_option_highlighted(self, event) -> None:
        if (event.option_list.id == "steps" and self.focused is event.option_list and event.option_index is not None
                and event.option_index != self.index):
            self.index = event.option_index
            self.show_turn()

    def on_turn_list_show(self, message: TurnList.Show) -> None:
        message.stop()
        self.index = message.index
        self.show_turn()

    def action_back(self) -> None:
        self.app.pop_screen()

    # -- re-execution -------------------------------------------------------------------------

    def action_reexecute(self) -> None:
        traj = self.trajectory
        if self.reexecuting:
            return

        if traj.env not in names():
            self.notify(safe(f"No environment {traj.env!r} here to re-execute it on."), severity="warning", markup=False)
            return
        self.reexecuting = True
        self.checks.clear()
        self.reexecution = None
        self.show_turn()
        pool, cancel = cast(PlayApp, self.app).pool, self._cancel
        post = self.post_message

        def on_turn(check: TurnCheck) -> None:
            post(self.Checked(check))

        def work() -> None:
            lease = None
            try:
                lease = pool.lease(traj.env)
                result = reexecute(traj, lease.env, on_turn=on_turn, cancel=cancel)
                post(self.Checked(None, result))
            except Exception as exc:   # whatever the sandbox or the task raised is shown; the viewer stays
                if lease is not None:
                    lease.discard()
                    lease = None
                post(self.Checked(None, None, f"{type(exc).__name__}: {exc}"))
            finally:
                if lease is not None:
                    lease.give_back()

        self.run_worker(work, thread=True, group="reexecute")
        self.notify("Re-executing the episode in a fresh sandbox…", timeout=3)

    def on_episode_screen_checked(self, message: Checked) -> None:
        if message.check is not None:
            self.checks[message.check.index] = message.check
            if message.check.index == self.index:
                self.show_turn()
            return
        self.reexecuting = False
        if message.error:
            self.notify(safe(message.error), title="Re-execution failed", severity="error", markup=False)
            self.show_turn()
            return
        result = self.reexecution = message.result
        if result is not None:
            diverged = [c.index for c in result.diverged]
            if diverged:
                self.index = diverged[0]
                turns = ", ".join(str(i + 1) for i in diverged)
                self.notify(f"Turns {turns} differ from the recording" +
                            (" (and the final reward)" if result.final_differs else ""), severity="warning", markup=False)
            elif result.final_differs:
                self.notify(f"The final reward differs: recorded {reward_text(result.recorded_final)}, "
                            f"now {reward_text(result.final)}", severity="warning", markup=False)
            else:
                self.notify("Reproduced: every turn matches the recording.")
        self.show_turn()

    def on_unmount(self) -> None:
        self._cancel.set()

    # -- comparing --------------------------------------------------------------------------------

    def action_compare(self) -> None:
        others = self.same_task
        if not others:
            self.notify(safe(f"No other episode of {self.trajectory.task_key} to compare with."), severity="warning",
                        markup=False)
            return

        def chosen(other: EpisodeSummary | None) -> None:
            if other is not None:
                self.app.push_screen(CompareScreen(self.summary, other))

        self.app.push_screen(ChooseEpisode(self.summary, others), chosen)

    # -- labelling ------------------------------------------------------------------------------

    def action_label(self) -> None:
        """Label the turn on screen good, bad or neutral, with a note (saved to its file)."""
        if not self.trajectory.turns:
            return
        index = self.index

        def answered(words: str | None) -> None:
            if not words:
                return
            try:
                self.trajectory = label_saved_turn(self.summary.ref, index, words, getattr(self.app, "annotator", None))
            except (LabelError, OSError, ValueError) as exc:
                self.notify(safe(exc), severity="warning", markup=False)
                return
            self.query_one(TurnList).set_turns(self.trajectory.turns)
            self.show_turn()

        self.app.push_screen(CommentScreen(f"Label turn {index + 1}: {LABEL_PROMPT}", "good"), answered)

    # -- forking ---------------------------------------------------------------------------------

    def action_fork(self, agent: bool) -> None:
        start_fork(self, self.trajectory, self.index + 1 if self.trajectory.turns else 0, agent)

    def action_branch(self) -> None:
        """Branch at the turn on screen; the N sampled continuations use the configured agent's model."""
        if not self.trajectory.turns:
            self.notify("No turn to branch at.", severity="warning", markup=False)
            return
        app = cast(PlayApp, self.app)
        ask_and_branch(self, self.trajectory, self.index, agent_choice(app.config, app.home))


class ChooseEpisode(ModalScreen):
    """The other episodes of the task, newest first: Enter compares the stepper's episode with
    the highlighted one, Escape goes back."""

    DEFAULT_CSS = """
    ChooseEpisode { align: center middle; }
    ChooseEpisode #choose { width: 90%; max-width: 110; height: auto; max-height: 80%;
                            border: round $accent; padding: 0 1; background: $surface; }
    ChooseEpisode #choose-list { height: auto; max-height: 20; }
    """
    BINDINGS = [Binding("escape", "dismiss(None)", "Back")]

    def __init__(self, this: EpisodeSummary, others: list[EpisodeSummary]) -> None:
        super().__init__()
        self.this = this
        self.others = sorted(others, key=lambda s: s.date, reverse=True)

    @staticmethod
    def line(s: EpisodeSummary) -> Text:
        text = Text()
        text.append(safe(f"{s.who or s.kind:<24.24} "), style="bold")
        text.append(f"{s.mix_text:<12} {s.turns:>3} turns  final {reward_text(s.final):>5}  "
                    f"solved {strict_mark(s.solved)} strict {strict_mark(s.strict)}  ")
        text.append(safe(f"{date_text(s.date)}  {s.source}"), style="dim")
        return text

    def compose(self) -> ComposeResult:
        with Vertical(id="choose"):
            yield Static(Text.assemble(("Compare with ", "bold"), safe(f"{self.this.who or self.this.kind} · "
                                       f"{self.this.set}/{self.this.task}") + " — Enter picks, Escape goes back"))
            yield OptionList(*[Option(self.line(s)) for s in self.others], id="choose-list")

    def on_mount(self) -> None:
        self.query_one(OptionList).highlighted = 0
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(self.others[event.option_index])


def aligned(turns: list[Turn]) -> list[list[Turn]]:
    """Turns grouped by turn number: each counted turn with the rejected proposals just
    before it (a rejection uses no turn), so that turn n faces turn n."""
    groups, pending = [], []
    for turn in turns:
        pending.append(turn)
        if turn.counts:
            groups.append(pending)
            pending = []
    if pending:
        groups.append(pending)
    return groups


def paired_turns(left: list[Turn], right: list[Turn]) -> list[tuple[list[Turn] | None, list[Turn] | None, bool]]:
    """The two episodes' turns side by side, aligned group by group (None past the shorter's
    end), and whether each pair's last turns ran the same action with the same output."""
    lefts, rights = aligned(left), aligned(right)
    pairs = []
    for i in range(max(len(lefts), len(rights))):
        a = lefts[i] if i < len(lefts) else None
        b = rights[i] if i < len(rights) else None
        same = (a is not None and b is not None and a[-1].action == b[-1].action
                and a[-1].observation == b[-1].observation)
        pairs.append((a, b, same))
    return pairs


def compared_turn_head(turn: Turn) -> Text:
    """Who took the turn (coloured by kind), its status and its reward, on one line."""
    text = Text()
    status, style = turn_status(turn)
    text.append(f"{turn.author}", style="cyan" if turn.author == "agent" else "yellow"
                if turn.author != "human" else "")
    if status:
        text.append(f" · {status}", style=style)
    if turn.reward is not None:
        text.append(f" · {turn.reward:.2f}")
    text.append("\n")
    return text


def compared_turn(turn: Turn, language: str) -> Text:
    """One turn in a compare cell: who took it, its status and reward, then the rejected
    proposal (and the comment on it), or the action, the call behind it and the output's start."""
    text = compared_turn_head(turn)
    if turn.info.get("rejected"):
        text.append("(rejected) ", style="magenta")
        text.append_text(highlighted(turn.proposed or "", language))
        if turn.comment:
            text.append(safe(f"\n“{turn.comment}”"), style="italic")
        return text
    text.append_text(action_text(turn.proposed, turn.action, language))
    call = call_brief(turn)
    if call:
        text.append("\n" + safe(call), style="yellow" if turn.info.get("reply_truncated") else "dim cyan")
    observation = safe(turn.observation or "").strip().splitlines()
    if observation:
        text.append("\n")
        text.append(observation_start(observation), style="dim")
    return text


def observation_start(lines: list[str]) -> str:
    """An output's first four lines (each cut at 200 characters) and how many more there are."""
    return ("\n".join(line[:200] for line in lines[:4]) +
            (f"\n… {len(lines) - 4} more lines" if len(lines) > 4 else ""))


def _tokens_brief(usage: dict) -> str:
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    tokens = f"{(prompt or 0) + (completion or 0):,} tok" if completion is not None else "? tok"
    if usage.get("reasoning_tokens"):
        tokens += f" ({usage['reasoning_tokens']:,} reasoning)"
    return tokens


def call_brief(turn: Turn) -> str:
    """One line on the call behind a turn: tokens, latency, cost, finish reason if not stop."""
    response = turn.info.get("response")
    if not isinstance(response, dict):
        return ""
    usage = response.get("usage") or {}
    parts = [("~" if response.get("usage_counted") else "") + _tokens_brief(usage)]
    if response.get("latency") is not None:
        parts.append(f"{response['latency']:.1f} s")
    if response.get("cost") is not None:
        parts.append(f"${response['cost']:.4f}")
    if response.get("finish_reason") not in (None, "stop"):
        parts.append(str(response["finish_reason"]) + (" (truncated)" if response["finish_reason"] == "length" else ""))
    return " · ".join(parts)


def differences_text(rows: list[tuple[str, str, str]]) -> Text:
    text = Text("The model calls differ\n", style="bold")
    width = max(len(what) for what, _, _ in rows)
    for what, a, b in rows:
        text.append(f"  {what:<{width}}  ", style="dim")
        text.append(safe(a), style="cyan")
        text.append("  vs  ", style="dim")
        text.append(safe(b) + "\n", style="yellow")
    return text


class CompareScreen(Screen):
    """Two episodes of one task side by side, aligned by turn."""

    DEFAULT_CSS = """
    CompareScreen #query { height: auto; max-height: 5; }
    CompareScreen #compare-head { height: auto; border-bottom: solid $primary; }
    CompareScreen #compare-calls { height: auto; max-height: 12; padding: 0 1; border-bottom: solid $primary; }
    CompareScreen #compare-rows { height: 1fr; }
    CompareScreen .compare-row { height: auto; border-bottom: dashed $secondary; }
    CompareScreen .compare-row.same { color: $text-muted; }
    CompareScreen .half { width: 1fr; height: auto; padding: 0 1; }
    CompareScreen .turn-no { width: 5; }
    CompareScreen #compare-head .half { padding-left: 6; }
    """

    BINDINGS = [Binding("escape,q", "back", "Back")]

    def __init__(self, left: EpisodeSummary, right: EpisodeSummary) -> None:
        super().__init__()
        self.summaries = (left, right)
        self.left = load_episode(left.ref)
        self.right = load_episode(right.ref)

    @staticmethod
    def head(s: EpisodeSummary, traj: Trajectory) -> Text:
        text = Text()
        text.append(safe(s.who or traj.policy.get("kind", "")), style="bold")
        text.append(f"  {s.mix_text}  final {reward_text(traj.reward)}  best {reward_text(traj.best_reward)}")
        text.append(safe(f"\n{s.source} · {traj.id}"), style="dim")
        text.append(f"  solved {strict_mark(traj.solved)} strict {strict_mark(traj.strictly_solved)}  ")
        text.append_text(reward_curve([t.reward for t in traj.turns]))
        return text

    @staticmethod
    def cell(group: list[Turn] | None, language: str = "") -> Text:
        if not group:
            return Text("—", style="dim")
        text = Text()
        for n, turn in enumerate(group):
            if n:
                text.append("\n")
            text.append_text(compared_turn(turn, language))
        return text

    def compose(self) -> ComposeResult:
        left, right = self.left, self.right
        yield StatusBar(id="status")
        query = QueryPanel(shown(left.task.get("query") or ""), id="query")
        query.border_title = shown(f"Task {left.task_key}")
        yield query
        with Horizontal(id="compare-head"):
            yield Static(self.head(self.summaries[0], left), classes="half")
            yield Static(self.head(self.summaries[1], right), classes="half")
        differences = call_differences(left, right)
        if differences:
            yield Static(differences_text(differences), id="compare-calls")
        with VerticalScroll(id="compare-rows"):
            for i, (a, b, same) in enumerate(paired_turns(left.turns, right.turns)):
                with Horizontal(classes="compare-row" + (" same" if same else "")):
                    yield Static(Text(f"{i + 1:>2} {'=' if same else '≠'}", style="dim" if same else "bold"),
                                 classes="turn-no")
                    yield Static(self.cell(a, left.env), classes="half")
                    yield Static(self.cell(b, right.env), classes="half")
        yield KeysFooter(compact=True)

    def on_mount(self) -> None:
        left, right = self.left, self.right
        same = sum(1 for a, b in zip(aligned(left.turns), aligned(right.turns)) if a[-1].action == b[-1].action)
        self.query_one(StatusBar).show(safe(f"icplay view · compare {left.task_key}"),
                                       [f"{left.turns_taken} vs {right.turns_taken} turns",
                                        f"{same} same actions", "Escape back"])

    def action_back(self) -> None:
        self.app.pop_screen()
