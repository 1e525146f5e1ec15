"""Text that someone else wrote (a solver's output, a model's reply, a saved file's fields)
made safe to show on a terminal or in a widget: ``display`` is the one rule the line mode and
the TUI (``icplay/tui/shown.py``) both follow."""

from __future__ import annotations

import re

# Characters a display shows as escapes, never as themselves: C0 and C1 controls (but
# newline and tab) and DEL, which move the cursor or start terminal sequences; and the
# bidirectional controls (embeddings, overrides, isolates, marks), which reorder what
# follows them on screen, so that a command or a file name would read otherwise than it is.
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
# Characters that take no room on screen (zero-width space, joiners, word joiner, BOM, soft
# hyphen, Mongolian vowel separator), the line and paragraph separators, and the tag
# characters (invisible ASCII lookalikes): ``fl\u200bag`` would read as ``flag``.
INVISIBLE = "\u00ad\u180e\u200b-\u200d\u2028\u2029\u2060-\u2064\ufeff\U000e0000-\U000e007f"
_UNSAFE = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{BIDI_CONTROLS}{INVISIBLE}]")
_UNSAFE_BUT_ESCAPE = re.compile(f"[\\x00-\\x08\\x0b-\\x1a\\x1c-\\x1f\\x7f-\\x9f{BIDI_CONTROLS}{INVISIBLE}]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 32:
        return "^" + chr(code + 64)
    if code == 127:
        return "^?"
    if code > 0xffff:
        return f"\\U{code:08x}"
    return f"\\x{code:02x}" if code <= 0xff else f"\\u{code:04x}"


def display(text: str, keep_escape: bool = False) -> str:
    """``text`` safe to show: control characters other than newline and tab as ^X / \\xNN,
    bidirectional controls and invisible characters as \\uNNNN (U+202E reads ``\\u202e``).
    ``keep_escape``: ESC is left for a view that parses its colour sequences itself (and drops
    the rest)."""
    text = text.replace("\r\n", "\n")
    return (_UNSAFE_BUT_ESCAPE if keep_escape else _UNSAFE).sub(_visible, text)


__all__ = ["display", "BIDI_CONTROLS", "INVISIBLE"]
