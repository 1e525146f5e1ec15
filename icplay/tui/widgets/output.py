"""The shell pane's output: streamed from a worker thread, stored as lines, drawn lazily.

Two things keep a flood (``yes``, ``seq 1 2000000``) from freezing the UI:

- The worker only appends text to an ``OutputFeed`` (a lock and a list: no Textual call
  per chunk). A timer on the UI thread drains it every ``FLUSH_EVERY`` seconds, at most
  ``MAX_WRITE`` characters per tick; when a command writes faster than the pane can
  take, the feed keeps only the newest ``MAX_PENDING`` characters and the pane says how
  much it skipped (the turn's observation keeps everything the sandbox kept).
- ``OutputPane`` stores raw lines and turns a line into styled cells (ANSI colours
  parsed, soft-wrapped) only when it is on screen (Textual's Line API, ``render_line``),
  with a small cache. Appending 100 000 lines costs a split and a length per line; Rich's
  full layout of the text, which RichLog does on every write, is never done.
"""

from __future__ import annotations

import re
import threading
from bisect import bisect_right
from collections.abc import Iterable
from typing import Union

from rich.cells import cell_len, chop_cells
from rich.text import Text
from textual.cache import LRUCache
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.timer import Timer

from icplay.tui.shown import ansi_safe, safe, shown

FLUSH_EVERY = 0.05
MAX_WRITE = 200_000
MAX_PENDING = 400_000
MAX_LINES = 10_000

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")

Line = Union[str, Text]


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text) if "\x1b" in text else text


def clean_line(line: str) -> str:
    """What a terminal would leave of a line: the text after the last carriage return
    (progress bars), tabs expanded; control and bidirectional characters as escapes (colour
    sequences are parsed when the line is drawn)."""
    if "\r" in line:
        parts = [p for p in line.split("\r") if p]
        line = parts[-1] if parts else ""
    if "\t" in line:
        line = line.expandtabs(8)
    return ansi_safe(line)


class OutputFeed:
    """Thread-safe text buffer between a worker (``feed``) and the UI timer (``take``)."""

    def __init__(self, max_pending: int = MAX_PENDING):
        self._lock = threading.Lock()
        self._parts: list[str] = []
        self._size = 0
        self.max_pending = max_pending
        self.skipped = 0          # characters dropped since the last take

    def feed(self, text: str) -> None:
        with self._lock:
            self._parts.append(text)
            self._size += len(text)
            if self._size > self.max_pending * 2:
                joined = "".join(self._parts)
                keep = joined[-self.max_pending:]
                self.skipped += len(joined) - len(keep)
                self._parts, self._size = [keep], len(keep)

    def take(self, limit: int, final: bool = False) -> tuple[str, int]:
        """Up to ``limit`` characters ending at a line break (everything when ``final``)."""
        with self._lock:
            if not self._parts:
                skipped, self.skipped = self.skipped, 0
                return "", skipped
            joined = "".join(self._parts)
            if len(joined) > self.max_pending:
                self.skipped += len(joined) - self.max_pending
                joined = joined[-self.max_pending:]
                cut = joined.find("\n")
                if 0 <= cut < 200:
                    self.skipped += cut + 1
                    joined = joined[cut + 1:]
            if final:
                head, rest = joined, ""
            else:
                end = joined.rfind("\n", 0, limit) + 1
                if end == 0:
                    # No line break within the limit: a very long line, or a partial one.
                    end = limit if len(joined) >= limit else 0
                head, rest = joined[:end], joined[end:]
            self._parts, self._size = ([rest], len(rest)) if rest else ([], 0)
            skipped, self.skipped = self.skipped, 0
            return head, skipped

    def pending(self) -> int:
        with self._lock:
            return self._size


