"""The viewer's pieces: the episode table (fast at thousands of rows), the reward curve,
and the text of a turn's action (a diff when a human edited the proposal)."""

from __future__ import annotations

import datetime
import difflib

from rich.text import Text
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message

from icplay.episode import strict_mark
from icplay.formats.summary import EpisodeSummary
from icplay.session import format_duration
from icplay.tui.highlight import highlighted
from icplay.tui.widgets.results import SEP, ResultsTable, fitted_widths

# "solved": two marks side by side, InterCode's then the strict verdict's (✓ solved, ✗ not, – no
# verdict): one column, so that the date still fits 120 columns
COLUMNS = ("", "set/task", "env", "who", "authors", "turns", "best", "final", "solved", "time", "date")
BARS = "▁▂▃▄▅▆▇█"


def reward_text(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def date_text(ts: float) -> str:
    """UTC, so that a recording reads the same on every machine."""
    if not ts:
        return ""
    return datetime.datetime.fromtimestamp(ts, tz=datetime.timezone.utc).strftime("%y-%m-%d %H:%M")


def solved_marks(s: EpisodeSummary) -> str:
    """InterCode's solved and the strict verdict, side by side: ``✓ ✗`` is solved, not strictly."""
    return f"{strict_mark(s.solved)} {strict_mark(s.strict)}"


def summary_row(s: EpisodeSummary, marked: bool = False) -> tuple:
    flag = ("●" if marked else "") + ("⑂" if s.forked_from else "")
    return (flag, f"{s.set}/{s.task}", s.env, s.who, s.mix_text, s.turns, reward_text(s.best), reward_text(s.final),
            solved_marks(s), format_duration(s.time_worked) if s.time_worked else "", date_text(s.date))


# the columns that give up width when the row is wider than the table (widest first, down to
# FLEX_MIN), so that the short ones after them, the date last, stay whole
FLEXIBLE = ("set/task", "who", "authors")
FLEX_MIN = 10


def fit_widths(columns: list[str], widths: list[int], room: int) -> list[int]:
    """``widths`` narrowed so that the columns (and their separators, ``room`` counts them)
    fit ``room``: the FLEXIBLE ones shrink, widest first; the others keep theirs."""
    widths = list(widths)
    over = sum(widths) - room
    flexible = [i for i, c in enumerate(columns) if c in FLEXIBLE]
    while over > 0 and flexible:
        widest = max(flexible, key=lambda i: widths[i])
        if widths[widest] <= FLEX_MIN:
            break
        widths[widest] -= 1
        over -= 1
    return widths


class EpisodeTable(ResultsTable):
    """The episodes, one row each; Enter opens the highlighted one, Space marks it."""

    BINDINGS = ResultsTable.BINDINGS + [
        Binding("enter", "open", "Open", show=True),
        Binding("space", "mark", "Mark", show=True),
    ]

    class Open(Message):
        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    class Mark(Message):
        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    class Moved(Message):
        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def set_results(self, columns, rows) -> None:
        """Like ``ResultsTable.set_results``, sized from a smaller sample: a filter applied
        at every key press re-sets up to thousands of rows (every row is a short summary)."""
        self.columns = list(columns)
        self.rows = rows
        count = len(rows)
        sample = rows if count <= 300 else [rows[int(i * count / 300)] for i in range(300)] + [rows[-1]]
        self.natural_widths = fitted_widths([max(1, len(c)) for c in self.columns], sample,
                                            lambda value: len(value) if isinstance(value, str) else len(str(value)))
        self.numeric = [c == "turns" for c in self.columns]
        self._number_width = len(str(count)) if count else 1
        self.fit_to_width()
        self.cursor_row = 0
        self.scroll_to(0, 0, animate=False, immediate=True)
        self.refresh()

    def fit_to_width(self) -> None:
        """The long columns narrowed to the table's width (the date, last, was cut at 120 columns)."""
        room = self.scrollable_content_region.width
        natural = getattr(self, "natural_widths", [])
        if room > 0 and natural:
            room -= self._number_width + len(SEP) * len(natural)
            self.widths = fit_widths(self.columns, natural, room)
        else:
            self.widths = list(natural)
        self.virtual_size = Size(self._line_width(), len(self.rows) + 1)

    def on_resize(self) -> None:
        self.fit_to_width()
        self.refresh()

    def action_open(self) -> None:
        if self.rows:
            self.post_message(self.Open(self.cursor_row))

    def action_mark(self) -> None:
        if self.rows:
            self.post_message(self.Mark(self.cursor_row))

    def watch_cursor_row(self, old: int, new: int) -> None:
        super().watch_cursor_row(old, new)
        self.post_message(self.Moved(new))


def reward_curve(rewards: list[float | None], current: int | None = None) -> Text:
    """One character per turn: a bar as high as the reward (0..1), '·' unscored, a red '▁'
    below 0 (a SQL order gone wrong); the current turn underlined."""
    text = Text()
    for i, r in enumerate(rewards):
        style = "underline " if i == current else ""
        if r is None:
            text.append("·", style=style + "dim")
        elif r < 0:
            text.append("▁", style=style + "red")
        else:
            bar = BARS[min(len(BARS) - 1, int(round(r * (len(BARS) - 1))))]
            text.append(bar, style=style + ("green" if r >= 1 else "cyan"))
    return text


def action_text(proposed: str | None, action: str, language: str = "") -> Text:
    """The executed action, coloured for its language; when it differs from the proposal, a line
    diff (- proposed, dimmed; + ran)."""
    if proposed is None or proposed == action or not action:
        return highlighted(action, language) if action else Text("(nothing ran)")
    text = Text()
    for line in difflib.ndiff(proposed.splitlines(), action.splitlines()):
        if line.startswith("?"):
            continue
        sign = line[:2]
        text.append(sign, style="bold red" if sign.startswith("-") else "bold green" if sign.startswith("+") else "")
        text.append_text(highlighted(line[2:], language, style="dim" if sign.startswith("-") else ""))
        text.append("\n")
    text.rstrip()
    return text
