"""What every scanner asks of a turn: did an action run, what did it print, did it fail."""

from __future__ import annotations

from typing import Iterator

from icplay.envs.base import observation_parts, parse_submit
from icplay.episode import Trajectory, Turn

# how an InterCode SQL recording (and icplay's SQL env) words a failed statement
SQL_ERROR_PREFIX = "Error executing query"


def ran(turn: Turn) -> bool:
    """An action was executed on this turn (not a rejected proposal, not an unparsable reply)."""
    return bool(turn.action) and not turn.info.get("rejected") and not turn.info.get("invalid")


def executed(traj: Trajectory) -> Iterator[Turn]:
    return (t for t in traj.turns if ran(t) and not parse_submit(t.action)[0])


def output(turn: Turn) -> str:
    """What the action printed, without icplay's notes."""
    return observation_parts(turn.observation or "", turn.info)[0]


def notes(turn: Turn) -> list[str]:
    """icplay's notes about the action (timed out, truncated, shell restarted)."""
    return observation_parts(turn.observation or "", turn.info)[1]


def failed(turn: Turn) -> bool:
    """The action ended in an error: a non-zero exit, a SQL error, a timeout."""
    info = turn.info
    if info.get("error") or info.get("timed_out"):
        return True
    if turn.exit_code not in (0, None):
        return True
    return output(turn).lstrip().startswith(SQL_ERROR_PREFIX)


def normalised(action: str) -> str:
    """An action compared for repeats: whitespace runs as one space, case kept."""
    return " ".join(action.split())
