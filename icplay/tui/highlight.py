"""Code coloured for its language, the one way every screen shows an action outside the editors.

The agent's proposal (watch), the turns sidebar, the viewer's stepper and its comparison all
call ``highlighted(code, language)``: the language's fence label (``LanguageSpec.prompts.fence``:
"bash", "sql", "python") names its Pygments lexer, so a language added to the registry is
coloured without an edit here; an unknown one is shown plain.
"""

from __future__ import annotations

from functools import lru_cache

from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound
from rich.syntax import Syntax
from rich.text import Text

from icplay.languages import find
from icplay.tui.shown import safe

THEME = "ansi_dark"      # the terminal's own 16 colours: readable on the light theme and the dark one


@lru_cache(maxsize=None)
def lexer_for(language: str) -> Lexer | None:
    """The Pygments lexer of a language (an icplay language name, or a lexer's name), or None."""
    spec = find(language)
    name = (spec.prompts.fence or spec.name) if spec is not None else language
    try:
        return get_lexer_by_name(name, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


def highlighted(code: str, language: str, style: str = "") -> Text:
    """``code`` as Rich Text coloured for ``language`` (plain when no lexer knows it); ``style``
    goes under the colours (e.g. "dim" for a rejected proposal)."""
    code = safe(code)        # a solver's or a model's: control and bidirectional characters as escapes
    lexer = lexer_for(language)
    if lexer is None:
        return Text(code, style=style)
    text = Syntax("", lexer, theme=THEME, background_color="default", word_wrap=True).highlight(code)
    if style:
        text.stylize_before(style)
    return text
