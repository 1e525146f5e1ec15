"""The Python pane: an editor with Python highlighting over the interpreter's output.

Enter works as in Python's REPL: a complete one-line statement runs; a line that opens a
block (ending with ':') or a line inside a block inserts a new, indented line, and Enter
on an empty line runs the block. F5 / Ctrl+Enter / Ctrl+J runs everything in the editor
at once (a whole ``def`` with blank lines inside, several statements).

The indentation Enter adds is a guess that the user's own wins over: spaces typed (or a
block pasted) at the start of a line that holds only Enter's indentation replace it, so a
block typed with its own indentation (or sent by a terminal without bracketed paste) keeps
it instead of doubling it. Backspace in the indentation removes a level; Ctrl+A selects all.
"""

from __future__ import annotations

import textwrap
from typing import Any

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.message import Message
from textual.widgets import Static

from icplay.episode import Turn
from icplay.tui.keys import active_keys, bindings
from icplay.tui.widgets.code_area import CodeArea
from icplay.tui.widgets.output import OutputPane
from icplay.tui.widgets.panes import WorkPane
from icplay.tui.widgets.turn_output import finish_turn, turn_status, write_saved_turns


def opens_block(line: str) -> bool:
    stripped = line.split("#", 1)[0].rstrip()
    return stripped.endswith(":") or line.lstrip().startswith("@")


def ends_block(line: str) -> bool:
    """A line after which the block goes on one level less (``return``, ``pass``, ...)."""
    words = line.split("#", 1)[0].split()
    return bool(words) and words[0] in ("return", "pass", "raise", "break", "continue")


INDENT = "    "


def enter_runs(text: str, row: int) -> bool:
    """Does Enter run the editor's text (else it inserts a line)? The REPL's rule."""
    lines = text.split("\n")
    if not text.strip():
        return False
    if len(lines) == 1:
        return not opens_block(lines[0]) and not lines[0].rstrip().endswith("\\")
    # a block: Enter on its last line, when that line is empty, runs it
    return row == len(lines) - 1 and not lines[-1].strip()


class PythonEditor(CodeArea):
    """The code being written; posts ``PythonEditor.Run`` with the code to run."""

    BINDINGS = bindings("python")

    class Run(Message):
        def __init__(self, code: str) -> None:
            super().__init__()
            self.code = code

    def __init__(self, **kwargs):
        super().__init__(language="python", soft_wrap=True, show_line_numbers=True, tab_behavior="indent",
                         **kwargs)
        self._auto_indent: tuple[int, str] | None = None   # (row, indent) that Enter put there

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action == "run" and self.read_only:
            return False
        return True

    def action_run(self) -> None:
        # the indent Enter left on the last line goes; a block copied from inside a class
        # or function runs at the top level
        code = textwrap.dedent(self.text.rstrip().lstrip("\n"))
        if code.strip():
            self.post_message(self.Run(code))

    async def _on_key(self, event: events.Key) -> None:
        if event.key in active_keys(self.app, "python.enter"):
            event.stop()
            event.prevent_default()
            self.action_enter()
            return
        if event.key == "backspace" and not self.read_only and self._dedent():
            event.stop()
            event.prevent_default()
            return
        if event.character == " ":
            self._drop_auto_indent()
        else:
            self._auto_indent = None
        await super()._on_key(event)

    async def _on_paste(self, event: events.Paste) -> None:
        # (runs before TextArea's own _on_paste, which Textual calls next and inserts the text)
        if event.text[:1].isspace() or "\n" in event.text:   # the text brings its own indentation
            self._drop_auto_indent()

    def _drop_auto_indent(self) -> None:
        """Remove the indentation Enter added when the line still holds only that and the
        cursor is at its end: the user is typing or pasting their own."""
        auto, self._auto_indent = self._auto_indent, None
        if auto is None or not self.selection.is_empty:
            return
        row, indent = auto
        if self.cursor_location == (row, len(indent)) and self.document.get_line(row) == indent:
            self.delete((row, 0), (row, len(indent)))

    def _dedent(self) -> bool:
        """Backspace in a line's leading spaces removes one level (to the previous multiple of 4)."""
        if not self.selection.is_empty:
            return False
        row, column = self.cursor_location
        before = self.document.get_line(row)[:column]
        if column == 0 or before.strip(" "):
            return False
        self._auto_indent = None
        self.delete((row, column - ((column - 1) % len(INDENT) + 1)), (row, column))
        return True

    def action_enter(self) -> None:
        if self.read_only:
            return
        row = self.cursor_location[0]
        if enter_runs(self.text, row):
            self.action_run()
            return
        line = self.document.get_line(row)
        indent = line[:len(line) - len(line.lstrip())]
        if opens_block(line):
            indent += INDENT
        elif ends_block(line):
            indent = indent[:-len(INDENT)]
        self.insert("\n" + indent)
        self._auto_indent = (row + 1, indent) if indent else None


class PythonPane(WorkPane):
    DEFAULT_CSS = """
    PythonPane { height: 1fr; }
    PythonPane #output { height: 2fr; border: round $secondary; }
    PythonPane #editor { height: 1fr; min-height: 4; max-height: 14; border: round $primary; }
    PythonPane #editor:focus { border: round $accent; }
    PythonPane #run-status { height: auto; max-height: 3; color: $text-muted; padding: 0 1; }
    """

    def __init__(self, frozen: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.frozen = frozen

    def compose(self) -> ComposeResult:
        output = OutputPane(id="output")
        output.border_title = "Python"
        yield output
        editor = PythonEditor(id="editor", placeholder="Python · Enter runs a statement (a block: Enter on an "
                                                       "empty line) · F5 / Ctrl+J runs it all")
        editor.border_title = "Code"
        if self.frozen:
            editor.cursor_blink = False
        yield editor
        yield Static("", id="run-status")

    @property
    def output(self) -> OutputPane:
        return self.query_one(OutputPane)

    @property
    def editor(self) -> PythonEditor:
        return self.query_one(PythonEditor)

    def output_feed(self):
        return self.output.feed.feed

    def focus_input(self) -> None:
        self.editor.focus()

    def set_input(self, text: str) -> None:
        self.editor.load_text(text)
        self.editor.move_cursor(self.editor.document.end)

    def set_busy(self, busy: bool) -> None:
        pass

    def set_done(self) -> None:
        self.editor.read_only = True
        self.editor.load_text("")

    def set_status(self, text: str | Text) -> None:
        self.query_one("#run-status", Static).update(text)

    def env_ready(self, env: Any) -> None:
        pass

    def on_python_editor_run(self, message: PythonEditor.Run) -> None:
        message.stop()
        self.post_message(self.Run(message.code))

    def _write_code(self, code: str) -> None:
        lines = code.split("\n")
        self.output.write_command(">>>", lines[0])
        for line in lines[1:]:
            self.output.write_command("...", line)

    def show_turns(self, turns: list[Turn]) -> None:
        write_saved_turns(self.output, turns, self._write_code)

    def turn_started(self, action: str) -> None:
        self.editor.load_text("")
        self._write_code(action)
        self.output.start_stream()

    def turn_finished(self, turn: Turn | None) -> None:
        finish_turn(self.output, turn)
        if turn is None:
            return
        state = (turn.info or {}).get("interpreter")
        verdict = {"error": ("raised an error", "red"), "died": ("the interpreter exited", "red")}.get(
            state or "", ("ok", "green"))
        self.set_status(turn_status(turn, verdict, self.frozen))
