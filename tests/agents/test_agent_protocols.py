"""Protocols and limits: intercode vs agent, turns, tokens, cost, wall time, run budget, gates."""

import pytest
from agent_helpers import make_task

from icplay.agents.protocols import Budget, Limits, play
from icplay.agents.replay import GoldPolicy
from icplay.episode import Decision, Proposal


class Scripted:
    """A policy that proposes fixed actions (None = submit, "!" = an unparsable reply) with fixed usage."""

    def __init__(self, actions, tokens=100, cost=0.01):
        self.actions, self.tokens, self.cost = list(actions), tokens, cost

    def propose(self, task, trajectory, cancel=None, notify=None):
        i = len([t for t in trajectory.turns if t.action or t.info.get("invalid")])
        usage = {"prompt_tokens": self.tokens - 10, "completion_tokens": 10, "cost": self.cost, "calls": 1}
        action = self.actions[i] if i < len(self.actions) else None
        if action == "!":
            return Proposal("", None, "hmm", {"invalid": True, "retry_message": "retry!", "usage": usage})
        return Proposal(action, info={"usage": usage})


WRONG, RIGHT, CLOSE = "SHOW TABLES", "SELECT count(*) FROM singer", "SELECT count(*) FROM singers"


def test_intercode_scores_every_action_and_stops_at_reward_one(table_env):
    traj = play(table_env, make_task(1), Scripted([WRONG, "!", RIGHT, WRONG]), "intercode", Limits(max_turns=10))
    assert [t.reward for t in traj.turns] == [0.0, 0.0, 1.0]
    assert traj.best_reward == 1.0 and traj.reward == 1.0 and traj.solved
    assert table_env.submits == 2 and table_env.steps == [WRONG, RIGHT]


def test_intercode_success_is_the_best_reward_not_the_last(table_env):
    table_env.answers[CLOSE] = "6 rows"
    traj = play(table_env, make_task(1), Scripted([CLOSE, WRONG]), "intercode", Limits(max_turns=2))
    assert [t.reward for t in traj.turns] == [0.5, 0.0]
    assert traj.best_reward == 0.5 and traj.reward == 0.0 and traj.policy["ended_by"] == "turns"


def test_intercode_all_unparsable_scores_zero_without_running_anything(table_env):
    traj = play(table_env, make_task(1), Scripted(["!", "!"]), "intercode", Limits(max_turns=2))
    assert traj.reward == 0.0 and traj.best_reward == 0.0 and table_env.submits == 0 and traj.status == "submitted"


def test_agent_protocol_submits_at_the_turn_limit(table_env):
    traj = play(table_env, make_task(1), Scripted([WRONG, RIGHT, WRONG]), "agent", Limits(max_turns=2))
    assert [t.reward for t in traj.turns] == [None, None]
    assert traj.solved and traj.policy["ended_by"] == "turns" and table_env.submits == 1


def test_episode_token_and_cost_and_time_limits_end_and_score_the_episode(table_env):
    traj = play(table_env, make_task(1), Scripted([WRONG] * 9, tokens=100), "agent", Limits(max_tokens=250))
    assert len(traj.turns) == 3 and traj.policy["ended_by"] == "tokens" and traj.status == "submitted"
    traj = play(table_env, make_task(1), Scripted([WRONG] * 9, cost=0.02), "agent", Limits(max_cost=0.05))
    assert len(traj.turns) == 3 and traj.policy["ended_by"] == "cost"
    table_env.delay = 0.05
    traj = play(table_env, make_task(1), Scripted([WRONG] * 9), "agent", Limits(max_seconds=0.12))
    assert 2 <= len(traj.turns) <= 3 and traj.policy["ended_by"] == "time"


def test_run_budget_stops_the_episode_for_a_rerun(table_env):
    budget = Budget(max_tokens=150)
    traj = play(table_env, make_task(1), Scripted([WRONG] * 9), "agent", budget=budget)
    assert traj.status == "stopped" and "token limit" in traj.error and len(traj.turns) == 2
    assert budget.tokens == 200


def test_should_stop_leaves_the_episode_stopped(table_env):
    traj = play(table_env, make_task(1), Scripted([WRONG] * 9), "agent", should_stop=lambda: True)
    assert traj.status == "stopped" and traj.turns == []


def test_a_gate_can_reject_with_a_comment_and_edit(table_env):
    class Reviewer:
        def __init__(self):
            self.n = 0

        def decide(self, proposal, trajectory):
            self.n += 1
            if self.n == 1:
                return Decision.reject("look first")
            if self.n == 2:
                return Decision.edit(RIGHT, "fixed it")
            return Decision.submit()

    traj = play(table_env, make_task(1), Scripted([WRONG, WRONG, WRONG]), "agent", gate=Reviewer())
    assert traj.turns[0].info["rejected"] and traj.turns[0].comment == "look first"
    assert traj.turns[1].action == RIGHT and traj.turns[1].proposed == WRONG and traj.solved


def test_gold_policy_and_saving_after_every_turn(table_env):
    saved = []
    traj = play(table_env, make_task(1), GoldPolicy(), "agent", save=lambda t: saved.append(len(t.turns)))
    assert traj.solved and len(traj.turns) == 1 and saved[-1] == 1 and len(saved) >= 2


def test_an_env_error_marks_the_episode_and_raises(table_env):
    def broken(action, on_output=None):
        raise RuntimeError("sandbox died")

    table_env.step = broken
    saved = []
    with pytest.raises(RuntimeError):
        play(table_env, make_task(1), Scripted([WRONG]), "agent", save=saved.append)
    assert saved[-1].status == "error" and "sandbox died" in saved[-1].error


def test_unknown_protocol(table_env):
    with pytest.raises(ValueError, match="unknown protocol"):
        play(table_env, make_task(1), GoldPolicy(), "paper")
