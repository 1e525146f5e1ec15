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
from collections.abc import Callable
from typing import Any

from icplay.python.calls import Split
from icplay.python.interpreter import Interpreter, PyResult, run_judge
from icplay.python.reward import CUT, Outcome, Scored
from icplay.python.values import decode_value
from icplay.sandbox.base import DEFAULT_TIMEOUT as DEFAULT_ACTION_TIMEOUT
from icplay.sandbox.base import Sandbox, ShellResult

VALUE_MARK = "@@ICPLAY-VALUE:"    # server.py writes it before a call's result record
JUDGED_MARK = "@@ICPLAY-JUDGED:"  # and the judge before a check's outcome
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
                return _short(repr(decode_value((self.record or {})["value"])))
            except ValueError:      # an int past Python's digit limit for decimal text
                return "an int too long to show"
        if self.status == "raised":
            raised = (self.record or {})["raised"]
            return _short(f"raised {raised['name']}: {raised['message']}")
        return _short(f"{self.status}: {self.why}")


def _short(text: str) -> str:
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "..."


def _check_raised(raised: Any) -> None:
    """An exception record has exactly its four fields, each a string of bounded length."""
    fields = ("module", "name", "base", "message")
    if not isinstance(raised, dict) or sorted(raised) != sorted(fields) or not all(
            isinstance(raised[f], str) and len(raised[f]) <= 4000 for f in fields):
        raise ValueError("an exception record has the wrong fields")


def _checked_record(text: str, k: int) -> dict[str, Any]:
    """Call ``k``'s result record as the caller wrote it, checked field by field (ValueError)."""
    record = json.loads(text)
    if not isinstance(record, dict) or record.pop("k", None) != k or len(record) != 1:
        raise ValueError("a result record has its call's index and exactly one other field")
    if "value" in record:
        decode_value(record["value"])
        return record
    if "raised" in record:
        _check_raised(record["raised"])
        return record
    if "opaque" in record and isinstance(record["opaque"], str):
        return record
    raise ValueError("a result record is a value, an exception or why neither")


def call_results(output: str, count: int) -> list[CallResult]:
    """The results of the first calls of a ``probes`` request, from its output: each call's
    printed text, then its record. Stops at the first call without a record (it was cut, or
    it ended the interpreter); a record that does not read is ``opaque``."""
    results, at = [], 0
    for k in range(count):
        mark = output.find(VALUE_MARK, at)
        if mark < 0:
            break
        end = output.find("\n", mark)
        if end < 0:
            break
        printed, line = output[at:mark], output[mark + len(VALUE_MARK):end]
        at = end + 1
        try:
            record = _checked_record(line, k)
        except (ValueError, RecursionError):
            results.append(CallResult("opaque", printed, why="its result record could not be read"))
            continue
        if "opaque" in record:
            results.append(CallResult("opaque", printed,
                                      why="the result cannot be brought out as plain data: " + record["opaque"][:300]))
        else:
            results.append(CallResult("value" if "value" in record else "raised", printed, record))
    return results


def _calls_by_test(pending: list[tuple[int, str]], done: list[CallResult]) -> dict[int, list[CallResult]]:
    """The call results grouped by the test each call belongs to, in call order."""
    by_test: dict[int, list[CallResult]] = {}
    for (n, _), result in zip(pending, done):
        by_test.setdefault(n, []).append(result)
    return by_test


def _after_cut(caller: Interpreter, calls: list[str], got: int, batch: PyResult, ready: Callable[[], None],
               timeout: float) -> list[CallResult]:
    """The result of the call a cut batch was in (call ``got``): cut, when it ran alone;
    else it runs again alone with its own time (cut then, it hung)."""
    if len(calls) == 1:
        return [CallResult(CUT, batch.output, why=f"the call was stopped ({batch.status})")]
    ready()
    alone = caller.run(json.dumps(calls[got:got + 1]), kind="probes", timeout=timeout)
    lost = (CallResult(CUT, alone.output, why="the call was stopped") if alone.cut
            else CallResult("died", alone.output, why="the interpreter exited during the call"))
    return call_results(alone.output, 1) or [lost]


def _call_each(caller: Interpreter, pending: list[str], ready: Callable[[], None],
               timeout: float) -> list[CallResult]:
    """One result per call: the calls not yet done go in one request, again and again until
    each has its result (a call that ended its interpreter gets one that says so)."""
    done: list[CallResult] = []
    while len(done) < len(pending):
        ready()
        calls = pending[len(done):]
        batch = caller.run(json.dumps(calls), kind="probes", timeout=timeout)
        got = call_results(batch.output, len(calls))
        done += got
        if len(got) == len(calls):
            continue
        if batch.cut and (len(calls) > 1 or not got):
            done += _after_cut(caller, calls, len(got), batch, ready, timeout)
            continue
        done.append(CallResult("died", _after_records(batch.output), why="the interpreter exited during the call"))
    return done


