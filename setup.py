"""Build hook: pack ``data/`` and ``docker/`` into the wheel as ``icplay/_bundle/bundle.tar.gz``.

Everything else is in pyproject.toml. Why an archive and not loose package data: the
Bash testbed has dotfiles (which package-data globs skip) and ``.py`` files (which pip
would byte-compile, adding ``__pycache__`` folders to the testbed and to the image).
The archive is reproducible: sorted entries, fixed owner and times, git's modes
(644, or 755 when executable). An editable install uses the checkout itself.
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
BUNDLED = ("data", "docker")


def bundle_bytes(root: Path = HERE) -> bytes:
    """``data/`` and ``docker/`` of ``root`` as a reproducible tar.gz."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for top in BUNDLED:
            paths = [root / top] + sorted((root / top).rglob("*"))
            for path in paths:
                if "__pycache__" in path.parts:
                    continue
                info = archive.gettarinfo(str(path), arcname=str(path.relative_to(root)))
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                if info.isdir():
                    info.mode = 0o755
                    archive.addfile(info)
                elif info.issym():
                    archive.addfile(info)
                else:
                    info.mode = 0o755 if os.access(path, os.X_OK) else 0o644
                    with open(path, "rb") as handle:
                        archive.addfile(info, handle)
    packed = io.BytesIO()
    with gzip.GzipFile(fileobj=packed, mode="wb", mtime=0) as zipped:
        zipped.write(raw.getvalue())
    return packed.getvalue()


class BuildPyWithBundle(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        if not all((HERE / top).is_dir() for top in BUNDLED):
            raise SystemExit("setup.py: data/ and docker/ are missing; build from a checkout or an sdist")
        target = Path(self.build_lib) / "icplay" / "_bundle"
        target.mkdir(parents=True, exist_ok=True)
        (target / "bundle.tar.gz").write_bytes(bundle_bytes())


if __name__ == "__main__":  # setuptools' build backend runs this file as __main__
    setup(cmdclass={"build_py": BuildPyWithBundle})
