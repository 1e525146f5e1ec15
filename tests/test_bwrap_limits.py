"""The bwrap limits: parsed and reported clearly, in force by default, and the rlimit
fallback (what a host without cgroups gets) holds a fork bomb and a memory bomb too."""

from __future__ import annotations

import subprocess
import sys

import pytest

from icplay.sandbox.base import SandboxError
from icplay.sandbox.limits import GIB, MIB, Limits, parse_size


def test_sizes_parse_and_bad_values_say_what_is_wrong():
    assert parse_size("2g") == 2 * GIB and parse_size("512M") == 512 * MIB and parse_size("1000") == 1000
    assert Limits.from_env({"ICPLAY_BWRAP_MEMORY": "1g", "ICPLAY_BWRAP_PIDS": "100"}) == Limits(memory=GIB, pids=100)
    with pytest.raises(SandboxError, match="ICPLAY_BWRAP_DISK='lots' is not a valid disk limit"):
        Limits.from_env({"ICPLAY_BWRAP_DISK": "lots"})
    with pytest.raises(SandboxError, match="must be positive"):
        Limits.from_env({"ICPLAY_BWRAP_PIDS": "0"})


def test_a_bad_limit_is_one_line_from_the_cli(tmp_path):
    done = subprocess.run([sys.executable, "-m", "icplay.cli", "play", "bash", "--plain", "--sandbox", "bwrap"],
                          input="echo hi\n", capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "ICPLAY_BWRAP_MEMORY": "lots", "ICPLAY_HOME": str(tmp_path)})
    assert "Traceback" not in done.stderr
    assert "ICPLAY_BWRAP_MEMORY='lots' is not a valid memory limit" in done.stdout + done.stderr


@pytest.mark.bwrap
def test_doctor_says_which_limits_are_in_force(bwrap_ready):
    from icplay.sandbox import limits

    done = subprocess.run([sys.executable, "-m", "icplay.cli", "doctor"], capture_output=True, text=True, timeout=120)
    lines = {line.split(":")[0][4:]: line for line in done.stdout.splitlines() if line[:4] in ("ok  ", "XX  ")}
    assert limits.mechanism().name in lines["bwrap limits"]
    assert "bwrap user" in lines and "bwrap disk" in lines


PROBE = r"""
import os, sys
from pathlib import Path
from icplay.sandbox.bwrap import BwrapSandbox, make_root_template
from icplay.sandbox.limits import Limits, MIB
src = Path(sys.argv[1]); (src / "tb").mkdir(parents=True, exist_ok=True)
box = BwrapSandbox(make_root_template(src / "tb", None, src), timeout=3,
                   limits=Limits(memory=200 * MIB, pids=64, disk=32 * MIB) if sys.argv[2] == "small" else None)
box.start()
for command in sys.argv[3:]:
    r = box.run(command, timeout=20)
    print(f"{r.exit_code}|{r.timed_out}|{r.output.strip().splitlines()[-1] if r.output.strip() else ''}", flush=True)
box.close()
"""


def _run_probe(tmp_path, size, *commands, env=None):
    import os

    done = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path), size, *commands], capture_output=True,
                          text=True, timeout=300, env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.bwrap
def test_the_defaults_are_in_force(tmp_path, bwrap_ready):
    lines = _run_probe(tmp_path, "default", "grep 'Max file size' /proc/self/limits | tr -s ' ' | cut -d' ' -f4",
                       "df -B1 --output=size /tmp | tail -1")
    assert lines[0].split("|")[2] == str(Limits().disk)
    assert abs(int(lines[1].split("|")[2]) - Limits().disk) < 4 * MIB


@pytest.mark.bwrap
def test_rlimits_alone_contain_the_bombs(tmp_path, bwrap_ready):
    """ICPLAY_BWRAP_LIMITS=rlimits: what a host without cgroups gets."""

    bomb = "python3 -c 'x = []\nwhile True: x.append(bytearray(16 * 2**20))' 2>&1 | tail -1"
    forker = ("python3 -c 'import os, time\nkids = []\nwhile len(kids) < 300:\n    try: pid = os.fork()\n"
              "    except OSError: break\n    if pid == 0: time.sleep(20); os._exit(0)\n    kids.append(pid)\n"
              "print(len(kids), flush=True)\nfor pid in kids: os.kill(pid, 9); os.waitpid(pid, 0)'")
    lines = _run_probe(tmp_path, "small", "grep -E 'Max (data size|processes)' /proc/self/limits | tr -s ' ' | "
                       "cut -d' ' -f4 | paste -sd,", bomb, forker, "echo ok",
                       env={"ICPLAY_BWRAP_LIMITS": "rlimits"})
    data, nproc = lines[0].split("|")[2].split(",")
    assert int(data) == 200 * MIB
    assert lines[1].split("|")[2].endswith("MemoryError")
    assert lines[3] == "0|False|ok"
    # NPROC counts only the sandbox's processes (its own user namespace), root or not.
    assert int(nproc) == 64
    assert 0 < int(lines[2].split("|")[2]) < 64
