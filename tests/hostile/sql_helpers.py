"""Shared helpers of the hostile SQL tests (tests/hostile/test_sql_hostile_*.py).

Every hostile statement runs as a turn of a real Episode saved by a real TrajectoryStore,
on SQLite and on MariaDB (the one server test_sql_support shares per test session). A
test then checks four things: the limit held (timeout, row cap, privilege), the episode
is usable afterwards, every turn is in the saved file, and icplay's own memory grew by
a bounded amount (peak RSS of this process, reset before the action).

``ICPLAY_MATRIX=<file>`` appends one JSON line per measured action (for the matrix in
/work/notes/security-faults.md and docs/security.md).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from icplay.envs.sql import SqlEnv
from icplay.episode import Episode, Turn
from icplay.store import TrajectoryStore, load_trajectory
from icplay.tasks.model import Task
from test_sql_support import BUNDLED, new_backend

TIMEOUT = 2.0              # statement timeout in these tests (seconds)
SLACK = {"sqlite": 1.0, "mysql": 4.0}   # MariaDB: the watchdog fires 2 s after the timeout
RSS_BOUND_MB = 300         # icplay's peak growth allowed for one hostile turn (row cap: 100k rows)

BACKENDS = [pytest.param("sqlite"), pytest.param("mysql", marks=[pytest.mark.mysql, pytest.mark.docker])]


def rss_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


class PeakRss:
    """Peak resident memory of this process during a block, above what it held before.

    Writing 5 to /proc/self/clear_refs resets the kernel's high-water mark (VmHWM), so
    the peak is this block's, not the test session's."""

    def __enter__(self) -> "PeakRss":
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        self.before = rss_kb("VmRSS")
        self.growth_mb = 0.0
        return self

    def __exit__(self, *exc) -> None:
        self.growth_mb = max(0, rss_kb("VmHWM") - self.before) / 1024


@dataclass
class SqlEpisode:
    kind: str
    env: SqlEnv
    episode: Episode
    store: TrajectoryStore

    def run(self, action: str) -> tuple[Turn, float, float]:
        """One turn; returns it, the seconds it took, and icplay's peak RSS growth (MB)."""
        with PeakRss() as peak:
            started = time.monotonic()
            turn = self.episode.act(action)
            elapsed = time.monotonic() - started
        return turn, elapsed, peak.growth_mb

    def assert_usable(self, db: str = "bookshop") -> None:
        """A plain query answers as on a pristine database."""
        query, expected = {"bookshop": ("SELECT COUNT(*) FROM authors", "[(12,)]"),
                           "transit": ("SELECT COUNT(*) FROM stations", "[(22,)]")}[db]
        turn = self.episode.act(query)
        assert turn.exit_code == 0 and turn.observation == expected, turn.observation

    def assert_saved(self) -> None:
        """Every turn is in the file, as run."""
        saved = load_trajectory(self.store.path_for(self.episode.trajectory))
        ran = self.episode.trajectory.turns
        assert [t.action for t in saved.turns] == [t.action for t in ran]
        assert [t.exit_code for t in saved.turns] == [t.exit_code for t in ran]
        assert [t.observation for t in saved.turns] == [t.observation for t in ran]


def sql_episode(kind: str, request, tmp_path: Path, db: str = "bookshop", timeout: float = TIMEOUT) -> SqlEpisode:
    backend = new_backend(kind, request)
    backend.timeout = timeout
    backend.max_rows = 100_000
    env = SqlEnv(backend)
    task = Task(id=f"hostile-{db}", set="hostile", env="sql", query="q", gold="SELECT 1", db=db,
                extra={"databases": str(BUNDLED)})
    store = TrajectoryStore(tmp_path / "trajectories")
    episode = Episode(env, task, save=store.save)
    return SqlEpisode(kind, env, episode, store)


def record(kind: str, action: str, limit: str, seconds: float, usable: bool, rss_mb: float) -> None:
    """One matrix row, when ICPLAY_MATRIX names a file."""
    path = os.environ.get("ICPLAY_MATRIX")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"sandbox": kind, "action": action, "limit": limit, "seconds": round(seconds, 2),
                                "usable": usable, "rss_mb": round(rss_mb, 1)}) + "\n")
