"""Find the SQL statement under the cursor: split on ';' outside quotes and comments, and
on blank lines (as SQL editors such as DBeaver do), so a statement left without its ';'
above a new one does not swallow it."""

from __future__ import annotations


def statement_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of each statement, the ';' excluded; blank ones dropped. A blank
    line outside quotes and block comments ends a statement too."""
    spans: list[tuple[int, int]] = []
    start = i = 0
    n = len(text)
    while i < n:
        skipped = _skip_quoted_or_comment(text, i)
        if skipped is not None:
            i = skipped
            continue
        ch = text[i]
        if ch == ";":
            spans.append((start, i))
            start = i + 1
        elif ch == "\n" and text[start:i].strip():
            j = _blank_line_after(text, i)
            if j is not None:              # the next line is blank: the statement ends here
                spans.append((start, i))
                start = i = j
                continue
        i += 1
    spans.append((start, n))
    return [(s, e) for s, e in spans if text[s:e].strip()]


def _skip_quoted_or_comment(text: str, i: int) -> int | None:
    """The offset just past the string or comment that starts at ``i`` (None: none does)."""
    ch = text[i]
    if ch in ("'", '"', "`"):
        return _string_end(text, i) + 1
    if ch == "-" and text.startswith("--", i) or ch == "#":
        j = text.find("\n", i)
        return len(text) if j < 0 else j + 1
    if ch == "/" and text.startswith("/*", i):
        j = text.find("*/", i + 2)
        return len(text) if j < 0 else j + 2
    return None


def _string_end(text: str, i: int) -> int:
    """The offset of the quote that closes the string opened at ``i`` (a doubled quote and,
    but in backticks, a backslash escape stay inside); past the end when none does."""
    ch, j, n = text[i], i + 1, len(text)
    while j < n:
        if text[j] == "\\" and ch != "`":
            j += 2
            continue
        if text[j] == ch:
            if j + 1 < n and text[j + 1] == ch:   # doubled quote inside the string
                j += 2
                continue
            break
        j += 1
    return j


def _blank_line_after(text: str, newline: int) -> int | None:
    """Where the line after the newline at ``newline`` ends, when it is blank (or the text
    ends there); None when it holds something."""
    j, n = newline + 1, len(text)
    while j < n and text[j] in " \t\r":
        j += 1
    return j if j >= n or text[j] == "\n" else None


def statement_at(text: str, offset: int) -> str:
    """The statement containing ``offset`` (or the nearest one before it)."""
    spans = statement_spans(text)
    if not spans:
        return ""
    chosen = spans[0]
    for start, end in spans:
        if start <= offset <= end + 1:
            return text[start:end].strip()
        if start <= offset:
            chosen = (start, end)
    return text[chosen[0]:chosen[1]].strip()


def offset_of(text: str, row: int, column: int) -> int:
    lines = text.split("\n")
    return sum(len(line) + 1 for line in lines[:row]) + column