def run_calls(caller: Interpreter, splits: list[Split], prepare: list[str],
              timeout: float) -> list[list[CallResult] | Outcome]:
    """Each test's call results in ``caller`` (a test run whole: its outcome there).

    ``prepare`` (the inputs that define the code) runs first, and again whenever a call
    ended the interpreter. The calls go in one request; when it is cut, the call it was
    in runs again alone with its own ``timeout`` (cut then, it hung), and the rest go on.
    """
    def ready() -> None:
        if not caller.alive:
            caller.run(json.dumps(prepare), kind="runs", timeout=max(timeout, len(prepare) * DEFAULT_ACTION_TIMEOUT))

    pending = [(n, c) for n, split in enumerate(splits) if not split.whole for c in split.calls]
    done = _call_each(caller, [c for _, c in pending], ready, timeout)
    by_test = _calls_by_test(pending, done)
    results: list[list[CallResult] | Outcome] = []
    for n, split in enumerate(splits):
        if split.whole:
            ready()
            results.append(outcome_of(caller.run(split.test, timeout=timeout)))
        else:
            results.append(by_test.get(n, []))
    return results


def _after_records(output: str) -> str:
    """What a request printed after its last result record."""
    mark = output.rfind(VALUE_MARK)
    end = output.find("\n", mark) if mark >= 0 else -1
    return output[end + 1:] if end >= 0 else output if mark < 0 else ""


def outcome_of(result: PyResult) -> Outcome:
    how = f"{result.status} (exit {result.exit_code})"
    if result.cut:
        return Outcome(CUT, result.output, how)
    return Outcome(result.status if result.status in ("ok", "error") else "died", result.output, how)


def _unjudged(result: list[CallResult]) -> Outcome | None:
    """The outcome of a test one of whose calls neither returned nor raised (it was cut, or
    its interpreter died): no check runs on it. None when every call can be judged."""
    unjudged = next((r for r in result if r.status not in ("value", "raised")), None)
    if unjudged is None:
        return None
    printed = unjudged.out + ("\n" if unjudged.out and not unjudged.out.endswith("\n") else "")
    return Outcome(unjudged.status, printed + unjudged.why, unjudged.status)


def _as_data(result: list[CallResult]) -> list[str]:
    """The calls' results as the trajectory keeps them: status, output and record, as JSON."""
    return [json.dumps([r.status, r.out, r.record], sort_keys=True) for r in result]


def judge(sandbox: Sandbox, gold: str, setup: str, splits: list[Split], results: list[list[CallResult] | Outcome],
          timeout: float) -> Scored:
    """Each test's outcome: its check run by the judge (one fresh process in ``sandbox``, the
    gold's, holding the gold and the set-up code) on the calls' results rebuilt from data."""
    outcomes: list[Outcome | None] = []
    shown: list[list[str]] = []
    data: list[list[str]] = []
    whole, checks = [], []
    for split, result in zip(splits, results):
        whole.append(split.whole)
        if isinstance(result, Outcome):
            outcomes.append(result)
            shown.append([])
            data.append([])
            continue
        shown.append([r.shown() for r in result])
        data.append(_as_data(result))
        unjudged = _unjudged(result)
        outcomes.append(unjudged)
        if unjudged is None:
            checks.append({"calls": [{"out": r.out, **(r.record or {})} for r in result], "check": split.check})
    if checks:
        outcomes = _judge_checks(sandbox, gold, setup, checks, outcomes, timeout)
    return Scored([o for o in outcomes if o is not None], shown, whole, data)


def _judge_checks(sandbox: Sandbox, gold: str, setup: str, checks: list[dict[str, Any]],
                  outcomes: list[Outcome | None], timeout: float) -> list[Outcome | None]:
    """``outcomes`` with each gap (a test to judge) filled by the judge's verdict on its check,
    all checks run in one judge process."""
    spec = json.dumps({"gold": gold, "setup": setup, "tests": checks})
    ran = run_judge(sandbox, spec, timeout=timeout * (1 + len(checks)))
    judged = iter(_judged(ran.output, len(checks), ran))
    return [o if o is not None else next(judged) for o in outcomes]


def _judged(output: str, count: int, ran: ShellResult) -> list[Outcome]:
    """The judge's outcomes, one per check (those it did not reach: cut)."""
    outcomes = []
    for line in output.splitlines():
        if line.startswith(JUDGED_MARK):
            record = json.loads(line[len(JUDGED_MARK):])
            outcomes.append(Outcome(record["status"], record["output"], f"{record['status']} (judge)"))
    how = "the judge was stopped" if ran.timed_out else f"the judge ended (exit {ran.exit_code})"
    return outcomes[:count] + [Outcome(CUT, "", how)] * (count - len(outcomes))
