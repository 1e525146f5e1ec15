"""Small pieces of the play screen: the status bar, the task query, the turn sidebar."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from icplay.episode import Turn
from icplay.tui.highlight import highlighted


def short_duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def first_line(text: str, limit: int = 200) -> str:
    lines = text.strip().splitlines() or [""]
    line = lines[0]
    if len(lines) > 1:
        line += " …"
    return line[:limit]


# a reply with no action that can run, by why (else "no action")
INVALID_STATUS: dict[str | None, str] = {"truncated": "cut off", "reasoning_only": "only thought"}


def sql_status(info: dict) -> str:
    """A SQL turn that ran: the rows it changed, or the rows it returned (``+``: cut)."""
    if info.get("columns") is None:
        count = info.get("rowcount")
        return f"{count} changed" if isinstance(count, int) and count >= 0 else "done"
    rows = info.get("rows") or []
    more = "+" if info.get("truncated") else ""
    return f"{len(rows):,}{more} row{'s' if len(rows) != 1 else ''}"


def turn_status(turn: Turn) -> tuple[str, str]:
    """A short status for a turn and its style: exit code, rows, error, interrupt, timeout."""
    info = turn.info or {}
    if info.get("rejected"):
        return "not run", "magenta"
    if info.get("invalid"):
        return INVALID_STATUS.get(info.get("invalid_reason"), "no action"), "red"
    if info.get("interrupted"):
        return "^C", "yellow"
    if info.get("timed_out"):
        return "timeout", "yellow"
    if info.get("error"):
        return "error", "red"
    if "columns" in info:
        return sql_status(info), "green"
    if turn.exit_code is None:
        return "", ""
    if turn.exit_code == 0:
        return "ok", "green"
    return f"exit {turn.exit_code}", "red"


AUTHORS = {  # a turn's kind -> (label in the sidebar, style)
    "human": ("you", "dim"),
    "agent": ("agent", "cyan"),
    "edited": ("edited", "yellow"),
    "rejected": ("rejected", "magenta"),
    "invalid": ("agent?", "red"),
}


def turn_kind(turn: Turn) -> str:
    """agent | edited | human | rejected | invalid (who made the turn, for the sidebar)."""
    info = turn.info or {}
    if info.get("rejected"):
        return "rejected"
    if info.get("invalid"):
        return "invalid"
    return {"agent-edited-by-human": "edited", "agent": "agent"}.get(turn.author, "human")


def turn_author(turn: Turn) -> tuple[str, str]:
    return AUTHORS[turn_kind(turn)]


def taken_numbers(turns: list[Turn]) -> list[int | None]:
    """Each turn's number among the turns taken (``Turn.counts``, as the status bars count them),
    None for a turn that used none up (a rejected proposal): one rule for every screen."""
    numbers: list[int | None] = []
    taken = 0
    for turn in turns:
        if turn.counts:
            taken += 1
        numbers.append(taken if turn.counts else None)
    return numbers


class StatusBar(Static):
    """One line on top: task, environment, sandbox, turns, time worked."""

    DEFAULT_CSS = """
    StatusBar { dock: top; height: 1; background: $panel; color: $text; padding: 0 1; }
    """

    def show(self, left: str, parts: list[str] | str, keep: int = 1) -> None:
        """``left`` then ``parts`` (most important first) flush right; the least important
        parts are dropped (never the first ``keep``) until the line fits."""
        if isinstance(parts, str):
            parts = [parts]
        width = max(10, self.size.width - 2) if self.size.width else 118
        parts = list(parts)
        while len(parts) > keep and len(left) + 2 + len(" · ".join(parts)) > width:
            parts.pop()
        right = " · ".join(parts)
        text = Text(left, style="bold")
        room = width - len(left) - len(right)
        if room < 1:
            text.truncate(max(0, width - len(right) - 2), overflow="ellipsis")
            room = 1
        text.append(" " * room)
        text.append(right)
        self.update(text)


class QueryPanel(Static):
    """The task's text. When it is longer than the panel, the panel says so on its bottom edge
    (``-more``: a short terminal draws that edge only then) and Alt+T (``app.task``) or a click
    shows it whole: a cut task must never pass for the whole of it."""

    DEFAULT_CSS = """
    QueryPanel { height: auto; max-height: 10; border: round $primary; padding: 0 1; overflow-y: auto; }
    """
    MORE = "more ↓ Alt+T or click: whole task"

    class ShowWhole(Message):
        """Asks the screen to show the whole task (``app.task``)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.text: Text = args[0] if args and isinstance(args[0], Text) else Text("")

    def update(self, content="", *, layout: bool = True) -> None:
        if isinstance(content, Text):
            self.text = content
        super().update(content, layout=layout)
        self.call_after_refresh(self.check_more)

    def on_resize(self) -> None:
        self.call_after_refresh(self.check_more)

    def is_cut(self) -> bool:
        """Is the text longer than the lines the panel has room for (at most its max-height)?"""
        width = self.content_region.width
        if width <= 0:
            return False
        lines = len(self.text.wrap(self.app.console, width))
        max_height = self.styles.max_height
        room = int(max_height.value) if max_height is not None and max_height.is_cells else lines
        return lines > room - self.styles.gutter.height

    def check_more(self) -> None:
        cut = self.is_cut()
        self.set_class(cut, "-more")
        self.border_subtitle = self.MORE if cut else ""

    def on_click(self) -> None:
        self.post_message(self.ShowWhole())


