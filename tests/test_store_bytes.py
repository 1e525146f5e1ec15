"""Any bytes in an action or an observation are saved, and load back as typed (issue 11).

Bytes that are not UTF-8 reach icplay as lone surrogates (``surrogateescape``: the plain
REPL's stdin, a script's arguments); saving such a turn raised UnicodeEncodeError, so the
action ran but its turn was lost. Each test runs a real episode (Episode + TrajectoryStore)
on a real backend: SQLite, MariaDB, bwrap, Docker.
"""

from __future__ import annotations

import json

import pytest

from icplay.languages import make_env
from icplay.envs.sql import SqlEnv
from icplay.episode import Episode
from icplay.store import TrajectoryStore, load_trajectory, printable, save_trajectory
from icplay.tasks.model import Task
from icplay.tasks.registry import load_tasks
from test_sql_support import BUNDLED, new_backend

# "café" typed in Latin-1, and a byte that is never UTF-8.
LATIN1 = "caf\udce9"
NEVER = "\udcff"


def saved_and_loaded(store: TrajectoryStore, episode: Episode):
    """The episode's file: strict UTF-8 JSON, loaded back through the store."""
    path = store.path_for(episode.trajectory)
    raw = path.read_bytes()
    json.loads(raw.decode("utf-8"))           # valid UTF-8, valid JSON: any tool can read it
    return load_trajectory(path)


def test_lone_surrogates_round_trip_through_a_trajectory_file(tmp_path):
    task = load_tasks("sql")[0]
    env = SqlEnv(new_backend("sqlite", _Request()))
    store = TrajectoryStore(tmp_path)
    episode = Episode(env, task, save=store.save)
    odd = f"SELECT '{LATIN1}{NEVER}\udc80 ok é 😀'"
    episode.act(odd)
    loaded = saved_and_loaded(store, episode)
    assert loaded.turns[0].action == odd
    assert printable(odd) == "SELECT 'caf\ufffd\ufffd\ufffd ok é 😀'"
    # what was readable stays readable in the file (not \u-escaped)
    assert "ok é 😀" in store.path_for(episode.trajectory).read_text(encoding="utf-8")
    env.backend.close()


class _Request:
    """Enough of pytest's request for new_backend('sqlite')."""

    def addfinalizer(self, fn):
        pass


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("mysql", marks=pytest.mark.mysql)])
def test_sql_action_with_bytes_that_are_not_utf8_is_saved_and_the_session_survives(kind, request, tmp_path):
    backend = new_backend(kind, request)
    env = SqlEnv(backend)
    task = Task(id="b1", set="test", env="sql", query="q", gold="SELECT COUNT(*) FROM authors", db="bookshop",
                extra={"databases": str(BUNDLED)})
    store = TrajectoryStore(tmp_path)
    episode = Episode(env, task, save=store.save)
    assert episode.act("CREATE TEMPORARY TABLE kept (x INT)").exit_code == 0
    odd = episode.act(f"SELECT name FROM authors WHERE name = '{LATIN1}'")
    assert odd.exit_code == 1 and "not UTF-8" in odd.observation
    after = episode.act("SELECT COUNT(*) FROM kept")     # same session: nothing was reconnected
    assert after.exit_code == 0 and after.observation == "[(0,)]"
    loaded = saved_and_loaded(store, episode)
    assert [t.action for t in loaded.turns] == [t.action for t in episode.trajectory.turns]
    assert loaded.turns[1].action.endswith(f"'{LATIN1}'")


def bash_episode(sandbox: str, tmp_path):
    env = make_env("bash", sandbox=sandbox)
    task = next(t for t in load_tasks("bash"))
    store = TrajectoryStore(tmp_path)
    return env, store, Episode(env, task, save=store.save)


def check_bash_bytes(env, store, episode):
    try:
        # The bytes of the action reach the shell as typed: e9 is Latin-1's é.
        typed = episode.act(f"printf %s '{LATIN1}{NEVER}' | od -An -tx1")
        assert typed.observation.split() == ["63", "61", "66", "e9", "ff"]
        # Output that is not UTF-8 is shown with replacement characters, and saved.
        shown = episode.act(f"printf '{LATIN1}\\n'; printf '\\xff\\xfe\\n'")
        assert shown.observation.splitlines() == ["caf\ufffd", "\ufffd\ufffd"]
        assert episode.act("echo still here").observation.strip() == "still here"
        loaded = saved_and_loaded(store, episode)
        assert [t.action for t in loaded.turns] == [t.action for t in episode.trajectory.turns]
        assert [t.observation for t in loaded.turns] == [t.observation for t in episode.trajectory.turns]
        assert NEVER in loaded.turns[0].action
    finally:
        env.close()


@pytest.mark.bwrap
def test_bash_on_bwrap_saves_actions_with_bytes_that_are_not_utf8(bwrap_ready, tmp_path):
    check_bash_bytes(*bash_episode("bwrap", tmp_path))


@pytest.mark.docker
def test_bash_on_docker_saves_actions_with_bytes_that_are_not_utf8(bash_image, tmp_path):
    check_bash_bytes(*bash_episode("docker", tmp_path))


def test_save_trajectory_writes_strict_utf8(tmp_path):
    from icplay.episode import Trajectory, Turn

    traj = Trajectory(task={"id": "x", "set": "s"}, env="bash", sandbox="bwrap",
                      turns=[Turn(0, "human", f"echo {NEVER}", f"out {LATIN1}")])
    path = tmp_path / "t.json"
    save_trajectory(traj, path)
    path.read_bytes().decode("utf-8")
    assert load_trajectory(path).turns[0].observation == f"out {LATIN1}"
