"""Putting a host folder's files into a sandbox (a CTF task's assets): what both sandbox
kinds' ``put_files`` share. The copy is the solver's own: writable by the sandbox's user,
with the folders named in ``skip`` (solution notes) left out."""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
from pathlib import Path


def tar_of(folder: Path, skip: frozenset[str] = frozenset()) -> bytes:
    """The folder's files as a tar whose members are relative to it, owned by root and
    writable by their owner, without any folder named in ``skip``."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
            if set(Path(info.name).parts) & skip:
                return None
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mode |= 0o200   # the solver may change its copy (InterCode's shared assets are read-only)
            return info

        tar.add(str(folder), arcname=".", filter=keep)
    return out.getvalue()


def copy_into(source: Path, target: Path, skip: frozenset[str] = frozenset()) -> None:
    """Copy ``source`` into the host folder ``target`` (a bwrap root's), writable by its owner."""
    shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True,
                    ignore=lambda _dir, names: [n for n in names if n in skip])
    subprocess.run(["chmod", "-R", "u+w", str(target)], check=True)
