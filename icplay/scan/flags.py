"""The flag record and the kinds of flag icplay's scanners raise.

A flag names a turn (``Turn.index``, shown 1-based as the viewer shows turns) or the whole
episode (``turn`` None), and carries its evidence: the words of the observation, action or
verdict that raised it, as plain text cut to one line. Evidence comes from what the solver
controls (its outputs, a model's reply), so it is kept as text and never interpreted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from icplay.store import printable

EVIDENCE_CHARS = 240

# the groups flags fall in, in the order tables show them
INTEGRITY, ENVIRONMENT, BEHAVIOUR, MODEL = "integrity", "environment", "behaviour", "model"
GROUPS = (INTEGRITY, ENVIRONMENT, BEHAVIOUR, MODEL)


@dataclass(frozen=True)
class FlagKind:
    """One kind of flag: its name, its group and what it means (the page's legend)."""

    name: str
    group: str
    meaning: str


_KINDS = [
    FlagKind("reward-hack-suspect", INTEGRITY,
             "a full reward the strict verdict does not back (or one earned by an empty answer)"),
    FlagKind("touches-scoring", INTEGRITY, "an action touches what scoring reads: git metadata, icplay's control files"),
    FlagKind("command-not-found", ENVIRONMENT, "the image lacks a command the solver called"),
    FlagKind("missing-module", ENVIRONMENT, "a module, library or package the solver needed is not installed"),
    FlagKind("permission-denied", ENVIRONMENT, "the image refused an operation (permission denied, read-only)"),
    FlagKind("dead-shell", ENVIRONMENT, "the shell or sandbox died and was restarted or replaced"),
    FlagKind("timeout", ENVIRONMENT, "an action ran out of time and was stopped"),
    FlagKind("loop", BEHAVIOUR, "the same action (or pair of actions) repeated in a row"),
    FlagKind("submit-without-looking", BEHAVIOUR, "submitted before any action ran without an error"),
    FlagKind("format-error", BEHAVIOUR, "a reply held no action in the expected format"),
    FlagKind("truncated-reply", BEHAVIOUR, "a model reply was cut at the token limit"),
    FlagKind("refused-reply", BEHAVIOUR, "the model refused to answer"),
    FlagKind("error-run", BEHAVIOUR, "several actions in a row ended in an error"),
    FlagKind("model-flag", MODEL, "a model asked a question with a rubric answered yes"),
]
KINDS: dict[str, FlagKind] = {k.name: k for k in _KINDS}


def kind_of(name: str) -> FlagKind:
    """The kind named ``name``; a plug-in's own kind (unknown here) is shown in a group of its own."""
    return KINDS.get(name) or FlagKind(name, "plug-in", "raised by a plug-in scanner")


@dataclass(frozen=True)
class Flag:
    """One finding: its kind, the turn it is on (None: the episode), the evidence, the scanner."""

    kind: str
    turn: int | None
    evidence: str
    scanner: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "turn": self.turn, "evidence": self.evidence, "scanner": self.scanner}

    @property
    def turn_label(self) -> str:
        return "episode" if self.turn is None else f"turn {self.turn + 1}"


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def evidence(text: str, limit: int = EVIDENCE_CHARS) -> str:
    """``text`` as evidence: one line, no control characters, at most ``limit`` characters."""
    line = " ".join(_CONTROL.sub(" ", printable(str(text))).split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


def first_line(text: str, pattern: re.Pattern[str]) -> str | None:
    """The line of ``text`` where ``pattern`` first matches, as evidence; None if it does not
    (one search over the whole text: most outputs match nothing). ``pattern`` must not match
    across lines; a ``^`` in it needs ``re.MULTILINE``."""
    found = pattern.search(text)
    if found is None:
        return None
    start = text.rfind("\n", 0, found.start()) + 1
    end = text.find("\n", found.end())
    return evidence(text[start:end if end >= 0 else len(text)])
