"""Scoring out of the solver's reach: calls where the code is, checks in a judge that never ran it.

A scoring has two interpreters, each fresh:

1. the **caller** holds the code being scored (the solver's actions replayed in a sandbox of
   its own, or the gold) and runs each test's calls of the function (``calls.py``), one
   request each; every result comes out as a record of plain data (``values.py``);
2. the **judge** (in the gold's sandbox, which never runs the solver's code) holds the gold
   and the task's set-up code, and runs each test's check on the results rebuilt from that
   data: the test's expected values, and the test itself, exist only there.

The caller can lie about its own results (the solver's code runs in it), but it never sees an
expected value, so to report the right results it has to compute them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from icplay.python.calls import Split
from icplay.python.interpreter import Interpreter, PyResult
from icplay.python.reward import CUT, Outcome, Scored
from icplay.python.values import decode_value

VALUE_MARK = "@@ICPLAY-VALUE:"    # server.py writes it before a call's result record
MAX_SHOWN = 300


@dataclass(frozen=True)
class CallResult:
    """One call's result as it came out: ``status`` value | raised (judged) or cut | died | opaque."""

    status: str
    out: str = ""                  # what the call printed
    record: dict[str, Any] | None = None   # {"value": text} or {"raised": {...}}, checked
    why: str = ""                  # cut, died, opaque: what happened

    def shown(self) -> str:
        """The result as the score screen shows it."""
        if self.status == "value":
            try:
                return _short(repr(decode_value(self.record["value"])))
            except ValueError:      # an int past Python's digit limit for decimal text
                return "an int too long to show"
        if self.status == "raised":
            raised = self.record["raised"]
            return _short(f"raised {raised['name']}: {raised['message']}")
        return _short(f"{self.status}: {self.why}")


def _short(text: str) -> str:
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "..."


def _checked_record(text: str) -> dict[str, Any]:
    """The result record of a call as the caller wrote it, checked field by field (ValueError)."""
    record = json.loads(text)
    if not isinstance(record, dict) or len(record) != 1:
        raise ValueError("a result record has exactly one field")
    if "value" in record:
        decode_value(record["value"])
        return record
    if "raised" in record:
        raised = record["raised"]
        fields = ("module", "name", "base", "message")
        if not isinstance(raised, dict) or sorted(raised) != sorted(fields) or not all(
                isinstance(raised[f], str) and len(raised[f]) <= 4000 for f in fields):
            raise ValueError("an exception record has the wrong fields")
        return record
    if "opaque" in record and isinstance(record["opaque"], str):
        return record
    raise ValueError("a result record is a value, an exception or why neither")


def call_result(result: PyResult) -> CallResult:
    """A probe request's result: what the call printed, then its record (the last mark's)."""
    if result.cut:
        return CallResult(CUT, result.output, why=f"the call was stopped ({result.status})")
    at = result.output.rfind(VALUE_MARK)
    if result.status == "died" or at < 0:
        return CallResult("died", result.output, why="the interpreter exited during the call")
    out, line = result.output[:at], result.output[at + len(VALUE_MARK):].split("\n", 1)[0]
    try:
        record = _checked_record(line)
    except (ValueError, RecursionError):
        return CallResult("opaque", out, why="the result record could not be read")
    if "opaque" in record:
        return CallResult("opaque", out, why="the result cannot be brought out as plain data: " + record["opaque"][:300])
    return CallResult("value" if "value" in record else "raised", out, record)


def run_calls(caller: Interpreter, splits: list[Split], prepare: Callable[[], None],
              timeout: float) -> list[list[CallResult] | Outcome]:
    """Each test's call results in ``caller`` (a whole test: its outcome there). ``prepare``
    (re)defines the code: once at the start, again after a call ended the interpreter."""
    prepare()
    results: list[list[CallResult] | Outcome] = []
    for split in splits:
        if split.whole:
            if not caller.alive:
                prepare()
            results.append(outcome_of(caller.run(split.test, timeout=timeout)))
            continue
        calls = []
        for call in split.calls:
            if not caller.alive:
                prepare()
            calls.append(call_result(caller.run(call, timeout=timeout, kind="probe")))
        results.append(calls)
    return results


def outcome_of(result: PyResult) -> Outcome:
    how = f"{result.status} (exit {result.exit_code})"
    if result.cut:
        return Outcome(CUT, result.output, how)
    return Outcome(result.status if result.status in ("ok", "error") else "died", result.output, how)


def judge(judge_interpreter: Interpreter, splits: list[Split], results: list[list[CallResult] | Outcome],
          prepare: Callable[[], None], timeout: float) -> Scored:
    """Each test's outcome: its check run by ``judge_interpreter`` (holding the gold and the
    set-up code, defined by ``prepare``) on the calls' results rebuilt from data."""
    prepare()
    outcomes, shown, whole = [], [], []
    for split, result in zip(splits, results):
        whole.append(split.whole)
        if isinstance(result, Outcome):
            outcomes.append(result)
            shown.append([])
            continue
        shown.append([r.shown() for r in result])
        unjudged = next((r for r in result if r.status not in ("value", "raised")), None)
        if unjudged is not None:
            printed = unjudged.out + ("\n" if unjudged.out and not unjudged.out.endswith("\n") else "")
            outcomes.append(Outcome(unjudged.status, printed + unjudged.why, unjudged.status))
            continue
        if not judge_interpreter.alive:
            prepare()
        table = json.dumps([{"out": r.out, **(r.record or {})} for r in result])
        loaded = judge_interpreter.run(table, timeout=timeout, kind="table")
        if loaded.status != "ok":
            outcomes.append(Outcome(CUT, loaded.output, f"the judge could not load the results ({loaded.status})"))
            continue
        outcomes.append(outcome_of(judge_interpreter.run(split.check, timeout=timeout)))
    return Scored(outcomes, shown, whole)
