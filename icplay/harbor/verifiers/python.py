"""Python (MBPP): InterCode's reward, the fraction of tests whose outcome (what the test
printed, with its error line, and whether it raised) is the same for the agent's
/app/solution.py as for the gold.

Each test runs in a fresh ``python3 -I -S`` as the unprivileged user ``nobody`` (setpriv),
its process group killed when it ends, so that neither side's code can touch the
verifier's files or outlive its test; the gold (tests/gold.py) is judged the same way,
in the same interpreter, at the same time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

from icplay.harbor.verifiers.common import TESTS, read_answer, run
from icplay.python.reward import Outcome, Scored, python_reward

TEST_TIMEOUT = 10.0
OUTPUT_CAP = 64 * 1024
NOBODY = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--no-new-privs"]

# One test: the code, the task's setup code, the test; prints its outcome as JSON last.
JUDGE = r"""
import contextlib, io, json, sys
spec = json.loads(sys.stdin.read())
out, status = io.StringIO(), "ok"
try:
    with contextlib.redirect_stdout(out):
        space = {"__name__": "__main__"}
        exec(compile(spec["code"], "solution.py", "exec"), space)
        exec(compile(spec["setup"], "setup", "exec"), space)
        exec(compile(spec["test"], "test", "exec"), space)
except BaseException as exc:
    status = "error"
    out.write(f"{type(exc).__name__}: {exc}".rstrip() + "\n")
sys.__stdout__.write("\n" + json.dumps({"status": status, "output": out.getvalue()[:%d]}) + "\n")
""" % OUTPUT_CAP


def judge(code: str, setup: str, test: str) -> Outcome:
    """How one test ends for ``code``: ok | error with what it printed, or cut."""
    spec = json.dumps({"code": code, "setup": setup, "test": test})
    argv = [*NOBODY, "/usr/bin/python3", "-I", "-S", "-c", JUDGE] if os.geteuid() == 0 else \
        [sys.executable, "-I", "-S", "-c", JUDGE]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            cwd="/tmp", env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}, start_new_session=True)
    try:
        out, _ = proc.communicate(spec.encode(), timeout=TEST_TIMEOUT)
    except subprocess.TimeoutExpired:
        out, how = b"", "timed out"
    else:
        how = f"exit {proc.returncode}"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    lines = out.decode("utf-8", "replace").rstrip("\n").rsplit("\n", 1)
    try:
        found = json.loads(lines[-1])
        return Outcome(str(found["status"]), str(found["output"]), how)
    except (ValueError, KeyError, TypeError):
        return Outcome("cut", "", how)


def scored(code: str, expected: dict[str, Any]) -> Scored:
    tests = expected["tests"]
    outcomes = [judge(code, expected["test_setup_code"], test) for test in tests]
    return Scored(outcomes, [[] for _ in tests], [True for _ in tests])


def score(expected: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    code = read_answer("solution.py")
    if code is None:
        return 0.0, {"error": "no solution: /app/solution.py was not written"}
    gold = (TESTS / "gold.py").read_text(encoding="utf-8")
    reward, details, reasons = python_reward(expected["tests"], scored(code, expected), scored(gold, expected))
    return reward, {**details, "strict_doubts": reasons}


def main() -> int:
    return run(score)


if __name__ == "__main__":
    sys.exit(main())
