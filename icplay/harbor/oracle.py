"""Run an exported Harbor task the way Harbor's Docker environment does, without Harbor:
build environment/, start the container, let an "agent" act (the oracle's solve.sh, or
any commands), copy tests/ in, run tests/test.sh, read /logs/verifier/reward.txt.

Used by ``icplay export harbor --check``, the tests and bench/bench_harbor.py to check
the oracle's semantics (solve.sh then the verifier: 1.0) on real Docker."""

from __future__ import annotations

import json
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

BUILD_TIMEOUT = 900
STEP_TIMEOUT = 600


class OracleError(RuntimeError):
    """A step of the run that failed (its command and output in the message)."""


def docker(*argv: str, timeout: float = STEP_TIMEOUT, stdin: bytes | None = None) -> str:
    done = subprocess.run(["docker", *argv], input=stdin, capture_output=True, timeout=timeout)
    if done.returncode != 0:
        text = (done.stdout + done.stderr).decode("utf-8", "replace").strip()
        raise OracleError(f"docker {' '.join(argv[:3])}: exit {done.returncode}: {text[-600:]}")
    return done.stdout.decode("utf-8", "replace")


@dataclass
class Verdict:
    """What the verifier left in /logs/verifier."""

    reward: float | None
    details: dict[str, Any] = field(default_factory=dict)
    log: str = ""


class Container:
    """One running container of a task's environment (removed on exit, its image too)."""

    def __init__(self, task: Path):
        self.task = Path(task)
        self.tag = f"icplay-harbor-check:{uuid.uuid4().hex[:12]}"
        self.name = f"icplay-harbor-check-{uuid.uuid4().hex[:12]}"

    def __enter__(self) -> "Container":
        docker("build", "-q", "-t", self.tag, str(self.task / "environment"), timeout=BUILD_TIMEOUT)
        try:
            docker("run", "-d", "--name", self.name, "--network", "none", "--label", "icplay.harbor-check=1",
                   self.tag, "sleep", "infinity")
            self.sh("mkdir -p /logs/agent /logs/verifier")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_exc) -> None:
        subprocess.run(["docker", "rm", "-f", self.name], capture_output=True, timeout=120)
        subprocess.run(["docker", "rmi", "-f", self.tag], capture_output=True, timeout=120)

    def sh(self, script: str, timeout: float = STEP_TIMEOUT) -> str:
        """A shell command in the container, as Harbor's agents run them (bash -c, root)."""
        return docker("exec", self.name, "bash", "-c", script, timeout=timeout)

    def copy_in(self, folder: Path, where: str) -> None:
        docker("cp", f"{folder}/.", f"{self.name}:{where}")

    def solve(self) -> str:
        """Harbor's oracle agent: solution/ at /solution, then solve.sh."""
        self.sh("mkdir -p /solution")
        self.copy_in(self.task / "solution", "/solution")
        return self.sh("bash /solution/solve.sh")

    def verify(self) -> Verdict:
        """Harbor's verifier step: tests/ at /tests, then test.sh; the reward it left."""
        self.sh("mkdir -p /tests")
        self.copy_in(self.task / "tests", "/tests")
        done = subprocess.run(["docker", "exec", self.name, "bash", "-c", "bash /tests/test.sh"],
                              capture_output=True, timeout=STEP_TIMEOUT)
        log = (done.stdout + done.stderr).decode("utf-8", "replace")
        text = self.sh("cat /logs/verifier/reward.txt 2>/dev/null; echo; echo ----; "
                       "cat /logs/verifier/details.json 2>/dev/null || true")
        reward_text, _, details_text = text.partition("\n----\n")
        try:
            reward = float(reward_text.strip())
        except ValueError:
            reward = None
        try:
            details = json.loads(details_text) if details_text.strip() else {}
        except ValueError:
            details = {"unreadable": details_text[:500]}
        return Verdict(reward, details, log)


def check(task: Path, act: Callable[[Container], object] | None = None) -> Verdict:
    """The task's reward after ``act`` (default: the oracle's solve.sh) in a fresh container."""
    with Container(task) as box:
        if act is None:
            box.solve()
        else:
            act(box)
        return box.verify()
