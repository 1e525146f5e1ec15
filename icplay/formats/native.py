"""icplay's own trajectory files: one episode per JSON file (``icplay.store`` writes them,
at ``TrajectoryStore.task_path``: ``<root>/<set>/<id>.json``), a run folder of them with
its ``run.json``, and any folder of them.

Where they live: a task's file is ``TrajectoryStore.task_path`` (the one place that builds
it); sessions are ``$ICPLAY_HOME/trajectories/<name>`` (``icplay.session``) and runs
default to ``$ICPLAY_HOME/runs/<label>`` (``runs_root``); ``trajectory_folders`` lists
them all (for a browser over everything saved).

``load_logs`` reads whatever a user points at — a run folder, a trajectory file, or an
InterCode file or folder (``icplay.formats.intercode``) — as trajectories.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icplay.episode import Trajectory
from icplay.formats import intercode
from icplay.json_shape import kind_of, read_json_text
from icplay.paths import home_dir
from icplay.store import TrajectoryFileError, trajectory_from_json
from icplay.tasks.model import TaskFileError
from icplay.store import ATTEMPT_NAME, attempts_folders, readable

RUN_FILE = "run.json"


def runs_root(home: str | Path | None = None) -> Path:
    """Where ``icplay run`` saves a run by default (one folder per run label)."""
    return Path(home or home_dir()) / "runs"


def sessions_root(home: str | Path | None = None) -> Path:
    """Where sessions keep their trajectories (``icplay.session.Session``)."""
    return Path(home or home_dir()) / "trajectories"


def trajectory_folders(home: str | Path | None = None) -> list[Path]:
    """Every session and run folder under the home, sessions first, then the sessions' earlier
    attempts (``attempts/<session>``: every attempt stays viewable)."""
    out = []
    for root in (sessions_root(home), runs_root(home), Path(home or home_dir()) / "attempts"):
        if root.is_dir():
            out += sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    return out


def is_trajectory(data: Any) -> bool:
    return isinstance(data, dict) and "turns" in data and "task" in data


def _intercode_trajectories(data: Any, path: Path) -> list[Trajectory]:
    try:
        return intercode.to_trajectories(intercode.parse(data, str(path), path.stem))
    except TaskFileError as exc:
        raise TrajectoryFileError(str(exc)) from None


def read_run_meta(folder: Path) -> dict[str, Any]:
    """A run folder's ``run.json`` ({} when absent or unusable: it only names the run). Read as
    every saved file is: a regular file, size-capped, not nested too deep, never blocking."""
    run_file = folder / RUN_FILE
    if not os.path.lexists(run_file):
        return {}
    try:
        meta = json.loads(read_json_text(run_file, "a run's description"))
    except (OSError, ValueError):       # JsonFileError, JSONDecodeError and UnicodeDecodeError are ValueErrors
        return {}
    return meta if isinstance(meta, dict) else {}


@dataclass(frozen=True)
class Skipped:
    """A file a reader could not use, and why (one sentence, without the file)."""

    path: str
    reason: str

    @classmethod
    def of(cls, path: str | Path, exc: Exception) -> "Skipped":
        """From an error whose message starts with the file (TrajectoryFileError, TaskFileError)."""
        text, name = str(exc), str(path)
        if text.startswith(name):
            text = text[len(name):].lstrip(":, ")
        return cls(name, text)


SKIPPED_NAMED = 10    # a folder of 100 000 bad files is a note of ten, not a 13 MB line (or toast)


def skipped_note(skipped: list[Skipped]) -> str:
    """``2 files skipped: a.json (why); b.json (why)``: said once, after a reader's work; the
    first ``SKIPPED_NAMED`` named, the rest counted."""
    files = "file" if len(skipped) == 1 else "files"
    named = "; ".join(f"{s.path} ({s.reason})" for s in skipped[:SKIPPED_NAMED])
    more = len(skipped) - SKIPPED_NAMED
    return f"{len(skipped)} {files} skipped: {named}" + (f"; and {more} more" if more > 0 else "")


NOT_A_LOG = "neither an icplay trajectory nor an InterCode results or log file"
TRAJECTORY_KEYS = ("turns", "task", "env", "sandbox", "policy")


def file_trajectory(data: Any, file: Path) -> Trajectory:
    """A decoded file that is not InterCode's as an icplay trajectory; ``TrajectoryFileError``
    naming the file and its first bad field (a file with none of a trajectory's fields:
    that it is neither format)."""
    if isinstance(data, dict) and any(k in data for k in TRAJECTORY_KEYS):
        return trajectory_from_json(data, file)
    raise TrajectoryFileError(f"{file}: {kind_of(data)}, {NOT_A_LOG}" if not isinstance(data, dict)
                              else f"{file}: an object with no trajectory field, {NOT_A_LOG}")


def _file_trajectories(file: Path) -> list[Trajectory]:
    """The episodes of one file in a folder; ``TrajectoryFileError`` naming the file and field."""
    try:
        data = intercode.load_json_or_jsonl(file)
    except TaskFileError as exc:
        raise TrajectoryFileError(str(exc)) from None
    if intercode.is_intercode(data) and not is_trajectory(data):
        return _intercode_trajectories(data, file)
    return [file_trajectory(data, file)]


def folder_files(path: Path) -> list[Path]:
    """The JSON and JSONL files under a folder, leaving out run.json and dot folders (locks)."""
    files = sorted(path.rglob("*.json")) + sorted(path.rglob("*.jsonl"))
    return [f for f in files if f.name != RUN_FILE
            and not any(part.startswith(".") for part in f.relative_to(path).parts)]


def _folder_trajectories(path: Path, skipped: list[Skipped] | None) -> list[Trajectory]:
    """Every trajectory of a folder's files (see ``load_logs``)."""
    trajs: list[Trajectory] = []
    before = len(skipped) if skipped is not None else 0
    for file in folder_files(path):
        try:
            trajs.extend(_file_trajectories(file))
        except TrajectoryFileError as exc:
            if skipped is None:
                raise
            skipped.append(Skipped.of(file, exc))
    if not trajs and (skipped is None or len(skipped) == before):
        raise TrajectoryFileError(f"{path}: holds no trajectory files")    # (not when its files are named)
    return trajs


