"""Watched episodes for the branching and export tests: a scripted agent proposes, a scripted
reviewer decides (edits, rejections) through the real Driver, on a real env."""

from __future__ import annotations

from icplay.driver import Driver, DriverSettings, Limits
from icplay.episode import Decision, Episode, Proposal
from icplay.languages import make_env
from icplay.store import save_trajectory


class ScriptedAgent:
    """Proposes the given actions in order (None: submit)."""

    def __init__(self, actions):
        self.actions = list(actions)
        self.calls = 0

    def describe(self):
        return {"kind": "llm", "model": "scripted-model", "strategy": "tryagain", "actions": "text"}

    def propose(self, task, trajectory, cancel=None, notify=None):
        action = self.actions[self.calls] if self.calls < len(self.actions) else None
        self.calls += 1
        return Proposal(action, thought=f"step {self.calls}")


class ScriptedReviewer:
    """A gate that answers each proposal with the next decision (None, or none left: let it run)."""

    def __init__(self, decisions):
        self.decisions = list(decisions)

    def decide(self, proposal, trajectory):
        decision = self.decisions.pop(0) if self.decisions else None
        if decision is not None:
            return decision
        return Decision.submit() if proposal.action is None else Decision.run()


def watched_episode(task, sandbox, proposals, decisions, path, annotator="ann"):
    """The episode an agent proposing ``proposals`` and a reviewer deciding ``decisions``
    played on ``task``, saved at ``path`` and returned."""
    env = make_env(task.env, sandbox=sandbox)
    agent = ScriptedAgent(proposals)
    try:
        episode = Episode(env, task, save=lambda t: save_trajectory(t, path), policy=agent.describe(),
                          annotator=annotator)
        Driver(episode, DriverSettings(agent, "agent", Limits(max_turns=10), broker=ScriptedReviewer(decisions))).run()
    finally:
        env.close()
    return episode.trajectory


def edit(action, comment=None):
    return Decision.edit(action, comment)


def reject(comment=None):
    return Decision.reject(comment)
