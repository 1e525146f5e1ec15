"""SIGTERM, SIGHUP and SIGINT while an episode runs: the episode is saved ``stopped`` and
its containers are removed (issue 11: SIGTERM/SIGHUP left the containers running until a
later start and the episode ``running``; SIGINT removed them but left ``running``).

Each test runs icplay as a real process (``python -m icplay.cli``) on real Docker, waits
until the long action is really running inside the container, sends the signal, and
checks the trajectory file and Docker's list of icplay's containers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from icplay.sandbox.docker import LABEL
from terminal_signals import sigint_as_from_a_terminal
from icplay.store import load_trajectory

ROOT = Path(__file__).resolve().parents[1]


def start_icplay(home: Path, *argv: str) -> subprocess.Popen:
    env = {**os.environ, "ICPLAY_HOME": str(home)}
    return subprocess.Popen([sys.executable, "-m", "icplay.cli", *argv], cwd=ROOT, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_as_from_a_terminal)


def containers_of(client, pid: int) -> list[str]:
    """Ids of the containers ``pid`` made (low-level list: one call, no per-container inspect
    that fails when icplay removes one meanwhile)."""
    return [c["Id"] for c in client.api.containers(all=True, filters={"label": [f"{LABEL}=1", f"icplay.pid={pid}"]})]


def wait_for_sleep(client, proc: subprocess.Popen, timeout: float = 120) -> None:
    """Until a container of ``proc`` runs ``sleep 30`` (the action is really running)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        for container in containers_of(client, proc.pid):
            try:
                processes = client.api.top(container).get("Processes") or []
            except Exception:   # not running (yet, or any more)
                continue
            if any("sleep 30" in " ".join(p) for p in processes):
                return
        time.sleep(0.2)
    raise AssertionError("the sleep never started")


def trajectories(home: Path) -> list:
    return [load_trajectory(p) for p in sorted(home.rglob("*.json"))
            if p.name != "run.json" and ".attempts" not in p.parts and "attempts" not in p.parts]


def finish(proc: subprocess.Popen, timeout: float = 60) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"icplay did not stop within {timeout} s: {err[-2000:]}") from None
    return proc.returncode, err


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_play_plain_on_docker_stops_the_episode_and_removes_its_containers(sig, docker_client, bash_image,
                                                                             tmp_path):
    home = tmp_path / "home"
    proc = start_icplay(home, "play", "bash", "--plain", "--sandbox", "docker", "--task", "b001")
    proc.stdin.write("echo first\n")
    proc.stdin.write("sleep 30\n")
    proc.stdin.flush()
    wait_for_sleep(docker_client, proc)
    proc.send_signal(sig)
    started = time.monotonic()
    code, err = finish(proc)
    assert time.monotonic() - started < 30          # not after the sleep ran out
    assert "Traceback" not in err, err
    assert containers_of(docker_client, proc.pid) == []
    (traj,) = trajectories(home)
    assert traj.status == "stopped", traj.status
    if sig == signal.SIGINT:
        # Ctrl+C interrupts the command only: the turn is kept, and icplay quits at the end of stdin
        assert code == 0, err
        assert [t.action for t in traj.turns] == ["echo first", "sleep 30"]
        assert traj.turns[1].info.get("interrupted"), traj.turns[1].info
    else:
        assert code == 128 + sig, err
        assert sig.name in (traj.error or ""), traj.error
        assert [t.action for t in traj.turns][:1] == ["echo first"]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_icplay_run_on_docker_leaves_its_episodes_stopped_not_errors(sig, docker_client, bash_image, tmp_path):
    from icplay.tasks.registry import load_tasks

    tasks = load_tasks("bash")[:2]
    recording = tmp_path / "recording.json"
    recording.write_text(json.dumps({t.id: {"task_id": t.id, "query": t.query, "turn_history": {
        "actions": ["echo first", "sleep 30"], "observations": ["first", ""], "rewards": [0, 0]}}
        for t in tasks}))
    home, out = tmp_path / "home", tmp_path / "run"
    proc = start_icplay(home, "run", "bash", "--tasks", "bash", "--limit", "2", "-j", "2", "--replay",
                        str(recording), "--sandbox", "docker", "--protocol", "agent", "--out", str(out), "--quiet")
    wait_for_sleep(docker_client, proc)
    proc.send_signal(sig)
    code, err = finish(proc)
    assert code == 128 + sig, err
    assert "Traceback" not in err, err
    assert containers_of(docker_client, proc.pid) == []
    saved = trajectories(out)
    assert saved and all(t.status == "stopped" for t in saved), [(t.status, t.error) for t in saved]
    assert all(t.turns and t.turns[0].action == "echo first" for t in saved)


