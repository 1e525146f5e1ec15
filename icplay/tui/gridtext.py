"""A result grid as text to copy or save: CSV (for a spreadsheet or a script) or a Markdown
table (for notes and reports).

The cells are a query's output, which the solver controls: a CSV cell that starts like a
formula (``=``, ``+``, ``-``, ``@``, a tab or a carriage return) gets a leading ``'`` so that a
spreadsheet shows it instead of running it; a Markdown cell has its pipes escaped and its line
breaks and control characters made visible, so that it stays one cell of one row.
"""

from __future__ import annotations

import csv
import io
import re
from typing import Any, Sequence

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def csv_cell(value: Any) -> str:
    """One value as a CSV cell: NULL empty, a text that a spreadsheet would run quoted with '."""
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex()
    text = str(value)
    return "'" + text if isinstance(value, str) and text.startswith(FORMULA_START) else text


def grid_csv(columns: Sequence[Any], rows: Sequence[Sequence[Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([csv_cell(c) for c in columns])
    writer.writerows([csv_cell(v) for v in row] for row in rows)
    return out.getvalue()


def markdown_cell(value: Any) -> str:
    """One value as a Markdown table cell: NULL said, pipes escaped, one line, no control characters."""
    if value is None:
        return "NULL"
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex()
    text = str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\r\n", "⏎").replace("\n", "⏎")
    return _CONTROL.sub("�", text)


def grid_markdown(columns: Sequence[Any], rows: Sequence[Sequence[Any]]) -> str:
    head = [markdown_cell(c) for c in columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(markdown_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# a grid's text formats: name -> (file ending, how it is made)
FORMATS = {"csv": (".csv", grid_csv), "markdown": (".md", grid_markdown)}


def format_for(path: str) -> str:
    """The format a file name asks for by its ending (``.md``/``.markdown``: Markdown, else CSV)."""
    return "markdown" if path.lower().endswith((".md", ".markdown")) else "csv"
