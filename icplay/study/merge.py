"""``icplay study merge``: trajectories made on other machines, brought into the study.

Every ``*.json`` under the given folders is read (a whole study folder copied from another
machine, a session folder, loose files). A trajectory of this study (its ``study`` is this
study's name, or unset with a task assigned to its annotator) is copied, byte for byte, to
``merged/<annotator>/<set>/<task>.<trajectory id>.json``, unless the study already holds
that trajectory id: the same content is a duplicate (left out), different content a
conflict (listed, nothing overwritten). A file that cannot be read is named and counted and
never stops the rest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from icplay.store import TrajectoryFileError, atomic_write_text, load_trajectory, safe_name
from icplay.study.model import Study, annotator_folders, merged_dir


@dataclass
class MergeResult:
    added: list[Path] = field(default_factory=list)
    duplicates: list[Path] = field(default_factory=list)
    conflicts: list[tuple[Path, Path]] = field(default_factory=list)   # (incoming, the study's file)
    skipped: list[tuple[Path, str]] = field(default_factory=list)      # unreadable: (file, why)
    foreign: list[tuple[Path, str]] = field(default_factory=list)      # readable, not this study's: (file, why)

    def lines(self) -> list[str]:
        out = [f"merged: {len(self.added)} added, {len(self.duplicates)} duplicate(s) left out, "
               f"{len(self.conflicts)} conflict(s), {len(self.skipped)} file(s) skipped, "
               f"{len(self.foreign)} not of this study"]
        out += [f"conflict: {incoming} has the id of {mine} but other content; neither was changed"
                for incoming, mine in self.conflicts]
        out += [f"skipped: {why}" for _, why in self.skipped]
        out += [f"not of this study: {path}: {why}" for path, why in self.foreign]
        return out


def _files(folder: Path) -> list[Path]:
    """The JSON files under ``folder`` (kept attempts included; locks and temporary files not)."""
    if folder.is_file():
        return [folder]
    return sorted(p for p in folder.rglob("*.json")
                  if not p.name.startswith(".") and ".locks" not in p.relative_to(folder).parts)


def _content(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _index(study: Study, home: Path | None) -> dict[str, Path]:
    """trajectory id -> the study's file holding it (unreadable files are not indexed)."""
    index: dict[str, Path] = {}
    for who in study.annotators:
        for folder in annotator_folders(study, who, home):
            if not folder.is_dir():
                continue
            for path in _files(folder):
                try:
                    index.setdefault(load_trajectory(path).id, path)
                except TrajectoryFileError:
                    continue
    return index


def merge(study: Study, folders: Iterable[Path], home: Path | None = None) -> MergeResult:
    result = MergeResult()
    index = _index(study, home)
    own = {p.resolve() for p in index.values()}
    for folder in folders:
        folder = Path(folder)
        if not folder.exists():
            result.skipped.append((folder, f"{folder}: no such file or folder"))
            continue
        for path in _files(folder):
            if path.resolve() in own:
                continue                      # the study's own file (a folder inside the study)
            _merge_one(study, path, index, result, home)
    return result


def _merge_one(study: Study, path: Path, index: dict[str, Path], result: MergeResult, home: Path | None) -> None:
    try:
        traj = load_trajectory(path)
    except TrajectoryFileError as exc:
        result.skipped.append((path, str(exc)))
        return
    why = _not_ours(study, traj)
    if why is not None:
        result.foreign.append((path, why))
        return
    mine = index.get(traj.id)
    if mine is not None:
        same = _content(mine) == _content(path)
        (result.duplicates.append(path) if same else result.conflicts.append((path, mine)))
        return
    assert traj.annotator is not None
    target = (merged_dir(study, home) / traj.annotator / safe_name(str(traj.task.get("set", "")))
              / f"{safe_name(str(traj.task.get('id', '')))}.{safe_name(traj.id)}.json")
    atomic_write_text(target, path.read_text(encoding="utf-8", errors="surrogateescape"))
    index[traj.id] = target
    result.added.append(target)


def _not_ours(study: Study, traj) -> str | None:
    if traj.study is not None and traj.study != study.name:
        return f"made in study {traj.study!r}"
    if traj.annotator not in study.annotators:
        return f"annotator {traj.annotator!r} is not one of this study's"
    if traj.task_key not in study.assigned_to(traj.annotator):
        return f"task {traj.task_key} is not assigned to {traj.annotator}"
    return None
