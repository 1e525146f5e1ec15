"""Packaging: the wheel carries data/ and docker/ as a bundle that unpacks to the same
image inputs as the checkout, and (slow) the wheel smoke test of ci/wheel-smoke.sh."""

from __future__ import annotations

import os
import runpy
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from ci_rules import unavailable

import icplay.paths as paths
from icplay.sandbox.images import IMAGES, build_inputs_digest

ROOT = Path(__file__).resolve().parents[1]


def _bundle_bytes() -> bytes:
    return runpy.run_path(str(ROOT / "setup.py"), run_name="icplay_setup")["bundle_bytes"](ROOT)


def test_bundle_is_reproducible():
    assert _bundle_bytes() == _bundle_bytes()


def test_unpacked_bundle_has_the_checkouts_image_inputs(tmp_path, monkeypatch):
    bundle = tmp_path / "pkg" / "_bundle" / "bundle.tar.gz"
    bundle.parent.mkdir(parents=True)
    bundle.write_bytes(_bundle_bytes())
    monkeypatch.setenv("ICPLAY_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ICPLAY_ROOT", raising=False)
    checkout = {env: build_inputs_digest(env) for env in IMAGES}

    monkeypatch.setattr(paths, "BUNDLE", bundle)
    unpacked = paths.unpacked_bundle()
    assert unpacked.parent == tmp_path / "cache"
    assert paths.unpacked_bundle() == unpacked  # once per bundle content
    monkeypatch.setenv("ICPLAY_ROOT", str(unpacked))
    assert {env: build_inputs_digest(env) for env in IMAGES} == checkout
    # dotfiles travel, and nothing else than data/ and docker/ is in the build context
    assert (unpacked / "data/bash/testbed/.editorconfig").is_file()
    assert sorted(p.name for p in unpacked.iterdir()) == ["data", "docker"]
    mode = stat.S_IMODE((unpacked / "data/bash/setup.sh").stat().st_mode)
    assert mode == stat.S_IMODE((ROOT / "data/bash/setup.sh").stat().st_mode)


def test_checkout_wins_over_a_bundle_and_icplay_root_over_both(tmp_path, monkeypatch):
    monkeypatch.delenv("ICPLAY_ROOT", raising=False)
    assert paths.repo_root() == ROOT
    monkeypatch.setenv("ICPLAY_ROOT", str(tmp_path))
    assert paths.repo_root() == tmp_path
    assert paths.data_dir() == tmp_path / "data"


def test_python_dash_m_icplay(tmp_path):
    done = subprocess.run([sys.executable, "-m", "icplay", "tasks"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert any(line.split()[:2] == ["sql", "sql"] for line in done.stdout.splitlines())


@pytest.mark.slow
@pytest.mark.bwrap
def test_wheel_smoke(bwrap_ready, tmp_path):
    """ci/wheel-smoke.sh: build the wheel, install it in a fresh venv outside the checkout,
    run tasks, plain SQL and Bash (bwrap) episodes and the TUI in tmux from another folder."""
    if shutil.which("tmux") is None:
        unavailable("tmux is not installed")
    env = {**os.environ, "PYTHON": sys.executable, "TMPDIR": str(tmp_path)}
    env.pop("ICPLAY_ROOT", None)
    done = subprocess.run(["bash", str(ROOT / "ci/wheel-smoke.sh")], env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "wheel-smoke: OK" in done.stdout
