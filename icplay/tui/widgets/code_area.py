"""The TextArea every input of the playground is built on (Bash command line, SQL and Python editors).

Textual's TextArea wraps its placeholder at the width it has, and a wrap at width 0 raises
(``range() arg 3 must not be zero``): an editor squeezed to nothing by a narrow terminal took
the whole app down. Here a squeezed editor draws blank lines instead, until it has room again.
"""

from __future__ import annotations

from textual.strip import Strip
from textual.widgets import TextArea


class CodeArea(TextArea):
    """A TextArea that survives any width (see the module docstring)."""

    def render_line(self, y: int) -> Strip:
        if self.content_size.width < 1 and self.placeholder and not self.text:
            return Strip.blank(self.size.width, self.rich_style)
        return super().render_line(y)
