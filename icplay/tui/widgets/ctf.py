"""The CTF pane: the Bash shell pane plus a flag field (Enter there submits the flag)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Input, Label

from icplay.tui.widgets.panes import BashPane


class CtfPane(BashPane):
    DEFAULT_CSS = """
    CtfPane #flag-row { height: 3; border: round $warning; }
    CtfPane #flag-row:focus-within { border: round $accent; }
    CtfPane #flag-label { width: auto; color: $warning; text-style: bold; padding: 0 1 0 0; }
    CtfPane #flag { border: none; height: 1; padding: 0; }
    """

    def compose(self) -> ComposeResult:
        yield from super().compose()
        with Horizontal(id="flag-row"):
            yield Label("flag", id="flag-label")
            yield Input(placeholder="the flag you found · Enter submits it", id="flag", compact=True)

    def on_input_submitted(self, message: Input.Submitted) -> None:
        if message.input.id != "flag":
            return
        message.stop()
        flag = message.value.strip()
        if flag:
            self.post_message(self.Run(f"submit {flag}"))

    def set_busy(self, busy: bool) -> None:
        super().set_busy(busy)
        self.query_one("#flag", Input).disabled = busy

    def set_done(self) -> None:
        super().set_done()
        self.query_one("#flag", Input).disabled = True
