"""Run an exported Harbor task the way Harbor's Docker environment does, without Harbor:
build environment/, start the agent's container, let an "agent" act (the oracle's
solve.sh, or any commands), then verify as task.toml says: in the agent's container
(``shared``), or (``separate``) run the collect hooks there, carry the artifacts into a
fresh container of the same image, copy tests/ in, run tests/test.sh, read
/logs/verifier/reward.txt.

Used by ``icplay export harbor --check``, the tests and bench/bench_harbor.py to check the
oracle's semantics (solve.sh then the verifier: 1.0) on real Docker (no Docker Compose
here, which Harbor's own Docker environment needs)."""

from __future__ import annotations

import json
import subprocess
import tempfile
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

BUILD_TIMEOUT = 900
STEP_TIMEOUT = 600
ARTIFACTS = "/logs/artifacts"   # Harbor's convention folder, always carried


class OracleError(RuntimeError):
    """A step of the run that failed (its command and output in the message)."""


def docker(*argv: str, timeout: float = STEP_TIMEOUT) -> str:
    done = subprocess.run(["docker", *argv], capture_output=True, timeout=timeout)
    if done.returncode != 0:
        text = (done.stdout + done.stderr).decode("utf-8", "replace").strip()
        raise OracleError(f"docker {' '.join(argv[:3])}: exit {done.returncode}: {text[-600:]}")
    return done.stdout.decode("utf-8", "replace")


def read_config(task: Path) -> dict[str, Any]:
    try:
        import tomllib
    except ImportError:   # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib.loads((task / "task.toml").read_text(encoding="utf-8"))


@dataclass
class Verdict:
    """What the verifier left in /logs/verifier, and where it ran."""

    reward: float | None
    details: dict[str, Any] = field(default_factory=dict)
    log: str = ""
    mode: str = "shared"


class Image:
    """The task's environment/ built once under a throwaway tag (removed on exit)."""

    def __init__(self, task: Path):
        self.task = Path(task)
        self.tag = f"icplay-harbor-check:{uuid.uuid4().hex[:12]}"

    def __enter__(self) -> "Image":
        docker("build", "-q", "-t", self.tag, str(self.task / "environment"), timeout=BUILD_TIMEOUT)
        return self

    def __exit__(self, *_exc) -> None:
        subprocess.run(["docker", "rmi", "-f", self.tag], capture_output=True, timeout=120)


class Container:
    """One running container of an image, removed on exit."""

    def __init__(self, image: Image):
        self.image = image
        self.name = f"icplay-harbor-check-{uuid.uuid4().hex[:12]}"

    def __enter__(self) -> "Container":
        docker("run", "-d", "--name", self.name, "--network", "none", "--label", "icplay.harbor-check=1",
               self.image.tag, "sleep", "infinity")
        try:
            self.sh(f"mkdir -p /logs/agent /logs/verifier {ARTIFACTS}")
        except BaseException:   # even Ctrl+C: the started container is removed, the error re-raised
            self.__exit__()
            raise
        return self

    def __exit__(self, *_exc) -> None:
        subprocess.run(["docker", "rm", "-f", self.name], capture_output=True, timeout=120)

    def sh(self, script: str, timeout: float = STEP_TIMEOUT) -> str:
        """A shell command in the container, as Harbor runs them (bash -c, root)."""
        return docker("exec", self.name, "bash", "-c", script, timeout=timeout)

    def copy_in(self, folder: Path, where: str) -> None:
        self.sh(f"mkdir -p '{where}'")
        docker("cp", f"{folder}/.", f"{self.name}:{where}")

    def copy_out(self, where: str, folder: Path) -> bool:
        """``where`` (a folder) into ``folder``; False when it does not exist."""
        done = subprocess.run(["docker", "cp", f"{self.name}:{where}/.", str(folder)], capture_output=True,
                              timeout=STEP_TIMEOUT)
        return done.returncode == 0

    def solve(self) -> str:
        """Harbor's oracle agent: solution/ at /solution, then solve.sh."""
        self.copy_in(self.image.task / "solution", "/solution")
        return self.sh("bash /solution/solve.sh")

    def verify(self, mode: str) -> Verdict:
        """Harbor's verifier step: tests/ at /tests, then test.sh; the reward it left."""
        self.copy_in(self.image.task / "tests", "/tests")
        done = subprocess.run(["docker", "exec", self.name, "bash", "-c",
                               "chmod +x /tests/test.sh && /tests/test.sh > /logs/verifier/test-stdout.txt 2>&1; "
                               "cat /logs/verifier/test-stdout.txt"], capture_output=True, timeout=STEP_TIMEOUT)
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
        return Verdict(reward, details, log, mode)


def carry(agent: Container, verifier: Container, config: dict[str, Any]) -> None:
    """Harbor's separate mode: the collect hooks in the agent's container, then its
    artifacts (and the convention folder) at the same paths in the verifier's."""
    for hook in (config.get("verifier") or {}).get("collect") or []:
        agent.sh(hook["command"])
    sources = [a if isinstance(a, str) else a["source"] for a in config.get("artifacts") or []]
    for source in dict.fromkeys([*sources, ARTIFACTS]):
        with tempfile.TemporaryDirectory(prefix="icplay-harbor-") as scratch:
            if agent.copy_out(source, Path(scratch)):
                verifier.copy_in(Path(scratch), source)


def check(task: Path, act: Callable[[Container], object] | None = None, mode: str | None = None) -> Verdict:
    """The task's reward after ``act`` (default: the oracle's solve.sh) in a fresh container,
    verified as task.toml says (``mode`` overrides: shared | separate)."""
    task = Path(task)
    config = read_config(task)
    mode = mode or (config.get("verifier") or {}).get("environment_mode") or "shared"
    with ExitStack() as stack:
        image = stack.enter_context(Image(task))
        agent = stack.enter_context(Container(image))
        if act is None:
            agent.solve()
        else:
            act(agent)
        if mode == "shared":
            return agent.verify(mode)
        verifier = stack.enter_context(Container(image))
        carry(agent, verifier, config)
        return verifier.verify(mode)
    raise AssertionError("unreachable")
