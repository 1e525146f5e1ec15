"""Dialogs: confirm, help, a turn's details, history search, pause, and the score."""

from __future__ import annotations

from collections.abc import Iterable

from rich.markup import escape
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Input, OptionList, Static
from textual.widgets.option_list import Option

from icplay.envs.base import SubmitResult, shown_observation, strict_doubts
from icplay.languages import find as find_language
from icplay.languages.submitting import submit_preview
from icplay.episode import Trajectory, Turn
from icplay.tui.keys import KEYS
from icplay.tui.shown import from_ansi, safe, shown
from icplay.tui.widgets.panels import first_line, short_duration, turn_status

SCOPE_TITLES = {
    "app": "Everywhere", "picker": "Task list", "play": "Working on a task", "fork": "A fork (icplay view)",
    "bash": "Bash command line", "sql": "SQL editor", "python": "Python editor", "watch": "Watching an agent (icplay watch)",
}


def steady_cursor(field: Input) -> Input:
    """``field`` with its cursor not blinking in a frozen app (a snapshot's): a blink caught
    between two frames made the same screen two snapshots."""
    if getattr(field.app, "frozen", False):
        field.cursor_blink = False
    return field


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS = [Binding("escape,n", "dismiss(False)", "No", show=False),
                Binding("y", "dismiss(True)", "Yes", show=False)]

    def __init__(self, question: str | Text, yes: str = "Yes", no: str = "Cancel") -> None:
        super().__init__()
        self.question, self.yes, self.no = question, yes, no

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog confirm"):
            with VerticalScroll(id="question-box"):      # a long question scrolls; the buttons stay
                yield Static(self.question, id="question")
            with Horizontal(classes="buttons"):
                yield Button(self.yes, variant="primary", id="yes")
                yield Button(self.no, id="no")

    def on_mount(self) -> None:
        self.query_one("#yes", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")


def submit_question(task_key: str, env: str, turns: list[Turn], arg: str | None = None,
                    submitter: str = "human", gold_shown: bool = True) -> Text:
    """The submit confirmation: the question, then what the submit scores (the turn, its author
    and its result, or the flag / function given: ``icplay.languages.submitting``)."""
    taken = sum(1 for t in turns if t.counts)
    text = Text(safe(f"Submit {task_key} for scoring after {taken} turn{'s' if taken != 1 else ''}?\n"), style="bold")
    preview = submit_preview(env, turns, arg, submitter)
    text.append(safe(preview[0]) + "\n", style="bold")
    for line in preview[1:]:
        text.append(safe(line) + "\n", style="yellow" if not line.startswith(" ") else "")
    text.append("The episode ends; the score is shown next" + (" (and the gold solution, on request)."
                                                              if gold_shown else "."), style="dim")
    return text


HelpRows = list[tuple[str, list[tuple[str, str]]]]     # (section title, [(keys, what they do)])


def playground_help(app) -> HelpRows:
    """The playground's keys by scope, from the one key table (the user's keymap applied)."""
    keymap = getattr(app, "_keymap", {}) or {}
    sections: HelpRows = []
    for scope, title in SCOPE_TITLES.items():
        rows = [(", ".join(keymap.get(key.id, key.keys).split(",")), f"{escape(key.help)}  [dim]({key.id})[/dim]")
                for key in KEYS if key.scope == scope]
        sections.append((title, rows))
    return sections


def binding_help(bindings: Iterable[BindingType]) -> list[tuple[str, str]]:
    """Help rows of a screen's own bindings: the keys, and the tooltip (else the description).
    A binding given as a tuple (Textual allows it) is read as Binding(key, action, description)."""
    made = [b if isinstance(b, Binding) else Binding(*b) for b in bindings]
    return [(", ".join(b.key.split(",")), escape(b.tooltip or b.description)) for b in made
            if b.description or b.tooltip]


class HelpScreen(ModalScreen[None]):
    """F1: the keys, section by section (by default the playground's; the viewer passes its own)."""

    BINDINGS = [Binding("escape,f1,q", "dismiss", "Close", show=False)]

    def __init__(self, sections: HelpRows | None = None, title: str = "icplay playground — keys",
                 note: str = "remap them in config.toml under [keys]: binding id = \"keys\"") -> None:
        super().__init__()
        self.sections, self.title_text, self.note = sections, title, note

    def compose(self) -> ComposeResult:
        sections = self.sections if self.sections is not None else playground_help(self.app)
        table = Table(box=None, expand=True, show_header=False, padding=(0, 1))
        # a third of a small terminal for the keys, so that what they do stays readable
        table.add_column("key", style="bold cyan", no_wrap=True, width=min(28, max(8, self.app.size.width // 3)))
        table.add_column("what", ratio=1)
        for title, rows in sections:
            table.add_row(Text(title, style="bold underline"), "")
            for keys, what in rows:
                table.add_row(Text(keys), what)
            table.add_row("", "")
        table.add_row(Text("Palette", style="bold underline"), "")
        table.add_row("ctrl+p", "Command palette: every action, searchable")
        with Vertical(id="dialog", classes="dialog help"):
            yield Static(Text.assemble((self.title_text, "bold"), (f"   {self.note}" if self.note else "", "dim")),
                         classes="title")
            with VerticalScroll():
                yield Static(table)
            yield Static("[dim]Escape closes[/dim]", classes="hint")


class TaskScreen(ModalScreen[None]):
    """The whole task text, scrolling (the task panel of a small terminal shows only its start)."""

    BINDINGS = [Binding("escape,q,enter", "dismiss", "Close", show=False)]

    def __init__(self, title: str, text: Text) -> None:
        super().__init__()
        self.title_text, self.text = title, text

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog task"):
            yield Static(Text(self.title_text, style="bold"), classes="title")
            with VerticalScroll(id="task-body"):
                yield Static(self.text)
            yield Static("[dim]Escape closes · ↑↓ scroll[/dim]", classes="hint")

    def on_mount(self) -> None:
        self.query_one("#task-body").focus()


class TurnScreen(ModalScreen[None]):
    """One turn in full: the action, the observation, the facts. Read-only."""

    BINDINGS = [Binding("escape,q,enter", "dismiss", "Close", show=False)]

    def __init__(self, turn: Turn, frozen: bool = False, turn_scores: bool = True) -> None:
        super().__init__()
        self.turn = turn
        self.frozen = frozen
        self.turn_scores = turn_scores      # False: a study hides the rewards of turns before the submit

    def _facts(self) -> Text:
        """The title line: the turn's number, author, status, time (not in a frozen
        screenshot) and reward."""
        turn = self.turn
        status, style = turn_status(turn)
        facts = Text()
        facts.append(f"Turn {turn.index + 1}", style="bold")
        facts.append(f" · {safe(turn.author)}")
        if status:
            facts.append(" · ")
            facts.append(status, style=style)
        if not self.frozen:
            facts.append(f" · {short_duration(turn.duration)}")
        if turn.reward is not None and self.turn_scores:
            facts.append(f" · reward {turn.reward:.2f}")
        return facts

    def compose(self) -> ComposeResult:
        turn = self.turn
        with Vertical(id="dialog", classes="dialog turn"):
            yield Static(self._facts(), classes="title")
            with VerticalScroll(id="turn-body"):
                if turn.thought:
                    yield Static("[b]Thought[/b]")
                    yield Static(shown(turn.thought, style="italic"))
                if turn.proposed is not None and turn.proposed != turn.action:
                    yield Static("[b]Proposed[/b]")
                    yield Static(shown(turn.proposed), classes="code")
                yield Static("[b]Action[/b]")
                yield Static(shown(turn.action or "(none)"), classes="code")
                if turn.comment:
                    yield Static(Text.assemble(("Comment", "bold"), "  ", safe(turn.comment)))
                yield Static("[b]Observation[/b]")
                observation = shown_observation(turn.observation, turn.info)
                if len(observation) > 200_000:
                    observation = observation[:200_000] + f"\n… ({len(turn.observation) - 200_000:,} more characters)"
                yield Static(from_ansi(observation) if observation else Text("(no output)", style="dim"),
                             classes="code")
            yield Static("[dim]Turns are a record: they cannot be edited. Escape closes.[/dim]", classes="hint")


class HistoryScreen(ModalScreen[str | None]):
    """Ctrl+R: type to filter the command history, Enter takes the highlighted one."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Close", show=False),
                Binding("down", "move(1)", show=False), Binding("up", "move(-1)", show=False)]

    def __init__(self, history: list[str], query: str = "", what: str = "command") -> None:
        """``history`` newest first; ``what`` its items are called (a command, a query)."""
        super().__init__()
        self.history = history
        self.query_text = query
        self.what = what

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog history"):
            yield Static("[b]Search history[/b]  [dim]type to filter · Enter takes it · Escape closes[/dim]")
            yield Input(self.query_text, placeholder=f"part of a {self.what}", id="history-query")
            yield OptionList(id="history-list")

    def on_mount(self) -> None:
        self._fill(self.query_text)
        steady_cursor(self.query_one(Input)).focus()

    def _matches(self, text: str) -> list[str]:
        seen: set[str] = set()
        found = []
        for item in self.history:
            if item in seen:
                continue
            seen.add(item)
            if text.lower() in item.lower():
                found.append(item)
        return found[:500]

    def _fill(self, text: str) -> None:
        options = self.query_one(OptionList)
        options.clear_options()
        self._found = self._matches(text)
        options.add_options([Option(shown(first_line(c, 200)), id=str(i)) for i, c in enumerate(self._found)])
        if self._found:
            options.highlighted = 0

    def on_input_changed(self, event: Input.Changed) -> None:
        self._fill(event.value)

    def action_move(self, step: int) -> None:
        options = self.query_one(OptionList)
        if options.option_count:
            current = options.highlighted or 0
            options.highlighted = max(0, min(options.option_count - 1, current + step))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        options = self.query_one(OptionList)
        if options.highlighted is not None and self._found:
            self.dismiss(self._found[options.highlighted])
        else:
            self.dismiss(None)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(self._found[event.option_index])   # each option's id is its index too


class SaveScreen(ModalScreen[str | None]):
    """Where to save a result grid: a file name (its ending says the format: .md Markdown, else CSV)."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", show=False)]

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name_offered = name

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog confirm"):
            yield Static("[b]Save the result grid[/b]", classes="title")
            yield Input(self.name_offered, placeholder="file name: .csv, or .md for Markdown", id="save-name")
            yield Static("[dim]Enter saves (a name ending in .md: Markdown, else CSV) · Escape cancels[/dim]",
                         classes="hint")

    def on_mount(self) -> None:
        steady_cursor(self.query_one(Input))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip() or None)


class QueueDoneScreen(Screen[None]):
    """A study's queue is done: said in the app (at a browser seat, the annotator's page is the
    app; a message printed at exit went to the server's console and left her page blank)."""

    BINDINGS = [Binding("enter,escape,q", "app.quit", "Quit", show=True)]
    DEFAULT_CSS = """
    QueueDoneScreen { align: center middle; }
    QueueDoneScreen .done { width: 64; max-width: 100%; }
    """

    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog done"):
            yield Static(Text("All done — thank you", style="bold green"), classes="title")
            yield Static(shown(self.message + "."))
            yield Static(Text("Your work is saved. You may close this page (or press Enter to quit).", style="dim"),
                         classes="hint")


class PauseScreen(ModalScreen[None]):
    """The clock is stopped and the task hidden until a key is pressed."""

    BINDINGS = [Binding("escape,enter,space,f4", "dismiss", "Resume", show=False)]

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog pause"):
            yield Static("[b]Paused[/b]", classes="title")
            yield Static("The clock of time worked is stopped.\nPress Enter, Space or Escape to go on.")


def score_table(env: str, result: SubmitResult) -> Table:
    """The reward's breakdown, language by language."""
    b = result.breakdown or {}
    table = Table(box=None, show_header=False, padding=(0, 1))
    table.add_column(style="bold")
    table.add_column()
    spec = find_language(env)
    rows = spec.explain(b) if spec is not None else [(str(k), str(v)) for k, v in b.items()]
    for label, value in rows:
        table.add_row(shown(label), shown(value))
    return table


class ScoreScreen(ModalScreen[str | None]):
    """The reward with its breakdown; reveal the gold; next, retry, or the task list."""

    BINDINGS = [
        Binding("escape", "dismiss(None)", "Close", show=False),
        Binding("g", "reveal", "Gold", show=False),
        Binding("n", "choose('next')", "Next", show=False),
        Binding("r", "choose('retry')", "Retry", show=False),
        Binding("t", "choose('picker')", "Tasks", show=False),
    ]

    def __init__(self, trajectory: Trajectory, result: SubmitResult, reveal: bool = False,
                 gold_refusal: str | None = None, retry_refusal: str | None = None, task_list: bool = True,
                 breakdown_refusal: str | None = None) -> None:
        """``gold_refusal`` / ``retry_refusal``: why a study's rules allow no gold or no retry
        (icplay.study.rules); the button is left out and its key says why. ``task_list``: False
        in a study, whose queue chooses the next task. ``breakdown_refusal``: why the study shows
        the reward without how it was computed (its tests, gold rows and files)."""
        super().__init__()
        self.trajectory = trajectory
        self.result = result
        self.revealed = reveal
        self.gold_refusal = gold_refusal
        self.breakdown_refusal = breakdown_refusal
        self.retry_refusal = retry_refusal
        self.task_list = task_list

    def compose(self) -> ComposeResult:
        result = self.result
        reward = result.reward
        verdict = "Solved" if result.solved else ("Partly solved" if reward > 0.01 else "Not solved")
        colour = "green" if result.solved else ("yellow" if reward > 0.01 else "red")
        with Vertical(id="dialog", classes="dialog score"):
            yield Static(Text.assemble((f"Reward {reward:.2f}", f"bold {colour}"), f"  {verdict}",
                                       *strict_title(result.strict if result.solved else None)),
                         classes="title", id="reward")
            with VerticalScroll(id="score-body"):
                if self.breakdown_refusal is not None:
                    yield Static(Text(self.breakdown_refusal, style="dim"), id="breakdown")
                else:
                    if doubts := strict_doubts(result):
                        yield Static(Text("\n".join(safe(d)[:300] for d in doubts), style="yellow"),
                                     id="strict-reasons")
                    yield Static(score_table(self.trajectory.env, result), id="breakdown")
                yield Vertical(id="gold")
            with Horizontal(classes="buttons"):
                if self.gold_refusal is None:
                    yield Button("Reveal gold (g)", id="reveal")
                yield Button("Next task (n)", variant="primary", id="next")
                if self.retry_refusal is None:
                    yield Button("Retry (r)", id="retry")
                if self.task_list:
                    yield Button("Task list (t)", id="picker")

    # focused by Textual once mounted (a query in on_mount fails when the app quits as the
    # dialog opens: its children are already being removed)
    AUTO_FOCUS = "#next"

    async def on_mount(self) -> None:
        if self.revealed:
            self.revealed = False
            await self.action_reveal()

    async def action_reveal(self) -> None:
        if self.gold_refusal is not None:
            self.notify(self.gold_refusal, title="No gold", severity="warning", markup=False)
            return
        if self.revealed:
            return
        self.revealed = True
        traj = self.trajectory
        last = next((t for t in reversed(traj.turns) if t.action), None)
        gold = traj.task.get("gold", "")
        panel = self.query_one("#gold", Vertical)
        gold_output = self.result.gold_output or ""
        yours = last.observation if last is not None else ""
        await panel.mount(Static("[b]Gold solution[/b]"), Static(shown(gold), classes="code", id="gold-action"))
        with_output = Horizontal(id="compare")
        await panel.mount(with_output)
        left = Vertical(classes="half")
        right = Vertical(classes="half")
        await with_output.mount(left, right)
        await left.mount(Static("[b]Gold output[/b]"),
                         Static(from_ansi(_clip(gold_output)) if gold_output else Text("(none)", style="dim"),
                                classes="code", id="gold-output"))
        await right.mount(Static("[b]Your last observation[/b]"),
                          Static(from_ansi(_clip(yours)) if yours else Text("(none)", style="dim"),
                                 classes="code", id="your-output"))
        self.query_one("#reveal", Button).disabled = True
        record = getattr(self.app, "record_gold_seen", None)
        if record is not None:        # later attempts of this task are marked as after it
            record(traj)

    def action_choose(self, choice: str) -> None:
        if choice == "retry" and self.retry_refusal is not None:
            self.notify(self.retry_refusal, title="No retry", severity="warning", markup=False)
            return
        self.dismiss(choice)

    async def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "reveal":
            await self.action_reveal()
        else:
            self.dismiss(event.button.id)


def _clip(text: str, limit: int = 20_000) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit:,} more characters)"


