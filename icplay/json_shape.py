"""Reading a JSON file that may be anything: refused early when huge or deeply nested, and
checked field by field, so that a bad file costs one sentence naming the field, not a
traceback from deep inside a reader.

Why before parsing: ``json.loads`` of a 10 000-deep list raises ``RecursionError`` (or, with
a raised recursion limit, crashes the interpreter) and a 2 GB file is read whole into
memory; every later step (``asdict``, ``json.dumps``, a table) recurses again. So a file is
refused when larger than ``max_file_bytes()`` (``ICPLAY_MAX_FILE_MB``, default 32) or nested
deeper than ``MAX_DEPTH``, and the sentence names the limit.

``check_fields`` checks a decoded object against a small table of field -> allowed types,
and ``FieldError`` names the field by its path (``turns[3].reward``).
"""

from __future__ import annotations

import os
import re
from itertools import accumulate
from pathlib import Path
from typing import Any, Mapping

MAX_DEPTH = 100            # a trajectory nests about 6 deep (turn -> info -> rows -> row)
DEFAULT_MAX_FILE_MB = 32   # a long SQL episode with its saved rows is a few MB


class JsonFileError(ValueError):
    """A file refused before parsing; the message names the file and why (``reason``: why alone)."""

    def __init__(self, path: str | Path, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = str(path), reason


class FieldError(ValueError):
    """A field of the wrong type or missing; ``path`` is where (``turns[3].reward``)."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path} {message}")
        self.path = path


def max_file_bytes() -> int:
    """The size limit of a file icplay reads as a trajectory or a results file."""
    raw = os.environ.get("ICPLAY_MAX_FILE_MB", "")
    try:
        mb = float(raw) if raw else DEFAULT_MAX_FILE_MB
    except ValueError:
        mb = DEFAULT_MAX_FILE_MB
    return int(mb * 1024 * 1024)


def _mb(n: int) -> str:
    return f"{n / (1024 * 1024):.1f}".removesuffix(".0") + " MB"


_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")


def nesting_depth(text: str) -> int:
    """How deep ``text``'s arrays and objects nest (brackets inside strings do not count).
    String operations, a regex and ``accumulate`` keep this in C: no recursion, whatever
    the depth."""
    unescaped = text.replace("\\\\", "").replace('\\"', "")    # then every '"' opens or closes a string
    outside = "".join(unescaped.split('"')[::2])
    brackets = _NOT_BRACKETS.sub("", outside)
    if not brackets:
        return 0
    return max(accumulate(1 if c in "[{" else -1 for c in brackets))


def read_json_text(path: str | Path, what: str = "a trajectory file") -> str:
    """The text of ``path`` if it is small enough and not nested too deep to parse safely;
    ``JsonFileError`` (one sentence naming the limit) if not. OSError and
    UnicodeDecodeError pass through for the caller to word."""
    path = Path(path)
    limit = max_file_bytes()
    size = path.stat().st_size
    if size > limit:
        raise JsonFileError(path, f"{_mb(size)}, over the {_mb(limit)} limit for {what} "
                                  "that ICPLAY_MAX_FILE_MB sets")
    text = path.read_text(encoding="utf-8")
    depth = nesting_depth(text)
    if depth > MAX_DEPTH:
        raise JsonFileError(path, f"nested {depth} levels deep, over the limit of {MAX_DEPTH} for {what}")
    return text


# -- field by field ---------------------------------------------------------------------------

NUMBER = (int, float)
_NAMES = {dict: "an object", list: "a list", str: "a string", int: "a number", float: "a number",
          bool: "true or false", type(None): "null"}


def kind_of(value: Any) -> str:
    """What a JSON value is, in words ("a string", "null")."""
    return _NAMES.get(type(value), type(value).__name__)


def _allowed(types: tuple[type, ...]) -> str:
    names: list[str] = []
    for t in types:
        name = _NAMES[t]
        if name not in names:
            names.append(name)
    return " or ".join(names)


def is_a(value: Any, types: tuple[type, ...]) -> bool:
    """``isinstance`` where true/false is never a number."""
    if isinstance(value, bool):
        return bool in types
    return isinstance(value, types)


FieldTypes = Mapping[str, tuple[type, ...]]


def check_fields(data: Any, types: FieldTypes, required: tuple[str, ...] = (), where: str = "") -> None:
    """Raise ``FieldError`` for the first field of ``data`` that is missing (``required``) or
    not of its allowed types; fields not in ``types`` are not looked at."""
    prefix = f"{where}." if where else ""
    if not isinstance(data, dict):
        raise FieldError(where or "the file", f"is {kind_of(data)}, not an object")
    for name in required:
        if name not in data:
            raise FieldError(f"{prefix}{name}", "is missing")
    for name, allowed in types.items():
        if name in data and not is_a(data[name], allowed):
            raise FieldError(f"{prefix}{name}", f"is {kind_of(data[name])}, not {_allowed(allowed)}")
