"""``icplay study merge``: trajectories made on other machines, brought into the study.

Every ``*.json`` under the given folders is read (a whole study folder copied from another
machine, a session folder, loose files). A trajectory of this study (its ``study`` is this
study's name, or unset with a task assigned to its annotator) is copied, byte for byte, to
``merged/<annotator>/<set>/<task>.<trajectory id>.json``, unless the study already holds
that trajectory id: the same content is a duplicate (left out), different content a
conflict (listed, nothing overwritten). A file that cannot be read (not a regular file, over
the size limit, a field of the wrong type) is named and counted and never stops the rest;
one whose task is not on this machine, or differs from this machine's (its image, network,
files, setup or tests: ``icplay.tasks.trusted``), is refused, named and counted: a merged
file never brings a task of its own to the lead's machine. What is copied is the very bytes
that were checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from icplay.json_shape import loads, read_json_text
from icplay.store import TrajectoryFileError, atomic_write_text, load_trajectory, read_trajectory, safe_name
from icplay.tasks.model import TaskFileError
from icplay.tasks.trusted import machine_task
from icplay.study.model import Study, annotator_folders, merged_dir


@dataclass
class MergeResult:
    added: list[Path] = field(default_factory=list)
    duplicates: list[Path] = field(default_factory=list)
    conflicts: list[tuple[Path, Path]] = field(default_factory=list)   # (incoming, the study's file)
    skipped: list[tuple[Path, str]] = field(default_factory=list)      # unreadable: (file, why)
    foreign: list[tuple[Path, str]] = field(default_factory=list)      # readable, not this study's: (file, why)
    refused: list[tuple[Path, str]] = field(default_factory=list)      # this study's, of a task not this machine's

    def lines(self) -> list[str]:
        out = [f"merged: {len(self.added)} added, {len(self.duplicates)} duplicate(s) left out, "
               f"{len(self.conflicts)} conflict(s), {len(self.skipped)} file(s) skipped, "
               f"{len(self.foreign)} not of this study"
               + (f", {len(self.refused)} refused (a task not as this machine has it)" if self.refused else "")]
        out += [f"conflict: {incoming} has the id of {mine} but other content; neither was changed"
                for incoming, mine in self.conflicts]
        out += [f"skipped: {why}" for _, why in self.skipped]
        out += [f"not of this study: {path}: {why}" for path, why in self.foreign]
        out += [f"refused: {why}" for _, why in self.refused]
        return out


def _files(folder: Path) -> list[Path]:
    """The JSON files under ``folder`` (kept attempts included; locks and temporary files not)."""
    if not folder.is_dir():
        return [folder]             # a file named on its own (a pipe or device too: the reader refuses it)
    return sorted(p for p in folder.rglob("*.json")
                  if not p.name.startswith(".") and ".locks" not in p.relative_to(folder).parts)


def _content(path: Path) -> Any:
    """The decoded JSON of one of the study's own files (None when it cannot be read now)."""
    try:
        return loads(read_json_text(path))
    except (OSError, ValueError):
        return None


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
        traj, raw = read_trajectory(path)     # a regular file, size-capped, never blocking
    except TrajectoryFileError as exc:
        result.skipped.append((path, str(exc)))
        return
    why = _not_ours(study, traj)
    if why is not None:
        result.foreign.append((path, why))
        return
    try:
        machine_task(traj.task, str(path), _study_sets(study))
    except TaskFileError as exc:
        result.refused.append((path, str(exc)))
        return
    mine = index.get(traj.id)
    if mine is not None:
        same = _content(mine) == loads(raw.decode("utf-8"))
        (result.duplicates.append(path) if same else result.conflicts.append((path, mine)))
        return
    assert traj.annotator is not None
    target = (merged_dir(study, home) / safe_name(traj.annotator) / safe_name(str(traj.task.get("set", "")))
              / f"{safe_name(str(traj.task.get('id', '')))}.{safe_name(traj.id)}.json")
    atomic_write_text(target, raw.decode("utf-8"))      # the bytes checked, not the file read again
    index[traj.id] = target
    result.added.append(target)


def _study_sets(study: Study) -> set[str]:
    """The task sets the study's own refs name (its file is the lead's: a set there may be a path)."""
    return {ref.partition("/")[0] for ref in study.tasks}


def _not_ours(study: Study, traj) -> str | None:
    if traj.study is not None and traj.study != study.name:
        return f"made in study {traj.study!r}"
    if traj.annotator not in study.annotators:
        return f"annotator {traj.annotator!r} is not one of this study's"
    if traj.task_key not in study.assigned_to(traj.annotator):
        return f"task {traj.task_key} is not assigned to {traj.annotator}"
    return None