@pytest.fixture
def passable_tmp():
    """A TMPDIR that other users can pass through: as root, a sandbox's dedicated uid must
    reach its folder (pytest's own tmp_path sits below a 0700 folder; icplay then falls back
    to /tmp, and this test would look in the wrong place)."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="icplay-signals-", dir="/tmp"))
    folder.chmod(0o711)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def descendants(pid: int) -> dict[int, str]:
    """Every process below ``pid``, with its command line."""
    children: dict[int, list[int]] = {}
    cmdlines: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdlines[int(entry)] = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = {}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found[child] = cmdlines.get(child, "")
            todo.append(child)
    return found


@pytest.mark.bwrap
@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_play_plain_on_bwrap_stops_the_episode_and_removes_its_sandbox(sig, bwrap_ready, tmp_path, passable_tmp):
    home, tmp = tmp_path / "home", passable_tmp
    env = {**os.environ, "ICPLAY_HOME": str(home), "TMPDIR": str(tmp)}
    proc = subprocess.Popen([sys.executable, "-m", "icplay.cli", "play", "bash", "--plain", "--sandbox", "bwrap",
                             "--task", "b001"], cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdin.write("echo first\nsleep 30\n")
    proc.stdin.flush()
    deadline = time.monotonic() + 60
    sleeping: list[int] = []
    while not sleeping and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        sleeping = [p for p, cmd in descendants(proc.pid).items() if cmd == "sleep 30"]
        time.sleep(0.1)
    assert sleeping, "the sleep never started"
    assert any(tmp.iterdir())                 # the sandbox's folder
    proc.send_signal(sig)
    code, err = finish(proc)
    assert code == 128 + sig and "Traceback" not in err, err
    assert not any(os.path.exists(f"/proc/{p}") for p in sleeping)
    assert list(tmp.glob("icplay-bwrap.*/p*")) == []   # this process's sandbox folder is gone
    (traj,) = trajectories(home)
    assert traj.status == "stopped" and sig.name in traj.error


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_the_app_on_a_terminal_stops_its_episode_and_gives_the_terminal_back(sig, tmp_path):
    """The Textual app in a real pseudo-terminal: a signal saves the open episode as
    stopped and the app leaves the alternate screen before icplay exits."""
    import pty
    import select

    home = tmp_path / "home"
    pid, fd = pty.fork()
    if pid == 0:   # the child: icplay's app on the pty
        os.chdir(ROOT)
        os.environ.update({"ICPLAY_HOME": str(home), "TERM": "xterm-256color"})
        os.execv(sys.executable, [sys.executable, "-m", "icplay.cli", "play", "sql", "--sandbox", "sqlite",
                                  "--task", "bookshop-01"])
    screen = b""

    def read_for(seconds: float) -> None:
        nonlocal screen
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    screen += os.read(fd, 65536)
                except OSError:
                    return

    try:
        deadline = time.monotonic() + 60
        while not list(home.rglob("bookshop-01.json")) and time.monotonic() < deadline:
            read_for(0.2)                      # the episode is open once its file exists
        assert list(home.rglob("bookshop-01.json")), screen[-500:]
        os.kill(pid, sig)
        deadline = time.monotonic() + 30
        status = None
        while status is None and time.monotonic() < deadline:
            done, raw = os.waitpid(pid, os.WNOHANG)
            status = os.waitstatus_to_exitcode(raw) if done else None
            read_for(0.1)
    finally:
        if status is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    assert status == 128 + sig, screen[-500:]
    assert b"\x1b[?1049l" in screen and b"Traceback" not in screen     # left the alternate screen
    (traj,) = trajectories(home)
    assert traj.status == "stopped" and sig.name in traj.error
