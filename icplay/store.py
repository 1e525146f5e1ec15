r"""Trajectory files: one JSON file per episode, replaced atomically after every turn.

Atomic means: write a temporary file in the same folder, flush and fsync it, then
``os.replace`` it over the old one. A reader (or a crash) sees either the previous
complete file or the new complete file, never half of one.

Encoding: files are UTF-8 JSON. A trajectory keeps what was typed, and an action may
hold bytes that are not UTF-8 (a terminal or a pipe in another encoding: Python reads them
as lone surrogates, ``\udc80``-``\udcff``, with ``surrogateescape``). UTF-8 cannot hold a
lone surrogate, so the JSON text writes every surrogate as a ``\uXXXX`` escape, which
JSON allows and ``json.loads`` turns back into the same code point: loading gives back
the very string that was saved. (One exception: a *pair* of surrogates that forms a valid
UTF-16 pair is read back as the one character it encodes.) Displays replace what they
cannot show (``printable``).
"""

from __future__ import annotations

import datetime
import decimal
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Iterator

from icplay.episode import Trajectory


class TrajectoryFileError(ValueError):
    """A trajectory file that cannot be read back; the message names the file."""


_SURROGATE = re.compile("[\ud800-\udfff]")   # any surrogate code point


def escape_surrogates(json_text: str) -> str:
    """JSON text with every lone surrogate written as a ``\\uXXXX`` escape (see the module
    docstring). Surrogates can only occur inside JSON strings, so this keeps it valid JSON."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", json_text)


def printable(text: str) -> str:
    """``text`` as a display can show it: lone surrogates become U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, whole.

    Lone surrogates in ``text`` (undecodable bytes) are written with ``surrogateescape``,
    so the bytes they stood for land in the file as they were."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def jsonable(value: object) -> object:
    """Values a database hands back that JSON lacks (DECIMAL, DATE, BLOB), kept as text."""
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (datetime.date, datetime.time, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


# A SQL turn's info carries its result rows for display; the observation already holds
# them as InterCode's string, so a file keeps only the first rows (resume re-executes).
SAVED_ROWS = 1000


def trajectory_json(trajectory: Trajectory) -> str:
    """The file text of a trajectory. indent=1 also keeps json on its pure-Python encoder,
    which lets other threads (the UI) run between chunks of a big result."""
    data = trajectory.to_dict()
    for turn in data["turns"]:
        rows = (turn.get("info") or {}).get("rows")
        if isinstance(rows, list) and len(rows) > SAVED_ROWS:
            turn["info"]["rows"] = rows[:SAVED_ROWS]
            turn["info"]["rows_saved"] = SAVED_ROWS
    return escape_surrogates(json.dumps(data, ensure_ascii=False, indent=1, default=jsonable))


def atomic_write_json(path: Path, data: object) -> None:
    atomic_write_text(path, escape_surrogates(json.dumps(data, ensure_ascii=False, indent=1, default=jsonable)))


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "task"


def save_trajectory(trajectory: Trajectory, path: Path) -> None:
    atomic_write_text(Path(path), trajectory_json(trajectory))


def load_trajectory(path: str | Path) -> Trajectory:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Trajectory.from_dict(data)
    except FileNotFoundError:
        raise TrajectoryFileError(f"{path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TrajectoryFileError(f"{path}: not a trajectory file ({exc})") from None
    except (KeyError, TypeError) as exc:
        raise TrajectoryFileError(f"{path}: not a trajectory file (missing or bad field: {exc})") from None


class TrajectoryStore:
    """A folder of trajectories, one file per episode, named after the task."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def path_for(self, trajectory: Trajectory) -> Path:
        task = trajectory.task
        return self.root / safe_name(str(task.get("set", ""))) / f"{safe_name(str(task.get('id', '')))}.json"

    def save(self, trajectory: Trajectory) -> None:
        save_trajectory(trajectory, self.path_for(trajectory))

    def load_for(self, set_name: str, task_id: str) -> Trajectory | None:
        path = self.root / safe_name(set_name) / f"{safe_name(task_id)}.json"
        return load_trajectory(path) if path.exists() else None

    def __iter__(self) -> Iterator[Trajectory]:
        for path in sorted(self.root.rglob("*.json")):
            yield load_trajectory(path)
