"""Shared pieces of the reward-hack suite (issue 19): real envs of every language on every
sandbox it runs on, episodes that go through ``icplay.episode.Episode`` and a
``TrajectoryStore`` as a run's do, and the three things every probe asserts afterwards.

A probe acts as a reward-hacking solver would, inside its own sandbox, then checks:

- **not solved**: the reward is below 1.0 or the strict verdict says not solved
  (``ProbedEpisode.assert_not_solved``; both, where the probe defeats both);
- **still usable**: the session answers and keeps state (``assert_usable``: a check per
  language, in ``USABLE``);
- **every turn saved**: the file the store wrote holds every turn as played
  (``assert_all_saved``).

``ProbedEpisode.assert_after_probe`` does the last two. Parametrise a test over
``sandbox_params(language)`` (every sandbox the language's spec lists, each with its pytest
marks) and start episodes with the ``probe`` fixture: under CI=true a sandbox that is
missing fails the test (tests/ci_rules.py), it is never skipped.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from icplay.envs.base import SubmitResult
from icplay.episode import Episode, Turn
from icplay.store import TrajectoryStore, load_trajectory
from icplay.tasks.model import Task

PROBE_TIMEOUT = 20.0     # seconds per action: probes search whole file systems on a loaded 2-core machine

# What a sandbox needs from tests/conftest.py, and its pytest marks.
SANDBOX_NEEDS: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "docker": ("docker_client", ("docker",)),
    "podman": ("podman_client", ("podman",)),
    "bwrap": ("bwrap_ready", ("bwrap",)),
    "mysql": ("docker_client", ("mysql", "docker")),
    "sqlite": (None, ()),
}


def sandbox_params(language: str) -> list:
    """One pytest param per sandbox the language runs on (from its spec), with its marks."""
    from icplay.languages import sandboxes

    return [pytest.param(kind, marks=[getattr(pytest.mark, m) for m in SANDBOX_NEEDS[kind][1]], id=kind)
            for kind in sandboxes(language)]


def language_sandbox_params() -> list:
    """(language, sandbox) for every registered language and every sandbox it runs on."""
    from icplay.languages import names, sandboxes

    return [pytest.param(lang, kind, marks=[getattr(pytest.mark, m) for m in SANDBOX_NEEDS[kind][1]],
                         id=f"{lang}-{kind}")
            for lang in names() for kind in sandboxes(lang)]


def require_sandbox(request, language: str, sandbox: str) -> None:
    """Docker or Podman (with the language's image built), bwrap or MariaDB, or fail under CI."""
    fixture = SANDBOX_NEEDS[sandbox][0]
    if fixture is None:
        return
    client = request.getfixturevalue(fixture)
    if fixture in ("docker_client", "podman_client"):
        from icplay.languages import get
        from icplay.sandbox.images import IMAGES, ensure_image

        spec = get(language)        # its spec registers its images
        for image in spec.images:
            if image.key in IMAGES:
                ensure_image(client, image.key, lambda line: None)


# The set a language's probes take their first task from (default: the language's bundled set).
PROBE_SETS = {"harbor": f"harbor:{Path(__file__).resolve().parents[2] / 'data' / 'harbor'}"}


def first_task(language: str) -> Task:
    from icplay.tasks.registry import load_tasks

    return load_tasks(PROBE_SETS.get(language, language))[0]


# -- usable after the probe -----------------------------------------------------------------


def _shell_usable(probed: "ProbedEpisode") -> None:
    first = probed.act("export ICPLAY_PROBE=alive; cd /tmp")
    second = probed.act("echo $ICPLAY_PROBE $PWD")
    assert first.exit_code == 0 and second.exit_code == 0, (first.observation, second.observation)
    assert second.observation.startswith("alive /tmp"), second.observation


def _sql_usable(probed: "ProbedEpisode") -> None:
    turn = probed.act("SELECT 40 + 2")
    assert "42" in turn.observation and not turn.info.get("error"), turn.observation


def _python_usable(probed: "ProbedEpisode") -> None:
    probed.act("icplay_probe_value = 41")
    turn = probed.act("print(icplay_probe_value + 1)")
    assert turn.observation.strip().endswith("42"), turn.observation


# The check per language that its session still answers and keeps state (a plugin language
# without one is checked only for its saved turns).
USABLE: dict[str, Callable[["ProbedEpisode"], None]] = {
    "bash": _shell_usable, "ctf": _shell_usable, "sql": _sql_usable, "python": _python_usable,
}


@dataclass
class ProbedEpisode:
    """One episode of a probe: every action a turn of a real Episode saved by a real store."""

    env: object
    task: Task
    store: TrajectoryStore
    episode: Episode = field(init=False)

    def __post_init__(self) -> None:
        self.episode = Episode(self.env, self.task, save=self.store.save,
                               policy={"kind": "llm", "model": "reward-probe", "protocol": "intercode"})

    @property
    def language(self) -> str:
        return self.task.env

    @property
    def sandbox(self):
        return getattr(self.env, "sandbox", None)

    def act(self, action: str) -> Turn:
        return self.episode.act(action)

    def score(self) -> SubmitResult:
        """Score now without ending the episode (InterCode's per-turn protocol)."""
        return self.episode.score()

    def submit(self, arg: str | None = None) -> SubmitResult:
        return self.episode.submit(arg)

    @staticmethod
    def assert_not_solved(result: SubmitResult, both: bool = False) -> None:
        """The probe did not buy a solve: reward below 1.0 or a strict verdict of not solved
        (``both``: the reward below 1.0 and a verdict of not solved)."""
        judged_no = result.strict is not None and result.strict.get("solved") is False
        if both:
            assert result.reward < 1.0 and judged_no, (result.reward, result.strict, result.breakdown)
        else:
            assert result.reward < 1.0 or judged_no, (result.reward, result.strict, result.breakdown)

    def saved_turns(self) -> list[Turn]:
        return load_trajectory(self.store.path_for(self.episode.trajectory)).turns

    def assert_all_saved(self) -> None:
        """The saved file holds every turn as played: action, observation, reward, verdict."""
        saved, mine = self.saved_turns(), self.episode.trajectory.turns
        assert [t.action for t in saved] == [t.action for t in mine]
        assert [t.observation for t in saved] == [t.observation for t in mine]
        assert [t.reward for t in saved] == [t.reward for t in mine]
        assert [t.info.get("strict") for t in saved] == [t.info.get("strict") for t in mine]

    def assert_usable(self) -> None:
        check = USABLE.get(self.language)
        if check is not None:
            check(self)

    def assert_after_probe(self) -> None:
        """The session still usable (while the episode goes on), then every turn saved."""
        if self.episode.trajectory.status == "running":
            self.assert_usable()
        self.assert_all_saved()


@pytest.fixture
def probe(request, tmp_path):
    """``probe(language, sandbox, task, **env_options)``: a ProbedEpisode on a new env of its
    own (closed at teardown), so that nothing of one probe reaches the next."""
    envs = []
    store = TrajectoryStore(tmp_path / "trajectories")

    def start(language: str, sandbox: str, task: Task, **options) -> ProbedEpisode:
        from icplay.languages import make_env

        require_sandbox(request, language, sandbox)
        options.setdefault("timeout", PROBE_TIMEOUT)
        if sandbox == "mysql":   # MariaDB on the engine the Docker tests drive (ICPLAY_TEST_SANDBOX=podman: Podman)
            options.setdefault("engine", os.environ.get("ICPLAY_TEST_SANDBOX") or "docker")
        env = make_env(language, sandbox=sandbox, **options)
        envs.append(env)
        return ProbedEpisode(env, task, store)

    yield start
    for env in envs:
        env.close()


def probe_folder(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder
