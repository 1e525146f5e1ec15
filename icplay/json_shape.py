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

import gc
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


_STRUCTURE = bytes(b if b in b'[]{},"' else ord("x") for b in range(256))   # the rest: x
_WHITESPACE = b" \t\r\n"
_INNERMOST = re.compile(rb"\[\]|\{\}")


def outline(raw: bytes) -> bytes:
    """The JSON text ``raw`` as its structure alone: brackets and commas outside strings, each
    string and each other value as ``x``s, no whitespace (``{"a": [1, "b,]"]}`` is
    ``{xxx[x,x]}``). C-speed bytes methods only: escapes dropped, strings cut out by splitting
    on quotes. What ``nesting_depth`` and the duplicate-key check count."""
    kept = raw.replace(b"\\\\", b"").replace(b'\\"', b"").translate(_STRUCTURE, _WHITESPACE)
    return b"x".join(kept.split(b'"')[::2])


def nesting_depth(raw: bytes, limit: int | None = None, shape: bytes | None = None) -> int:
    """How deep the JSON text ``raw`` nests its arrays and objects (brackets inside strings
    do not count). With a ``limit``: counted up to ``limit`` + 1, and 0 when the file has
    too few brackets to be deeper than the limit. ``shape``: ``outline(raw)``, if made.

    No recursion and no per-character Python: each pass removes the innermost ``[]`` and
    ``{}`` pairs of the outline's brackets: the passes are the depth."""
    if limit is not None and raw.count(b"[") + raw.count(b"{") <= limit:
        return 0                                 # cannot be deeper than the limit: not counted
    brackets = (outline(raw) if shape is None else shape).translate(None, b",x")
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
    return _checked(read_capped(path, what), path, what)[0]


def _checked(raw: bytes, path: str | Path, what: str) -> tuple[bytes, bytes | None]:
    """``raw`` and its outline (None when it has no object, so no key to state twice), once
    its depth is within MAX_DEPTH; ``JsonFileError`` if not."""
    shape = outline(raw) if b"{" in raw else None
    if nesting_depth(raw, MAX_DEPTH, shape) > MAX_DEPTH:
        raise JsonFileError(path, f"nested more than {MAX_DEPTH} levels deep, over the limit for {what}")
    return raw, shape


def read_json_text(path: str | Path, what: str = "a trajectory file") -> str:
    """``read_json_bytes`` as UTF-8 text (UnicodeDecodeError passes through)."""
    return read_json_bytes(path, what).decode("utf-8")


def read_json(path: str | Path, what: str = "a trajectory file") -> tuple[Any, bytes]:
    """The decoded JSON of ``path`` and the very bytes it came from: ``read_json_bytes`` then
    ``loads`` (a duplicate key refused), the text's outline made once for both checks.
    JsonFileError, json.JSONDecodeError (DuplicateKeyError among them), UnicodeDecodeError
    and OSError pass through for the caller to word."""
    raw, shape = _checked(read_capped(path, what), path, what)
    return loads(raw.decode("utf-8"), shape=shape, raw=raw), raw


_ODD_NUMBER = re.compile(r"\d{4301,}")   # where the error is, for its line and column


class DuplicateKeyError(json.JSONDecodeError):
    """An object of the file states a key twice; ``field`` is where (``turns[3].reward``).

    JSON leaves it to each reader which of the two counts (Python's takes the last, others
    the first), so such a file could be read one way here and another way elsewhere: a
    trajectory with two ``task`` blocks, a reward stated twice."""

    def __init__(self, field: str, doc: str, pos: int):
        super().__init__(f"{field} is stated twice: other readers may take the other one, so the file is refused", doc, pos)
        self.field = field

    def __str__(self) -> str:
        return self.msg


def loads(text: str | bytes, shape: bytes | None = None, raw: bytes | None = None) -> Any:
    """``json.loads`` of a file from anywhere, where every failure is ``json.JSONDecodeError``:
    a number of more digits than Python converts raised a plain ``ValueError`` that readers
    catching ``JSONDecodeError`` let through as a traceback; a key stated twice in one object
    is ``DuplicateKeyError``. (``NaN`` and ``Infinity`` are read, as icplay writes them in
    saved rows: SQLite's ``SELECT 1e999``; ``check_fields`` refuses them where a number
    counts, a reward.) ``shape``/``raw``: the text's outline and bytes, if the caller has them."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError as exc:
        doc = text if isinstance(text, str) else text.decode("utf-8", "replace")
        where = _ODD_NUMBER.search(doc)
        raise json.JSONDecodeError(f"a number icplay does not read ({str(exc).split(';')[0]})", doc,
                                   where.start() if where else 0) from None
    if type(value) in (dict, list):
        _refuse_duplicates(value, text, shape, raw)
    return value


def _entries_written(shape: bytes) -> int:
    """How many members and elements the text's objects and arrays hold: one more than its
    commas in each that is not empty."""
    return (shape.count(b",") + shape.count(b"[") + shape.count(b"{") - shape.count(b"[]") - shape.count(b"{}"))


def _entries_read(value: Any) -> int:
    """How many members and elements the decoded objects and arrays hold, at C speed: the
    garbage collector's referents of a str-keyed dict are its values, of a list its items,
    of a str or a number none. A key stated twice leaves one member (and its value's own)
    fewer than were written."""
    total, level = 0, [value]
    while level:
        level = gc.get_referents(*level)
        total += len(level)
    return total


def _refuse_duplicates(value: Any, text: str | bytes, shape: bytes | None, raw: bytes | None) -> None:
    """DuplicateKeyError if an object of ``text`` states a key twice. Costs two counts, not a
    hook per object: only when the decoded value holds fewer entries than the text wrote
    (any key stated twice makes it so) is the text read again to find the key and its place."""
    if shape is None:
        if raw is None:
            raw = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
        if b"{" not in raw:
            return
        shape = outline(raw)
    if _entries_read(value) == _entries_written(shape):
        return
    _find_duplicate(text)


def _find_duplicate(text: str | bytes) -> None:
    """The slow reading, for a text whose counts disagree: the first object that states a key
    twice, named by its path (``turns[3].info``)."""
    twice: list[tuple[dict, str]] = []

    def pairs_to_dict(pairs: list[tuple[str, Any]]) -> dict:
        made = dict(pairs)
        if len(made) != len(pairs) and not twice:
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    twice.append((made, key))
                    break
                seen.add(key)
        return made

    root = json.loads(text, object_pairs_hook=pairs_to_dict)
    if not twice:
        return          # the counts disagreed for another reason: nothing stated twice
    holder, key = twice[0]
    doc = text if isinstance(text, str) else text.decode("utf-8", "replace")
    where = _path_to(root, holder)
    raise DuplicateKeyError(f"{where}.{key}" if where else key, doc, _second_mention(doc, key))


def _path_to(root: Any, target: dict) -> str:
    """Where ``target`` sits in ``root``, as ``turns[3].info`` ("" for the root itself)."""
    stack: list[tuple[Any, str]] = [(root, "")]
    while stack:
        node, where = stack.pop()
        if node is target:
            return where
        if type(node) is dict:
            stack.extend((v, f"{where}.{k}" if where else k) for k, v in node.items())
        elif type(node) is list:
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(node))
    return ""


def _second_mention(doc: str, key: str) -> int:
    """Where the key is written a second time (for the error's line and column; 0 if not found)."""
    mark = json.dumps(key, ensure_ascii=False)
    first = doc.find(mark)
    second = doc.find(mark, first + 1) if first >= 0 else -1
    return max(second, 0)


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
