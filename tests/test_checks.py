"""The static checks hold: ruff's rules (pyproject's [tool.ruff.lint]) over the whole tree and
mypy over the files its [tool.mypy] lists, with no baseline of ignored errors (a narrow
``# noqa: CODE`` or ``# type: ignore[code]`` says why on its line)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from ci_rules import unavailable

ROOT = Path(__file__).resolve().parents[1]


def tool(name: str) -> str:
    found = Path(sys.executable).parent / name
    if found.exists():
        return str(found)
    which = shutil.which(name)
    if which is None:
        unavailable(f"{name} is not installed (pip install -e '.[dev]')")
    return str(which)


def test_ruff_finds_nothing():
    done = subprocess.run([tool("ruff"), "check", "--no-cache", "icplay", "tests", "bench"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_ruff_catches_a_mistake(tmp_path):
    """The configured rules do fire: an undefined name and a bare lambda assignment."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "mistake.py").write_text("def f():\n    return undefined_name\n\n\ng = lambda: 1\n")
    done = subprocess.run([tool("ruff"), "check", "--no-cache", "--output-format", "concise", "mistake.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert "F821" in done.stdout and "E731" in done.stdout


def test_mypy_finds_nothing(tmp_path):
    """pyproject's [tool.mypy]: the core layers strict, the rest listed there with check_untyped_defs."""
    done = subprocess.run([tool("mypy"), "--cache-dir", str(tmp_path / "cache")], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Success" in done.stdout
