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
from pathlib import Path
from typing import Any

from icplay.episode import Trajectory
from icplay.formats import intercode
from icplay.paths import home_dir
from icplay.store import TrajectoryFileError, load_trajectory
from icplay.tasks.model import TaskFileError

RUN_FILE = "run.json"


def runs_root(home: str | Path | None = None) -> Path:
    """Where ``icplay run`` saves a run by default (one folder per run label)."""
    return Path(home or home_dir()) / "runs"


def sessions_root(home: str | Path | None = None) -> Path:
    """Where sessions keep their trajectories (``icplay.session.Session``)."""
    return Path(home or home_dir()) / "trajectories"


def trajectory_folders(home: str | Path | None = None) -> list[Path]:
    """Every session and run folder under the home, sessions first."""
    out = []
    for root in (sessions_root(home), runs_root(home)):
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
    run_file = folder / RUN_FILE
    if run_file.is_file():
        try:
            meta = json.loads(run_file.read_text(encoding="utf-8"))
            return meta if isinstance(meta, dict) else {}
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            return {}
    return {}


def load_logs(path: str | Path) -> tuple[list[Trajectory], dict[str, Any]]:
    """Trajectories from a run folder, a trajectory file or an InterCode results or log file
    (or a folder of them), plus the run's description (``run.json``) when there is one."""
    path = Path(path)
    if path.is_dir():
        meta = read_run_meta(path)
        trajs = [t for file in sorted(path.rglob("*.json")) + sorted(path.rglob("*.jsonl")) if file.name != RUN_FILE
                 for t in _file_trajectories(file)]
        if not trajs:
            raise TrajectoryFileError(f"{path}: holds no trajectory files")
        return trajs, meta
    if not path.is_file():
        raise TrajectoryFileError(f"{path}: no such file or folder")
    try:
        data = intercode.load_json_or_jsonl(path)
    except TaskFileError:
        raise TrajectoryFileError(f"{path}: not a trajectory or InterCode results file (not JSON)") from None
    if intercode.is_intercode(data):
        return _intercode_trajectories(data, path), {"label": path.stem}
    return [load_trajectory(path)], {}


def _file_trajectories(file: Path) -> list[Trajectory]:
    """The trajectories of one file in a folder: an icplay trajectory, an InterCode results or
    log file's episodes, or none (a file that is neither, or not JSON)."""
    try:
        data = intercode.load_json_or_jsonl(file)
    except TaskFileError:
        return []
    if is_trajectory(data):
        try:
            return [Trajectory.from_dict(data)]
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise TrajectoryFileError(f"{file}: not a trajectory file (missing or bad field: {exc})") from None
    if intercode.is_intercode(data):
        return _intercode_trajectories(data, file)
    return []


def run_label(meta: dict[str, Any], fallback: str) -> str:
    return str(meta.get("label") or fallback)
