"""A third-party environment: the example package in tests/data/icplay-example-env registers a
language (``calc``) through the ``icplay.envs`` entry point group. After a plain ``pip
install`` of it, ``icplay play --plain`` and ``icplay run`` work on it with no change to icplay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tests" / "data" / "icplay-example-env"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The package pip-installed into a folder of its own (``--target``), as a user would install it."""
    target = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                           str(PACKAGE)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (target / "icplay_example_env" / "tasks.json").is_file()
    return target


def icplay(args: list[str], site: Path | None, home: Path, stdin: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "ICPLAY_HOME": str(home)}
    if site is not None:
        env["PYTHONPATH"] = str(site)   # cwd (this checkout) still comes first on sys.path
    return subprocess.run([sys.executable, "-m", "icplay.cli", *args], input=stdin, capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=300)


def test_the_example_is_small_and_icplay_does_not_know_it():
    source = (PACKAGE / "icplay_example_env" / "__init__.py").read_text()
    assert len(source.splitlines()) < 100
    for path in (ROOT / "icplay").rglob("*.py"):
        assert "icplay_example_env" not in path.read_text(), path


def test_without_the_package_calc_is_unknown(tmp_path):
    done = icplay(["play", "calc", "--plain"], None, tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "calc" in done.stderr


def test_play_plain_on_the_plugin(installed, tmp_path):
    tasks = installed / "icplay_example_env" / "tasks.json"
    lines = "x = 24 * 60\ny = x * 60\nz = oops\nsubmit\nsubmit\n"
    done = icplay(["play", "calc", "--plain", "--tasks", str(tasks), "--out", str(tmp_path / "out")], installed,
                  tmp_path, lines)
    assert "Traceback" not in done.stderr, done.stderr
    out = done.stdout
    assert "=== task tasks/c1 (1 of 3) [easy] ===" in out, out
    assert "calc> x = 24 * 60\n1440\ncalc> y = x * 60\n86400\n" in out
    assert "calc> z = oops\nNameError: oops is not defined\n" in out
    assert "reward: 1.00" in out           # c1: the last value, 86400, is 24 * 60 * 60
    assert "reward: 0.00" in out           # c2 submitted before any action


def test_run_on_the_plugin_with_the_gold_policy(installed, tmp_path):
    tasks = installed / "icplay_example_env" / "tasks.json"
    done = icplay(["run", "calc", "--tasks", str(tasks), "--policy", "gold", "--out", str(tmp_path / "run"),
                   "--json", "--quiet"], installed, tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["episodes"], data["solved"]) == (3, 3)
