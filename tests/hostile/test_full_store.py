"""A store that cannot write ends the episode with its one sentence, and nothing more is taken.

``play --plain`` in a private mount namespace (``unshare --user --map-root-user --mount``),
over a real tmpfs home: after the first turn is saved, the home is made read-only or an
action's observation fills it. The next save fails; the episode must end there: the actions
typed after it are never run (before, each one ran, and each save failed in turn).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ci_rules import unavailable

ROOT = Path(__file__).resolve().parents[2]

DRIVE = r"""
import json, os, subprocess, sys, time
from pathlib import Path
home, how, out = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(home)], check=True)
env = {**os.environ, "ICPLAY_HOME": str(home)}
cmd = [sys.executable, "-m", "icplay.cli", "play", "sql", "--plain", "--sandbox", "sqlite", "--session", "s"]
file = home / "trajectories" / "s" / "sql" / "bookshop-01.json"


def saved_turns():
    try:
        return len(json.loads(file.read_text())["turns"])
    except (OSError, ValueError):
        return -1


p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
p.stdin.write("SELECT 1;\n"); p.stdin.flush()
while saved_turns() < 1 and p.poll() is None:
    time.sleep(0.05)
if how == "read-only":
    subprocess.run(["mount", "--bind", str(home), str(home)], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", str(home)], check=True)
    p.stdin.write("SELECT 2;\n")
else:
    p.stdin.write("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 60000) "
                  "SELECT x, hex(randomblob(40)) FROM c;\n")
# typed after the failing one: must never be read nor run
p.stdin.write("SELECT 'THIRD-' || 'ACTION';\nSELECT 'FOURTH-' || 'ACTION';\n:quit\n"); p.stdin.close()
out.write_text(json.dumps({"rc": p.wait(timeout=120), "stdout": p.stdout.read(), "stderr": p.stderr.read(),
                           "turns": [t["action"] for t in json.loads(file.read_text())["turns"]]}))
"""


@pytest.fixture(scope="module")
def private_mounts() -> None:
    if shutil.which("unshare") is None:
        unavailable("unshare (util-linux) is not installed")
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                            "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True, text=True)
    if probe.returncode != 0:
        unavailable(f"cannot mount a private tmpfs: {probe.stderr.strip()}")


@pytest.mark.usefixtures("private_mounts")
@pytest.mark.parametrize("how,why", [("full", "No space left on device"), ("read-only", "Read-only file system")])
def test_after_a_failed_save_plain_takes_no_more_actions(tmp_path, how, why):
    home, out, script = tmp_path / "home", tmp_path / "out.json", tmp_path / "drive.py"
    home.mkdir()
    script.write_text(DRIVE)
    done = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", sys.executable, str(script), str(home),
                           how, str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["rc"] == 1, result
    # the actions typed after the failed save are never read at a prompt, never run, never fail in turn
    assert "'THIRD-'" not in result["stdout"] and "'FOURTH-'" not in result["stdout"], result["stdout"]
    assert result["stdout"].count("cannot save") == 1, result["stdout"]
    assert "Traceback" not in result["stderr"]
    assert result["stderr"].count("cannot save") == 1, result["stderr"]
    assert result["stderr"].strip().splitlines()[-1].startswith("icplay: cannot save ")
    assert why in result["stderr"]
    assert result["turns"] == ["SELECT 1;"]          # the file keeps its last complete save
