"""A third-party language through the icplay.envs entry point: the example package in
tests/data/answer_env, installed with a plain `pip install`, works with `icplay run` and
`icplay play --plain` with no change to icplay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent / "data" / "answer_env"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, str]:
    target = tmp_path_factory.mktemp("plugin-site")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                           str(PACKAGE)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return {**os.environ, "PYTHONPATH": str(target)}


def icplay(env: dict[str, str], *argv: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "icplay.cli", *argv], input=stdin, capture_output=True, text=True,
                          timeout=300, env=env)


@pytest.mark.bwrap
def test_the_plugin_runs_the_gold_policy(bwrap_ready, installed, tmp_path):
    done = icplay(installed, "run", "answer", "--tasks", str(PACKAGE / "tasks.json"), "--policy", "gold",
                  "--sandbox", "bwrap", "--out", str(tmp_path), "--json", "--quiet")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["episodes"], data["solved"]) == (2, 2)


@pytest.mark.bwrap
def test_the_plugin_plays_in_line_mode(bwrap_ready, installed, tmp_path):
    done = icplay(installed, "play", "answer", "--plain", "--tasks", str(PACKAGE / "tasks.json"), "--sandbox",
                  "bwrap", "--out", str(tmp_path), stdin="wc -l < /tmp/data.txt\nsubmit 3\nsubmit apple\n:quit\n")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "\n3\n" in out and "reward: 1.00  (solved)" in out
    assert "reward: 0.00" in out and "expected: banana" in out


def test_without_the_package_the_language_is_unknown(tmp_path):
    done = icplay({**os.environ, "PYTHONPATH": ""}, "run", "answer", "--tasks", str(PACKAGE / "tasks.json"),
                  "--policy", "gold")
    assert done.returncode == 2 and "invalid choice: 'answer'" in done.stderr
