"""The CTF reward: the submitted flag against the gold flag.

InterCode took the first word after ``submit`` (``action.split(" ")[1]``) and compared it
with the gold, lower-cased. icplay takes the whole rest of the line, stripped: a flag with
a space in it can be submitted, and ``submit a b`` is not scored as ``submit a``.
"""

from __future__ import annotations

from typing import Any


def normalise_flag(flag: str | None) -> str:
    return (flag or "").strip().lower()


def flag_reward(submitted: str | None, gold: str) -> tuple[float, dict[str, Any]]:
    """(1.0 or 0.0, the breakdown that explains it)."""
    if submitted is None or not submitted.strip():
        return 0.0, {"submitted": None, "correct": False, "why": "no flag submitted (reply `submit <flag>`)"}
    correct = normalise_flag(submitted) == normalise_flag(gold)
    return (1.0 if correct else 0.0), {"submitted": submitted.strip(), "correct": correct,
                                      "why": "the flag matches (case-insensitive)" if correct
                                      else "not the flag"}
