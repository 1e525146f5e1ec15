"""Flags on how the solver behaved: the same action in a loop, a submit before looking,
replies without an action, cut or refused replies, a run of errors."""

from __future__ import annotations

import re

from icplay.envs.base import parse_submit
from icplay.episode import Trajectory, Turn
from icplay.scan.flags import Flag, evidence
from icplay.scan.scanners.turns import executed, failed, normalised, output, ran

LOOP_REPEATS = 3     # the same action (or the same pair of actions) this many times in a row
ERROR_RUN = 3        # this many executed actions in a row ending in an error

# a refusal: an apology followed at once by "cannot", or a flat "I can't help with that"
_CANNOT = r"(?:can(?:no|')t|won't|will not|am unable to|am not able to)"
REFUSAL = re.compile(rf"^\W*(?:(?:(?:I'?m|I am) sorry|I apologi[sz]e|Sorry)[^.!?\n]{{0,30}}?\bI {_CANNOT}\b"
                     rf"|I {_CANNOT} (?:help|assist|comply|provide|do that|fulfil)|As an AI\b[^.!?\n]{{0,40}}\b{_CANNOT})",
                     re.IGNORECASE)


def _runs(keys: list[str], period: int) -> list[tuple[int, int]]:
    """(start, length) of the stretches where ``keys`` repeats with ``period`` at least
    ``LOOP_REPEATS`` times (a period-2 stretch must alternate two different actions)."""
    found, i = [], 0
    while i + period < len(keys):
        j = i
        while j + period < len(keys) and keys[j + period] == keys[j]:
            j += 1
        length = j - i + period
        distinct = period == 1 or len(set(keys[i:i + period])) == period
        if distinct and length >= LOOP_REPEATS * period:
            found.append((i, length))
            i += length
        else:
            i = j + 1       # a later start inside this stretch ends where it does: no longer, no more distinct
    return found


def loop(traj: Trajectory) -> list[Flag]:
    """The same action run LOOP_REPEATS times in a row, or two actions taking turns as often."""
    turns = list(executed(traj))
    keys = [normalised(t.action) for t in turns]
    flags: list[Flag] = []
    covered: set[int] = set()
    for period in (1, 2):
        for start, length in _runs(keys, period):
            if start in covered:
                continue
            covered.update(range(start, start + length))
            first, last = turns[start].index + 1, turns[start + length - 1].index + 1
            what = (f"ran {length} times in a row (turns {first}-{last}): {turns[start].action}" if period == 1 else
                    f"two actions took turns {length // 2} times (turns {first}-{last}): {turns[start].action} / "
                    f"{turns[start + 1].action}")
            flags.append(Flag("loop", turns[start].index, evidence(what)))
    return flags


def _first_submit(traj: Trajectory) -> int | None:
    """The index of the first turn that ran a submit, or None."""
    return next((t.index for t in traj.turns if ran(t) and parse_submit(t.action)[0]), None)


def _actions_before(traj: Trajectory, submit: int | None) -> list[Turn]:
    """The executed actions before the submit (every one of them when there was none)."""
    return [t for t in executed(traj) if submit is None or t.index < submit]


def _blind_submit_reason(done: list[Turn]) -> str:
    if not done:
        return "submitted without running an action"
    return f"submitted after {len(done)} action{'s' if len(done) != 1 else ''}, every one of which failed"


def submit_without_looking(traj: Trajectory) -> list[Flag]:
    """A submit that no successful action came before (an InterCode recording that ran out of
    turns did not submit)."""
    if traj.status != "submitted":
        return []
    submit = _first_submit(traj)
    if submit is None and traj.policy.get("protocol") == "intercode":
        return []
    done = _actions_before(traj, submit)
    if any(not failed(t) for t in done):
        return []
    turn = submit if submit is not None else (traj.turns[-1].index if traj.turns else None)
    return [Flag("submit-without-looking", turn, _blind_submit_reason(done))]


def format_error(traj: Trajectory) -> list[Flag]:
    """Replies that held no action in the expected format (a cut reply is ``truncated-reply``,
    a refusal ``refused-reply``)."""
    flags = []
    for turn in traj.turns:
        info = turn.info
        if info.get("invalid") and info.get("invalid_reason") != "truncated" and not REFUSAL.search(_reply(turn)):
            why = info.get("invalid_reason") or "no action"
            flags.append(Flag("format-error", turn.index, evidence(f"{why}: {info.get('raw') or turn.thought or ''}")))
    return flags


def _reply(turn: Turn) -> str:
    raw = turn.info.get("raw")
    return raw if isinstance(raw, str) else (turn.thought or "")


def model_reply(traj: Trajectory) -> list[Flag]:
    """Model replies cut at the token limit, and replies that refuse."""
    flags = []
    for turn in traj.turns:
        info = turn.info
        if info.get("invalid_reason") == "truncated" or info.get("reply_truncated") or info.get("finish_reason") == "length":
            flags.append(Flag("truncated-reply", turn.index, evidence(f"cut at the token limit: {_reply(turn)[-160:]}")))
        elif info.get("finish_reason") == "content_filter" or info.get("refusal") or REFUSAL.search(_reply(turn)):
            flags.append(Flag("refused-reply", turn.index,
                              evidence(str(info.get("refusal") or _reply(turn) or info.get("finish_reason")))))
    return flags


def error_run(traj: Trajectory) -> list[Flag]:
    """ERROR_RUN or more executed actions in a row that failed, with the first error."""
    flags: list[Flag] = []
    run: list[Turn] = []
    for turn in [*executed(traj), None]:
        if turn is not None and failed(turn):
            run.append(turn)
            continue
        if len(run) >= ERROR_RUN:
            first = next((line for line in output(run[0]).splitlines() if line.strip()), "") or "no output"
            flags.append(Flag("error-run", run[0].index, evidence(
                f"{len(run)} failed actions in a row (turns {run[0].index + 1}-{run[-1].index + 1}); first: {first}")))
        run = []
    return flags
