"""A store that cannot write ends the episode with its one sentence, and nothing more is taken.

``play --plain`` in a private mount namespace over a real tmpfs home (the driver script of
``tests/test_nothing_lost.py``): after the first turn is saved, the home is made read-only or
an action's observation fills it, and ``SELECT 3;`` is typed after that action. The failed
save must end the episode there: ``SELECT 3`` is never read at a prompt nor run (before, it
was read and run, and its save failed in turn, as did every later one).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from test_nothing_lost import DRIVE, private_mounts  # noqa: F401  (a fixture, used by name)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.usefixtures("private_mounts")
@pytest.mark.parametrize("how,why", [("full", "No space left on device"), ("read-only", "Read-only file system")])
def test_after_a_failed_save_plain_takes_no_more_actions(tmp_path, how, why):
    home, out, script = tmp_path / "home", tmp_path / "out.json", tmp_path / "drive.py"
    home.mkdir()
    script.write_text(DRIVE)
    done = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", sys.executable, str(script), str(home),
                           how, str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    first = json.loads(out.read_text())["first"]
    assert first["rc"] == 1, first
    assert "SELECT 3" not in first["stdout"], first["stdout"]       # never read at a prompt, never run
    assert first["stdout"].count("cannot save") == 1, first["stdout"]
    assert "Traceback" not in first["stderr"] and first["stderr"].count("cannot save") == 1, first["stderr"]
    assert first["stderr"].strip().splitlines()[-1].startswith("icplay: cannot save ") and why in first["stderr"]
    assert [t["action"] for t in first["file"]["turns"]] == ["SELECT 1;"]     # the last complete save is kept
