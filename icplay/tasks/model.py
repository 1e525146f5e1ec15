"""The Task record every environment, policy and store shares."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any


class TaskFileError(ValueError):
    """A task file that cannot be used; the message names file, record and field."""

    def __init__(self, path: str | os.PathLike[str], message: str, record: int | None = None, field: str | None = None):
        where = str(path)
        if record is not None:
            where += f", record {record}"
        if field is not None:
            where += f", field '{field}'"
        super().__init__(f"{where}: {message}")
        self.path, self.record, self.field = str(path), record, field


@dataclass(frozen=True)
class Task:
    """One natural-language query with its gold solution.

    ``env`` names the language ("bash", "sql", "python", "ctf"). ``set`` names the task
    set it came from (e.g. "bash", "sql", "spider"); ``id`` is unique within the set.
    ``extra`` keeps what a language needs beyond the common fields (``tests``,
    ``test_setup_code``, assets, ...), and ``image`` an image the task must run on.
    """

    id: str
    set: str
    env: str
    query: str
    gold: str
    hardness: str | None = None
    db: str | None = None
    tags: tuple[str, ...] = ()
    image: str | None = None
    network: bool = False
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    source: str = ""

    @property
    def key(self) -> str:
        """A stable name across sets, used for file names and resume."""
        return f"{self.set}/{self.id}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "set": self.set, "env": self.env, "query": self.query,
            "gold": self.gold, "hardness": self.hardness, "db": self.db,
            "tags": list(self.tags), "image": self.image, "network": self.network,
            "extra": self.extra, "source": self.source,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Task":
        return cls(
            id=str(d["id"]), set=d.get("set", ""), env=d["env"], query=d["query"],
            gold=d["gold"], hardness=d.get("hardness"), db=d.get("db"),
            tags=tuple(d.get("tags") or ()), image=d.get("image"),
            network=bool(d.get("network", False)), extra=dict(d.get("extra") or {}),
            source=d.get("source", ""),
        )
