"""The Bash command line: a TextArea with bash highlighting, history and multi-line entry.

Enter runs the command, unless its last line ends with a backslash (then it continues
like bash's own prompt); Ctrl+J (or Alt+Enter) inserts a line break. Up and Down walk the
history when the cursor is on the first or last line; Ctrl+R searches it.
"""

from __future__ import annotations

import json
from pathlib import Path

from textual import events
from textual.message import Message

from icplay.tui.keys import active_keys, bindings
from icplay.tui.widgets.code_area import CodeArea


class History:
    """Commands entered before, oldest first; optionally kept in a file."""

    def __init__(self, path: Path | None = None, limit: int = 5000):
        self.path = path
        self.limit = limit
        self.items: list[str] = []
        if path is not None and path.exists():
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = ""
            self.items = _decode_lines(text)[-limit:]

    def add(self, command: str) -> None:
        command = command.strip("\n")
        if not command.strip():
            return
        if self.items and self.items[-1] == command:
            return
        self.items.append(command)
        del self.items[:-self.limit]
        if self.path is not None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(command) + "\n")
            except OSError:
                pass

    def search(self, text: str) -> list[str]:
        """Newest first, without duplicates, containing ``text``."""
        seen: set[str] = set()
        found = []
        for item in reversed(self.items):
            if item in seen:
                continue
            seen.add(item)
            if text.lower() in item.lower():
                found.append(item)
        return found


def _decode_lines(text: str) -> list[str]:
    """The history file holds one JSON string per line (multi-line commands stay whole)."""
    items = []
    for line in text.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, str):
            items.append(item)
    return items


class CommandInput(CodeArea):
    """The command being typed; posts ``CommandInput.Run`` on Enter."""

    BINDINGS = bindings("bash")

    DEFAULT_CSS = """
    CommandInput { height: auto; max-height: 8; min-height: 1; border: none; padding: 0; }
    CommandInput:focus { border: none; }
    """

    class Run(Message):
        def __init__(self, command: str) -> None:
            super().__init__()
            self.command = command

    class SearchHistory(Message):
        pass

    def __init__(self, history: History | None = None, **kwargs):
        super().__init__(language="bash", soft_wrap=True, show_line_numbers=False, tab_behavior="focus",
                         compact=True, highlight_cursor_line=False, **kwargs)
        self.command_history = history or History()
        self._browse: int | None = None     # index into history while walking it
        self._draft = ""
        self.busy = False

    # -- actions ------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action == "run":
            if self.read_only:
                return False
            # (While a command runs, Enter still posts Run: the screen says to wait, and the
            # text stays; it must not turn into a line break that runs later.)
            # A trailing backslash continues the command on the next line, as in bash.
            last = self.document.get_line(self.document.line_count - 1)
            if last.endswith("\\") and self.cursor_location[0] == self.document.line_count - 1:
                return False
        return True

    def action_run(self) -> None:
        command = self.text.strip("\n")
        if not command.strip():
            return
        self.post_message(self.Run(command))

    def accepted(self, command: str) -> None:
        """The screen ran the command: remember it and clear the line."""
        self.command_history.add(command)
        self._browse = None
        self.load_text("")

    async def _on_key(self, event: events.Key) -> None:
        # Run here, in the order keys arrived, so a command typed (or pasted) just before
        # Enter is complete when it runs.
        if event.key in active_keys(self.app, "bash.run"):
            event.stop()
            event.prevent_default()
            if self.check_action("run", ()):
                self.action_run()
            elif not self.read_only:
                self.insert("\n")              # a trailing backslash continues the command
            return
        if event.key in active_keys(self.app, "bash.newline"):
            event.stop()
            event.prevent_default()
            self.action_newline()
            return
        await super()._on_key(event)

    def action_newline(self) -> None:
        if not self.read_only:
            self.insert("\n")

    def action_search_history(self) -> None:
        self.post_message(self.SearchHistory())

    def action_cursor_up(self, select: bool = False) -> None:
        if not select and self.cursor_location[0] == 0 and self.command_history.items:
            self._walk(-1)
            return
        super().action_cursor_up(select)

    def action_cursor_down(self, select: bool = False) -> None:
        if not select and self.cursor_location[0] == self.document.line_count - 1 and self._browse is not None:
            self._walk(+1)
            return
        super().action_cursor_down(select)

    def _walk(self, step: int) -> None:
        items = self.command_history.items
        if self._browse is None:
            if step > 0:
                return
            self._draft = self.text
            self._browse = len(items)
        self._browse = max(0, min(len(items), self._browse + step))
        self.load_text(items[self._browse] if self._browse < len(items) else self._draft)
        if self._browse >= len(items):
            self._browse = None
        self.move_cursor(self.document.end)

    def set_command(self, command: str) -> None:
        self.load_text(command)
        self._browse = None
        self.move_cursor(self.document.end)
