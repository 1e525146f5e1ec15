"""Preference pairs grounded in outcomes: branches played from the same prefix, paired when
their scores differ, the better scored ``chosen``.

``icplay branch`` (icplay/review/branch.py) plays several continuations from the state
before one turn of an episode and saves each as an episode whose ``forked_from`` names the
parent, the turn and the branch (``recorded``, ``correction``, ``proposal``, ``sample``).
Branches of the same parent and turn share their prefix; two of them whose outcomes differ
(the final reward, then the strict verdict) make one pair: ``prompt`` is the conversation up
to the turn, ``chosen`` and ``rejected`` the two continuations to their end (the actions,
their outputs and the submit), ``chosen_reward``/``rejected_reward`` and the ``*_source``
fields say what each side scored and where it came from. Authorship never decides: a human's
correction that scored worse than the agent's proposal is the ``rejected`` side.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any, Iterable

from icplay.episode import Trajectory
from icplay.formats.export import (Conversation, Replies, _head, add_turns, close_conversation,
                                   preference_pairs)

OUTCOME, AUTHORSHIP = "outcome", "authorship"
AUTHORSHIP_NOTE = ("paired by who wrote it (the human's action chosen over the agent's proposal), not by outcome: "
                   "no score backs this pair")


def branch_key(traj: Trajectory) -> tuple[str, int] | None:
    """(parent episode, turn) of a branch ``icplay branch`` saved; None for other episodes."""
    origin = traj.forked_from or {}
    if not origin.get("branch") or not isinstance(origin.get("turn"), int):
        return None
    return str(origin.get("id")), int(origin["turn"])


def branch_groups(trajs: Iterable[Trajectory]) -> dict[tuple[str, int], list[Trajectory]]:
    """Scored branches by (parent, turn), in the order given."""
    groups: dict[tuple[str, int], list[Trajectory]] = {}
    for traj in trajs:
        key = branch_key(traj)
        if key is not None and traj.status == "submitted" and traj.reward is not None:
            groups.setdefault(key, []).append(traj)
    return groups


def outcome(traj: Trajectory) -> tuple[float, int]:
    """How well a branch did: its final reward, then a strict solve over none."""
    return float(traj.reward or 0.0), 1 if traj.strictly_solved else 0


def split(traj: Trajectory, turn: int, strategy: str, protocol: str | None, actions: str | None,
          reasoning: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str | None]]:
    """The branch as (prompt: the conversation before ``turn``, continuation: from it to the
    end, the continuation's authors). The prompt ends with an output or the task, the
    continuation with the assistant."""
    replies = Replies(traj, strategy, actions, reasoning)
    conv = Conversation(_head(traj, strategy, protocol, actions), [None, None])
    add_turns(conv, traj.turns[:turn], replies)
    cut = len(conv.messages)
    add_turns(conv, traj.turns[turn:], replies)
    close_conversation(conv, traj, replies, protocol)
    return conv.messages[:cut], conv.messages[cut:], conv.authors[cut:]


def source(traj: Trajectory, authors: list[str | None]) -> dict[str, Any]:
    origin = traj.forked_from or {}
    return {"episode": traj.id, "branch": origin.get("branch"), "model": traj.policy.get("model"),
            "authors": sorted({a for a in authors if a})}


def outcome_pairs(group: list[Trajectory], strategy: str = "tryagain", protocol: str | None = None,
                  actions: str | None = None, reasoning: bool = False) -> list[dict[str, Any]]:
    """Every two branches of one prefix whose outcomes differ, the better scored ``chosen``
    (two continuations with the same text are not a pair whatever they scored)."""
    parts = {t.id: split(t, branch_key(t)[1], strategy, protocol, actions, reasoning)   # type: ignore[index]
             for t in group}
    pairs = []
    for a, b in combinations(group, 2):
        if outcome(a) == outcome(b):
            continue
        chosen, rejected = (a, b) if outcome(a) > outcome(b) else (b, a)
        prompt, chosen_part, chosen_authors = parts[chosen.id]
        _, rejected_part, rejected_authors = parts[rejected.id]
        if not chosen_part or not rejected_part or chosen_part == rejected_part:
            continue
        parent, turn = branch_key(chosen)   # type: ignore[misc]
        pair = {"prompt": prompt, "chosen": chosen_part, "rejected": rejected_part, "pairing": OUTCOME,
                "chosen_reward": chosen.reward, "rejected_reward": rejected.reward,
                "chosen_strict": chosen.strictly_solved, "rejected_strict": rejected.strictly_solved,
                "chosen_source": source(chosen, chosen_authors), "rejected_source": source(rejected, rejected_authors),
                "task": chosen.task_key, "parent": parent, "turn": turn}
        if (schemas := Replies(chosen, strategy, actions).schemas()) is not None:
            pair["tools"] = schemas
        pairs.append(pair)
    return pairs


def preference_records(trajs: list[Trajectory], strategy: str = "tryagain", protocol: str | None = None,
                       actions: str | None = None, reasoning: bool = False,
                       by_authorship: bool = False) -> list[dict[str, Any]]:
    """Outcome pairs of every branch group; with ``by_authorship`` also the old pairs of a
    human's edit or rejection against the agent's proposal, each marked so and without
    scores, except where branches of that turn exist (then their outcomes decide)."""
    groups = branch_groups(trajs)
    records = [p for group in groups.values() for p in outcome_pairs(group, strategy, protocol, actions, reasoning)]
    if by_authorship:
        for traj in trajs:
            if branch_key(traj) is not None:
                continue
            for pair in preference_pairs(traj, strategy, protocol, actions, reasoning):
                if (traj.id, pair["turn"]) in groups:
                    continue
                records.append({**pair, "pairing": AUTHORSHIP, "note": AUTHORSHIP_NOTE,
                                "chosen_reward": None, "rejected_reward": None})
    return records
