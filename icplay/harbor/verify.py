"""Score a Harbor task as Harbor does: its own verifier, in the container the solver used
(``shared``, Harbor's default) or in a fresh one given the solver's artifacts (``separate``).

Shared is Harbor's design, and it means the verifier runs among whatever the solver left
behind (tools it replaced, files it planted): such a reward is never *strictly* solved
(``strict.reasons`` says why). Separate runs the task's ``[[verifier.collect]]`` commands in
the solver's container (after its processes are stopped), copies each artifact out and into
a fresh container of the same image through the engine's archive API (Docker's or Podman's),
and verifies there: the
solver's files arrive as data, its tools do not, and the verdict is strict (unless an
artifact is a system folder, whose tools the verifier would run). What icplay keeps out of
the solver's reach in both:

- ``tests/`` enters the container only now, after the submit, through the engine's archive API
  (no tool of the container copies it); the solver never saw it.
- Before that, every process the solver left is killed (the warden's HUP), and the engine's
  own process list must show only the warden: no daemon of the solver's runs beside the
  verifier or rewrites its reward.
- ``/tests`` and ``/logs/verifier`` are emptied, and the engine's archive API must then find
  neither: a reward file or a test planted by the solver cannot be read as the verifier's.
- The reward file is copied out through the engine's archive API and parsed here, never read
  by running a tool of the container.
"""

from __future__ import annotations

import io
import json
import math
import tarfile
import time
from pathlib import Path
from typing import Any, Callable

from icplay.envs.base import SubmitResult, strict_verdict
from icplay.sandbox.container import EngineContainer
from icplay.sandbox.engine import engine_errors, engine_message

