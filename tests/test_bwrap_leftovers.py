"""A bwrap sandbox's folder (its testbed tmpfs, its cgroups) outlives an icplay killed
with SIGKILL, and the next icplay start removes it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.bwrap

HOLDER = r"""
import json, sys, time
from pathlib import Path
from icplay.sandbox.bwrap import BwrapSandbox, make_root_template, template_folder
src = Path(sys.argv[1]); (src / "tb").mkdir(parents=True, exist_ok=True); (src / "tb" / "f").write_text("x")
template = make_root_template(src / "tb", None, template_folder())   # as BashSandboxes makes it
box = BwrapSandbox(template)
box.start()
box.run("echo data > /testbed/made; sleep 1000 &")
enf = box._enforcement
print(json.dumps({"episode": str(box.episode_dir), "template": str(template), "cgroups": [str(d) for d in enf.cleanup_dirs],
                  "bwrap": box._process.pid, "uid": box.host_uid}), flush=True)
time.sleep(1000)
"""

NEXT_START = r"""
import sys
from pathlib import Path
from icplay.sandbox.bwrap import BwrapSandbox, make_root_template
src = Path(sys.argv[1]); (src / "tb").mkdir(parents=True, exist_ok=True)
box = BwrapSandbox(make_root_template(src / "tb", None, src))
box.start()
print(box.run("echo started").output, end="")
box.close()
"""


def _gone(pid: int, within: float = 10.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z"):
            return True
        time.sleep(0.05)
    return False


def test_a_killed_icplay_leaves_a_folder_that_the_next_start_reaps(tmp_path, bwrap_ready):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "a")], stdout=subprocess.PIPE, text=True)
    try:
        state = json.loads(holder.stdout.readline())
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    episode = Path(state["episode"])
    assert _gone(state["bwrap"]), "bwrap must die with the killed icplay (--die-with-parent)"
    if state["uid"] is not None:
        # Every process of the sandbox dies with it (zombies wait for the host's init to reap them).
        end = time.monotonic() + 10
        while _live_processes_of(state["uid"]) and time.monotonic() < end:
            time.sleep(0.05)
        assert _live_processes_of(state["uid"]) == []
    # The leftover is there: the killed process could not clean up.
    assert (episode / "root" / "testbed" / "made").read_text() == "data\n"
    assert Path(state["template"]).is_dir()
    if os.geteuid() == 0:
        assert os.path.ismount(episode / "root"), "as root the testbed is a sized tmpfs"
    next_start = subprocess.run([sys.executable, "-c", NEXT_START, str(tmp_path / "b")], capture_output=True, text=True,
                                timeout=120)
    assert next_start.stdout == "started\n", next_start.stderr
    assert not episode.parent.exists(), f"{episode.parent} of the killed icplay was not reaped"
    assert not Path(state["template"]).exists()
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(episode) not in mounts
    for cgroup in state["cgroups"]:
        assert not Path(cgroup).exists(), f"cgroup {cgroup} of the killed icplay was not removed"


def _live_processes_of(uid: int) -> list[str]:
    live = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and os.stat(f"/proc/{pid}").st_uid == uid and \
                    not Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z"):
                live.append(pid)
        except OSError:
            pass
    return live


def test_a_normal_exit_leaves_nothing(tmp_path, bwrap_ready):
    from icplay.sandbox.bwrap import state_root

    before = {p.name for p in state_root().glob("p*")}
    done = subprocess.run([sys.executable, "-c", NEXT_START, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.stdout == "started\n", done.stderr
    after = {p.name for p in state_root().glob("p*")}
    assert after <= before


def test_a_live_icplay_keeps_its_folder_when_another_starts(tmp_path, bwrap_ready):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "a")], stdout=subprocess.PIPE, text=True)
    try:
        state = json.loads(holder.stdout.readline())
        next_start = subprocess.run([sys.executable, "-c", NEXT_START, str(tmp_path / "b")], capture_output=True,
                                    text=True, timeout=120)
        assert next_start.stdout == "started\n", next_start.stderr
        episode = Path(state["episode"])
        assert (episode / "root" / "testbed" / "made").read_text() == "data\n"
        assert Path(state["template"]).is_dir()
        assert all(Path(cgroup).is_dir() for cgroup in state["cgroups"])
        os.kill(state["bwrap"], 0)   # its sandbox still runs
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="the dedicated-uid folder rule applies when icplay runs as root")
def test_as_root_a_private_tmpdir_is_not_where_the_sandboxes_go(tmp_path, bwrap_ready):
    """pytest's tmp_path sits below a 0700 folder: a sandbox's dedicated uid could not reach
    its /etc there (bwrap: "Can't find source path ... Permission denied"). icplay falls back
    to /tmp, and an ICPLAY_BWRAP_DIR it cannot use is refused in one sentence."""
    from icplay.sandbox.bwrap import passable

    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    assert not passable(private) and passable(Path("/tmp"))
    env = {k: v for k, v in os.environ.items() if k != "ICPLAY_BWRAP_DIR"}
    done = subprocess.run([sys.executable, "-c", NEXT_START, str(tmp_path / "src")], capture_output=True, text=True,
                          timeout=120, env={**env, "TMPDIR": str(private)})
    assert done.stdout == "started\n", done.stderr
    assert list(private.iterdir()) == []
    refused = subprocess.run([sys.executable, "-c", NEXT_START, str(tmp_path / "src")], capture_output=True,
                             text=True, timeout=120, env={**env, "ICPLAY_BWRAP_DIR": str(private)})
    assert refused.returncode != 0 and "ICPLAY_BWRAP_DIR" in refused.stderr and "o+x" in refused.stderr
