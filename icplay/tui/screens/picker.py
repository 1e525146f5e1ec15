"""The task picker: task sets on the left, the chosen set's tasks with the session's progress."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, OptionList, Static
from textual.widgets.data_table import ColumnKey
from textual.widgets.option_list import Option

from icplay.session import IN_PROGRESS, SOLVED, SUBMITTED, Progress, TaskStatus, attempts_line, format_duration
from icplay.tasks.model import Task
from icplay.tui.keys import bindings
from icplay.tui.shown import safe, shown
from icplay.tui.widgets.footer import KeysFooter
from icplay.tui.widgets.panels import StatusBar

if TYPE_CHECKING:   # the app imports this screen: its type only, for the checker
    from icplay.tui.app import PlayApp

STATE_LABEL = {
    SOLVED: ("✓", "green"),
    SUBMITTED: ("✗", "yellow"),
    IN_PROGRESS: ("▶", "cyan"),
}


def compact_duration(seconds: float) -> str:
    """At most five characters: MM:SS, then 1h23m."""
    if seconds < 3600:
        return format_duration(seconds)
    hours, minutes = divmod(int(seconds) // 60, 60)
    return f"{hours}h{minutes:02d}" if hours < 10 else f"{hours}h"


class PickerScreen(Screen):
    BINDINGS = bindings("picker")

    def __init__(self, initial_set: str | None = None) -> None:
        super().__init__()
        self.initial_set = initial_set
        self.current_set: str | None = None
        self._progress: Progress | None = None
        self.tasks: list[Task] = []

    @property
    def playground(self) -> PlayApp:
        """The app this screen runs in (its catalog, session and navigation)."""
        return cast("PlayApp", self.app)

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        with Horizontal(id="picker-body"):
            sets = OptionList(id="sets")
            sets.border_title = "Task sets"
            yield sets
            with Vertical(id="picker-main"):
                table: DataTable[str | Text] = DataTable(id="tasks", cursor_type="row", zebra_stripes=True)
                table.border_title = "Tasks"
                yield table
                preview = Static("", id="preview")
                preview.border_title = "Query"
                yield preview
        yield KeysFooter(compact=True)

    def on_mount(self) -> None:
        table = self.query_one("#tasks", DataTable)
        table.add_column("id", key="id")
        table.add_column("level", key="level", width=6)
        table.add_column("status", key="status", width=10)
        table.add_column("time", key="time", width=5)
        table.add_column("query", key="query", width=40)
        sets = self.query_one("#sets", OptionList)
        choices = self.playground.catalog.sets()
        for entry in choices:
            label = shown(entry.name, style="bold")
            label.append(f"  {safe(entry.env)}", style="dim")
            if not entry.available:
                label.append("\n  not installed", style="red dim")
            elif entry.needs_image:
                label.append("\n  needs --image", style="yellow dim")
            sets.add_option(Option(label, id=entry.name, disabled=not entry.available))
        wanted = self.initial_set or next((e.name for e in choices if e.available), None)
        if wanted is not None:
            index = next((i for i, e in enumerate(choices) if e.name == wanted), 0)
            sets.highlighted = index
            self.show_set(wanted)
        table.focus()

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option.id and event.option.id != self.current_set:
            self.show_set(event.option.id)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id:
            self.show_set(event.option.id)
            self.query_one("#tasks", DataTable).focus()

    def show_set(self, name: str) -> None:
        try:
            tasks = self.playground.catalog.tasks(name)
        except ValueError as exc:
            self.notify(safe(exc), title="Cannot load the task set", severity="error", markup=False)
            return
        if name != self.current_set:
            self.query_one("#tasks", DataTable).move_cursor(row=0)
        self.current_set = name
        self.tasks = tasks
        entry = next((e for e in self.playground.catalog.sets() if e.name == name), None)
        if entry is not None:
            self.query_one("#tasks", DataTable).border_title = shown(f"Tasks · {entry.description}")
        self.refresh_tasks()

    def refresh_tasks(self) -> None:
        table = self.query_one("#tasks", DataTable)
        keep = table.cursor_row
        table.clear()
        progress = self._progress = self.playground.session.progress(self.tasks)
        query_width = self._query_width()
        table.columns[ColumnKey("query")].width = query_width
        for task in self.tasks:
            status = progress.by_task.get(task.key, TaskStatus())
            label, style = STATE_LABEL.get(status.state, ("", ""))
            if status.state == IN_PROGRESS:
                label = f"▶ {status.turns} turn{'s' if status.turns != 1 else ''}"
            elif status.reward is not None:
                label = f"{label} {status.reward:.2f}"
            if len(status.attempts) > 1:
                label = f"{label} ×{len(status.attempts)}"     # the attempts; the preview lists each
            worked = compact_duration(status.time_worked) if status.time_worked else ""
            query = safe(" ".join(task.query.split()))
            if len(query) > query_width:
                query = query[:query_width - 1] + "…"
            table.add_row(shown(task.id), shown(task.hardness or ""), Text(label, style=style), worked, Text(query),
                          key=task.key)
        if self.tasks:
            table.move_cursor(row=min(keep, len(self.tasks) - 1))
        table.border_subtitle = Text(f"{len(self.tasks)} tasks")
        self.query_one(StatusBar).show(safe(f"icplay · session {self.playground.session.name}"),
                                       [safe(f"{self.current_set}: {progress.parts()[0]}"), *progress.parts()[1:]])
        self._preview()

    def _query_width(self) -> int:
        table = self.query_one("#tasks", DataTable)
        id_width = max([len(t.id) for t in self.tasks] + [2])
        table.columns[ColumnKey("id")].auto_width = False
        table.columns[ColumnKey("id")].width = id_width
        others = id_width + 6 + 10 + 5          # id, level, status, time
        available = (table.scrollable_content_region.width or 80) - others - 2 * 5 - 1
        return max(12, available)

    def on_resize(self, event: events.Resize) -> None:
        if self.current_set is not None and self.tasks:
            self.call_after_refresh(self.refresh_tasks)

    def _preview(self) -> None:
        table = self.query_one("#tasks", DataTable)
        preview = self.query_one("#preview", Static)
        if not self.tasks:
            preview.update("")
            return
        task = self.tasks[min(table.cursor_row, len(self.tasks) - 1)]
        head = shown(task.key, style="bold")
        if task.hardness:
            head.append(f" · {safe(task.hardness)}")
        if task.db:
            head.append(f" · database {safe(task.db)}")
        head.append("\n")
        attempts = self._progress.by_task.get(task.key, TaskStatus()).attempts if self._progress else []
        if len(attempts) > 1:
            head.append(f"{len(attempts)} attempts: {attempts_line(attempts)}\n", style="dim")
        head.append(safe(task.query))
        preview.update(head)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._preview()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_task()

    def action_open_task(self) -> None:
        if not self.tasks:
            return
        table = self.query_one("#tasks", DataTable)
        self.playground.open_task(self.tasks[table.cursor_row])

    def action_watch_task(self) -> None:
        """Let an agent try the highlighted task (config.toml [agent], or the last use)."""
        if not self.tasks:
            return
        table = self.query_one("#tasks", DataTable)
        self.playground.open_watch(self.tasks[table.cursor_row])

    def action_focus_sets(self) -> None:
        self.query_one("#sets", OptionList).focus()

    def action_focus_tasks(self) -> None:
        self.query_one("#tasks", DataTable).focus()

    def action_next_task(self) -> None:
        if not self.tasks:
            return
        progress = self.playground.session.progress(self.tasks)
        for task in self.tasks:
            if progress.by_task[task.key].state not in (SOLVED, SUBMITTED):
                self.playground.open_task(task)
                return
        self.notify("Every task of this set is submitted.")

    def on_screen_resume(self, event: events.ScreenResume) -> None:
        if self.current_set is not None:
            self.refresh_tasks()
