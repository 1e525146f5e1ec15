"""Run an exported Harbor task the way Harbor's Docker environment does, without Harbor:
build environment/, start the agent's container, let an "agent" act (the oracle's
solve.sh, or any commands), then verify as task.toml says: in the agent's container
(``shared``), or (``separate``) run the collect hooks there, carry the artifacts into a
fresh container of the same image, copy tests/ in, run tests/test.sh, read
/logs/verifier/reward.txt.

Used by ``icplay export harbor --check``, the tests and bench/bench_harbor.py to check the
oracle's semantics (solve.sh then the verifier: 1.0) on real Docker (no Docker Compose
here, which Harbor's own Docker environment needs), or on Podman: the engine is an image
engine of the sandbox registry, driven through its command-line program (the same verbs),
its containers given what the engine needs of every container (Podman: this process's
resource limits, a seccomp profile as narrow as Docker's default)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from icplay.sandbox import registry
from icplay.sandbox.base import SandboxError

BUILD_TIMEOUT = 900
STEP_TIMEOUT = 600
ARTIFACTS = "/logs/artifacts"   # Harbor's convention folder, always carried


class OracleError(RuntimeError):
    """A step of the run that failed (its command and output in the message)."""


class Engine:
    """An image engine's command-line program (``docker``, ``podman``: the same verbs), and
    the options every container it runs is given."""

    def __init__(self, program: str, run_options: tuple[str, ...] = ()):
        self.program, self.run_options = program, run_options
        self.name = Path(program).name

    def tries(self, *argv: str, timeout: float = STEP_TIMEOUT) -> subprocess.CompletedProcess:
        """The command's outcome, whatever it is (a removal, a copy that may find nothing)."""
        try:
            return subprocess.run([self.program, *argv], capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise OracleError(f"{self.name} {' '.join(argv[:3])}: no answer within {timeout:g}s") from None

    def __call__(self, *argv: str, timeout: float = STEP_TIMEOUT) -> str:
        """The command's output; an OracleError when it fails."""
        done = self.tries(*argv, timeout=timeout)
        if done.returncode != 0:
            text = (done.stdout + done.stderr).decode("utf-8", "replace").strip()
            raise OracleError(f"{self.name} {' '.join(argv[:3])}: exit {done.returncode}: {text[-600:]}")
        return done.stdout.decode("utf-8", "replace")


def engine_cli(sandbox: str = "docker") -> Engine:
    """The command-line program of the sandbox registry's image engine ``sandbox``, or an
    OracleError in one sentence (a kind that runs no images, a program not installed)."""
    try:
        engine = registry.image_engine(sandbox)
        program = getattr(engine, "cli", sandbox)   # a plug-in engine that names none: its own name
        rules = engine.rules
        run_options = (*(f"--ulimit={u.name}={u.soft}:{u.hard}" for u in rules.ulimits()),
                       *(f"--security-opt={option}" for option in rules.security_opt()))
    except SandboxError as exc:
        raise OracleError(f"the oracle check runs on an image engine: {exc}") from None
    found = shutil.which(program)
    if found is None:
        others = [name for name in registry.image_kinds() if name != sandbox]
        raise OracleError(f"the oracle check on {sandbox} needs the `{program}` command, which is not on PATH: "
                          f"install {program}" + (f" or use --sandbox {others[0]}" if others else ""))
    return Engine(found, run_options)


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

    def __init__(self, task: Path, engine: Engine):
        self.task, self.engine = Path(task), engine
        self.tag = f"icplay-harbor-check:{uuid.uuid4().hex[:12]}"

    def __enter__(self) -> "Image":
        self.engine("build", "-q", "-t", self.tag, str(self.task / "environment"), timeout=BUILD_TIMEOUT)
        return self

    def __exit__(self, *_exc) -> None:
        self.engine.tries("rmi", "-f", self.tag, timeout=120)


class Container:
    """One running container of an image, removed on exit."""

    def __init__(self, image: Image):
        self.image, self.engine = image, image.engine
        self.name = f"icplay-harbor-check-{uuid.uuid4().hex[:12]}"

    def __enter__(self) -> "Container":
        self.engine("run", "-d", "--name", self.name, "--network", "none", "--label", "icplay.harbor-check=1",
                    *self.engine.run_options, self.image.tag, "sleep", "infinity")
        try:
            self.sh(f"mkdir -p /logs/agent /logs/verifier {ARTIFACTS}")
        except BaseException:   # even Ctrl+C: the started container is removed, the error re-raised
            self.__exit__()
            raise
        return self

    def __exit__(self, *_exc) -> None:
        self.engine.tries("rm", "-f", self.name, timeout=120)

    def sh(self, script: str, timeout: float = STEP_TIMEOUT) -> str:
        """A shell command in the container, as Harbor runs them (bash -c, root)."""
        return self.engine("exec", self.name, "bash", "-c", script, timeout=timeout)

    def copy_in(self, folder: Path, where: str) -> None:
        self.sh(f"mkdir -p '{where}'")
        self.engine("cp", f"{folder}/.", f"{self.name}:{where}")

    def copy_out(self, where: str, folder: Path) -> bool:
        """``where`` (a folder) into ``folder``; False when it does not exist."""
        return self.engine.tries("cp", f"{self.name}:{where}/.", str(folder)).returncode == 0

    def solve(self) -> str:
        """Harbor's oracle agent: solution/ at /solution, then solve.sh."""
        self.copy_in(self.image.task / "solution", "/solution")
        return self.sh("bash /solution/solve.sh")

    def verify(self, mode: str) -> Verdict:
        """Harbor's verifier step: tests/ at /tests, then test.sh; the reward it left."""
        self.copy_in(self.image.task / "tests", "/tests")
        done = self.engine.tries("exec", self.name, "bash", "-c",
                                 "chmod +x /tests/test.sh && /tests/test.sh > /logs/verifier/test-stdout.txt 2>&1; "
                                 "cat /logs/verifier/test-stdout.txt")
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


def check(task: Path, act: Callable[[Container], object] | None = None, mode: str | None = None,
          sandbox: str = "docker") -> Verdict:
    """The task's reward after ``act`` (default: the oracle's solve.sh) in a fresh container
    of the image engine ``sandbox``, verified as task.toml says (``mode`` overrides: shared | separate)."""
    task = Path(task)
    config = read_config(task)
    mode = mode or (config.get("verifier") or {}).get("environment_mode") or "shared"
    engine = engine_cli(sandbox)
    with ExitStack() as stack:
        image = stack.enter_context(Image(task, engine))
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
