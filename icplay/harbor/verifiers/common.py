"""What every exported verifier shares: where things are, and how the reward is written."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable

TESTS = Path(os.environ.get("ICPLAY_HARBOR_TESTS", "/tests"))
LOGS = Path(os.environ.get("ICPLAY_HARBOR_LOGS", "/logs/verifier"))
ANSWERS = Path(os.environ.get("ICPLAY_HARBOR_ANSWERS", "/app"))
ANSWER_CAP = 1 << 20   # bytes of an answer file read: more is cut, as an observation is


def expected() -> dict[str, Any]:
    """The task's expected values: they came in with tests/, after the agent finished."""
    return json.loads((TESTS / "expected.json").read_text(encoding="utf-8"))


def read_answer(name: str) -> str | None:
    """The agent's answer file under /app as text (None: not written, or not a regular file)."""
    path = ANSWERS / name
    if path.is_symlink() or not path.is_file():
        return None
    with open(path, "rb") as handle:
        return handle.read(ANSWER_CAP).decode("utf-8", "replace")


def write_reward(reward: float, details: dict[str, Any]) -> None:
    """reward.txt (what Harbor reads) and details.json (icplay's breakdown) in /logs/verifier."""
    LOGS.mkdir(parents=True, exist_ok=True)
    details = {"reward": reward, **details}
    (LOGS / "details.json").write_text(json.dumps(details, indent=1, default=str) + "\n", encoding="utf-8")
    (LOGS / "reward.txt").write_text(f"{reward}\n", encoding="utf-8")


def in_container() -> bool:
    """Docker's or Podman's marker file: only there does the verifier stop other processes."""
    return os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv")


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return int(handle.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def stop_others() -> list[int]:
    """SIGKILL every process of the container but init, this verifier's ancestors and
    their other children (the harness's ``| tee`` beside test.sh): whatever the agent left
    running (a loop rewriting reward.txt, orphaned to init) ends before scoring."""
    ancestors, pid = set(), os.getpid()
    while pid > 1 and pid not in ancestors:
        ancestors.add(pid)
        pid = _parent(pid)
    stopped = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in ancestors or int(entry) == 1:
            continue
        if _parent(int(entry)) in ancestors:
            continue
        try:
            os.kill(int(entry), signal.SIGKILL)
            stopped.append(int(entry))
        except OSError:
            pass
    for pid in stopped:   # gone (or a zombie) before scoring starts: no write of theirs comes after
        for _ in range(500):
            if _state(pid) in ("", "Z", "X"):
                break
            time.sleep(0.01)
    return stopped


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return ""


def run(score: Callable[[dict[str, Any]], tuple[float, dict[str, Any]]]) -> int:
    """Score with ``score(expected)`` and write the result; any failure scores 0, said why."""
    stopped = stop_others() if in_container() and os.geteuid() == 0 else []
    try:
        reward, details = score(expected())
    except Exception as exc:   # a verifier never leaves the reward of whatever the agent wrote
        reward, details = 0.0, {"error": f"{type(exc).__name__}: {exc}"}
    if stopped:
        details["stopped_processes"] = len(stopped)
    write_reward(reward, details)
    print(f"icplay reward: {reward}", file=sys.stderr)
    return 0