class TurnList(OptionList):
    """Every turn: number, author, first line of the action, status, duration."""

    DEFAULT_CSS = """
    TurnList { height: 1fr; border: round $secondary; }
    TurnList:focus { border: round $accent; }
    """

    class Show(Message):
        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, frozen: bool = False, language: str = "", turn_scores: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.frozen = frozen
        self.language = language             # the actions' language, for their colours
        self.turn_scores = turn_scores       # a turn's reward (InterCode's per-turn score) shown
        self.taken = 0                       # turns taken so far (the next one's number - 1)
        self.border_title = "Turns"

    def render_turn(self, turn: Turn, number: int | None) -> Text:
        """Two lines: the turn's number among those taken ("–" for one that is not a turn),
        its author and the first line of its action; then its status, duration and reward."""
        status, style = turn_status(turn)
        author, author_style = turn_author(turn)
        line = Text()
        label = f"{number:>2}" if number is not None else " –"
        prefix = f"{label} {author} "
        line.append(f"{label} ", style="bold")
        line.append(f"{author} ", style=author_style)
        width = self.scrollable_content_region.width or 30
        room = max(4, width - len(prefix) - 1)
        action = first_line(turn.action or (turn.proposed or ""), 400)
        action = action if len(action) <= room else action[:room - 1] + "…"
        line.append_text(highlighted(action, self.language, style="dim" if not turn.action else ""))
        line.append("\n   ")
        if status:
            line.append(status, style=style)
            line.append(" ")
        line.append("–" if self.frozen else short_duration(turn.duration), style="dim")
        if turn.reward is not None and self.turn_scores:
            line.append(f" r={turn.reward:.2f}", style="cyan")
        return line

    def set_turns(self, turns: list[Turn]) -> None:
        self.clear_options()
        numbers = taken_numbers(turns)
        self.taken = sum(1 for n in numbers if n is not None)
        self.add_options([Option(self.render_turn(t, n), id=str(t.index)) for t, n in zip(turns, numbers)])
        self.border_subtitle = Text(f"{self.taken}")
        if turns:
            self.highlighted = len(turns) - 1

    def add_turn(self, turn: Turn) -> None:
        if turn.counts:
            self.taken += 1
        self.add_option(Option(self.render_turn(turn, self.taken if turn.counts else None), id=str(turn.index)))
        self.border_subtitle = Text(f"{self.taken}")
        self.highlighted = self.option_count - 1

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id is not None:
            self.post_message(self.Show(int(event.option.id)))