TESTS = "/tests"
VERIFIER_LOGS = "/logs/verifier"
REWARD_FILES = ("reward.txt", "reward.json")
REWARD_CAP = 64 * 1024           # bytes of a reward file icplay reads
OUTPUT_CAP = 256 * 1024          # bytes of the verifier's output icplay keeps
OUTPUT_SHOWN = 2000              # characters of it in the breakdown
STOP_WAIT = 10.0                 # seconds for the solver's processes to be gone
ARTIFACTS = "/logs/artifacts"    # Harbor's artifact folder, always carried in separate mode
ARTIFACT_CAP = 256 * 1024 * 1024  # bytes of one artifact icplay carries
SYSTEM_FOLDERS = frozenset({"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "opt", "root", "tests"})
IN_SOLVERS_CONTAINER = ("the verifier ran inside the container the solver worked in (Harbor's design): tools and "
                        "files the solver left could have changed its verdict")


class NotScored(Exception):
    """The verifier could not be run fairly; the message says why (the reward is 0)."""


def tests_tar(tests: Path) -> bytes:
    """A tar of ``tests/`` as ``tests/...`` plus an empty ``logs/verifier/``, owned by root."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in ("logs", "logs/verifier"):
            tar.addfile(_dir_info(name))
        tar.addfile(_dir_info("tests"))
        for path in sorted(tests.rglob("*")):
            name = "tests/" + path.relative_to(tests).as_posix()
            if path.is_symlink():
                continue   # a link could point anywhere on the host; Harbor's tests are plain files
            if path.is_dir():
                tar.addfile(_dir_info(name))
            elif path.is_file():
                info = tarfile.TarInfo(name)
                data = path.read_bytes()
                info.size, info.mode = len(data), 0o755 if path.name == "test.sh" else path.stat().st_mode & 0o777
                info.mtime = int(time.time())
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _dir_info(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, int(time.time())
    return info


def parse_reward(name: str, data: bytes) -> tuple[float, dict[str, Any]]:
    """The reward a reward file holds, with what else it said; NotScored when it is not one."""
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise NotScored(f"{name} is not text") from None
    if name == "reward.txt":
        try:
            value = float(text)
        except ValueError:
            raise NotScored(f"{name} holds {text[:60]!r}, not a number") from None
        rewards: dict[str, Any] = {}
    else:
        try:
            rewards = json.loads(text)
        except json.JSONDecodeError as exc:
            raise NotScored(f"{name} is not JSON ({exc.msg})") from None
        if not isinstance(rewards, dict) or not rewards:
            raise NotScored(f"{name} is not an object of named rewards")
        if "reward" in rewards:
            value = rewards["reward"]
        elif len(rewards) == 1:
            value = next(iter(rewards.values()))
        else:
            raise NotScored(f"{name} holds several rewards ({', '.join(sorted(rewards))}) and none named 'reward'")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise NotScored(f"{name}'s reward is {value!r}, not a number")
        value = float(value)
    if not math.isfinite(value):
        raise NotScored(f"{name} holds {value}, not a finite number")
    return value, rewards


class Verifier:
    """Runs one task's ``tests/test.sh`` in an image sandbox's container (Docker, Podman) and
    reads its reward, through the engine (``sandbox.engine_container``).

    ``doubts``: why its verdict is not strict (the container was the solver's); none for a
    fresh container."""

    def __init__(self, sandbox: Any, tests: Path, timeout: float, env: dict[str, str],
                 doubts: tuple[str, ...] = (IN_SOLVERS_CONTAINER,)):
        self.sandbox, self.tests, self.timeout, self.env, self.doubts = sandbox, tests, timeout, env, doubts

    @property
    def container(self) -> EngineContainer:
        container = self.sandbox.engine_container
        if container is None:
            raise NotScored("the container is gone")
        return container

    def score(self, before: Callable[[dict[str, Any]], None] | None = None) -> SubmitResult:
        """The verdict; ``before(breakdown)`` runs first (the separate mode's carrying), and a
        NotScored it raises scores 0 as the verifier's own would."""
        breakdown: dict[str, Any] = {"verifier": "tests/test.sh"}
        try:
            if before is not None:
                before(breakdown)
            self.check_running()
            self.stop_solver()
            self._clear()
            self.container.put_archive("/", tests_tar(self.tests))
            code, output, seconds = self._run_tests()
            breakdown.update(verifier_exit_code=code, verifier_seconds=round(seconds, 2),
                             verifier_output=output[-OUTPUT_SHOWN:])
            if code is None:
                raise NotScored(f"the verifier did not finish within {self.timeout:g} s")
            reward, name, rewards = self._reward()
            breakdown.update(reward_file=f"{VERIFIER_LOGS}/{name}", **({"rewards": rewards} if rewards else {}))
        except engine_errors(NotScored) as exc:
            why = str(exc) if isinstance(exc, NotScored) else \
                f"the container engine refused a step of the verification: {engine_message(exc)}"
            breakdown["not_scored"] = why
            return SubmitResult(0.0, breakdown, strict=strict_verdict(0.0, [why]))
        return SubmitResult(reward, breakdown, strict=strict_verdict(reward, list(self.doubts)))

    def check_running(self) -> None:
        if not self.container.running():
            raise NotScored("the container stopped before the submit")

    def stop_solver(self) -> None:
        """Every process but the warden (pid 1) killed, as the engine's process list shows."""
        self.sandbox.shell.close()
        deadline = time.monotonic() + STOP_WAIT
        while True:
            self.container.signal("SIGHUP")   # the warden kills all but itself
            time.sleep(0.05)
            if self.container.processes() <= 1:
                return
            if time.monotonic() > deadline:
                raise NotScored("processes the solver left could not be stopped")
            time.sleep(0.2)

    def archive(self, path: str, cap: int) -> bytes | None:
        """``path`` of the container as a tar, through the engine's archive API; None when it is
        not there; NotScored beyond ``cap`` bytes."""
        found = self.container.get_archive(path)
        if found is None:
            return None
        stream, _stat = found
        data = bytearray()
        for chunk in stream:
            data += chunk
            if len(data) > cap:
                raise NotScored(f"the artifact {path} is larger than {cap // (1024 * 1024)} MiB")
        return bytes(data)

    def make_folder(self, path: str) -> None:
        """``path`` and its parents made as folders, through the engine's archive API."""
        parts = [part for part in path.strip("/").split("/") if part]
        if not parts:
            return
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w") as tar:
            for depth in range(1, len(parts) + 1):
                tar.addfile(_dir_info("/".join(parts[:depth])))
        self.container.put_archive("/", out.getvalue())

    def _exists(self, path: str) -> bool:
        found = self.container.get_archive(path)
        if found is None:
            return False
        for _chunk in found[0]:   # drain it: the connection is reused
            pass
        return True

    def run(self, argv: list[str], timeout: float) -> tuple[int | None, str]:
        code, output, _dropped = self.container.exec_for(argv, OUTPUT_CAP, timeout)
        return code, output.decode("utf-8", "replace")

    def _clear(self) -> None:
        """No /tests and no /logs/verifier left, as the engine (not a tool of the container) sees it."""
        self.run(["rm", "-rf", "--", TESTS, VERIFIER_LOGS], 60)
        for path in (TESTS, VERIFIER_LOGS):
            if self._exists(path):
                raise NotScored(f"{path} could not be cleared before the verifier ran (the solver's container "
                                "kept it)")

    def _run_tests(self) -> tuple[int | None, str, float]:
        """``bash /tests/test.sh`` from the image's working directory, with task.toml's verifier env."""
        exports = "".join(f"export {name}={_quote(value)}; " for name, value in self.env.items())
        started = time.monotonic()
        code, output = self.run(["/bin/bash", "-c", f"{exports}exec /bin/bash {TESTS}/test.sh"], self.timeout)
        return code, output, time.monotonic() - started

    def _reward(self) -> tuple[float, str, dict[str, Any]]:
        for name in REWARD_FILES:
            found = self.container.get_archive(f"{VERIFIER_LOGS}/{name}")
            if found is None:
                continue
            stream, stat = found
            if int(stat.get("size", 0)) > REWARD_CAP:
                raise NotScored(f"{name} is larger than {REWARD_CAP} bytes")
            data = b"".join(stream)
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                member = tar.next()
                if member is None or not member.isfile():
                    raise NotScored(f"{VERIFIER_LOGS}/{name} is not a regular file")
                handle = tar.extractfile(member)
                content = handle.read(REWARD_CAP + 1) if handle is not None else b""
            reward, rewards = parse_reward(name, content)
            return reward, name, rewards
        raise NotScored(f"the verifier wrote no reward ({VERIFIER_LOGS}/reward.txt or reward.json)")


def carrier(agent: Verifier, fresh: Verifier, collect: list[str], artifacts: list[str]) -> Callable[[dict], None]:
    """Harbor's separate mode, run before ``fresh`` verifies: the solver's processes stopped,
    the collect commands run in its container, each artifact (and /logs/artifacts) copied
    from there to the same path in ``fresh``."""

    def carry(breakdown: dict[str, Any]) -> None:
        agent.check_running()
        agent.stop_solver()
        for command in collect:
            code, output = agent.run(["/bin/bash", "-c", command], agent.timeout)
            if code != 0:
                breakdown.setdefault("collect_failed", []).append(f"{command} (exit {code}): {output[-300:]}")
        carried = []
        for source in dict.fromkeys([*artifacts, ARTIFACTS]):
            data = agent.archive(source, ARTIFACT_CAP)
            if data is None:
                continue
            parent = source.rsplit("/", 1)[0] or "/"
            fresh.make_folder(parent)
            fresh.container.put_archive(parent, data)
            carried.append(source)
        breakdown.update(verifier_mode="separate", artifacts=carried)

    return carry


def system_artifacts(artifacts: list[str]) -> list[str]:
    """Artifacts that would bring the solver's tools into the fresh container, as doubts."""
    return [f"the artifact {path} holds tools the verifier runs (the solver's, copied into its container)"
            for path in artifacts if path.strip("/").split("/")[0] in SYSTEM_FOLDERS]


def _quote(value: str) -> str:
    import shlex

    return shlex.quote(value)
