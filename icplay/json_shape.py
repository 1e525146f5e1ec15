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

import json
import math
import os
import re
import stat
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


_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')
_INNERMOST = re.compile(rb"\[\]|\{\}")


def nesting_depth(raw: bytes, limit: int | None = None) -> int:
    """How deep the JSON text ``raw`` nests its arrays and objects (brackets inside strings
    do not count). With a ``limit``: counted up to ``limit`` + 1, and 0 when the file has
    too few brackets to be deeper than the limit.

    No recursion and no per-character Python: escapes and everything but brackets and
    quotes are dropped with bytes methods, strings are cut out by splitting on quotes,
    then each pass removes the innermost ``[]`` and ``{}`` pairs: the passes are the depth.
    About half the time ``json.loads`` takes over the same text, and nothing for a file
    with fewer brackets than the limit."""
    if limit is not None and raw.count(b"[") + raw.count(b"{") <= limit:
        return 0                                 # cannot be deeper than the limit: not counted
    kept = raw.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    brackets = b"".join(kept.split(b'"')[::2])
    depth = 0
    while brackets and (limit is None or depth <= limit):
        shorter = _INNERMOST.sub(b"", brackets)
        if len(shorter) == len(brackets):       # unbalanced (not JSON): what is left nests this deep at most
            return depth + max(0, *accumulate(1 if c in b"[{" else -1 for c in shorter))
        brackets, depth = shorter, depth + 1
    return depth


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _kind_of_file(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def read_capped(path: str | Path, what: str = "a trajectory file") -> bytes:
    """The bytes of ``path`` if it is a regular file no larger than ``max_file_bytes()``;
    ``JsonFileError`` (one sentence) if not.

    Opened with O_NONBLOCK and checked with ``fstat`` on the very descriptor that is read:
    a named pipe never blocks the reader, and a link to ``/dev/zero`` (a device, whose size
    says 0) is refused, not read until memory runs out; a file that grows after the check is
    read up to the limit and no further."""
    path = Path(path)
    limit = max_file_bytes()
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise JsonFileError(path, f"{_kind_of_file(st.st_mode)}, not {what}")
        if st.st_size > limit:
            raise JsonFileError(path, f"{_mb(st.st_size)}, over the {_mb(limit)} limit for {what} "
                                      "that ICPLAY_MAX_FILE_MB sets")
        chunks, got = [], 0
        while got <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > limit:
            raise JsonFileError(path, f"grew past the {_mb(limit)} limit for {what} as it was read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_json_bytes(path: str | Path, what: str = "a trajectory file") -> bytes:
    """The bytes of ``path`` if it is a regular file (``read_capped``), small enough and not
    nested too deep to parse safely; ``JsonFileError`` (one sentence naming the limit) if
    not. OSError passes through for the caller to word."""
    raw = read_capped(path, what)
    depth = nesting_depth(raw, MAX_DEPTH)
    if depth > MAX_DEPTH:
        raise JsonFileError(path, f"nested more than {MAX_DEPTH} levels deep, over the limit for {what}")
    return raw


def read_json_text(path: str | Path, what: str = "a trajectory file") -> str:
    """``read_json_bytes`` as UTF-8 text (UnicodeDecodeError passes through)."""
    return read_json_bytes(path, what).decode("utf-8")


_ODD_NUMBER = re.compile(r"\d{4301,}")   # where the error is, for its line and column


def loads(text: str | bytes) -> Any:
    """``json.loads`` of a file from anywhere, where every failure is ``json.JSONDecodeError``:
    a number of more digits than Python converts raised a plain ``ValueError`` that readers
    catching ``JSONDecodeError`` let through as a traceback. (``NaN`` and ``Infinity`` are
    read, as icplay writes them in saved rows: SQLite's ``SELECT 1e999``; ``check_fields``
    refuses them where a number counts, a reward.)"""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError as exc:
        doc = text if isinstance(text, str) else text.decode("utf-8", "replace")
        where = _ODD_NUMBER.search(doc)
        raise json.JSONDecodeError(f"a number icplay does not read ({str(exc).split(';')[0]})", doc,
                                   where.start() if where else 0) from None


# -- field by field ---------------------------------------------------------------------------

NUMBER = (int, float)
_NAMES = {dict: "an object", list: "a list", str: "a string", int: "a number", float: "a number",
          bool: "true or false", type(None): "null"}


def kind_of(value: Any) -> str:
    """What a JSON value is, in words ("a string", "null")."""
    return _NAMES.get(type(value), type(value).__name__)


def _allowed(types: frozenset[type]) -> str:
    names: list[str] = []
    for t in (dict, list, str, int, float, bool, type(None)):
        if t in types and _NAMES[t] not in names:
            names.append(_NAMES[t])
    return " or ".join(names)


FieldTypes = Mapping[str, frozenset]


def field_types(spec: Mapping[str, tuple[type, ...]]) -> dict[str, frozenset]:
    """A field table for ``check_fields``: each field's allowed JSON types as a set of exact
    types (``type(v) in allowed``: fast, and true/false is never taken for a number)."""
    return {name: frozenset(types) for name, types in spec.items()}


def check_fields(data: Any, types: FieldTypes, required: tuple[str, ...] = (), where: str = "") -> None:
    """Raise ``FieldError`` for the first field of ``data`` that is missing (``required``) or
    not of its allowed types; fields not in ``types`` are not looked at."""
    if type(data) is not dict:
        raise FieldError(where or "the file", f"is {kind_of(data)}, not an object")
    for name in required:
        if name not in data:
            raise FieldError(f"{where}.{name}" if where else name, "is missing")
    for name, allowed in types.items():
        if name in data and type(data[name]) not in allowed:
            raise FieldError(f"{where}.{name}" if where else name, f"is {kind_of(data[name])}, not {_allowed(allowed)}")
        if name in data and type(data[name]) is float and not math.isfinite(data[name]):
            # NaN or Infinity: an Infinity reward was counted solved and written back as invalid JSON
            raise FieldError(f"{where}.{name}" if where else name, f"is {data[name]}, not a finite number")
