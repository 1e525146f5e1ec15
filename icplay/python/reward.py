"""InterCode-Python's reward (MBPP), as pure functions over test outcomes.

Each test's outcome — what it printed, with its error line, and whether it ran or raised —
is computed for the solver's function and for the gold the same way (``scoring.py``: the
function's calls run in a fresh interpreter holding the code, their results come out as
plain data, and a judge that never ran the solver's code runs the test's check on them).
The reward is the fraction of tests whose outcome is the same on both sides, as in
InterCode. A test whose call was cut (it hung or flooded the output), ended its
interpreter, or returned what cannot be brought out as plain data matches nothing.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

TOP_LEVEL_DEF = re.compile(r"^def\s+([A-Za-z_]\w*)\s*\(", re.M)
CUT = "cut"
MATCHABLE = ("ok", "error")    # the statuses a test's outcome can match on: it ran, or it raised


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
    """How one test ended: ``status`` ok | error (compared), or cut | died | opaque (never
    matching), and what it printed (the error line last)."""

    status: str
    output: str = ""
    how: str = ""     # how the run ended (the interpreter's state, an exit code): for the reader only

    def matches(self, other: "Outcome") -> bool:
        return (self.status in MATCHABLE and other.status in MATCHABLE
                and (self.status, self.output) == (other.status, other.output))


@dataclass(frozen=True)
class Scored:
    """One side's scoring of a task: each test's outcome and what its calls returned."""

    outcomes: list[Outcome]
    calls: list[list[str]]        # per test: each call's result, rendered for the reader
    whole: list[bool]             # per test: it ran whole where the solver's code runs (not split)
    # per test: each call's result as data (what it printed, its value or exception), for the strict verdict
    results: list[list[str]] | None = None


def _results(scored: Scored, n: int) -> list[str] | None:
    return scored.results[n - 1] if scored.results is not None else None


def python_reward(tests: list[str], yours: Scored, gold: Scored) -> tuple[float, dict[str, Any], list[str]]:
    """(reward, breakdown, strict reasons): the fraction of tests whose outcomes match, each
    test explained; and what keeps a full reward from counting as strictly solved (a test
    not judged on values brought out as plain data, a test the gold fails itself)."""
    if not tests:
        return 0.0, {"tests": [], "passed": 0, "total": 0}, ["the task has no tests"]
    rows, reasons = [], []
    for n, (test, mine, theirs) in enumerate(zip(tests, yours.outcomes, gold.outcomes), 1):
        row = {"test": test, "yours": asdict(mine), "gold": asdict(theirs), "match": mine.matches(theirs)}
        if yours.calls[n - 1] or gold.calls[n - 1]:
            row["calls"] = {"yours": yours.calls[n - 1], "gold": gold.calls[n - 1]}
        rows.append(row)
        if yours.whole[n - 1]:
            row["whole"] = True
            reasons.append(f"test {n} could not be split into calls and a check: it ran where the solver's "
                           "code runs, so its outcome is that code's word")
        if theirs.status != "ok":
            reasons.append(f"the gold itself does not pass test {n} ({theirs.status}): matching it proves nothing")
        elif row["match"] and theirs.output and _results(yours, n) != _results(gold, n):
            # a test judged on what it printed: the same text could come from other values
            reasons.append(f"test {n} matched on printed text, but its calls' results differ from the gold's")
    matched = sum(1 for r in rows if r["match"])
    reward = matched / len(tests)
    return reward, {"tests": rows, "passed": matched, "total": len(tests)}, reasons