def load_logs(path: str | Path, skipped: list[Skipped] | None = None) -> tuple[list[Trajectory], dict[str, Any]]:
    """Trajectories from a run folder, a trajectory file or an InterCode results or log file
    (or a folder of them), plus the run's description (``run.json``) when there is one.

    A file in a folder that cannot be used is appended to ``skipped`` (file and why) and the
    others are read (a folder of only such files gives no trajectory); without ``skipped``
    it raises ``TrajectoryFileError`` naming it."""
    path = Path(path)
    if path.is_dir():
        meta = read_run_meta(path)
        return _folder_trajectories(path, skipped), meta
    if not os.path.lexists(path):
        raise TrajectoryFileError(f"{path}: no such file or folder")    # a pipe or a device: the reader says so
    try:
        data = intercode.load_json_or_jsonl(path)
    except TaskFileError as exc:
        raise TrajectoryFileError(str(exc)) from None
    if intercode.is_intercode(data):
        return _intercode_trajectories(data, path), {"label": path.stem}
    return [trajectory_from_json(data, path)], {}


def load_earlier_attempts(path: str | Path, skipped: list[Skipped] | None = None) -> list[Trajectory]:
    """The earlier attempts kept for a trajectory folder (``icplay.store.attempts_folders``:
    a store's ``.attempts`` beside it, a session's ``attempts/<name>``), numbered; [] for a
    file. A file that cannot be read goes to ``skipped``."""
    path = Path(path)
    if not path.is_dir():
        return []
    out: list[Trajectory] = []
    for folder in attempts_folders(path):
        bad: list = []
        out += readable(sorted(p for p in folder.rglob("*.json") if ATTEMPT_NAME.fullmatch(p.name)), bad)
        if skipped is not None:
            skipped += [Skipped.of(file, exc) for file, exc in bad]
    return out


def run_label(meta: dict[str, Any], fallback: str) -> str:
    return str(meta.get("label") or fallback)
