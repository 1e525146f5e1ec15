"""Labelled steps for process supervision, in TRL's stepwise-supervision shape.

A human labels turns good, bad or neutral (``:label`` in line mode, the ``L`` key in watch and
the viewer; ``icplay.episode.label_turn``). ``icplay export steps`` writes one record per
episode with at least one good or bad label:

- ``prompt``: the system prompt and the task, as text;
- ``completions``: one step per turn that ran (the action as the strategy writes it, then
  its output), up to the last good- or bad-labelled turn;
- ``labels``: one bool per step (what TRL's PRM trainer reads): good is True, bad False; a
  neutral or unlabelled step takes the episode's outcome (solved: True) and says so in
  ``label_sources`` ("human" or "outcome"), so a trainer can mask those;
- ``step_labels``, ``notes``, ``label_authors``: the human's words per step; ``outcome``:
  the episode's reward, solved and strict verdict; ``metadata``: as chat records have.
"""

from __future__ import annotations

from typing import Any, TypeGuard

from icplay.episode import BAD, GOOD, Trajectory, Turn
from icplay.formats.export import Replies, _head, episode_metadata


def _steps(traj: Trajectory) -> list[Turn]:
    return [t for t in traj.turns if t.action and not t.info.get("invalid") and not t.info.get("rejected")]


def _step_text(turn: Turn, replies: Replies) -> str:
    """A step as text: the reply that ran it, then what it printed."""
    action = replies.action(turn, turn.action, turn.thought)
    reply = action.get("content") or ""
    if action.get("tool_calls"):
        reply = (reply + "\n" if reply else "") + str(action["tool_calls"][0]["function"]["arguments"])
    return f"{reply}\n{replies.output(turn)['content']}"


def _judged(mark: dict[str, Any] | None) -> TypeGuard[dict[str, Any]]:
    """Whether a human labelled this step good or bad (neutral and no label are not judgements)."""
    return bool(mark) and mark is not None and mark["label"] in (GOOD, BAD)


def _outcome_labels(marks: list[dict[str, Any] | None], solved: bool) -> dict[str, list[Any]]:
    """One bool per step for the trainer: the human's good or bad, else the episode's outcome."""
    return {"labels": [m["label"] == GOOD if _judged(m) else solved for m in marks],
            "label_sources": ["human" if _judged(m) else "outcome" for m in marks]}


def _human_words(marks: list[dict[str, Any] | None]) -> dict[str, list[Any]]:
    """What the human wrote per step: the label, the note and who wrote them."""
    return {"step_labels": [m["label"] if m else None for m in marks],
            "notes": [(m or {}).get("note") for m in marks],
            "label_authors": [(m or {}).get("author") for m in marks]}


def steps_record(traj: Trajectory, strategy: str = "tryagain", protocol: str | None = None,
                 actions: str | None = None) -> dict[str, Any] | None:
    """The episode's stepwise-supervision record; None when no step is labelled good or bad."""
    steps = _steps(traj)
    judged = [i for i, t in enumerate(steps) if _judged(t.label)]
    if not judged:
        return None
    steps = steps[:judged[-1] + 1]
    replies = Replies(traj, strategy, actions)
    prompt = "\n\n".join(m["content"] for m in _head(traj, strategy, protocol, actions))
    return {"prompt": prompt, "completions": [_step_text(t, replies) for t in steps],
            **_outcome_labels([t.label for t in steps], traj.solved), **_human_words([t.label for t in steps]),
            "turns": [t.index for t in steps],
            "outcome": {"reward": traj.reward, "solved": traj.solved, "strict": traj.strictly_solved},
            "metadata": episode_metadata(traj)}


def steps_records(trajs: list[Trajectory], strategy: str = "tryagain", protocol: str | None = None,
                  actions: str | None = None) -> list[dict[str, Any]]:
    return [r for t in trajs if (r := steps_record(t, strategy, protocol, actions)) is not None]
