"""examples/async_episodes.py, the issue's example: 64 SQL and 16 Bash episodes at once
from one event loop, every gold solved."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.bwrap
@pytest.mark.slow
def test_64_sql_and_16_bash_episodes_from_one_loop(bwrap_ready):
    done = subprocess.run([sys.executable, str(ROOT / "examples/async_episodes.py"), "--bash-sandbox", "bwrap"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("sql: 64 episodes, 64 solved, "), done.stdout
    assert lines[1].startswith("bash: 16 episodes, 16 solved, "), done.stdout
    assert lines[2].startswith("all in ")
