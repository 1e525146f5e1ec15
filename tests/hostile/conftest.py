"""Shared helpers of the hostile-action suite: icplay's peak memory, episodes that save
every turn, and the sandboxes the actions run in.

Every hostile test drives the library as a user's run does: a BashEnv over pooled real
sandboxes, each action through ``icplay.episode.Episode`` with a ``TrajectoryStore``, so
that "every turn saved" is checked on the files a run would leave.
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest

from icplay.episode import Episode, Turn
from icplay.store import TrajectoryStore, load_trajectory
from icplay.tasks.model import Task

MB = 1024 * 1024
# icplay may grow by this much while an action prints without limit: a few output caps
# (1 MiB each) plus the interpreter's own noise, far below what an unbounded buffer takes.
RSS_BOUND = 64 * MB
HOSTILE_TIMEOUT = 4.0


def _status_kb(field_name: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field_name} in /proc/self/status")


def rss_now() -> int:
    """This process's resident memory now, in bytes."""
    return _status_kb("VmRSS")


@dataclass
class PeakRss:
    """How far this process's resident memory rose above where it started."""

    start: int = 0
    peak: int = 0
    samples: list[int] = field(default_factory=list)

    @property
    def growth(self) -> int:
        return max(0, self.peak - self.start)


@contextmanager
def peak_rss() -> Iterator[PeakRss]:
    """Measure icplay's peak RSS in the block: the kernel's high-water mark (VmHWM),
    reset at the start through /proc/self/clear_refs, so that no short peak is missed;
    where that reset is refused, a sampling thread (every 10 ms) stands in."""
    measured = PeakRss(start=_status_kb("VmRSS"))
    try:
        Path("/proc/self/clear_refs").write_text("5")
        exact = True
    except OSError:
        exact = False
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.01):
            measured.samples.append(_status_kb("VmRSS"))

    sampler = None if exact else threading.Thread(target=sample, daemon=True)
    if sampler is not None:
        sampler.start()
    try:
        yield measured
    finally:
        stop.set()
        if sampler is not None:
            sampler.join()
        measured.peak = _status_kb("VmHWM") if exact else max(measured.samples or [measured.start])


def hostile_task(n: int = 0) -> Task:
    return Task(id=f"hostile-{n}", set="hostile", env="bash", query="list the testbed", gold="ls /testbed")


class Played:
    """One episode of the suite: acts through Episode, checks what the store holds."""

    def __init__(self, env, store: TrajectoryStore, task: Task):
        self.store = store
        self.episode = Episode(env, task, save=store.save)
        self.env = env

    def act(self, action: str) -> Turn:
        return self.episode.act(action)

    @property
    def sandbox(self):
        return self.env.sandbox

    def saved_turns(self) -> list[Turn]:
        path = self.store.path_for(self.episode.trajectory)
        return load_trajectory(path).turns

    def assert_all_saved(self) -> None:
        saved = self.saved_turns()
        mine = self.episode.trajectory.turns
        assert [t.action for t in saved] == [t.action for t in mine]
        assert [t.observation for t in saved] == [t.observation for t in mine]

    def assert_usable(self) -> None:
        """The session answers, keeps state across actions, and exits 0."""
        first = self.act("export ICPLAY_PROBE=alive; cd /testbed")
        second = self.act("echo $ICPLAY_PROBE $PWD; ls / >/dev/null && echo listed")
        assert second.observation.startswith("alive /testbed\nlisted\n"), second.observation
        assert first.exit_code == 0 and second.exit_code == 0


@pytest.fixture(scope="module")
def docker_sandboxes(docker_client, bash_image):
    from icplay.envs.bash import BashSandboxes

    sandboxes = BashSandboxes(os.environ.get("ICPLAY_TEST_SANDBOX") or "docker", timeout=HOSTILE_TIMEOUT, spares=0)
    yield sandboxes
    sandboxes.close()


@pytest.fixture
def play_docker(docker_sandboxes, tmp_path):
    """Start an episode on Docker; every turn goes through Episode and a TrajectoryStore."""
    from icplay.envs.bash import BashEnv

    envs = []

    def start(n: int = 0) -> Played:
        env = BashEnv(docker_sandboxes, owns_sandboxes=False)
        envs.append(env)
        return Played(env, TrajectoryStore(tmp_path / "trajectories"), hostile_task(n))

    yield start
    for env in envs:
        env.close()


@pytest.fixture(scope="module")
def bwrap_sandboxes(bwrap_ready):
    from icplay.envs.bash import BashSandboxes

    sandboxes = BashSandboxes("bwrap", timeout=HOSTILE_TIMEOUT, spares=0)
    yield sandboxes
    sandboxes.close()


@pytest.fixture
def play_bwrap(bwrap_sandboxes, tmp_path):
    """Start an episode on bwrap, as ``play_docker`` does on Docker."""
    from icplay.envs.bash import BashEnv

    envs = []

    def start(n: int = 0) -> Played:
        env = BashEnv(bwrap_sandboxes, owns_sandboxes=False)
        envs.append(env)
        return Played(env, TrajectoryStore(tmp_path / "trajectories"), hostile_task(n))

    yield start
    for env in envs:
        env.close()


@pytest.fixture(params=[pytest.param("docker", marks=pytest.mark.docker),
                        pytest.param("bwrap", marks=pytest.mark.bwrap)])
def play(request):
    """Start an episode on each sandbox in turn (for what the shared session must hold)."""
    return request.getfixturevalue(f"play_{request.param}")


def wait_until(predicate, timeout: float, every: float = 0.1) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(every)
    return predicate()
