"""What a submit now would score, said before anyone confirms it.

A submit scores the episode as it stands (InterCode's rule): where submit takes an argument,
that argument (CTF's flag, Python's function); elsewhere the last action's result, whoever ran
it (``LanguageSpec.submit_scores`` says what that is: SQL's rows, Bash's output and files).
After a take-over and a hand-back the last result may be the human's while the agent submits:
the preview names the turn, its author and shows it, so nobody confirms blind. Plain lines, so
that the TUI's dialogs, the agent panel and line mode all say the same.
"""

from __future__ import annotations

from typing import Any, Sequence

from icplay.envs.base import shown_observation
from icplay.languages.registry import find

SHOWN_LINES = 4          # lines of the scored result shown
SHOWN_WIDTH = 100        # characters of each


def author_words(author: str) -> str:
    """Who ran a turn, said to the human reading the preview (the one who confirms)."""
    return {"human": "yours", "agent": "the agent's"}.get(author, "the agent's, edited by you")


def _clip(line: str) -> str:
    return line if len(line) <= SHOWN_WIDTH else line[:SHOWN_WIDTH - 1] + "…"


def submit_preview(env_name: str, turns: Sequence[Any], arg: str | None = None,
                   submitter: str = "human") -> list[str]:
    """Lines on what a submit (``submit ARG``) would score now; ``submitter``: "human" or "agent".

    ``turns``: the trajectory's turns (``icplay.episode.Turn``)."""
    spec = find(env_name)
    if spec is not None and spec.prompts.submit_arg:
        name = spec.prompts.submit_arg_name.removesuffix("_name").replace("_", " ")   # "flag", "function"
        if arg is None or not arg.strip():
            return [f"Scored: {spec.submit_scores}"]
        return [f"Scored: the {name} “{arg.strip()}”"]
    what = spec.submit_scores if spec is not None else "the last action's result"
    last, number = _last_action(turns)
    if last is None:
        return [f"Scored: {what}; no action has run yet."]
    lines = [f"Scored: {what} — turn {number} ({author_words(last.author)}):"]
    if submitter == "agent" and last.author == "human":
        lines.append("The agent submits your turn's result: the last result is scored, whoever ran it.")
    return lines + _turn_lines(last)


def _last_action(turns: Sequence[Any]) -> tuple[Any, int]:
    """The last turn that ran an action and its number among the turns that count (None, 0: none ran)."""
    taken = 0
    last, number = None, 0
    for turn in turns:
        if turn.counts:
            taken += 1
        if turn.action:
            last, number = turn, taken
    return last, number


def _turn_lines(last: Any) -> list[str]:
    """The turn's action (its first line) and the head of its result, indented."""
    lines: list[str] = []
    action = last.action.strip().splitlines()
    lines.append("  > " + _clip(action[0]) + (" …" if len(action) > 1 else ""))
    result = shown_observation(last.observation or "", last.info).strip().splitlines()
    if not result:
        lines.append("    (no output)")
    lines.extend("    " + _clip(line) for line in result[:SHOWN_LINES])
    if len(result) > SHOWN_LINES:
        lines.append(f"    … {len(result) - SHOWN_LINES} more lines")
    return lines
