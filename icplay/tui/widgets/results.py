"""A results table that stays fast at 100 000 rows.

Textual's DataTable measures and stores every cell when rows are added; a query result
of 100 000 rows would stall the UI for seconds. This table keeps the rows as they came
(a list of tuples, not copied), sizes its columns from a sample of rows, and formats only
the lines on screen (the Line API: ``render_line``). Setting a result is O(sample), and
scrolling costs the same at row 10 as at row 99 999.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Callable, Sequence

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from icplay.tui.shown import safe

SAMPLE = 2000
MAX_COL = 40
SEP = " │ "


def cell_text(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value[:32]).hex() + ("…" if len(value) > 32 else "")
    # a value is the solver's (its tables, its rows): control and bidirectional characters
    # as escapes, or the terminal would act on them
    return safe(str(value).replace("\n", "⏎").replace("\t", " "))


def fit(text: str, width: int, right: bool = False) -> str:
    if cell_len(text) <= width:
        pad = " " * (width - cell_len(text))
        return pad + text if right else text + pad
    out, used = [], 0
    for ch in text:
        w = cell_len(ch)
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + "…" + " " * (width - 1 - used)


def fitted_widths(widths: list[int], sample: Sequence[Sequence[Any]], measure: Callable[[Any], int]) -> list[int]:
    """Each column as wide as its header (``widths``) or its widest value in ``sample``,
    at most MAX_COL."""
    for row in sample:
        for i, value in enumerate(row[:len(widths)]):
            w = measure(value)
            if w > widths[i]:
                widths[i] = w
    return [min(w, MAX_COL) for w in widths]


def numeric_columns(sample: Sequence[Sequence[Any]], count: int) -> list[bool]:
    """Which of ``count`` columns hold only numbers (or NULL) in the sample's first 200 rows
    (right-aligned); none when the sample is empty."""
    numeric = [True] * count
    for row in sample[:200]:
        for i, value in enumerate(row[:count]):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float, Decimal))):
                numeric[i] = False
    return [n and bool(sample) for n in numeric]


class ResultsTable(ScrollView, can_focus=True):
    """Columns and rows of a query result; a row cursor; header pinned on top."""

    COMPONENT_CLASSES = {"results--header", "results--cursor", "results--stripe", "results--number"}

    DEFAULT_CSS = """
    ResultsTable { background: $surface; }
    ResultsTable > .results--header { text-style: bold; background: $panel; color: $text; }
    ResultsTable > .results--cursor { background: $block-cursor-background; color: $block-cursor-foreground; }
    ResultsTable:blur > .results--cursor { background: $block-cursor-blurred-background; }
    ResultsTable > .results--stripe { background: $surface-lighten-1; }
    ResultsTable > .results--number { color: $text-muted; }
    """

    BINDINGS = [
        Binding("up", "cursor(-1)", show=False),
        Binding("down", "cursor(1)", show=False),
        Binding("pageup", "page(-1)", show=False),
        Binding("pagedown", "page(1)", show=False),
        Binding("home,ctrl+home", "edge(0)", show=False),
        Binding("end,ctrl+end", "edge(1)", show=False),
        Binding("left", "scroll_left", show=False),
        Binding("right", "scroll_right", show=False),
    ]

    cursor_row: reactive[int] = reactive(0, always_update=True)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.columns: list[str] = []
        self.rows: Sequence[Sequence[Any]] = []
        self.widths: list[int] = []
        self.numeric: list[bool] = []
        self._number_width = 1

    # -- data -----------------------------------------------------------------------------

    def set_results(self, columns: Sequence[Any], rows: Sequence[Sequence[Any]]) -> None:
        self.columns = [cell_text(c) for c in columns]
        self.rows = rows
        count = len(rows)
        if count > SAMPLE:
            step = count / SAMPLE
            sample = [rows[int(i * step)] for i in range(SAMPLE)] + [rows[-1]]
        else:
            sample = list(rows)
        self.widths = fitted_widths([max(1, cell_len(c)) for c in self.columns], sample,
                                    lambda value: cell_len(cell_text(value)))
        self.numeric = numeric_columns(sample, len(self.widths))
        self._number_width = len(str(count)) if count else 1
        self.virtual_size = Size(self._line_width(), count + 1)
        self.cursor_row = 0
        self.scroll_to(0, 0, animate=False, immediate=True)
        self.refresh()

    def clear(self) -> None:
        self.set_results([], [])

    def _line_width(self) -> int:
        if not self.widths:
            return 0
        return self._number_width + len(SEP) + sum(self.widths) + len(SEP) * (len(self.widths) - 1)

    # -- rendering ------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        base = self.rich_style
        if not self.columns:
            return Strip.blank(width, base)
        if y == 0:
            cells = [fit(c, w) for c, w in zip(self.columns, self.widths)]
            text = " " * self._number_width + SEP + SEP.join(cells)
            style = base + self.get_component_rich_style("results--header")
            return self._strip([(text, style)], scroll_x, width, style)
        index = scroll_y + y - 1
        if index >= len(self.rows):
            return Strip.blank(width, base)
        row = self.rows[index]
        cells = [fit(cell_text(v), w, right) for v, w, right in zip(row, self.widths, self.numeric)]
        if index == self.cursor_row and self.has_focus:
            style = base + self.get_component_rich_style("results--cursor")
        elif index == self.cursor_row:
            style = base + self.get_component_rich_style("results--cursor")
        elif index % 2:
            style = base + self.get_component_rich_style("results--stripe")
        else:
            style = base
        number_style = style + self.get_component_rich_style("results--number", partial=True)
        return self._strip([(str(index + 1).rjust(self._number_width), number_style),
                            (SEP + SEP.join(cells), style)], scroll_x, width, style)

    @staticmethod
    def _strip(parts: list[tuple[str, Style]], scroll_x: int, width: int, fill: Style) -> Strip:
        strip = Strip([Segment(text, style) for text, style in parts])
        return strip.crop_extend(scroll_x, scroll_x + width, fill)

    # -- cursor ---------------------------------------------------------------------------

    def watch_cursor_row(self, old: int, new: int) -> None:
        self.refresh()

    def _visible_rows(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)

    def _move_to(self, row: int) -> None:
        if not self.rows:
            return
        row = max(0, min(len(self.rows) - 1, row))
        self.cursor_row = row
        top = int(self.scroll_y)
        visible = self._visible_rows()
        if row < top:
            self.scroll_to(y=row, animate=False)
        elif row >= top + visible:
            self.scroll_to(y=row - visible + 1, animate=False)

    def action_cursor(self, step: int) -> None:
        self._move_to(self.cursor_row + step)

    def action_page(self, step: int) -> None:
        self._move_to(self.cursor_row + step * self._visible_rows())

    def action_edge(self, end: int) -> None:
        self._move_to(len(self.rows) - 1 if end else 0)
