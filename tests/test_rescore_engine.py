"""The rescore loop the four languages share (``icplay.rescore``): episodes split over
``jobs`` workers, each with its own env, give the same records as one worker; progress
and errors come back in the caller's thread. Real SQLite episodes, replayed for real."""

from __future__ import annotations

import threading

import pytest

from icplay.envs.sql import SqlEnv
from icplay.formats.intercode import RecordedEpisode
from icplay.rescore import replay_all
from icplay.sql import make_sql_backend
from icplay.rescore.sql import rescore_episode
from icplay.tasks.model import TaskFileError
from icplay.tasks.registry import load_tasks


def recorded(tasks, count: int) -> list[RecordedEpisode]:
    """Episodes over the first ``count`` bundled tasks: a wrong query, then the gold (recorded 1.0)."""
    return [RecordedEpisode(key=str(i), task_index=i, query=tasks[i].query,
                            actions=["SELECT 1", tasks[i].gold], observations=[None, None], rewards=[0.0, 1.0])
            for i in range(count)]


class CountedEnvs:
    """SQLite envs, counting those made and the threads that made them (Thread objects: an
    ident is reused once its thread has ended, so a worker that starts after another finished
    can carry the same ident)."""

    def __init__(self):
        self.made, self.threads, self.closed = 0, set(), 0
        self.lock = threading.Lock()

    def __call__(self):
        with self.lock:
            self.made += 1
            self.threads.add(threading.current_thread())
        env = SqlEnv(make_sql_backend("sqlite"))
        close = env.close

        def counted_close():
            with self.lock:
                self.closed += 1
            close()

        env.close = counted_close
        return env


def test_jobs_split_the_episodes_and_agree_with_one_worker():
    tasks = load_tasks("sql")
    one, many = CountedEnvs(), CountedEnvs()
    serial, serial_summary = replay_all(recorded(tasks, 7), tasks, one, rescore_episode)
    calls = []
    parallel, summary = replay_all(recorded(tasks, 7), tasks, many, rescore_episode, jobs=3,
                                   progress=lambda done, total: calls.append((done, total, threading.get_ident())))
    assert {k: [r.to_dict() for r in v] for k, v in parallel.items()} == \
        {k: [r.to_dict() for r in v] for k, v in serial.items()}
    assert summary == serial_summary and summary.solved == 7 and summary.episodes_agreeing == 7
    assert (one.made, one.closed, one.threads) == (1, 1, {threading.current_thread()})   # jobs=1: the caller's thread
    assert (many.made, many.closed, len(many.threads)) == (3, 3, 3)
    assert [(done, total) for done, total, _ in calls] == [(n, 7) for n in range(1, 8)]
    assert {thread for *_, thread in calls} == {threading.get_ident()}


def test_more_jobs_than_episodes_make_only_the_envs_needed():
    tasks = load_tasks("sql")
    envs = CountedEnvs()
    results, _ = replay_all(recorded(tasks, 2), tasks, envs, rescore_episode, jobs=5)
    assert sorted(results) == ["0", "1"] and envs.made == envs.closed == 2


def test_a_workers_error_reaches_the_caller_and_its_env_is_closed():
    tasks = load_tasks("sql")
    envs = CountedEnvs()

    def replay_one(env, episode, task):
        if episode.key == "4":
            raise RuntimeError("episode 4 broke")
        return rescore_episode(env, episode, task)

    with pytest.raises(RuntimeError, match="episode 4 broke"):
        replay_all(recorded(tasks, 6), tasks, envs, replay_one)
    assert envs.made == envs.closed == 1
    with pytest.raises(RuntimeError, match="episode 4 broke"):
        replay_all(recorded(tasks, 6), tasks, CountedEnvs(), replay_one, jobs=2)


def test_no_env_factory_replays_without_envs():
    tasks = load_tasks("sql")
    seen = []
    results, _ = replay_all(recorded(tasks, 2), tasks, None, lambda env, episode, task: seen.append(env) or [])
    assert seen == [None, None] and results == {"0": [], "1": []}


def test_an_episode_outside_the_task_file_is_one_error():
    tasks = load_tasks("sql")
    episodes = recorded(tasks, 1)
    episodes[0].task_index = len(tasks)
    with pytest.raises(TaskFileError, match="outside the task file"):
        replay_all(episodes, tasks, CountedEnvs(), rescore_episode)