def result_from_trajectory(trajectory: Trajectory) -> SubmitResult:
    return SubmitResult(trajectory.reward or 0.0, trajectory.breakdown or {}, trajectory.gold_output or "",
                        strict=trajectory.strict)


def strict_title(strict: dict | None) -> tuple[tuple[str, str], ...]:
    """The strict verdict beside InterCode's "Solved" on the score's title: nothing when the env gave none
    (below 1.0 it adds nothing: a reward below 1.0 is never strictly solved)."""
    if not isinstance(strict, dict):
        return ()
    if strict.get("solved"):
        return (("  · strictly solved", "green"),)
    return (("  · not strictly solved", "bold yellow"),)



class CommentScreen(ModalScreen["str | None"]):
    """One line of text (a rejection's comment for the model); Escape cancels."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", show=False)]

    def __init__(self, title: str, placeholder: str = "") -> None:
        super().__init__()
        self.title_text, self.placeholder = title, placeholder

    def compose(self) -> ComposeResult:
        from textual.widgets import Input

        with Vertical(id="dialog", classes="dialog confirm"):
            yield Static(self.title_text, id="question")
            yield Input(placeholder=self.placeholder, id="comment")
            yield Static("[dim]Enter sends · Escape cancels[/dim]", classes="hint")

    def on_mount(self) -> None:
        self.query_one("#comment").focus()

    def on_input_submitted(self, event) -> None:
        event.stop()
        self.dismiss(event.value.strip())
