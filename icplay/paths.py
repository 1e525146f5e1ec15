"""Where icplay finds its bundled data, InterCode's data and its own saved files.

The bundled files (``data/``: task sets, the Bash testbed, the SQL databases; ``docker/``:
the image Dockerfiles) live at the top of a source checkout. An installed wheel carries
them as one archive, ``icplay/_bundle/bundle.tar.gz`` (see ``setup.py``), unpacked once
into a cache folder: an archive keeps file modes and dotfiles, and pip cannot add
``__pycache__`` folders to the testbed as it would to loose ``.py`` files. Either way
``repo_root()`` is a folder holding ``data/`` and ``docker/`` with the same content, so
images built from an installed package carry the same input digest as from a checkout.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
import threading
from pathlib import Path

BUNDLE = Path(__file__).resolve().parent / "_bundle" / "bundle.tar.gz"
_unpack_lock = threading.Lock()


def checkout_root() -> Path | None:
    """The source checkout this package runs from (editable install, ``python -m`` in
    the repository), or None for an installed wheel."""
    folder = Path(__file__).resolve().parents[1]
    # site-packages holds a docker/ (the Docker SDK), and maybe a stray data/: look for ours
    if (folder / "docker" / "bash.Dockerfile").is_file() and (folder / "data" / "sql").is_dir():
        return folder
    return None


def repo_root() -> Path:
    """The folder holding ``docker/`` and ``data/``: $ICPLAY_ROOT (a development override),
    else the source checkout, else the wheel's bundle unpacked into the cache."""
    env = os.environ.get("ICPLAY_ROOT")
    if env:
        return Path(env).resolve()
    checkout = checkout_root()
    if checkout is not None:
        return checkout
    if BUNDLE.is_file():
        return unpacked_bundle()
    return Path(__file__).resolve().parents[1]  # nothing found: errors name this folder


def cache_dir() -> Path:
    """$ICPLAY_CACHE, else $XDG_CACHE_HOME/icplay, else ~/.cache/icplay."""
    env = os.environ.get("ICPLAY_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "icplay"


def unpacked_bundle() -> Path:
    """The wheel's bundle unpacked (once per bundle content) under ``cache_dir()``.

    Unpacked into a temporary folder beside the target and renamed into place, so that
    processes starting together never see half a bundle."""
    content = hashlib.sha256(BUNDLE.read_bytes()).hexdigest()[:16]
    target = cache_dir() / f"bundle-{content}"
    if (target / "data").is_dir():
        return target
    with _unpack_lock:
        if (target / "data").is_dir():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=".bundle-", dir=target.parent))
        try:
            with tarfile.open(BUNDLE) as archive:
                if hasattr(tarfile, "data_filter"):
                    archive.extractall(scratch, filter="fully_trusted")
                else:  # pragma: no cover - Python < 3.12 without the filter backport
                    archive.extractall(scratch)
            try:
                os.rename(scratch, target)
            except OSError:  # another process won the race: its copy is the same
                if not (target / "data").is_dir():
                    raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return target


def data_dir() -> Path:
    return repo_root() / "data"


def intercode_dir() -> Path | None:
    """InterCode's data files: $ICPLAY_INTERCODE, else ``../shared/intercode`` beside the
    repository (or beside $ICPLAY_ROOT)."""
    env = os.environ.get("ICPLAY_INTERCODE")
    candidates = [Path(env)] if env else []
    root = Path(os.environ["ICPLAY_ROOT"]).resolve() if os.environ.get("ICPLAY_ROOT") else checkout_root()
    if root is not None:
        candidates.append(root.parent / "shared" / "intercode")
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return None


def home_dir() -> Path:
    """Where trajectories, sessions and config live: $ICPLAY_HOME, else ~/.icplay."""
    return Path(os.environ.get("ICPLAY_HOME") or Path.home() / ".icplay")


def own_paths() -> list[Path]:
    """Every folder of icplay's own that may hold golds, solutions, tests or recordings:
    the installed package (with its bundle), the bundled data's folder, the cache, icplay's
    home, InterCode's data. A sandbox that binds host folders (bwrap's /usr) hides these."""
    found: list[Path] = [Path(__file__).resolve().parent]
    for where in (lambda: repo_root(), cache_dir, home_dir, intercode_dir):
        try:
            folder = where()
        except (OSError, RuntimeError, tarfile.TarError):   # no home, a bundle that cannot be unpacked: no folder to hide
            continue
        if folder is not None:
            found.append(Path(folder))
    if os.environ.get("ICPLAY_ROOT"):
        found.append(Path(os.environ["ICPLAY_ROOT"]))
    resolved: list[Path] = []
    for folder in found:
        for form in (Path(os.path.abspath(folder)), Path(os.path.realpath(folder))):
            if form not in resolved:
                resolved.append(form)
    return resolved
