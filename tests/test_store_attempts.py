"""No trajectory is overwritten (issue 11): a new attempt of a task never replaces an
earlier file, two processes never write one file, session names are folder names.

Runs real episodes on SQLite through Session / TrajectoryStore, and a second real
process (``python -c``) for the cross-process claim.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from icplay.languages import make_env
from icplay.episode import Episode
from icplay.session import Session, SessionNameError, check_session_name
from icplay.store import TrajectoryBusyError, TrajectoryStore, load_trajectory, open_trajectories
from icplay.tasks.registry import load_tasks

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def env():
    env = make_env("sql", sandbox="sqlite")
    yield env
    env.close()


@pytest.fixture
def task():
    return load_tasks("sql")[0]


def test_a_retry_after_submit_keeps_the_submitted_episode(env, task, tmp_path):
    session = Session("s1", home=tmp_path)
    first, _ = session.open_episode(env, task)
    first.act("SELECT 1")
    first.submit()
    second, _ = session.open_episode(env, task)
    second.act("SELECT 2")
    (kept,) = session.attempts(task)
    assert kept.id == first.trajectory.id and kept.status == "submitted"
    assert [t.action for t in kept.turns] == ["SELECT 1"]
    assert session.load(task).id == second.trajectory.id
    assert session.path_for(task).parent.parent == tmp_path / "trajectories" / "s1"
    assert (tmp_path / "attempts" / "s1" / task.set / f"{task.id}.1.json").is_file()


def test_a_new_episode_saved_over_another_moves_the_old_one_to_attempts(env, task, tmp_path):
    """A rerun of a stopped episode (the runner), or any writer saving a new episode of a
    task whose file holds another one: the old file is kept, numbered."""
    store = TrajectoryStore(tmp_path / "run")
    ids = []
    for n in range(3):
        episode = Episode(env, task, save=store.save)
        episode.act(f"SELECT {n}")
        episode.stop()
        ids.append(episode.trajectory.id)
    assert store.load_for(task.set, task.id).id == ids[2]
    kept = [load_trajectory(p) for p in store.attempt_paths(task.set, task.id)]
    assert [t.id for t in kept] == ids[:2]
    assert store.attempts_root == tmp_path / ".attempts" / "run"       # outside the folder report reads
    assert sorted(p.name for p in (tmp_path / "run").rglob("*.json")) == [f"{task.id}.json"]


def test_saving_the_same_episode_again_replaces_its_own_file_only(env, task, tmp_path):
    store = TrajectoryStore(tmp_path / "run")
    episode = Episode(env, task, save=store.save)
    for n in range(3):
        episode.act(f"SELECT {n}")
    resumed = load_trajectory(store.path_for(episode.trajectory))     # another object, same episode
    resumed.turns.pop()
    store.save(resumed)
    assert store.attempt_paths(task.set, task.id) == []
    assert len(store.load_for(task.set, task.id).turns) == 2
    episode.stop()


CLAIMER = textwrap.dedent("""
    import sys, time
    from icplay.session import Session
    from icplay.languages import make_env
    from icplay.tasks.registry import load_tasks
    env = make_env("sql", sandbox="sqlite")
    task = load_tasks("sql")[0]
    episode, _ = Session("shared", home=sys.argv[1]).open_episode(env, task)
    episode.act("SELECT 'from the other process'")
    print("open", flush=True)
    time.sleep(120)
""")


def test_a_second_process_cannot_open_an_open_episode_and_a_killed_one_leaves_no_lock(env, task, tmp_path):
    other = subprocess.Popen([sys.executable, "-c", CLAIMER, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline().strip() == "open", other.stderr.read()
        session = Session("shared", home=tmp_path)
        with pytest.raises(TrajectoryBusyError) as raised:
            session.open_episode(env, task)
        message = str(raised.value)
        assert "\n" not in message and f"pid {other.pid}" in message and str(session.path_for(task)) in message
        # Their file is untouched, and a plain store on the same folder is refused too.
        assert session.load(task).turns[0].action == "SELECT 'from the other process'"
        with pytest.raises(TrajectoryBusyError):
            Episode(env, task, save=TrajectoryStore(tmp_path / "trajectories" / "shared").save).act("SELECT 1")
    finally:
        other.send_signal(signal.SIGKILL)
        other.wait()
    # The kernel dropped the killed process's lock: the episode can be resumed here.
    episode, replayed = Session("shared", home=tmp_path).open_episode(env, task)
    assert replayed == 1 and episode.trajectory.turns[0].action == "SELECT 'from the other process'"
    episode.stop()
    assert episode.trajectory not in open_trajectories()


def test_one_process_shares_its_claims_and_releases_them_when_an_episode_ends(env, task, tmp_path):
    a, b = Session("same", home=tmp_path), Session("same", home=tmp_path)   # e.g. two screens of the app
    episode, _ = a.open_episode(env, task)
    assert episode.trajectory in open_trajectories()
    again, _ = b.open_episode(env, task)           # same process: allowed, resumes the same episode
    assert again.trajectory.id == episode.trajectory.id
    again.submit()
    assert all(t.id != episode.trajectory.id for t in open_trajectories())
    locks = tmp_path / "trajectories" / "same" / ".locks"
    assert not any(locks.rglob("*.lock"))


@pytest.mark.parametrize("name", ["../../x", "..", ".hidden", "a/b", "", "x" * 65, "with space", "tab\t"])
def test_session_names_that_are_not_folder_names_are_refused(name, tmp_path):
    with pytest.raises(SessionNameError) as raised:
        Session(name, home=tmp_path)
    assert "\n" not in str(raised.value)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("name", ["default", "plain", "run-2.b_3", "A"])
def test_plain_session_names_are_kept_as_they_are(name):
    assert check_session_name(name) == name
