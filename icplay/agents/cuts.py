"""A reply cut short never runs: what the policy does with it instead.

A reply is *cut* when the server stopped it at the token limit (``finish_reason:
"length"``) or when it leaves a code fence open (text protocol: its block is not whole).
Half a command is never run (a cut ``rm -rf /tmp/build`` could be ``rm -rf /``), nor are the
tool calls of a cut reply (their arguments may be cut too). Instead the turn is recorded
as an unparsable one (``invalid_reason`` ``truncated`` or ``open_fence``; ``info["truncated"]``
says the reason and the budget it was cut at), the model is told so, and:

- a reply cut at the token limit is asked again with a raised budget
  (``families.raised_budget``: twice as much, at least the family's default, up to the
  family's ceiling or the user's own ``--max-tokens``);
- when the budget cannot be raised, the model gets one more try at the same budget; a
  second reply cut at the ceiling in a row ends the episode, ``ended_by: "truncated"``
  (scored as it stands, like any other limit).
"""

from __future__ import annotations

from typing import Any

from icplay.agents.families import BUDGET_PARAMS, raised_budget
from icplay.agents.parsing import leaves_fence_open, retry_message
from icplay.agents.tools import TOOLS, toolset
from icplay.episode import Proposal, Trajectory

LENGTH, OPEN_FENCE = "length", "open_fence"
ENDED_TRUNCATED = "truncated"


def budget_after_cut(trajectory: Trajectory) -> int | None:
    """The budget the next call asks with when the last turn was a reply cut at the token
    limit (None: the usual one)."""
    if not trajectory.turns:
        return None
    cut = trajectory.turns[-1].info.get("truncated")
    return cut.get("next_budget") if isinstance(cut, dict) else None


def cut_of(done: Any, trajectory: Trajectory, actions: str, family: Any, chosen: int | None) -> dict[str, Any] | None:
    """What cut the reply ``done`` (a ``Completion``), as the turn records it; None when it is whole."""
    if done.truncated:
        reason = LENGTH
    elif actions != TOOLS and leaves_fence_open(done.text):
        reason = OPEN_FENCE
    else:
        return None
    sent = next((done.params[k] for k in BUDGET_PARAMS if k in done.params), None)
    cut: dict[str, Any] = {"reason": reason, "budget": sent}
    if reason == LENGTH:
        cut["next_budget"] = raised_budget(family, int(sent), chosen) if sent else None
        if cut["next_budget"] is None and _cut_at_the_ceiling_before(trajectory):
            cut["ends_episode"] = True
    return cut


def _cut_at_the_ceiling_before(trajectory: Trajectory) -> bool:
    """Was the last turn a reply cut at the token limit whose budget could not be raised?"""
    before = trajectory.turns[-1].info.get("truncated") if trajectory.turns else None
    return isinstance(before, dict) and before.get("reason") == LENGTH and before.get("next_budget") is None


def cut_message(cut: dict[str, Any], language: str, strategy: str, actions: str) -> str:
    """What the model is told about its cut reply."""
    if actions == TOOLS:
        tail = f"Act through the tools: {toolset(language).usage()}."
    else:
        tail = retry_message(language, strategy).split(". ", 1)[1]
    if cut["reason"] == OPEN_FENCE:
        return f"[icplay] Your last reply left a code block open (its closing fence never came), so nothing was run. {tail}"
    budget = f" ({cut['budget']} tokens)" if cut.get("budget") else ""
    return (f"[icplay] Your last reply was cut off at the length limit{budget}, so nothing of it was run. "
            f"Think less and answer with one {'tool call' if actions == TOOLS else 'command'}. {tail}")


def cut_proposal(done: Any, cut: dict[str, Any], info: dict[str, Any], language: str, strategy: str,
                 actions: str) -> Proposal:
    """The unparsable proposal a cut reply becomes (nothing of it runs)."""
    info = {**info, "invalid": True, "invalid_reason": "truncated" if cut["reason"] == LENGTH else OPEN_FENCE,
            "retry_message": cut_message(cut, language, strategy, actions),
            "truncated": {k: v for k, v in cut.items() if k != "ends_episode"}}
    if actions == TOOLS:
        info["actions"] = TOOLS
    if "tool_calls" in info:
        info["cut_tool_calls"] = info.pop("tool_calls")
    if cut.get("ends_episode"):
        info["ends_episode"] = ENDED_TRUNCATED
    return Proposal("", None, done.text, info)


__all__ = ["budget_after_cut", "cut_of", "cut_message", "cut_proposal", "ENDED_TRUNCATED"]
