"""InterCode's four NL2Bash images, built from its own Dockerfile and set-up scripts.

InterCode builds one image per NL2Bash file system from ``docker/nl2bash.Dockerfile`` with
``ENV file_system_version=N`` edited by hand, ``FROM ubuntu:latest``, and ``COPY`` paths
relative to the checkout's parent. Here the Dockerfile is adapted, not rewritten: only
the base (when ``ubuntu:latest`` is not on the machine, the first local base that is),
the file-system version, the ``COPY`` paths (made relative to a context holding
``bash_scripts/`` and ``docker.gitignore``) and a final ``CMD ["/bin/bash"]`` change, so
the images hold what InterCode's hold: its packages, its ``/testbed`` trees, the root
committed to git with its ``.gitignore``.
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
from pathlib import Path
from typing import Any, Callable

from icplay.sandbox.images import image_exists, stream_build

VERSIONS = (1, 2, 3, 4)
IMAGE_PREFIX = "intercode-nl2bash-fs"
SOURCE_LABEL = "icplay.intercode-source"
BASE_LABEL = "icplay.intercode-base"
# Bases tried in order when the Dockerfile's own is not on the machine (no registry is
# assumed): every apt package nl2bash.Dockerfile installs exists on Debian and Ubuntu.
FALLBACK_BASES = ("ubuntu:latest", "ubuntu:24.04", "ubuntu:22.04", "debian:bookworm-slim", "debian:bookworm",
                  "debian:latest", "debian:stable-slim")


class IntercodeSourceError(ValueError):
    """The folder is not an InterCode checkout (or its docker/ copy)."""


def image_name(version: int) -> str:
    """The tag of file system ``version``'s image: ``intercode-nl2bash-fs1`` .. ``fs4``."""
    return f"{IMAGE_PREFIX}{version}"


def find_docker_dir(path: str | Path) -> Path:
    """The folder holding ``nl2bash.Dockerfile``: ``PATH/docker`` (a checkout, or
    ../shared/intercode) or ``PATH`` itself."""
    root = Path(path).expanduser()
    for folder in (root / "docker", root):
        if (folder / "nl2bash.Dockerfile").is_file():
            missing = [str(folder / f"bash_scripts/setup_nl2b_fs_{n}.sh") for n in VERSIONS
                       if not (folder / f"bash_scripts/setup_nl2b_fs_{n}.sh").is_file()]
            if not (folder / "docker.gitignore").is_file():
                missing.append(str(folder / "docker.gitignore"))
            if missing:
                raise IntercodeSourceError(f"{folder} lacks {', '.join(missing)}")
            return folder
    raise IntercodeSourceError(f"{root} is not an InterCode checkout: no docker/nl2bash.Dockerfile in it")


def adapt_dockerfile(text: str, version: int, base: str | None = None) -> str:
    """InterCode's nl2bash.Dockerfile for file system ``version``, built from a context
    holding ``bash_scripts/`` and ``docker.gitignore``; ``base`` replaces its FROM."""
    if version not in VERSIONS:
        raise ValueError(f"no NL2Bash file system {version} (1 to 4)")
    lines = []
    seen_version = seen_from = False
    for line in text.splitlines():
        stripped = line.strip()
        if re.match(r"(?i)FROM\s", stripped) and not seen_from:
            seen_from = True
            if base:
                line = f"FROM {base}"
        elif re.match(r"ENV\s+file_system_version\s*=", stripped):
            seen_version = True
            line = f"ENV file_system_version={version}"
        elif re.match(r"(?i)COPY\s", stripped):
            line = re.sub(r"(\s)(?:\.\./)*(?:docker/)", r"\1", line)
        lines.append(line)
    if not seen_from or not seen_version:
        raise IntercodeSourceError("nl2bash.Dockerfile has no FROM or no `ENV file_system_version=` line: "
                                   "not the Dockerfile icplay knows how to adapt")
    if not any(re.match(r"(?i)(CMD|ENTRYPOINT)\s", line.strip()) for line in lines):
        lines.append('CMD ["/bin/bash"]')
    return "\n".join(lines) + "\n"


def dockerfile_base(text: str) -> str:
    match = re.search(r"(?im)^\s*FROM\s+(\S+)", text)
    return match.group(1) if match else ""


def choose_base(wanted: str, present: Callable[[str], bool], base: str | None = None) -> str:
    """The base to build on: ``base`` if given, else the Dockerfile's own if the machine
    has it, else the first of FALLBACK_BASES the machine has."""
    if base:
        if not present(base):
            raise IntercodeSourceError(f"base image {base} is not on this machine (docker images lists them)")
        return base
    for candidate in (wanted, *FALLBACK_BASES):
        if candidate and present(candidate):
            return candidate
    raise IntercodeSourceError(f"none of {wanted}, {', '.join(FALLBACK_BASES)} is on this machine: "
                               "pull or load one, or name one with --base")


def build_context(folder: Path, dockerfile: str) -> bytes:
    """A tar of the build context: the adapted Dockerfile, bash_scripts/ and docker.gitignore."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        data = dockerfile.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))
        tar.add(folder / "docker.gitignore", arcname="docker.gitignore")
        for script in sorted((folder / "bash_scripts").iterdir()):
            if script.is_file():
                tar.add(script, arcname=f"bash_scripts/{script.name}")
    return out.getvalue()


def source_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in [folder / "nl2bash.Dockerfile", folder / "docker.gitignore",
                 *sorted((folder / "bash_scripts").glob("*.sh"))]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def build_nl2bash_images(client: Any, path: str | Path, progress: Callable[[str], None],
                         base: str | None = None, versions: tuple[int, ...] = VERSIONS) -> list[tuple[str, str]]:
    """Build ``intercode-nl2bash-fs1`` .. ``fs4`` from the InterCode sources at ``path``;
    returns (image, base) per image built. The shared layers (the apt install) build once."""
    folder = find_docker_dir(path)
    original = (folder / "nl2bash.Dockerfile").read_text()
    chosen = choose_base(dockerfile_base(original), lambda name: image_exists(client, name), base)
    if chosen != dockerfile_base(original):
        progress(f"{dockerfile_base(original)} is not on this machine: building on {chosen} instead")
    built = []
    for version in versions:
        name = image_name(version)
        context = build_context(folder, adapt_dockerfile(original, version, chosen))
        progress(f"building {name} (file system {version}) on {chosen} ...")
        stream_build(client, name, str(folder / "nl2bash.Dockerfile"), progress, fileobj=io.BytesIO(context),
                     custom_context=True, labels={SOURCE_LABEL: source_digest(folder), BASE_LABEL: chosen})
        built.append((name, chosen))
    return built
