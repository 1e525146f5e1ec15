"""A third-party environment: the example package in tests/data/icplay-example-env registers a
language (``answer``: a shell over a data file, submit the answer) through the ``icplay.envs``
entry point group, with a Dockerfile of its own inside the package. After a plain ``pip
install`` of it, ``icplay play --plain``, ``icplay run`` and ``icplay images build`` work on it
with no change to icplay, on Docker (its own image, built on first use) and on bwrap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tests" / "data" / "icplay-example-env"
IMAGE = "icplay-answer:latest"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The package pip-installed into a folder of its own (``--target``), as a user would install it."""
    target = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                           str(PACKAGE)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (target / "icplay_example_env" / "tasks.json").is_file()
    assert (target / "icplay_example_env" / "image" / "Dockerfile").is_file()
    return target


def icplay(args: list[str], site: Path | None, home: Path, stdin: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "ICPLAY_HOME": str(home), "PYTHONPATH": str(site) if site is not None else ""}
    # cwd: this checkout, first on sys.path
    return subprocess.run([sys.executable, "-m", "icplay.cli", *args], input=stdin, capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=600)


def tasks_of(site: Path) -> str:
    return str(site / "icplay_example_env" / "tasks.json")


def test_the_example_is_small_and_icplay_does_not_know_it():
    source = (PACKAGE / "icplay_example_env" / "__init__.py").read_text()
    dockerfile = (PACKAGE / "icplay_example_env" / "image" / "Dockerfile").read_text()
    assert len(source.splitlines()) + len(dockerfile.splitlines()) < 100
    for path in (ROOT / "icplay").rglob("*.py"):
        text = path.read_text()
        assert "icplay_example_env" not in text and "icplay-answer" not in text, path


def test_without_the_package_the_language_is_unknown(tmp_path):
    done = icplay(["play", "answer", "--plain"], None, tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "answer" in done.stderr
    done = icplay(["run", "answer", "--tasks", str(PACKAGE / "icplay_example_env" / "tasks.json"), "--policy", "gold"],
                  None, tmp_path)
    assert done.returncode == 2 and "invalid choice: 'answer'" in done.stderr


@pytest.mark.bwrap
def test_play_plain_on_bwrap(bwrap_ready, installed, tmp_path):
    lines = "wc -l < /tmp/data.txt\nsubmit 3\nsubmit apple\n:quit\n"
    done = icplay(["play", "answer", "--plain", "--tasks", tasks_of(installed), "--sandbox", "bwrap",
                   "--out", str(tmp_path / "out")], installed, tmp_path, lines)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    out = done.stdout
    assert "=== task tasks/a1 (1 of 3) [easy] ===" in out, out
    assert "wc -l < /tmp/data.txt\n3\n" in out and "reward: 1.00  (solved)" in out
    assert "reward: 0.00" in out and "expected: banana" in out


@pytest.mark.bwrap
def test_run_gold_on_bwrap(bwrap_ready, installed, tmp_path):
    done = icplay(["run", "answer", "--tasks", tasks_of(installed), "--policy", "gold", "--sandbox", "bwrap",
                   "--out", str(tmp_path / "run"), "--json", "--quiet"], installed, tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["episodes"], data["solved"]) == (3, 3)


@pytest.mark.docker
def test_its_own_image_is_built_on_first_use_and_runs_its_episodes(docker_client, installed, tmp_path):
    import docker.errors

    try:
        docker_client.images.remove(IMAGE, force=True)
    except docker.errors.ImageNotFound:
        pass
    assert not docker_client.images.list(name=IMAGE)
    done = icplay(["run", "answer", "--tasks", tasks_of(installed), "--policy", "gold", "--sandbox", "docker",
                   "--out", str(tmp_path / "run"), "--json"], installed, tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["episodes"], data["solved"]) == (3, 3)
    labels = docker_client.api.inspect_image(IMAGE)["Config"]["Labels"]
    assert "icplay.inputs" in labels      # built by icplay from the package's folder
    # the episode's shell is in that image (its file is nowhere in icplay's)
    lines = "cat /etc/icplay-answer\nwc -l < /tmp/data.txt\nsubmit 3\n:quit\n"
    done = icplay(["play", "answer", "--plain", "--tasks", tasks_of(installed), "--sandbox", "docker",
                   "--out", str(tmp_path / "out")], installed, tmp_path, lines)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "built from the answer plug-in's own Dockerfile\n" in done.stdout, done.stdout
    assert "wc -l < /tmp/data.txt\n3\n" in done.stdout and "reward: 1.00  (solved)" in done.stdout


@pytest.mark.docker
def test_images_build_and_list_name_the_plugins_image(docker_client, installed, tmp_path):
    done = icplay(["images", "build", "answer"], installed, tmp_path)
    assert done.returncode == 0 and f"built {IMAGE}" in done.stderr, done.stderr[-2000:]
    done = icplay(["images", "list"], installed, tmp_path)
    assert done.returncode == 0
    assert any(line.split()[:3] == ["answer", IMAGE, "present"] for line in done.stdout.splitlines()), done.stdout
