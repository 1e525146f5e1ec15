"""The work panes: a live shell for Bash, an editor with a results table for SQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Label, Static, Tree

from icplay.envs.base import HAS_CWD, HAS_SCHEMA, capabilities_of, observation_parts
from icplay.episode import Turn
from icplay.study.rules import FREE
from icplay.tui.gridtext import FORMATS, format_for
from icplay.tui.keys import bindings, keys_for
from icplay.tui.screens.modals import HistoryScreen, SaveScreen
from icplay.tui.shown import safe, shown
from icplay.tui.sqltext import offset_of, statement_at
from icplay.tui.widgets.code_area import CodeArea
from icplay.tui.widgets.command import CommandInput, History
from icplay.tui.widgets.output import OutputPane
from icplay.tui.widgets.panels import short_duration
from icplay.tui.widgets.results import ResultsTable
from icplay.tui.widgets.turn_output import finish_turn, turn_status, write_saved_turns


class WorkPane(Vertical):
    """What every pane offers the play screen (a language's spec names its pane class)."""

    def __init__(self, frozen: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.frozen = frozen      # a screenshot's pane: no durations that change from run to run

    @classmethod
    def build(cls, app: Any, frozen: bool = False, id: str = "pane") -> "WorkPane":
        """The pane for the app's settings (its config, its command histories)."""
        return cls(frozen=frozen, id=id)

    def policy_info(self, config: Any) -> dict:
        """What the trajectory's policy block records about how the human worked."""
        return {}

    def output_feed(self):
        """A callable that shows output as it streams, or None when the pane shows it at the end."""
        return None

    class Run(Message):
        """The human wants this action run as the next turn."""

        def __init__(self, action: str) -> None:
            super().__init__()
            self.action = action

    def focus_input(self) -> None: ...

    def set_input(self, text: str) -> None:
        """Put ``text`` in the input, the cursor at its end (a proposal to edit)."""

    def set_busy(self, busy: bool) -> None: ...

    def set_done(self) -> None: ...

    def show_turns(self, turns: list[Turn]) -> None: ...

    def turn_started(self, action: str) -> None: ...

    def turn_finished(self, turn: Turn | None) -> None: ...

    def env_ready(self, env: Any) -> None: ...


class BashPane(WorkPane):
    DEFAULT_CSS = """
    BashPane { height: 1fr; }
    BashPane #output { height: 1fr; border: round $secondary; }
    BashPane #prompt-row { height: auto; max-height: 8; border: round $primary; }
    BashPane #prompt-row:focus-within { border: round $accent; }
    BashPane #prompt { width: auto; color: $success; text-style: bold; padding: 0 1 0 0; }
    BashPane #run-status { height: auto; max-height: 3; color: $text-muted; padding: 0 1; }
    """

    @classmethod
    def build(cls, app: Any, frozen: bool = False, id: str = "pane") -> "BashPane":
        return cls(app.history_for("bash"), frozen=frozen, id=id)

    def output_feed(self):
        return self.output.feed.feed

    def __init__(self, history: History, frozen: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.history = history
        self.frozen = frozen
        self.cwd = "/testbed"

    def compose(self) -> ComposeResult:
        output = OutputPane(id="output")
        output.border_title = "Shell"
        yield output
        with Horizontal(id="prompt-row"):
            yield Label(Text(self.prompt_text()), id="prompt")
            command = CommandInput(self.history, id="command", placeholder="type a command · Enter runs it")
            if self.frozen:
                command.cursor_blink = False     # snapshots: the cursor is always drawn
            yield command
        yield Static("", id="run-status")

    @property
    def output(self) -> OutputPane:
        return self.query_one(OutputPane)

    @property
    def command(self) -> CommandInput:
        return self.query_one(CommandInput)

    def prompt_text(self) -> str:
        """The prompt: the shell's folder (the solver names it: shown as text, escapes and all)."""
        return f"{safe(self.cwd)}$"

    def focus_input(self) -> None:
        self.command.focus()

    def set_input(self, text: str) -> None:
        self.command.set_command(text)

    def set_busy(self, busy: bool) -> None:
        self.command.busy = busy

    def set_done(self) -> None:
        self.command.read_only = True
        self.command.load_text("")
        self.command.placeholder = "submitted · F9 score · Ctrl+N next task · F8 retry"

    def set_status(self, text: str | Text) -> None:
        self.query_one("#run-status", Static).update(text)

    def env_ready(self, env: Any) -> None:
        cwd = env.cwd if HAS_CWD in capabilities_of(env) else None
        if cwd:
            self.cwd = cwd
            self.query_one("#prompt", Label).update(Text(self.prompt_text()))

    def on_command_input_run(self, message: CommandInput.Run) -> None:
        message.stop()
        self.post_message(self.Run(message.command))

    def show_turns(self, turns: list[Turn]) -> None:
        """Write saved turns into the pane (after a resume), newest last."""
        write_saved_turns(self.output, turns, lambda action: self.output.write_command("$", action))

    def turn_started(self, action: str) -> None:
        self.command.accepted(action)
        self.output.write_command(self.prompt_text(), action)
        self.output.start_stream()

    def turn_finished(self, turn: Turn | None) -> None:
        output = self.output
        finish_turn(output, turn)
        if turn is None:
            return
        if turn.exit_code not in (0, None) and not turn.info.get("interrupted") and not turn.info.get("timed_out"):
            output.write_note(f"[exit {turn.exit_code}]", style="red")
        cwd = (turn.info or {}).get("cwd")
        if cwd:
            self.cwd = cwd
            self.query_one("#prompt", Label).update(Text(self.prompt_text()))
        verdict = ("exit 0", "green") if turn.exit_code == 0 else (f"exit {turn.exit_code}", "red")
        self.set_status(turn_status(turn, verdict, self.frozen))


class SqlEditor(CodeArea):
    """The SQL editor: F5 / Ctrl+Enter / Ctrl+J runs the statement under the cursor; Ctrl+Up and
    Ctrl+Down walk the queries run before (``query_history``, None when a study turns it off),
    Ctrl+R searches them; the grid keys (copy, save) are the pane's."""

    BINDINGS = bindings("sql")

    class RunStatement(Message):
        def __init__(self, sql: str) -> None:
            super().__init__()
            self.sql = sql

    class ToggleSchema(Message):
        pass

    class FocusResults(Message):
        pass

    def __init__(self, **kwargs):
        super().__init__(language="sql", soft_wrap=True, show_line_numbers=True, tab_behavior="indent",
                         **kwargs)
        self.busy = False
        self.query_history: History | None = None
        self._browse: int | None = None     # the history item shown (Ctrl+Up), None: what was typed
        self._draft = ""

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action in ("run", "history") and self.read_only:
            return False
        return True

    def action_history(self, step: int) -> None:
        """The query run before (``step`` -1) or after (+1) the one shown; past the newest, the draft."""
        history = self.query_history
        if history is None:
            self.notify("This study keeps no query history (rules.query_history = false).", severity="warning")
            return
        items = history.items
        if self._browse is None:
            if step > 0 or not items:
                return
            self._draft, self._browse = self.text, len(items)
        self._browse = max(0, min(len(items), self._browse + step))
        self.load_text(items[self._browse] if self._browse < len(items) else self._draft)
        if self._browse >= len(items):
            self._browse = None
        self.move_cursor(self.document.end)

    def action_search_history(self) -> None:
        history = self.query_history
        if history is None:
            self.notify("This study keeps no query history (rules.query_history = false).", severity="warning")
            return

        def chosen(value: str | None) -> None:
            if value is not None:
                self.load_text(value)
                self._browse = None
                self.move_cursor(self.document.end)
            self.focus()

        self.app.push_screen(HistoryScreen(list(reversed(history.items)), self.selected_text.strip(),
                                           what="query"), chosen)

    def action_copy_result(self, fmt: str = "csv") -> None:
        self.query_ancestor(SqlPane).action_copy_result(fmt)

    def action_save_result(self) -> None:
        self.query_ancestor(SqlPane).action_save_result()

    def current_statement(self) -> str:
        if self.selected_text.strip():
            return self.selected_text.strip().rstrip(";").strip()
        row, column = self.cursor_location
        return statement_at(self.text, offset_of(self.text, row, column))

    def action_run(self) -> None:
        sql = self.current_statement()
        if sql:
            self.post_message(self.RunStatement(sql))

    def action_toggle_schema(self) -> None:
        self.post_message(self.ToggleSchema())

    def action_focus_results(self) -> None:
        self.post_message(self.FocusResults())


def column_label(column: Any) -> Text:
    """A column (an object or a dict with a name and a type, or just a name) as the schema
    tree lists it: its name, then its type dimmed."""
    cname = getattr(column, "name", None) or (column.get("name") if isinstance(column, dict) else column)
    ctype = getattr(column, "type", None) or (column.get("type", "") if isinstance(column, dict) else "")
    label = shown(cname)
    if ctype:
        label.append(f" {safe(ctype)}", style="dim")
    return label


class SchemaTree(Tree):
    DEFAULT_CSS = """
    SchemaTree { width: 30; border: round $secondary; }
    SchemaTree:focus { border: round $accent; }
    """

    def __init__(self, **kwargs):
        super().__init__("schema", **kwargs)
        self.show_root = False
        self.border_title = "Schema"

    def set_schema(self, tables: list[Any]) -> None:
        self.clear()
        for table in tables:
            name = getattr(table, "name", None) or (table.get("name") if isinstance(table, dict) else str(table))
            columns = getattr(table, "columns", None)
            if columns is None and isinstance(table, dict):
                columns = table.get("columns", [])
            node = self.root.add(shown(name, style="bold"), expand=False)
            for column in columns or []:
                node.add_leaf(column_label(column))
        self.root.expand()


def statement_done(count: int | None) -> Text:
    """A statement without a result set: how many rows it changed, and that a submit now scores 0."""
    text = Text("Statement done" + (f": {count} rows affected" if count is not None and count >= 0 else ""),
                style="green")
    text.append("  (no result set: a submit now would score 0)", style="dim")
    return text


DEFAULT_GRID_FILE = "result.csv"      # the save dialog's first offer (in the current folder)


class SqlPane(WorkPane):
    DEFAULT_CSS = """
    SqlPane { height: 1fr; }
    SqlPane #editor-row { height: 2fr; min-height: 5; max-height: 14; }
    SqlPane #editor { height: 1fr; border: round $primary; }
    SqlPane #editor:focus { border: round $accent; }
    SqlPane #result-info { height: auto; max-height: 6; padding: 0 1; }
    SqlPane #result-info.error { color: $error; }
    SqlPane #results { height: 3fr; min-height: 4; border: round $secondary; }
    SqlPane #results:focus { border: round $accent; }
    SqlPane.-no-schema #schema { display: none; }
    """

    # the grid's keys, here too for when the results table has the focus
    BINDINGS = [key.binding() for key in keys_for("sql") if key.id in ("sql.copy", "sql.copy_markdown", "sql.save")]

    @classmethod
    def build(cls, app: Any, frozen: bool = False, id: str = "pane") -> "SqlPane":
        config = app.config
        rules = getattr(app, "rules", FREE)
        history = app.history_for("sql") if rules.query_history else None
        return cls(show_schema=config.show_schema, schema_allowed=not config.strict, frozen=frozen, id=id,
                   history=history)

    def policy_info(self, config: Any) -> dict:
        """What help the human had, recorded in the episode: a baseline says it."""
        return {"schema_browser": not config.strict, "query_history": self.history is not None}

    def __init__(self, show_schema: bool = True, schema_allowed: bool = True, frozen: bool = False,
                 history: History | None = None, **kwargs):
        super().__init__(**kwargs)
        self.schema_allowed = schema_allowed
        self.frozen = frozen
        self.history = history
        self.set_class(not (show_schema and schema_allowed), "-no-schema")

    def compose(self) -> ComposeResult:
        with Horizontal(id="editor-row"):
            editor = SqlEditor(id="editor", placeholder="SELECT ...;  F5 or Ctrl+Enter runs the statement "
                                                        "under the cursor")
            editor.border_title = "SQL"
            editor.query_history = self.history
            if self.frozen:
                editor.cursor_blink = False
            yield editor
            yield SchemaTree(id="schema")
        yield Static("", id="result-info")
        results = ResultsTable(id="results")
        results.border_title = "Result"
        yield results

    @property
    def editor(self) -> SqlEditor:
        return self.query_one(SqlEditor)

    def set_input(self, text: str) -> None:
        self.editor.load_text(text)
        self.editor.move_cursor(self.editor.document.end)

    @property
    def results(self) -> ResultsTable:
        return self.query_one(ResultsTable)

    def focus_input(self) -> None:
        self.editor.focus()

    def set_busy(self, busy: bool) -> None:
        self.editor.busy = busy

    def set_done(self) -> None:
        self.editor.read_only = True

    def set_status(self, text: str | Text) -> None:
        info = self.query_one("#result-info", Static)
        info.remove_class("error")
        info.update(text)

    def env_ready(self, env: Any) -> None:
        schema = env.schema if HAS_SCHEMA in capabilities_of(env) else None
        if self.schema_allowed and schema is not None:
            self.app.run_worker(lambda: self._load_schema(schema), thread=True, group="schema",
                                exit_on_error=False)

    class SchemaLoaded(Message):
        def __init__(self, tables: list[Any], error: str | None = None) -> None:
            super().__init__()
            self.tables = tables
            self.error = error

    def _load_schema(self, schema) -> None:
        """On a worker thread. The tables travel as a Message: a thread that waited for the
        UI (``call_from_thread``) could wait forever once the app is closing."""
        try:
            tables = schema()
        except Exception as exc:   # a worker thread; any backend's error (a plug-in's too): said, and
            self.post_message(self.SchemaLoaded([], f"{type(exc).__name__}: {exc}"))   # the episode goes on
            return
        self.post_message(self.SchemaLoaded(tables))

    def on_sql_pane_schema_loaded(self, message: "SqlPane.SchemaLoaded") -> None:
        message.stop()
        if message.error is not None:
            self.notify(message.error, title="No schema", severity="warning", markup=False)
            return
        self.query_one(SchemaTree).set_schema(message.tables)

    def on_sql_editor_run_statement(self, message: SqlEditor.RunStatement) -> None:
        message.stop()
        if self.history is not None:
            self.history.add(message.sql)
        self.editor._browse = None
        self.post_message(self.Run(message.sql))

    # -- the result grid, copied or saved --------------------------------------------------------

    def grid_text(self, fmt: str) -> str | None:
        """The grid shown as ``fmt`` (icplay.tui.gridtext.FORMATS); None (said) when there is none."""
        results = self.results
        if not results.columns:
            self.notify("No result grid to copy or save: run a query that returns rows first.", severity="warning")
            return None
        return FORMATS[fmt][1](results.columns, results.rows)

    def action_copy_result(self, fmt: str = "csv") -> None:
        text = self.grid_text(fmt)
        if text is not None:
            self.app.copy_to_clipboard(text)
            rows = len(self.results.rows)
            self.notify(f"Copied {rows} row{'s' if rows != 1 else ''} as {'Markdown' if fmt == 'markdown' else 'CSV'} "
                        "(the terminal puts it on the clipboard).", timeout=4, markup=False)

    def action_save_result(self) -> None:
        if self.grid_text("csv") is None:
            return

        def chosen(path: str | None) -> None:
            if path:
                self.save_grid(path)

        self.app.push_screen(SaveScreen(DEFAULT_GRID_FILE), chosen)

    def save_grid(self, name: str) -> None:
        """The grid written to ``name`` (CSV, or Markdown for .md): said where, or why not, in one line."""
        path = Path(name).expanduser()
        fmt = format_for(path.name)
        text = self.grid_text(fmt)
        if text is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8", errors="replace")
        except OSError as exc:
            self.notify(f"Cannot save the grid to {path}: {exc.strerror or exc}.", title="Not saved",
                        severity="error", markup=False)
            return
        self.notify(f"Saved {len(self.results.rows)} rows to {path} ({'Markdown' if fmt == 'markdown' else 'CSV'}).",
                    timeout=6, markup=False)

    def on_sql_editor_toggle_schema(self, message: SqlEditor.ToggleSchema) -> None:
        message.stop()
        self.toggle_schema()

    def on_sql_editor_focus_results(self, message: SqlEditor.FocusResults) -> None:
        message.stop()
        self.results.focus()

    def toggle_schema(self) -> None:
        if not self.schema_allowed:
            self.notify("The schema browser is off in strict mode (strict = true in config.toml).",
                        severity="warning")
            return
        self.toggle_class("-no-schema")

    def show_turns(self, turns: list[Turn]) -> None:
        if self.history is not None:        # a resumed episode's queries are recallable too
            known = set(self.history.items)
            for turn in turns:
                if turn.action and turn.action not in known:
                    self.history.add(turn.action)
        last = next((t for t in reversed(turns) if t.action), None)
        if last is not None:
            self.turn_finished(last)
            if not self.editor.text.strip():
                self.editor.load_text(last.action)
                self.editor.move_cursor(self.editor.document.end)

    def turn_started(self, action: str) -> None:
        self.set_status(Text("running…", style="dim"))

    def turn_finished(self, turn: Turn | None) -> None:
        if turn is None:
            return
        info = turn.info or {}
        status = self.query_one("#result-info", Static)
        error = info.get("error")
        if error or turn.observation.startswith("Error executing query"):
            self.results.clear()
            status.update(shown(observation_parts(turn.observation, info)[0].strip() or str(error)))
            status.add_class("error")
            return
        status.remove_class("error")
        columns = info.get("columns")
        if columns is None:
            self.results.clear()
            status.update(statement_done(info.get("rowcount", -1)))
            return
        rows = info.get("rows") or []
        self.results.set_results(columns, rows)
        status.update(self._result_line(turn, columns, rows))

    def _result_line(self, turn: Turn, columns: list, rows: list) -> Text:
        """The result set's size, whether it was cut, how long it took (not in a frozen
        screenshot) and the statement's notes."""
        info = turn.info or {}
        text = Text(f"{len(rows):,} row{'s' if len(rows) != 1 else ''}", style="bold")
        text.append(f" · {len(columns)} column{'s' if len(columns) != 1 else ''}")
        if info.get("truncated"):
            text.append(f" · truncated: only the first {len(rows):,} rows were kept", style="yellow")
        if not self.frozen:
            text.append(f" · {short_duration(turn.duration)}", style="dim")
        for note in observation_parts(turn.observation, info)[1]:
            if "truncated" not in note:
                text.append(safe(f"\n[{note}]"), style="yellow")
        return text
