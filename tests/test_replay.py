"""Replays are policies on the driver (icplay/driver/replay.py): recorded actions played out
whole through ``Driver.step`` on a real SQLite env, and the capabilities front ends read
from a language's spec instead of its name."""

from __future__ import annotations

import pytest

from icplay.cli import main
from icplay.driver.replay import Recorded, replay
from icplay.envs.sql import SqlEnv
from icplay.episode import Episode
from icplay.languages import get
from icplay.languages.turns import TurnPlan
from icplay.review.fork import fork_languages, forkable
from icplay.sql import make_sql_backend
from icplay.tasks.registry import load_tasks


@pytest.fixture
def sql_episode():
    env = SqlEnv(make_sql_backend("sqlite"))
    task = load_tasks("sql")[0]
    yield Episode(env, task), task
    env.close()


def test_a_replay_plays_the_recording_out_past_a_solved_turn(sql_episode):
    """Under InterCode's loop a live episode ends at 1.0; a replay scores every recorded turn."""
    episode, task = sql_episode
    done = replay(episode, [Recorded(task.gold), Recorded("SELECT 1"), Recorded(task.gold)], protocol="intercode",
                  turn_rule=get("sql").intercode_turn)
    assert [r.result.reward if r.result else None for r in done.turns] == [1.0, 0.0, 1.0]
    assert [t.action for t in episode.trajectory.turns] == [task.gold, "SELECT 1", task.gold]


def test_a_turn_that_never_ran_runs_nothing_and_scores_zero(sql_episode):
    episode, task = sql_episode
    done = replay(episode, [Recorded(task.gold), Recorded(task.gold, ran=False)], protocol="intercode",
                  turn_rule=get("sql").intercode_turn)
    assert done.turns[1].turn.action == "" and done.turns[1].turn.reward == 0.0 and done.turns[1].result is None
    assert episode.trajectory.turns[0].reward == 1.0


def test_a_recorded_turn_can_carry_its_own_plan(sql_episode):
    """A re-execution scores the turns scored when recorded, whatever the rule says."""
    episode, task = sql_episode
    done = replay(episode, [Recorded(task.gold, plan=TurnPlan(score=False)), Recorded(task.gold)],
                  submit_at_end=True)
    assert [r.result for r in done.turns] == [None, None]        # the default rule runs, scores nothing
    assert done.final is not None and done.final.reward == 1.0
    scored = replay(Episode(episode.env, task), [Recorded(task.gold, plan=TurnPlan())])
    assert scored.turns[0].result is not None and scored.turns[0].result.reward == 1.0


def test_forks_are_a_capability_of_the_spec():
    assert [name for name in ("bash", "sql", "python", "ctf", "harbor", "nosuch") if forkable(name)] == ["bash", "sql"]
    assert fork_languages() == "Bash and SQL"


def test_rescore_names_the_languages_the_registry_rescores(tmp_path, capsys):
    results = tmp_path / "results.json"
    results.write_text("{}")
    tasks = tmp_path / "tasks.json"
    tasks.write_text('[{"id": "1", "query": "q", "gold": "ls"}]')
    code = main(["rescore", str(results), "--tasks", str(tasks), "--env", "harbor"])
    assert code != 0
    err = capsys.readouterr().err
    assert "rescore replays Bash, SQL, Python and CTF sets" in err and "harbor set" in err