class OutputPane(ScrollView, can_focus=True):
    """A terminal-like log: command echoes, live output with ANSI colour, notes."""

    DEFAULT_CSS = """
    OutputPane { background: $surface; scrollbar-size-vertical: 1; overflow-x: hidden; }
    """

    def __init__(self, max_lines: int = MAX_LINES, **kwargs):
        super().__init__(**kwargs)
        self.max_lines = max_lines
        self.feed = OutputFeed()
        self.chars_written = 0
        self._lines: list[Line] = []
        self._rows: list[int] = []        # wrapped rows of each line
        self._starts: list[int] = []      # first row of each line
        self._total = 0                   # rows in all
        self._first_id = 0                # absolute id of self._lines[0] (for the cache)
        self._width = 0
        self._cache: LRUCache[tuple[int, int, int], Strip] = LRUCache(512)
        self._timer: Timer | None = None

    # -- streaming ------------------------------------------------------------------------

    def on_mount(self) -> None:
        self._timer = self.set_interval(FLUSH_EVERY, self.flush, pause=True)

    def start_stream(self) -> None:
        self.feed = OutputFeed()
        if self._timer is not None:
            self._timer.resume()

    def end_stream(self) -> None:
        """Write what is left (the command finished) and stop the timer."""
        if self._timer is not None:
            self._timer.pause()
        while self.feed.pending():
            self.flush(final=True)
        self.flush(final=True)

    def flush(self, final: bool = False) -> None:
        text, skipped = self.feed.take(MAX_WRITE, final=final)
        if skipped:
            self.write(Text(f"… {skipped:,} characters not shown here (the turn keeps the full output) …",
                            style="italic dim"))
        if text:
            self.chars_written += len(text)
            self.write_ansi(text[:-1] if text.endswith("\n") else text)

    # -- writing --------------------------------------------------------------------------

    @property
    def line_count(self) -> int:
        return len(self._lines)

    def plain_lines(self) -> list[str]:
        return [strip_ansi(line) if isinstance(line, str) else line.plain for line in self._lines]

    def write_ansi(self, text: str) -> None:
        """Append raw output (ANSI escapes kept); a final partial line is a line too."""
        if not text:
            return
        self._append([clean_line(line) for line in text.split("\n")])

    def write(self, text: Text) -> None:
        self._append(text.split("\n") if "\n" in text.plain else [text])

    def write_command(self, prompt: str, action: str) -> None:
        line = Text()
        line.append(safe(prompt), style="bold green")
        line.append(" ")
        line.append(safe(action), style="bold")
        self.write(line)

    def write_note(self, text: str, style: str = "yellow") -> None:
        self.write(shown(text, style=style))

    def clear(self) -> None:
        self._first_id += len(self._lines)
        self._lines, self._rows, self._starts, self._total = [], [], [], 0
        self._cache.clear()
        self.virtual_size = Size(self._width, 0)
        self.refresh()

    def _append(self, lines: Iterable[Line]) -> None:
        follow = self.is_vertical_scroll_end or self.max_scroll_y == 0
        width = self._width or max(1, self.scrollable_content_region.width) or 80
        self._width = width
        for line in lines:
            rows = self._count_rows(line, width)
            self._lines.append(line)
            self._rows.append(rows)
            self._starts.append(self._total)
            self._total += rows
        if len(self._lines) > self.max_lines + self.max_lines // 10:
            drop = len(self._lines) - self.max_lines
            del self._lines[:drop]
            del self._rows[:drop]
            self._first_id += drop
            self._recount(width)
        self.virtual_size = Size(width, self._total)
        if follow:
            self.scroll_end(animate=False, immediate=False, x_axis=False)
        self.refresh()

    @staticmethod
    def _count_rows(line: Line, width: int) -> int:
        plain = line.plain if isinstance(line, Text) else strip_ansi(line)
        if plain.isascii():
            return max(1, -(-len(plain) // width))
        return max(1, len(chop_cells(plain, width)))

    def _recount(self, width: int) -> None:
        self._rows = [self._count_rows(line, width) for line in self._lines]
        self._starts, total = [], 0
        for rows in self._rows:
            self._starts.append(total)
            total += rows
        self._total = total
        self._cache.clear()

    def on_resize(self) -> None:
        width = max(1, self.scrollable_content_region.width)
        if width != self._width:
            follow = self.is_vertical_scroll_end
            self._width = width
            self._recount(width)
            self.virtual_size = Size(width, self._total)
            if follow:
                self.scroll_end(animate=False, immediate=False, x_axis=False)

    # -- drawing --------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        row = int(self.scroll_offset.y) + y
        base = self.rich_style
        if row >= self._total or not self._lines:
            return Strip.blank(width, base)
        index = bisect_right(self._starts, row) - 1
        part = row - self._starts[index]
        key = (self._first_id + index, part, width)
        strip = self._cache.get(key)
        if strip is None:
            strip = self._render_part(self._lines[index], part, width)
            self._cache[key] = strip
        return strip.apply_style(base)

    def _render_part(self, line: Line, part: int, width: int) -> Strip:
        text = line if isinstance(line, Text) else Text.from_ansi(line) if "\x1b" in line else Text(line)
        plain = text.plain
        if cell_len(plain) > width:
            if plain.isascii():
                start, end = part * width, (part + 1) * width
            else:
                pieces = chop_cells(plain, width)
                start = sum(len(p) for p in pieces[:part])
                end = start + len(pieces[part]) if part < len(pieces) else start
            text = text[start:end]
        segments = [s for s in text.render(self.app.console) if s.text != "\n"]
        return Strip(segments).crop_extend(0, width, None)
