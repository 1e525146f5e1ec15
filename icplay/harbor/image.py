"""The image a Harbor task runs in: built locally from its ``environment/`` folder.

The tag carries a digest of that folder, so an edited Dockerfile or file gives a new image
and an unchanged one is built once. Only ``environment/`` is the build context: the
task's ``tests/`` and ``solution/`` can never be copied into the image. Nothing is pulled
(``pull=False``): a base image must be on the machine, or the build says which is missing.
"""

from __future__ import annotations

import collections
import hashlib
import os
import re
import threading
from pathlib import Path
from typing import Any, Callable

from icplay.sandbox.base import SandboxError
from icplay.sandbox.images import image_exists, stream_build
from icplay.tasks.model import Task
from icplay.harbor.load import settings_of

INPUTS_LABEL = "icplay.harbor.inputs"

_locks: dict[str, threading.Lock] = collections.defaultdict(threading.Lock)
_locks_guard = threading.Lock()


def folder_digest(folder: Path) -> str:
    """A digest of every file's path, mode and content (symlinks by their target)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() or p.is_symlink()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        if path.is_symlink():
            digest.update(os.readlink(path).encode())
        else:
            digest.update(oct(path.stat().st_mode & 0o777).encode())
            digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def image_tag(task: Task, folder: Path) -> str:
    """``icplay-harbor-<task>:<digest of environment/>`` (Docker's lower-case name rules)."""
    name = re.sub(r"[^a-z0-9_.-]+", "-", task.id.lower()).strip("-._") or "task"
    return f"icplay-harbor-{name[:80]}:{folder_digest(folder)}"


def ensure_task_image(client: Any, task: Task, progress: Callable[[str], None] | None = None) -> str:
    """The task's image, built first when missing (once, however many threads ask)."""
    source = settings_of(task)["image"]
    if "name" in source:
        if not image_exists(client, source["name"]):
            raise SandboxError(f"task {task.key}: image {source['name']} (task.toml environment.docker_image) is "
                               "not on this machine and icplay does not pull: docker pull it first")
        return source["name"]
    folder = Path(source["build"])
    if not (folder / "Dockerfile").is_file():
        raise SandboxError(f"task {task.key}: {folder / 'Dockerfile'} is not there any more")
    tag = image_tag(task, folder)
    with _locks_guard:
        lock = _locks[tag]
    with lock:
        if image_exists(client, tag):
            return tag
        say = progress or (lambda line: None)
        say(f"building {tag} from {folder}/Dockerfile (once per change of the task's environment/)")
        return stream_build(client, tag, f"{folder}/Dockerfile", say, path=str(folder), dockerfile="Dockerfile",
                            labels={INPUTS_LABEL: tag.rsplit(":", 1)[1]})
