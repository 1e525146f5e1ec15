"""Forking a saved episode from turn k, on real sandboxes (bwrap for Bash, SQLite for SQL):
the fork's fresh sandbox holds what its first k turns built, and the fork records where it
came from."""

from __future__ import annotations

import pytest

from icplay.driver import Driver, DriverSettings, Limits
from icplay.episode import Proposal
from icplay.languages import make_env
from icplay.episode import Episode
from icplay.formats.summary import family, scan
from icplay.review import fork, open_fork
from icplay.review.fork import ForkError
from icplay.session import Session
from icplay.store import load_trajectory
from icplay.tasks.registry import load_tasks

BASH_TASK = next(t for t in load_tasks("bash") if t.id == "b001")
SQL_TASK = next(t for t in load_tasks("sql") if t.id == "bookshop-01")


def recorded_bash_episode(tmp_path):
    """Three turns: the first writes a file, the second appends to it, the third removes it."""
    env = make_env("bash", sandbox="bwrap")
    try:
        session = Session("orig", root=tmp_path / "orig")
        episode = Episode(env, BASH_TASK, save=session.save, policy={"kind": "human"}, annotator="ann")
        episode.act("echo first > /testbed/fork_note.txt")
        episode.act("echo second >> /testbed/fork_note.txt")
        episode.act("rm /testbed/fork_note.txt && ls /testbed/fork_note.txt")
        episode.submit()
        return load_trajectory(session.path_for(BASH_TASK))
    finally:
        env.close()


@pytest.mark.usefixtures("bwrap_ready")
def test_fork_continues_with_the_first_turns_state(tmp_path):
    source = recorded_bash_episode(tmp_path)
    assert "No such file" in source.turns[2].observation
    env = make_env("bash", sandbox="bwrap")
    try:
        forks = Session("forks", root=tmp_path / "forks", annotator="bob")
        episode, replayed = open_fork(env, source, 2, forks, policy={"kind": "human", "user": "bob-os-account"})
        assert replayed == 2
        assert [t.action for t in episode.trajectory.turns] == [t.action for t in source.turns[:2]]
        turn = episode.act("cat /testbed/fork_note.txt")
        assert turn.observation.split() == ["first", "second"]      # the file the early turns wrote is there
        episode.submit()
    finally:
        env.close()
    saved = load_trajectory(forks.path_for(BASH_TASK))
    assert saved.forked_from == {"id": source.id, "turn": 2}
    assert saved.id != source.id
    assert len(saved.turns) == 3 and saved.turns[2].action == "cat /testbed/fork_note.txt"
    # the fork records its annotator (on the episode and on the human turn made in it), never an OS account
    assert saved.annotator == "bob" and "user" not in saved.policy and saved.status == "submitted"
    assert saved.turns[2].info["annotator"] == "bob" and saved.turns[0].info["annotator"] == "ann"   # kept from the source
    # the source is untouched, and view's family links the two
    assert len(load_trajectory(tmp_path / "orig" / "bash" / "b001.json").turns) == 3
    rows = scan([tmp_path / "orig", tmp_path / "forks"], cache=False)
    assert [r.id for r in family(rows, saved.id)] == [source.id, saved.id]


@pytest.mark.usefixtures("bwrap_ready")
def test_fork_at_turn_one_does_not_carry_later_state(tmp_path):
    source = recorded_bash_episode(tmp_path)
    env = make_env("bash", sandbox="bwrap")
    try:
        episode, replayed = open_fork(env, source, 1, Session("forks", root=tmp_path / "forks"))
        assert replayed == 1
        assert episode.act("cat /testbed/fork_note.txt").observation.split() == ["first"]
    finally:
        env.close()


def test_fork_continued_by_an_agent(tmp_path, sql_env):
    """An agent (here the gold policy, driven by the Driver) goes on from a human's first turn."""
    session = Session("orig", root=tmp_path / "orig")
    episode = Episode(sql_env, SQL_TASK, save=session.save)
    episode.act("CREATE TABLE scratch(x)")
    episode.act("INSERT INTO scratch VALUES (42)")
    source = load_trajectory(session.path_for(SQL_TASK))
    forks = Session("forks", root=tmp_path / "forks")
    episode, replayed = open_fork(sql_env, source, 2, forks, policy={"kind": "gold"})
    assert replayed == 2
    assert "42" in episode.act("SELECT x FROM scratch").observation
    traj = Driver(episode, DriverSettings(GoldAfterFork(), limits=Limits(max_turns=5))).run()
    assert traj.status == "submitted" and traj.reward == 1.0
    assert traj.forked_from == {"id": source.id, "turn": 2}
    assert [t.author for t in traj.turns] == ["human", "human", "human", "agent"]


def test_fork_turn_out_of_range(tmp_path, sql_env):
    session = Session("orig", root=tmp_path / "orig")
    episode = Episode(sql_env, SQL_TASK, save=session.save)
    episode.act("SELECT 1")
    with pytest.raises(ForkError, match="the episode has 1 turns"):
        fork(episode.trajectory, 2)
    assert fork(episode.trajectory, 0).turns == []


class GoldAfterFork:
    """An agent that plays the gold query once it gets the episode, then submits."""

    def propose(self, task, trajectory, cancel=None, notify=None):
        if any(t.author == "agent" for t in trajectory.turns):
            return Proposal(None)
        return Proposal(task.gold)


@pytest.fixture
def sql_env():
    env = make_env("sql", sandbox="sqlite")
    yield env
    env.close()
