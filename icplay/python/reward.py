"""InterCode-Python's reward (MBPP), as pure functions over test outcomes.

``submit NAME`` binds the gold function's name to the solver's function, runs the task's
``test_setup_code`` and each of its ``tests`` in the solver's interpreter and in a
pristine one holding the gold; the reward is the fraction of tests whose outcome — what
the test printed, with its error line — is the same on both sides. A test that was cut
(it hung or flooded the output) matches nothing.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

TOP_LEVEL_DEF = re.compile(r"^def\s+([A-Za-z_]\w*)\s*\(", re.M)
CUT = "cut"


def gold_function_name(gold: str, tests: list[str]) -> str | None:
    """The gold function the tests call (a gold may define helpers too); else its last function."""
    defined = TOP_LEVEL_DEF.findall(gold.replace("\r\n", "\n"))
    if not defined:
        return None
    text = "\n".join(tests)
    called = [(m.start(), name) for name in set(defined) for m in [re.search(rf"\b{re.escape(name)}\s*\(", text)] if m]
    if called:
        return min(called)[1]
    return defined[-1]


@dataclass(frozen=True)
class Outcome:
    """How one test ended: ``status`` ok | error | cut, and what it printed (the error line last)."""

    status: str
    output: str = ""
    how: str = ""     # how the run ended (the interpreter's state, an exit code): for the reader only

    def matches(self, other: "Outcome") -> bool:
        return self.status != CUT and other.status != CUT and (self.status, self.output) == (other.status, other.output)


def python_reward(tests: list[str], yours: list[Outcome], gold: list[Outcome]) -> tuple[float, dict[str, Any]]:
    """(reward, breakdown): the fraction of tests whose outcomes match, each test explained."""
    if not tests:
        return 0.0, {"tests": [], "passed": 0, "total": 0}
    rows = []
    for test, mine, theirs in zip(tests, yours, gold):
        rows.append({"test": test, "yours": asdict(mine), "gold": asdict(theirs), "match": mine.matches(theirs)})
    matched = sum(1 for r in rows if r["match"])
    return matched / len(tests), {"tests": rows, "passed": matched, "total": len(tests)}
