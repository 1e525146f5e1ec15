"""Text that someone else wrote (a solver's output and file names, a model's reply, a saved
file's fields, a server's error), made safe for a widget.

Textual reads a plain ``str`` given to a Static, a Label, a border title, a table cell, an
option or a notification as markup: ``[/y]`` in a folder name is a markup error that ends
the app, ``[link=...]`` a link and ``[@click=app.quit]`` an action run on a click. So such
text reaches a widget only as ``rich.text.Text`` built here (or with ``markup=False``), its
control and bidirectional characters shown as escapes (``display``, the one rule the line
mode follows too) and lone surrogates as U+FFFD. icplay's own fixed strings may use markup.
"""

from __future__ import annotations

import re

from rich.text import Text

from icplay.frontend.display import display
from icplay.store import printable


def safe(value: object) -> str:
    """``value`` as a string fit to show: escapes for control and bidirectional characters."""
    return display(printable(str(value)))


def shown(value: object, style: str = "") -> Text:
    """``value`` as Text (never markup), fit to show, in ``style``."""
    return Text(safe(value), style=style)


# Operating-system commands (ESC ] ... BEL or ESC \): titles and OSC 8 hyperlinks, which
# Rich's ANSI reader would turn into a link on screen
_OSC = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")
# An ESC that does not begin a whole CSI sequence (ESC [ ... final byte): Rich's ANSI reader
# leaves such an ESC in the text (``ESC c`` resets the terminal, ``ESC # 8`` filled the
# screen with E's through the TUI), so it is shown as ^[ instead
_NOT_CSI = re.compile(r"\x1b(?!\[[0-?]*[ -/]*[@-~])")


def ansi_safe(text: str) -> str:
    """Output fit for ``Text.from_ansi``: its colour sequences kept; hyperlinks and other
    operating-system commands dropped; any other ESC, other controls and bidirectional
    characters as escapes."""
    if "\x1b]" in text:
        text = _OSC.sub("", text)
    text = display(printable(text), keep_escape=True)
    return _NOT_CSI.sub("^[", text) if "\x1b" in text else text


def from_ansi(text: str) -> Text:
    """Output as Text, its colours applied (``ansi_safe``)."""
    return Text.from_ansi(ansi_safe(text))
