"""The footer of every screen: Textual's, placed at once after each change of the keys.

Textual's Footer rebuilds its keys (a recompose) after every bindings change, inside an update
batch. The screen may go idle while the batch is open, and then skips its layout; when the batch
ends only the app is told, so the new keys stay unplaced (a blank footer line) until another
message happens to wake the screen: whether the footer showed depended on what else was going on
(a loaded machine drew it, a quiet one did not). Here the footer asks its screen for a layout once
its keys are mounted, outside the batch.
"""

from __future__ import annotations

from textual.widgets import Footer


class KeysFooter(Footer):
    """Textual's Footer whose rebuilt keys are always laid out (see the module docstring).
    The palette key is moved one cell right: Textual docks it one cell short of the right edge,
    and when the keys do not fit they run on under it, so that last cell showed a letter of one."""

    DEFAULT_CSS = """
    KeysFooter FooterKey.-command-palette { offset-x: 1; }
    """

    async def recompose(self) -> None:
        await super().recompose()
        if self.is_attached:
            self.screen.refresh(layout=True)
