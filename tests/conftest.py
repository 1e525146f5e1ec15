"""Shared fixtures: real sandboxes, real Docker, and the rule that CI never skips them.

Under CI=true a test that needs Docker, bubblewrap or MariaDB and cannot get it FAILS
instead of skipping, so a broken CI machine cannot pass by skipping what it could not run.
Tests that need ../shared/intercode skip when it is absent (a clone without it is valid).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from ci_rules import IN_CI, unavailable  # noqa: F401  (re-exported for older imports)

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
# The engine the Docker tests drive: docker, or another that runs images through the same
# API (ICPLAY_TEST_SANDBOX=podman runs the Docker and hostile tests on Podman).
TEST_ENGINE = os.environ.get("ICPLAY_TEST_SANDBOX") or "docker"


@pytest.fixture(scope="session")
def docker_client():
    try:
        from icplay.sandbox.registry import image_engine

        client = image_engine(TEST_ENGINE).client()
        client.ping()
    except Exception as exc:
        unavailable(f"Docker is not available: {exc}")
    return client


@pytest.fixture(scope="session")
def bash_image(docker_client) -> str:
    """The icplay-bash image, built if it is missing."""
    from icplay.sandbox.images import IMAGES, ensure_image

    ensure_image(docker_client, "bash", lambda line: None)
    return IMAGES["bash"].name


@pytest.fixture(scope="session")
def python_image(docker_client) -> str:
    """The icplay-python image, built if it is missing."""
    from icplay.languages import get
    from icplay.sandbox.images import IMAGES, ensure_image

    get("python")   # its spec registers the image
    ensure_image(docker_client, "python", lambda line: None)
    return IMAGES["python"].name


@pytest.fixture(scope="session")
def image_sandbox(docker_client) -> Any:
    """The sandbox class of the engine under test (DockerSandbox, or PodmanSandbox)."""
    from icplay.sandbox.registry import get

    return get(TEST_ENGINE).sandbox_class  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def podman_client():
    """A client of Podman's API service (icplay starts one when none answers, and stops it at exit)."""
    try:
        from icplay.sandbox.registry import image_engine

        client = image_engine("podman").client()
    except Exception as exc:
        unavailable(f"Podman is not available: {exc}")
    return client


@pytest.fixture(scope="session")
def podman_images(podman_client) -> dict[str, str]:
    """icplay's Bash, Python and CTF images in Podman's storage, built if missing
    (``icplay images build --sandbox podman``); key -> tag."""
    from icplay.languages import all_specs
    from icplay.sandbox.images import IMAGES, ensure_image

    all_specs()   # the specs register their images
    for key in ("bash", "python", "ctf"):
        ensure_image(podman_client, key, lambda line: None)
    return {key: IMAGES[key].name for key in ("bash", "python", "ctf")}


@pytest.fixture(scope="session")
def bwrap_ready() -> None:
    from icplay.sandbox.bwrap import bwrap_problem

    problem = bwrap_problem()
    if problem:
        unavailable(problem)


@pytest.fixture(scope="session")
def shared_intercode() -> Path:
    path = SHARED / "intercode"
    if not path.is_dir():
        pytest.skip("../shared/intercode is not beside this checkout")
    return path


def _nl2bash_image(client: Any, shared_intercode: Path) -> str:
    """InterCode's first NL2Bash image in the engine of ``client``, built from ../shared if it is missing."""
    from icplay.bash.intercode_images import build_nl2bash_images, image_name
    from icplay.sandbox.images import image_exists

    name = image_name(1)
    if not image_exists(client, name):
        build_nl2bash_images(client, shared_intercode, lambda line: None, versions=(1,))
    return name


@pytest.fixture(scope="session")
def nl2bash_image(docker_client, shared_intercode) -> str:
    """InterCode's first NL2Bash image, built from ../shared if it is missing."""
    return _nl2bash_image(docker_client, shared_intercode)


@pytest.fixture(scope="session")
def podman_nl2bash_image(podman_client, shared_intercode) -> str:
    """The same image in Podman's storage (``--compat intercode`` on Podman)."""
    return _nl2bash_image(podman_client, shared_intercode)


@pytest.fixture(scope="session")
def shared_vectors() -> Path:
    path = SHARED / "vectors"
    if not path.is_dir():
        pytest.skip("../shared/vectors is not beside this checkout")
    return path


@pytest.fixture(autouse=True)
def icplay_home(tmp_path, monkeypatch):
    """Keep every test's trajectories and config out of the user's ~/.icplay."""
    monkeypatch.setenv("ICPLAY_HOME", str(tmp_path / "icplay-home"))
